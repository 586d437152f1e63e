"""The mutations of the importers' fuzzer (fuzz_importers.py): byte
edits, edits that keep a zip, .npy header, pickle, safetensors header or
JSON document valid, and array edits written back as a valid .npz, .pth
or .safetensors. Every function takes a random.Random: a seed gives the
same inputs."""

import argparse
import io
import json
import re
import struct
import zipfile

import numpy as np

__all__ = ["mutate", "rezip"]

_INTERESTING = (0, 1, -1, 2, 7, 255, 256, 65535, 2**31 - 1, 2**31, 2**32,
                2**40, 2**62, 2**63 - 1, -2**63, 2**24, 2**24 + 1)
_JSON_VALUES = (0, -1, 1, 2**24 + 1, 2**40, 2**63, 2**70, 0.0, -0.5, 1e308,
                float("nan"), float("inf"), "", "ceil", "floor", "x" * 300,
                None, True, False, [], [1, 2], {}, {"a": 1}, [0] * 2000)
_GLOBALS = (b"posix\nsystem", b"builtins\neval", b"builtins\nexec",
            b"os\nsystem", b"torch._utils\n_rebuild_sparse_tensor",
            b"torch._utils\n_rebuild_meta_tensor_no_storage",
            b"torch\nTensor", b"argparse\nNamespace",
            b"collections\nOrderedDict", b"torch\nLongStorage",
            b"torch\nBFloat16Storage", b"torch._utils\n_rebuild_parameter",
            b"torch\nSize", b"torch\ndevice", b"builtins\nset")


def _mutate_bytes(rng, data, others):
    data = bytearray(data)
    for _ in range(rng.choice((1, 1, 2, 4, 8))):
        op = rng.randrange(9)
        pos = rng.randrange(len(data) + 1) if data else 0
        if op == 0 and data:
            data[min(pos, len(data) - 1)] ^= 1 << rng.randrange(8)
        elif op == 1 and data:
            data[min(pos, len(data) - 1)] = rng.choice((0, 0xFF, 0x7F, 0x80,
                                                        rng.randrange(256)))
        elif op == 2:
            value = rng.choice(_INTERESTING)
            width = rng.choice((1, 2, 4, 8))
            data[pos:pos + width] = (value % (1 << 8 * width)).to_bytes(
                width, "little")
        elif op == 3:
            data[pos:pos] = bytes(rng.randrange(256)
                                  for _ in range(rng.randrange(1, 32)))
        elif op == 4:
            del data[pos:pos + rng.randrange(1, 64)]
        elif op == 5 and data:
            start = rng.randrange(len(data))
            chunk = data[start:start + rng.randrange(1, 128)]
            data[pos:pos] = chunk * rng.choice((1, 2, 16))
        elif op == 6:
            del data[pos:]
        elif op == 7 and others:
            other = rng.choice(others)
            cut = rng.randrange(len(other) + 1)
            data[pos:] = other[cut:]
        elif op == 8:
            data[pos:pos] = rng.choice((b"[" * 100000, b"{\"a\":" * 70,
                                        b"\xff\xfe", b"NaN", b"1e999"))
    return bytes(data)


