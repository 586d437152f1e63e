"""Checks that expert parallel executables print what one process prints.

    cd python && /usr/bin/python3 -m vmoe_tools.check_mpi \\
        --model DESC.json --vmoe-compile PATH/vmoe-compile --work DIR \\
        --mpirun "mpirun --allow-run-as-root --oversubscribe" \\
        [--weights W.safetensors --image-list LIST | --images 21] \\
        [--ranks 1,2,4] [--capacities 0.25,1.05] [--padding masked,zeros] \\
        [--groups-per-batch 1] [--compile-arg=--routing=vanilla ...]

Compiles DESC once for one process and once per R with
`vmoe-compile --expert-parallel R`, runs every executable on the same
images (`--print-logits --stats --threads 1`, each capacity ratio and
padding mode; the expert parallel ones under `mpirun -np R`) and compares
the output of rank 0 without its `mpi:` report lines with the one-process
output byte for byte: the same classes, the same logits to the last bit
(%.9g round-trips float32), the same kept and dropped choices per expert.
Without --weights, random weights (vmoe_ref.model) and random PNG images
are drawn; no reference is needed, the one-process executable is it.

Prints one line per run and the report of the last run of each R; exit
status 0 when every run is identical, 1 otherwise.
"""

import argparse
import os
import shlex
import subprocess
import sys

import numpy as np


class CheckError(Exception):
    pass


def _run(command, timeout=600):
    done = subprocess.run(command, capture_output=True, text=True,
                          timeout=timeout)
    if done.returncode != 0:
        raise CheckError(f"{shlex.join(command)} exited with "
                         f"{done.returncode}: {done.stderr.strip()}")
    return done.stdout


def _random_inputs(args):
    """Random weights and images for args.model; returns (weights, list)."""
    import torch  # noqa: F401 (vmoe_ref needs it)
    from vmoe_ref import model as vmodel
    from vmoe_tools.check_model import randomize, write_images

    desc = vmodel.load_description(args.model)
    net = vmodel.VMoE(desc).eval()
    randomize(net, args.seed)
    weights = os.path.join(args.work, "weights.safetensors")
    vmodel.save_safetensors(weights, net.export_tensors())
    image = desc["image"]
    rng = np.random.default_rng(args.seed)
    images = rng.integers(0, 256, (args.images, image["channels"],
                                   image["height"], image["width"]),
                          dtype=np.uint8)
    return weights, write_images(os.path.join(args.work, "images"), images)


def check(args):
    os.makedirs(args.work, exist_ok=True)
    if args.weights:
        weights, image_list = args.weights, args.image_list
    else:
        weights, image_list = _random_inputs(args)
    common = [f"--groups-per-batch={args.groups_per_batch}"] + args.compile_arg
    one = os.path.join(args.work, "one")
    _run([args.vmoe_compile, args.model, "-o", one] + common)
    parallel = {}
    for ranks in args.ranks:
        exe = os.path.join(args.work, f"ep{ranks}")
        _run([args.vmoe_compile, args.model, "-o", exe,
              f"--expert-parallel={ranks}"] + common)
        parallel[ranks] = exe
    mpirun = shlex.split(args.mpirun)
    runs = same = 0
    for padding in args.padding:
        for ratio in args.capacities:
            flags = ["--weights", weights, "--image-list", image_list,
                     "--print-logits", "--stats", "--threads", "1",
                     "--padding", padding]
            if ratio:
                flags += ["--capacity-ratio", ratio]
            expected = _run([one] + flags)
            for ranks, exe in parallel.items():
                out = _run(mpirun + ["-np", str(ranks), exe] + flags)
                lines = out.splitlines(keepends=True)
                got = "".join(l for l in lines if not l.startswith("mpi:"))
                runs += 1
                identical = got == expected
                same += identical
                logits = sum(": logits " in l for l in lines)
                label = f"C={ratio}" if ratio else "C=default"
                print(f"check_mpi: np {ranks} {label} padding {padding}: "
                      f"{'identical' if identical else 'DIFFER'} "
                      f"({logits} images)", flush=True)
                if not identical:
                    diff = [f"    one: {a.rstrip()}\n    np{ranks}: {b.rstrip()}"
                            for a, b in zip(expected.splitlines(True),
                                            got.splitlines(True)) if a != b]
                    print("\n".join(diff[:5]))
    for ranks, exe in parallel.items():
        out = _run(mpirun + ["-np", str(ranks), exe, "--weights", weights,
                             "--image-list", image_list, "--quiet",
                             "--threads", "1"])
        print(f"check_mpi: report np {ranks}:")
        print("".join("  " + l for l in out.splitlines(True)
                      if l.startswith("mpi:")), end="")
    print(f"check_mpi: {runs} runs, {same} identical, {runs - same} differ")
    return 0 if same == runs else 1


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--vmoe-compile", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--mpirun", required=True,
                        help="mpirun and its options, one string")
    parser.add_argument("--weights")
    parser.add_argument("--image-list")
    parser.add_argument("--images", type=int, default=21,
                        help="random images without --weights")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--ranks", default="1,2,4")
    parser.add_argument("--capacities", default="0.25,1.05")
    parser.add_argument("--padding", default="masked")
    parser.add_argument("--groups-per-batch", type=int, default=1)
    parser.add_argument("--compile-arg", action="append", default=[])
    args = parser.parse_args(argv)
    args.ranks = [int(r) for r in args.ranks.split(",")]
    args.capacities = args.capacities.split(",")
    args.padding = args.padding.split(",")
    if bool(args.weights) != bool(args.image_list):
        print("check_mpi: error: --weights and --image-list go together",
              file=sys.stderr)
        return 1
    try:
        return check(args)
    except (CheckError, subprocess.TimeoutExpired) as error:
        print(f"check_mpi: error: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
