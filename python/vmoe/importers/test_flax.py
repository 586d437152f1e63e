"""Self-tests of the Flax importer's readers and config (numpy, msgpack).

    cd python && python3 -m vmoe.importers.test_flax

The checkpoint formats (.npz, vmoe's partitioned .index + shards, flax
msgpack) read back what our writers (vmoe_tools.flax_files) wrote, bit for
bit; every malformed file or config -- truncated, corrupt, a wrong ext
type, a missing leaf, a slice out of bounds, a claimed 2^40 elements,
nesting 100,000 deep, not UTF-8, NaN capacity, k = 0 ... -- is one
ImporterError line naming the file or field, with no large allocation
(tracemalloc); a fuzz loop mutates valid files and configs and accepts
nothing but ImporterError. The numerics of whole models are checked by
vmoe_tools.check_import (test/Integration/CPU/importers-flax-formats.test).
"""

import contextlib
import copy
import io
import json
import os
import struct
import sys
import tempfile
import tracemalloc
import zipfile

import msgpack
import numpy as np

from vmoe import importers
from vmoe.importers import __main__ as cli
from vmoe.importers import flax_checkpoint, flax_config, partitioned
from vmoe.importers.preprocess import evaluation_ops
from vmoe_ref import selftest
from vmoe_tools import flax_files, flax_layout

_MOE = {"layers": [1], "num_experts": 4, "group_size": 10,
        "router": {"num_selected_experts": 2,
                   "dispatcher": {"capacity_factor": 1.0,
                                  "batch_priority": True}}}
_CONFIG = {"name": "VisionTransformerMoe", "num_classes": 3,
           "patch_size": [4, 4], "hidden_size": 8, "classifier": "token",
           "encoder": {"num_layers": 2, "mlp_dim": 12, "num_heads": 2,
                       "moe": _MOE}}
_BIG = 1 << 40


def _config(**moe):
    """_CONFIG with encoder.moe fields replaced (router.x=... by path)."""
    config = copy.deepcopy(_CONFIG)
    for path, value in moe.items():
        node = config["encoder"]["moe"]
        *parents, leaf = path.split("__")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return config


def _params(config=_CONFIG, scheme="vmoe"):
    return flax_layout.random_params(config, (8, 8), 1, scheme, 0)


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


def _small_memory(fn, *fragments, limit=64 << 20):
    """_expect_error, and tracemalloc's peak stays under `limit`."""
    tracemalloc.start()
    try:
        _expect_error(fn, *fragments)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < limit, f"peak {peak} bytes for {fragments}"


def _write(path, data):
    with open(path, "wb") as f:
        f.write(data)
    return path


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def _import(path, config=_CONFIG):
    return lambda: importers.import_flax(path, config)


# --- formats read back exactly ------------------------------------------------

def test_partitioned_round_trip():
    params = _params()
    split = "Encoder/encoderblock_1/Moe/Mlp/Dense_0/kernel"
    bf16 = {"head/kernel": flax_files.bf16_exact(params["head/kernel"])}
    params.update(bf16)
    with tempfile.TemporaryDirectory() as tmp:
        prefix = os.path.join(tmp, "ckpt")
        files = flax_files.write_partitioned(prefix, params, shards=2,
                                             bf16=tuple(bf16), split=(split,),
                                             subchunk=5)
        assert len(files) == 3
        # The split array is in both shards.
        for shard in files[1:]:
            content = msgpack.unpackb(_read(shard), raw=False)
            number = flax_files.leaf_order(params).index(split)
            assert str(number) in content, shard
        for given in (prefix, prefix + ".index", files[2]):
            got = flax_checkpoint.load_checkpoint(given)
            assert sorted(got) == sorted(params)
            assert all(np.array_equal(got[k], params[k]) for k in params)
        desc, _ = importers.import_flax(prefix, _CONFIG)
        assert desc["name"] == "ckpt" and desc["moe"]["k"] == 2