def rezip(data, edit):
    """The zip `data` with each member's bytes replaced by edit(name,
    bytes): valid CRCs and directory."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, \
            zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as dst:
        for info in src.infolist():
            dst.writestr(info.filename, edit(info.filename,
                                             src.read(info)))
    return out.getvalue()


def _mutate_pickle(rng, data):
    data = bytearray(data)
    if rng.random() < 0.5:
        # Replace a GLOBAL's "module\nname" by another.
        spots = [m.start() for m in re.finditer(rb"c[\w.]+\n\w+\n",
                                                bytes(data))]
        if spots:
            start = rng.choice(spots) + 1
            end = data.index(b"\n", data.index(b"\n", start) + 1)
            data[start:end] = rng.choice(_GLOBALS)
            return bytes(data)
    # Replace a small integer (BININT1 K, BININT2 M, BININT J) operand.
    spots = [i for i, b in enumerate(data) if b in b"KMJ"]
    if spots:
        i = rng.choice(spots)
        width = {ord("K"): 1, ord("M"): 2, ord("J"): 4}[data[i]]
        value = rng.choice(_INTERESTING) % (1 << 8 * width)
        data[i + 1:i + 1 + width] = value.to_bytes(width, "little")
    return bytes(data)


def _mutate_npy(rng, data):
    """A .npy member with its header's shape or dtype changed."""
    match = re.search(rb"'shape': \(([^)]*)\)", data)
    if match and rng.random() < 0.7:
        dims = [rng.choice((0, 1, 2, 3, 8, 2**20, 2**40, 2**62))
                for _ in range(rng.randrange(0, 4))]
        text = ("(" + ", ".join(map(str, dims)) + ("," if len(dims) == 1
                                                   else "") + ")").encode()
        return data[:match.start(1) - 1] + text + data[match.end(1) + 1:]
    for old, new in ((b"<f4", rng.choice((b"<i8", b"|O", b"<f8", b"|V4",
                                          b"<U3", b">f4"))),
                     (b"False", b"True")):
        if old in data:
            return data.replace(old, new, 1)
    return data


def _mutate_zip(rng, data, kind, others):
    if rng.random() < 0.3:
        return _mutate_bytes(rng, data, others)
    try:
        names = zipfile.ZipFile(io.BytesIO(data)).namelist()
    except Exception:  # pylint: disable=broad-except
        return _mutate_bytes(rng, data, others)  # not a zip any more
    if not names:
        return _mutate_bytes(rng, data, others)
    target = rng.choice(names)

    def edit(name, member):
        if name != target:
            return member
        if name.endswith(".pkl"):
            return _mutate_pickle(rng, member)
        if name.endswith(".npy") and rng.random() < 0.6:
            return _mutate_npy(rng, member)
        return _mutate_bytes(rng, member, [])
    try:
        return rezip(data, edit)
    except Exception:  # pylint: disable=broad-except
        return _mutate_bytes(rng, data, others)


def _mutate_json_value(rng, value, depth=0):
    """`value` with one random node replaced, deleted or added."""
    if isinstance(value, dict) and value and rng.random() < 0.8:
        key = rng.choice(list(value))
        out = dict(value)
        action = rng.random()
        if action < 0.1:
            del out[key]
        elif action < 0.2:
            out[rng.choice(("colour", "layers", "k", "dtype"))] = \
                rng.choice(_JSON_VALUES)
        else:
            out[key] = _mutate_json_value(rng, value[key], depth + 1)
        return out
    if isinstance(value, list) and value and rng.random() < 0.7:
        out = list(value)
        i = rng.randrange(len(out))
        out[i] = _mutate_json_value(rng, out[i], depth + 1)
        return out
    if rng.random() < 0.05:
        nested = 0
        for _ in range(rng.choice((65, 1000, 100000))):
            nested = [nested]
        return nested
    if isinstance(value, int) and not isinstance(value, bool) and \
            rng.random() < 0.5:
        return rng.choice((value + 1, value - 1, -value, value * 2**20))
    return rng.choice(_JSON_VALUES)


def _dump_json(rng, value):
    try:
        return json.dumps(value, allow_nan=True).encode()
    except (ValueError, RecursionError, TypeError):
        return b"[" * 100000


def _mutate_safetensors(rng, data, others):
    if len(data) < 8 or rng.random() < 0.3:
        return _mutate_bytes(rng, data, others)
    (size,) = struct.unpack("<Q", data[:8])
    try:
        header = json.loads(data[8:8 + size])
    except (ValueError, RecursionError):
        return _mutate_bytes(rng, data, others)
    text = _dump_json(rng, _mutate_json_value(rng, header))
    if rng.random() < 0.8:  # keep the length field right
        return struct.pack("<Q", len(text)) + text + data[8 + size:]
    return data[:8] + text + data[8 + size:]


