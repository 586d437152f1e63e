"""Self-tests of the importers on hostile and damaged input (numpy only).

    cd python && python3 -m vmoe.importers.test_hardening

Each class of failure of issue 24 with its variants: zero-sized tensors,
damaged .npz archives (truncated, bad CRC, a header claiming 2^40 floats,
a .npy renamed, pickled members), JSON nested 100,000 deep, not UTF-8 or
with NaN (configs and safetensors headers), config fields of the wrong
type, descriptions the compiler would refuse (checks.check_description),
unchecked upcycling numbers, the guarded public functions and the command
line: every one a single-line ImporterError (or exit status 2 with one
line for a bad command line), never a traceback, and no file written.
The .pth reader's tests need torch to write checkpoints:
test/python/Inputs/pth_checks.py.
"""

import contextlib
import io
import json
import os
import struct
import sys
import tempfile
import zipfile

import numpy as np

from vmoe import importers, safetensors
from vmoe.importers import __main__ as cli
from vmoe.importers import test_importers as helpers

_CONFIG = helpers.CONFIG
_flax = helpers.flax_checkpoint
_timm_state = helpers.timm_state
_write_timm = helpers.write_timm
_expect_error = helpers.expect_error


def _config(**edits):
    """_CONFIG with dotted fields replaced (None deletes)."""
    config = json.loads(json.dumps(_CONFIG))
    for path, value in edits.items():
        *parents, key = path.split("__")
        node = config
        for part in parents:
            node = node[part]
        if value is None:
            node.pop(key, None)
        else:
            node[key] = value
    return config


def rezip(path, edit):
    """Rewrites the archive at `path` with edit(name, bytes) per member."""
    with zipfile.ZipFile(path) as src:
        members = [(i.filename, src.read(i)) for i in src.infolist()]
    with zipfile.ZipFile(path, "w") as dst:
        for name, data in members:
            dst.writestr(name, edit(name, data))


def test_zero_sizes():
    with tempfile.TemporaryDirectory() as tmp:
        for extra, fragment in (
                ({"pos_embed": np.zeros((1, 0, 8))}, "'pos_embed' has shape "
                 "[1, 0, 8]: an empty dimension"),
                ({"patch_embed.proj.weight": np.zeros((8, 3, 0, 0))},
                 "an empty dimension"),
                ({"patch_embed.proj.weight": np.zeros((0, 3, 4, 4))},
                 "an empty dimension"),
                ({"head.weight": np.zeros((0, 8)), "head.bias": np.zeros(0)},
                 "an empty dimension")):
            state = _timm_state(extra={k: np.asarray(v, np.float32)
                                       for k, v in extra.items()})
            path = _write_timm(tmp, state)
            _expect_error(lambda: importers.import_timm(path, heads=2),
                          fragment)
        path = _write_timm(tmp, _timm_state(drop=("cls_token",), extra={
            "pos_embed": np.zeros((1, 0, 8), np.float32)}))
        _expect_error(lambda: importers.import_timm(path, heads=2),
                      "empty dimension")
        moe = "Encoder/encoderblock_1/Moe/"
        for key, shape in (("embedding/kernel", (0, 0, 1, 8)),
                           ("Encoder/posembed_input/pos_embedding",
                            (1, 0, 8)), ("head/kernel", (8, 0)),
                           (moe + "Router/dense/kernel", (8, 0)),
                           (moe + "Mlp/Dense_0/kernel", (0, 8, 12))):
            path, _ = _flax(tmp, edit=lambda p, k=key, s=shape: p.update(
                {k: np.zeros(s, np.float32)}))
            _expect_error(lambda: importers.import_flax(path, _CONFIG),
                          "zero-sized dimension")


