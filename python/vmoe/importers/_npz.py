""".npz archives (numpy.savez of a flattened param tree), read defensively.

Each member's .npy header is read first and its claimed size compared
with the member's size in the zip directory, so a header claiming 2^40
floats is refused before anything is allocated; the data is then read in
pieces (memory grows only with bytes that exist) through zipfile, which
checks the CRC; a member whose directory sizes contradict each other
(more than deflate's 1032:1) is refused first (_zip.check_sizes). Every failure -- not a zip, truncated, bad CRC, an object
array, a .npy renamed .npz -- is one ImporterError line naming the file
and member. numpy saves ml_dtypes' bfloat16 as a 2-byte void dtype
('|V2'): read as bfloat16.
"""

import math
import zipfile
import zlib

import numpy as np

from .._files import open_regular
from . import _msgpack
from ._zip import check_sizes
from .common import ImporterError

__all__ = ["keys", "read"]

_PIECE = 1 << 26


def _open(path):
    f = open_regular(path, ImporterError)
    try:
        return zipfile.ZipFile(f)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError,
            EOFError, NotImplementedError) as err:
        f.close()
        raise ImporterError(f"{path}: not a readable .npz (zip): "
                            f"{err}") from None
    except OSError as err:
        f.close()
        raise ImporterError(f"{path}: cannot read ({err.strerror or err})") \
            from None


def _members(archive, path):
    out = {}
    for info in archive.infolist():
        if info.filename.endswith("/"):  # a directory entry
            continue
        if not info.filename.endswith(".npy"):
            raise ImporterError(f"{path}: member {info.filename!r:.60} is "
                                "not a .npy array")
        out[info.filename[:-len(".npy")]] = info
    return out


def keys(path):
    """The array names of an .npz."""
    with _open(path) as archive:
        return list(_members(archive, path))


def read(path, names):
    """{names[key]: float32 array} for the members named in `names`."""
    out = {}
    with _open(path) as archive:
        for key, info in _members(archive, path).items():
            if key in names:
                out[names[key]] = _read_member(archive, info,
                                               f"{path}: {key!r}")
    return out


def _read_member(archive, info, what):
    check_sizes(info, archive.filename or what)
    try:
        with archive.open(info) as f:
            return _read_npy(f, info.file_size, what)
    except (zipfile.BadZipFile, EOFError, zlib.error, OSError,
            NotImplementedError, RuntimeError) as err:
        raise ImporterError(f"{what}: {err}") from None


def _read_npy(f, size, what):
    try:
        version = np.lib.format.read_magic(f)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
        elif version in ((2, 0), (3, 0)):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
        else:
            raise ValueError(f"unsupported .npy version {version}")
    except Exception as err:  # pylint: disable=broad-except
        # numpy parses the header dict with tokenize and ast, which fail in
        # several ways (ValueError, SyntaxError, tokenize.TokenError).
        text = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise ImporterError(f"{what}: not a .npy array ({text})") from None
    if dtype.hasobject:
        raise ImporterError(f"{what}: an object array (pickled data is "
                            "never loaded)")
    if dtype.kind == "V" and dtype.itemsize == 2 and dtype.names is None:
        name = "bfloat16"
    elif dtype.kind == "f" and dtype.itemsize in (2, 4, 8):
        name = f"float{8 * dtype.itemsize}"
    else:
        raise ImporterError(f"{what}: dtype {dtype}, expected floating "
                            "point")
    need = math.prod(shape) * dtype.itemsize
    have = size - f.tell()
    if need != have:
        raise ImporterError(f"{what}: the header claims shape "
                            f"{list(shape)} ({need} bytes), the member "
                            f"holds {have}")
    data = bytearray()
    while len(data) < need:
        piece = f.read(min(_PIECE, need - len(data)))
        if not piece:
            raise ImporterError(f"{what}: truncated ({len(data)} of {need} "
                                "bytes)")
        data += piece
    f.read(1)  # reaches the end: zipfile checks the CRC
    if dtype.byteorder == ">":
        data = np.frombuffer(bytes(data), dtype).byteswap().tobytes()
    array = _msgpack.from_bytes(bytes(data), list(shape), name, what)
    if fortran:
        array = np.ascontiguousarray(array.reshape(shape[::-1]).transpose())
    return array
