"""Self-tests of the reference ops: /usr/bin/python3 -m vmoe_ref.test_ops.

Plain asserts against brute-force re-implementations and the examples of
SPEC §4. Prints one line per failure and a one-line summary; exits 1 if any
test fails.
"""

import math
import sys

import numpy as np
import torch

from . import ops, selftest


def _rand_layer(gen, G, S, D, H, E):
    """Random float32 layer inputs (x, router, w1, b1, w2, b2)."""
    def normal(*shape, scale=1.0):
        return torch.randn(*shape, generator=gen) * scale
    return (normal(G, S, D), normal(D, E), normal(E, D, H, scale=0.2),
            normal(E, H, scale=0.1), normal(E, H, D, scale=0.2),
            normal(E, D, scale=0.1))


def _tied_values(gen, *shape, levels=3):
    """float32 values drawn from a few levels, so ties are frequent."""
    return torch.randint(0, levels, shape, generator=gen).float() / levels


def _check_placement(ids, order, slots, num_experts, limit):
    """Checks the dispatch rules of SPEC §3 on ids/order/slots by replay."""
    G, S, k = ids.shape
    for g in range(G):
        tokens = list(range(S)) if order is None else order[g].tolist()
        fill = [0] * num_experts
        for i in range(k):
            for t in tokens:
                e = int(ids[g, t, i])
                slot = int(slots[g, t, i])
                if 0 <= e < num_experts and fill[e] < limit:
                    assert slot == fill[e], (g, t, i, slot, fill[e])
                    fill[e] += 1
                else:
                    assert slot == -1, (g, t, i, slot)


def test_topk_ties_to_lower_index():
    gen = torch.Generator().manual_seed(1)
    for E, k in [(4, 1), (4, 2), (5, 3), (8, 8), (32, 2)]:
        x = _tied_values(gen, 2, 9, 6)
        router = _tied_values(gen, 6, E, levels=2)
        gates, ids, weights = ops.route(x, router, k)
        assert ids.dtype == torch.int32
        for g in range(2):
            for t in range(9):
                row = gates[g, t].tolist()
                expected = sorted(range(E), key=lambda e: (-row[e], e))[:k]
                assert ids[g, t].tolist() == expected, (row, ids[g, t])
                assert weights[g, t].tolist() == [row[e] for e in expected]


def test_topk_softmax_and_normalize():
    gen = torch.Generator().manual_seed(2)
    x, router = _tied_values(gen, 2, 7, 5), _tied_values(gen, 5, 6)
    logits = x @ router
    gates, ids, weights = ops.route(x, router, 3, order="topk_softmax")
    assert torch.equal(gates, torch.softmax(logits, -1))
    for g in range(2):
        for t in range(7):
            row = logits[g, t].tolist()
            expected = sorted(range(6), key=lambda e: (-row[e], e))[:3]
            assert ids[g, t].tolist() == expected
            chosen = torch.softmax(logits[g, t, expected], -1)
            assert torch.equal(weights[g, t], chosen)
    _, ids_n, w_n = ops.route(x, router, 3, normalize=True)
    _, ids_raw, w_raw = ops.route(x, router, 3)
    assert torch.equal(ids_n, ids_raw)
    total = w_raw[..., 0] + w_raw[..., 1] + w_raw[..., 2]
    assert torch.equal(w_n, w_raw / total.unsqueeze(-1))
    assert torch.allclose(w_n.sum(-1), torch.ones(2, 7))


def test_route_noise():
    gen = torch.Generator().manual_seed(3)
    x, router = torch.randn(1, 4, 3, generator=gen), torch.randn(3, 5)
    noise = torch.randn(1, 4, 5, generator=gen)
    gates, _, _ = ops.route(x, router, 2, noise=noise, noise_std=2.0)
    assert torch.allclose(gates, torch.softmax(x @ router + noise * 0.4, -1))
    for bad in [{"noise": noise}, {"noise_std": 1.0}]:
        try:
            ops.route(x, router, 2, **bad)
        except ValueError:
            continue
        raise AssertionError(f"accepted {sorted(bad)} alone")


