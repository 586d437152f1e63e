"""Safetensors for the importers: vmoe.safetensors with every dtype other
frameworks store (F64, F32, F16, BF16 -> float32) and errors as
ImporterError (one line).
"""

from .. import safetensors
from .common import ImporterError


def read(path):
    """{name: float32 array} of a safetensors file, in header order."""
    try:
        return safetensors.load(path, dtypes=tuple(safetensors.DTYPES))
    except ValueError as err:
        raise ImporterError(str(err)) from None


def write(path, tensors):
    """Writes {name: array} as F32 safetensors, in the dict's order."""
    safetensors.save(path, tensors)
