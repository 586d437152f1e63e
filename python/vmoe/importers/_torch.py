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

Each pickle's opcodes are walked first (_pickle_scan.py: no object is
built; denial-of-service shapes refused), then it is unpickled by pickle's
Unpickler with `find_class` limited to an allow-list ("Restricting
Globals" in the pickle documentation), each name mapped to an inert
stand-in of _torch_objects.py: the tensor rebuild functions
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

import io
import struct
import tarfile
import zipfile

import numpy as np

from .._files import open_regular
from ._pickle_scan import Malformed
from ._torch_objects import STORAGES, Refused, Storage, Tensor, Unpickler, \
    brief
from ._zip import ZIP_MAGIC, read_member, zip_errors
from .common import ImporterError

__all__ = ["Tensor", "brief", "load"]

# torch.save's legacy format: magic number and protocol version.
_LEGACY_MAGIC = 0x1950a86a20f9469cfc6c
_LEGACY_PROTOCOL = 1001


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
            dtype = np.dtype(STORAGES[kind.name])
            data = read_member(archive, archive.getinfo(name),
                               numel * dtype.itemsize, path)
            storages[key] = Storage(kind, numel)
            storages[key].array = np.frombuffer(data, dtype)
        return storages[key]

    info = archive.getinfo(pickles[0])
    data = read_member(archive, info, info.file_size, path)
    return Unpickler(io.BytesIO(data), storage).load()


def _load_legacy(path, data):
    """The legacy (non-zip) format: every pickle is allow-listed too."""
    stream = io.BytesIO(data)
    if Unpickler(stream).load() != _LEGACY_MAGIC:
        raise Malformed("not a torch checkpoint (no zip archive, no legacy "
                        "magic number)")
    if Unpickler(stream).load() != _LEGACY_PROTOCOL:
        raise Malformed("unknown legacy protocol version")
    info = Unpickler(stream).load()
    if not isinstance(info, dict) or info.get("little_endian") is not True:
        raise ImporterError(f"{path}: big-endian storages are not supported")
    roots = {}

    def storage(kind, key, location, numel, view=None):
        del location
        if not isinstance(key, str):
            raise Malformed(f"storage key {brief(key)}")
        if key not in roots:
            roots[key] = Storage(kind, _checked_numel(numel))
        if view is None:
            return roots[key]
        if not (isinstance(view, tuple) and len(view) == 3):
            raise Malformed("malformed storage view")
        _, offset, size = view
        return Storage(kind, _checked_numel(size), roots[key],
                        _checked_numel(offset))

    result = Unpickler(stream, storage).load()
    keys = Unpickler(stream).load()
    if not isinstance(keys, list) or not all(
            isinstance(k, str) for k in keys) or set(keys) != set(roots):
        raise Malformed("storage keys do not match the tensors")
    for key in keys:
        root = roots[key]
        dtype = np.dtype(STORAGES[root.kind.name])
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