def test_bpr_sort_stable():
    gen = torch.Generator().manual_seed(4)
    gates = _tied_values(gen, 3, 40, 4)
    for score, k in [("max", None), ("sum_topk", 2), ("sum_topk", None)]:
        order = ops.bpr_sort(gates, score, k)
        assert order.dtype == torch.int32 and order.shape == (3, 40)
        for g in range(3):
            rows = gates[g].numpy()
            if score == "max":
                scores = [float(r.max()) for r in rows]
            else:
                scores = []
                for r in rows:
                    top = sorted(r.tolist(), reverse=True)[:k or len(r)]
                    total = np.float32(top[0])
                    for v in top[1:]:
                        total = np.float32(total + np.float32(v))
                    scores.append(float(total))
            expected = sorted(range(40), key=lambda t: (-scores[t], t))
            assert order[g].tolist() == expected, (score, k, g)
            assert len(set(scores)) < 40  # the data really has ties


def test_sum_topk_adds_largest_first():
    # 1 + 2^-24 + 2^-24 is 1 in float32 when added largest first, but
    # 1 + 2^-23 when the two small values are added first.
    tiny = 2.0 ** -24
    gates = torch.tensor([[[tiny, 1.0, tiny], [1.0, 0.0, 0.0]]])
    assert ops.bpr_sort(gates, "sum_topk").tolist() == [[0, 1]]
    gates[0, 1, 0] = 1.0 + 2.0 ** -23
    assert ops.bpr_sort(gates, "sum_topk").tolist() == [[1, 0]]


def test_capacity_spec_examples():
    assert ops.capacity(2, 400, 1.05, 32) == 26
    assert ops.capacity(2, 50, 1.0, 8) == 12  # 12.5, ties to even
    assert ops.capacity(2, 32, 1.0, 32, "ceil", 4) == 4
    assert ops.capacity(2, 56, 1.0, 8) == 14  # exact
    assert ops.capacity(1, 7, 1.0, 2) == 4    # 3.5, ties to even
    assert ops.capacity(1, 5, 1.0, 2) == 2    # 2.5, ties to even
    assert ops.capacity(2, 50, 1.0, 8, "ceil") == 13
    assert ops.capacity(2, 50, 1.0, 8, "round", 5) == 15
    assert ops.capacity(2, 8, 0.01, 32) == 0
    assert ops.capacity(2, 8, 0.0, 4) == 0
    assert ops.capacity(2, 8, -1.0, 4, "ceil", 4) == 0
    assert ops.capacity(2, 8, math.nan, 4) == 0
    assert ops.capacity(2, 8, math.inf, 4) == 2 ** 62
    # Evaluated in double: 2*50*1.1/10 = 11.000000000000002, so ceil is 12.
    assert ops.capacity(2, 50, 1.1, 10, "ceil") == 12
    assert ops.capacity(2, 50, 1.1, 10) == 11
    try:
        ops.sized_capacity(2, 4, 0.01, 32)
    except ValueError as error:
        assert str(error).startswith("capacity rounds to 0"), error
    else:
        raise AssertionError("sized_capacity accepted B = 0")
    assert ops.runtime_capacity(2, 400, 2.0, 32, 26) == 26
    assert ops.runtime_capacity(2, 400, 0.5, 32, 26) == 12
    assert ops.runtime_capacity(2, 400, 0.0, 32, 26) == 0


def test_dispatch_rules():
    gen = torch.Generator().manual_seed(5)
    for G, S, E, k, B in [(1, 17, 4, 2, 3), (3, 30, 4, 1, 5),
                          (2, 25, 5, 2, 1), (2, 12, 3, 3, 12)]:
        x = torch.randn(G, S, 6, generator=gen)
        ids = torch.stack([torch.randperm(E, generator=gen)[:k]
                           for _ in range(G * S)]).reshape(G, S, k).int()
        order = torch.stack([torch.randperm(S, generator=gen)
                             for _ in range(G)]).int()
        for priority in (None, order):
            buffers, slots = ops.dispatch(x, ids, priority, B, E)
            assert slots.dtype == torch.int32 and slots.shape == (G, S, k)
            _check_placement(ids, priority, slots, E, B)
            filled = torch.zeros(E, G, B, dtype=torch.bool)
            for g in range(G):
                for t in range(S):
                    for i in range(k):
                        s = int(slots[g, t, i])
                        if s >= 0:
                            e = int(ids[g, t, i])
                            assert torch.equal(buffers[e, g, s], x[g, t])
                            filled[e, g, s] = True
            assert not buffers[~filled].any(), "unfilled rows must be zero"
            # Per expert and group, top-1 choices hold the lowest slots.
            for e in range(E):
                for g in range(G):
                    mine = (ids[g] == e) & (slots[g] >= 0)
                    first = slots[g, :, 0][mine[:, 0]]
                    later = slots[g, :, 1:][mine[:, 1:]]
                    if len(first) and len(later):
                        assert first.max() < later.min()


