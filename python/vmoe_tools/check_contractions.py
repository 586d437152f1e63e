"""Runs linalg contractions through the GPU pipeline and checks them.

    cd python && /usr/bin/python3 -m vmoe_tools.check_contractions \\
        --vmoe-opt ../build/bin/vmoe-opt [--gpu-mma none|tf32|bf16]
        [--rtol R] [--gpu] [--workdir DIR] [--build-only | --prebuilt]

Each case is one `linalg.generic` f32 contraction `C = C0 + sum_k A B` on
tensors, with shapes that are no multiple of the kernels' tiles (64 x 64
outputs, 16 or 8 values of k), batch dims, transposed and strided (sliced)
operands, as the dense layers, attention and the expert matmul of the model
have them. All cases are functions of one module, lowered with
`vmoe-lower-to-nvvm` (whose vmoe-gpu-contractions makes each a tiled GEMM
kernel), compiled for the GPU emulator (`format=emulator`; `--gpu` for a
real GPU), and called with operands in device memory. The reference is
PyTorch in float64. The error of an element is |got - ref| divided by
sum_k |A B| + |C0| (the scale of the rounding errors of the sum), and a
case passes when its largest error is at most rtol: FP32 sums of at most
40 products stay near 1e-7; TF32 and bf16 products are rounded to 11 and
8 significant bits (about 5e-4 and 4e-3).

Prints one line per case and a summary; exit status 0 all pass, 1 a
mismatch, 2 a tool failure.
"""

import argparse
import ctypes
import os
import sys
import tempfile

import numpy as np

from .check_layers import ToolError, _cuda_link_args, _run
from .device_memory import DeviceMemory

# Each case: loop dims (in loop order) with their sizes and kinds (r:
# reduction), the dims of A, B and C, and optionally, per operand, a slice:
# the operand is index `i` of dim `d` of a larger tensor of `n` entries
# there (a strided view after bufferization). C starts from the argument
# C0, or with `zero` from a linalg.fill of 0.0 (C0 is then unused).
CASES = [
    # linear: x [M, K] . w [K, N], two row and two column tiles, ragged.
    dict(name="linear_ragged", dims="mkn", kinds="prp",
         sizes=dict(m=70, k=37, n=90), a="mk", b="kn", c="mn"),
    # Batched, B transposed (k contiguous), K < 8.
    dict(name="batched_transposed_b", dims="bmnk", kinds="pppr",
         sizes=dict(b=3, m=19, n=66, k=7), a="bmk", b="bnk", c="bmn"),
    # A transposed (rows contiguous), one tile, K < 8.
    dict(name="transposed_a", dims="mkn", kinds="prp",
         sizes=dict(m=65, k=3, n=17), a="km", b="kn", c="mn"),
    # One column, K = 1.
    dict(name="single_column_k1", dims="mkn", kinds="prp",
         sizes=dict(m=30, k=1, n=1), a="mk", b="kn", c="mn"),
    # Attention scores: q and keys strided views of [N, T, 3, H, dh].
    dict(name="attention_scores", dims="nhijc", kinds="ppppr",
         sizes=dict(n=2, h=3, i=17, j=17, c=5), a="nihc", b="njhc",
         c="nhij", slice_a=(2, 0, 3), slice_b=(2, 1, 3)),
    # Attention context: probs [N, H, T, T] times v (a strided view), into
    # a zero-filled output (the kernel starts from 0.0, no initial read).
    dict(name="attention_context", dims="nhijc", kinds="ppprp",
         sizes=dict(n=2, h=3, i=17, j=17, c=5), a="nhij", b="njhc",
         c="nihc", slice_b=(2, 2, 3), zero=True),
    # The expert matmul of ExpertLowering: loops (e, g, b, k, n).
    dict(name="expert_matmul", dims="egbkn", kinds="ppprp",
         sizes=dict(e=3, g=2, b=9, k=20, n=33), a="egbk", b="ekn",
         c="egbn"),
    # The same, zero-filled.
    dict(name="expert_matmul_zero", dims="egbkn", kinds="ppprp",
         sizes=dict(e=3, g=2, b=9, k=20, n=33), a="egbk", b="ekn",
         c="egbn", zero=True),
]


def _shape(case, dims):
    return [case["sizes"][d] for d in dims]


def _arg_shape(case, operand):
    """The shape of an operand's function argument (before any slice)."""
    shape = _shape(case, case[operand])
    view = case.get("slice_" + operand)
    if view:
        dim, _, count = view
        shape = shape[:dim] + [count] + shape[dim:]
    return shape


