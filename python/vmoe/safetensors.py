"""Safetensors files of float32 tensors (docs/ModelFormat.md §3), numpy only.

`save` writes {name: array} with an optional `__metadata__`; `load` reads a
file back and rejects a malformed one with a one-line ValueError. Only F32,
the one dtype compiled models take.
"""

import json
import math
import struct

import numpy as np

__all__ = ["load", "save"]


def save(path, tensors, metadata=None):
    """Writes {name: float32 array} as safetensors, in the dict's order.

    Header: compact JSON, padded with spaces to a multiple of 8 bytes (as
    the reference implementation does); data little-endian, contiguous.
    """
    header, offset, blobs = {}, 0, []
    if metadata is not None:
        header["__metadata__"] = dict(metadata)
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


def load(path):
    """Reads a safetensors file of F32 tensors -> {name: float32 array}.

    Raises ValueError with a one-line message on a malformed file: short
    header, bad JSON, non-F32 dtype, offsets outside the data or not
    matching the shape, overlapping or gapped tensors.
    """
    with open(path, "rb") as f:
        blob = f.read()
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
        if info["dtype"] != "F32":
            raise ValueError(f"{path}: tensor {name!r}: dtype "
                             f"{info['dtype']!r}, expected F32")
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
        if span[1] - span[0] != 4 * math.prod(shape):
            raise ValueError(f"{path}: tensor {name!r}: {span[1] - span[0]} "
                             f"bytes for shape {shape}")
        tensors[name] = np.frombuffer(data, dtype="<f4", count=math.prod(
            shape), offset=span[0]).reshape(shape).astype(np.float32)
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
