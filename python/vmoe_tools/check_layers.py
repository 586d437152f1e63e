"""Compiles every case of the matrix to native code and checks it.

    cd python && /usr/bin/python3 -m vmoe_tools.check_layers \\
        --vmoe-opt ../build/bin/vmoe-opt [--filter SUBSTR] [--workdir DIR]

Per case (vmoe_tools.cases): emit `@moe_case` as tensor-level MLIR, lower
it with `vmoe-opt --vmoe-lower-to-cpu` (or the given pipeline), translate to
LLVM IR, build a shared object with clang, call `_mlir_ciface_moe_case` in a
child process (vmoe_tools.run_case) and compare with the PyTorch reference:
expert ids and slots must be equal, and every element of `out` must satisfy
|got - ref| <= rtol * (|ref| + floor * max|ref|), ref computed in float64.
The reported max_rel_err is max |got - ref| / (|ref| + floor * max|ref|):
a case passes when it is at most rtol (default 1e-5). The floor defaults to
0.1, an absolute tolerance of 1e-6 * max|ref|: f32 sums over D and H leave
errors near 2e-7 * max|ref| on elements close to 0 (torch's own f32 result
shows them too), which a floor of 1e-3 would reject.

Exit status: 0 all pass, 1 a result mismatch, 2 a tool failure (its stderr
is printed; takes precedence over 1). Cases are built by 2 concurrent jobs
(threads driving the tools). `--scope smoke` runs the subset cases.SMOKE;
`--threads 1,2` runs each library with both counts and requires
bit-identical outputs; `--cache DIR` reuses libraries compiled from the
same lowered MLIR (vmoe_tools.library_cache).
"""

import argparse
import concurrent.futures
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile

import numpy as np

from . import cases, library_cache

_PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_REPO = os.path.dirname(_PYTHON_DIR)
_TIMEOUT_S = 300
# Routings without a GPU lowering: `--target cuda` leaves their cases out
# (and says so).
CPU_ONLY = ("expert_choice", "soft", "decoder")
# libomp of LLVM 22, for cases lowered with parallel=true.
_LLVM_LIB = "/usr/lib/llvm-22/lib"


class ToolError(Exception):
    """A tool exited non-zero, timed out, or the compiled code crashed."""

    def __init__(self, stage, command, detail):
        super().__init__(stage)
        self.stage, self.command, self.detail = stage, command, detail


def _run(stage, command, env=None):
    try:
        done = subprocess.run(command, capture_output=True, text=True,
                              timeout=_TIMEOUT_S, env=env)
    except subprocess.TimeoutExpired:
        raise ToolError(stage, command, f"timed out after {_TIMEOUT_S} s")
    except OSError as error:
        raise ToolError(stage, command, str(error))
    if done.returncode != 0:
        raise ToolError(stage, command,
                        f"exit status {done.returncode}\n{done.stderr}")


def _prepare(case, case_dir, keep_library=False):
    """Writes the MLIR, inputs and call manifest; returns the reference."""
    if not keep_library:
        shutil.rmtree(case_dir, ignore_errors=True)
    os.makedirs(case_dir, exist_ok=True)
    inputs = cases.make_inputs(case)
    with open(os.path.join(case_dir, "case.mlir"), "w") as f:
        f.write(cases.emit_mlir(case))
    np.savez(os.path.join(case_dir, "inputs.npz"), **inputs)
    call = {
        "library": "case.so",
        "function": "moe_case",
        "inputs": list(cases.input_names(case)),
        "scalars": ([] if case["runtime_ratio"] is None
                    else [case["runtime_ratio"]]),
        "outputs": [(name, shape, np.dtype(dtype).name)
                    for name, shape, dtype in cases.output_specs(case)],
    }
    with open(os.path.join(case_dir, "call.json"), "w") as f:
        json.dump(call, f)
    return cases.reference(case, inputs)


