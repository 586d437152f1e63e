"""Safetensors reading (F64, F32, F16, BF16 -> float32) and F32 writing.

Checkpoints from other frameworks (timm on the Hugging Face hub) are often
stored in F16 or BF16; compiled models take F32 (docs/ModelFormat.md §3).
Malformed files give a one-line ImporterError.
"""

import json
import math
import struct

import numpy as np

from .common import ImporterError

_DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "BF16": "<u2"}


def read(path):
    """{name: float32 array} of a safetensors file, in header order."""
    try:
        with open(path, "rb") as f:
            blob = f.read()
    except OSError as err:
        raise ImporterError(f"{path}: {err.strerror}") from None
    if len(blob) < 8:
        raise ImporterError(f"{path}: not a safetensors file")
    (size,) = struct.unpack("<Q", blob[:8])
    if size > len(blob) - 8:
        raise ImporterError(f"{path}: header length {size} exceeds the file")
    try:
        header = json.loads(blob[8:8 + size].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ImporterError(f"{path}: invalid safetensors header: {err}") \
            from None
    if not isinstance(header, dict):
        raise ImporterError(f"{path}: safetensors header is not an object")
    data = memoryview(blob)[8 + size:]
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype, shape, (begin, end) = (info["dtype"], info["shape"],
                                          info["data_offsets"])
        except (TypeError, KeyError, ValueError):
            raise ImporterError(f"{path}: tensor {name!r}: malformed entry") \
                from None
        if dtype not in _DTYPES:
            raise ImporterError(f"{path}: tensor {name!r}: dtype {dtype!r} "
                                f"(supported: {', '.join(_DTYPES)})")
        item = np.dtype(_DTYPES[dtype]).itemsize
        if not (isinstance(shape, list) and all(
                isinstance(d, int) and d >= 0 for d in shape)) or not (
                isinstance(begin, int) and isinstance(end, int)
                and 0 <= begin <= end <= len(data)
                and end - begin == item * math.prod(shape)):
            raise ImporterError(f"{path}: tensor {name!r}: shape {shape!r} "
                                f"does not match data_offsets "
                                f"{[begin, end]!r}")
        raw = np.frombuffer(data[begin:end], dtype=_DTYPES[dtype])
        if dtype == "BF16":
            raw = (raw.astype(np.uint32) << 16).view(np.float32)
        tensors[name] = raw.astype(np.float32).reshape(shape)
    return tensors


def write(path, tensors):
    """Writes {name: array} as F32 safetensors, in the dict's order."""
    header, offset, blobs = {}, 0, []
    for name, array in tensors.items():
        data = np.ascontiguousarray(array, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(np.shape(array)),
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
