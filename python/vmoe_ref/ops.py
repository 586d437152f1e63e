"""PyTorch reference semantics of the vmoe ops (SPEC §3 and §4).

Every function follows the specification literally, favouring clarity over
speed: tie rules are implemented with stable sorts, float sums whose order
the spec fixes are written as explicit loops, and dispatch walks tokens one
by one. Tensors are torch tensors: float32 activations and weights, int32
expert ids, slots and orders.
"""

import math

import torch
import torch.nn.functional as F

ROUTE_ORDERS = ("softmax_topk", "topk_softmax")
PRIORITY_SCORES = ("max", "sum_topk")
CAPACITY_RULES = ("round", "ceil")
ACTIVATIONS = ("gelu_tanh", "gelu_erf", "relu", "silu")

# The C++ capacity rule clamps absurd ratios here before converting to int64.
_CAPACITY_LIMIT = 2.0 ** 62


def _descending_indices(values):
    """Indices sorting the last dim of `values` by descending value.

    Equal values keep their index order (lower index first): torch.sort with
    stable=True guarantees it, and test_ops checks it by brute force.
    """
    return torch.sort(values, dim=-1, descending=True, stable=True).indices


def _sequential_sum(values):
    """Sum of the last dim of `values`, added from index 0 upward."""
    total = values[..., 0]
    for i in range(1, values.shape[-1]):
        total = total + values[..., i]
    return total


def route(x, router, k, order="softmax_topk", normalize=False, noise=None,
          noise_std=None):
    """vmoe.route: x [G,S,D], router [D,E] -> gates [G,S,E], ids, weights.

    ids [G,S,k] (int32) are the top-k experts, ties to the lower expert index.
    softmax_topk: top-k of the gates; weights are the raw chosen gates.
    topk_softmax: top-k of the logits; weights are a softmax over the k
    chosen logits. Gates are the full softmax in both orders. normalize
    divides the weights by their sum (added from choice 0 upward).
    """
    if order not in ROUTE_ORDERS:
        raise ValueError(f"unknown route order {order!r}")
    num_experts = router.shape[1]
    if not 1 <= k <= num_experts:
        raise ValueError(f"k ({k}) must be in [1, {num_experts}]")
    if (noise is None) != (noise_std is None):
        raise ValueError("noise and noise_std must be given together")
    logits = torch.matmul(x, router)
    if noise is not None:
        logits = logits + noise * (noise_std / num_experts)
    gates = torch.softmax(logits, dim=-1)
    if order == "softmax_topk":
        ids = _descending_indices(gates)[..., :k]
        weights = torch.gather(gates, -1, ids)
    else:
        ids = _descending_indices(logits)[..., :k]
        weights = torch.softmax(torch.gather(logits, -1, ids), dim=-1)
    if normalize:
        weights = weights / _sequential_sum(weights).unsqueeze(-1)
    return gates, ids.to(torch.int32), weights


def bpr_sort(gates, score="max", k=None):
    """vmoe.bpr_sort: gates [G,S,N] -> order [G,S] (int32).

    Per group, token indices by descending priority score; equal scores keep
    token order. max: the largest value of the row. sum_topk: the sum of the
    k largest values (all N when k is None), added from the largest down.
    """
    if score == "max":
        scores = gates.max(dim=-1).values
    elif score == "sum_topk":
        n = gates.shape[-1]
        k = n if k is None else k
        if not 1 <= k <= n:
            raise ValueError(f"k ({k}) must be in [1, {n}]")
        largest_first = torch.sort(gates, dim=-1, descending=True).values
        scores = _sequential_sum(largest_first[..., :k])
    else:
        raise ValueError(f"unknown priority score {score!r}")
    return _descending_indices(scores).to(torch.int32)


