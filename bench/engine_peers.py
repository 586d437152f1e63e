#!/usr/bin/python3
"""vmoe vs deployment engines (ONNX Runtime, OpenVINO, IREE) on V-MoE-S/32.

    /usr/bin/python3 bench/engine_peers.py [--peer-python PY]
        [--vmoe-compile build/bin/vmoe-compile] [--threads 1,2]
        [--batches 8,32] [--rows vmoe,vmoe-bf16,onnxruntime,openvino,
        openvino-bf16,iree,torch] [--capacities 0.1,0.25,0.5,1.05,2]
        [--rounds R] [--repeats N] [--images N] [--profile] [--quick]
        [--json FILE] [--workdir DIR]
    /usr/bin/python3 bench/engine_peers.py --self-test

The model is bench/model_bench.py's V-MoE-S/32 (random weights written by
python/vmoe_ref, random PNG images). vmoe compiles it once per batch
(`--groups-per-batch`, 8 images per routing group) in f32 and bf16; the
engines run the same model exported to ONNX from a static-shape PyTorch
V-MoE (bench/onnx_vmoe.py: capacity B fixed at export, gather dispatch),
whose logits are first checked against vmoe's executable and
python/vmoe_ref (1e-4). Every row (engine, thread count, batch) is a fresh
process that checks its logits against vmoe f32's before it is timed
(bench/engine_runners.py); rows run round-robin for --rounds rounds and
the medians are reported, with the ratios vmoe/peer of issue 23's
targets. The engines come from scripts/engine_peers.sh (a venv; optional,
never in CI): --peer-python or $VMOE_ENGINE_PYTHON. A row whose engine is
missing or fails on this host says so in one line; the others still run.

Then the capacity sweep: the same f32 executable at each --capacities C
(--capacity-ratio at run time) and the dense twin (the description without
"moe"), time relative to the dense model next to the executed-FLOPs ratio
(bench/vit_flops.py). Before every round of a configuration of two or
more threads, bench/cross_core_writes.c (compiled here with clang-22)
measures the host's cross-core write factor: how much longer threads take
to overwrite lines the other threads hold than lines they hold alone. It
moves while a run goes on (on a VM, with where the host places the vCPUs)
and with it the time of every row; the tables give its median per
configuration ("x-core") so that a change in the host is not read as a
change in the code. Before every round of the sweep, bench/machine_peaks.c
(also compiled here) measures the host's read bandwidth at that thread
count, from which bench/weight_stream.py gives each cell's floor: the
points that streaming the used experts' f32 weights once per forward
forces over the FLOPs ratio on this host at best. --profile adds the per-op-type and per-part time of
OpenVINO (f32 and bf16) and ONNX Runtime (their own profilers) at the
largest batch, 1 thread.

Exit status: 0 when every check passed (rows that could not run are
reported, not failures); 1 when a logit check failed; 2 on bad usage or a
tool failure (one line).
"""

import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

BENCH = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(BENCH)
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, BENCH)

import model_bench  # noqa: E402  (prepare_model, thread_env, bf16_check)

# Rows: key -> table header. vmoe rows run the compiled executable; the
# others bench/engine_runners.py under the engines' Python (torch: under
# /usr/bin/python3, the static-shape model in Debian's torch, eager).
ROWS = {"vmoe": "vmoe f32", "vmoe-bf16": "vmoe bf16",
        "onnxruntime": "ONNX Runtime", "openvino": "OpenVINO f32",
        "openvino-bf16": "OpenVINO bf16", "iree": "IREE llvm-cpu",
        "torch": "PyTorch eager"}
ENGINE_ROWS = ("onnxruntime", "openvino", "openvino-bf16", "iree")
# Issue 23's targets: (numerator row, denominator row, at least).
TARGETS = (("vmoe", "openvino", 1.3), ("vmoe", "onnxruntime", 1.5),
           ("vmoe-bf16", "openvino-bf16", 1.3), ("vmoe", "iree", 1.0),
           ("vmoe", "torch", 1.0))
# f32 rows: every logit within this of vmoe f32's.
F32_ATOL = 1e-4
# OpenVINO's bf16 hint rounds the inputs of every matmul (router,
# attention, head) to bf16, so routing moves: its row is held to 4x the
# vmoe bf16 bound (model_bench.BF16_BOUND_ULPS bf16 ulps of the largest
# logit, on the 0.9-quantile image) and top-1 agreement >= 90%.
ENGINE_BF16_ULPS = 4 * model_bench.BF16_BOUND_ULPS
# The sweep's target: time relative to dense within this many percentage
# points of the executed-FLOPs ratio (issue 23, item 4).
SWEEP_POINTS = 10.0
CHECK_FAILED = 3  # engine_runners' exit status for off logits


class ToolError(Exception):
    """A build step or tool that failed: one line, exit status 2."""


class RowError(Exception):
    """A row that could not run, or whose logits are off (`check`)."""

    def __init__(self, message, check=False):
        super().__init__(message)
        self.check = check


def last_line(text):
    lines = [line.strip() for line in (text or "").splitlines()
             if line.strip()]
    return lines[-1] if lines else ""


def tool(command, what):
    """Runs a build step; ToolError with one line when it fails."""
    try:
        done = subprocess.run(command, capture_output=True, text=True)
    except OSError as err:
        raise ToolError(f"{what}: {err}")
    if done.returncode != 0:
        raise ToolError(f"{what} failed ({done.returncode}): "
                         f"{last_line(done.stderr) or last_line(done.stdout)}")
    return done.stdout


