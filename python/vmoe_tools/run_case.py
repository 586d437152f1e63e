"""Runs one compiled case: /usr/bin/python3 -m vmoe_tools.run_case CASE_DIR.

Reads CASE_DIR/call.json (argument order), inputs.npz and the shared object
named in call.json; calls `_mlir_ciface_<function>` with memref descriptors
for the inputs, the f64 scalars, then the destination memrefs; writes the
destinations to outputs.npz. check_layers runs it in a child process so a
crash in generated code is reported instead of killing the harness. Needs
numpy only.
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


def run(case_dir):
    with open(os.path.join(case_dir, "call.json")) as f:
        call = json.load(f)
    inputs = np.load(os.path.join(case_dir, "inputs.npz"))
    outputs = {name: np.full(shape, _SENTINEL[dtype], dtype=dtype)
               for name, shape, dtype in call["outputs"]}
    descriptors = [as_memref(np.ascontiguousarray(inputs[name]))
                   for name in call["inputs"]]
    descriptors += [as_memref(outputs[name]) for name, _, _ in call["outputs"]]
    scalars = [ctypes.c_double(value) for value in call["scalars"]]
    memrefs = [ctypes.byref(d) for d in descriptors]
    n_in = len(call["inputs"])
    library = ctypes.CDLL(os.path.join(case_dir, call["library"]))
    function = getattr(library, "_mlir_ciface_" + call["function"])
    function.restype = None
    function(*memrefs[:n_in], *scalars, *memrefs[n_in:])
    np.savez(os.path.join(case_dir, "outputs.npz"), **outputs)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python3 -m vmoe_tools.run_case CASE_DIR")
    run(sys.argv[1])