def test_top1_before_top2():
    # Odd tokens choose experts (0, 1), even tokens (1, 0); token order.
    S = 10
    ids = torch.tensor([[[0, 1] if t % 2 else [1, 0] for t in range(S)]],
                       dtype=torch.int32)
    x = torch.arange(S, dtype=torch.float32).reshape(1, S, 1)
    # B = 4: the top-1 choices fill both experts; every top-2 is dropped.
    _, slots = ops.dispatch(x, ids, None, 4, 2)
    assert slots[0, :, 0].tolist() == [0, 0, 1, 1, 2, 2, 3, 3, -1, -1]
    assert slots[0, :, 1].tolist() == [-1] * S
    # B = 6: all ten top-1 choices (tokens 8, 9 included) come before the
    # top-2 choices of tokens 0 and 1, which take the last slots.
    _, slots = ops.dispatch(x, ids, None, 6, 2)
    assert slots[0, :, 0].tolist() == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]
    assert slots[0, :, 1].tolist() == [5, 5] + [-1] * 8


def test_priority_order_and_b1():
    x = torch.arange(6, dtype=torch.float32).reshape(1, 6, 1)
    ids = torch.zeros(1, 6, 1, dtype=torch.int32)
    order = torch.tensor([[4, 2, 0, 1, 3, 5]], dtype=torch.int32)
    buffers, slots = ops.dispatch(x, ids, order, 1, 3)
    assert slots[0, :, 0].tolist() == [-1, -1, -1, -1, 0, -1]
    assert buffers[0, 0, 0, 0] == 4.0 and not buffers[1:].any()
    buffers, slots = ops.dispatch(x, ids, order, 2, 1)
    assert slots[0, :, 0].tolist() == [-1, -1, 1, -1, 0, -1]


def test_out_of_range_ids_dropped():
    x = torch.ones(1, 3, 2)
    ids = torch.tensor([[[-1], [3], [1]]], dtype=torch.int32)
    buffers, slots = ops.dispatch(x, ids, None, 2, 3)
    assert slots[0, :, 0].tolist() == [-1, -1, 0]
    y = torch.ones(3, 1, 2, 2)
    out = ops.combine(y, ids, slots, torch.ones(1, 3, 1))
    assert out[0].tolist() == [[0, 0], [0, 0], [1, 1]]


def test_runtime_capacity():
    gen = torch.Generator().manual_seed(6)
    G, S, E, k, B = 2, 20, 4, 2, 8
    x = torch.randn(G, S, 5, generator=gen)
    ids = torch.stack([torch.randperm(E, generator=gen)[:k]
                       for _ in range(G * S)]).reshape(G, S, k).int()
    for runtime in (0, 1, 3, 8, 50):
        buffers, slots = ops.dispatch(x, ids, None, B, E, runtime)
        assert buffers.shape == (E, G, B, 5)
        ref_buffers, ref_slots = ops.dispatch(x, ids, None, min(runtime, B),
                                              E)
        assert torch.equal(slots, ref_slots)
        assert torch.equal(buffers[:, :, :min(runtime, B)], ref_buffers)
        assert not buffers[:, :, min(runtime, B):].any()
    _, slots = ops.dispatch(x, ids, None, B, E, 0)
    assert (slots == -1).all()