def child(command, env):
    """Runs a timed row's process; RowError with its last stderr line."""
    try:
        done = subprocess.run(command, capture_output=True, text=True,
                              env=env, timeout=3600)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise RowError(str(err))
    if done.returncode != 0:
        raise RowError(last_line(done.stderr) or
                       f"exit status {done.returncode}",
                       check=done.returncode == CHECK_FAILED)
    return done.stdout


# ------------------------------------------------------------ preparation

def dense_twin(desc_path, folder):
    """The description without "moe" and random weights for it."""
    import torch
    from vmoe_ref import model as vmodel

    with open(desc_path) as f:
        desc = json.load(f)
    desc.pop("moe")
    desc["name"] += "-dense"
    path = os.path.join(folder, "dense.json")
    with open(path, "w") as f:
        json.dump(desc, f, indent=1)
    torch.manual_seed(7)
    net = vmodel.VMoE(vmodel.load_description(path))
    weights = os.path.join(folder, "dense.safetensors")
    vmodel.save_safetensors(weights, net.export_tensors())
    return path, weights


def compile_models(args, desc_path, dense_path, folder):
    """{(row, batch): executable}: vmoe f32 / bf16 per batch, and the
    dense twin ("dense") per batch for the sweep."""
    max_c = max([2.0] + args.capacities)
    exes = {}
    for batch in args.batches:
        builds = [("vmoe", desc_path, [f"--groups-per-batch={batch // 8}"])]
        if "vmoe-bf16" in args.rows:
            builds.append(("vmoe-bf16", desc_path,
                           [f"--groups-per-batch={batch // 8}",
                            "--precision=bf16"]))
        if args.capacities:
            builds.append(("dense", dense_path,
                           [f"--groups-per-batch={batch}"]))
        for row, desc, options in builds:
            exe = os.path.join(folder, f"{row}-b{batch}")
            start = time.perf_counter()
            build = [args.vmoe_compile, desc, *options, "-o", exe]
            if row != "dense":
                build.append(f"--max-capacity-ratio={max_c}")
            tool(build, f"vmoe-compile {row} batch {batch}")
            print(f"compiled {row} batch {batch} "
                  f"({time.perf_counter() - start:.0f} s)", flush=True)
            exes[(row, batch)] = exe
    return exes


def check_models(args, exes, desc_path, weights, image_list, images):
    """Checks vmoe's logits against python/vmoe_ref and the static-shape
    module's against both (1e-4); returns (vmoe f32 logits, normalized
    images, checks dict) or exits with status 1."""
    import torch
    import onnx_vmoe
    from vmoe_ref import model as vmodel

    net = vmodel.load_model(desc_path, weights)
    desc = net.desc
    x = vmodel.normalize_images(images, desc["input"]["mean"],
                                desc["input"]["std"])
    reference = model_bench.compiled_logits(exes[("vmoe", args.batches[0])],
                                            weights, image_list)
    checks = {}

    def expect(name, got, want):
        diff, same = model_bench.compare_logits(got, want)
        checks[name] = {"logits_max_abs_diff": diff, "same_top1": same}
        print(f"check: {name}: max |diff| {diff:.2e} (limit {F32_ATOL:g}), "
              f"same top-1 {100 * same:.1f}%", flush=True)
        if not diff <= F32_ATOL:
            raise SystemExit(1)

    for batch in args.batches[1:]:
        expect(f"vmoe batch {batch} vs vmoe batch {args.batches[0]}",
               model_bench.compiled_logits(exes[("vmoe", batch)], weights,
                                           image_list), reference)
    with torch.no_grad():
        group = desc["moe"]["group_size"]
        ref = torch.cat([net(x[i:i + group])[0]
                         for i in range(0, len(x), group)]).numpy()
        expect("vmoe vs python/vmoe_ref", reference, ref)
        modules = {}
        for batch in args.batches:
            modules[batch] = onnx_vmoe.StaticVMoE(net, batch)
            static = torch.cat([modules[batch](x[i:i + batch])
                                for i in range(0, len(x), batch)]).numpy()
            expect(f"static module batch {batch} vs python/vmoe_ref",
                   static, ref)
            expect(f"static module batch {batch} vs vmoe", static,
                   reference)
    return reference, x.numpy(), checks, modules


def export_models(args, modules, folder):
    """{(engine, batch): model file}: ONNX per batch, and the IREE module
    (iree-import-onnx, iree-compile llvm-cpu for the host CPU); an IREE
    failure becomes a RowError entry ("iree", batch) -> message."""
    import onnx_vmoe

    files = {}
    bindir = os.path.dirname(args.peer_python)
    for batch in args.batches:
        path = os.path.join(folder, f"s32-b{batch}.onnx")
        start = time.perf_counter()
        try:
            onnx_vmoe.export(modules[batch], batch, path)
        except Exception as err:  # an op torch cannot export
            raise ToolError(f"torch.onnx.export of batch {batch} failed: "
                            f"{type(err).__name__}: {last_line(str(err))}")
        print(f"exported {os.path.basename(path)} "
              f"({time.perf_counter() - start:.0f} s, "
              f"{os.path.getsize(path) / 2**20:.0f} MiB)", flush=True)
        for engine in ("onnxruntime", "openvino", "openvino-bf16"):
            files[(engine, batch)] = path
        if "iree" not in args.rows:
            continue
        mlir = path[:-len(".onnx")] + ".mlir"
        vmfb = path[:-len(".onnx")] + ".vmfb"
        start = time.perf_counter()
        try:
            tool([os.path.join(bindir, "iree-import-onnx"), path, "-o", mlir],
                 "iree-import-onnx")
            tool([os.path.join(bindir, "iree-compile"), mlir,
                  "--iree-hal-target-backends=llvm-cpu",
                  "--iree-llvmcpu-target-cpu=host", "-o", vmfb],
                 "iree-compile")
            files[("iree", batch)] = vmfb
            print(f"compiled {os.path.basename(vmfb)} with IREE "
                  f"({time.perf_counter() - start:.0f} s)", flush=True)
        except ToolError as err:
            files[("iree", batch)] = RowError(str(err))
            print(f"iree batch {batch}: {err}", flush=True)
        finally:
            if os.path.exists(mlir):
                os.remove(mlir)
    return files