def test_npz_damage():
    with tempfile.TemporaryDirectory() as tmp:
        path, _ = _flax(tmp)
        with open(path, "rb") as f:
            good = f.read()

        def write(data):
            with open(path, "wb") as f:
                f.write(data)
            return path
        for data in (good[:len(good) // 2], good[:100], b"PK\x03\x04"):
            write(data)
            _expect_error(lambda: importers.import_flax(path, _CONFIG),
                          "ckpt.npz: not a readable .npz (zip)")
        write(b"")
        _expect_error(lambda: importers.import_flax(path, _CONFIG),
                      "ckpt.npz: not a Flax checkpoint")
        # A flipped byte inside a stored member's data: its CRC fails.
        with zipfile.ZipFile(io.BytesIO(good)) as archive:
            info = archive.getinfo("head/bias.npy")
        data = bytearray(good)
        data[info.header_offset + 30 + len(info.filename) + 130] ^= 0xFF
        write(bytes(data))
        _expect_error(lambda: importers.import_flax(path, _CONFIG),
                      "Bad CRC-32")
        # Headers claiming other shapes, 2^40 floats among them.
        for shape, fragment in (("(1099511627776,)", "(4398046511104 "
                                 "bytes), the member holds"),
                                ("(2, 1099511627776, 2)", "the header claims"),
                                ("(4611686018427387904, 4)",
                                 "the header claims"),
                                ("(4,)", "(16 bytes)")):
            write(good)
            rezip(path, lambda n, d, s=shape: d.replace(b"(3,)", s.encode())
                   if n == "head/bias.npy" else d)
            _expect_error(lambda: importers.import_flax(path, _CONFIG),
                          "'head/bias'", fragment)
        # Damaged header dicts: numpy raises ValueError, or TokenError
        # for an unterminated string.
        for old, new, fragment in (
                (b"'descr': '<f4'", b"'descr': '<f4 ",
                 "not a .npy array (Cannot parse header"),
                (b"{'descr'", b"{" + b"'" * 3 + b"descr'",
                 "not a .npy array"),
                (b"'<f4'", b"'|O8'", "an object array")):
            write(good)
            rezip(path, lambda n, d, o=old, w=new: d.replace(o, w)
                  if n == "head/bias.npy" else d)
            _expect_error(lambda: importers.import_flax(path, _CONFIG),
                          "'head/bias'", fragment)
        # A .npy renamed .npz; a pickled member; a member not .npy.
        np.save(os.path.join(tmp, "one.npy"), np.zeros(3, np.float32))
        os.replace(os.path.join(tmp, "one.npy"), path)
        _expect_error(lambda: importers.import_flax(path, _CONFIG),
                      "a .npy file (one array), not an .npz")
        np.savez(path, obj=np.array([{"a": 1}], dtype=object))
        _expect_error(lambda: importers.import_flax(path, _CONFIG),
                      "an object array (pickled data is never loaded)")
        with zipfile.ZipFile(path, "w") as archive:
            archive.writestr("notes.txt", "hello")
        _expect_error(lambda: importers.import_flax(path, _CONFIG),
                      "'notes.txt' is not a .npy array")
        # A member with an empty name (found by the fuzzer: zipfile's
        # is_dir() indexes the name).
        with zipfile.ZipFile(path, "w") as archive:
            archive.writestr(zipfile.ZipInfo(""), "x")
        _expect_error(lambda: importers.import_flax(path, _CONFIG),
                      "member '' is not a .npy array")
        np.savez(path, ints=np.zeros(3, np.int64))
        _expect_error(lambda: importers.import_flax(path, _CONFIG),
                      "dtype int64, expected floating point")


def test_json_inputs():
    with tempfile.TemporaryDirectory() as tmp:
        path, _ = _flax(tmp)
        config = os.path.join(tmp, "config.json")
        for data, fragment in (
                (b"[" * 100000, "nesting exceeds the limit of 64 levels"),
                (b'{"a":' * 65 + b"1" + b"}" * 65, "nesting exceeds"),
                (b'{"name": "\xff"}', "not UTF-8 (byte 10)"),
                (b'{"num_classes": NaN}', "NaN is not JSON"),
                (b'{"num_classes": 1e400}', "1e400 is not finite"),
                (b'{"num_classes": ' + b"9" * 5000 + b"}",
                 "malformed JSON"),
                (b'{"num_classes": 3', "malformed JSON")):
            with open(config, "wb") as f:
                f.write(data)
            _expect_error(lambda: importers.import_flax(path, config),
                          "config.json: ", fragment)
        # Config fields of the wrong type: one line naming the field.
        for edits, fragment in (
                ({"encoder__moe__layers": "1"}, "encoder.moe.layers"),
                ({"encoder__moe__layers": 1}, "encoder.moe.layers"),
                ({"encoder__moe__layers": [1.5]}, "encoder.moe.layers"),
                ({"encoder__moe__layers": [True]}, "encoder.moe.layers"),
                ({"encoder__moe__layers": [{}]}, "encoder.moe.layers"),
                ({"classifier": {}}, "classifier"),
                ({"classifier": [1]}, "classifier")):
            _expect_error(lambda: importers.import_flax(
                path, _config(**edits)), fragment)
        # Safetensors headers: deep, not UTF-8, a length above 100 MB.
        weights = os.path.join(tmp, "w.safetensors")
        for header, fragment in ((b"[" * 100000, "nesting exceeds"),
                                 (b'{"a": {"b":' * 40 + b"1" + b"}}" * 40,
                                  "nesting exceeds"),
                                 (b'{"\xfe": 1}', "not UTF-8"),
                                 (b'{"x": NaN}', "NaN is not JSON")):
            with open(weights, "wb") as f:
                f.write(struct.pack("<Q", len(header)) + header)
            _expect_error(lambda: importers.import_timm(weights, heads=2),
                          "w.safetensors: invalid safetensors header",
                          fragment)
        with open(weights, "wb") as f:
            f.write(struct.pack("<Q", 200_000_000) + b" " * 200_000_008)
        _expect_error(lambda: importers.import_timm(weights, heads=2),
                      "header length 200000000 is above the limit 100000000")
        os.remove(weights)
        try:
            safetensors.load(os.path.join(tmp, "config.json"))
        except safetensors.FormatError as err:  # also a VMoEError
            assert isinstance(err, ValueError) and "\n" not in str(err)
        else:
            raise AssertionError("no FormatError")


def test_descriptions_the_compiler_refuses():
    with tempfile.TemporaryDirectory() as tmp:
        path, _ = _flax(tmp)
        d = "encoder__moe__router__dispatcher__"
        # The Flax config reader names the config field where it can
        # (flax_config.py); the description check catches the rest.
        c = "config: encoder.moe.router."
        for edits, fragment in (
                ({"encoder__moe__router__num_selected_experts": 0},
                 c + "num_selected_experts: 0, expected an integer in 1..4"),
                ({"encoder__moe__router__num_selected_experts": 5},
                 c + "num_selected_experts: 5, expected an integer in 1..4"),
                ({"encoder__moe__router__num_selected_experts": "2"},
                 c + 'num_selected_experts: "2", expected an integer'),
                ({d + "capacity_factor": float("nan")},
                 c + "dispatcher.capacity_factor: nan, expected a finite "
                 "number > 0"),
                ({d + "capacity_factor": float("inf")},
                 c + "dispatcher.capacity_factor: inf, expected a finite "
                 "number > 0"),
                ({d + "capacity_factor": 5000},
                 # the compiler's shortest %g: 5e+03
                 "model description: moe.capacity_ratio: must be <= 4096 "
                 "(the limit), got 5e+03"),
                ({d + "capacity_factor": -1},
                 c + "dispatcher.capacity_factor: -1, expected a finite "
                 "number > 0"),
                ({d + "capacity_factor": 0.001,
                  d + "capacity_ceil_or_round": "round"},
                 "model description: moe.capacity_ratio: capacity rounds to "
                 "0 (k*S*C/E = 2*10*0.001/4 = 0.005)"),
                ({d + "capacity_ceil_or_round": "floor"},
                 c + 'dispatcher.capacity_ceil_or_round: "floor", expected '
                 "one of 'ceil', 'round'"),
                ({d + "capacity_multiple_of": "4"},
                 c + 'dispatcher.capacity_multiple_of: "4", expected an '
                 "integer"),
                ({d + "capacity_factor": None, d + "capacity": 0},
                 c + "dispatcher.capacity: 0, expected an integer >= 1")):
            _expect_error(lambda: importers.import_flax(
                path, _config(**edits)), fragment)
        for options, fragment in (
                ({"std": (0,)}, "std: must not contain 0"),
                ({"std": (0.5, float("nan"))}, "std: must be a finite"),
                ({"mean": (float("inf"),)}, "mean: must be a finite"),
                ({"layer_norm_epsilon": -1.0},
                 "layer_norm_epsilon: must be a finite number > 0, got -1"),
                ({"layer_norm_epsilon": float("nan")},
                 "layer_norm_epsilon: must be a finite number > 0, got nan"),
                ({"mlp_activation": "swish"}, "mlp_activation: must be one"),
                ({"image_size": (8, 4)}, "does not give the 4 patches"),
                ({"name": 7}, "name: must be a string")):
            _expect_error(lambda: importers.import_flax(path, _CONFIG,
                                                        **options),
                          fragment)
        state = _timm_state()
        timm_path = _write_timm(tmp, state)
        for options, fragment in (({"std": (0,)}, "std: must not contain 0"),
                                  ({"layer_norm_epsilon": 0.0}, "got 0"),
                                  ({"heads": 0}, "--heads"),
                                  ({"heads": 2**40}, "--heads")):
            _expect_error(lambda: importers.import_timm(
                timm_path, **dict({"heads": 2}, **options)), fragment)


def test_write_model_checks():
    with tempfile.TemporaryDirectory() as tmp:
        desc, tensors = importers.import_timm(
            _write_timm(tmp, _timm_state(depth=2)), heads=2)
        prefix = os.path.join(tmp, "out")
        for edit, fragment in (
                (lambda d, t: d.update(layer_norm_epsilon=float("nan")),
                 "layer_norm_epsilon: must be a finite number > 0, got nan"),
                (lambda d, t: d.update(width=0), "width: must be >= 1"),
                (lambda d, t: d.update(colour="red"), "colour: unknown field"),
                (lambda d, t: d.update(depth=2**40),
                 "depth: must be <= 1024 (the limit)"),
                (lambda d, t: d["input"].update(std=[0.5, 0, 0.5]),
                 "input.std: must not contain 0"),
                (lambda d, t: d.update(class_names=["cat"]),
                 "class_names: must have 3 entries (classes), got 1"),
                (lambda d, t: t.pop("head.bias"),
                 "weights: missing tensor 'head.bias'"),
                (lambda d, t: t.update(extra=np.zeros(2)),
                 "weights: tensor 'extra' is not part of the described "
                 "model"),
                (lambda d, t: t.update({"head.bias": np.zeros(4)}),
                 "weights: tensor 'head.bias' has shape [4], the "
                 "description needs [3]")):
            d, t = json.loads(json.dumps(desc)), dict(tensors)
            edit(d, t)
            _expect_error(lambda: importers.write_model(prefix, d, t),
                          fragment)
            assert not os.path.exists(prefix + ".json"), fragment
            assert not os.path.exists(prefix + ".safetensors"), fragment
        importers.write_model(prefix, dict(desc, class_names=[]), tensors)
        importers.write_model(prefix, desc, tensors)
        with open(prefix + ".json", encoding="utf-8") as f:
            assert json.load(f) == desc


def test_upcycle_numbers():
    with tempfile.TemporaryDirectory() as tmp:
        desc, tensors = importers.import_timm(
            _write_timm(tmp, _timm_state(depth=2)), heads=2)
    base = "experts=2,k=1,placement=every-2"
    for spec, fragment in (
            (base + ",noise=inf", "--upcycle noise: must be a finite number"),
            (base + ",noise=nan", "--upcycle noise: must be a finite number"),
            (base + ",noise=-1", "--upcycle noise: must be >= 0"),
            (base + ",capacity_ratio=inf", "--upcycle capacity_ratio: must "
             "be a finite number, got inf"),
            (base + ",capacity_ratio=0", "--upcycle capacity_ratio: must be "
             "> 0, got 0"),
            (base + ",capacity_ratio=5000", "--upcycle capacity_ratio: must "
             "be <= 4096 (the limit)"),
            (base + ",capacity_ratio=0.01", "capacity rounds to 0"),
            (base + ",router_std=nan", "--upcycle router_std"),
            (base + ",seed=-1", "--upcycle seed: must be >= 0"),
            (base + ",group_size=0", "--upcycle group_size: must be >= 1"),
            (base + ",group_size=9999999", "moe.group_size: 9999999 images"),
            ("experts=1099511627776,k=1,placement=every-2",
             "--upcycle experts: must be <= 16777216 (the limit)"),
            ("experts=16777217,k=1,placement=every-2", "--upcycle experts"),
            ("experts=2,k=0,placement=every-2", "--upcycle k: must be >= 1"),
            ("experts=2.5,k=1,placement=every-2", "--upcycle experts: "
             "expected an integer"),
            ("", "--upcycle: '' is not key=value"),
            (",", "is not key=value")):
        _expect_error(lambda s=spec: importers.upcycle(desc, tensors, s),
                      fragment)
    # The input must be a valid dense model.
    broken = dict(tensors)
    del broken["head.bias"]
    _expect_error(lambda: importers.upcycle(desc, broken, base),
                  "missing tensor 'head.bias'")


def test_guarded_functions():
    """Wrong types and other surprises: one line, the file named."""
    for call, fragment in (
            (lambda: importers.import_timm(42, heads=2), "import_timm: "),
            (lambda: importers.import_flax(None), "import_flax: "),
            (lambda: importers.upcycle({}, {}, "experts=2"),
             "--upcycle: the model to upcycle: format: missing"),
            (lambda: importers.write_model("/nonexistent/dir/x", {}, {}),
             "model description:")):
        _expect_error(call, fragment)
    assert importers.import_timm.__wrapped__ is not None
    assert issubclass(importers.ImporterError, ValueError)


def _cli(argv):
    """(exit status, stdout, stderr lines) of the command line."""
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), \
            contextlib.redirect_stderr(stderr):
        try:
            status = cli.main(argv)
        except SystemExit as exit_:
            status = exit_.code
    return status, stdout.getvalue(), stderr.getvalue().splitlines()


def test_command_line_one_line():
    with tempfile.TemporaryDirectory() as tmp:
        path = _write_timm(tmp, _timm_state(depth=2))
        out = os.path.join(tmp, "out", "m")
        ok = ["timm", path, "--heads", "2", "-o", out]
        for argv, status, fragment in (
                ([], 2, "the following arguments are required"),
                (["timm"], 2, "the following arguments are required"),
                (["onnx", path], 2, "invalid choice: 'onnx'"),
                (ok + ["--bogus"], 2, "unrecognized arguments: --bogus"),
                (ok[:3] + ["0", "-o", out], 2, "argument --heads: must be "
                 ">= 1, got 0"),
                (ok[:3] + [str(2**40), "-o", out], 2,
                 "--heads: must be <= 16777216"),
                (ok + ["--image-size", "0x8"], 2,
                 "argument --image-size: must be >= 1, got 0"),
                (ok + ["--image-size", "8x8x8"], 2, "expected N or HxW"),
                (ok + ["--image-size", "99999999"], 2, "must be <= 16777216"),
                (ok + ["--std", "nan"], 2, "argument --std: must be a finite "
                 "number, got nan"),
                (ok + ["--mean", "1,x"], 2, "argument --mean: expected a "
                 "number"),
                (ok + ["--layer-norm-epsilon", "-1"], 2,
                 "argument --layer-norm-epsilon: must be > 0, got -1"),
                (ok + ["--layer-norm-epsilon", "inf"], 2, "finite"),
                (ok + ["--std", "0"], 1, "std: must not contain 0"),
                (ok + ["--upcycle", ""], 1, "--upcycle: '' is not "
                 "key=value"),
                (ok + ["--upcycle", "experts=2,k=1,placement=every-2,"
                       "noise=inf"], 1, "--upcycle noise: must be a finite"),
                (["timm", os.path.join(tmp, "none.pth"), "--heads", "2",
                  "-o", out], 1, "none.pth: No such file or directory"),
                (["flax", path, "-o", out], 1, "not a Flax checkpoint"),
                (["flax", "/dev/zero", "-o", out], 1,
                 "/dev/zero: not a regular file"),
                (["timm", "/dev/zero", "--heads", "2", "-o", out], 1,
                 "/dev/zero: not a regular file"),
                (["flax", path, "--config", tmp, "-o", out], 1,
                 f"{tmp}: not a regular file"),
                (["timm", tmp, "--heads", "2", "-o", out], 1,
                 f"{tmp}: not a regular file")):
            got, stdout, lines = _cli(argv)
            assert got == status and len(lines) == 1 and \
                lines[0].startswith("vmoe.importers: error: ") and \
                fragment in lines[0] and not stdout, (argv, got, lines)
            assert not os.path.exists(out + ".json"), argv
        # An exception no check anticipated: still one line, the file named.
        real = cli.import_timm
        for failure, fragment in ((RuntimeError("boom\nsecond line"),
                                   "RuntimeError: boom"),
                                  (MemoryError(), "out of memory"),
                                  (RecursionError(), "nested too deeply")):
            def fail(*args, err=failure, **kwargs):
                del args, kwargs
                raise err
            cli.import_timm = fail
            try:
                got, _, lines = _cli(ok)
            finally:
                cli.import_timm = real
            assert got == 1 and len(lines) == 1 and lines[0].startswith(
                f"vmoe.importers: error: {path}: {fragment}"), lines
        got, stdout, lines = _cli(ok)
        assert got == 0 and not lines and "wrote" in stdout, lines


if __name__ == "__main__":
    sys.exit(helpers.run_tests("vmoe.importers.test_hardening", globals()))
