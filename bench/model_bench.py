#!/usr/bin/python3
"""A whole V-MoE model, compiled by vmoe-compile vs PyTorch (eager, compile).

    /usr/bin/python3 bench/model_bench.py [--vmoe-compile build/bin/vmoe-compile]
        [--models s32,digits] [--threads 1,2] [--capacities 1.05,0.5]
        [--batches N] [--repeats 5] [--json FILE] [--workdir DIR]
        [--baseline-vmoe-compile PATH] [--rounds R] [--precision f32,bf16]
        [--peer-python PY] [--torch-compile-mode MODE] [--torch-bf16]

For each model: writes the description and random weights (or uses
examples/digits), random PNG images, compiles the executable, checks that
its logits match the PyTorch model (python/vmoe_ref) on those images
(max |diff| printed; 1e-3 fails the run), then times every row per thread
count and capacity ratio C, each in a fresh child process: the
executable's `--bench` (forward only; images decoded before timing), and
`VMoE.forward` of python/vmoe_ref under torch.no_grad on the same batches
(normalized tensors prepared before timing), by Debian's torch (`torch`)
and, with --peer-python, by PyTorch 2.x eager (`torch2 eager`) and under
torch.compile (`torch2 compile`; compilation untimed, printed). Each torch2
child checks its logits against the compiled model's before it times.
--precision f32,bf16 adds the executable of vmoe-compile --precision=bf16
(`vmoe bf16`), its logits checked against f32 (0.9-quantile image) within 8 bf16 ulps of the
largest logit (vmoe_tools/check_precision.py's bound). Reports median
images/s, peak resident memory per row (bench/peak_memory.py), the ratios
of the issue 10 targets per thread count and every row's thread scaling.
With --baseline-vmoe-compile, the executable built by that compiler (e.g.
of an older commit) is timed next to them ("before"), for before/after
ratios within one run; with --rounds R every implementation is timed R
times round-robin and the medians are reported (a shared machine's load
hits all of them alike).

Models: `s32` is V-MoE-S/32 shaped (224x224 RGB, patch 32, D 512, depth 8,
8 heads, H 2048, MoE every 2nd block, E 32, k 2, BPR, 8 images per routing
group = 400 tokens); `digits` is examples/digits with its trained weights.
"""

import argparse
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))

S32 = {
    "format": "vmoe-model", "version": 1, "name": "vmoe-s32-random",
    "image": {"height": 224, "width": 224, "channels": 3},
    "input": {"mean": [0.5, 0.5, 0.5], "std": [0.5, 0.5, 0.5]},
    "patch_size": 32, "width": 512, "depth": 8, "heads": 8,
    "mlp_dim": 2048, "classes": 1000, "head": "token",
    "moe": {"placement": "every-2", "num_experts": 32, "k": 2,
            "capacity_ratio": 1.05, "routing": "bpr", "score": "max",
            "group_size": 8},
}


def write_png(path, pixels):
    """uint8 [H, W, C] (C = 1 or 3) -> an 8-bit PNG (filter 0)."""
    height, width, channels = pixels.shape
    color = {1: 0, 3: 2}[channels]

    def chunk(kind, data):
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data)))

    raw = b"".join(b"\0" + pixels[y].tobytes() for y in range(height))
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n"
                + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8,
                                             color, 0, 0, 0))
                + chunk(b"IDAT", zlib.compress(raw, 1)) + chunk(b"IEND", b""))


def prepare_model(name, workdir, num_images):
    """(description path, weights path, image list path, images uint8)."""
    from vmoe_ref import model as vmodel
    import torch

    folder = os.path.join(workdir, name)
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(7)
    if name == "digits":
        desc_path = os.path.join(ROOT, "examples/digits/digits.json")
        weights = os.path.join(ROOT, "examples/digits/digits.safetensors")
    else:
        desc_path = os.path.join(folder, "model.json")
        with open(desc_path, "w") as f:
            json.dump(S32, f, indent=1)
        torch.manual_seed(7)
        net = vmodel.VMoE(vmodel.load_description(desc_path))
        with torch.no_grad():  # the head starts at zero: give it weights
            net.head.kernel.normal_(0, net.desc["width"] ** -0.5)
            net.cls_token.normal_(0, 0.02)
        weights = os.path.join(folder, "weights.safetensors")
        vmodel.save_safetensors(weights, net.export_tensors())
    desc = vmodel.load_description(desc_path)
    image = desc["image"]
    images = rng.integers(0, 256, (num_images, image["height"],
                                   image["width"], image["channels"]),
                          dtype=np.uint8)
    lines = []
    for i, pixels in enumerate(images):
        write_png(os.path.join(folder, f"{i:04d}.png"), pixels)
        lines.append(f"{i:04d}.png")
    image_list = os.path.join(folder, "images.txt")
    with open(image_list, "w") as f:
        f.write("\n".join(lines) + "\n")
    return desc_path, weights, image_list, images.transpose(0, 3, 1, 2)


