"""The objects a torch checkpoint may hold, and the unpickler that builds
only them: each global a checkpoint may name (`_GLOBALS`: torch's tensor
rebuild functions and storage types, OrderedDict, argparse.Namespace,
torch.device, torch.Size) maps to an inert stand-in of this module (a
`Tensor` is a storage, an offset, a size and a stride); any other global
is `Refused` before anything is called. `brief` puts a pickled value in a
message without walking it."""

import argparse
import collections
import math
import pickle

import numpy as np

from ._pickle_scan import Malformed, scan
from .common import ImporterError

__all__ = ["Refused", "STORAGES", "Storage", "StorageType", "Tensor",
           "Unpickler", "brief"]

# torch's storage types: numpy dtype (bf16 as its uint16 bits).
STORAGES = {"FloatStorage": "<f4", "DoubleStorage": "<f8",
             "HalfStorage": "<f2", "BFloat16Storage": "<u2",
             "LongStorage": "<i8", "IntStorage": "<i4", "ShortStorage": "<i2",
             "CharStorage": "i1", "ByteStorage": "u1", "BoolStorage": "?",
             "ComplexFloatStorage": "<c8", "ComplexDoubleStorage": "<c16"}
_FLOATS = ("FloatStorage", "DoubleStorage", "HalfStorage", "BFloat16Storage")


class Refused(pickle.UnpicklingError):
    """The pickle names a global outside the allow-list."""

    def __init__(self, name):
        super().__init__(name)
        self.name = name


class _Inert:
    """Base of the stand-ins: pickle's BUILD cannot change them."""

    __slots__ = ()

    def __setstate__(self, state):
        name = type(self).__name__.lstrip("_").lower()
        raise Malformed(f"a {name} with a state")


class StorageType(_Inert):
    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name


class Storage(_Inert):
    """A typed storage: its numpy array, set once its bytes are read (a
    view of a root storage in the legacy format)."""

    __slots__ = ("kind", "numel", "array", "root", "offset")

    def __init__(self, kind, numel, root=None, offset=0):
        self.kind, self.numel, self.root, self.offset = kind, numel, root, \
            offset
        self.array = None

    def values(self):
        if self.root is not None:
            return self.root.values()[self.offset:self.offset + self.numel]
        return self.array


class Tensor(_Inert):
    """A dense tensor of a checkpoint: `floats()` gives it as float32."""

    __slots__ = ("storage", "offset", "size", "stride")

    def __init__(self, storage, offset, size, stride):
        if not isinstance(storage, Storage):
            raise Malformed("a tensor without a storage")
        dims = (size, stride)
        if not all(isinstance(d, tuple) and all(
                isinstance(n, int) and not isinstance(n, bool) and n >= 0
                for n in d) for d in dims) or len(size) != len(stride) or \
                not isinstance(offset, int) or offset < 0:
            raise Malformed("a tensor with a malformed size, stride or "
                            "offset")
        self.storage, self.offset, self.size, self.stride = storage, offset, \
            size, stride

    @property
    def dtype(self):
        return np.dtype(STORAGES[self.storage.kind.name]).name \
            if self.storage.kind.name != "BFloat16Storage" else "bfloat16"

    def floats(self, what):
        """The values as a float32 array; ImporterError naming `what`
        unless the tensor is floating point and inside its storage."""
        kind = self.storage.kind.name
        if kind not in _FLOATS:
            raise ImporterError(f"{what} has dtype {self.dtype}, expected "
                                "floating point")
        base = self.storage.values()
        count = math.prod(self.size)
        if count:
            last = self.offset + sum((n - 1) * s
                                     for n, s in zip(self.size, self.stride))
            if last >= base.size:
                raise ImporterError(f"{what}: size {list(self.size)}, stride "
                                    f"{list(self.stride)} and offset "
                                    f"{self.offset} reach outside its "
                                    f"storage of {base.size} elements")
            if count > base.size - self.offset:
                raise ImporterError(f"{what} has {count} elements, more "
                                    "than its storage holds (overlapping "
                                    "strides)")
        else:
            return np.zeros(self.size, np.float32)
        view = np.lib.stride_tricks.as_strided(
            base[self.offset:], shape=self.size,
            strides=[s * base.itemsize for s in self.stride])
        if kind == "BFloat16Storage":
            return (view.astype(np.uint32) << 16).view(np.float32)
        return view.astype(np.float32)


def _rebuild_tensor(storage, offset, size, stride, *unused):
    del unused  # requires_grad, backward hooks, metadata: not needed
    return Tensor(storage, offset, size, stride)


def _rebuild_parameter(data, *unused):
    del unused  # requires_grad, backward hooks, state
    if not isinstance(data, Tensor):
        raise Malformed("a parameter without a tensor")
    return data


def _device(*args):
    del args  # where a tensor was: nothing the importer needs
    return "device"


def _size(dims=()):
    if not isinstance(dims, (tuple, list)) or not all(
            isinstance(d, int) for d in dims):
        raise Malformed("torch.Size of non-integers")
    return tuple(dims)


def brief(value):
    """A value of a pickle in a message, never walked (shared references
    can make str() of a nested list take exponential time)."""
    if isinstance(value, (str, bytes)):
        return repr(value[:40])
    if isinstance(value, (bool, float)) or value is None:
        return repr(value)
    if isinstance(value, int):
        return str(value) if value.bit_length() < 64 else "a huge integer"
    return f"a {type(value).__name__}"


# (module, name) a checkpoint may name -> the stand-in it gets.
_GLOBALS = {
    ("collections", "OrderedDict"): collections.OrderedDict,
    ("argparse", "Namespace"): argparse.Namespace,
    ("torch", "device"): _device,
    ("torch", "Size"): _size,
    ("torch._utils", "_rebuild_tensor"): _rebuild_tensor,
    ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor,
    ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
    ("torch._utils", "_rebuild_parameter_with_state"): _rebuild_parameter,
}


class Unpickler(pickle.Unpickler):
    """pickle's Unpickler with the allow-list; persistent ids (torch's
    storages) go to `storage`. One load() reads one pickle of `stream`
    and leaves the stream after it (legacy files hold several)."""

    def __init__(self, stream, storage=None):
        super().__init__(stream, encoding="utf-8")
        self.stream, self.storage = stream, storage

    def load(self):
        """Scans the opcodes first (_scan: nothing is built), then
        unpickles."""
        start = self.stream.tell()
        scan(self.stream)
        self.stream.seek(start)
        return super().load()

    def find_class(self, module, name):
        if module == "torch" and name in STORAGES:
            return StorageType(name)
        found = _GLOBALS.get((module, name))
        if found is None:
            raise Refused(f"{module}.{name}")
        return found

    def persistent_load(self, pid):
        if self.storage is None or not isinstance(pid, tuple) or \
                len(pid) < 2 or pid[0] != "storage" or \
                not isinstance(pid[1], StorageType):
            raise Malformed(f"persistent id {brief(pid)} is not a "
                            "storage")
        return self.storage(*pid[1:])
