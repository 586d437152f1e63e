"""Safetensors files of float32 tensors (docs/ModelFormat.md §3), numpy only.

`save` writes {name: array} as F32 (or, with `dtype="BF16"`, as bf16
rounded to nearest even: half the size; the runtime widens BF16 tensors
back to f32 exactly) with an optional `__metadata__`; `load`
reads a file back as float32 and rejects a malformed one with a one-line
FormatError (a VMoEError and a ValueError), checking every size before it
allocates. By default only F32 is accepted; checkpoints of other frameworks
(F64, F16, BF16) are read with `load(path, dtypes=DTYPES)`.
"""

import json
import math
import os
import struct

import numpy as np

from . import _json
from ._files import open_regular
from .errors import FormatError

__all__ = ["DTYPES", "MAX_HEADER_BYTES", "load", "save"]

# The runtime's limit on a header (docs/Limits.md).
MAX_HEADER_BYTES = 100_000_000

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


def _tensor_bytes(name, array, dtype):
    """(shape, little-endian bytes) of one tensor to save."""
    if not isinstance(name, str) or name == "__metadata__":
        raise FormatError(f"tensor name {name!r}: expected a string other "
                          "than __metadata__")
    try:
        values = np.asarray(array, dtype=np.float32)
    except (TypeError, ValueError, OverflowError) as err:
        raise FormatError(f"tensor {name!r}: not an array of numbers "
                          f"({str(err).splitlines()[0]})") from None
    data = (to_bf16_bits(values) if dtype == "BF16" else
            np.ascontiguousarray(values, dtype="<f4")).tobytes()
    return list(values.shape), data


def save(path, tensors, metadata=None, dtype="F32"):
    """Writes {name: float32 array} as safetensors, in the dict's order,
    every tensor as `dtype` ("F32" or "BF16"); `metadata`: {str: str}.

    Header: compact JSON, padded with spaces to a multiple of 8 bytes (as
    the reference implementation does); data little-endian, contiguous.
    Errors: FormatError (one line) for a bad name, value or metadata,
    before the file is opened; OSError from writing.
    """
    if dtype not in ("F32", "BF16"):
        raise FormatError(f"dtype {dtype!r}: save writes F32 or BF16")
    header, offset, blobs = {}, 0, []
    if metadata is not None:
        if not isinstance(metadata, dict) or not all(
                isinstance(k, str) and isinstance(v, str)
                for k, v in metadata.items()):
            raise FormatError("metadata: expected {str: str}")
        header["__metadata__"] = dict(metadata)
    for name, array in tensors.items():
        shape, data = _tensor_bytes(name, array, dtype)
        header[name] = {"dtype": dtype, "shape": shape,
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


def _read(path):
    """(header bytes, data bytes) of a safetensors file; the header length
    is checked against the file size and the 100 MB limit before anything
    else is read."""
    with open_regular(path, FormatError) as f:
        try:
            prefix = f.read(8)
            if len(prefix) < 8:
                raise FormatError(f"{path}: not a safetensors file (shorter "
                                  "than 8 bytes)")
            (size,) = struct.unpack("<Q", prefix)
            total = os.fstat(f.fileno()).st_size
            if size > total - 8:
                raise FormatError(f"{path}: header length {size} exceeds the "
                                  f"file size {total}")
            if size > MAX_HEADER_BYTES:
                raise FormatError(f"{path}: header length {size} is above "
                                  f"the limit {MAX_HEADER_BYTES}")
            return f.read(size), f.read()
        except OSError as err:
            raise FormatError(f"{path}: {err.strerror or err}") from None


def _entry(path, name, info, dtypes, data_size):
    """(numpy dtype, shape, [begin, end]) of a header entry, checked."""
    if not isinstance(info, dict) or set(info) != {
            "dtype", "shape", "data_offsets"}:
        raise FormatError(f"{path}: tensor {name!r}: malformed entry")
    dtype = info["dtype"]
    if not isinstance(dtype, str) or dtype not in dtypes or \
            dtype not in DTYPES:
        raise FormatError(f"{path}: tensor {name!r}: dtype {dtype!r}, "
                          f"expected {' or '.join(dtypes)}")
    shape, span = info["shape"], info["data_offsets"]
    if not (isinstance(shape, list) and all(
            isinstance(d, int) and not isinstance(d, bool) and d >= 0
            for d in shape)):
        raise FormatError(f"{path}: tensor {name!r}: bad shape {shape!r}")
    if not (isinstance(span, list) and len(span) == 2 and all(
            isinstance(o, int) and not isinstance(o, bool)
            for o in span) and 0 <= span[0] <= span[1] <= data_size):
        raise FormatError(f"{path}: tensor {name!r}: data_offsets {span!r} "
                          f"outside the {data_size} data bytes")
    item = np.dtype(DTYPES[dtype]).itemsize
    if span[1] - span[0] != item * math.prod(shape):
        raise FormatError(f"{path}: tensor {name!r}: {span[1] - span[0]} "
                          f"bytes for shape {shape}")
    return dtype, shape, span


def load(path, dtypes=("F32",)):
    """Reads a safetensors file -> {name: float32 array}, in header order.

    `dtypes`: the stored dtypes accepted (keys of DTYPES). Raises
    FormatError (a ValueError) with a one-line message on a malformed
    file: unreadable, short header, a header above 100 MB, nested deeper
    than 64 levels or not UTF-8 JSON, another dtype, offsets outside the
    data or not matching the shape, overlapping or gapped tensors.
    """
    header_bytes, data = _read(path)
    header = _json.parse(header_bytes, f"{path}: invalid safetensors header")
    if not isinstance(header, dict):
        raise FormatError(f"{path}: safetensors header is not an object")
    entries, spans = {}, []
    for name, info in header.items():
        if name == "__metadata__":
            continue
        entries[name] = _entry(path, name, info, dtypes, len(data))
        spans.append((entries[name][2][0], entries[name][2][1], name))
    end = 0
    for begin, stop, name in sorted(spans):
        if begin != end:
            raise FormatError(f"{path}: tensor {name!r} starts at byte "
                              f"{begin}, expected {end} (gap or overlap)")
        end = stop
    if end != len(data):
        raise FormatError(f"{path}: {len(data) - end} trailing data bytes")
    tensors = {}
    for name, (dtype, shape, span) in entries.items():
        raw = np.frombuffer(data, dtype=DTYPES[dtype], count=math.prod(
            shape), offset=span[0])
        if dtype == "BF16":
            raw = (raw.astype(np.uint32) << 16).view(np.float32)
        tensors[name] = raw.astype(np.float32).reshape(shape)
    return tensors
