"""Self-tests of the auxiliary losses and decoder-style MoE references
(SPEC §8) against plain Python loops (math.erfc for the normal CDF)."""

import math
import sys

import torch

import vmoe_ref

from . import model, noise, selftest


def _cv2(values):
    mean = sum(values) / len(values)
    var = sum((v - mean) ** 2 for v in values) / len(values)
    return var / mean ** 2


def _brute_losses(x, router, k, noise, noise_std):
    G, S, _ = x.shape
    E = router.shape[1]
    logits = (x.double() @ router.double()).tolist()
    out = {"importance": [], "load": [], "gshard": []}
    for g in range(G):
        noisy = [[logits[g][t][e] + (noise[g][t][e].item() * noise_std / E
                                     if noise is not None else 0.0)
                  for e in range(E)] for t in range(S)]
        gates = []
        for row in noisy:
            m = max(row)
            ex = [math.exp(v - m) for v in row]
            gates.append([v / sum(ex) for v in ex])
        out["importance"].append(
            _cv2([sum(gates[t][e] for t in range(S)) for e in range(E)]))
        if noise is None:
            out["load"].append(0.0)
        else:
            sigma = noise_std / E
            p = [0.0] * E
            for t in range(S):
                thr = sorted(noisy[t], reverse=True)[k - 1]
                for e in range(E):
                    z = (thr - logits[g][t][e]) / sigma
                    p[e] += 0.5 * math.erfc(z / math.sqrt(2)) / S
            out["load"].append(_cv2(p))
        frac, mean = [0.0] * E, [0.0] * E
        for t in range(S):
            best = max(range(E), key=lambda e: (gates[t][e], -e))
            frac[best] += 1 / S
            for e in range(E):
                mean[e] += gates[t][e] / S
        out["gshard"].append(E * E * sum(f * m for f, m in zip(frac, mean))
                             / E)
    return out


def _check_losses(k, noisy):
    torch.manual_seed(k * 10 + noisy)
    x, router = torch.randn(2, 9, 5), torch.randn(5, 4)
    noise = torch.randn(2, 9, 4) if noisy else None
    std = 1.5 if noisy else None
    got = vmoe_ref.router_losses(x.double(), router.double(), k,
                                 noise=None if noise is None
                                 else noise.double(), noise_std=std)
    want = _brute_losses(x, router, k, noise, std)
    for key in want:
        assert torch.allclose(got[key], torch.tensor(want[key],
                                                     dtype=torch.float64),
                              rtol=1e-9, atol=1e-12), (key, got[key], want)


def test_losses_inference_k1():
    _check_losses(1, False)


def test_losses_noisy_k2():
    _check_losses(2, True)


def test_losses_noisy_k_eq_e():
    _check_losses(4, True)


def test_gshard_ties_lower_expert():
    # Two equal gates: the argmax is expert 0, so F = [1, 0].
    x = torch.ones(1, 2, 1, dtype=torch.float64)
    router = torch.tensor([[1.0, 1.0]], dtype=torch.float64)
    got = vmoe_ref.router_losses(x, router, 1)
    assert torch.allclose(got["gshard"], torch.tensor([2.0 * 2 * 0.5 / 2],
                                                      dtype=torch.float64))


def test_swiglu_by_rows():
    torch.manual_seed(3)
    buf = torch.randn(2, 1, 3, 4, dtype=torch.float64)
    wg, wu = torch.randn(2, 4, 5, dtype=torch.float64), torch.randn(
        2, 4, 5, dtype=torch.float64)
    wd = torch.randn(2, 5, 4, dtype=torch.float64)
    y = vmoe_ref.expert_swiglu(buf, wg, wu, wd)
    for e in range(2):
        for r in range(3):
            row = buf[e, 0, r]
            a, b = row @ wg[e], row @ wu[e]
            h = a / (1 + torch.exp(-a)) * b
            assert torch.allclose(y[e, 0, r], h @ wd[e])


def test_dropless_keeps_every_choice():
    torch.manual_seed(4)
    x, router = torch.randn(2, 11, 6), torch.randn(6, 8)
    w = [torch.randn(8, 6, 7), torch.randn(8, 6, 7), torch.randn(8, 7, 6)]
    result = vmoe_ref.decoder_moe_layer(x, router, *w, k=2, num_experts=8)
    assert result["B"] == 11
    assert bool((result["slots"] >= 0).all())
    # Mixtral weights: a softmax over the two kept logits, summing to 1.
    assert torch.allclose(result["weights"].sum(-1), torch.ones(2, 11))


