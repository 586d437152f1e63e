"""Torch checkpoints (.pth, .pt, .bin) read with numpy: no code runs.

torch.load unpickles, and a pickle may call any importable function
(`__reduce__`): under a plain torch.load a hostile checkpoint runs code.
Debian's python3-torch (1.13) has no safe-globals API, its weights_only
loader cannot read a float (pickle opcode BINFLOAT), so it refuses the
optimizer state of every training checkpoint, and its torch.load ignores
`pickle_module`. So this module reads torch's two file formats itself
(torch is not needed):

- zip (torch >= 1.6): ARCHIVE/data.pkl, storages in ARCHIVE/data/KEY;
- legacy (torch.save(..., _use_new_zipfile_serialization=False)): pickled
  magic number, protocol, sys_info, the object, its storage keys, then
  each storage as an int64 element count and its bytes.

The object is unpickled by pickle's Unpickler with `find_class` limited to
`_GLOBALS` ("Restricting Globals" in the pickle documentation), each name
mapped to an inert stand-in of this module: the tensor rebuild functions
of torch._utils (a `Tensor`: storage, offset, size, stride), the storage
types (a dtype), collections.OrderedDict, and argparse.Namespace,
torch.device and torch.Size, which timm's training checkpoints hold under
`args` (CheckpointSaver: state_dict, args, optimizer state, epoch, ...).
Any other global (os.system, builtins.eval, sparse, meta or quantized
tensors, tensor subclasses, nn.Module objects) is refused with one line
before anything is called; nothing falls back to torch.load. TorchScript
archives and torch < 0.4's tar format are refused too. Sizes are checked
before data is read: a storage's bytes must be what its element count
says, a tensor must lie inside its storage.
"""

import argparse
import collections
import io
import math
import pickle
import pickletools
import struct
import tarfile
import zipfile

import numpy as np

from .._files import open_regular
from ._zip import ZIP_MAGIC, read_member, zip_errors
from .common import ImporterError

__all__ = ["Tensor", "brief", "load"]

# torch's storage types: numpy dtype (bf16 as its uint16 bits).
_STORAGES = {"FloatStorage": "<f4", "DoubleStorage": "<f8",
             "HalfStorage": "<f2", "BFloat16Storage": "<u2",
             "LongStorage": "<i8", "IntStorage": "<i4", "ShortStorage": "<i2",
             "CharStorage": "i1", "ByteStorage": "u1", "BoolStorage": "?",
             "ComplexFloatStorage": "<c8", "ComplexDoubleStorage": "<c16"}
_FLOATS = ("FloatStorage", "DoubleStorage", "HalfStorage", "BFloat16Storage")

# Pickle opcodes torch.save never writes: protocol 5's out-of-band buffers
# (a damaged stream of them made CPython report a SystemError at exit).
_DENIED_OPCODES = {"BYTEARRAY8", "NEXT_BUFFER", "READONLY_BUFFER"}

# The most nodes a tuple or frozenset may expand to through shared (memo)
# references: hashing one (a dict key) walks every node, so 60 levels of
# (t, t) would take 2^60 steps.
_MAX_EXPANDED = 1_000_000
_TUPLES = {"TUPLE", "TUPLE1", "TUPLE2", "TUPLE3", "FROZENSET"}

# torch.save's legacy format: magic number and protocol version.
_LEGACY_MAGIC = 0x1950a86a20f9469cfc6c
_LEGACY_PROTOCOL = 1001


class Malformed(ValueError):
    """The checkpoint breaks a rule of its format (one line)."""


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


class _StorageType(_Inert):
    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name


class _Storage(_Inert):
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
        if not isinstance(storage, _Storage):
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
        return np.dtype(_STORAGES[self.storage.kind.name]).name \
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


