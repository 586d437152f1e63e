"""PyTorch reference of expert choice routing (SPEC §8).

`vmoe.expert_choice` and `vmoe.expert_choice_experts`, literally: per group
and expert, a stable sort of the expert's gate column picks its top-B
tokens (ties to the lower token index); a token may be taken by several
experts or by none; the output adds gate * expert output over the experts
that took a token, from expert 0 up.
"""

import torch

from . import ops


def expert_choice_capacity(S, C, E, rule="round", multiple_of=1):
    """B = rule(S*C/E) raised to a multiple_of (SPEC §4 without k); 0 when
    it rounds to 0, like ops.capacity."""
    return ops.capacity(1, S, C, E, rule, multiple_of)


def expert_choice(x, router, B, runtime_capacity=None, valid=None):
    """vmoe.expert_choice: x [G,S,D], router [D,E] -> gates [G,S,E],
    token_ids [E,G,B] (int32), slots [G,S,E] (int32).

    Expert e of group g takes the b = min(B, S, runtime_capacity) tokens
    with the largest gates[g, :, e], in descending order (equal gates: the
    lower token index first). token_ids[e, g, s] is the token in slot s
    (-1 for s >= b); slots[g, t, e] the slot of token t at e (-1 if none).
    `valid` ([G,S] bool, None = all) masks padding tokens out: they are
    never taken, and an expert left without candidates leaves its last
    slots empty.
    """
    G, S, _ = x.shape
    E = router.shape[1]
    gates = torch.softmax(torch.matmul(x, router), dim=-1)
    b = min(B, S) if runtime_capacity is None else \
        max(0, min(B, S, runtime_capacity))
    # [G, E, b]: each expert's column, tokens by descending gate, stable.
    key = gates.transpose(1, 2)
    if valid is not None:  # padding ranks last, then is cut below
        key = torch.where(valid.unsqueeze(1), key,
                          torch.full_like(key, -float("inf")))
    ranked = ops._descending_indices(key)[..., :b]
    chosen = torch.arange(b, dtype=torch.int32).view(1, 1, b) \
        .expand(G, E, b).contiguous()
    ranked_ids = ranked
    if valid is not None:
        taken = torch.gather(valid.unsqueeze(1).expand(G, E, S), 2, ranked)
        chosen = torch.where(taken, chosen, torch.full_like(chosen, -1))
        ranked_ids = torch.where(taken, ranked, torch.full_like(ranked, -1))
    token_ids = torch.full((E, G, B), -1, dtype=torch.int32)
    token_ids[:, :, :b] = ranked_ids.permute(1, 0, 2).to(torch.int32)
    by_expert = torch.full((G, E, S), -1, dtype=torch.int32)
    by_expert.scatter_(2, ranked, chosen)
    slots = by_expert.transpose(1, 2).contiguous()
    return gates, token_ids, slots


def expert_choice_experts(x, gates, token_ids, slots, w1, b1, w2, b2,
                          activation="gelu_tanh"):
    """vmoe.expert_choice_experts -> out [G,S,D].

    The expert MLP of e runs on the tokens it took (gathered into
    [E,G,B,D] buffers; unfilled rows are zero and unused); then
    out[g,t] = sum over e ascending with slots[g,t,e] >= 0 of
    gates[g,t,e] * y[e, g, slots[g,t,e]].
    """
    E, G, B = token_ids.shape
    S, D = x.shape[1], x.shape[2]
    filled = token_ids >= 0
    groups = torch.arange(G).view(1, G, 1).expand(E, G, B)
    rows = x[groups, token_ids.long().clamp(min=0)]
    buffers = torch.where(filled.unsqueeze(-1), rows, torch.zeros_like(rows))
    y = ops.expert_ffn(buffers, w1, b1, w2, b2, activation)
    out = torch.zeros(G, S, D, dtype=x.dtype)
    group_index = torch.arange(G)[:, None].expand(G, S)
    for e in range(E):
        s = slots[..., e].long()
        taken = (s >= 0).unsqueeze(-1)
        contribution = gates[..., e:e + 1] * y[e, group_index, s.clamp(min=0)]
        out = out + torch.where(taken, contribution,
                                torch.zeros_like(contribution))
    return out, buffers, y


def experts_per_token(slots):
    """[G,S] int64: how many experts took each token."""
    return (slots >= 0).sum(-1)


def expert_choice_stats(slots, valid=None):
    """Routing statistics of one expert choice layer: dict with `histogram`
    (int64 [E + 1]: tokens taken by exactly j experts, j = 0..E, summed
    over groups; padding tokens, False in `valid`, not counted) and
    `untaken` (= histogram[0])."""
    E = slots.shape[-1]
    counts = experts_per_token(slots)
    if valid is not None:
        counts = counts[valid]
    histogram = torch.bincount(counts.reshape(-1), minlength=E + 1)
    return {"histogram": histogram, "untaken": int(histogram[0])}


def expert_choice_layer(x, router, w1, b1, w2, b2, *, num_experts,
                        capacity_ratio, capacity_rule="round", multiple_of=1,
                        activation="gelu_tanh", runtime_capacity=None,
                        valid=None, capacity=None):
    """One expert choice layer: B sized from capacity_ratio (ValueError if
    it rounds to 0), or the fixed `capacity` (moe.capacity: the ratio is
    not used), routing, experts. runtime_capacity (an int) lowers the
    effective B. Returns a dict: gates, token_ids, slots, buffers, y, out,
    B."""
    if router.shape[1] != num_experts:
        raise ValueError(f"router has {router.shape[1]} experts, "
                         f"expected {num_experts}")
    S = x.shape[1]
    B = capacity if capacity is not None else ops.sized_capacity(
        1, S, capacity_ratio, num_experts, capacity_rule, multiple_of)
    gates, token_ids, slots = expert_choice(x, router, B, runtime_capacity,
                                            valid)
    out, buffers, y = expert_choice_experts(x, gates, token_ids, slots, w1,
                                            b1, w2, b2, activation)
    return {"gates": gates, "token_ids": token_ids, "slots": slots,
            "buffers": buffers, "y": y, "out": out, "B": B}
