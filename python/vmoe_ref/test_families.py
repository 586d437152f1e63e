"""Self-tests of the expert choice and Soft MoE references (SPEC §8):
/usr/bin/python3 -m vmoe_ref.test_families.

Plain asserts against brute-force re-implementations, token by token.
Prints one line per failure and a one-line summary; exits 1 if any test
fails.
"""

import math
import sys

import torch

from . import expertchoice as ec
from . import ops
from . import selftest
from . import softmoe as soft


def _mlp(v, w1, b1, w2, b2, activation="gelu_tanh"):
    return ops.activate(v @ w1 + b1, activation) @ w2 + b2


def test_expert_choice_top_tokens_ties_to_lower_index():
    gen = torch.Generator().manual_seed(3)
    for G, S, E, B in [(2, 9, 4, 3), (1, 12, 3, 12), (3, 7, 5, 1),
                       (1, 6, 2, 9)]:
        # Few distinct levels: many equal gates within a column.
        x = torch.randint(0, 3, (G, S, 4), generator=gen).float() / 3
        router = torch.randint(0, 2, (4, E), generator=gen).float()
        gates, tokens, slots = ec.expert_choice(x, router, B)
        b = min(B, S)
        for g in range(G):
            for e in range(E):
                column = gates[g, :, e].tolist()
                best = sorted(range(S), key=lambda t: (-column[t], t))[:b]
                assert tokens[e, g].tolist() == best + [-1] * (B - b)
                for t in range(S):
                    expected = best.index(t) if t in best else -1
                    assert int(slots[g, t, e]) == expected


def test_expert_choice_runtime_capacity():
    gen = torch.Generator().manual_seed(4)
    x, router = torch.randn(2, 10, 6, generator=gen), torch.randn(6, 3)
    _, full, _ = ec.expert_choice(x, router, 5)
    _, fewer, _ = ec.expert_choice(x, router, 5, runtime_capacity=2)
    assert torch.equal(fewer[..., :2], full[..., :2])
    assert (fewer[..., 2:] == -1).all()
    _, none, slots = ec.expert_choice(x, router, 5, runtime_capacity=0)
    assert (none == -1).all() and (slots == -1).all()


def test_expert_choice_experts_brute_force():
    gen = torch.Generator().manual_seed(5)
    G, S, D, H, E, B = 2, 11, 5, 7, 4, 4
    x = torch.randn(G, S, D, generator=gen, dtype=torch.float64)
    router = torch.randn(D, E, generator=gen, dtype=torch.float64)
    w1 = torch.randn(E, D, H, generator=gen, dtype=torch.float64)
    b1 = torch.randn(E, H, generator=gen, dtype=torch.float64)
    w2 = torch.randn(E, H, D, generator=gen, dtype=torch.float64)
    b2 = torch.randn(E, D, generator=gen, dtype=torch.float64)
    gates, tokens, slots = ec.expert_choice(x, router, B)
    out, _, _ = ec.expert_choice_experts(x, gates, tokens, slots, w1, b1, w2,
                                         b2)
    for g in range(G):
        for t in range(S):
            expected = torch.zeros(D, dtype=torch.float64)
            for e in range(E):
                if t in tokens[e, g].tolist():
                    expected += gates[g, t, e] * _mlp(x[g, t], w1[e], b1[e],
                                                      w2[e], b2[e])
            assert torch.allclose(out[g, t], expected, atol=1e-12)


def test_expert_choice_stats():
    gen = torch.Generator().manual_seed(6)
    x, router = torch.randn(3, 10, 4, generator=gen), torch.randn(4, 5)
    _, _, slots = ec.expert_choice(x, router, 3)
    stats = ec.expert_choice_stats(slots)
    histogram = stats["histogram"].tolist()
    assert len(histogram) == 6 and sum(histogram) == 30
    assert sum(j * n for j, n in enumerate(histogram)) == 5 * 3 * 3
    assert stats["untaken"] == histogram[0]


def test_expert_choice_capacity_rule():
    assert ec.expert_choice_capacity(30, 1.0, 4) == 8      # 7.5 -> 8
    assert ec.expert_choice_capacity(50, 1.0, 4) == 12     # 12.5 -> 12
    assert ec.expert_choice_capacity(37, 1.0, 4, "ceil", 4) == 12
    assert ec.expert_choice_capacity(10, 0.1, 32) == 0


def test_soft_default_slots():
    assert soft.default_slots(5, 8) == 1     # 0.625
    assert soft.default_slots(30, 4) == 8    # 7.5, ties to even
    assert soft.default_slots(50, 4) == 12   # 12.5, ties to even
    assert soft.default_slots(3, 8) == 0


def test_soft_weights_are_softmaxes():
    gen = torch.Generator().manual_seed(7)
    x, phi = torch.randn(2, 6, 5, generator=gen), torch.randn(5, 3, 2)
    w1, b1 = torch.randn(3, 5, 4), torch.randn(3, 4)
    w2, b2 = torch.randn(3, 4, 5), torch.randn(3, 5)
    r = soft.soft_moe(x, phi, torch.tensor(1.5), w1, b1, w2, b2)
    assert torch.allclose(r["dispatch"].sum(1), torch.ones(2, 3, 2))
    assert torch.allclose(r["combine"].sum((2, 3)), torch.ones(2, 6))