def build_and_run(case_dir, args):
    """Lowers, compiles and runs one prepared case; returns its outputs."""
    def path(name):
        return os.path.join(case_dir, name)

    if args.prebuilt:
        if not os.path.exists(path("case.so")):
            raise ToolError("prebuilt", [path("case.so")],
                            "missing: build the workdir with --build-only")
    else:
        _run("vmoe-opt", [args.vmoe_opt, path("case.mlir"),
                          *args.pipeline_args, "-o", path("lowered.mlir")])
        if args.verify_only:
            return None
        # --as-needed: GPU cases do not use OpenMP, and a GPU machine that
        # runs --prebuilt cases may not have LLVM's libomp.
        clang_args = ["-shared", "-fPIC", "-O2", args.march,
                      "-Wno-override-module", "-Wl,--as-needed",
                      f"-L{_LLVM_LIB}", f"-Wl,-rpath,{_LLVM_LIB}", "-lomp",
                      "-lm", *args.extra_link_args]
        cached = library_cache.lookup(args.cache, path("lowered.mlir"),
                                      [args.mlir_translate, args.clang,
                                       *clang_args])
        if not cached.fetch(path("case.so")):
            _run("mlir-translate", [args.mlir_translate, "--mlir-to-llvmir",
                                    path("lowered.mlir"), "-o",
                                    path("case.ll")])
            _run("clang", [args.clang, path("case.ll"), "-o",
                           path("case.so"), *clang_args])
            cached.store(path("case.so"))
    if args.build_only:
        return None
    results = []
    for threads in args.thread_counts:
        env = dict(os.environ)
        if threads:
            env["OMP_NUM_THREADS"] = str(threads)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (_PYTHON_DIR, env.get("PYTHONPATH")) if p)
        run_args = ["--device"] if args.target == "cuda" else []
        _run("run", [sys.executable, "-m", "vmoe_tools.run_case", case_dir,
                     *run_args], env=env)
        with np.load(path("outputs.npz")) as outputs:
            results.append({name: outputs[name] for name in outputs.files})
    for threads, other in zip(args.thread_counts[1:], results[1:]):
        if not same_bits(results[0], other):
            raise ToolError("run", [f"OMP_NUM_THREADS={threads}"],
                            f"outputs with {threads} threads differ from "
                            f"those with {args.thread_counts[0]} (not "
                            "bit-identical)")
    return results[0]


def same_bits(first, second):
    """Whether two output dicts hold the same arrays, bit for bit."""
    return sorted(first) == sorted(second) and all(
        first[k].dtype == second[k].dtype and first[k].shape == second[k].shape
        and first[k].tobytes() == second[k].tobytes() for k in first)


def compare(ref, got, rtol, floor):
    """(first mismatch or None, max abs error, max relative error)."""
    routing = [key for key in ("ids", "slots", "token_ids") if key in ref]
    for key in routing:
        wrong = np.argwhere(got[key] != ref[key])
        if len(wrong):
            index = tuple(int(i) for i in wrong[0])
            return (f"{key} differ at {index}: got "
                    f"{got[key][index]}, expected {ref[key][index]} "
                    f"({len(wrong)} mismatches)"), None, None
    for key in ("importance", "load", "gshard"):
        if key not in ref:
            continue
        # The auxiliary losses (SPEC §8): f32 sums of E or S terms.
        loss_error = np.abs(got[key].astype(np.float64) - ref[key])
        if not np.all(loss_error <= 1e-4 * np.abs(ref[key]) + 1e-6):
            g = int(np.argmax(loss_error))
            return (f"{key} differs in group {g}: got {got[key][g]!r}, "
                    f"expected {ref[key][g]!r}"), None, None
    expected = ref["out"]
    error = np.abs(got["out"].astype(np.float64) - expected)
    scale = np.abs(expected) + floor * np.abs(expected).max()
    with np.errstate(divide="ignore", invalid="ignore"):
        relative = np.where(scale > 0, error / scale,
                            np.where(error == 0, 0.0, np.inf))
    max_abs, max_rel = float(error.max()), float(relative.max())  # NaN stays
    bad = np.argwhere(~(error <= rtol * scale))  # NaN counts as bad
    if len(bad):
        index = tuple(int(i) for i in bad[0])
        return (f"out differs at {index} (g, t, d): got {got['out'][index]!r},"
                f" expected {expected[index]!r} ({len(bad)} elements beyond"
                f" tolerance)"), max_abs, max_rel
    return None, max_abs, max_rel


def _cuda_link_args(vmoe_opt, emulate=False):
    """The link arguments of the GPU runtime (build/lib beside vmoe-opt),
    and of the GPU emulator with `emulate`."""
    lib_dir = os.path.join(os.path.dirname(os.path.abspath(vmoe_opt)), "..",
                           "lib")
    args = []
    names = ["vmoe_cuda_runtime.link"]
    if emulate:
        names.append("vmoe_gpu_emulator.link")
    for name in names:
        path = os.path.join(lib_dir, name)
        if not os.path.exists(path):
            raise SystemExit(f"check_layers: {path} is missing (a build "
                             "without the CUDA toolkit?)")
        with open(path) as f:
            args += [line.strip() for line in f
                     if line.strip() and not line.startswith("#")
                     and not line.startswith("main:")]
    return args


