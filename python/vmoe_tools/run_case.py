"""Runs one compiled case: /usr/bin/python3 -m vmoe_tools.run_case CASE_DIR
[--managed].

Reads CASE_DIR/call.json (argument order), inputs.npz and the shared object
named in call.json; calls `_mlir_ciface_<function>` with memref descriptors
for the inputs, the f64 scalars, then the destination memrefs; writes the
destinations to outputs.npz. check_layers runs it in a child process so a
crash in generated code is reported instead of killing the harness. Needs
numpy only. With --managed (GPU cases), every memref lives in CUDA managed
memory from the GPU runtime linked into the library (vmoe_cuda_alloc_managed),
and a GPU error is reported as one line with exit status 2.
"""

import ctypes
import json
import os
import sys

import numpy as np

from .memref import as_memref

# Values the compiled code must overwrite; left in place they show up as
# mismatches (ids/slots) or NaN (out).
_SENTINEL = {"int32": -7, "float32": np.nan}


class ManagedMemory:
    """numpy arrays in CUDA managed memory of the library's GPU runtime."""

    def __init__(self, library):
        self.library = library
        library.vmoe_cuda_alloc_managed.restype = ctypes.c_void_p
        library.vmoe_cuda_alloc_managed.argtypes = [ctypes.c_size_t]
        library.vmoe_cuda_free.argtypes = [ctypes.c_void_p]
        self.pointers = []

    def check(self, what):
        """Exits with one line when the GPU runtime reports an error."""
        message = ctypes.create_string_buffer(512)
        if self.library.vmoe_cuda_last_error(message, 512):
            sys.exit(f"run_case: GPU error {what}: "
                     f"{message.value.decode()}")

    def array(self, like):
        """A managed array with the contents of `like`."""
        pointer = self.library.vmoe_cuda_alloc_managed(max(like.nbytes, 1))
        if not pointer:
            self.check("allocating managed memory")
            sys.exit("run_case: cannot allocate managed memory")
        self.pointers.append(pointer)
        buffer = (ctypes.c_byte * like.nbytes).from_address(pointer)
        array = np.frombuffer(buffer, dtype=like.dtype).reshape(like.shape)
        array[...] = like
        return array


def run(case_dir, managed=False):
    with open(os.path.join(case_dir, "call.json")) as f:
        call = json.load(f)
    inputs = np.load(os.path.join(case_dir, "inputs.npz"))
    library = ctypes.CDLL(os.path.join(case_dir, call["library"]))
    memory = None
    if managed:
        memory = ManagedMemory(library)
        message = ctypes.create_string_buffer(512)
        if library.vmoe_cuda_available(message, 512) != 0:
            sys.exit(f"run_case: no usable GPU: {message.value.decode()}")
    place = memory.array if memory else (lambda array: array)
    outputs = {name: place(np.full(shape, _SENTINEL[dtype], dtype=dtype))
               for name, shape, dtype in call["outputs"]}
    descriptors = [as_memref(place(np.ascontiguousarray(inputs[name])))
                   for name in call["inputs"]]
    descriptors += [as_memref(outputs[name]) for name, _, _ in call["outputs"]]
    scalars = [ctypes.c_double(value) for value in call["scalars"]]
    memrefs = [ctypes.byref(d) for d in descriptors]
    n_in = len(call["inputs"])
    function = getattr(library, "_mlir_ciface_" + call["function"])
    function.restype = None
    function(*memrefs[:n_in], *scalars, *memrefs[n_in:])
    if memory:
        library.vmoe_cuda_synchronize()
        memory.check("running the case")
    np.savez(os.path.join(case_dir, "outputs.npz"),
             **{name: np.array(value) for name, value in outputs.items()})


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3) or (len(sys.argv) == 3
                                       and sys.argv[2] != "--managed"):
        sys.exit("usage: python3 -m vmoe_tools.run_case CASE_DIR [--managed]")
    run(sys.argv[1], managed=len(sys.argv) == 3)
