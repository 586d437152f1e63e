"""Self-tests of the PyTorch V-MoE: /usr/bin/python3 -m vmoe_ref.test_model.

The batched, differentiable MoE path (model.moe_forward) against the literal
reference ops.moe_layer, placement rules, description validation, the
safetensors round trip and the network's structure. Prints one line per
failure and a one-line summary; exits 1 if any test fails.
"""

import copy
import os
import sys
import tempfile

import numpy as np
import torch

from . import model, ops, selftest

_DIGITS = {
    "format": "vmoe-model", "version": 1, "name": "test",
    "image": {"height": 8, "width": 8, "channels": 1},
    "input": {"mean": [0.5], "std": [0.5]},
    "patch_size": 2, "width": 16, "depth": 4, "heads": 2, "mlp_dim": 24,
    "classes": 10, "head": "token",
    "moe": {"placement": "every-2", "num_experts": 4, "k": 2,
            "capacity_ratio": 1.05, "group_size": 2},
}


def _rand_layer(gen, G, S, D, H, E):
    """Random float32 layer inputs (x, router, w1, b1, w2, b2)."""
    def normal(*shape, scale=1.0):
        return torch.randn(*shape, generator=gen) * scale
    return (normal(G, S, D), normal(D, E), normal(E, D, H, scale=0.2),
            normal(E, H, scale=0.1), normal(E, H, D, scale=0.2),
            normal(E, D, scale=0.1))


def test_moe_forward_equals_reference():
    gen = torch.Generator().manual_seed(0)
    cases = 0
    for E, k in [(4, 1), (4, 2), (8, 2), (5, 3)]:
        for routing, score in [("vanilla", "max"), ("bpr", "max"),
                               ("bpr", "sum_topk")]:
            for C in (0.1, 0.5, 1.0, 1.05, 2.0):
                for order, normalize in [("softmax_topk", False),
                                         ("topk_softmax", True)]:
                    args = _rand_layer(gen, 3, 40, 8, 12, E)
                    kw = dict(k=k, num_experts=E, capacity_ratio=C,
                              routing=routing, score=score, order=order,
                              normalize=normalize)
                    want = ops.moe_layer(*args, **kw)
                    got = model.moe_forward(*args, **kw)
                    assert got["B"] == want["B"]
                    for key in ("ids", "slots", "buffers", "y", "out"):
                        assert torch.equal(got[key], want[key]), \
                            (E, k, routing, score, C, order, key)
                    cases += 1
    assert cases == 120


def test_moe_forward_tied_gates():
    # Identical rows: equal gates and BPR scores exercise the tie rules.
    gen = torch.Generator().manual_seed(1)
    x, router, w1, b1, w2, b2 = _rand_layer(gen, 2, 30, 6, 8, 4)
    x = x[:, :5].repeat(1, 6, 1)
    router = torch.zeros_like(router)
    for routing in ("vanilla", "bpr"):
        kw = dict(k=2, num_experts=4, capacity_ratio=0.6, routing=routing)
        want = ops.moe_layer(x, router, w1, b1, w2, b2, **kw)
        got = model.moe_forward(x, router, w1, b1, w2, b2, **kw)
        assert torch.equal(got["slots"], want["slots"])
        assert torch.equal(got["out"], want["out"])


def test_moe_forward_gradients():
    gen = torch.Generator().manual_seed(2)
    args = [t.requires_grad_() for t in _rand_layer(gen, 2, 24, 8, 12, 4)]
    noise = torch.randn(2, 24, 4, generator=gen)
    result = model.moe_forward(*args, k=2, num_experts=4, capacity_ratio=1.0,
                               noise=noise)
    (result["out"].square().sum() + result["aux_loss"]).backward()
    for t in args:
        assert t.grad is not None and torch.isfinite(t.grad).all()
        assert t.grad.abs().sum() > 0


