#!/usr/bin/env python3
"""The MoE layer compiled for the GPU against the cuBLAS roofline.

    # where vmoe is built (no GPU needed):
    python3 bench/gpu_layer_bench.py build --out DIR [--chip sm_90]
    # on the GPU machine (numpy + torch, no LLVM needed):
    python3 bench/gpu_layer_bench.py run --dir DIR --cublas EXE

`build` lowers the layers of bench/moe_layer_bench.py (same sizes, same
MLIR) with `vmoe-lower-to-nvvm`, once per GEMM mode (--mma: none = FP32
SIMT, tf32, bf16), and links each into a shared object with the
CUDA runtime (a few hundred KB; the weights are not stored). `run` draws
the same deterministic inputs, copies them to device memory once, times
`@moe_layer` (median of --repeats calls; each runs its kernels on one stream
and synchronizes once before it returns), checks the output against the per-expert PyTorch layer on the
CPU (max relative error < 1e-4, check_layers' measure) and runs
bench/cuda/cublas_roofline on the same sizes; it prints both medians and
their ratio. scripts/device_check.sh runs both steps.
"""

import argparse
import ctypes
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import moe_layer_bench as layer_bench  # noqa: E402
from moe_layer_bench import (SIZES, INPUT_NAMES, capacity,  # noqa: E402
                             draw_inputs, emit_mlir, relative_error)
from vmoe_tools.device_memory import DeviceMemory  # noqa: E402

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(command):
    done = subprocess.run(command, capture_output=True, text=True,
                          timeout=900)
    if done.returncode != 0:
        first = (done.stderr.strip().splitlines() or ["(no stderr)"])[0]
        raise SystemExit(f"gpu_layer_bench: {os.path.basename(command[0])} "
                         f"failed ({done.returncode}): {first}")
    return done.stdout


# GEMM modes (vmoe-lower-to-nvvm gpu-mma) and the largest relative error
# each may show against the FP32 PyTorch layer (two GEMMs: TF32 rounds the
# operands to 10 mantissa bits, bf16 to 7).
MMA_TOLERANCE = {"none": 1e-4, "tf32": 1e-2, "bf16": 5e-2}


def _folder(name, mode):
    return name if mode == "none" else f"{name}-{mode}"


def build(args):
    link_file = os.path.join(os.path.dirname(os.path.abspath(args.vmoe_opt)),
                             "..", "lib", "vmoe_cuda_runtime.link")
    if not os.path.exists(link_file):
        raise SystemExit(f"gpu_layer_bench: {link_file} is missing (build "
                         "with the CUDA toolkit first)")
    with open(link_file) as f:
        link = [line.strip() for line in f
                if line.strip() and not line.startswith("#")]
    for name, mode in ((n, m) for n in args.sizes for m in args.mma):
        size = SIZES[name]
        out = os.path.join(args.out, _folder(name, mode))
        os.makedirs(out, exist_ok=True)
        B = capacity(size)
        mlir = os.path.join(out, "layer.mlir")
        with open(mlir, "w") as f:
            f.write(emit_mlir(size, B))
        lowered, ll = os.path.join(out, "lowered.mlir"), os.path.join(
            out, "layer.ll")
        _run([args.vmoe_opt, mlir, "--pass-pipeline=builtin.module("
              f"vmoe-lower-to-nvvm{{chip={args.chip} gpu-mma={mode}}})", "-o",
              lowered])
        _run([args.mlir_translate, "--mlir-to-llvmir", lowered, "-o", ll])
        _run([args.clang, "-O2", "-march=x86-64-v2", "-shared", "-fPIC",
              "-Wno-override-module", ll, "-o", os.path.join(out, "layer.so"),
              "-Wl,--as-needed", *link, "-lm"])
        for temporary in (mlir, lowered, ll):
            os.remove(temporary)
        with open(os.path.join(out, "layer.json"), "w") as f:
            json.dump({"size": size, "B": B, "mma": mode}, f)
        print(f"built {name} (B = {B}) mma={mode}")


def _cublas_rows(exe, size, B, repeats):
    """{row name: median ms} of cublas_roofline on the layer's sizes."""
    out = _run([exe, "--D", str(size["D"]), "--H", str(size["H"]),
                "--E", str(size["E"]), "--B", str(B), "--G", str(size["G"]),
                "--repeats", str(repeats)])
    rows = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and not line.startswith("#"):
            rows[parts[0]] = float(parts[1])
    return rows