def probe_engines(args):
    """{engine row: RowError} for engines the peers' Python cannot import
    (each child would fail the same way)."""
    modules = {"onnxruntime": "onnxruntime", "openvino": "openvino",
               "openvino-bf16": "openvino", "iree": "iree.runtime"}
    missing = {}
    for row in ENGINE_ROWS:
        if row not in args.rows:
            continue
        if not args.peer_python:
            missing[row] = RowError("not run: no --peer-python (scripts/"
                                    "engine_peers.sh)")
            continue
        try:
            done = subprocess.run([args.peer_python, "-c",
                                   f"import {modules[row]}"],
                                  capture_output=True, text=True)
        except OSError as err:
            missing[row] = RowError(f"not run: {args.peer_python}: {err}")
            continue
        if done.returncode != 0:
            missing[row] = RowError(f"not run: cannot import {modules[row]}: "
                                    f"{last_line(done.stderr)}")
    return missing


# ------------------------------------------------------------ timed rows

def vmoe_rate(exe, weights, image_list, threads, repeats, capacity=None):
    """images/s of the executable's --bench (a fresh process)."""
    command = [exe, "--weights", weights, "--image-list", image_list,
               "--quiet", "--threads", str(threads), "--bench", str(repeats)]
    if capacity is not None:
        command += ["--capacity-ratio", str(capacity)]
    out = child(command, model_bench.thread_env(threads))
    match = re.search(r"median ([0-9.]+) images/s", out)
    if not match:
        raise RowError(f"no bench line in {out!r}")
    return {"images_per_s": float(match.group(1))}


def engine_rate(args, row, threads, batch, paths, profile=False):
    """The JSON record of bench/engine_runners.py for one row; with
    `profile`, of `args.repeats` passes under the engine's profiler."""
    command = [os.path.join(BENCH, "engine_runners.py"), "--engine", row,
               "--threads", str(threads), "--batch", str(batch),
               "--images-npy", paths["images"],
               "--reference-npy", paths["reference"],
               "--repeats", str(args.repeats), "--atol", str(F32_ATOL)]
    if row == "openvino-bf16":
        command += ["--quantile-bound", str(paths["engine_bf16_bound"]),
                    "--quantile", str(model_bench.BF16_BOUND_QUANTILE),
                    "--min-top1", str(model_bench.BF16_MIN_TOP1)]
    if profile:
        command += ["--profile", str(args.repeats), "--profile-dir",
                    args.workdir]
    if row == "torch":
        command = [sys.executable, *command, "--desc", paths["desc"],
                   "--weights", paths["weights"]]
    else:
        command = [args.peer_python, *command, "--model",
                   paths[(row, batch)]]
    out = child(command, model_bench.thread_env(threads,
                                                torch=row == "torch"))
    return json.loads(out.splitlines()[-1])


def median(values):
    return float(np.median(values)) if values else None


def compile_bench_tool(args, name, what):
    """bench/NAME.c built in the work folder, or None (with a note saying
    that there is no WHAT) where it does not build."""
    clang = shutil.which("clang-22") or "/usr/lib/llvm-22/bin/clang"
    exe = os.path.join(args.workdir, name)
    libdir = "/usr/lib/llvm-22/lib"
    try:
        tool([clang, "-O2", "-march=native", "-fopenmp",
              os.path.join(BENCH, f"{name}.c"), f"-L{libdir}",
              f"-Wl,-rpath,{libdir}", "-o", exe], name)
    except ToolError as err:
        print(f"note: no {what}: {err}", flush=True)
        return None
    return exe


def compile_probe(args):
    """bench/cross_core_writes.c built in the work folder, or None where no
    thread count is 2 or more or it does not build."""
    if max(args.threads) < 2:
        return None
    return compile_bench_tool(args, "cross_core_writes", "cross-core probe")


def read_bandwidth(probe, threads):
    """The host's read bandwidth in GB/s at `threads` (bench/machine_peaks.c
    --read), or None (no probe, or it failed)."""
    if probe is None:
        return None
    try:
        out = tool([probe, "--read", str(threads)], "machine_peaks")
    except ToolError:
        return None
    found = re.search(r": ([0-9.]+) GB/s", out)
    return float(found.group(1)) if found else None


def cross_core_factor(probe, threads):
    """The host's cross-core write factor at `threads` (None: no probe,
    one thread, or the probe failed)."""
    if probe is None or threads < 2:
        return None
    try:
        out = tool([probe, str(threads)], "cross_core_writes")
    except ToolError:
        return None
    found = re.search(r"factor ([0-9.]+)", out)
    return float(found.group(1)) if found else None