def parse_args(argv):
    parser = argparse.ArgumentParser(
        prog="python3 -m vmoe_tools.check_layers",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--vmoe-opt",
                        default=os.path.join(_REPO, "build/bin/vmoe-opt"))
    parser.add_argument("--mlir-translate",
                        default="/usr/lib/llvm-22/bin/mlir-translate")
    parser.add_argument("--clang", default="clang-22")
    parser.add_argument("--workdir",
                        help="keep the artifacts here (default: a temporary "
                             "directory, removed at exit)")
    parser.add_argument("--filter", default="",
                        help="only the cases whose name contains SUBSTR")
    lowering = parser.add_mutually_exclusive_group()
    lowering.add_argument(
        "--pass-pipeline-arg", default="--vmoe-lower-to-cpu",
        help="raw vmoe-opt arguments that lower to LLVM, split like a "
             "shell command line; give it with '=' as it starts with "
             "'--' (default: %(default)s)")
    lowering.add_argument(
        "--pipeline",
        help="a textual pipeline, passed as "
             "--pass-pipeline=builtin.module(PIPELINE), e.g. "
             "'vmoe-lower-to-cpu{fuse=true}'")
    parser.add_argument("--target", choices=("cpu", "cuda"), default="cpu",
                        help="cuda: lower with vmoe-lower-to-nvvm, link the "
                             "GPU runtime and run on the GPU, operands "
                             "copied to device memory (default: cpu)")
    parser.add_argument("--gpu-chip", default="sm_90",
                        help="CUDA architecture for --target cuda")
    parser.add_argument("--gpu-emulate", action="store_true",
                        help="with --target cuda: compile the kernels for "
                             "the host and run them in the GPU emulator "
                             "(libvmoe_gpu_emulator.so; no GPU needed)")
    parser.add_argument("--gpu-mma", default="none",
                        choices=("none", "tf32", "bf16"),
                        help="with --target cuda: the GEMM instructions "
                             "(vmoe-lower-to-nvvm gpu-mma)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--threads", default="0",
                        help="OMP_NUM_THREADS of the compiled code (for "
                             "parallel=true; default: the runtime's); a "
                             "comma list such as 1,2 runs each library with "
                             "every count, and the outputs must be "
                             "bit-identical")
    parser.add_argument("--scope", choices=("full", "smoke"), default="full",
                        help="smoke: only the cases of cases.SMOKE, a subset "
                             "covering every routing family and edge kind "
                             "(the default suite's secondary pipelines); "
                             "full: every case (default)")
    parser.add_argument("--smoke-cases", metavar="NAME,...",
                        help="with --scope smoke: these cases instead of "
                             "cases.SMOKE")
    parser.add_argument("--cache",
                        help="a folder of compiled case libraries keyed by "
                             "the lowered MLIR and the tool arguments: a "
                             "case whose lowering is already there is not "
                             "translated and compiled again")
    parser.add_argument("--rtol", type=float, default=1e-5)
    parser.add_argument("--floor", type=float, default=0.1,
                        help="absolute tolerance as a fraction of max|ref|, "
                             "times rtol (default: %(default)s)")
    parser.add_argument("--build-only", action="store_true",
                        help="lower, translate and link every case, but do "
                             "not run it (GPU cases on a machine without a "
                             "GPU)")
    parser.add_argument("--prebuilt", action="store_true",
                        help="run the case libraries already in --workdir "
                             "(from --build-only) without building them: "
                             "GPU machines without LLVM")
    parser.add_argument("--verify-only", action="store_true",
                        help="only emit the MLIR and check that vmoe-opt "
                             "parses and verifies it (no lowering)")
    parser.add_argument("--list", action="store_true",
                        help="list the selected cases and exit")
    args = parser.parse_args(argv)
    try:
        args.thread_counts = [int(t) for t in args.threads.split(",")]
    except ValueError:
        parser.error(f"--threads {args.threads!r}: expected N or N,M,...")
    if any(t < 0 for t in args.thread_counts):
        parser.error(f"--threads {args.threads!r}: counts must be >= 0")
    if args.prebuilt and not args.workdir:
        parser.error("--prebuilt needs --workdir")
    # Host code of GPU cases may run on another machine's CPU.
    args.march = "-march=x86-64-v2" if args.target == "cuda" else "-march=native"
    args.extra_link_args = []
    if args.gpu_emulate and args.target != "cuda":
        parser.error("--gpu-emulate needs --target cuda")
    if args.target == "cuda" and not args.prebuilt:
        args.extra_link_args = _cuda_link_args(args.vmoe_opt,
                                               args.gpu_emulate)
        if not args.pipeline and args.pass_pipeline_arg == "--vmoe-lower-to-cpu":
            binary = " format=emulator" if args.gpu_emulate else ""
            args.pipeline = (f"vmoe-lower-to-nvvm{{chip={args.gpu_chip} "
                             f"gpu-mma={args.gpu_mma}{binary}}}")
    if args.verify_only:
        args.pipeline_args = []
    elif args.pipeline:
        args.pipeline_args = [f"--pass-pipeline=builtin.module("
                              f"{args.pipeline})"]
    else:
        args.pipeline_args = shlex.split(args.pass_pipeline_arg)
    return args


