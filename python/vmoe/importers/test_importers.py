"""Self-tests of vmoe.importers (numpy only; no compiler, no torch).

    cd python && python3 -m vmoe.importers.test_importers

Layout conversions on hand-made tensors, the one-line errors (unknown,
missing and misshapen keys, unsupported variants, bad configs and upcycle
specs), safetensors dtypes, upcycling and the command line. The numerics
of whole imported models against the code that wrote them are checked by
vmoe_tools.check_import (test/python/importers.test).
"""

import contextlib
import io
import json
import os
import struct
import sys
import tempfile
import traceback

import numpy as np

from vmoe import importers
from vmoe.importers import __main__ as cli
from vmoe.importers import _safetensors
from vmoe_tools import flax_layout

_CONFIG = {"num_classes": 3, "patch_size": [4, 4], "hidden_size": 8,
           "classifier": "token",
           "encoder": {"num_layers": 2, "mlp_dim": 12, "num_heads": 2,
                       "moe": {"layers": [1], "num_experts": 4,
                               "group_size": 10,
                               "router": {"num_selected_experts": 2,
                                          "dispatcher": {
                                              "capacity_factor": 1.0,
                                              "batch_priority": True}}}}}


def _flax(tmp, config=_CONFIG, scheme="vmoe", edit=None):
    params = flax_layout.random_params(config, (8, 8), 1, scheme, 0)
    if edit:
        edit(params)
    path = os.path.join(tmp, "ckpt.npz")
    np.savez(path, **params)
    return path, params


def _expect_error(fn, *fragments):
    try:
        fn()
    except importers.ImporterError as err:
        text = str(err)
        assert "\n" not in text, text
        for fragment in fragments:
            assert fragment in text, (fragment, text)
        return text
    raise AssertionError(f"no error, expected {fragments}")


def _timm_state(depth=1, width=8, classes=3, extra=None, drop=()):
    """A timm ViT state dict (numpy) with 4x4 patches of 8x8 images."""
    rng = np.random.default_rng(0)
    state = {"patch_embed.proj.weight": rng.normal(size=(width, 3, 4, 4)),
             "patch_embed.proj.bias": rng.normal(size=width),
             "cls_token": rng.normal(size=(1, 1, width)),
             "pos_embed": rng.normal(size=(1, 5, width)),
             "norm.weight": rng.normal(size=width),
             "norm.bias": rng.normal(size=width),
             "head.weight": rng.normal(size=(classes, width)),
             "head.bias": rng.normal(size=classes)}
    for i in range(depth):
        b = f"blocks.{i}."
        for n in ("norm1", "norm2"):
            state[b + n + ".weight"] = rng.normal(size=width)
            state[b + n + ".bias"] = rng.normal(size=width)
        for n, shape in (("attn.qkv", (3 * width, width)),
                         ("attn.proj", (width, width)),
                         ("mlp.fc1", (12, width)), ("mlp.fc2", (width, 12))):
            state[b + n + ".weight"] = rng.normal(size=shape)
            state[b + n + ".bias"] = rng.normal(size=shape[0])
    state.update(extra or {})
    for key in drop:
        del state[key]
    return {k: np.asarray(v, np.float32) for k, v in state.items()}


def _write_timm(tmp, state, dtype="F32"):
    path = os.path.join(tmp, "vit.safetensors")
    header, blobs, offset = {}, [], 0
    for name, value in state.items():
        if dtype == "BF16":
            data = (value.astype("<f4").view("<u4") >> 16).astype(
                "<u2").tobytes()
        else:
            data = value.astype({"F32": "<f4", "F16": "<f2"}[dtype]).tobytes()
        header[name] = {"dtype": dtype, "shape": list(value.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))
    return path


# The helpers other tests and the fuzzer (vmoe_tools.fuzz_importers) use.
CONFIG = _CONFIG
flax_checkpoint = _flax
timm_state = _timm_state
write_timm = _write_timm
expect_error = _expect_error


