"""PyTorch reference of Soft MoE (SPEC §8), `vmoe.soft_moe`.

Follows Google's reference implementation (vmoe/projects/soft_moe): tokens
and slot parameters are L2-normalized (times the reciprocal square root of
the sum of squares plus 1e-6), `scale` multiplies whichever of the two has
fewer elements, dispatch weights are a softmax over the tokens of a group
(per slot), combine weights a softmax over all E*P slots (per token).
"""

import torch

from . import ops

EPSILON = 1e-6


def l2_normalize(v, dim):
    """v * rsqrt(sum(v^2, dim) + 1e-6)."""
    return v * torch.rsqrt(v.square().sum(dim, keepdim=True) + EPSILON)


def default_slots(S, E):
    """P = round(S * 1.0 / E), ties to even (SPEC §8); 0 when it rounds to
    0 (the description then needs an explicit slots_per_expert)."""
    return ops.capacity(1, S, 1.0, E)


def soft_logits(x, phi, scale):
    """logits [G,S,E,P] of x [G,S,D] and phi [D,E,P] (scale: 0-d)."""
    xn = l2_normalize(x, -1)
    pn = l2_normalize(phi, 0)
    if xn.numel() < pn.numel():
        xn = xn * scale
    else:
        pn = pn * scale
    return torch.einsum("gmd,dnp->gmnp", xn, pn)


def soft_moe(x, phi, scale, w1, b1, w2, b2, activation="gelu_tanh",
             valid=None):
    """vmoe.soft_moe: x [G,S,D] -> dict with logits [G,S,E,P], dispatch
    [G,S,E,P] (softmax over S), combine [G,S,E,P] (softmax over E*P),
    slots_in [E,G,P,D], slots_out [E,G,P,D] and out [G,S,D]. `valid`
    ([G,S] bool, None = all) masks padding tokens out of the dispatch
    softmax (weight 0; a group without valid tokens dispatches nothing)."""
    G, S, D = x.shape
    _, E, P = phi.shape
    logits = soft_logits(x, phi, scale)
    if valid is None:
        dispatch = torch.softmax(logits, dim=1)
    else:
        mask = valid.view(G, S, 1, 1)
        masked = torch.where(mask, logits,
                             torch.full_like(logits, -float("inf")))
        dispatch = torch.softmax(masked, dim=1)
        dispatch = torch.where(mask, dispatch, torch.zeros_like(dispatch))
    combine = torch.softmax(logits.reshape(G, S, E * P), dim=-1)
    slots_in = torch.einsum("gmnp,gmd->ngpd", dispatch, x)
    slots_out = ops.expert_ffn(slots_in, w1, b1, w2, b2, activation)
    out = torch.einsum("gmj,gjd->gmd", combine,
                       slots_out.permute(1, 0, 2, 3).reshape(G, E * P, D))
    return {"logits": logits, "dispatch": dispatch,
            "combine": combine.reshape(G, S, E, P), "slots_in": slots_in,
            "slots_out": slots_out, "out": out}