def test_partitioned_training_state_and_unversioned():
    params = _params()
    state = {"params/" + k: v for k, v in params.items()}
    state["opt_state/mu/head/kernel"] = np.zeros((8, 3), np.float32)
    state["step"] = np.zeros((), np.float32)
    with tempfile.TemporaryDirectory() as tmp:
        prefix = os.path.join(tmp, "state")
        flax_files.write_partitioned(prefix, state, shards=3, version=False)
        got = flax_checkpoint.load_checkpoint(prefix)
        assert sorted(got) == sorted(params)
        state["rng/seed"] = np.zeros(2, np.float32)
        flax_files.write_partitioned(prefix, state)
        _expect_error(lambda: flax_checkpoint.load_checkpoint(prefix),
                      "unknown key 'rng/seed' beside 'params'")


def test_msgpack_and_npz_round_trip():
    params = _params()
    with tempfile.TemporaryDirectory() as tmp:
        path = flax_files.write_msgpack(
            os.path.join(tmp, "checkpoint_7"), params,
            chunked=("Encoder/encoderblock_0/Mlp/Dense_0/kernel",))
        got = flax_checkpoint.load_checkpoint(path)
        assert all(np.array_equal(got[k], params[k]) for k in params)
        # np.savez: bfloat16 as ml_dtypes saves it (|V2), float16,
        # big-endian and Fortran-order members.
        head = flax_files.bf16_exact(params["head/kernel"])
        arrays = dict(params)
        arrays["head/kernel"] = (head.view(np.uint32) >> 16).astype(
            np.uint16).view("V2")
        arrays["cls"] = params["cls"].astype(">f4")
        arrays["head/bias"] = params["head/bias"].astype(np.float16)
        arrays["embedding/kernel"] = np.asfortranarray(
            params["embedding/kernel"])
        path = os.path.join(tmp, "ckpt.npz")
        np.savez(path, **arrays)
        got = flax_checkpoint.load_checkpoint(path)
        assert np.array_equal(got["head/kernel"], head)
        assert np.array_equal(got["cls"], params["cls"])
        assert np.array_equal(got["embedding/kernel"],
                              params["embedding/kernel"])
        assert np.array_equal(got["head/bias"], params["head/bias"].astype(
            np.float16).astype(np.float32))


# --- .npz errors --------------------------------------------------------------

def _npy_header(shape, descr="<f4"):
    text = repr({"descr": descr, "fortran_order": False,
                 "shape": tuple(shape)}).encode()
    text += b" " * (-(len(text) + 11) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(text)) + text


