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

W counts only experts that must hold a row: a block keeps f rows per
forward in E experts of at most B * groups rows each, so at least
ceil(f / (B * groups)) experts are used (every expert at small C, where
they are full). A class-token head's last MoE block runs the class tokens'
choices only and is left out. Both make W, and the floor, lower bounds.
Experts are the two-GEMM f32 MLPs of bench/vit_flops.py: w1 [D, He], b1
[He], w2 [He, D], b2 [D].
"""

import math

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


def used_experts(kept_per_forward, rows_per_expert, experts):
    """The fewest experts that hold `kept_per_forward` rows when each
    holds at most `rows_per_expert`."""
    if kept_per_forward <= 0:
        return 0
    if rows_per_expert <= 0:
        raise ValueError("rows_per_expert must be positive")
    return min(experts, math.ceil(kept_per_forward / rows_per_expert))


def stream_floor(desc, kept_per_image, capacity, batch, groups,
                 read_gb_per_s, dense_ms_per_image, dense_flops_per_image):
    """The floor of one sweep cell (module doc): a dict with the points and
    what they come from. kept_per_image: per MoE block, kept choices per
    image (--stats); capacity: B; groups: routing groups per forward."""
    blocks = description_moe_blocks(desc)
    if len(kept_per_image) != len(blocks):
        raise ValueError(f"{len(blocks)} MoE blocks, kept choices given for "
                         f"{len(kept_per_image)}")
    if read_gb_per_s <= 0 or dense_ms_per_image <= 0 or batch < 1:
        raise ValueError("bandwidth, dense time and batch must be positive")
    D = desc["width"]
    He = desc["moe"].get("mlp_dim", desc["mlp_dim"])
    E = desc["moe"]["num_experts"]
    experts, expert_flops = [], 0.0
    for i in streamed_blocks(desc):
        # Rounded: kept_per_image is a mean over the images of the run.
        kept = round(kept_per_image[i] * batch)
        experts.append(used_experts(kept, capacity * groups, E))
        expert_flops += 4 * D * He * kept_per_image[i]
    weight_bytes = sum(experts) * expert_bytes(desc)
    stream_ms = weight_bytes / (read_gb_per_s * 1e9) * 1e3 / batch
    compute_ms = dense_ms_per_image * expert_flops / dense_flops_per_image
    return {"experts_per_forward": experts,
            "weight_bytes_per_forward": weight_bytes,
            "read_gb_per_s": read_gb_per_s,
            "stream_ms_per_image": stream_ms,
            "expert_compute_ms_per_image": compute_ms,
            "floor_points": 100 * max(0.0, stream_ms - compute_ms)
            / dense_ms_per_image}