def fmt_factor(values):
    return f"{median(values):.1f}" if values else "-"


def fmt_reads(values):
    """`median (max)` of the read bandwidths of a configuration's rounds."""
    return f"{median(values):.1f} ({max(values):.1f})" if values else "-"


def label(row):
    """A row's name in progress lines: its header, or `vmoe C 0.5`."""
    return ROWS[row] if isinstance(row, str) and row in ROWS else (
        row if isinstance(row, str) else f"vmoe C {row[1]:g}")


def timed_rows(args, configs, rows, measure, failed, read_probe=None):
    """Round-robin: for each config, every round runs every row once.
    measure(row, config) -> record; failed: {row or (row, config):
    RowError}, filled as rows fail (a failed row is not run again).
    Returns [{config, load, rates: {row: [images/s per round]}, records,
    cross_core: [the host's cross-core write factor before each round],
    read_gb_per_s: [read_probe's bandwidth before each round]}]."""
    results = []
    for config in configs:
        load = os.getloadavg()[0]
        rates = {row: [] for row in rows}
        records = {}
        factors, reads = [], []
        for _ in range(args.rounds):
            factor = cross_core_factor(args.probe, config[0])
            if factor is not None:
                factors.append(factor)
                print(f"  host {config[0]}, {config[1]}: cross-core write "
                      f"factor {factor:.1f}", flush=True)
            read = read_bandwidth(read_probe, config[0])
            if read is not None:
                reads.append(read)
                print(f"  host {config[0]}, {config[1]}: read bandwidth "
                      f"{read:.1f} GB/s", flush=True)
            for row in rows:
                if row in failed or (row, config) in failed:
                    continue
                try:
                    record = measure(row, config)
                except RowError as err:
                    failed[(row, config)] = err
                    print(f"  {label(row)} {config[0]}, {config[1]}: {err}",
                          flush=True)
                    continue
                rates[row].append(record["images_per_s"])
                records.setdefault(row, record)
                print(f"  {label(row)} {config[0]}, {config[1]}: "
                      f"{record['images_per_s']:.1f} images/s", flush=True)
        results.append({"config": config, "load_average_before": load,
                        "rates": rates, "records": records,
                        "cross_core": factors, "read_gb_per_s": reads})
    return results


# ------------------------------------------------------------ reporting

def fmt_rate(rates, failure):
    if rates:
        return f"{median(rates):.1f}"
    return "n/a" if failure is None else "failed"


def print_peer_table(args, rows, results, failed, versions):
    header = ["threads, batch", "load", "x-core"] + [
        ROWS[row] + (f" {versions[row]}" if versions.get(row) else "")
        for row in rows]
    print("\nimages/s, median of "
          f"{args.rounds} round(s) of {args.repeats} pass(es) over "
          f"{args.images} images (load = 1-min load average before; x-core "
          "= the host's cross-core write factor, median over the rounds)")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for result in results:
        threads, batch = result["config"]
        cells = [fmt_rate(result["rates"][row],
                          failed.get(row, failed.get((row,
                                                      result["config"]))))
                 for row in rows]
        print(f"| {threads}, {batch} | {result['load_average_before']:.1f} | "
              f"{fmt_factor(result['cross_core'])} | "
              + " | ".join(cells) + " |")
    targets = [(a, b, least) for a, b, least in TARGETS
               if a in rows and b in rows]
    print("\nratios vmoe/peer (target; met or missed)")
    print("| threads, batch | " + " | ".join(
        f"{ROWS[a]} / {ROWS[b]} (>= {least:g})" for a, b, least in targets)
        + " |")
    print("|---|" + "---|" * len(targets))
    for result in results:
        threads, batch = result["config"]
        cells = []
        for a, b, least in targets:
            ra, rb = (median(result["rates"][a]), median(result["rates"][b]))
            if ra is None or rb is None:
                cells.append("n/a")
                continue
            ratio = ra / rb
            result.setdefault("ratios", {})[f"{a}/{b}"] = ratio
            cells.append(f"{ratio:.2f} {'met' if ratio >= least else 'MISSED'}")
        print(f"| {threads}, {batch} | " + " | ".join(cells) + " |")
    reasons = {}
    for key, err in failed.items():
        row = key if isinstance(key, str) else key[0]
        if row in rows:
            reasons.setdefault((row, str(err)), []).append(
                "" if isinstance(key, str) else f"{key[1][0]}, {key[1][1]}")
    for (row, message), where in reasons.items():
        where = [w for w in where if w]
        print(f"{ROWS[row]}" + (f" ({'; '.join(where)})" if where else "")
              + f": {message}")


def group_kept(exe, weights, image_list, capacity, group_images):
    """[group][MoE layer][expert]: the rows each routing group of
    `group_images` images keeps in each expert at `capacity` (--stats on
    that group's images alone: groups route independently). The group
    lists go next to `image_list`, whose paths are relative to it."""
    with open(image_list) as f:
        paths = [line for line in f if line.strip()]
    groups = []
    folder = os.path.dirname(os.path.abspath(image_list))
    for start in range(0, len(paths), group_images):
        chunk = os.path.join(folder, f"group-{start // group_images}.txt")
        with open(chunk, "w") as f:
            f.writelines(paths[start:start + group_images])
        out = tool([exe, "--weights", weights, "--image-list", chunk,
                    "--quiet", "--stats", "--capacity-ratio", str(capacity)],
                   "vmoe --stats")
        layers = [[int(v) for v in counts.split(",")] for counts in
                  re.findall(r"kept per expert \[([0-9, ]*)\]", out)]
        if not layers:
            raise ToolError(f"no stats lines in {out!r}")
        groups.append(layers)
    return groups