class _Unpickler(pickle.Unpickler):
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
        _scan(self.stream)
        self.stream.seek(start)
        return super().load()

    def find_class(self, module, name):
        if module == "torch" and name in _STORAGES:
            return _StorageType(name)
        found = _GLOBALS.get((module, name))
        if found is None:
            raise Refused(f"{module}.{name}")
        return found

    def persistent_load(self, pid):
        if self.storage is None or not isinstance(pid, tuple) or \
                len(pid) < 2 or pid[0] != "storage" or \
                not isinstance(pid[1], _StorageType):
            raise Malformed(f"persistent id {brief(pid)} is not a "
                            "storage")
        return self.storage(*pid[1:])


def _popped(opcode, stack, marks):
    """The stack entries `opcode` consumes (removed from `stack`)."""
    before = opcode.stack_before
    count = len(before)
    if pickletools.markobject in before:
        if not marks:
            raise Malformed(f"pickle opcode {opcode.name} without a mark")
        start = marks.pop()
        count = before.index(pickletools.markobject)
        popped = stack[start:]
        del stack[start:]
    else:
        popped = []
    if count > len(stack):
        raise Malformed("pickle stack underflow")
    below = stack[len(stack) - count:] if count else []
    del stack[len(stack) - len(below):]
    return below + popped


def _scan(stream):
    """Walks the pickle's opcodes (pickletools, which builds nothing) as
    the unpickler will run them, tracking how many nodes each tuple
    expands to. Refuses: opcodes torch.save never writes, memo indices
    out of sequence (the C unpickler would allocate a memo that large),
    hashable objects expanding beyond _MAX_EXPANDED nodes."""
    stack, marks, memo = [], [], {}
    for opcode, arg, pos in pickletools.genops(stream):
        name = opcode.name
        if name in _DENIED_OPCODES:
            raise Malformed(f"pickle opcode {name}")
        if name == "MARK":
            marks.append(len(stack))
            continue
        if name in ("PUT", "BINPUT", "LONG_BINPUT"):
            if not stack or not 0 <= arg <= pos:
                raise Malformed(f"pickle memo index {arg} at byte {pos}")
            memo[arg] = stack[-1]
            continue
        popped = _popped(opcode, stack, marks)
        if name in _TUPLES:
            size = 1 + sum(popped)
            if size > _MAX_EXPANDED:
                raise Malformed(f"a tuple of more than {_MAX_EXPANDED} "
                                "nodes (shared references)")
            stack.append(size)
        elif name in ("GET", "BINGET", "LONG_BINGET"):
            if arg not in memo:
                raise Malformed(f"pickle memo index {arg} not set")
            stack.append(memo[arg])
        elif name == "MEMOIZE":
            memo[len(memo)] = popped[0]
            stack.append(popped[0])
        elif name == "DUP":
            stack.extend(popped * 2)
        else:  # what else is built hashes in O(1) or is unhashable
            stack.extend([1] * len(opcode.stack_after))


def _checked_numel(numel):
    if not isinstance(numel, int) or isinstance(numel, bool) or numel < 0:
        raise Malformed(f"storage size {brief(numel)}")
    return numel


def _load_zip(path, archive):
    names = archive.namelist()
    pickles = [n for n in names if n.endswith("/data.pkl")
               and n.count("/") == 1]
    if len(pickles) != 1:
        raise Malformed("no ARCHIVE/data.pkl: not a torch.save zip archive")
    prefix = pickles[0][:-len("data.pkl")]
    if prefix + "constants.pkl" in names:
        raise ImporterError(f"{path}: a TorchScript archive (torch.jit.save)"
                            ", not a state dict")
    if any(info.compress_type != zipfile.ZIP_STORED
           for info in archive.infolist()):
        # A deflated member may expand 1000-fold: never asked for.
        raise Malformed("compressed members (torch.save writes none)")
    if prefix + "byteorder" in names and \
            archive.read(prefix + "byteorder") != b"little":
        raise ImporterError(f"{path}: big-endian storages are not supported")
    storages = {}

    def storage(kind, key, location, numel):
        del location  # every storage is read to the CPU
        if not isinstance(key, str):
            raise Malformed(f"storage key {brief(key)}")
        if key not in storages:
            numel = _checked_numel(numel)
            name = f"{prefix}data/{key}"
            if name not in names:
                raise Malformed(f"storage {brief(key)} is missing")
            dtype = np.dtype(_STORAGES[kind.name])
            data = read_member(archive, archive.getinfo(name),
                               numel * dtype.itemsize, path)
            storages[key] = _Storage(kind, numel)
            storages[key].array = np.frombuffer(data, dtype)
        return storages[key]

    info = archive.getinfo(pickles[0])
    data = read_member(archive, info, info.file_size, path)
    return _Unpickler(io.BytesIO(data), storage).load()


