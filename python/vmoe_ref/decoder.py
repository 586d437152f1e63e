"""Decoder-style MoE layers of SPEC §8: Switch and Mixtral routing with
SwiGLU experts, optional shared experts and a dropless mode."""

import torch

from .ops import combine, dispatch, route, sized_capacity


def expert_swiglu(buffers, w_gate, w_up, w_down):
    """vmoe.expert_swiglu: y[e] = (silu(buf[e] @ Wg[e]) * (buf[e] @ Wu[e]))
    @ Wd[e] on buffers [E,G,B,D]."""
    E, G, B, D = buffers.shape
    rows = buffers.reshape(E, G * B, D)
    gate = torch.bmm(rows, w_gate)
    hidden = gate * torch.sigmoid(gate) * torch.bmm(rows, w_up)
    return torch.bmm(hidden, w_down).reshape(E, G, B, D)


def dropless_ratio(k, num_experts):
    """The capacity ratio at which B = S: nothing can drop (an expert gets
    each token at most once)."""
    return num_experts / k


def decoder_moe_layer(x, router, w_gate, w_up, w_down, *, k, num_experts,
                      capacity_ratio=None, order="topk_softmax",
                      normalize=True, shared=None, noise=None,
                      noise_std=None):
    """route, dispatch, expert_swiglu, combine (+ shared experts).

    capacity_ratio None is the dropless mode (B = S). `shared` is None or
    (w_gate, w_up, w_down) of Es shared experts ([Es,D,H], [Es,D,H],
    [Es,H,D]) that every token passes through; their outputs are added to
    the routed output in ascending order. `noise`, `noise_std`: the noisy
    gating of a training graph (vmoe.route's operands). Mixtral: k = 2, topk_softmax,
    normalize (a no-op after the k-way softmax); Switch: k = 1.
    """
    G, S, D = x.shape
    dropless = capacity_ratio is None
    ratio = dropless_ratio(k, num_experts) if dropless else capacity_ratio
    gates, ids, weights = route(x, router, k, order=order,
                                normalize=normalize, noise=noise,
                                noise_std=noise_std)
    B = sized_capacity(k, S, ratio, num_experts)
    if dropless:
        assert B == S, (B, S)
    buffers, slots = dispatch(x, ids, None, B, num_experts)
    y = expert_swiglu(buffers, w_gate, w_up, w_down)
    out = combine(y, ids, slots, weights)
    if shared is not None:
        sg, su, sd = shared
        for e in range(sg.shape[0]):
            out = out + expert_swiglu(x[None], sg[e:e + 1], su[e:e + 1],
                                      sd[e:e + 1])[0]
    return {"gates": gates, "ids": ids, "weights": weights, "slots": slots,
            "out": out, "B": B, "ratio": ratio}