def sweep_flops(args, exe, desc_path, dense_path, weights, image_list):
    """{C: (FLOPs ratio, B, dropped fraction)} of the MoE model at each C
    over the dense twin (bench/vit_flops.py)."""
    import vit_flops
    from vmoe_ref import model as vmodel
    from vmoe_ref import ops

    desc = vmodel.load_description(desc_path)
    dense = vit_flops.flops_per_image(vmodel.load_description(dense_path))
    moe = desc["moe"]
    S = vmodel.tokens_per_group(desc)
    k, T = moe["k"], vmodel.tokens_per_image(desc)
    out = {}
    for capacity in args.capacities:
        groups = group_kept(exe, weights, image_list, capacity,
                            vmodel.images_per_group_unit(desc))
        kept = [sum(sum(g[layer]) for g in groups) / args.images
                for layer in range(len(groups[0]))]
        flops = vit_flops.flops_per_image(desc, kept)
        out[capacity] = {
            "flops_ratio": flops / dense, "moe_flops_per_image": flops,
            "dense_flops_per_image": dense, "kept_per_image": kept,
            "group_kept": groups,
            "B": ops.capacity(k, S, capacity, moe["num_experts"],
                              moe.get("capacity_rule", "round")),
            "dropped_fraction": 1 - sum(kept) / (k * T * len(kept))}
    return out


def sweep_floor(desc, info, batch, read, dense):
    """bench/weight_stream.py's floor of a cell, or None without a read
    bandwidth or a dense rate."""
    import weight_stream
    from vmoe_ref import model as vmodel

    if read is None or dense is None:
        return None
    experts = weight_stream.experts_per_forward(
        info["group_kept"], batch // vmodel.images_per_group_unit(desc),
        weight_stream.streamed_blocks(desc))
    return weight_stream.stream_floor(
        desc, info["kept_per_image"], experts, batch, read, 1e3 / dense,
        info["dense_flops_per_image"])