def _load_legacy(path, data):
    """The legacy (non-zip) format: every pickle is allow-listed too."""
    stream = io.BytesIO(data)
    if _Unpickler(stream).load() != _LEGACY_MAGIC:
        raise Malformed("not a torch checkpoint (no zip archive, no legacy "
                        "magic number)")
    if _Unpickler(stream).load() != _LEGACY_PROTOCOL:
        raise Malformed("unknown legacy protocol version")
    info = _Unpickler(stream).load()
    if not isinstance(info, dict) or info.get("little_endian") is not True:
        raise ImporterError(f"{path}: big-endian storages are not supported")
    roots = {}

    def storage(kind, key, location, numel, view=None):
        del location
        if not isinstance(key, str):
            raise Malformed(f"storage key {brief(key)}")
        if key not in roots:
            roots[key] = _Storage(kind, _checked_numel(numel))
        if view is None:
            return roots[key]
        if not (isinstance(view, tuple) and len(view) == 3):
            raise Malformed("malformed storage view")
        _, offset, size = view
        return _Storage(kind, _checked_numel(size), roots[key],
                        _checked_numel(offset))

    result = _Unpickler(stream, storage).load()
    keys = _Unpickler(stream).load()
    if not isinstance(keys, list) or not all(
            isinstance(k, str) for k in keys) or set(keys) != set(roots):
        raise Malformed("storage keys do not match the tensors")
    for key in keys:
        root = roots[key]
        dtype = np.dtype(_STORAGES[root.kind.name])
        (numel,) = struct.unpack("<q", _take(stream, 8))
        if numel != root.numel:
            raise Malformed(f"storage {brief(key)}: {numel} elements stored, "
                            f"{root.numel} expected")
        root.array = np.frombuffer(_take(stream, numel * dtype.itemsize),
                                   dtype)
    return result


def _take(stream, nbytes):
    data = stream.read(nbytes)
    if len(data) != nbytes:
        raise Malformed("truncated storage data")
    return data


def load(path):
    """The object a torch checkpoint holds: containers, numbers, strings,
    argparse.Namespace and `Tensor`s. Errors: one-line ImporterError."""
    with open_regular(path, ImporterError) as f:
        try:
            data = f.read()
        except OSError as err:
            raise ImporterError(f"{path}: {err.strerror or err}") from None
    errors, describe = zip_errors(path, "torch checkpoint")
    try:
        if data[:4] == ZIP_MAGIC:
            with zipfile.ZipFile(io.BytesIO(data)) as archive:
                return _load_zip(path, archive)
        if tarfile.is_tarfile(io.BytesIO(data)):
            raise ImporterError(f"{path}: the tar format of torch < 0.4 is "
                                "not supported; save it again with "
                                "torch.save")
        return _load_legacy(path, data)
    except ImporterError:
        raise
    except Refused as err:
        raise ImporterError(
            f"{path}: refused: the pickle names {err.name}, which is not a "
            "dense tensor, a container or argparse.Namespace (a checkpoint "
            "must not run code)") from None
    except Malformed as err:
        raise ImporterError(f"{path}: not a valid torch checkpoint: {err}") \
            from None
    except errors as err:
        raise ImporterError(describe(err)) from None
    except Exception as err:  # pylint: disable=broad-except
        # pickle's opcodes fail in many ways on a damaged stream.
        text = str(err).strip().splitlines()
        raise ImporterError(f"{path}: malformed pickle: "
                            f"{type(err).__name__}: "
                            f"{text[0][:120] if text else ''}") from None