def test_flax_layouts_and_description():
    with tempfile.TemporaryDirectory() as tmp:
        path, params = _flax(tmp)
        desc, tensors = importers.import_flax(path, _CONFIG)
        p = "Encoder/encoderblock_0/"
        # Conv kernel [ph, pw, C, D] -> [C*ph*pw, D] in (c, i, j) order.
        kernel = params["embedding/kernel"]
        assert np.array_equal(tensors["embedding.kernel"][5],
                              kernel[1, 1, 0])
        # q, k, v [D, heads, dh] -> one [D, 3D], head h at h*dh.
        qkv = tensors["blocks.0.attn.qkv.kernel"]
        key = params[p + "SelfAttention/key/kernel"]
        assert np.array_equal(qkv[:, 8 + 4 + 1], key[:, 1, 1])
        assert np.array_equal(tensors["blocks.0.attn.out.kernel"][5],
                              params[p + "SelfAttention/out/kernel"][1, 1])
        assert tensors["blocks.1.moe.w1"].shape == (4, 8, 12)
        assert tensors["cls_token"].shape == (1, 8)
        moe = desc["moe"]
        assert moe == {"placement": "layers", "layers": [1],
                       "num_experts": 4, "k": 2, "capacity_ratio": 1.0,
                       "capacity_rule": "ceil", "multiple_of": 4,
                       "routing": "bpr", "score": "max",
                       "order": "softmax_topk", "normalize": False,
                       "activation": "gelu_tanh", "group_size": 2}
        assert desc["layer_norm_epsilon"] == 1e-6
        assert desc["mlp_activation"] == "gelu_tanh"


def test_flax_group_tokens_and_fixed_capacity():
    config = json.loads(json.dumps(_CONFIG))
    config["encoder"]["moe"]["group_size"] = 7
    config["encoder"]["moe"]["router"]["dispatcher"] = {"capacity": 3}
    with tempfile.TemporaryDirectory() as tmp:
        path, _ = _flax(tmp, config)
        desc, _ = importers.import_flax(path, config)
        assert desc["moe"]["group_tokens"] == 7
        assert desc["moe"]["capacity"] == 3
        assert "capacity_ratio" not in desc["moe"]


def test_flax_errors():
    with tempfile.TemporaryDirectory() as tmp:
        path, _ = _flax(tmp)
        _expect_error(lambda: importers.import_flax(path), "need the model "
                      "config")
        bad = json.loads(json.dumps(_CONFIG))
        bad["encoder"]["moe"]["router"]["dispatcher"]["capcity"] = 2
        _expect_error(lambda: importers.import_flax(path, bad),
                      "config: encoder.moe.router.dispatcher.capcity: "
                      "unknown field")
        bad = json.loads(json.dumps(_CONFIG))
        bad["encoder"]["num_heads"] = 4
        _expect_error(lambda: importers.import_flax(path, bad),
                      "encoder.num_heads", "the weights say 2")
        bad = json.loads(json.dumps(_CONFIG))
        bad["encoder"]["moe"]["layers"] = [0]
        _expect_error(lambda: importers.import_flax(path, bad),
                      "encoder.moe.layers")
        path, _ = _flax(tmp, edit=lambda p: p.update(extra=np.zeros(2)))
        _expect_error(lambda: importers.import_flax(path, _CONFIG),
                      "unknown key 'extra'")
        path, _ = _flax(tmp, edit=lambda p: p.pop("head/bias"))
        _expect_error(lambda: importers.import_flax(path, _CONFIG),
                      "missing key 'head/bias'")
        path, _ = _flax(tmp, edit=lambda p: p.update(
            cls=np.zeros((1, 2, 8), np.float32)))
        _expect_error(lambda: importers.import_flax(path, _CONFIG),
                      "'cls' has shape [1, 2, 8], expected [1, 1, 8]")
        dense = {k: v for k, v in _CONFIG.items() if k != "encoder"}
        dense["encoder"] = {"num_layers": 2, "mlp_dim": 12, "num_heads": 2,
                            "position_emb": {"name": "sincos2d"}}
        path, _ = _flax(tmp, dense)
        _expect_error(lambda: importers.import_flax(path, dense),
                      "position_emb.name", "sincos2d")