_EXTRA_KEYS = ("reg_token", "norm_pre.weight", "fc_norm.weight", "fc_norm.bias",
               "attn_pool.latent", "pre_logits.fc.weight",
               "blocks.0.ls1.gamma", "blocks.0.attn.q_norm.weight",
               "blocks.9.norm1.weight", "cls", "MapHead/probe",
               "Encoder/encoderblock_1/Moe/Router/dense/kernel",
               "Transformer/encoderblock/LayerNorm_0/scale", "params/head/bias")


def _mutate_arrays(rng, arrays):
    """{name: array} with 1 to 3 edits a checkpoint could carry: a shape
    changed (zero, one, off by one, doubled), a dimension added or
    dropped, a key deleted, renamed or added, another dtype, NaN or
    infinity, a transpose."""
    arrays = dict(arrays)
    for _ in range(rng.randrange(1, 4)):
        if not arrays:
            break
        key = rng.choice(sorted(arrays))
        value = arrays[key]
        op = rng.randrange(8)
        if op == 0 and value.ndim:
            shape = list(value.shape)
            axis = rng.randrange(len(shape))
            shape[axis] = rng.choice((0, 1, 2, 3, shape[axis] + 1,
                                      max(shape[axis] - 1, 0),
                                      2 * shape[axis]))
            arrays[key] = np.ones(shape, np.float32)
        elif op == 1:
            arrays[key] = value[None] if rng.random() < 0.5 or \
                not value.ndim else value.reshape(-1)
        elif op == 2:
            del arrays[key]
        elif op == 3:
            new = re.sub(r"\d+", lambda m: str(rng.choice((0, 1, 2, 7))),
                         key, count=1) if rng.random() < 0.5 else \
                rng.choice(_EXTRA_KEYS)
            arrays[new] = arrays.pop(key)
        elif op == 4:
            arrays[rng.choice(_EXTRA_KEYS)] = value
        elif op == 5:
            arrays[key] = value.astype(rng.choice(
                (np.float16, np.float64, np.int64, np.bool_, np.int8)))
        elif op == 6:
            arrays[key] = np.full(value.shape, rng.choice(
                (np.nan, np.inf, -np.inf, 3e38)), np.float32)
        else:
            arrays[key] = value.T.copy()
    return arrays


_ST_DTYPES = {"float32": "F32", "float16": "F16", "float64": "F64",
              "int64": "I64", "bool": "BOOL", "int8": "I8"}


def _serialize(rng, kind, arrays):
    """`arrays` written as a valid container of `kind`."""
    out = io.BytesIO()
    if kind == "npz":
        np.savez(out, **arrays)
        return out.getvalue()
    if kind == "pth":
        import torch  # pylint: disable=import-outside-toplevel
        state = {k: torch.from_numpy(np.ascontiguousarray(v))
                 for k, v in arrays.items()}
        if rng.random() < 0.3:
            state = {"state_dict": state, "epoch": 1,
                     "args": argparse.Namespace(lr=0.1)}
        torch.save(state, out,
                   _use_new_zipfile_serialization=rng.random() < 0.7)
        return out.getvalue()
    header, blobs, offset = {}, [], 0
    for name, value in arrays.items():
        data = np.ascontiguousarray(value).tobytes()
        header[name] = {"dtype": _ST_DTYPES[value.dtype.name],
                        "shape": list(value.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + b"".join(blobs)


def mutate(rng, kind, data, others, arrays=None):
    """One mutated input of `kind` from `data` (bytes; config: JSON), or
    from one of the seeds' `arrays` ({name: array} dicts) re-written as a
    valid container with edited arrays."""
    if arrays and rng.random() < 0.4:
        return _serialize(rng, kind, _mutate_arrays(rng, rng.choice(arrays)))
    if kind in ("npz", "pth"):
        return _mutate_zip(rng, data, kind, others) if data[:2] == b"PK" \
            else (_mutate_pickle(rng, data) if rng.random() < 0.5 else
                  _mutate_bytes(rng, data, others))
    if kind == "safetensors":
        return _mutate_safetensors(rng, data, others)
    if rng.random() < 0.2:
        return _mutate_bytes(rng, data, others)
    try:
        return _dump_json(rng, _mutate_json_value(rng, json.loads(data)))
    except (ValueError, RecursionError):
        return _mutate_bytes(rng, data, others)
