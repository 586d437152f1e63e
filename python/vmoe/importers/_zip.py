"""Zip members read with their sizes checked first (the .npz and torch
readers): a member is read only when its size in the zip directory is the
size the format expects, and to its end, so that zipfile checks its CRC.
Every failure is a one-line ImporterError naming the file and member."""

import zipfile
import zlib

from .common import ImporterError

__all__ = ["ZIP_MAGIC", "check_sizes", "read_member", "zip_errors"]

ZIP_MAGIC = b"PK\x03\x04"

# Deflate expands at most ~1032:1; a member claiming more is corrupt.
_MAX_DEFLATE_RATIO = 1032


def check_sizes(info, path):
    """Refuses a member whose directory sizes cannot both be true."""
    stored = info.compress_type == zipfile.ZIP_STORED
    if stored and info.file_size != info.compress_size or \
            info.file_size > _MAX_DEFLATE_RATIO * max(info.compress_size, 1):
        raise ImporterError(f"{path}: {info.filename!r}: zip sizes disagree "
                            f"({info.compress_size} bytes stored, "
                            f"{info.file_size} claimed)")


def read_member(archive, info, nbytes, path, skip=0):
    """The `nbytes` bytes after the first `skip` of member `info`, which
    must hold exactly skip + nbytes bytes (checked before reading)."""
    check_sizes(info, path)
    if skip + nbytes != info.file_size:
        raise ImporterError(f"{path}: {info.filename!r}: {info.file_size} "
                            f"bytes, expected {skip + nbytes}")
    with archive.open(info) as member:
        member.read(skip)
        data = member.read(nbytes)
        if len(data) != nbytes or member.read(1):
            raise ImporterError(f"{path}: {info.filename!r}: truncated")
    return data


def zip_errors(path, what):
    """The exception types of a damaged archive, and their one line."""
    def describe(err):
        if isinstance(err, zipfile.BadZipFile):
            return f"{path}: not a readable {what} (zip) archive: {err}"
        if isinstance(err, OSError):
            return f"{path}: cannot read the {what}: {err.strerror or err}"
        text = str(err).strip().splitlines()
        return (f"{path}: cannot read the {what}: "
                f"{text[0] if text else type(err).__name__}")
    # ValueError: numpy headers; EOFError: truncated members;
    # NotImplementedError: compression methods; RuntimeError: encryption.
    return (zipfile.BadZipFile, OSError, ValueError, EOFError,
            NotImplementedError, RuntimeError, zlib.error), describe
