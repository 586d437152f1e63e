"""Runs one compiled case: python3 -m vmoe_tools.run_case CASE_DIR
[--device].

Reads CASE_DIR/call.json (argument order), inputs.npz and the shared object
named in call.json; calls `_mlir_ciface_<function>` with memref descriptors
for the inputs, the f64 scalars, then the destination memrefs; writes the
destinations to outputs.npz. check_layers runs it in a child process so a
crash in generated code is reported instead of killing the harness. Needs
numpy only. With --device (GPU cases), every memref is a device copy made
with the GPU runtime linked into the library (device_memory.py: cuMemAlloc
and explicit copies, never managed memory), the destinations are copied back
after the call, and a GPU error is reported as one line.
"""

import ctypes
import json
import os
import sys

import numpy as np

from .device_memory import DeviceMemory
from .memref import as_memref

# Values the compiled code must overwrite; left in place they show up as
# mismatches (ids/slots) or NaN (out).
_SENTINEL = {"int32": -7, "float32": np.nan}


def run(case_dir, device=False):
    with open(os.path.join(case_dir, "call.json")) as f:
        call = json.load(f)
    inputs = np.load(os.path.join(case_dir, "inputs.npz"))
    library = ctypes.CDLL(os.path.join(case_dir, call["library"]))
    memory = DeviceMemory(library, "run_case") if device else None
    if memory:
        memory.available()
    place = memory.upload if memory else as_memref
    outputs = {name: place(np.full(shape, _SENTINEL[dtype], dtype=dtype))
               for name, shape, dtype in call["outputs"]}
    descriptors = [place(np.ascontiguousarray(inputs[name]))
                   for name in call["inputs"]]
    descriptors += [outputs[name] for name, _, _ in call["outputs"]]
    scalars = [ctypes.c_double(value) for value in call["scalars"]]
    memrefs = [ctypes.byref(d) for d in descriptors]
    n_in = len(call["inputs"])
    function = getattr(library, "_mlir_ciface_" + call["function"])
    function.restype = None
    function(*memrefs[:n_in], *scalars, *memrefs[n_in:])
    if memory:
        memory.check("running the case")
        results = {name: memory.download(d) for name, d in outputs.items()}
        memory.free_all()
    else:
        results = {name: np.array(d.array) for name, d in outputs.items()}
    np.savez(os.path.join(case_dir, "outputs.npz"), **results)


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3) or (len(sys.argv) == 3
                                       and sys.argv[2] != "--device"):
        sys.exit("usage: python3 -m vmoe_tools.run_case CASE_DIR [--device]")
    run(sys.argv[1], device=len(sys.argv) == 3)
