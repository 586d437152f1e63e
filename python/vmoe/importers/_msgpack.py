"""Flax's msgpack encoding of arrays, read with Debian's python3-msgpack.

Flax (`flax.serialization`) stores an array as msgpack ExtType 1 whose
payload is itself msgpack: [shape, dtype name, C-order bytes]; ExtType 3
is a numpy scalar in the same form. vmoe's checkpoints add ExtType 6
(SliceNd: msgpack of a list of Slice payloads, each msgpack [start, stop,
step]) and ExtType 8 (IndexInfo: msgpack [shape payload, [SliceNd
payloads], [shard ids]], the shape payload msgpack [shape, dtype name,
weak_type, named shape]).

Everything here is defensive: a length, shape or nesting the input does
not back up is an ImporterError (one line) before anything is allocated.
msgpack's own limits follow the input's size, so a claimed length beyond
the file fails in the unpacker.
"""

import math

import numpy as np

from .common import ImporterError

__all__ = ["unpack", "ext", "ndarray", "ndarray_parts", "from_bytes",
           "slice_nd", "index_info", "is_map_start", "NDARRAY", "NPSCALAR",
           "SLICE_ND", "INDEX_INFO"]

NDARRAY, NPSCALAR, SLICE_ND, INDEX_INFO = 1, 3, 6, 8

# dtype names flax writes (numpy's dtype.name, ml_dtypes' 'bfloat16').
_FLOATS = {"float16": "<f2", "float32": "<f4", "float64": "<f8"}
_OTHERS = {"int8": "<i1", "int16": "<i2", "int32": "<i4", "int64": "<i8",
           "uint8": "<u1", "uint16": "<u2", "uint32": "<u4", "uint64": "<u8",
           "bool": "|b1"}
ITEMSIZE = dict({name: np.dtype(code).itemsize
                 for name, code in {**_FLOATS, **_OTHERS}.items()},
                bfloat16=2)


def _msgpack():
    try:
        import msgpack  # pylint: disable=import-outside-toplevel
    except ImportError:
        raise ImporterError("reading msgpack checkpoints needs the msgpack "
                            "module (Debian: apt-get install "
                            "python3-msgpack; pip: msgpack)") from None
    return msgpack


def is_map_start(byte):
    """Whether a msgpack value starting with `byte` is a map."""
    return 0x80 <= byte <= 0x8F or byte in (0xDE, 0xDF)


def unpack(data, what, raw=False):
    """The msgpack value of `data` (bytes), ExtTypes left as they are."""
    msgpack = _msgpack()
    try:
        return msgpack.unpackb(data, raw=raw, strict_map_key=True)
    except msgpack.StackError:
        raise ImporterError(f"{what}: msgpack nested too deeply") from None
    except msgpack.ExtraData:
        raise ImporterError(f"{what}: bytes after the msgpack value") \
            from None
    except UnicodeDecodeError as err:
        raise ImporterError(f"{what}: a msgpack string is not UTF-8 "
                            f"({err.reason} at byte {err.start})") from None
    except (ValueError, TypeError, OverflowError) as err:
        text = str(err) or type(err).__name__
        if "incomplete" in text:
            text = "truncated"
        raise ImporterError(f"{what}: not valid msgpack ({text})") from None
    except RecursionError:
        raise ImporterError(f"{what}: msgpack nested too deeply") from None


def ext(value, code, what):
    """The payload of `value`, which must be msgpack ExtType `code`."""
    msgpack = _msgpack()
    if not isinstance(value, msgpack.ExtType):
        raise ImporterError(f"{what}: expected msgpack ExtType {code}, got "
                            f"{_kind(value)}")
    if value.code != code:
        raise ImporterError(f"{what}: expected msgpack ExtType {code}, got "
                            f"ExtType {value.code}")
    return value.data


def _kind(value):
    msgpack = _msgpack()
    if isinstance(value, msgpack.ExtType):
        return f"ExtType {value.code}"
    return type(value).__name__


def _ints(value, what, minimum=0):
    if not isinstance(value, (list, tuple)) or not all(
            isinstance(v, int) and not isinstance(v, bool) and v >= minimum
            for v in value):
        raise ImporterError(f"{what}: expected a list of integers >= "
                            f"{minimum}, got {value!r:.60}")
    return [int(v) for v in value]