def test_noise_only_in_training():
    torch.manual_seed(3)
    net = model.VMoE(_DIGITS)
    images = torch.randn(4, 1, 8, 8)
    net.eval()
    first, layers = net(images)
    second, _ = net(images)
    assert torch.equal(first, second)
    assert all("aux_loss" not in layer for layer in layers)
    net.train()
    _, layers = net(images)
    assert len(layers) == 2 and all("aux_loss" in l for l in layers)


def test_auxiliary_loss_balanced_is_zero():
    # Uniform gates and logits: importance and load are perfectly balanced.
    logits = torch.zeros(2, 16, 4)
    gates = torch.softmax(logits, -1)
    loss = model.auxiliary_loss(logits, logits, gates, 2, 0.25)
    assert abs(float(loss)) < 1e-12
    skewed = logits.clone()
    skewed[..., 0] = 3.0
    assert model.auxiliary_loss(skewed, skewed, torch.softmax(skewed, -1),
                                2, 0.25) > 0.1


def test_placement():
    assert model.moe_blocks(4, "every-2") == [1, 3]
    assert model.moe_blocks(8, "last-n", 2) == [5, 7]
    assert model.moe_blocks(12, "every-2") == [1, 3, 5, 7, 9, 11]
    assert model.moe_blocks(5, "last-n", 1) == [3]
    assert model.moe_blocks(1, "every-2") == []
    assert model.moe_blocks(12, "every-n", every=3) == [2, 5, 8, 11]
    assert model.moe_blocks(4, "every-n", every=1) == [0, 1, 2, 3]
    assert model.moe_blocks(4, "layers", layers=[3, 0]) == [0, 3]
    for bad in (0, 3):
        try:
            model.moe_blocks(4, "last-n", bad)
        except ValueError:
            continue
        raise AssertionError(f"last_n={bad} accepted")


def test_description_errors_name_the_field():
    def expect(edit, field):
        desc = copy.deepcopy(_DIGITS)
        edit(desc)
        try:
            model.parse_description(desc)
        except model.DescriptionError as err:
            assert str(err).startswith(field + ":"), (field, str(err))
            return
        raise AssertionError(f"accepted bad {field}")
    expect(lambda d: d["moe"].update(k=9), "moe.k")
    expect(lambda d: d.update(colour=1), "colour")
    expect(lambda d: d["moe"].update(extra=1), "moe.extra")
    expect(lambda d: d.update(width=15), "width")
    expect(lambda d: d["image"].update(height=7), "image.height")
    expect(lambda d: d.update(head="cls"), "head")
    expect(lambda d: d["moe"].update(capacity_ratio=0.001),
           "moe.capacity_ratio")
    expect(lambda d: d["moe"].update(last_n=1), "moe.last_n")
    expect(lambda d: d["input"].update(mean=[0.5, 0.5]), "input.mean")
    expect(lambda d: d.update(version=2), "version")
    expect(lambda d: d.update(patch_size=[4]), "patch_size")
    expect(lambda d: d.update(final_norm="pre"), "final_norm")
    expect(lambda d: d["moe"].update(placement="layers", layers=[0, 9]),
           "moe.layers")
    expect(lambda d: d["moe"].update(every=2), "moe.every")
    expect(lambda d: d["moe"].update(capacity=4), "moe.capacity_ratio")
    expect(lambda d: d["moe"].update(group_tokens=7), "moe.group_tokens")
    expect(lambda d: d.update(preprocess="decode|flip_lr"), "preprocess")
    parsed = model.parse_description(_DIGITS)
    assert parsed["moe"]["routing"] == "vanilla"
    assert parsed["layer_norm_epsilon"] == 1e-6