def _tensor(shape):
    return "tensor<" + "x".join(str(s) for s in shape) + "xf32>"


def _map(case, operand):
    dims = case["dims"]
    loops = ", ".join(f"d{i}" for i in range(len(dims)))
    results = ", ".join(f"d{dims.index(d)}" for d in case[operand])
    return f"affine_map<({loops}) -> ({results})>"


def emit_mlir():
    """One function per case: `@<name>(A, B, C0, out)`, out = C0 + A B
    (or 0 + A B)."""
    lines = []
    for case in CASES:
        name = case["name"]
        t_c = _tensor(_shape(case, case["c"]))
        m_c = t_c.replace("tensor", "memref")
        t_a, t_b = (_tensor(_arg_shape(case, o)) for o in "ab")
        lines.append(f"func.func @{name}(%a_arg: {t_a}, %b_arg: {t_b}, "
                     f"%c0: {t_c}, %out: {m_c}) "
                     f"attributes {{llvm.emit_c_interface}} {{")
        for operand in "ab":
            view = case.get("slice_" + operand)
            full = _arg_shape(case, operand)
            if not view:
                continue
            dim, index, _ = view
            offsets = [0] * len(full)
            offsets[dim] = index
            sizes = list(full)
            sizes[dim] = 1
            strides = [1] * len(full)
            view_type = _tensor(_shape(case, case[operand]))
            lines.append(
                f"  %{operand} = tensor.extract_slice %{operand}_arg"
                f"[{', '.join(map(str, offsets))}] "
                f"[{', '.join(map(str, sizes))}] "
                f"[{', '.join(map(str, strides))}]"
                f" : {_tensor(full)} to {view_type}")
        names = [f"%{o}" if case.get("slice_" + o) else f"%{o}_arg"
                 for o in "ab"]
        init = "%c0"
        if case.get("zero"):
            init = "%zeros"
            lines += ["  %zero = arith.constant 0.0 : f32",
                      f"  %empty = tensor.empty() : {t_c}",
                      f"  %zeros = linalg.fill ins(%zero : f32) "
                      f"outs(%empty : {t_c}) -> {t_c}"]
        iterators = ", ".join(
            '"reduction"' if kind == "r" else '"parallel"'
            for kind in case["kinds"])
        lines += [
            f"  %r = linalg.generic {{indexing_maps = [{_map(case, 'a')}, "
            f"{_map(case, 'b')}, {_map(case, 'c')}], "
            f"iterator_types = [{iterators}]}}",
            f"      ins({names[0]}, {names[1]} : "
            f"{_tensor(_shape(case, case['a']))}, "
            f"{_tensor(_shape(case, case['b']))}) outs({init} : {t_c}) {{",
            "  ^bb0(%x: f32, %y: f32, %acc: f32):",
            "    %p = arith.mulf %x, %y : f32",
            "    %s = arith.addf %acc, %p : f32",
            "    linalg.yield %s : f32",
            "  } -> " + t_c,
            f"  bufferization.materialize_in_destination %r in restrict "
            f"writable %out : ({t_c}, {m_c}) -> ()",
            "  return",
            "}",
        ]
    return "\n".join(lines) + "\n"


def _inputs(case, rng):
    return {operand: rng.standard_normal(_arg_shape(case, operand))
            .astype(np.float32) for operand in "ab"} | {
        "c0": rng.standard_normal(_shape(case, case["c"])).astype(np.float32)}


def _operand(case, operand, array):
    view = case.get("slice_" + operand)
    if not view:
        return array
    dim, index, _ = view
    return np.take(array, index, axis=dim)


def reference(case, inputs):
    """(C0 + A B, sum_k |A B| + |C0|) in float64."""
    import torch

    a = torch.from_numpy(_operand(case, "a", inputs["a"])).double()
    b = torch.from_numpy(_operand(case, "b", inputs["b"])).double()
    c0 = torch.from_numpy(inputs["c0"]).double()
    if case.get("zero"):
        c0 = torch.zeros_like(c0)
    spec = f"{case['a']},{case['b']}->{case['c']}"
    ref = c0 + torch.einsum(spec, a, b)
    scale = c0.abs() + torch.einsum(spec, a.abs(), b.abs())
    return ref.numpy(), scale.numpy()


def _library_path(workdir, args):
    target = "gpu" if args.gpu else "emulator"
    return os.path.join(workdir, f"contractions-{target}-{args.gpu_mma}.so")