def test_npz_errors():
    params = _params()
    with tempfile.TemporaryDirectory() as tmp:
        good = os.path.join(tmp, "good.npz")
        np.savez(good, **params)
        data = _read(good)
        path = _write(os.path.join(tmp, "cut.npz"), data[:len(data) // 2])
        _expect_error(_import(path), "cut.npz", "not a readable .npz")
        # Bad CRC: a byte of the first member's data flipped.
        broken = bytearray(data)
        with zipfile.ZipFile(good) as archive:
            info = archive.infolist()[0]
        start = info.header_offset + 30 + len(info.filename) + 140
        broken[start] ^= 0xFF
        path = _write(os.path.join(tmp, "crc.npz"), bytes(broken))
        _expect_error(_import(path), "crc.npz", "CRC")
        # A member whose header claims 2^40 floats.
        path = os.path.join(tmp, "huge.npz")
        with zipfile.ZipFile(path, "w") as archive:
            archive.writestr("cls.npy", _npy_header([_BIG]) + b"\0" * 16)
        _small_memory(_import(path), "'cls'", "claims shape [1099511627776]")
        # .npy renamed .npz; object arrays; integers; not a zip at all.
        path = os.path.join(tmp, "one.npz")
        with open(path, "wb") as f:
            np.save(f, params["cls"])
        _expect_error(_import(path), "a .npy file")
        path = os.path.join(tmp, "obj.npz")
        np.savez(path, cls=np.array([{}], dtype=object))
        _expect_error(_import(path), "object array")
        path = os.path.join(tmp, "int.npz")
        np.savez(path, cls=np.zeros(3, np.int32))
        _expect_error(_import(path), "dtype int32")
        path = os.path.join(tmp, "bad.npz")
        with zipfile.ZipFile(path, "w") as archive:
            archive.writestr("cls.npy", b"\x93NUMPY\x09\x00junk")
        _expect_error(_import(path), "not a .npy array")
        with zipfile.ZipFile(path, "w") as archive:
            archive.writestr("notes.txt", b"hello")
        _expect_error(_import(path), "'notes.txt' is not a .npy array")
        path = _write(os.path.join(tmp, "noise.bin"), b"\x01\x02 noise")
        _expect_error(_import(path), "not a Flax checkpoint")
        _expect_error(_import(os.path.join(tmp, "absent.npz")),
                      "absent.npz", "No such file or directory")
        _expect_error(_import(tmp), "a directory")
        _expect_error(_import("gs://vmoe_checkpoints/x"), "download")


def test_zero_sized():
    with tempfile.TemporaryDirectory() as tmp:
        for key, shape, fragment in (
                ("Encoder/posembed_input/pos_embedding", (1, 1, 8),
                 "no row for the patches"),
                ("Encoder/posembed_input/pos_embedding", (1, 0, 8),
                 "zero-sized"),
                ("embedding/kernel", (0, 4, 1, 8), "zero-sized")):
            params = _params()
            params[key] = np.ones(shape, np.float32)
            path = os.path.join(tmp, "z.npz")
            np.savez(path, **params)
            _expect_error(_import(path), fragment)


# --- msgpack and partitioned errors ------------------------------------------

def _partitioned(tmp, params=None, **options):
    prefix = os.path.join(tmp, "p")
    flax_files.write_partitioned(prefix, params or _params(), **options)
    return prefix


def _repack(path, edit):
    """Rewrites a msgpack file with edit(value) applied."""
    value = msgpack.unpackb(_read(path), raw=False)
    edit(value)
    _write(path, msgpack.packb(value, use_bin_type=True))


def _leaf_number(key):
    return str(flax_files.leaf_order(_params()).index(key))


def test_partitioned_errors():
    key = "head/kernel"
    with tempfile.TemporaryDirectory() as tmp:
        prefix = _partitioned(tmp)
        shard0 = partitioned.data_path(prefix, 0, 2)
        shard1 = partitioned.data_path(prefix, 1, 2)
        index, data0 = _read(prefix + ".index"), _read(shard0)

        def fresh():
            _write(prefix + ".index", index)
            _write(shard0, data0)

        _write(shard0, data0[:len(data0) - 9])
        _expect_error(_import(prefix), "p.data-00000-of-00002",
                      "not valid msgpack (truncated)")
        fresh()
        _write(prefix + ".index", index[:40])
        _expect_error(_import(prefix), "p.index", "truncated")
        fresh()
        os.remove(shard1)
        _expect_error(_import(prefix), "p.data-00001-of-00002",
                      "cannot read")
        prefix = _partitioned(tmp)
        index, data0 = _read(prefix + ".index"), _read(shard0)
        number = _leaf_number(key)
        owner = shard0 if number in msgpack.unpackb(data0, raw=False) \
            else shard1

        def set_info(shape=None, slices=None, shards=None, code=8):
            def edit(top):
                node = top["index"]["head"]
                payload = msgpack.unpackb(node["kernel"].data, raw=False)
                if shape is not None:
                    payload[0] = msgpack.packb([shape, "float32", False, {}])
                if slices is not None:
                    payload[1] = [msgpack.packb([msgpack.packb([a, b, None])
                                                 for a, b in s])
                                  for s in slices]
                if shards is not None:
                    payload[2] = shards
                node["kernel"] = msgpack.ExtType(code, msgpack.packb(payload))
            _repack(prefix + ".index", edit)

        set_info(code=1)
        _expect_error(_import(prefix), "leaf", "(head/kernel)",
                      "expected msgpack ExtType 8, got ExtType 1")
        fresh()
        set_info(slices=[[(0, 9), (0, 3)]])
        _expect_error(_import(prefix), "slice [0:9, 0:3] is outside the "
                      "shape [8, 3]")
        fresh()
        set_info(shards=[7])
        _expect_error(_import(prefix), "shard 7 of 2")
        fresh()
        set_info(shape=[_BIG, 3], slices=[[(0, _BIG), (0, 3)]])
        _small_memory(_import(prefix), "chunk [0:8, 0:3] is not a slice "
                      "the index places in shard")
        fresh()
        set_info(slices=[[(0, 4), (0, 3)], [(2, 6), (0, 3)]], shards=[0, 1])
        _expect_error(_import(prefix), "head/kernel")
        fresh()
        set_info(shape=[8, 4])
        _expect_error(_import(prefix), "slices hold 24 elements, the shape "
                      "[8, 4] has 32")
        fresh()
        _repack(owner, lambda top: top.pop(number))
        _expect_error(_import(prefix), "no chunk [0:8, 0:3] of leaf "
                      f"{number} (head/kernel)")
        _write(prefix + ".index", index)
        prefix = _partitioned(tmp)

        def edit_chunk(fn):
            def edit(top):
                fn(top[number][0])
            _repack(owner, edit)

        data_owner = _read(owner)
        edit_chunk(lambda chunk: chunk[0].__setitem__(0, msgpack.ExtType(
            1, msgpack.packb([[_BIG], "float32", b"\0" * 8]))))
        _small_memory(_import(prefix), "a subchunk claims 1099511627776 "
                      "elements and holds 8 bytes")
        _write(owner, data_owner)
        edit_chunk(lambda chunk: chunk[0].__setitem__(0, msgpack.ExtType(
            1, msgpack.packb([[2], "float32", b"\0" * 8]))))
        _expect_error(_import(prefix), "shape [8, 3] of float32 needs 96 "
                      "bytes, the data has 8")
        _write(owner, data_owner)
        edit_chunk(lambda chunk: chunk[0].__setitem__(0, msgpack.ExtType(
            1, msgpack.packb([[24], "float16", b"\0" * 48]))))
        _expect_error(_import(prefix), "a subchunk of float16 [24], "
                      "expected 1-D float32")
        _write(owner, data_owner)
        edit_chunk(lambda chunk: chunk.__setitem__(1, msgpack.ExtType(
            5, b"\x93\x00\x08\xc0")))
        _expect_error(_import(prefix), "expected msgpack ExtType 6, got "
                      "ExtType 5")
        _write(owner, data_owner)
        _repack(owner, lambda top: top[number].append(top[number][0]))
        _expect_error(_import(prefix), "chunk [0:8, 0:3] appears twice")
        _write(owner, data_owner)
        _repack(owner, lambda top: top.__setitem__("x1", []))
        _expect_error(_import(prefix), "key 'x1' is not a leaf number")
        _write(owner, data_owner)
        _repack(owner, lambda top: top.pop("__msgpack_array_chunk_a87ca2__"))
        _expect_error(_import(prefix), "not a vmoe checkpoint shard")
        _write(owner, data_owner)
        for edit, fragment in (
                (lambda t: t.__setitem__("version", "20990101"),
                 "version '20990101'"),
                (lambda t: t.__setitem__("shard_count", 0), "shard_count 0"),
                (lambda t: t.__setitem__("colour", 1),
                 "unknown field 'colour'"),
                (lambda t: t.pop("index"), "no 'index' tree")):
            _repack(prefix + ".index", edit)
            _expect_error(_import(prefix), "p.index", fragment)
            prefix = _partitioned(tmp)
        # 1000 levels: within msgpack's limit, walked without recursion.
        _write(prefix + ".index", b"\x82\xabshard_count\x01\xa5index" +
               b"\x81\xa1a" * 1000 + b"\xc0")
        _expect_error(_import(prefix), "not a Flax ViT param tree")
        _write(prefix + ".index", b"\x82\xabshard_count\x01\xa5index" +
               b"\x81\xa1a" * 100000 + b"\xc0")
        _expect_error(_import(prefix), "msgpack nested too deeply")


def test_unversioned_order():
    """Before 2022-06-22 the leaves were numbered in the saved tree's
    order: data written in another order is refused, with the reason."""
    params = _params()
    with tempfile.TemporaryDirectory() as tmp:
        prefix = _partitioned(tmp, params, version=False, shards=1)
        shard = partitioned.data_path(prefix, 0, 1)

        def swap(top):
            a, b = _leaf_number("cls"), _leaf_number("head/kernel")
            top[a], top[b] = top[b], top[a]
        _repack(shard, swap)
        _expect_error(_import(prefix), "the index has no version")


def test_msgpack_errors():
    params = _params()
    with tempfile.TemporaryDirectory() as tmp:
        path = flax_files.write_msgpack(os.path.join(tmp, "ckpt"), params,
                                        chunked=("cls",))
        data = _read(path)
        _write(path, data[:-3])
        _expect_error(_import(path), "ckpt", "truncated")
        _write(path, data + b"\xc0")
        _expect_error(_import(path), "bytes after the msgpack value")

        def edit_params(fn):
            _write(path, data)
            _repack(path, lambda top: fn(top["params"]))

        edit_params(lambda p: p["head"].__setitem__("bias", 3))
        _expect_error(_import(path), "'params/head/bias'",
                      "expected msgpack ExtType 1, got int")
        edit_params(lambda p: p["head"].__setitem__(
            "bias", msgpack.ExtType(1, msgpack.packb([[3], "int32",
                                                      b"\0" * 12]))))
        _expect_error(_import(path), "dtype int32, expected floating point")
        edit_params(lambda p: p["head"].__setitem__(
            "bias", msgpack.ExtType(1, msgpack.packb([[3], "complex64",
                                                      b"\0" * 24]))))
        _expect_error(_import(path), "unsupported dtype 'complex64'")
        edit_params(lambda p: p["cls"]["chunks"].pop("1"))
        _expect_error(_import(path), "'params/cls'", "needs 32 bytes")
        edit_params(lambda p: p["cls"].pop("shape"))
        _expect_error(_import(path), "needs 'shape' and 'chunks'")
        _write(path, b"\x81\xa6params" + b"\x81\xa1a" * 100000)
        _expect_error(_import(path), "nested too deeply")
        _write(path, b"\x81\xa6params\x81\xa2\xff\xfe\xc0")
        _expect_error(_import(path), "not UTF-8")


# --- config errors ------------------------------------------------------------

def test_config_file_errors():
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "ckpt.npz")
        np.savez(path, **_params())
        config = os.path.join(tmp, "config.json")
        for data, fragment in (
                (b"[" * 100000 + b"]" * 100000, "nesting exceeds the limit of 64"),
                (b'{"name": "\xff\xfe"}', "not UTF-8 (byte 10)"),
                (b'{"name": ', "malformed JSON"),
                (b"[1, 2]", "must be a JSON object")):
            _write(config, data)
            _expect_error(_import(path, config), "config.json", fragment)
        _expect_error(_import(path, os.path.join(tmp, "none.json")),
                      "none.json", "No such file or directory")
        _expect_error(_import(path, "vmoe_x32"), "'vmoe_x32': no such file, "
                      "nor a released checkpoint's name")
        _expect_error(_import(path, "eee_s32_last2_ilsvrc2012"),
                      "E^3 ensemble")
        _expect_error(_import(path, None), "need the model config",
                      "vmoe_s32_last2_ilsvrc2012_randaug_light1_ft_ilsvrc2012")


def test_config_field_errors():
    cases = [
        (dict(layers="1"), "config: encoder.moe.layers: \"1\", expected a "
         "list of distinct block indices"),
        (dict(layers=1), "encoder.moe.layers: 1"),
        (dict(layers=[True]), "encoder.moe.layers: [true]"),
        (dict(layers=[1, 1]), "encoder.moe.layers: [1, 1]"),
        (dict(layers=[0]), "does not match the MoE blocks of the weights"),
        (dict(num_experts=0), "encoder.moe.num_experts: 0, expected an "
         "integer >= 1"),
        (dict(num_experts=5), "the weights have 4 experts"),
        (dict(group_size=0), "encoder.moe.group_size: 0"),
        (dict(group_size=None), "encoder.moe.group_size: missing"),
        (dict(router__num_selected_experts=0),
         "router.num_selected_experts: 0, expected an integer in 1..4"),
        (dict(router__num_selected_experts=5),
         "router.num_selected_experts: 5"),
        (dict(router__num_selected_experts=True),
         "router.num_selected_experts: true"),
        (dict(router__dispatcher__capacity_factor=float("nan")),
         "dispatcher.capacity_factor: nan, expected a finite number > 0"),
        (dict(router__dispatcher__capacity_factor=float("inf")),
         "dispatcher.capacity_factor: inf"),
        (dict(router__dispatcher__capacity_factor=-1),
         "dispatcher.capacity_factor: -1"),
        (dict(router__dispatcher__capacity_factor="2"),
         "dispatcher.capacity_factor: \"2\""),
        (dict(router__dispatcher__capacity=2),
         "capacity / capacity_factor: give exactly one"),
        (dict(router__dispatcher__capacity_ceil_or_round="floor"),
         "dispatcher.capacity_ceil_or_round: \"floor\", expected one of "
         "'ceil', 'round'"),
        (dict(router__dispatcher__capacity_multiple_of=2.5),
         "capacity_multiple_of: 2.5"),
        (dict(router__dispatcher__batch_priority="yes"),
         "batch_priority: \"yes\", expected true or false"),
        (dict(router__dispatcher__name="sparse"), "dispatcher.name"),
        (dict(router__name="TopK"), "router.name: \"TopK\", expected one of"),
        (dict(router__name="SoftRouter"), "the weights have a dense router"),
        (dict(router__name="NoisyTopItemsPerExpertRouter"),
         "router.num_selected_experts: unknown field"),
        (dict(mlp_dim=7), "encoder.moe.mlp_dim: 7, the experts are 12 wide"),
        (dict(router=5), "encoder.moe.router: expected an object"),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "ckpt.npz")
        np.savez(path, **_params())
        for edits, fragment in cases:
            _expect_error(_import(path, _config(**edits)), fragment)
        for edit, fragment in (
                (lambda c: c.update(encoder=5), "encoder: expected an "
                 "object"),
                (lambda c: c.update(name="VisionTransformerMoeEnsemble"),
                 "name: \"VisionTransformerMoeEnsemble\" is not supported"),
                (lambda c: c.update(num_classes=3.0), "num_classes: 3.0, the "
                 "weights say 3"),
                (lambda c: c["encoder"].update(attention_qk_norm=True),
                 "attention_qk_norm: not supported"),
                (lambda c: c.update(colour="red"), "config: colour: unknown "
                 "field")):
            config = copy.deepcopy(_CONFIG)
            edit(config)
            _expect_error(_import(path, config), fragment)


def test_every_block_moe_and_families():
    """Item 3: no dense block, encoder.mlp_dim unchecked; expert choice
    and Soft MoE descriptions with the original's defaults."""
    config = copy.deepcopy(_CONFIG)
    config["encoder"]["mlp_dim"] = 64
    config["encoder"]["moe"] = dict(_MOE, layers=[0, 1], mlp_dim=12)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "ckpt.npz")
        np.savez(path, **_params(config))
        desc, _ = importers.import_flax(path, config)
        assert desc["mlp_dim"] == 64 and desc["moe"]["mlp_dim"] == 12, desc
        del config["encoder"]["moe"]["mlp_dim"]
        _expect_error(_import(path, config), "encoder.mlp_dim: 64, the "
                      "experts are 12 wide")
        config = _config(router={"name": "NoisyTopItemsPerExpertRouter",
                                 "dispatcher": {"capacity": 3}})
        np.savez(path, **_params(config))
        desc, _ = importers.import_flax(path, config)
        # A fixed B of expert choice stays fixed (moe.capacity).
        assert desc["moe"] == {
            "placement": "layers", "layers": [1], "num_experts": 4,
            "routing": "expert_choice", "capacity": 3,
            "activation": "gelu_tanh", "group_size": 2}, desc["moe"]
        config = _config(router={"name": "NoisyTopItemsPerExpertRouter",
                                 "dispatcher": {"capacity_factor": 2.0}})
        desc, _ = importers.import_flax(path, config)
        assert desc["moe"]["capacity_rule"] == "ceil"
        assert desc["moe"]["multiple_of"] == 4
        soft = _config(group_size=5, router={"name": "SoftRouter",
                                             "num_slots": None})
        np.savez(path, **_params(soft))
        desc, tensors = importers.import_flax(path, soft)
        assert desc["moe"]["routing"] == "soft"
        assert desc["moe"]["slots_per_expert"] == 1  # round(5 / 4)
        assert tensors["blocks.1.moe.scale"].shape == ()
        assert tensors["blocks.1.moe.phi"].shape == (8, 4, 1)
        for router, fragment in (
                ({"name": "SoftRouter", "num_slots": 3},
                 "num_slots: 3, the weights (Router/mu) have 1"),
                ({"name": "SoftRouter", "capacity_factor": 0.01},
                 "round(5 * 0.01 / 4) = 0 slots"),
                ({"name": "NoisyTopExpertsPerItemRouter"},
                 "the weights have a Soft MoE router")):
            _expect_error(_import(path, _config(group_size=5,
                                                router=router)), fragment)
        _expect_error(_import(path, _config(group_size=7, router={
            "name": "SoftRouter", "num_slots": 1})), "7 tokens are not "
            "whole images of 5")
        soft = _config(group_size=10, router={"name": "SoftRouter"})
        np.savez(path, **_params(soft))
        desc, _ = importers.import_flax(path, soft)
        assert desc["moe"]["soft_group_size"] == 2