def test_timm_layouts_and_variants():
    with tempfile.TemporaryDirectory() as tmp:
        state = _timm_state(extra={
            "blocks.0.ls1.gamma": np.full(8, 2.0, np.float32)})
        desc, tensors = importers.import_timm(_write_timm(tmp, state),
                                              heads=2)
        # Linear [out, in] -> kernel [in, out]; LayerScale folded in.
        assert np.array_equal(tensors["blocks.0.attn.qkv.kernel"],
                              state["blocks.0.attn.qkv.weight"].T)
        assert np.allclose(tensors["blocks.0.attn.out.kernel"],
                           state["blocks.0.attn.proj.weight"].T * 2)
        assert np.array_equal(tensors["embedding.kernel"],
                              state["patch_embed.proj.weight"].reshape(8,
                                                                       48).T)
        assert desc["head"] == "token" and desc["mlp_activation"] == \
            "gelu_erf" and desc["layer_norm_epsilon"] == 1e-6
        assert desc["image"] == {"height": 8, "width": 8, "channels": 3}
        # no_embed_class: pos_embed over the patches; class token row 0.
        state = _timm_state(extra={"pos_embed": np.ones((1, 4, 8),
                                                        np.float32)})
        _, tensors = importers.import_timm(_write_timm(tmp, state), heads=2)
        assert (tensors["pos_embedding"][0] == 0).all()
        assert (tensors["pos_embedding"][1:] == 1).all()
        # No class token, fc_norm: gap head, final_ln on the pooled vector.
        state = _timm_state(drop=("cls_token", "norm.weight", "norm.bias"),
                            extra={"pos_embed": np.ones((1, 4, 8),
                                                        np.float32),
                                   "fc_norm.weight": np.ones(8, np.float32),
                                   "fc_norm.bias": np.zeros(8, np.float32)})
        desc, _ = importers.import_timm(_write_timm(tmp, state), heads=2)
        assert desc["head"] == "gap" and desc["final_norm"] == "pooled"
        # qkv without bias: zero bias.
        state = _timm_state(drop=("blocks.0.attn.qkv.bias",))
        _, tensors = importers.import_timm(_write_timm(tmp, state), heads=2)
        assert (tensors["blocks.0.attn.qkv.bias"] == 0).all()


def test_timm_errors():
    with tempfile.TemporaryDirectory() as tmp:
        path = _write_timm(tmp, _timm_state())
        _expect_error(lambda: importers.import_timm(path, heads=3),
                      "--heads 3")
        _expect_error(lambda: importers.import_timm(path, heads=2,
                                                    global_pool="avg"),
                      "class token")
        for extra, fragment in (
                ({"reg_token": np.zeros((1, 4, 8))}, "register tokens"),
                ({"blocks.0.attn.q_norm.weight": np.ones(4)}, "qk-norm"),
                ({"blocks.0.foo": np.ones(4)}, "unknown key 'blocks.0.foo'"),
                ({"blocks.0.mlp.fc1.weight": np.ones((12, 7))},
                 "'blocks.0.mlp.fc1.weight' has shape [12, 7], expected "
                 "[?, 8]")):
            state = _timm_state(extra={k: np.asarray(v, np.float32)
                                       for k, v in extra.items()})
            path = _write_timm(tmp, state)
            _expect_error(lambda: importers.import_timm(path, heads=2),
                          fragment)
        path = _write_timm(tmp, _timm_state(drop=("head.weight",)))
        _expect_error(lambda: importers.import_timm(path, heads=2),
                      "missing key 'head.weight'")
        path = os.path.join(tmp, "vit.pth")
        with open(path, "wb") as f:
            f.write(b"not a checkpoint")
        # Without torch (or with, on a bad file): one line either way.
        _expect_error(lambda: importers.import_timm(path, heads=2), "vit.pth")


def test_safetensors_dtypes():
    state = _timm_state()
    with tempfile.TemporaryDirectory() as tmp:
        exact = {k: (v.view(np.uint32) & 0xFFFF0000).view(np.float32)
                 for k, v in state.items()}
        read = _safetensors.read(_write_timm(tmp, exact, "BF16"))
        assert all(np.array_equal(read[k], exact[k]) for k in exact)
        read = _safetensors.read(_write_timm(tmp, state, "F16"))
        assert all(np.array_equal(read[k], state[k].astype(np.float16))
                   for k in state)
        path = _write_timm(tmp, state)
        with open(path, "r+b") as f:
            f.truncate(os.path.getsize(path) - 4)
        _expect_error(lambda: _safetensors.read(path), "outside the")