def test_tensor_names_and_shapes():
    net = model.VMoE(_DIGITS)
    tensors = net.export_tensors()
    shapes = model.expected_shapes(net.desc)
    assert list(tensors) == list(shapes)
    assert sorted(n for n, _ in net.named_parameters()) == sorted(shapes)
    assert {n: t.shape for n, t in tensors.items()} == shapes
    assert shapes["pos_embedding"] == (17, 16)
    assert "blocks.1.moe.w1" in shapes and "blocks.0.mlp.fc1.kernel" in shapes
    gap = copy.deepcopy(_DIGITS)
    gap["head"] = "gap"
    gap_shapes = model.expected_shapes(model.parse_description(gap))
    assert "cls_token" not in gap_shapes
    assert gap_shapes["pos_embedding"] == (16, 16)
    # Attention pooling, pre-logits, an expert width of its own, 4x2
    # patches; a parsed description parses again to itself.
    rich = copy.deepcopy(_DIGITS)
    rich.update(head="map", representation_size=7, patch_size=[4, 2])
    rich["moe"].update(mlp_dim=40)
    parsed = model.parse_description(rich)
    assert model.parse_description(parsed) == parsed
    shapes = model.expected_shapes(parsed)
    assert shapes["embedding.kernel"] == (8, 16)
    assert shapes["pos_embedding"] == (8, 16)
    assert shapes["blocks.1.moe.w1"] == (4, 16, 40)
    assert shapes["blocks.0.mlp.fc1.kernel"] == (16, 24)
    assert shapes["map.mlp.fc1.kernel"] == (16, 24)
    assert shapes["map.attn.kv.kernel"] == (16, 32)
    assert shapes["pre_logits.kernel"] == (16, 7)
    assert shapes["head.kernel"] == (7, 10)
    dense = copy.deepcopy(_DIGITS)
    del dense["moe"]
    net = model.VMoE(dense)
    assert net.moe_block_ids == [] and "blocks.1.mlp.fc1.kernel" in \
        dict(net.named_parameters())


def test_safetensors_round_trip():
    torch.manual_seed(4)
    net = model.VMoE(_DIGITS)
    tensors = net.export_tensors()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "w.safetensors")
        model.save_safetensors(path, tensors, {"format": "pt"})
        with open(path, "rb") as f:
            blob = f.read()
        header_len = int.from_bytes(blob[:8], "little")
        assert header_len % 8 == 0
        loaded = model.load_safetensors(path)
        assert list(loaded) == list(tensors)
        for name in tensors:
            assert np.array_equal(loaded[name], tensors[name]), name
        other = model.VMoE(_DIGITS)
        other.load_tensors(loaded)
        images = torch.randn(2, 1, 8, 8)
        assert torch.equal(net.eval()(images)[0], other.eval()(images)[0])
        # Corruptions give ValueError, not a crash.
        for bad in (blob[:4], blob[:8 + header_len - 1],
                    blob[:-4], blob.replace(b'"F32"', b'"F16"', 1)):
            with open(path, "wb") as f:
                f.write(bad)
            try:
                model.load_safetensors(path)
            except ValueError:
                continue
            raise AssertionError("corrupt safetensors accepted")
    missing = dict(tensors)
    del missing["head.bias"]
    for bad in (missing, {**tensors, "extra": np.zeros(1, np.float32)},
                {**tensors, "head.bias": np.zeros(3, np.float32)}):
        try:
            net.load_tensors(bad)
        except ValueError:
            continue
        raise AssertionError("bad tensor set accepted")


def test_patch_order():
    # Patch p (row-major) flattens its pixels in (c, i, j) order.
    net = model.VMoE(_DIGITS)
    images = torch.arange(2 * 64, dtype=torch.float32).view(2, 1, 8, 8)
    patches = net.patches(images)
    assert patches.shape == (2, 16, 4)
    assert patches[0, 0].tolist() == [0, 1, 8, 9]
    assert patches[0, 1].tolist() == [2, 3, 10, 11]
    assert patches[0, 4].tolist() == [16, 17, 24, 25]
    assert patches[1, 15].tolist() == [118, 119, 126, 127]