def test_soft_brute_force():
    gen = torch.Generator().manual_seed(8)
    for G, S, D, H, E, P in [(2, 6, 5, 4, 3, 2), (1, 3, 4, 6, 4, 1)]:
        f64 = torch.float64
        x = torch.randn(G, S, D, generator=gen, dtype=f64)
        phi = torch.randn(D, E, P, generator=gen, dtype=f64)
        w1 = torch.randn(E, D, H, generator=gen, dtype=f64)
        b1 = torch.randn(E, H, generator=gen, dtype=f64)
        w2 = torch.randn(E, H, D, generator=gen, dtype=f64)
        b2 = torch.randn(E, D, generator=gen, dtype=f64)
        scale = torch.tensor(0.7, dtype=f64)
        out = soft.soft_moe(x, phi, scale, w1, b1, w2, b2)["out"]
        for g in range(G):
            xn = [x[g, m] / math.sqrt(float((x[g, m] ** 2).sum()) + 1e-6)
                  for m in range(S)]
            logits = torch.zeros(S, E * P, dtype=f64)
            for m in range(S):
                for e in range(E):
                    for p in range(P):
                        column = phi[:, e, p]
                        pn = column / math.sqrt(float((column ** 2).sum())
                                                + 1e-6)
                        logits[m, e * P + p] = 0.7 * float(xn[m] @ pn)
            dispatch = torch.softmax(logits, 0)
            combine = torch.softmax(logits, 1)
            slot_out = []
            for j in range(E * P):
                slot_in = sum(dispatch[m, j] * x[g, m] for m in range(S))
                e = j // P
                slot_out.append(_mlp(slot_in, w1[e], b1[e], w2[e], b2[e]))
            for m in range(S):
                expected = sum(combine[m, j] * slot_out[j]
                               for j in range(E * P))
                assert torch.allclose(out[g, m], expected, atol=1e-10)


def test_soft_scale_goes_to_the_smaller_operand():
    x, phi = torch.randn(1, 2, 3), torch.randn(3, 4, 1)   # 6 < 12: x
    xn = soft.l2_normalize(x, -1) * 2.0
    pn = soft.l2_normalize(phi, 0)
    expected = torch.einsum("gmd,dnp->gmnp", xn, pn)
    assert torch.equal(soft.soft_logits(x, phi, torch.tensor(2.0)), expected)
    x2 = torch.randn(3, 4, 3)                              # 36 > 12: phi
    expected = torch.einsum("gmd,dnp->gmnp", soft.l2_normalize(x2, -1),
                            pn * 2.0)
    assert torch.equal(soft.soft_logits(x2, phi, torch.tensor(2.0)),
                       expected)


def test_expert_choice_masked_equals_truncated_group():
    # Masking the tokens from n on routes the first n exactly as a group
    # holding only them (same B), and masked tokens are never taken.
    gen = torch.Generator().manual_seed(5)
    for S, n, E, B in [(8, 5, 4, 3), (8, 2, 3, 4), (6, 0, 2, 2),
                       (7, 7, 3, 5)]:
        x = torch.randn(1, S, 6, generator=gen)
        router = torch.randn(6, E, generator=gen)
        valid = (torch.arange(S) < n).view(1, S)
        _, tokens, slots = ec.expert_choice(x, router, B, valid=valid)
        _, t_ref, s_ref = ec.expert_choice(x[:, :n], router, B)
        assert torch.equal(tokens, t_ref)
        assert torch.equal(slots[:, :n], s_ref)
        assert bool((slots[:, n:] == -1).all())
        stats = ec.expert_choice_stats(slots, valid)
        assert int(stats["histogram"].sum()) == n


def test_soft_masked_tokens_do_not_change_valid_outputs():
    gen = torch.Generator().manual_seed(6)
    G, S, D, E, P, H = 2, 5, 4, 3, 2, 6
    phi = torch.randn(D, E, P, generator=gen)
    w1, b1 = torch.randn(E, D, H, generator=gen), torch.randn(E, H)
    w2, b2 = torch.randn(E, H, D, generator=gen), torch.randn(E, D)
    x = torch.randn(G, S, D, generator=gen)
    valid = (torch.arange(G * S) < 7).view(G, S)   # group 1: 2 valid
    changed = torch.where(valid.unsqueeze(-1), x, torch.randn(G, S, D))
    scale = torch.tensor(1.5)
    a = soft.soft_moe(x, phi, scale, w1, b1, w2, b2, valid=valid)
    b = soft.soft_moe(changed, phi, scale, w1, b1, w2, b2, valid=valid)
    assert torch.allclose(a["out"][valid], b["out"][valid], atol=1e-6)
    assert torch.equal(a["dispatch"][~valid],
                       torch.zeros_like(a["dispatch"][~valid]))
    # A group without valid tokens dispatches nothing.
    none = soft.soft_moe(x, phi, scale, w1, b1, w2, b2,
                         valid=torch.zeros(G, S, dtype=torch.bool))
    assert torch.equal(none["slots_in"], torch.zeros_like(none["slots_in"]))


def main():
    return selftest.run("vmoe_ref.test_families", globals())


if __name__ == "__main__":
    sys.exit(main())