def test_upcycle():
    with tempfile.TemporaryDirectory() as tmp:
        desc, tensors = importers.import_timm(
            _write_timm(tmp, _timm_state(depth=4)), heads=2)
    up, out = importers.upcycle(desc, tensors,
                                "experts=3,k=2,placement=last-1")
    assert up["moe"]["placement"] == "last-n" and up["moe"]["last_n"] == 1
    assert up["moe"]["capacity_ratio"] == 1.5 and up["moe"]["normalize"]
    assert "blocks.3.mlp.fc1.kernel" not in out
    assert "blocks.1.mlp.fc1.kernel" in out
    for e in range(3):
        assert np.array_equal(out["blocks.3.moe.w1"][e],
                              tensors["blocks.3.mlp.fc1.kernel"])
    assert (out["blocks.3.moe.router.kernel"] == 0).all()
    blocks = {"every-2": [1, 3], "every-3": [2], "blocks-0+2": [0, 2]}
    for placement, want in blocks.items():
        _, out = importers.upcycle(desc, tensors,
                                   f"experts=2,k=1,placement={placement}")
        got = sorted(int(k.split(".")[1]) for k in out
                     if k.endswith("moe.w1"))
        assert got == want, (placement, got)
    spec = "experts=2,k=1,placement=every-2,noise=0.1,seed=4"
    _, a = importers.upcycle(desc, tensors, spec)
    _, b = importers.upcycle(desc, tensors, spec)
    assert np.array_equal(a["blocks.1.moe.w1"], b["blocks.1.moe.w1"])
    diff = a["blocks.1.moe.w1"] - tensors["blocks.1.mlp.fc1.kernel"]
    assert 0.05 < diff.std() < 0.2
    assert not np.array_equal(a["blocks.1.moe.w1"][0],
                              a["blocks.1.moe.w1"][1])
    for spec, fragment in (
            ("experts=2,k=3,placement=every-2", "k=3"),
            ("experts=2,k=1", "placement= is required"),
            ("experts=2,k=1,placement=last-9", "placement=last-9"),
            ("experts=2,k=1,placement=every-2,colour=red", "unknown field"),
            ("experts=x,k=1,placement=every-2", "--upcycle experts"),
            ("experts=2,k=1,placement=every-2,routing=greedy", "routing")):
        _expect_error(lambda: importers.upcycle(desc, tensors, spec),
                      fragment)
    _expect_error(lambda: importers.upcycle(up, out, "experts=2,k=1,"
                                            "placement=every-2"),
                  "already has MoE")


def test_command_line():
    with tempfile.TemporaryDirectory() as tmp:
        path = _write_timm(tmp, _timm_state(depth=2))
        prefix = os.path.join(tmp, "out", "model")
        stdout, stderr = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(stdout), \
                contextlib.redirect_stderr(stderr):
            status = cli.main(["timm", path, "--heads", "2", "-o", prefix,
                               "--upcycle", "experts=2,k=1,placement=every-2"])
        assert status == 0, stderr.getvalue()
        assert "MoE in blocks [1] (E=2, k=1)" in stdout.getvalue()
        with open(prefix + ".json") as f:
            assert json.load(f)["moe"]["num_experts"] == 2
        assert "blocks.1.moe.w2" in _safetensors.read(prefix +
                                                      ".safetensors")
        stderr = io.StringIO()
        with contextlib.redirect_stderr(stderr):
            status = cli.main(["timm", path, "--heads", "3", "-o", prefix])
        assert status == 1
        lines = stderr.getvalue().splitlines()
        assert len(lines) == 1 and lines[0].startswith(
            "vmoe.importers: error: --heads 3"), lines
        # --preprocess: written as given; a bad one writes nothing.
        spec = "decode|resize_small(12)|central_crop(8)|value_range(-1, 1)"
        other = os.path.join(tmp, "other")
        stdout = io.StringIO()
        with contextlib.redirect_stdout(stdout):
            status = cli.main(["timm", path, "--heads", "2", "-o", other,
                               "--preprocess", spec])
        assert status == 0 and f", preprocess '{spec}'" in stdout.getvalue()
        with open(other + ".json") as f:
            written = json.load(f)
        assert written["preprocess"] == spec and "input" not in written
        os.remove(other + ".json")
        stderr = io.StringIO()
        with contextlib.redirect_stderr(stderr):
            status = cli.main(["timm", path, "--heads", "2", "-o", other,
                               "--preprocess", "decode|resize(16)"])
        lines = stderr.getvalue().splitlines()
        assert status == 1 and lines == [
            "vmoe.importers: error: --preprocess: the pipeline must end "
            "with a resize or central_crop to the model's 8x8 (height x "
            "width), got 16x16"], lines
        assert not os.path.exists(other + ".json")


