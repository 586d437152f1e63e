"""ctypes descriptors of MLIR memrefs, for `_mlir_ciface_*` wrappers.

A ranked memref crosses the C interface as a pointer to

    struct { T *allocated; T *aligned; int64_t offset;
             int64_t sizes[rank]; int64_t strides[rank]; }

with sizes and strides in elements. `as_memref` builds one for a
C-contiguous numpy array or torch tensor (identity layout) and keeps the
array alive as long as the descriptor is.
"""

import ctypes
import functools

import numpy as np


@functools.lru_cache(maxsize=None)
def descriptor_type(rank):
    """The ctypes Structure of a rank-`rank` memref descriptor."""
    return type(f"MemRef{rank}D", (ctypes.Structure,), {
        "_fields_": [("allocated", ctypes.c_void_p),
                     ("aligned", ctypes.c_void_p),
                     ("offset", ctypes.c_int64),
                     ("sizes", ctypes.c_int64 * rank),
                     ("strides", ctypes.c_int64 * rank)],
    })


def as_memref(array):
    """A descriptor viewing `array` (numpy array or torch tensor) in place.

    The array must be C-contiguous: the compiled code assumes identity
    layouts. The descriptor holds a reference to the array (`.array`).
    """
    if hasattr(array, "data_ptr"):  # torch.Tensor, without importing torch
        if not array.is_contiguous():
            raise ValueError("memref arguments must be contiguous")
        address = array.data_ptr()
        shape = tuple(array.shape)
    else:
        if not (isinstance(array, np.ndarray)
                and array.flags["C_CONTIGUOUS"]):
            raise ValueError("memref arguments must be C-contiguous arrays")
        address = array.ctypes.data
        shape = array.shape
    strides = [1] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        strides[i] = strides[i + 1] * shape[i + 1]
    descriptor = descriptor_type(len(shape))()
    descriptor.allocated = descriptor.aligned = address
    descriptor.offset = 0
    descriptor.sizes[:] = shape
    descriptor.strides[:] = strides
    descriptor.array = array
    return descriptor