def test_vit_jax_current_names():
    """vit_jax built with today's flax (a name counter per module type)
    imports exactly as the released names (check_import tests those)."""
    config = {"num_classes": 3, "patch_size": [4, 4], "hidden_size": 8,
              "encoder": {"num_layers": 2, "mlp_dim": 12, "num_heads": 2}}
    old = _params(config, "vit_jax")
    renames = {"MultiHeadDotProductAttention_1":
               "MultiHeadDotProductAttention_0",
               "LayerNorm_2": "LayerNorm_1", "MlpBlock_3": "MlpBlock_0"}
    current = {}
    for key, value in old.items():
        parts = key.split("/")
        current["/".join(renames.get(p, p) for p in parts)] = value
    assert sorted(current) == sorted(_params(config, "vit_jax_current"))
    with tempfile.TemporaryDirectory() as tmp:
        imported = []
        for params in (old, current):
            path = os.path.join(tmp, "vit.npz")
            np.savez(path, **params)
            imported.append(importers.import_flax(path, config))
    (desc_a, a), (desc_b, b) = imported
    assert desc_a == desc_b and sorted(a) == sorted(b)
    assert all(np.array_equal(a[k], b[k]) for k in a)


def test_dense_checkpoint_moe_config():
    """soft_moe's ViT configs carry encoder.moe = {layers: ()}: unused."""
    config = copy.deepcopy(_CONFIG)
    del config["encoder"]["moe"]
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "vit.npz")
        np.savez(path, **_params(config))
        config["encoder"]["moe"] = {"layers": [], "num_experts": 8,
                                    "router": {"name": "SoftRouter"}}
        desc, _ = importers.import_flax(path, config)
        assert "moe" not in desc
        config["encoder"]["moe"]["layers"] = [1]
        _expect_error(_import(path, config), "encoder.moe.layers: [1], the "
                      "weights have no MoE block")