def test_value_range():
    """A description's value_range(-1, 1) normalizes as mean = std = 0.5
    (docs/ModelFormat.md §4), bit for bit; other bounds as a + x·(b - a)."""
    desc = copy.deepcopy(_DIGITS)
    del desc["input"]
    desc["preprocess"] = "decode|resize(8)|value_range(-1, 1)"
    torch.manual_seed(5)
    net = model.VMoE(desc).eval()
    assert model.value_range(net.desc) == (-1.0, 1.0)
    images = np.random.default_rng(1).integers(0, 256, (4, 1, 8, 8),
                                               dtype=np.uint8)
    x = model.normalize_images(images, [0.0], [1.0], (-1.0, 1.0))
    assert torch.equal(x, model.normalize_images(images, [0.5], [0.5]))
    logits, _ = model.evaluate(net, images, batch=4)
    with torch.no_grad():
        assert np.array_equal(logits, net(x)[0].numpy())
    x = model.normalize_images(images, [0.0], [1.0], (2.0, 4.5))
    assert torch.equal(x, 2.0 + torch.from_numpy(images).float() / 255.0
                       * 2.5)


def test_evaluate_pads_and_counts():
    torch.manual_seed(5)
    net = model.VMoE(_DIGITS).eval()
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (5, 1, 8, 8), dtype=np.uint8)
    x = torch.cat([model.normalize_images(images[4:], [0.5], [0.5]),
                   torch.zeros(3, 1, 8, 8)])
    # Zero padding (the original V-MoE): the 3 padding images are routed.
    logits, stats = model.evaluate(net, images, batch=4, padding="zeros")
    assert logits.shape == (5, 10) and logits.dtype == np.float32
    # 2 batches x 4 images x 17 tokens x k=2 choices per layer.
    assert stats.shape == (2, 5) and (stats.sum(1) == 2 * 4 * 17 * 2).all()
    with torch.no_grad():
        want = net(x)[0][:1].numpy()
    assert np.array_equal(logits[4:], want)
    # Masked padding (the default): only the 5 real images are routed.
    logits, stats = model.evaluate(net, images, batch=4)
    assert (stats.sum(1) == 5 * 17 * 2).all()
    with torch.no_grad():
        want = net(x, valid_images=1)[0][:1].numpy()
        # Whatever the padding holds, the real image is unchanged.
        noise = torch.cat([x[:1], torch.randn(3, 1, 8, 8) * 5])
        same = net(noise, valid_images=1)[0][:1].numpy()
    assert np.array_equal(logits[4:], want)
    assert np.array_equal(same, want)


def test_masked_dispatch_is_truncated_dispatch():
    # Masked tokens take no capacity: the valid tokens get the slots that a
    # group holding only them (same order among them, same B) would give.
    gen = torch.Generator().manual_seed(3)
    G, S, k, E, B, valid = 2, 12, 2, 4, 3, 17
    ids = torch.stack([torch.randperm(E, generator=gen)[:k]
                       for _ in range(G * S)]).view(G, S, k).int()
    order = torch.stack([torch.randperm(S, generator=gen)
                         for _ in range(G)]).int()
    mask = (torch.arange(G * S) < valid).view(G, S)
    slots = model.dispatch_slots(ids, order, E, B, mask)
    walked = ops.dispatch(torch.zeros(G, S, 1), ids, order, B, E,
                          num_valid=valid)[1]
    assert torch.equal(slots, walked)
    assert torch.equal(slots[0], model.dispatch_slots(ids[:1], order[:1],
                                                      E, B)[0])
    n = valid - S
    kept = order[1][order[1] < n].view(1, n)
    assert torch.equal(slots[1, :n], model.dispatch_slots(ids[1:, :n], kept,
                                                          E, B)[0])
    assert (slots[1, n:] == -1).all()
    stats = ops.routing_stats(ids, slots, E, mask)
    assert int(stats["fill"].sum()) + stats["dropped"] == valid * k


def main():
    return selftest.run("vmoe_ref.test_model", globals())


if __name__ == "__main__":
    sys.exit(main())
