"""Safetensors files of float32 tensors (docs/ModelFormat.md §3), numpy only.

`save` writes {name: array} as F32 (or, with `dtype="BF16"`, as bf16
rounded to nearest even: half the size; the runtime widens BF16 tensors
back to f32 exactly) with an optional `__metadata__`; `load`
reads a file back as float32 and rejects a malformed one with a one-line
ValueError. By default only F32 is accepted; checkpoints of other frameworks
(F64, F16, BF16) are read with `load(path, dtypes=DTYPES)`.
"""

import json
import math
import struct

import numpy as np

__all__ = ["DTYPES", "load", "save"]

# Safetensors dtypes `load` can convert to float32, and their numpy layout
# (BF16 as the upper half of a float32).
DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "BF16": "<u2"}


def to_bf16_bits(array):
    """uint16 bf16 bits of a float32 array, rounded to nearest even (NaN
    stays a quiet NaN)."""
    bits = np.ascontiguousarray(array, dtype="<f4").view(np.uint32)
    wide = bits.astype(np.uint64)
    rounded = ((wide + 0x7FFF + ((wide >> 16) & 1)) >> 16) & 0xFFFF
    quiet = (wide >> 16) | 0x40
    return np.where(np.isnan(array), quiet, rounded).astype("<u2")


def save(path, tensors, metadata=None, dtype="F32"):
    """Writes {name: float32 array} as safetensors, in the dict's order,
    every tensor as `dtype` ("F32" or "BF16").

    Header: compact JSON, padded with spaces to a multiple of 8 bytes (as
    the reference implementation does); data little-endian, contiguous.
    """
    if dtype not in ("F32", "BF16"):
        raise ValueError(f"dtype {dtype!r}: save writes F32 or BF16")
    header, offset, blobs = {}, 0, []
    if metadata is not None:
        header["__metadata__"] = dict(metadata)
    for name, array in tensors.items():
        data = (to_bf16_bits(np.asarray(array, dtype=np.float32)).tobytes()
                if dtype == "BF16" else
                np.ascontiguousarray(array, dtype="<f4").tobytes())
        header[name] = {"dtype": dtype, "shape": list(np.shape(array)),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for data in blobs:
            f.write(data)


def load(path, dtypes=("F32",)):
    """Reads a safetensors file -> {name: float32 array}, in header order.

    `dtypes`: the stored dtypes accepted (keys of DTYPES). Raises ValueError
    with a one-line message on a malformed file: unreadable, short header,
    bad JSON, another dtype, offsets outside the data or not matching the
    shape, overlapping or gapped tensors.
    """
    try:
        with open(path, "rb") as f:
            blob = f.read()
    except OSError as err:
        raise ValueError(f"{path}: {err.strerror}") from None
    if len(blob) < 8:
        raise ValueError(f"{path}: not a safetensors file (shorter than 8 "
                         "bytes)")
    (size,) = struct.unpack("<Q", blob[:8])
    if size > len(blob) - 8:
        raise ValueError(f"{path}: header length {size} exceeds the file "
                         f"size {len(blob)}")
    try:
        header = json.loads(blob[8:8 + size].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"{path}: invalid safetensors header: {err}") \
            from None
    if not isinstance(header, dict):
        raise ValueError(f"{path}: safetensors header is not an object")
    data = blob[8 + size:]
    tensors, spans = {}, []
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if not isinstance(info, dict) or set(info) != {
                "dtype", "shape", "data_offsets"}:
            raise ValueError(f"{path}: tensor {name!r}: malformed entry")
        dtype = info["dtype"]
        if dtype not in dtypes or dtype not in DTYPES:
            raise ValueError(f"{path}: tensor {name!r}: dtype {dtype!r}, "
                             f"expected {' or '.join(dtypes)}")
        item = np.dtype(DTYPES[dtype]).itemsize
        shape, span = info["shape"], info["data_offsets"]
        if not (isinstance(shape, list) and all(
                isinstance(d, int) and not isinstance(d, bool) and d >= 0
                for d in shape)):
            raise ValueError(f"{path}: tensor {name!r}: bad shape {shape!r}")
        if not (isinstance(span, list) and len(span) == 2 and all(
                isinstance(o, int) and not isinstance(o, bool)
                for o in span) and 0 <= span[0] <= span[1] <= len(data)):
            raise ValueError(f"{path}: tensor {name!r}: data_offsets {span!r}"
                             f" outside the {len(data)} data bytes")
        if span[1] - span[0] != item * math.prod(shape):
            raise ValueError(f"{path}: tensor {name!r}: {span[1] - span[0]} "
                             f"bytes for shape {shape}")
        raw = np.frombuffer(data, dtype=DTYPES[dtype], count=math.prod(
            shape), offset=span[0])
        if dtype == "BF16":
            raw = (raw.astype(np.uint32) << 16).view(np.float32)
        tensors[name] = raw.astype(np.float32).reshape(shape)
        spans.append((span[0], span[1], name))
    end = 0
    for begin, stop, name in sorted(spans):
        if begin != end:
            raise ValueError(f"{path}: tensor {name!r} starts at byte "
                             f"{begin}, expected {end} (gap or overlap)")
        end = stop
    if end != len(data):
        raise ValueError(f"{path}: {len(data) - end} trailing data bytes")
    return tensors