def print_sweep(args, results, flops, desc):
    print(f"\ncapacity sweep: time relative to the dense twin vs executed "
          f"FLOPs relative to it (target: within {SWEEP_POINTS:g} points); "
          f"floor: the points that streaming the used experts' weights "
          f"forces at the best read bandwidth measured before the rounds "
          f"(bench/weight_stream.py)")
    print("| threads, batch | load | x-core | read GB/s (max) | C | B | "
          "dropped | "
          "vmoe img/s | dense img/s | time / dense | FLOPs / dense | points "
          "| within | floor | over floor |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    rows = []
    for result in results:
        threads, batch = result["config"]
        dense = median(result["rates"]["dense"])
        # The floor is a lower bound: the best bandwidth the host gave in
        # the configuration's rounds (two-thread reads on this VM flip
        # between two levels within seconds).
        reads = result["read_gb_per_s"]
        read = max(reads) if reads else None
        for capacity in args.capacities:
            rate = median(result["rates"][("C", capacity)])
            info = flops[capacity]
            row = {"threads": threads, "batch": batch, "C": capacity,
                   "load_average_before": result["load_average_before"],
                   "cross_core_factors": result["cross_core"],
                   "read_gb_per_s": result["read_gb_per_s"],
                   "vmoe_images_per_s": rate, "dense_images_per_s": dense,
                   "rounds": {"vmoe": result["rates"][("C", capacity)],
                              "dense": result["rates"]["dense"]}, **info}
            rows.append(row)
            if rate is None or dense is None:
                print(f"| {threads}, {batch} | | | | {capacity:g} | "
                      f"{info['B']} | | failed | | | | | | | |")
                continue
            relative = dense / rate
            points = 100 * (relative - info["flops_ratio"])
            row.update(time_ratio=relative, points=points)
            floor = sweep_floor(desc, info, batch, read, dense)
            if floor is not None:
                row["floor"] = floor
            floor_cells = ("| - | -" if floor is None else
                           f"| {floor['floor_points']:.0f} | "
                           f"{points - floor['floor_points']:+.0f}")
            print(f"| {threads}, {batch} | "
                  f"{result['load_average_before']:.1f} | "
                  f"{fmt_factor(result['cross_core'])} | "
                  f"{fmt_reads(reads)} | {capacity:g} | "
                  f"{info['B']} | {100 * info['dropped_fraction']:.1f}% | "
                  f"{rate:.1f} | {dense:.1f} | {100 * relative:.0f}% | "
                  f"{100 * info['flops_ratio']:.0f}% | {points:+.0f} | "
                  f"{'yes' if abs(points) <= SWEEP_POINTS else 'NO'} "
                  f"{floor_cells} |")
    return rows


def print_profile(name, record, top):
    profile = record["profile"]
    total = sum(r["ms_per_pass"] for r in profile["by_part"])
    print(f"\nprofile: {name}, {record['threads']} thread(s), batch "
          f"{record['batch']}: {total:.0f} ms per pass over the images "
          f"(its own profiler)")
    for table in ("by_part", "by_op"):
        print(f"| {table.replace('_', ' ')} | ms per pass | share |")
        print("|---|---|---|")
        for r in profile[table][:top]:
            print(f"| {r['name']} | {r['ms_per_pass']:.1f} | "
                  f"{100 * r['share']:.1f}% |")


# ------------------------------------------------------------ self-test

def self_test():
    """The parts that need no engine: the static-shape module against
    python/vmoe_ref on tiny models (routing variants, capacities that drop
    choices), its ONNX export, and vit_flops against torch's profiler."""
    import io
    import warnings
    import torch
    from torch.profiler import profile
    import onnx_vmoe
    import vit_flops
    from vmoe_ref import model as vmodel

    base = {"format": "vmoe-model", "version": 1, "name": "tiny",
            "image": {"height": 16, "width": 16, "channels": 3},
            "input": {"mean": [0.5] * 3, "std": [0.5] * 3},
            "patch_size": 4, "width": 32, "depth": 4, "heads": 4,
            "mlp_dim": 64, "classes": 10, "head": "token"}
    variants = [
        {"routing": "bpr", "score": "max", "k": 2},
        {"routing": "bpr", "score": "sum_topk", "k": 2},
        {"routing": "vanilla", "score": "max", "k": 2},
        {"routing": "bpr", "score": "max", "k": 1, "head": "gap",
         "representation_size": 24}]
    failures = 0
    for n, variant in enumerate(variants):
        desc = dict(base, moe={"placement": "every-2", "num_experts": 8,
                               "capacity_ratio": 1.0, "group_size": 2})
        for key in ("head", "representation_size"):
            if key in variant:
                desc[key] = variant[key]
        desc["moe"].update({k: variant[k] for k in ("routing", "score", "k")})
        torch.manual_seed(n)
        net = vmodel.VMoE(desc).eval()
        with torch.no_grad():
            net.head.kernel.normal_(0, 0.3)
        x = torch.randn(4, 3, 16, 16)
        outputs = []
        for capacity in (0.25, 1.0, 2.0):
            module = onnx_vmoe.StaticVMoE(net, 4, capacity)
            with torch.no_grad():
                want, layers = net(x, capacity_ratio=capacity)
                got = module(x)
            dropped = sum(int((layer["slots"] < 0).sum()) for layer in layers)
            diff = float((got - want).abs().max())
            ok = diff <= 1e-6
            failures += not ok
            print(f"self-test: {variant} C {capacity:g}: static vs vmoe_ref "
                  f"max |diff| {diff:.1e}, {dropped} dropped choices "
                  f"{'ok' if ok else 'FAILED'}")
            outputs.append((dropped, got))
        if not outputs[0][0] > 0 or torch.equal(outputs[0][1],
                                                outputs[-1][1]):
            failures += 1
            print("self-test: FAILED: C 0.25 drops nothing or changes no "
                  "logit (the capacity is not exercised)")
        # Export (in memory): every op has a static ONNX form.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            buffer = io.BytesIO()
            onnx_vmoe.export(onnx_vmoe.StaticVMoE(net, 4), 4, buffer)
        # FLOPs: the static module computes every slot, so with every
        # slot counted as filled the formula equals torch's count of its
        # matrix products (mm, bmm).
        for dense in (False, True):
            d = {k: v for k, v in desc.items() if not (dense and k == "moe")}
            model = onnx_vmoe.StaticVMoE(vmodel.VMoE(d).eval(), 4)
            with torch.no_grad(), profile(with_flops=True) as prof:
                model(x)
            counted = sum(e.flops for e in prof.key_averages()
                          if e.key in ("aten::mm", "aten::bmm",
                                       "aten::addmm"))
            parsed = vmodel.parse_description(d)
            experts, groups, images = 8, 2, len(x)
            slots = [block.moe.capacity * experts * groups / images
                     for block in model.blocks
                     if isinstance(block, onnx_vmoe.StaticBlock)]
            formula = 4 * vit_flops.flops_per_image(parsed, slots or None,
                                                  all_token_rows=True)
            ok = formula == counted
            failures += not ok
            print(f"self-test: {'dense' if dense else 'moe'} FLOPs: formula "
                  f"{formula:.0f}, torch profiler {counted} "
                  f"{'ok' if ok else 'FAILED'}")
    failures += self_test_stream_floor()
    print(f"self-test: {'FAILED' if failures else 'passed'}")
    return 1 if failures else 0


def self_test_stream_floor():
    """bench/weight_stream.py on V-MoE-S/32's shape, against the module
    doc's formula worked by hand; returns the number of failures."""
    import weight_stream

    desc = {"width": 512, "mlp_dim": 2048, "depth": 8, "head": "token",
            "moe": {"placement": "every-2", "num_experts": 32, "k": 2,
                    "routing": "bpr"}}
    expert = 4 * (2 * 512 * 2048 + 2048 + 512)
    failures = 0

    def check(what, ok):
        nonlocal failures
        failures += not ok
        print(f"self-test: stream floor, {what}: {'ok' if ok else 'FAILED'}")

    # Four groups, four MoE blocks of 3 experts: group g uses expert g % 3
    # of every block; forwards of two groups use 2 experts per block, of
    # four groups 3 (the last block, class tokens only, is not counted).
    groups = [[[int(e == g % 3) for e in range(3)] for _ in range(4)]
              for g in range(4)]
    check("experts per forward of 2 groups",
          weight_stream.experts_per_forward(groups, 2, [0, 1, 2]) == [2] * 3)
    check("experts per forward of 4 groups",
          weight_stream.experts_per_forward(groups, 4, [0, 1, 2]) == [3] * 3)
    check("streamed blocks", weight_stream.streamed_blocks(desc) == [0, 1, 2])
    # C 0.1, 8 images: 8 kept choices per image in each block, all 32
    # experts used in blocks 1, 3, 5.
    got = weight_stream.stream_floor(desc, [8, 8, 8, 8], [32, 32, 32], 8,
                                     32.0, 10.0, 2.5e9)
    want = 100 * (96 * expert / 32e9 * 1e3 / 8
                  - 10.0 * 3 * 4 * 512 * 2048 * 8 / 2.5e9) / 10.0
    check(f"C 0.1 {got['floor_points']:.2f} points",
          abs(got["floor_points"] - want) < 1e-9)
    # 68.5 kept choices per image: the arithmetic outlasts the stream.
    got = weight_stream.stream_floor(desc, [68.5] * 4, [32, 32, 32], 8,
                                     32.0, 10.0, 2.5e9)
    check(f"C 1.05 {got['floor_points']:.2f} points",
          got["floor_points"] == 0.0)
    for bad in (lambda: weight_stream.stream_floor(
                    desc, [8, 8], [32] * 3, 8, 32.0, 10.0, 2.5e9),
                lambda: weight_stream.experts_per_forward(groups, 3, [0])):
        try:
            bad()
            check("bad input rejected", False)
        except ValueError as err:
            check(f"bad input rejected ({err})", True)
    return failures


# ------------------------------------------------------------ main

def _list(kind):
    return lambda text: [kind(v) for v in text.split(",") if v]


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--vmoe-compile",
                        default=os.path.join(ROOT, "build/bin/vmoe-compile"))
    parser.add_argument("--peer-python",
                        default=os.environ.get("VMOE_ENGINE_PYTHON"),
                        help="the engines' Python (scripts/engine_peers.sh; "
                        "default $VMOE_ENGINE_PYTHON)")
    parser.add_argument("--threads", type=_list(int), default=[1, 2])
    parser.add_argument("--batches", type=_list(int), default=[8, 32])
    parser.add_argument("--rows", type=_list(str), default=list(ROWS))
    parser.add_argument("--capacities", type=_list(float),
                        default=[0.1, 0.25, 0.5, 1.05, 2.0],
                        help="C of the sweep (empty: no sweep)")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3,
                        help="timed passes over all images per row")
    parser.add_argument("--images", type=int, default=32)
    parser.add_argument("--profile", action="store_true",
                        help="per-op profiles of OpenVINO (f32, bf16) and "
                        "ONNX Runtime at the largest batch, 1 thread")
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: 1 thread, batch 8, 1 round, 1 "
                        "pass, C 0.1 and 1.05")
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--workdir", help="keep the work files here")
    parser.add_argument("--self-test", action="store_true",
                        help="check the export module and the FLOP formula "
                        "on tiny models (no engine needed) and exit")
    args = parser.parse_args()
    if args.quick:
        args.threads, args.batches, args.rounds, args.repeats = [1], [8], 1, 1
        args.capacities = [0.1, 1.05]
    unknown = [row for row in args.rows if row not in ROWS]
    if unknown:
        parser.error(f"unknown row {unknown[0]!r} ({', '.join(ROWS)})")
    if "vmoe" not in args.rows:
        args.rows.insert(0, "vmoe")  # the reference of every ratio
    for name, values in (("threads", args.threads),
                         ("batches", args.batches)):
        if not values or min(values) < 1:
            parser.error(f"--{name}: positive integers")
    if any(batch % 8 for batch in args.batches):
        parser.error("--batches: multiples of 8 (the routing group)")
    unit = math.lcm(*args.batches)
    if args.images < 1 or args.images % unit:
        parser.error(f"--images: a positive multiple of {unit}")
    if args.rounds < 1 or args.repeats < 1:
        parser.error("--rounds and --repeats: at least 1")
    if any(not c > 0 for c in args.capacities):
        parser.error("--capacities: positive ratios")
    return args


