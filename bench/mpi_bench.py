#!/usr/bin/python3
"""Expert parallelism over MPI: the S/32-shaped model at R = 1, 2, 4.

    /usr/bin/python3 bench/mpi_bench.py [--vmoe-compile build/bin/vmoe-compile]
        [--ranks 1,2,4] [--images 64] [--repeats 3] [--workdir DIR]
        [--mpirun "mpirun --allow-run-as-root --oversubscribe --mca btl self,vader --bind-to none --mca mpi_yield_when_idle 1"]

Writes V-MoE-S/32-shaped random weights (bench/model_bench.py: 224x224,
patch 32, D 512, depth 8, E 32, k 2, BPR, 8 images per group) and random
PNG images, compiles the one-process executable and one per R with
`vmoe-compile --expert-parallel R`, and runs each on all images with one
OpenMP thread per process (`--threads 1`), `--repeats` times (median).
Checks that every run prints what one process prints (logits to the last
bit), then reports per R: wall time of the whole run (weights loading and
mpirun start-up included), images/s, and from each rank's `mpi:` report the run time, the
share of it inside MPI calls, bytes sent per rank and layer, expert
weights read and peak resident memory per rank.

R larger than the cores of the machine is oversubscribed: its ranks share
cores, so its times say nothing about scaling (marked in the table).
"""

import argparse
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "bench"))

_RANK = re.compile(r"^mpi: rank (\d+): weights read (\d+) B, of which expert "
                   r"weights (\d+) B; run ([0-9.]+) ms, in MPI ([0-9.]+) ms "
                   r"\(([0-9.]+)%\).*peak resident (-?\d+) B$")
_LAYER = re.compile(r"^mpi: rank (\d+): MoE layer (\d+): sent (\d+) B, "
                    r"received (\d+) B")


def run(command, timeout=3600):
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True,
                          timeout=timeout)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"mpi_bench: {shlex.join(command)} failed "
                         f"({done.returncode}): {done.stderr.strip()}")
    return done.stdout, seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--vmoe-compile",
                        default=os.path.join(ROOT, "build/bin/vmoe-compile"))
    parser.add_argument("--ranks", default="1,2,4")
    parser.add_argument("--images", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workdir")
    parser.add_argument("--mpirun", default="mpirun --allow-run-as-root "
                        "--oversubscribe --mca btl self,vader --bind-to none "
                        "--mca mpi_yield_when_idle 1")
    args = parser.parse_args()
    from model_bench import prepare_model

    workdir = args.workdir or tempfile.mkdtemp(prefix="vmoe-mpi-bench-")
    desc, weights, image_list, _ = prepare_model("s32", workdir, args.images)
    folder = os.path.dirname(desc)
    one = os.path.join(folder, "one")
    run([args.vmoe_compile, desc, "-o", one])
    flags = ["--weights", weights, "--image-list", image_list,
             "--print-logits", "--threads", "1"]
    expected, _ = run([one] + flags)
    times = [run([one] + flags)[1] for _ in range(args.repeats)]
    # Peak RSS of the one-process run: a wrapper whose only child it is.
    peak = subprocess.run(
        [sys.executable, "-c",
         "import resource, subprocess, sys; subprocess.run(sys.argv[1:], "
         "stdout=subprocess.DEVNULL, check=True); print(resource.getrusage("
         "resource.RUSAGE_CHILDREN).ru_maxrss)", one] + flags,
        capture_output=True, text=True, check=True).stdout.strip()
    cores = os.cpu_count() or 1
    rows = [("1 process", statistics.median(times), int(peak) * 1024)]
    for ranks in [int(r) for r in args.ranks.split(",")]:
        exe = os.path.join(folder, f"ep{ranks}")
        run([args.vmoe_compile, desc, "-o", exe,
             f"--expert-parallel={ranks}"])
        command = shlex.split(args.mpirun) + ["-np", str(ranks), exe] + flags
        results = [run(command) for _ in range(args.repeats)]
        for out, _ in results:
            got = "".join(l for l in out.splitlines(True)
                          if not l.startswith("mpi:"))
            if got != expected:
                raise SystemExit(f"mpi_bench: np {ranks} differs from one "
                                 f"process")
        median = statistics.median(s for _, s in results)
        # The report of the run closest to the median.
        out = min(results, key=lambda r: abs(r[1] - median))[0]
        ranks_info, layers = {}, {}
        for line in out.splitlines():
            m = _RANK.match(line)
            if m:
                ranks_info[int(m[1])] = dict(
                    weights=int(m[2]), experts=int(m[3]), run=float(m[4]),
                    mpi=float(m[5]), share=float(m[6]), rss=int(m[7]))
            m = _LAYER.match(line)
            if m:
                layers.setdefault(int(m[1]), []).append(int(m[3]))
        rows.append((f"np {ranks}" + (" (oversubscribed)" if ranks > cores
                                      else ""),
                     median, (ranks_info, layers)))
    print(f"mpi_bench: S/32-shaped model, {args.images} images in batches "
          f"of 8, 1 thread per process, median of {args.repeats}; "
          f"{cores} cores; identical output at every R")
    print("| run | wall s | images/s | per rank: run ms / in MPI % | "
          "sent per rank and layer (MB) | expert weights per rank (MB) | "
          "peak RSS per rank (MB) |")
    print("|---|---|---|---|---|---|---|")
    for label, seconds, info in rows:
        ips = args.images / seconds
        if isinstance(info, int):
            print(f"| {label} | {seconds:.2f} | {ips:.1f} | - | - | all | "
                  f"{info / 1e6:.0f} |")
            continue
        ranks_info, layers = info
        per_rank = ", ".join(f"{r['run']:.0f} / {r['share']:.1f}%"
                             for _, r in sorted(ranks_info.items()))
        sent = ", ".join(f"{sum(v) / len(v) / 1e6:.2f}"
                         for _, v in sorted(layers.items()))
        experts = ", ".join(f"{r['experts'] / 1e6:.1f}"
                            for _, r in sorted(ranks_info.items()))
        rss = ", ".join(f"{r['rss'] / 1e6:.0f}"
                        for _, r in sorted(ranks_info.items()))
        print(f"| {label} | {seconds:.2f} | {ips:.1f} | {per_rank} | {sent} "
              f"| {experts} | {rss} |")


if __name__ == "__main__":
    main()