def run(args):
    import torch
    failures = 0
    print(f"{'size':<8}{'mma':<6}{'vmoe ms':>9}{'max rel err':>13}"
          f"{'cuBLAS fp32':>12}{'tf32':>8}{'bf16':>8}{'vmoe/fp32':>11}",
          flush=True)
    cublas_cache = {}
    for name, mode in ((n, m) for n in args.sizes for m in args.mma):
        folder = os.path.join(args.dir, _folder(name, mode))
        if not os.path.exists(os.path.join(folder, "layer.json")):
            continue
        with open(os.path.join(folder, "layer.json")) as f:
            meta = json.load(f)
        size, B = meta["size"], meta["B"]
        library = ctypes.CDLL(os.path.join(folder, "layer.so"))
        memory = DeviceMemory(library, "gpu_layer_bench")
        memory.available()
        message = ctypes.create_string_buffer(512)
        inputs = draw_inputs(name, size)
        # Operands in device memory, copied once; each call runs its kernels
        # on one stream and returns after its final synchronization.
        descriptors = [memory.upload(inputs[n]) for n in INPUT_NAMES]
        out_descriptor = memory.upload(np.full(inputs["x"].shape, np.nan,
                                               dtype=np.float32))
        descriptors.append(out_descriptor)
        call_args = [ctypes.byref(d) for d in descriptors]
        layer = library._mlir_ciface_moe_layer
        layer.restype = None

        def call():
            layer(*call_args)

        for _ in range(args.warmup):
            call()
        times = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            call()
            times.append(time.perf_counter() - start)
        if library.vmoe_cuda_last_error(message, 512):
            raise SystemExit(f"gpu_layer_bench: {name}: GPU error: "
                             f"{message.value.decode()}")
        ms = 1e3 * statistics.median(times)
        torch_inputs = [torch.from_numpy(inputs[n]) for n in INPUT_NAMES]
        with torch.no_grad():
            reference = layer_bench.moe_loop(*torch_inputs, size["k"],
                                             B).numpy()
        error = relative_error(memory.download(out_descriptor), reference)
        memory.free_all()
        ok = error < MMA_TOLERANCE[mode]
        failures += not ok
        if args.cublas and name not in cublas_cache:
            cublas_cache[name] = _cublas_rows(args.cublas, size, B,
                                              args.repeats)
        rows = cublas_cache.get(name, {})
        cublas = rows.get("cublas_fp32")

        def cell(row):
            value = rows.get(row)
            return f"{value:.3f}" if value else "n/a"

        print(f"{name:<8}{mode:<6}{ms:>9.3f}{error:>13.2e}"
              f"{cell('cublas_fp32'):>12}{cell('cublas_tf32'):>8}"
              f"{cell('cublas_bf16'):>8}"
              f"{(f'{ms / cublas:.2f}x' if cublas else 'n/a'):>11}"
              f"{'' if ok else '  FAIL'}", flush=True)
    return 1 if failures else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    b = sub.add_parser("build")
    b.add_argument("--out", required=True)
    b.add_argument("--chip", default="sm_90")
    b.add_argument("--vmoe-opt", default=os.path.join(_ROOT,
                                                      "build/bin/vmoe-opt"))
    b.add_argument("--mlir-translate",
                   default="/usr/lib/llvm-22/bin/mlir-translate")
    b.add_argument("--clang", default="clang-22")
    r = sub.add_parser("run")
    r.add_argument("--dir", required=True)
    r.add_argument("--cublas", help="bench/cuda/cublas_roofline binary")
    r.add_argument("--repeats", type=int, default=20)
    r.add_argument("--warmup", type=int, default=3)
    for p in (b, r):
        p.add_argument("--sizes", type=lambda t: t.split(","),
                       default=list(SIZES))
        p.add_argument("--mma", type=lambda t: t.split(","),
                       default=list(MMA_TOLERANCE),
                       help="GEMM modes, of none,tf32,bf16 (default: all)")
    args = parser.parse_args()
    unknown = [s for s in args.sizes if s not in SIZES]
    if unknown:
        parser.error(f"unknown size {unknown[0]!r} ({', '.join(SIZES)})")
    bad = [m for m in args.mma if m not in MMA_TOLERANCE]
    if bad:
        parser.error(f"unknown mma mode {bad[0]!r} (none, tf32, bf16)")
    return build(args) if args.mode == "build" else run(args)


if __name__ == "__main__":
    sys.exit(main())