def _last_line(text):
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else ""


def run(command, env=None):
    """Runs a tool or child; one line (its last stderr line) on failure."""
    done = subprocess.run(command, capture_output=True, text=True, env=env,
                          timeout=1800)
    if done.returncode != 0:
        message = _last_line(done.stderr)
        if not message.startswith("model_bench:"):
            message = (f"model_bench: {os.path.basename(command[0])} failed "
                       f"({done.returncode}): {message}")
        raise SystemExit(message)
    return done.stdout


def thread_env(threads, torch=False):
    """Thread counts for a child; torch children also wait passively (see
    bench/README.md: libgomp's spinning threads starve OpenBLAS's), while
    the compiled code keeps libomp's default, which it is faster with."""
    env = dict(os.environ)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = str(threads)
    if torch:
        env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    return env


def compiled_logits(exe, weights, image_list):
    out = run([exe, "--weights", weights, "--image-list", image_list,
               "--print-logits", "--quiet"])
    return np.array([[float(v) for v in line.split(": logits ")[1].split()]
                     for line in out.splitlines() if ": logits " in line])


def compare_logits(got, want):
    """(max |diff|, fraction of images with the same top-1)."""
    if got.shape != want.shape:
        return float("inf"), 0.0
    return (float(np.abs(got - want).max()),
            float((got.argmax(1) == want.argmax(1)).mean()))


# ------------------------------------------------------------ torch children

# The PyTorch rows: (Python, child mode). "torch" is Debian's torch 1.13
# under /usr/bin/python3; the torch2 rows need --peer-python.
TORCH = "torch"
TORCH2_EAGER = "torch2 eager"
TORCH2_COMPILE = "torch2 compile"
TORCH2_BF16 = "torch2 bf16"
# Logits of the f32 PyTorch rows may differ from the compiled model's by
# this much (f32 summation order, polynomial tanh: measured ~1e-5).
F32_ATOL = 1e-3
# Bound on the bf16 logit error: this many bf16 ulps (unit roundoff 2^-9)
# of the largest f32 logit, as vmoe_tools/check_precision.py derives it.
BF16_BOUND_ULPS = 8.0
# ... on this quantile of the images' largest |logit difference| (as
# check_precision.py --logit-quantile): with the dense kernels in bf16 too,
# a token's routing may change, which moves its image's logits by far more
# (s32: median image 2.2e-2, 0.9-quantile 2.5e-2, one image of 32 1.6e-1,
# bound 6.9e-2); top-1 agreement must then be at least BF16_MIN_TOP1.
BF16_BOUND_QUANTILE = 0.9
BF16_MIN_TOP1 = 0.9
# torch.autocast rounds the inputs of every matmul (router, attention,
# dense layers) to bf16, not only the experts' as vmoe bf16 does: routing
# and logits move far (max |diff| 2.0 on digits, whose largest logit is
# ~4), so that row is only checked for top-1 agreement with f32.
AUTOCAST_MIN_TOP1 = 0.9


def _inductor_compiler(torch):
    """The C++ compiler torch.compile's inductor will call, or a one-line
    SystemExit naming what is missing."""
    try:
        from torch._inductor import cpp_builder
        return cpp_builder.get_cpp_compiler()
    except Exception as err:  # InvalidCxxCompiler, or an older torch
        raise SystemExit(
            "model_bench: torch.compile needs a C++ compiler for inductor's "
            "CPU code (g++ or clang++ on PATH, or $CXX): "
            f"{type(err).__name__}: {_last_line(str(err))}")