def main():
    args = parse_args()
    if args.self_test:
        return self_test()
    if not os.path.exists(args.vmoe_compile):
        raise ToolError(f"{args.vmoe_compile} not found (scripts/build.sh)")
    print(f"machine: {model_bench_cpu()}; 1-min load average "
          f"{os.getloadavg()[0]:.1f}", flush=True)
    failed = probe_engines(args)
    keep = bool(args.workdir)
    args.workdir = args.workdir or tempfile.mkdtemp(prefix="vmoe-engines-")
    os.makedirs(args.workdir, exist_ok=True)
    try:
        return run_benchmark(args, failed)
    finally:
        if not keep:
            shutil.rmtree(args.workdir, ignore_errors=True)


def model_bench_cpu():
    """'CPU model, N CPUs, avx512_bf16: yes/no' from /proc/cpuinfo."""
    try:
        with open("/proc/cpuinfo") as f:
            info = f.read()
    except OSError:
        return "unknown CPU"
    name = re.search(r"model name\s*:\s*(.*)", info)
    flags = re.search(r"flags\s*:\s*(.*)", info)
    bf16 = bool(flags and "avx512_bf16" in flags.group(1).split())
    return (f"{name.group(1).strip() if name else 'unknown CPU'}, "
            f"{os.cpu_count()} CPUs, avx512_bf16 {'yes' if bf16 else 'no'}")