def _build(workdir, args):
    mlir = os.path.join(workdir, "contractions.mlir")
    with open(mlir, "w") as f:
        f.write(emit_mlir())
    lowered = os.path.join(workdir, "lowered.mlir")
    binary = "" if args.gpu else " format=emulator"
    pipeline = (f"vmoe-lower-to-nvvm{{chip={args.gpu_chip} "
                f"gpu-mma={args.gpu_mma}{binary}}}")
    _run("vmoe-opt", [args.vmoe_opt, mlir,
                      f"--pass-pipeline=builtin.module({pipeline})",
                      "-o", lowered])
    ll = os.path.join(workdir, "contractions.ll")
    _run("mlir-translate", [args.mlir_translate, "--mlir-to-llvmir", lowered,
                            "-o", ll])
    library = _library_path(workdir, args)
    _run("clang", [args.clang, "-shared", "-fPIC", "-O2", "-march=x86-64-v2",
                   "-Wno-override-module", ll, "-o", library, "-lm",
                   *_cuda_link_args(args.vmoe_opt, emulate=not args.gpu)])
    return library


def _call(library, case, inputs):
    """Runs the case's function on device copies of `inputs`."""
    memory = DeviceMemory(library, "check_contractions")
    memory.available()
    out = memory.upload(np.full(_shape(case, case["c"]), np.nan,
                                dtype=np.float32))
    descriptors = [memory.upload(inputs[name]) for name in ("a", "b", "c0")]
    function = getattr(library, "_mlir_ciface_" + case["name"])
    function.restype = None
    function(*(ctypes.byref(d) for d in descriptors + [out]))
    memory.check("running " + case["name"])
    got = memory.download(out)
    memory.free_all()
    return got


def _parse_args(argv):
    parser = argparse.ArgumentParser(
        prog="python3 -m vmoe_tools.check_contractions", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    repo = os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
    parser.add_argument("--vmoe-opt",
                        default=os.path.join(repo, "build/bin/vmoe-opt"))
    parser.add_argument("--mlir-translate",
                        default="/usr/lib/llvm-22/bin/mlir-translate")
    parser.add_argument("--clang", default="clang-22")
    parser.add_argument("--gpu-chip", default="sm_90")
    parser.add_argument("--gpu-mma", default="none",
                        choices=("none", "tf32", "bf16"))
    parser.add_argument("--gpu", action="store_true",
                        help="run on the GPU instead of the emulator")
    parser.add_argument("--rtol", type=float, default=1e-6)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workdir",
                        help="keep the artifacts here (default: a temporary "
                             "directory, removed at exit)")
    parser.add_argument("--build-only", action="store_true",
                        help="build the library into --workdir and stop "
                             "(for a machine without LLVM: --prebuilt)")
    parser.add_argument("--prebuilt", action="store_true",
                        help="run the library --build-only left in "
                             "--workdir (needs no LLVM, clang or vmoe-opt)")
    args = parser.parse_args(argv)
    if (args.build_only or args.prebuilt) and not args.workdir:
        parser.error("--build-only and --prebuilt need --workdir")
    return args


def main(argv=None):
    args = _parse_args(argv)
    rng = np.random.default_rng(args.seed)
    with tempfile.TemporaryDirectory(prefix="vmoe-contractions-") as tmp:
        workdir = args.workdir or tmp
        os.makedirs(workdir, exist_ok=True)
        try:
            path = (_library_path(workdir, args) if args.prebuilt
                    else _build(workdir, args))
        except ToolError as error:
            print(f"check_contractions: {error.stage} failed: "
                  f"{' '.join(error.command)}\n{error.detail}",
                  file=sys.stderr)
            return 2
        if args.build_only:
            print(f"check_contractions: built {path}")
            return 0
        try:
            library = ctypes.CDLL(path)
        except OSError as error:
            print(f"check_contractions: cannot load {path}: {error}",
                  file=sys.stderr)
            return 2
        failed, largest = 0, 0.0
        for case in CASES:
            inputs = _inputs(case, rng)
            ref, scale = reference(case, inputs)
            got = _call(library, case, inputs)
            error = float(np.max(np.abs(got - ref) / scale))
            if not np.isfinite(error):
                error = float("inf")
            ok = error <= args.rtol
            failed += not ok
            largest = max(largest, error)
            shape = " x ".join(f"{d}={case['sizes'][d]}" for d in case["dims"])
            print(f"{case['name']}: {shape}: max error {error:.3g}"
                  f"{'' if ok else '  FAIL'}")
        print(f"check_contractions: {len(CASES)} cases, "
              f"{len(CASES) - failed} passed, gpu-mma={args.gpu_mma}, "
              f"largest error {largest:.3g}, rtol={args.rtol:g}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
