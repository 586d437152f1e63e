"""Auxiliary routing losses and noisy gating of V-MoE (SPEC §8).

Written from the reference JAX implementation's definitions, independently
of the compiled lowering: torch.std (population), the normal CDF of
torch.distributions, argmax by a stable sort.
"""

import torch


def _squared_variation(v):
    """(std / mean)^2 over the last dim, population std."""
    return (torch.std(v, dim=-1, unbiased=False) / v.mean(-1)) ** 2


def router_losses(x, router, k, noise=None, noise_std=None):
    """vmoe.router_losses: per-group importance, load and GShard losses.

    x [G,S,D], router [D,E]; `noise` [G,S,E] standard normal samples with
    `noise_std` (the std of the noise on the logits is noise_std / E, as in
    vmoe.route). Without noise the load loss is 0 (it is defined only with
    noise). Returns a dict of [G] tensors in x's dtype.
    """
    if (noise is None) != (noise_std is None):
        raise ValueError("noise and noise_std must be given together")
    E = router.shape[1]
    if not 1 <= k <= E:
        raise ValueError(f"k ({k}) must be in [1, {E}]")
    logits = torch.matmul(x, router)
    noisy = logits
    if noise is not None:
        noisy = logits + noise * (noise_std / E)
    gates = torch.softmax(noisy, dim=-1)
    importance = _squared_variation(gates.sum(1))
    if noise is None:
        load = torch.zeros(x.shape[0], dtype=x.dtype)
    else:
        threshold = torch.topk(noisy, k, dim=-1).values[..., k - 1:k]
        sigma = noise_std / E
        normal = torch.distributions.Normal(
            torch.zeros((), dtype=x.dtype), torch.ones((), dtype=x.dtype))
        p = 1.0 - normal.cdf((threshold - logits) / sigma)
        load = _squared_variation(p.mean(1))
    # argmax with ties to the lower expert index.
    top = torch.sort(gates, dim=-1, descending=True, stable=True).indices[..., 0]
    fraction = torch.nn.functional.one_hot(top, E).to(x.dtype).mean(1)
    gshard = E * E * (fraction * gates.mean(1)).mean(-1)
    return {"importance": importance, "load": load, "gshard": gshard}