def test_expert_ffn_activations():
    gen = torch.Generator().manual_seed(7)
    buffers = torch.randn(3, 2, 4, 5, generator=gen, dtype=torch.float64)
    w1, b1 = torch.randn(3, 5, 7, dtype=torch.float64), torch.randn(3, 7)
    w2, b2 = torch.randn(3, 7, 5, dtype=torch.float64), torch.randn(3, 5)
    b1, b2 = b1.double(), b2.double()
    formulas = {
        "gelu_tanh": lambda v: 0.5 * v * (1 + torch.tanh(
            math.sqrt(2 / math.pi) * (v + 0.044715 * v ** 3))),
        "gelu_erf": lambda v: 0.5 * v * (1 + torch.erf(v / math.sqrt(2))),
        "relu": lambda v: torch.clamp(v, min=0),
        "silu": lambda v: v / (1 + torch.exp(-v)),
    }
    for name, formula in formulas.items():
        y = ops.expert_ffn(buffers, w1, b1, w2, b2, name)
        for e in range(3):
            for g in range(2):
                h = formula(buffers[e, g] @ w1[e] + b1[e])
                assert torch.allclose(y[e, g], h @ w2[e] + b2[e],
                                      rtol=1e-12, atol=1e-12), name


def test_k_equals_e_is_dense_mixture():
    gen = torch.Generator().manual_seed(8)
    G, S, D, H, E = 2, 9, 6, 10, 4
    x, router, w1, b1, w2, b2 = _rand_layer(gen, G, S, D, H, E)
    result = ops.moe_layer(x, router, w1, b1, w2, b2, k=E, num_experts=E,
                           capacity_ratio=1.0, routing="bpr",
                           score="sum_topk")
    assert result["B"] == S
    assert (result["slots"] >= 0).all()
    assert (result["ids"].sort(-1).values == torch.arange(E)).all()
    dense = torch.zeros(G, S, D)
    for e in range(E):
        h = ops.activate(x @ w1[e] + b1[e], "gelu_tanh")
        dense += result["gates"][..., e:e + 1] * (h @ w2[e] + b2[e])
    assert torch.allclose(result["out"], dense, rtol=1e-5, atol=1e-5)


def test_layer_no_drops_vanilla_equals_bpr():
    gen = torch.Generator().manual_seed(9)
    x, router, w1, b1, w2, b2 = _rand_layer(gen, 3, 13, 7, 9, 5)
    args = dict(k=2, num_experts=5, capacity_ratio=5 / 2)  # B = S
    vanilla = ops.moe_layer(x, router, w1, b1, w2, b2, **args)
    bpr = ops.moe_layer(x, router, w1, b1, w2, b2, routing="bpr", **args)
    assert vanilla["order"] is None and bpr["order"].shape == (3, 13)
    assert (vanilla["slots"] >= 0).all() and (bpr["slots"] >= 0).all()
    assert torch.equal(vanilla["ids"], bpr["ids"])
    assert torch.allclose(vanilla["out"], bpr["out"], rtol=1e-6, atol=1e-6)
    assert not torch.equal(vanilla["slots"], bpr["slots"])


def test_layer_drops_and_stats():
    gen = torch.Generator().manual_seed(10)
    x, router, w1, b1, w2, b2 = _rand_layer(gen, 2, 30, 6, 8, 4)
    router[:, 0] += 10.0  # push most tokens to expert 0
    result = ops.moe_layer(x, router, w1, b1, w2, b2, k=1, num_experts=4,
                           capacity_ratio=0.5, routing="bpr")
    B = result["B"]
    assert B == ops.capacity(1, 30, 0.5, 4) == 4
    ids, slots, out = result["ids"], result["slots"], result["out"]
    _check_placement(ids, result["order"], slots, 4, B)
    stats = ops.routing_stats(ids, slots, 4)
    assert int(stats["fill"].sum()) + stats["dropped"] == 2 * 30
    assert stats["fill"].tolist()[0] == 2 * B and stats["dropped"] > 0
    dropped = slots[..., 0] < 0
    assert not out[dropped].any(), "tokens dropped by all experts get 0"
    # BPR keeps the most confident tokens of expert 0.
    for g in range(2):
        top = result["gates"][g].max(-1).values
        kept = top[(ids[g, :, 0] == 0) & ~dropped[g]]
        lost = top[(ids[g, :, 0] == 0) & dropped[g]]
        assert kept.min() >= lost.max()


def main():
    return selftest.run("vmoe_ref.test_ops", globals())


if __name__ == "__main__":
    sys.exit(main())