def torch_child(args):
    """Child process: loads vmoe_ref's model, optionally checks its logits
    against the compiled model's, times VMoE.forward; prints one JSON
    line. Modes: eager, compile (torch.compile), autocast (eager under
    torch.autocast("cpu", bfloat16))."""
    import contextlib
    import time
    import torch
    from vmoe_ref import model as vmodel
    import peak_memory

    torch.set_num_threads(args.threads)
    net = vmodel.load_model(args.desc, args.weights)
    net.eval()
    images = np.load(args.images_npy)
    desc = net.desc
    batch = desc["moe"]["group_size"]
    batches = [vmodel.normalize_images(images[i:i + batch],
                                       desc["input"]["mean"],
                                       desc["input"]["std"])
               for i in range(0, len(images), batch)]
    result = {"torch": torch.__version__, "mode": args.mode}
    # The peak of the whole process (libraries, weights, loading) so far;
    # then reset, so that the peak of running the model is seen alone.
    load_peak = peak_memory.vmhwm_mb()
    reset = peak_memory.reset_vmhwm()

    def logits(x, capacity):
        return net(x, capacity_ratio=capacity)[0]

    forward = logits
    if args.mode == "compile":
        result["cxx"] = _inductor_compiler(torch)
        forward = torch.compile(
            logits, **({} if args.compile_mode == "default"
                       else {"mode": args.compile_mode}))
    context = (torch.autocast("cpu", dtype=torch.bfloat16)
               if args.mode == "autocast" else contextlib.nullcontext())

    def call(x, capacity):
        try:
            return forward(x, capacity).float()
        except Exception as err:
            if args.mode != "compile":
                raise
            raise SystemExit(
                f"model_bench: torch.compile failed (inductor C++ compiler "
                f"{result['cxx']}): {type(err).__name__}: "
                f"{_last_line(str(err))}")

    first_calls = 0.0  # compilation for torch.compile
    with torch.no_grad(), context:
        if args.logits_out or args.reference_logits:
            start = time.perf_counter()
            out = [call(batches[0], args.check_capacity).numpy()]
            first_calls += time.perf_counter() - start
            out += [call(x, args.check_capacity).numpy() for x in batches[1:]]
            out = np.concatenate(out)
            if args.logits_out:
                np.save(args.logits_out, out)
            if args.reference_logits:
                diff, same = compare_logits(out,
                                            np.load(args.reference_logits))
                result["logits_max_abs_diff"] = diff
                result["same_top1"] = same
                if not diff <= args.atol:
                    raise SystemExit(
                        f"model_bench: {args.mode} logits differ from the "
                        f"compiled model's: max |diff| {diff:.2e} > "
                        f"{args.atol:g}")
                if not same >= args.min_top1:
                    raise SystemExit(
                        f"model_bench: {args.mode} top-1 agrees with the "
                        f"compiled model's on {100 * same:.1f}% of the "
                        f"images (< {100 * args.min_top1:g}%)")
        for i in range(args.warmup):
            start = time.perf_counter()
            call(batches[0], args.capacity)
            if i == 0:
                first_calls += time.perf_counter() - start
        rates = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            for x in batches:
                call(x, args.capacity)
            rates.append(len(images) / (time.perf_counter() - start))
    run_peak = peak_memory.vmhwm_mb()
    result["images_per_s"] = float(np.median(rates)) if rates else None
    result["first_calls_s"] = first_calls
    result["peak_rss_mb"] = max(load_peak or 0.0, run_peak or 0.0) or None
    result["run_peak_rss_mb"] = run_peak if reset else None
    print(json.dumps(result))


def check_peer_python(python):
    """The torch version of --peer-python, after checking that it imports
    torch (2.x), numpy and python/vmoe_ref; else a one-line SystemExit."""
    probe = ("import sys; sys.path.insert(0, sys.argv[1]); import numpy, "
             "torch; from vmoe_ref import model; print(torch.__version__)")
    try:
        done = subprocess.run([python, "-c", probe,
                               os.path.join(ROOT, "python")],
                              capture_output=True, text=True, timeout=300)
    except OSError as err:
        raise SystemExit(f"model_bench: --peer-python {python}: {err}")
    if done.returncode != 0:
        raise SystemExit(f"model_bench: --peer-python {python} cannot import "
                         f"numpy, torch and vmoe_ref: "
                         f"{_last_line(done.stderr)}")
    version = done.stdout.strip()
    if int(version.split(".")[0]) < 2:
        raise SystemExit(f"model_bench: --peer-python {python} has torch "
                         f"{version}; the torch2 rows need torch >= 2")
    return version


