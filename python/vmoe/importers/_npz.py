""".npz archives read member by member, every size checked before it is
allocated: numpy's format (numpy.lib.format headers), never a pickle.

np.load trusts the archive: a member whose header claims 2^40 floats is
allocated before its data is found missing (MemoryError), a corrupt zip or
a bad CRC raises zipfile.BadZipFile, and a .npy renamed .npz loads as one
array. Here the archive must be a zip of .npy members, and each header's
shape times its itemsize must be exactly the rest of the member, whose
size the zip directory gives (zipfile never reads past it); the member is
read to its end, so that zipfile checks its CRC.
"""

import math
import zipfile

import numpy as np

from .._files import open_regular
from ._zip import check_sizes, read_member, zip_errors
from .common import ImporterError, describe_failure

__all__ = ["read"]


def _header(archive, info, path, name):
    """(shape, fortran_order, dtype, header bytes) of an .npy member."""
    check_sizes(info, path)
    with archive.open(info) as member:
        version = np.lib.format.read_magic(member)
        readers = {(1, 0): np.lib.format.read_array_header_1_0,
                   (2, 0): np.lib.format.read_array_header_2_0}
        if version not in readers:
            raise ImporterError(f"{path}: {name!r}: .npy format version "
                                f"{version} is not supported")
        try:
            header = readers[version](member)
        except Exception as err:  # pylint: disable=broad-except
            # numpy parses the header dict with tokenize and ast, which
            # fail in several ways (ValueError, TokenError, SyntaxError).
            raise ImporterError(f"{path}: {name!r}: malformed .npy header: "
                                f"{describe_failure(err)}") from None
        offset = member.tell()
    shape, fortran, dtype = header
    if dtype.hasobject:
        raise ImporterError(f"{path}: {name!r}: object arrays (pickles) are "
                            "not read")
    return shape, fortran, dtype, offset


def _member(archive, info, path):
    name = info.filename[:-len(".npy")]
    shape, fortran, dtype, offset = _header(archive, info, path, name)
    nbytes = math.prod(shape) * dtype.itemsize
    if offset + nbytes != info.file_size:
        raise ImporterError(
            f"{path}: {name!r}: the header's shape {list(shape)} of {dtype} "
            f"needs {nbytes} bytes, the member holds "
            f"{info.file_size - offset}")
    data = read_member(archive, info, nbytes, path, skip=offset)
    array = np.frombuffer(data, dtype=dtype)
    return name, array.reshape(shape, order="F" if fortran else "C")


def read(path):
    """{name: array} of the .npy members of an .npz archive."""
    errors, describe = zip_errors(path, ".npz")
    try:
        with open_regular(path, ImporterError) as f, \
                zipfile.ZipFile(f) as archive:
            out = {}
            for info in archive.infolist():
                if not info.filename.endswith(".npy"):
                    raise ImporterError(f"{path}: member "
                                        f"{info.filename!r} is not an .npy "
                                        "array")
                name, array = _member(archive, info, path)
                if name in out:
                    raise ImporterError(f"{path}: {name!r} is stored twice")
                out[name] = array
            return out
    except ImporterError:
        raise
    except errors as err:
        raise ImporterError(describe(err)) from None