def _describe(case):
    if case["routing"] == "soft":
        return (f"G={case['G']} S={case['S']} D={case['D']} H={case['H']} "
                f"E={case['E']} soft P={case['P']}")
    runtime = ""
    if case["runtime_ratio"] is not None:
        runtime = (f" runtime C={case['runtime_ratio']}"
                   f" B={case['runtime_capacity']}")
    valid = ("" if case["num_valid"] is None
             else f" valid={case['num_valid']}")
    return (f"G={case['G']} S={case['S']} D={case['D']} H={case['H']} "
            f"E={case['E']}"
            f"{'' if case['routing'] == 'expert_choice' else ' k=' + str(case['k'])}"
            f" {case['routing']}"
            f"{'/' + case['score'] if case['routing'] == 'bpr' else ''} "
            f"C={case['C']} B={case['B']}{runtime}{valid}")


def main(argv=None):
    args = parse_args(argv)
    smoke = cases.SMOKE
    if args.smoke_cases:
        smoke = set(args.smoke_cases.split(","))
        unknown = smoke - {c["name"] for c in cases.CASES}
        if unknown:
            print(f"check_layers: --smoke-cases: unknown cases "
                  f"{sorted(unknown)}")
            return 2
    selected = [c for c in cases.CASES if args.filter in c["name"]
                and (args.scope == "full" or c["name"] in smoke)]
    if args.target == "cuda":
        # Expert choice, Soft MoE and decoder blocks: CPU only (issue 11).
        cpu_only = [c for c in selected if c["routing"] in CPU_ONLY]
        selected = [c for c in selected if c["routing"] not in CPU_ONLY]
        if cpu_only:
            print(f"check_layers: {len(cpu_only)} cases not run: no GPU "
                  f"lowering of {', '.join(CPU_ONLY)} routing")
    if not selected:
        print(f"check_layers: no case matches {args.filter!r}")
        return 2
    if args.list:
        for case in selected:
            print(f"{case['name']}: {_describe(case)}")
        print(f"{len(selected)} cases")
        return 0
    workdir = args.workdir or tempfile.mkdtemp(prefix="vmoe-check-layers-")
    try:
        return _check(selected, workdir, args)
    finally:
        if not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)


def _check(selected, workdir, args):
    os.makedirs(workdir, exist_ok=True)
    dirs = [os.path.join(workdir, case["name"]) for case in selected]
    # References first, in this thread: torch stays out of the workers.
    refs = [_prepare(case, d, keep_library=args.prebuilt)
            for case, d in zip(selected, dirs)]
    passed, mismatched, broken = 0, 0, 0
    worst = (0.0, None)
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        futures = [pool.submit(build_and_run, d, args) for d in dirs]
        for case, ref, future in zip(selected, refs, futures):
            name = case["name"]
            try:
                got = future.result()
            except ToolError as error:
                broken += 1
                print(f"ERROR {name}: {error.stage} failed: "
                      f"{shlex.join(error.command)}\n{error.detail.rstrip()}",
                      flush=True)
                continue
            if got is None:
                passed += 1
                print(f"{'BUILT' if args.build_only else 'VERIFIED'} {name}",
                      flush=True)
                continue
            problem, max_abs, max_rel = compare(ref, got, args.rtol,
                                                args.floor)
            if max_rel is not None and max_rel >= worst[0]:
                worst = (max_rel, name)
            if problem:
                mismatched += 1
                print(f"FAIL {name}: {problem} [{_describe(case)}]",
                      flush=True)
            else:
                passed += 1
                print(f"PASS {name}: max_abs_err={max_abs:.2e} "
                      f"max_rel_err={max_rel:.2e} "
                      f"dropped={ref['dropped']}/"
                      f"{ref['choices'] if 'choices' in ref else ref['ids'].size}",
                      flush=True)
    largest = f"{worst[0]:.2e} ({worst[1]})" if worst[1] else "n/a"
    threads = ("" if args.thread_counts == [0] else
               f", threads {args.threads} bit-identical")
    print(f"check_layers: {len(selected)} cases, {passed} passed, "
          f"{mismatched} mismatched, {broken} tool failures; largest "
          f"max_rel_err={largest}, rtol={args.rtol}{threads}")
    if args.cache:
        print(f"check_layers: {library_cache.HITS} of {len(selected)} "
              "libraries from the cache")
    if broken or mismatched:
        print(f"artifacts in {workdir}" if args.workdir else
              "rerun with --workdir DIR to keep the artifacts")
    return 2 if broken else 1 if mismatched else 0


if __name__ == "__main__":
    sys.exit(main())