def capacity(k, S, C, E, rule="round", multiple_of=1):
    """Per-expert capacity B = rule(k*S*C/E), raised to a multiple_of.

    The product is evaluated left to right in double precision. round is
    nearest with ties to even (Python's round on floats). Like the C++ rule
    (include/vmoe/Dialect/VMoE/IR/Capacity.h), a non-positive or NaN result
    is 0; callers that size buffers use sized_capacity, which rejects B < 1.
    """
    if rule not in CAPACITY_RULES:
        raise ValueError(f"unknown capacity rule {rule!r}")
    if multiple_of < 1:
        raise ValueError(f"multiple_of must be >= 1, got {multiple_of}")
    raw = k * S * float(C) / E
    if not raw > 0:
        return 0
    raw = min(raw, _CAPACITY_LIMIT)
    b = math.ceil(raw) if rule == "ceil" else round(raw)
    if b % multiple_of:
        b += multiple_of - b % multiple_of
    return b


def sized_capacity(k, S, C, E, rule="round", multiple_of=1):
    """capacity() for buffer sizing: raises ValueError when B < 1."""
    b = capacity(k, S, C, E, rule, multiple_of)
    if b < 1:
        raw = k * S * float(C) / E
        raise ValueError(f"capacity rounds to 0 (k*S*C/E = {k}*{S}*{C}/{E} "
                         f"= {raw!r}); raise capacity_ratio")
    return b


def runtime_capacity(k, S, C, E, max_capacity, rule="round", multiple_of=1):
    """vmoe.capacity: capacity() clamped to [0, max_capacity]."""
    return min(max(capacity(k, S, C, E, rule, multiple_of), 0), max_capacity)


def dispatch(x, ids, order, B, num_experts, runtime_capacity=None,
             num_valid=None):
    """vmoe.dispatch: x [G,S,D], ids [G,S,k] -> buffers [E,G,B,D], slots.

    Per group, choice by choice (every top-1 before any top-2), tokens in
    priority order (`order` [G,S], or token order when None): a choice takes
    the next free slot of its expert while the expert has fewer than the
    effective capacity min(runtime_capacity, B) tokens, else it is dropped
    (slot -1). Expert ids outside [0, E) are dropped. Unfilled rows are zero.
    With `num_valid` (the `valid` operand), token t of group g is routed
    only if g*S + t < num_valid; the others take no slot (slot -1).
    """
    G, S, D = x.shape
    k = ids.shape[-1]
    limit = B if runtime_capacity is None else min(runtime_capacity, B)
    ids_list = ids.tolist()
    order_list = (order.tolist() if order is not None
                  else [list(range(S))] * G)
    slots = [[[-1] * k for _ in range(S)] for _ in range(G)]
    placed = []  # (expert, group, slot, token) of every kept choice
    for g in range(G):
        fill = [0] * num_experts
        for i in range(k):
            for t in order_list[g]:
                if num_valid is not None and g * S + t >= num_valid:
                    continue
                e = ids_list[g][t][i]
                if 0 <= e < num_experts and fill[e] < limit:
                    slots[g][t][i] = fill[e]
                    placed.append((e, g, fill[e], t))
                    fill[e] += 1
    buffers = torch.zeros(num_experts, G, B, D, dtype=x.dtype)
    if placed:
        e, g, s, t = (torch.tensor(column) for column in zip(*placed))
        buffers[e, g, s] = x[g, t]
    return buffers, torch.tensor(slots, dtype=torch.int32).reshape(G, S, k)


def activate(v, activation):
    """The expert activation function named by `activation`."""
    if activation == "gelu_tanh":
        return F.gelu(v, approximate="tanh")
    if activation == "gelu_erf":
        return F.gelu(v, approximate="none")
    if activation == "relu":
        return torch.relu(v)
    if activation == "silu":
        return v * torch.sigmoid(v)
    raise ValueError(f"unknown activation {activation!r}")


def round_bf16(x):
    """The f32 values of x rounded to bf16 (nearest even)."""
    return x.to(torch.bfloat16).to(torch.float32)


