"""numpy arrays copied to and from CUDA device memory, for GPU cases.

The GPU runtime linked into a compiled library (lib/Runtime/CUDA) exports
vmoe_cuda_alloc / vmoe_cuda_copy_to_device / vmoe_cuda_copy_to_host /
vmoe_cuda_free: plain device memory (cuMemAlloc), never managed memory.
`DeviceMemory(library).upload(array)` returns a memref descriptor of a
device copy of `array`; `download(descriptor)` copies it back. Errors are
one line (SystemExit) with the runtime's first error.
"""

import ctypes

import numpy as np

from .memref import descriptor_type


class DeviceMemory:
    """Device buffers of one library's GPU runtime, freed by free_all()."""

    def __init__(self, library, tool):
        self.library = library
        self.tool = tool
        library.vmoe_cuda_alloc.restype = ctypes.c_void_p
        library.vmoe_cuda_alloc.argtypes = [ctypes.c_size_t]
        library.vmoe_cuda_copy_to_device.argtypes = [
            ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
        library.vmoe_cuda_copy_to_host.argtypes = [
            ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
        library.vmoe_cuda_free.argtypes = [ctypes.c_void_p]
        self.pointers = []

    def available(self):
        """Exits with one line when there is no usable GPU."""
        message = ctypes.create_string_buffer(512)
        if self.library.vmoe_cuda_available(message, 512) != 0:
            raise SystemExit(f"{self.tool}: no usable GPU: "
                             f"{message.value.decode()}")

    def check(self, what):
        """Exits with one line when the GPU runtime reports an error."""
        message = ctypes.create_string_buffer(512)
        if self.library.vmoe_cuda_last_error(message, 512):
            raise SystemExit(f"{self.tool}: GPU error {what}: "
                             f"{message.value.decode()}")

    def upload(self, array):
        """A memref descriptor of a device copy of the C-contiguous array."""
        array = np.ascontiguousarray(array)
        pointer = self.library.vmoe_cuda_alloc(max(array.nbytes, 1))
        if not pointer:
            self.check("allocating device memory")
            raise SystemExit(f"{self.tool}: cannot allocate device memory")
        self.pointers.append(pointer)
        if self.library.vmoe_cuda_copy_to_device(pointer, array.ctypes.data,
                                                 array.nbytes):
            self.check("copying to the device")
        strides = [1] * array.ndim
        for i in range(array.ndim - 2, -1, -1):
            strides[i] = strides[i + 1] * array.shape[i + 1]
        descriptor = descriptor_type(array.ndim)()
        descriptor.allocated = descriptor.aligned = pointer
        descriptor.offset = 0
        descriptor.sizes[:] = array.shape
        descriptor.strides[:] = strides
        descriptor.like = (array.shape, array.dtype)
        return descriptor

    def download(self, descriptor):
        """The contents of an uploaded buffer as a new numpy array."""
        shape, dtype = descriptor.like
        array = np.empty(shape, dtype=dtype)
        if self.library.vmoe_cuda_copy_to_host(array.ctypes.data,
                                               descriptor.aligned,
                                               array.nbytes):
            self.check("copying to the host")
        return array

    def free_all(self):
        for pointer in self.pointers:
            self.library.vmoe_cuda_free(pointer)
        self.pointers = []