def _dtype_name(value, what):
    name = value.decode("ascii", "replace") if isinstance(
        value, bytes) else value
    if name not in ITEMSIZE:
        raise ImporterError(f"{what}: unsupported dtype {name!r:.40}")
    return name


def ndarray_parts(value, what, code=NDARRAY):
    """(shape, dtype name, bytes) of an ExtType 1 (or 3) array."""
    payload = unpack(ext(value, code, what), what, raw=True)
    if not isinstance(payload, (list, tuple)) or len(payload) != 3:
        raise ImporterError(f"{what}: an array payload is [shape, dtype, "
                            "bytes]")
    shape = _ints(payload[0], what + ": shape")
    name = _dtype_name(payload[1], what)
    if not isinstance(payload[2], bytes):
        raise ImporterError(f"{what}: array data is {_kind(payload[2])}, "
                            "not bytes")
    return shape, name, payload[2]


def ndarray(value, what, code=NDARRAY):
    """A float32 array from an ExtType 1 (or 3) array of a floating dtype
    (bfloat16 widened exactly); the shape must match the bytes."""
    shape, name, data = ndarray_parts(value, what, code)
    return from_bytes(data, shape, name, what)


def from_bytes(data, shape, name, what):
    """float32 array of `shape` from little-endian bytes of dtype `name`."""
    want = math.prod(shape) * ITEMSIZE[name]
    if len(data) != want:
        raise ImporterError(f"{what}: shape {shape} of {name} needs {want} "
                            f"bytes, the data has {len(data)}")
    if name == "bfloat16":
        bits = np.frombuffer(data, "<u2").astype(np.uint32) << 16
        return bits.view(np.float32).reshape(shape)
    if name not in _FLOATS:
        raise ImporterError(f"{what}: dtype {name}, expected floating point")
    return np.frombuffer(data, _FLOATS[name]).astype(np.float32).reshape(
        shape)


def slice_nd(payload, what):
    """[(start, stop), ...] of a SliceNd payload (steps must be absent)."""
    slices = unpack(payload, what, raw=True)
    if not isinstance(slices, (list, tuple)):
        raise ImporterError(f"{what}: a SliceNd is a list of slices")
    out = []
    for item in slices:
        if not isinstance(item, bytes):
            raise ImporterError(f"{what}: a slice is {_kind(item)}, not "
                                "bytes")
        triple = unpack(item, what, raw=True)
        if not isinstance(triple, (list, tuple)) or len(triple) != 3 or \
                triple[2] not in (None, 1):
            raise ImporterError(f"{what}: a slice is [start, stop, None], "
                                f"got {triple!r:.60}")
        start, stop = _ints(triple[:2], what + ": slice")
        if stop < start:
            raise ImporterError(f"{what}: slice {start}:{stop} is reversed")
        out.append((start, stop))
    return out


def index_info(value, what):
    """(shape, dtype name, [slices], [shard ids]) of an ExtType 8."""
    payload = unpack(ext(value, INDEX_INFO, what), what, raw=True)
    if not isinstance(payload, (list, tuple)) or len(payload) != 3:
        raise ImporterError(f"{what}: an IndexInfo is [shape, slices, "
                            "shards]")
    shape_payload, slice_payloads, shards = payload
    if not isinstance(shape_payload, bytes) or not isinstance(
            slice_payloads, (list, tuple)):
        raise ImporterError(f"{what}: malformed IndexInfo")
    shaped = unpack(shape_payload, what, raw=True)
    if not isinstance(shaped, (list, tuple)) or len(shaped) != 4:
        raise ImporterError(f"{what}: a ShapedArray is [shape, dtype, "
                            "weak_type, named_shape]")
    shape = _ints(shaped[0], what + ": shape")
    name = _dtype_name(shaped[1], what)
    slices = []
    for item in slice_payloads:
        if not isinstance(item, bytes):
            raise ImporterError(f"{what}: a global slice is {_kind(item)}, "
                                "not bytes")
        slices.append(slice_nd(item, what))
    shards = _ints(shards, what + ": shards")
    if len(shards) != len(slices):
        raise ImporterError(f"{what}: {len(slices)} slices but "
                            f"{len(shards)} shard ids")
    return shape, name, slices, shards