# A whole V-MoE training config (config.to_json()): the model, training
# and evaluation pipelines with their label ops, the evaluation's capacity.
_LABELS = 'onehot(3, inkey="label", outkey="labels")|keep("image", "labels")'
_WHOLE_CONFIG = {
    "model": _CONFIG,
    "dataset": {
        "train": {"process": "decode_jpeg_and_inception_crop(8)|flip_lr|"
                             f"randaug(2, 10)|value_range(-1,1)|{_LABELS}"},
        "test": {"process": "decode|resize_small(10)|central_crop(8)|"
                            f"value_range(-1,1)|{_LABELS}"}},
    "evaluate": {"model_overrides": {"encoder": {"moe": {"router": {
        "dispatcher": {"capacity_factor": 2.0}}}}}},
    "optimizer": {"name": "adam"}}


def test_flax_preprocess():
    """The Flax importer writes the config's evaluation pipeline (its image
    ops), else V-MoE's default; --preprocess, --mean/--std replace them;
    a bad pipeline is one line naming where it came from."""
    with tempfile.TemporaryDirectory() as tmp:
        path, _ = _flax(tmp)
        desc, _ = importers.import_flax(path, _CONFIG)
        assert desc["preprocess"] == "decode|resize(8)|value_range(-1, 1)"
        assert "input" not in desc
        config = os.path.join(tmp, "config.json")
        with open(config, "w") as f:
            json.dump(_WHOLE_CONFIG, f)
        desc, _ = importers.import_flax(path, config)
        assert desc["preprocess"] == \
            "decode|resize_small(10)|central_crop(8)|value_range(-1,1)"
        assert desc["moe"]["capacity_ratio"] == 2.0 and "input" not in desc
        desc, _ = importers.import_flax(path, config, mean=[0.25], std=[2])
        assert desc["preprocess"] == "decode|resize_small(10)|central_crop(8)"
        assert desc["input"] == {"mean": [0.25], "std": [2.0]}
        desc, _ = importers.import_flax(path, config, preprocess="decode")
        assert desc["preprocess"] == "decode" and "input" not in desc
        whole = json.loads(json.dumps(_WHOLE_CONFIG))
        test = whole["dataset"]["test"]
        for process, fragment in (
                (f"decode|flip_lr|resize(8)|{_LABELS}",
                 "config: dataset.test.process: flip_lr is a random "
                 "training augmentation, not an evaluation op (op 2: "
                 "'flip_lr')"),
                (f"decode|resize(8)|{_LABELS}|standardize()",
                 "config: dataset.test.process: unknown op 'standardize' "
                 "(known: decode, resize, resize_small, central_crop, "
                 "value_range) (op 5: 'standardize()')"),
                ("decode|resize(384)|value_range(-1,1)",
                 "config: dataset.test.process: the pipeline must end with "
                 "a resize or central_crop to the model's 8x8 (height x "
                 "width), got 384x384")):
            test["process"] = process
            text = _expect_error(lambda: importers.import_flax(path, whole),
                                 fragment)
            assert text == fragment, text
        # The override is the way around an unsupported pipeline.
        desc, _ = importers.import_flax(path, whole,
                                        preprocess="decode|resize(8)")
        assert desc["preprocess"] == "decode|resize(8)"
        _expect_error(lambda: importers.import_flax(
            path, _CONFIG, preprocess="decode|resize(8)|value_range(0, 1)",
            mean=[0.5]), "--mean/--std: not used with value_range in "
            "--preprocess")
        _expect_error(lambda: importers.import_flax(
            path, _CONFIG, preprocess="decode(channels=3)|resize(8)"),
            "--preprocess: decode(channels=3): the model takes 1-channel "
            "images")
        # Checked before the checkpoint is read.
        _expect_error(lambda: importers.import_flax(
            os.path.join(tmp, "missing.npz"), _CONFIG,
            preprocess="decode|resize(8, method='bicubic')"),
            "--preprocess: resize: method='bicubic' is not supported (only "
            "'bilinear') (op 2: 'resize(8, method='bicubic')')")