def test_released_configs():
    """Each released config's model, and its evaluation pipeline as the
    config files of vmoe/configs/vmoe_paper/ write it: fine-tuned at 384
    px a bilinear resize, pre-trained at 224 px shorter side 256 and a
    central crop."""
    for name, config in flax_config.released.CONFIGS.items():
        model, process, field = flax_config.split_config(
            flax_config.load_config(name))
        cfg = flax_config.Config(model)
        moe = cfg.config["encoder"]["moe"]
        side = 384 if "_ft_" in name else 224
        patch = cfg.config["patch_size"][0]
        assert moe["group_size"] == 8 * ((side // patch) ** 2 + 1), name
        assert cfg.config == config
        want = "decode|resize(384)|value_range(-1,1)" if side == 384 else \
            "decode|resize_small(256)|central_crop(224)|value_range(-1,1)"
        assert evaluation_ops(process, field) == want, (name, process)
        assert field == ("config: dataset.val.process" if "21k" in name
                         and side == 224 else
                         "config: dataset.test.process"), (name, field)
    s32 = flax_config.load_config(
        "vmoe_s32_last2_ilsvrc2012_randaug_light1_ft_ilsvrc2012")["model"]
    assert s32["encoder"]["moe"]["layers"] == [5, 7]
    assert s32["encoder"]["moe"]["group_size"] == 8 * (12 * 12 + 1)
    assert s32["representation_size"] is None
    b16 = flax_config.load_config(
        "vmoe_b16_imagenet21k_randaug_strong")["model"]
    assert b16["encoder"]["moe"]["layers"] == [1, 3, 5, 7, 9, 11]
    assert b16["num_classes"] == 21843


def test_command_line_errors():
    with tempfile.TemporaryDirectory() as tmp:
        prefix = _partitioned(tmp)
        os.remove(partitioned.data_path(prefix, 1, 2))
        stderr = io.StringIO()
        with contextlib.redirect_stderr(stderr):
            status = cli.main(["flax", prefix, "-o",
                               os.path.join(tmp, "out")])
        lines = stderr.getvalue().splitlines()
        assert status == 1 and len(lines) == 1, lines
        assert "p.data-00001-of-00002: cannot read" in lines[0], lines


# --- fuzz: mutated files and configs give ImporterError only ------------------

def _mutations(data, rng, count):
    for _ in range(count):
        out = bytearray(data)
        kind = rng.integers(3)
        if kind == 0 and len(out) > 1:
            del out[rng.integers(1, len(out)):]
        else:
            for _ in range(rng.integers(1, 5)):
                out[rng.integers(len(out))] = rng.integers(256)
        yield bytes(out)


def _survives(fn, what):
    try:
        fn()
    except importers.ImporterError as err:
        assert "\n" not in str(err), str(err)
    except Exception as err:  # pylint: disable=broad-except
        raise AssertionError(f"{what}: {type(err).__name__}: {err}") \
            from None


def test_fuzz():
    rng = np.random.default_rng(5)
    params = _params()
    with tempfile.TemporaryDirectory() as tmp:
        npz = os.path.join(tmp, "f.npz")
        np.savez(npz, **params)
        prefix = _partitioned(tmp, params)
        msg = flax_files.write_msgpack(os.path.join(tmp, "m"), params,
                                       chunked=("cls",))
        config = os.path.join(tmp, "c.json")
        text = json.dumps(_CONFIG).encode()
        for path, count in ((npz, 150), (prefix + ".index", 150),
                            (partitioned.data_path(prefix, 0, 2), 150),
                            (msg, 150)):
            original = _read(path)
            target = prefix if path.startswith(prefix) else path
            for i, data in enumerate(_mutations(original, rng, count)):
                _write(path, data)
                _survives(_import(target), f"{path} mutation {i}")
            _write(path, original)
        np.savez(npz, **params)
        for i, data in enumerate(_mutations(text, rng, 300)):
            _write(config, data)
            _survives(_import(npz, config), f"config mutation {i}")


def main():
    return selftest.run("vmoe.importers.test_flax", globals())


if __name__ == "__main__":
    sys.exit(main())