def test_shared_expert_added():
    torch.manual_seed(5)
    x, router = torch.randn(1, 5, 4), torch.randn(4, 2)
    w = [torch.randn(2, 4, 3), torch.randn(2, 4, 3), torch.randn(2, 3, 4)]
    s = [torch.randn(1, 4, 3), torch.randn(1, 4, 3), torch.randn(1, 3, 4)]
    base = vmoe_ref.decoder_moe_layer(x, router, *w, k=1, num_experts=2)
    both = vmoe_ref.decoder_moe_layer(x, router, *w, k=1, num_experts=2,
                                      shared=s)
    extra = vmoe_ref.expert_swiglu(x[None], *s)[0]
    assert torch.allclose(both["out"], base["out"] + extra)


# ---------------------------------------------------------------------------
# The decoder-style description fields and the training graph (model.py,
# noise.py)

_DECODER_DESC = {
    "format": "vmoe-model", "version": 1, "name": "t",
    "image": {"height": 4, "width": 4, "channels": 1}, "patch_size": 2,
    "width": 8, "depth": 2, "heads": 2, "mlp_dim": 6, "classes": 3,
    "head": "gap", "norm": "rmsnorm",
    "moe": {"placement": "every-2", "num_experts": 4, "k": 2,
            "capacity_ratio": "none", "routing": "vanilla",
            "expert": "swiglu", "shared_experts": 2, "group_size": 1}}


def test_splitmix64_known_value():
    # The first output of the SplitMix64 generator from state 0.
    assert noise.splitmix64(0) == 0xE220A8397B1DCDAF


def test_training_noise_is_standard_normal_and_reproducible():
    a = noise.training_noise(3, 1, (50, 40, 10))
    assert torch.equal(a, noise.training_noise(3, 1, (50, 40, 10)))
    assert abs(float(a.mean())) < 0.02 and abs(float(a.std()) - 1) < 0.02
    assert not torch.equal(a, noise.training_noise(4, 1, (50, 40, 10)))
    assert not torch.equal(a, noise.training_noise(3, 3, (50, 40, 10)))


def test_rmsnorm_is_x_over_rms_times_scale():
    norm = model.RMSNorm(5, 1e-6)
    with torch.no_grad():
        norm.scale.copy_(torch.arange(1.0, 6.0))
    x = torch.randn(3, 5, generator=torch.Generator().manual_seed(0))
    rms = [math.sqrt(sum(v * v for v in row) / 5 + 1e-6)
           for row in x.tolist()]
    want = torch.tensor([[v / r * (i + 1) for i, v in enumerate(row)]
                         for row, r in zip(x.tolist(), rms)])
    assert torch.allclose(norm(x), want, atol=1e-6)


def test_decoder_block_routes_dropless_and_adds_shared_experts():
    net = model.VMoE(_DECODER_DESC).eval()
    assert "blocks.1.moe.shared.w_up" in net.export_tensors()
    assert "blocks.1.ln2.bias" not in net.export_tensors()
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in net.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * 0.5)
    block = net.blocks[1]
    x = torch.randn(1, 4, 8, generator=gen)
    h = x + block.attn(block.ln1(x))
    normed = block.ln2(h)
    out, layer = block.moe(normed, tokens_per_group=4, routing=None,
                           score=None, capacity_ratio=None)
    # Dropless: B = S, every choice kept.
    assert layer["B"] == 4 and bool((layer["slots"] >= 0).all())
    total, _ = block(x, tokens_per_group=4, routing=None, score=None,
                     capacity_ratio=None)
    shared = block.moe.shared
    want = h + out
    for e in range(2):
        gate = normed @ shared.w_gate[e]
        want = want + (gate * torch.sigmoid(gate) * (normed @ shared.w_up[e])
                       ) @ shared.w_down[e]
    assert torch.allclose(total, want, atol=1e-5)


def test_training_seed_changes_routing_and_reports_losses():
    net = model.VMoE(_DECODER_DESC).eval()
    images = torch.randint(0, 256, (3, 1, 4, 4), dtype=torch.uint8,
                           generator=torch.Generator().manual_seed(2))
    _, _, losses = model.evaluate(net, images.numpy(), training_seed=5)
    assert losses.shape == (1, 3) and bool((losses >= 0).all())
    _, _, again = model.evaluate(net, images.numpy(), training_seed=5)
    assert (losses == again).all()


def main():
    return selftest.run("vmoe_ref.test_decoder", globals())


if __name__ == "__main__":
    sys.exit(main())