def test_released_preprocess():
    """What import_flax writes for each released checkpoint: the image ops
    of its config's evaluation pipeline, checked against its image."""
    from vmoe.importers import evaluation, flax_config, preprocess
    want = {224: "decode|resize_small(256)|central_crop(224)|"
                 "value_range(-1,1)",
            384: "decode|resize(384)|value_range(-1,1)"}
    for name in flax_config.released.CONFIGS:
        _, process, field = flax_config.split_config(
            flax_config.load_config(name))
        side = 384 if "_ft_" in name else 224
        fields = evaluation.pipeline_fields(
            preprocess.evaluation_ops(process, field), field, channels=3,
            image=(side, side))
        assert fields == {"preprocess": want[side]}, (name, fields)


def test_timm_preprocess():
    """timm's evaluation transform from its pretrained_cfg (timm's
    defaults without one): shorter side floor(S / crop_pct), a central
    crop, its mean and std as `input`."""
    with tempfile.TemporaryDirectory() as tmp:
        path = _write_timm(tmp, _timm_state())
        desc, _ = importers.import_timm(path, heads=2)
        assert desc["preprocess"] == "decode|resize_small(9)|central_crop(8)"
        assert desc["input"] == {"mean": [0.5] * 3, "std": [0.5] * 3}
        hub = os.path.join(tmp, "config.json")
        with open(hub, "w") as f:
            json.dump({"architecture": "vit_tiny", "num_classes": 3,
                       "pretrained_cfg": {
                           "input_size": [3, 8, 8], "crop_pct": 0.5,
                           "crop_mode": "center", "interpolation": "bicubic",
                           "mean": [0.485, 0.456, 0.406],
                           "std": [0.229, 0.224, 0.225]}}, f)
        desc, _ = importers.import_timm(path, heads=2, pretrained_cfg=hub)
        assert desc["preprocess"] == \
            "decode|resize_small(16)|central_crop(8)"
        assert desc["input"] == {"mean": [0.485, 0.456, 0.406],
                                 "std": [0.229, 0.224, 0.225]}
        desc, _ = importers.import_timm(
            path, heads=2, mean=[0.5], pretrained_cfg={
                "crop_pct": 0.9, "crop_mode": "squash", "std": [0.25]})
        assert desc["preprocess"] == "decode|resize(8)|central_crop(8)"
        assert desc["input"] == {"mean": [0.5] * 3, "std": [0.25] * 3}
        desc, _ = importers.import_timm(
            path, heads=2, preprocess="decode|resize(8)|value_range(-1, 1)")
        assert desc["preprocess"] == "decode|resize(8)|value_range(-1, 1)"
        assert "input" not in desc
        for cfg, fragment in (
                ({"input_size": [3, 16, 16]}, "pretrained_cfg.input_size: "
                 "[3, 16, 16], the weights are for 3x8x8 images"),
                ({"crop_mode": "border"}, "pretrained_cfg: crop_mode "
                 "'border' is not supported (center or squash); give "
                 "--preprocess"),
                ({"crop_pct": 2}, "pretrained_cfg.crop_pct: expected a "
                 "number in (0, 1], got 2"),
                ({"mean": [0.5, 0.5]}, "pretrained_cfg.mean: give 1 or 3 "
                 "values, got 2"),
                ([1], "pretrained_cfg: must be a JSON object")):
            _expect_error(lambda: importers.import_timm(
                path, heads=2, pretrained_cfg=cfg), fragment)
        with open(hub, "w") as f:
            f.write('{"pretrained_cfg": {"std": [0, 1, 1]}}')
        _expect_error(lambda: importers.import_timm(
            path, heads=2, pretrained_cfg=hub), f"{hub}: pretrained_cfg.std: "
            "must not contain 0")


def run_tests(module_name, namespace):
    """Runs the test_* functions of `namespace` (a module's globals()),
    reporting every failure; returns the exit status."""
    tests = [value for name, value in sorted(namespace.items())
             if name.startswith("test_") and callable(value)]
    failed = []
    for test in tests:
        try:
            test()
        except Exception:  # report every failure, then exit non-zero
            failed.append(test.__name__)
            print(f"FAIL {test.__name__}", file=sys.stderr)
            traceback.print_exc()
    print(f"{module_name}: {len(tests) - len(failed)} passed, "
          f"{len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(run_tests("vmoe.importers.test_importers", globals()))