# ------------------------------------------------------------ the benchmark

def bf16_check(name, got_bf16, got_f32):
    """Checks the bf16 executable's logits against the f32 one's; returns
    the record (printed) and whether it is within the bound."""
    from vmoe_tools.check_precision import BF16_UNIT_ROUNDOFF

    diff, same = compare_logits(got_bf16, got_f32)
    if not np.isfinite(diff):
        print(f"{name}: vmoe bf16 logits have shape {got_bf16.shape}, f32 "
              f"{got_f32.shape}", flush=True)
        return {"logits_max_abs_diff": diff}, False
    per_image = np.abs(np.asarray(got_bf16, np.float64) -
                       np.asarray(got_f32, np.float64)).reshape(
                           len(got_f32), -1).max(axis=1)
    bounded = float(np.quantile(per_image, BF16_BOUND_QUANTILE))
    bound = BF16_BOUND_ULPS * BF16_UNIT_ROUNDOFF * float(
        np.abs(got_f32).max())
    print(f"{name}: vmoe bf16 vs vmoe f32 logits max |diff| {diff:.2e}, "
          f"{BF16_BOUND_QUANTILE:g}-quantile image {bounded:.2e} (bound "
          f"{bound:.2e} = {BF16_BOUND_ULPS:g} bf16 ulps of max |logit|), "
          f"same top-1 {100 * same:.1f}% (at least "
          f"{100 * BF16_MIN_TOP1:g}%)", flush=True)
    return ({"logits_max_abs_diff": diff, "quantile": BF16_BOUND_QUANTILE,
             "quantile_abs_diff": bounded, "bound": bound,
             "same_top1": same},
            bounded <= bound and same >= BF16_MIN_TOP1)


def rows_of(args, before):
    """The timed rows, the compiled f32 model first."""
    rows = ["vmoe"]
    if "bf16" in args.precision:
        rows.append("vmoe bf16")
    if before:
        rows.append("before")
    rows.append(TORCH)
    if args.peer_python:
        rows += [TORCH2_EAGER, TORCH2_COMPILE]
        if "bf16" in args.precision and args.torch_bf16:
            rows.append(TORCH2_BF16)
    return rows


def ratios_of(rates, peaks):
    """Summary ratios of one (model, threads, C): speed ratios (> 1: the
    first is faster) and the compiled model's peak memory over torch's
    (`peaks`: the executable's whole-process peak, loading included, and
    the torch children's peak after loading, see bench/README.md)."""
    pairs = {"vmoe/torch": ("vmoe", TORCH),
             "vmoe/torch2 eager": ("vmoe", TORCH2_EAGER),
             "vmoe/torch2 compile": ("vmoe", TORCH2_COMPILE),
             "vmoe bf16/torch2 eager": ("vmoe bf16", TORCH2_EAGER),
             "vmoe bf16/vmoe": ("vmoe bf16", "vmoe"),
             "vmoe bf16/torch2 bf16": ("vmoe bf16", TORCH2_BF16),
             "vmoe/before": ("vmoe", "before")}
    ratios = {key: rates[a] / rates[b] for key, (a, b) in pairs.items()
              if a in rates and b in rates}
    for key, (a, b) in {"peak vmoe/torch": ("vmoe", TORCH),
                        "peak vmoe/torch2 eager": ("vmoe", TORCH2_EAGER),
                        "peak vmoe/torch2 compile": ("vmoe", TORCH2_COMPILE),
                        "peak vmoe bf16/torch2 eager": ("vmoe bf16",
                                                        TORCH2_EAGER)
                        }.items():
        if peaks.get(a) and peaks.get(b):
            ratios[key] = peaks[a] / peaks[b]
    return ratios