def expert_ffn(buffers, w1, b1, w2, b2, activation="gelu_tanh",
               precision="f32"):
    """vmoe.expert_ffn: y[e] = act(buf[e] @ w1[e] + b1[e]) @ w2[e] + b2[e].

    precision "bf16" is what `vmoe-compile --precision=bf16` computes (SPEC
    §9): both GEMMs multiply bf16-rounded weights by bf16-rounded rows
    (exact products) and accumulate in f32; biases and activation stay f32.
    """
    E, G, B, D = buffers.shape
    rows = buffers.reshape(E, G * B, D)
    rnd = round_bf16 if precision == "bf16" else (lambda t: t)
    hidden = activate(torch.bmm(rnd(rows), rnd(w1)) + b1[:, None, :],
                      activation)
    y = torch.bmm(rnd(hidden), rnd(w2)) + b2[:, None, :]
    return y.reshape(E, G, B, D)


def combine(y, ids, slots, weights):
    """vmoe.combine: y [E,G,B,D] -> out [G,S,D].

    out[g,t] = sum over kept choices i (slot >= 0), in choice order, of
    weights[g,t,i] * y[ids[g,t,i], g, slots[g,t,i]]. A token dropped by all
    its experts gets 0.
    """
    E, G, _, D = y.shape
    S, k = ids.shape[1], ids.shape[2]
    groups = torch.arange(G)[:, None].expand(G, S)
    out = torch.zeros(G, S, D, dtype=y.dtype)
    for i in range(k):
        e = ids[..., i].long()
        s = slots[..., i].long()
        kept = ((s >= 0) & (e >= 0) & (e < E)).unsqueeze(-1)
        rows = y[e.clamp(0, E - 1), groups, s.clamp(min=0)]
        contribution = weights[..., i:i + 1] * rows
        out = out + torch.where(kept, contribution,
                                torch.zeros_like(contribution))
    return out


def routing_stats(ids, slots, num_experts, valid=None):
    """Routing statistics of one layer.

    Returns a dict: `fill` (int64 [E], kept choices per expert summed over
    groups) and `dropped` (the number of dropped choices). With `valid`
    ([G,S] bool), the choices of masked tokens count in neither.
    """
    kept = slots >= 0
    fill = torch.bincount(ids[kept].long(), minlength=num_experts)
    lost = ~kept
    if valid is not None:
        lost = lost & valid.unsqueeze(-1)
    return {"fill": fill, "dropped": int(lost.sum())}


def moe_layer(x, router, w1, b1, w2, b2, *, k, num_experts, capacity_ratio,
              routing="vanilla", score="max", capacity_rule="round",
              multiple_of=1, activation="gelu_tanh", order="softmax_topk",
              normalize=False, runtime_capacity=None, num_valid=None):
    """One sparse MoE layer: route, [bpr_sort], dispatch, expert_ffn, combine.

    B is sized from capacity_ratio (ValueError if it rounds to 0);
    runtime_capacity (an int) lowers the effective capacity as the
    `capacity` operand of vmoe.dispatch does; num_valid masks tokens out of
    routing as its `valid` operand does. Returns a dict with gates, ids,
    weights, order (None for vanilla routing), slots, buffers, y, out and B.
    """
    if router.shape[1] != num_experts:
        raise ValueError(f"router has {router.shape[1]} experts, "
                         f"expected {num_experts}")
    S = x.shape[1]
    gates, ids, weights = route(x, router, k, order=order,
                                normalize=normalize)
    if routing == "vanilla":
        priority = None
    elif routing == "bpr":
        priority = bpr_sort(gates, score,
                            k if score == "sum_topk" else None)
    else:
        raise ValueError(f"unknown routing {routing!r}")
    B = sized_capacity(k, S, capacity_ratio, num_experts, capacity_rule,
                       multiple_of)
    buffers, slots = dispatch(x, ids, priority, B, num_experts,
                              runtime_capacity, num_valid)
    y = expert_ffn(buffers, w1, b1, w2, b2, activation)
    out = combine(y, ids, slots, weights)
    return {"gates": gates, "ids": ids, "weights": weights,
            "order": priority, "slots": slots, "buffers": buffers, "y": y,
            "out": out, "B": B}
