"""Executed GEMM FLOPs of a ViT / V-MoE description per image.

FLOPs = 2 per multiply-add of the matrix products the model executes;
layer norms, softmax, gelu, routing's sort and slot counting, and the
residual adds are left out (under 1% of the S/32 model). Per image, with
P patches, T tokens (P + 1 with a class token), D width, H the dense MLP
width, He the experts' hidden width, E experts, c channels and patch
ph x pw, classes K, representation size R (0: none):

    embedding        2·P·(c·ph·pw)·D
    attention        8·T·D² + 4·T²·D   per block (qkv 6·T·D², scores
                                        2·T²·D, mixing 2·T²·D, out 2·T·D²)
    dense MLP        4·T·D·H           per dense block
    MoE layer        2·T·D·E + 4·D·He·f per MoE block: the router, and the
                                        two expert GEMMs on the f filled
                                        slots per image (kept choices)
    head             2·R·D + 2·R·K  (2·D·K without pre-logits)

f is what the compiled model executes (it skips unfilled slots): the kept
choices the executable's --stats prints for the run, over the images; at
most min(k·T, E·B·G/N) (every choice kept, or every slot full). The dense
twin (the description without "moe") has only dense MLP blocks.

With a class-token head vmoe-compile computes only the class token's row
in the last block (docs/ModelFormat.md §2; unless --all-token-rows), and
so does this count by default (all_token_rows=False): a dense last block
has one query (its projection 2·D², scores and mixing 2·T·D each, out
2·D², MLP 4·D·H; keys and values 4·T·D² as ever); an
(token choice) last block keeps its full attention and router but runs the experts
on the class token's kept choices only, counted as k (an upper bound:
--stats does not single them out). all_token_rows=True counts every row,
as a graph that computes them all (the static ONNX module) executes.
"""

from vmoe_ref.model import description_moe_blocks, tokens_per_image


def flops_per_image(desc, kept_per_image=None, all_token_rows=False):
    """Executed GEMM FLOPs per image of a parsed description.

    kept_per_image: per MoE block (in block order), the mean number of kept
    choices (filled slots) per image; required when the description has
    MoE blocks. all_token_rows: count every row of the last block (see the
    module doc) instead of the class token's only."""
    if desc["head"] == "map":
        raise ValueError("the FLOP count does not cover the MAP head")
    D, H, depth = desc["width"], desc["mlp_dim"], desc["depth"]
    T = tokens_per_image(desc)
    ph, pw = desc["patch_size"]
    c = desc["image"]["channels"]
    P = (desc["image"]["height"] // ph) * (desc["image"]["width"] // pw)
    moe_blocks = description_moe_blocks(desc)
    if len(kept_per_image or []) != len(moe_blocks):
        raise ValueError(f"{len(moe_blocks)} MoE blocks, kept choices given "
                         f"for {len(kept_per_image or [])}")
    total = 2 * P * (c * ph * pw) * D
    total += depth * (8 * T * D * D + 4 * T * T * D)
    total += (depth - len(moe_blocks)) * 4 * T * D * H
    if moe_blocks:
        moe = desc["moe"]
        He, E = moe.get("mlp_dim", H), moe["num_experts"]
        total += sum(2 * T * D * E + 4 * D * He * kept
                     for kept in kept_per_image)
    if desc["head"] == "token" and not all_token_rows:
        last = depth - 1
        if last in moe_blocks and desc["moe"].get("routing") in (
                "expert_choice", "soft"):
            pass  # These families compute every row.
        elif last in moe_blocks:
            # The experts of the last block on the class token's choices.
            total -= 4 * D * He * (kept_per_image[-1] - moe["k"])
        else:
            # One query: its projection, scores, mixing, out projection
            # and MLP of 1 row.
            total -= (4 * T * T * D - 4 * T * D) + 4 * (T - 1) * D * D
            total -= 4 * (T - 1) * D * H
    R, K = desc.get("representation_size") or 0, desc["classes"]
    total += 2 * R * D + 2 * R * K if R else 2 * D * K
    return total