def bench_model(name, args):
    from vmoe_ref import model as vmodel

    batches = args.batches or {"s32": 4, "digits": 45}[name]
    desc_path, weights, image_list, images = prepare_model(
        name, args.workdir, batches * 8)
    desc = vmodel.load_description(desc_path)
    group = desc["moe"]["group_size"]
    if len(images) % group:
        raise SystemExit(f"model_bench: {len(images)} images is not a "
                         f"multiple of group_size {group}")
    folder = os.path.join(args.workdir, name)
    images_npy = os.path.join(folder, "images.npy")
    np.save(images_npy, images)
    max_c = max(max(args.capacities), desc["moe"]["capacity_ratio"])
    build = [desc_path, f"--max-capacity-ratio={max(max_c, 2.0)}"]
    exes = {"vmoe": os.path.join(folder, "model")}
    run([args.vmoe_compile, *build, "-o", exes["vmoe"]])
    if "bf16" in args.precision:
        exes["vmoe bf16"] = os.path.join(folder, "model-bf16")
        run([args.vmoe_compile, *build, "--precision=bf16", "-o",
             exes["vmoe bf16"]])
    if args.baseline_vmoe_compile:
        exes["before"] = os.path.join(folder, "model-before")
        run([args.baseline_vmoe_compile, *build, "-o", exes["before"]])

    # Correctness first: the compiled logits against torch, same images.
    check_c = desc["moe"]["capacity_ratio"]
    logits_npy = os.path.join(folder, "torch_logits.npy")
    child = [os.path.abspath(__file__), "--torch-child", "--desc", desc_path,
             "--weights", weights, "--images-npy", images_npy,
             "--check-capacity", str(check_c),
             "--compile-mode", args.torch_compile_mode]
    run([sys.executable, *child, "--repeats", "0", "--warmup", "0",
         "--capacity", str(check_c), "--logits-out", logits_npy],
        env=thread_env(1, torch=True))
    got = compiled_logits(exes["vmoe"], weights, image_list)
    diff, same_top1 = compare_logits(got, np.load(logits_npy))
    print(f"{name}: {len(images)} images, compiled vs torch logits max |diff| "
          f"{diff:.2e}, same top-1 {100 * same_top1:.1f}%", flush=True)
    rows = []
    if not diff <= F32_ATOL:
        print(f"model_bench: {name}: compiled logits differ from torch")
        return rows, False
    compiled_npy = os.path.join(folder, "compiled_logits.npy")
    np.save(compiled_npy, got)
    checks = {"torch": {"logits_max_abs_diff": diff, "same_top1": same_top1}}
    if "vmoe bf16" in exes:
        checks["vmoe bf16"], ok = bf16_check(
            name, compiled_logits(exes["vmoe bf16"], weights, image_list),
            got)
        if not ok:
            print(f"model_bench: {name}: bf16 logits outside the bound")
            return rows, False

    def exe_row(row, threads, capacity):
        """(images/s, peak MB) of the executable's --bench."""
        peak_json = os.path.join(folder, "peak.json")
        out = run([sys.executable, "-S", "-I", os.path.join(
            os.path.dirname(os.path.abspath(__file__)), "peak_memory.py"),
            peak_json, exes[row], "--weights", weights, "--image-list",
            image_list, "--quiet", "--threads", str(threads),
            "--capacity-ratio", str(capacity), "--bench", str(args.repeats)],
            env=thread_env(threads))
        match = re.search(r"median ([0-9.]+) images/s", out)
        if not match:
            raise SystemExit(f"model_bench: no bench line in {out!r}")
        with open(peak_json) as f:
            peak = json.load(f)["peak_rss_mb"]
        return {"images_per_s": float(match.group(1)), "peak_rss_mb": peak}

    def torch_row(row, threads, capacity):
        python, mode, atol, min_top1 = {
            TORCH: (sys.executable, "eager", None, 0),
            TORCH2_EAGER: (args.peer_python, "eager", F32_ATOL, 0),
            TORCH2_COMPILE: (args.peer_python, "compile", F32_ATOL, 0),
            TORCH2_BF16: (args.peer_python, "autocast", float("inf"),
                          AUTOCAST_MIN_TOP1)}[row]
        command = [python, *child, "--mode", mode, "--threads", str(threads),
                   "--repeats", str(args.repeats), "--warmup", "1",
                   "--capacity", str(capacity)]
        if atol is not None:  # torch (Debian) was checked above
            command += ["--reference-logits", compiled_npy,
                        "--atol", str(atol), "--min-top1", str(min_top1)]
        out = json.loads(run(command, env=thread_env(
            threads, torch=True)).splitlines()[-1])
        if row not in checks and atol is not None:
            checks[row] = {k: out[k] for k in (
                "logits_max_abs_diff", "same_top1")}
            print(f"{name}: {row} (torch {out['torch']}) vs compiled logits "
                  f"max |diff| {out['logits_max_abs_diff']:.2e} (limit "
                  f"{atol:.1e}), same top-1 {100 * out['same_top1']:.1f}%"
                  + (f" (limit {100 * min_top1:g}%)" if min_top1 else ""),
                  flush=True)
        return out

    names = rows_of(args, "before" in exes)
    rate_by = {}  # (threads, C) -> {row: images/s}
    print(f"{'model':<8}{'threads':>8}{'C':>6}{'dropped':>9}  {'row':<16}"
          f"{'img/s':>10}{'peak MB':>9}{'run MB':>8}{'vmoe/row':>9}  note",
          flush=True)
    for threads in args.threads:
        for capacity in args.capacities:
            load = os.getloadavg()[0]
            # Round-robin rounds, so that load from other processes hits
            # every implementation alike; medians over the rounds.
            measured = {row: [] for row in names}
            for _ in range(args.rounds):
                for row in names:
                    measured[row].append(
                        exe_row(row, threads, capacity) if row in exes
                        else torch_row(row, threads, capacity))
            rates = {row: float(np.median([m["images_per_s"] for m in ms]))
                     for row, ms in measured.items()}
            peaks = {row: max(m["peak_rss_mb"] or 0 for m in ms) or None
                     for row, ms in measured.items()}
            stats = run([exes["vmoe"], "--weights", weights, "--image-list",
                         image_list, "--quiet", "--stats",
                         "--capacity-ratio", str(capacity)])
            counts = [(int(a), int(b)) for a, b in
                      re.findall(r"dropped (\d+)/(\d+)", stats)]
            dropped = sum(a for a, _ in counts) / max(
                1, sum(b for _, b in counts))
            implementations = {}
            for row, ms in measured.items():
                record = {"images_per_s": rates[row],
                          "peak_rss_mb": peaks[row],
                          "rounds": [m["images_per_s"] for m in ms]}
                if row not in exes:
                    record["run_peak_rss_mb"] = max(
                        m["run_peak_rss_mb"] or 0 for m in ms) or None
                    record["first_calls_s"] = [m["first_calls_s"]
                                               for m in ms]
                    record["torch"] = ms[0]["torch"]
                implementations[row] = record
                note = ""
                if row == TORCH2_COMPILE:
                    record["compile_mode"] = args.torch_compile_mode
                    note = (f"mode {args.torch_compile_mode}, compile "
                            f"{max(record['first_calls_s']):.1f} s (untimed)")
                run_mb = record.get("run_peak_rss_mb")
                print(f"{name:<8}{threads:>8}{capacity:>6g}"
                      f"{100 * dropped:>8.1f}%  {row:<16}{rates[row]:>10.1f}"
                      f"{peaks[row] or 0:>9.0f}"
                      f"{(f'{run_mb:.0f}' if run_mb else '-'):>8}"
                      f"{rates['vmoe'] / rates[row]:>8.2f}x  {note}",
                      flush=True)
            ratios = ratios_of(rates, {
                row: r.get("run_peak_rss_mb") or r["peak_rss_mb"]
                for row, r in implementations.items()})
            rate_by[(threads, capacity)] = rates
            print(f"{name} {threads} thread(s) C {capacity:g} (load average "
                  f"{load:.1f} before): " + ", ".join(
                      f"{k} {v:.2f}" for k, v in ratios.items()), flush=True)
            rows.append({"model": name, "threads": threads, "C": capacity,
                         "vmoe_images_per_s": rates["vmoe"],
                         "torch_images_per_s": rates[TORCH],
                         "dropped_fraction": dropped,
                         "logits_max_abs_diff": diff,
                         "before_images_per_s": rates.get("before"),
                         "rounds": {row: r["rounds"] for row, r in
                                    implementations.items()},
                         "load_average_before": load,
                         "implementations": implementations,
                         "ratios": ratios, "checks": checks})
    # Thread scaling: every row at each thread count over the fewest.
    first = args.threads[0]
    for row in rows:
        if row["model"] == name and row["threads"] != first:
            base = rate_by[(first, row["C"])]
            row[f"speedup_over_{first}_threads"] = scaling = {
                impl: rate / base[impl]
                for impl, rate in rate_by[(row["threads"], row["C"])].items()}
            print(f"{name} C {row['C']:g} {row['threads']} threads / "
                  f"{first}: " + ", ".join(
                      f"{impl} {v:.2f}" for impl, v in scaling.items()),
                  flush=True)
    return rows, True