def run_benchmark(args, failed):
    from vmoe_tools.check_precision import BF16_UNIT_ROUNDOFF

    folder = os.path.join(args.workdir, "s32")
    desc_path, weights, image_list, images = model_bench.prepare_model(
        "s32", args.workdir, args.images)
    dense_path, dense_weights = dense_twin(desc_path, folder)
    exes = compile_models(args, desc_path, dense_path, folder)
    args.probe = compile_probe(args)
    reference, x, checks, modules = check_models(
        args, exes, desc_path, weights, image_list, images)
    status = 0
    if "vmoe-bf16" in args.rows:
        record, ok = model_bench.bf16_check(
            "s32", model_bench.compiled_logits(
                exes[("vmoe-bf16", args.batches[0])], weights, image_list),
            reference)
        checks["vmoe bf16 vs vmoe f32"] = record
        if not ok:
            failed["vmoe-bf16"] = RowError("logits outside the bf16 bound",
                                           check=True)
    paths = {"images": os.path.join(folder, "images-normalized.npy"),
             "reference": os.path.join(folder, "vmoe-logits.npy"),
             "desc": desc_path, "weights": weights,
             "engine_bf16_bound": ENGINE_BF16_ULPS * BF16_UNIT_ROUNDOFF
             * float(np.abs(reference).max())}
    np.save(paths["images"], x)
    np.save(paths["reference"], reference)
    if any(row in args.rows and row not in failed for row in ENGINE_ROWS):
        for key, value in export_models(args, modules, folder).items():
            if isinstance(value, RowError):
                failed[key] = value
            else:
                paths[key] = value
    del modules

    def measure(row, config):
        threads, batch = config
        if row.startswith("vmoe"):
            return vmoe_rate(exes[(row, batch)], weights, image_list,
                             threads, args.repeats)
        if (row, batch) in failed:
            raise failed[(row, batch)]
        return engine_rate(args, row, threads, batch, paths)

    configs = [(t, b) for t in args.threads for b in args.batches]
    print(f"\ntiming {len(args.rows)} rows x {len(configs)} configurations "
          f"x {args.rounds} round(s)", flush=True)
    results = timed_rows(args, configs, args.rows, measure, failed)
    versions = {}
    for result in results:
        for row, record in result["records"].items():
            if "version" in record:
                versions[row] = record["version"]
                checks.setdefault(f"{row} vs vmoe f32", {
                    k: record[k] for k in record if k.startswith(
                        ("logits", "same", "quantile", "bound"))})
    for name, check in checks.items():
        if name.endswith("vs vmoe f32") and "quantile_abs_diff" in check:
            print(f"check: {name}: {check['quantile']:g}-quantile image max "
                  f"|diff| {check['quantile_abs_diff']:.2e} (bound "
                  f"{check['bound']:.2e}), same top-1 "
                  f"{100 * check['same_top1']:.1f}%")
        elif name.endswith("vs vmoe f32"):
            print(f"check: {name}: max |diff| "
                  f"{check['logits_max_abs_diff']:.2e} (limit {F32_ATOL:g})")
    print_peer_table(args, args.rows, results, failed, versions)
    if any(err.check for err in failed.values()):
        status = 1

    sweep = []
    if args.capacities:
        flops = sweep_flops(args, exes[("vmoe", args.batches[0])], desc_path,
                            dense_path, weights, image_list)

        def measure_sweep(row, config):
            threads, batch = config
            if row == "dense":
                return vmoe_rate(exes[("dense", batch)], dense_weights,
                                 image_list, threads, args.repeats)
            return vmoe_rate(exes[("vmoe", batch)], weights, image_list,
                             threads, args.repeats, capacity=row[1])

        print(f"\ncapacity sweep: {len(args.capacities) + 1} rows x "
              f"{len(configs)} configurations x {args.rounds} round(s)",
              flush=True)
        sweep_failed = {}
        from vmoe_ref import model as vmodel
        sweep = print_sweep(args, timed_rows(
            args, configs, ["dense"] + [("C", c) for c in args.capacities],
            measure_sweep, sweep_failed,
            read_probe=compile_bench_tool(args, "machine_peaks",
                                          "read-bandwidth probe")), flops,
            vmodel.load_description(desc_path))

    profiles = {}
    if args.profile:
        batch = max(args.batches)
        for row in ("openvino", "openvino-bf16", "onnxruntime"):
            if row in failed or (row, batch) in failed:
                print(f"\nprofile: {ROWS[row]}: not run ("
                      f"{failed.get(row) or failed.get((row, batch))})")
                continue
            try:
                record = engine_rate(args, row, 1, batch, paths,
                                     profile=True)
            except RowError as err:
                print(f"\nprofile: {ROWS[row]}: {err}")
                continue
            profiles[row] = record
            print_profile(ROWS[row], record, top=12)

    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": model_bench_cpu(), "args": {
                k: v for k, v in vars(args).items()
                if k not in ("json", "self_test")},
                "checks": checks, "versions": versions,
                "table": [{"threads": r["config"][0],
                           "batch": r["config"][1],
                           "load_average_before": r["load_average_before"],
                           "cross_core_factors": r["cross_core"],
                           "images_per_s": {row: median(v) for row, v in
                                            r["rates"].items()},
                           "rounds": r["rates"],
                           "ratios": r.get("ratios", {})}
                          for r in results],
                "failures": {str(k): str(v) for k, v in failed.items()},
                "sweep": sweep, "profiles": profiles}, f, indent=1)
    return status


if __name__ == "__main__":
    try:
        sys.exit(main())
    except ToolError as err:
        print(f"engine_peers: {err}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        sys.exit("engine_peers: interrupted")
