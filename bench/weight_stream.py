"""The floor that streaming the expert weights puts under the capacity sweep.

Issue 23 item 4 holds a V-MoE's time relative to its dense twin within 10
points of its executed-FLOPs ratio. At few images per forward that ratio
is not reachable on every host: every expert that holds a row has its f32
weights read from memory once per forward (they do not fit in any cache),
and at small C those bytes take longer than the experts' arithmetic.

The floor assumes the best case: every part of the V-MoE runs at the dense
twin's FLOP rate, and the weight stream overlaps the experts' arithmetic
completely. Per image, with t_dense the dense twin's time, F_dense its
FLOPs, F_experts the expert GEMMs' FLOPs of the blocks that stream their
weights, and W the bytes of those weights per forward of `batch` images
read at the host's read bandwidth R (measured in the same run):

    stream  = W / R / batch
    compute = t_dense * F_experts / F_dense
    time   >= t_dense * FLOPs ratio + max(0, stream - compute)
    floor   = 100 * max(0, stream - compute) / t_dense   (points)

W counts the experts that hold at least one row in that forward, from the
executable's --stats run on each routing group's images alone (groups
route independently, so a forward's experts are the union over its
groups), averaged over the forwards. A class-token head's last MoE block
runs the class tokens' choices only and is left out, which makes W, and
the floor, lower bounds. Experts are the two-GEMM f32 MLPs of
bench/vit_flops.py: w1 [D, He], b1 [He], w2 [He, D], b2 [D].
"""

from vmoe_ref.model import description_moe_blocks

F32_BYTES = 4


def expert_bytes(desc):
    """Bytes of one expert's f32 weights and biases."""
    D = desc["width"]
    He = desc["moe"].get("mlp_dim", desc["mlp_dim"])
    return F32_BYTES * (2 * D * He + He + D)


def streamed_blocks(desc):
    """Indices (into the MoE blocks, in block order) of the blocks whose
    experts run every token's kept choices."""
    blocks = description_moe_blocks(desc)
    routing = desc["moe"].get("routing")
    if (desc["head"] == "token" and blocks and blocks[-1] == desc["depth"] - 1
            and routing not in ("expert_choice", "soft")):
        return list(range(len(blocks) - 1))
    return list(range(len(blocks)))


def experts_per_forward(group_kept, groups_per_forward, blocks):
    """Per block in `blocks`, the mean over forwards of the experts that
    hold a row. group_kept[g][b][e]: rows routing group g kept in expert e
    of MoE block b; a forward runs `groups_per_forward` consecutive
    groups."""
    if groups_per_forward < 1 or len(group_kept) % groups_per_forward:
        raise ValueError(f"{len(group_kept)} groups do not split into "
                         f"forwards of {groups_per_forward}")
    forwards = [group_kept[i:i + groups_per_forward]
                for i in range(0, len(group_kept), groups_per_forward)]
    return [sum(sum(1 for counts in zip(*(g[b] for g in forward))
                    if sum(counts) > 0) for forward in forwards)
            / len(forwards) for b in blocks]


def stream_floor(desc, kept_per_image, experts, batch, read_gb_per_s,
                 dense_ms_per_image, dense_flops_per_image):
    """The floor of one sweep cell (module doc): a dict with the points and
    what they come from. kept_per_image: per MoE block, kept choices per
    image (--stats); experts: per block of streamed_blocks, the experts
    used per forward of `batch` images (experts_per_forward)."""
    blocks = description_moe_blocks(desc)
    streamed = streamed_blocks(desc)
    if len(kept_per_image) != len(blocks) or len(experts) != len(streamed):
        raise ValueError(f"{len(blocks)} MoE blocks ({len(streamed)} "
                         f"streamed), given kept choices for "
                         f"{len(kept_per_image)} and experts for "
                         f"{len(experts)}")
    if read_gb_per_s <= 0 or dense_ms_per_image <= 0 or batch < 1:
        raise ValueError("bandwidth, dense time and batch must be positive")
    D = desc["width"]
    He = desc["moe"].get("mlp_dim", desc["mlp_dim"])
    expert_flops = sum(4 * D * He * kept_per_image[i] for i in streamed)
    weight_bytes = sum(experts) * expert_bytes(desc)
    stream_ms = weight_bytes / (read_gb_per_s * 1e9) * 1e3 / batch
    compute_ms = dense_ms_per_image * expert_flops / dense_flops_per_image
    return {"experts_per_forward": list(experts),
            "weight_bytes_per_forward": weight_bytes,
            "read_gb_per_s": read_gb_per_s,
            "stream_ms_per_image": stream_ms,
            "expert_compute_ms_per_image": compute_ms,
            "floor_points": 100 * max(0.0, stream_ms - compute_ms)
            / dense_ms_per_image}