def _list(kind):
    return lambda text: [kind(v) for v in text.split(",")]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--vmoe-compile",
                        default=os.path.join(ROOT, "build/bin/vmoe-compile"))
    parser.add_argument("--models", type=_list(str), default=["s32", "digits"])
    parser.add_argument("--threads", type=_list(int), default=[1, 2])
    parser.add_argument("--capacities", type=_list(float),
                        default=[1.05, 0.5])
    parser.add_argument("--batches", type=int, default=0,
                        help="batches of 8 images per timed run (default: "
                             "s32 4, digits 45)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", help="write the rows here")
    parser.add_argument("--workdir", help="keep the work files here")
    parser.add_argument("--rounds", type=int, default=1,
                        help="time every implementation this many times, "
                        "round-robin; report the medians")
    parser.add_argument("--baseline-vmoe-compile",
                        help="also time the executable this vmoe-compile "
                        "builds (before/after in one run)")
    parser.add_argument("--precision", type=_list(str), default=["f32"],
                        help="f32 or f32,bf16: also time the executable of "
                        "vmoe-compile --precision=bf16 (row `vmoe bf16`)")
    parser.add_argument("--peer-python",
                        default=os.environ.get("VMOE_PEER_PYTHON"),
                        help="a Python with PyTorch 2.x (scripts/"
                        "bench_peers.sh) for the rows `torch2 eager` and "
                        "`torch2 compile` (default: $VMOE_PEER_PYTHON; "
                        "none: no rows)")
    parser.add_argument("--torch-compile-mode", default="default",
                        help="torch.compile mode of the `torch2 compile` "
                        "row (default, max-autotune-no-cudagraphs, ...)")
    parser.add_argument("--torch-bf16", action="store_true",
                        help="with --precision f32,bf16 and --peer-python: "
                        "the row `torch2 bf16`, vmoe_ref under torch."
                        "autocast(cpu, bfloat16) (every matmul in bf16)")
    # Child mode (internal).
    parser.add_argument("--torch-child", action="store_true",
                        help=argparse.SUPPRESS)
    parser.add_argument("--mode", default="eager", help=argparse.SUPPRESS)
    parser.add_argument("--desc", help=argparse.SUPPRESS)
    parser.add_argument("--weights", help=argparse.SUPPRESS)
    parser.add_argument("--images-npy", help=argparse.SUPPRESS)
    parser.add_argument("--capacity", type=float, help=argparse.SUPPRESS)
    parser.add_argument("--check-capacity", type=float,
                        help=argparse.SUPPRESS)
    parser.add_argument("--warmup", type=int, default=1,
                        help=argparse.SUPPRESS)
    parser.add_argument("--logits-out", help=argparse.SUPPRESS)
    parser.add_argument("--reference-logits", help=argparse.SUPPRESS)
    parser.add_argument("--atol", type=float, help=argparse.SUPPRESS)
    parser.add_argument("--min-top1", type=float, default=0.0,
                        help=argparse.SUPPRESS)
    parser.add_argument("--compile-mode", default="default",
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.torch_child:
        args.threads = args.threads[0] if isinstance(args.threads, list) \
            else args.threads
        torch_child(args)
        return 0
    for model in args.models:
        if model not in ("s32", "digits"):
            parser.error(f"unknown model {model!r} (s32, digits)")
    if not set(args.precision) <= {"f32", "bf16"} or \
            "f32" not in args.precision:
        parser.error("--precision: f32 or f32,bf16 (the f32 model is the "
                     "reference of every row)")
    if not os.path.exists(args.vmoe_compile):
        raise SystemExit(f"model_bench: {args.vmoe_compile} not found "
                         "(scripts/build.sh)")
    if args.peer_python:
        print(f"peers: {args.peer_python}: torch "
              f"{check_peer_python(args.peer_python)}", flush=True)
    keep = bool(args.workdir)
    args.workdir = args.workdir or tempfile.mkdtemp(prefix="vmoe-model-bench-")
    rows, ok = [], True
    try:
        for model in args.models:
            model_rows, model_ok = bench_model(model, args)
            rows += model_rows
            ok &= model_ok
    finally:
        if not keep:
            shutil.rmtree(args.workdir, ignore_errors=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
