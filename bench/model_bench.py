#!/usr/bin/python3
"""A whole V-MoE model, compiled by vmoe-compile vs PyTorch eager.

    /usr/bin/python3 bench/model_bench.py [--vmoe-compile build/bin/vmoe-compile]
        [--models s32,digits] [--threads 1,2] [--capacities 1.05,0.5]
        [--batches N] [--repeats 5] [--json FILE] [--workdir DIR]
        [--baseline-vmoe-compile PATH] [--rounds R]

For each model: writes the description and random weights (or uses
examples/digits), random PNG images, compiles the executable, checks that
its logits match the PyTorch model (python/vmoe_ref) on those images
(max |diff| printed; 1e-3 fails the run), then times both per thread count
and capacity ratio C, each in a fresh child process: the executable's
`--bench` (forward only; images decoded before timing), and
`VMoE.forward` of python/vmoe_ref under torch.no_grad on the same batches
(normalized tensors prepared before timing). Reports median images/s and
the ratio compiled / torch of the same run. With --baseline-vmoe-compile,
the executable built by that compiler (e.g. of an older commit) is timed
next to them ("before"), for before/after ratios within one run; with
--rounds R every implementation is timed R times round-robin and the
medians are reported (a shared machine's load hits all of them alike).

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


def run(command, env=None):
    done = subprocess.run(command, capture_output=True, text=True, env=env,
                          timeout=1800)
    if done.returncode != 0:
        raise SystemExit(f"model_bench: {command[0]} failed "
                         f"({done.returncode}): {done.stderr.strip()}")
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


def torch_child(args):
    """Child process: times VMoE.forward; prints one JSON line."""
    import time
    import torch
    from vmoe_ref import model as vmodel

    torch.set_num_threads(args.threads)
    net = vmodel.load_model(args.desc, args.weights)
    images = np.load(args.images_npy)
    desc = net.desc
    batch = desc["moe"]["group_size"]
    batches = [vmodel.normalize_images(images[i:i + batch],
                                       desc["input"]["mean"],
                                       desc["input"]["std"])
               for i in range(0, len(images), batch)]
    result = {}
    with torch.no_grad():
        if args.logits_out:
            np.save(args.logits_out, np.concatenate(
                [net(x, capacity_ratio=args.capacity)[0].numpy()
                 for x in batches]))
        for _ in range(args.warmup):
            net(batches[0], capacity_ratio=args.capacity)
        rates = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            for x in batches:
                net(x, capacity_ratio=args.capacity)
            rates.append(len(images) / (time.perf_counter() - start))
        result["images_per_s"] = float(np.median(rates))
    print(json.dumps(result))


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
    images_npy = os.path.join(args.workdir, name, "images.npy")
    np.save(images_npy, images)
    exe = os.path.join(args.workdir, name, "model")
    max_c = max(max(args.capacities), desc["moe"]["capacity_ratio"])
    run([args.vmoe_compile, desc_path, "-o", exe,
         f"--max-capacity-ratio={max(max_c, 2.0)}"])
    before = None
    if args.baseline_vmoe_compile:
        before = os.path.join(args.workdir, name, "model-before")
        run([args.baseline_vmoe_compile, desc_path, "-o", before,
             f"--max-capacity-ratio={max(max_c, 2.0)}"])

    # Correctness first: the compiled logits against torch, same images.
    logits_npy = os.path.join(args.workdir, name, "torch_logits.npy")
    child = [sys.executable, os.path.abspath(__file__), "--torch-child",
             "--desc", desc_path, "--weights", weights, "--images-npy",
             images_npy, "--repeats", "1", "--warmup", "0", "--capacity",
             str(desc["moe"]["capacity_ratio"])]
    run(child + ["--logits-out", logits_npy], env=thread_env(1, torch=True))
    got = compiled_logits(exe, weights, image_list)
    want = np.load(logits_npy)
    diff = float(np.abs(got - want).max()) if got.shape == want.shape \
        else float("inf")
    same_top1 = float((got.argmax(1) == want.argmax(1)).mean()) \
        if got.shape == want.shape else 0.0
    print(f"{name}: {len(images)} images, compiled vs torch logits max |diff| "
          f"{diff:.2e}, same top-1 {100 * same_top1:.1f}%", flush=True)
    rows = []
    if not diff <= 1e-3:
        print(f"model_bench: {name}: compiled logits differ from torch")
        return rows, False

    print(f"{'model':<8}{'threads':>8}{'C':>6}{'dropped':>9}{'vmoe img/s':>12}"
          f"{'torch img/s':>13}{'vmoe/torch':>12}"
          + (f"{'before img/s':>14}{'vmoe/before':>13}" if before else ""),
          flush=True)

    def images_per_s(executable, threads, capacity):
        out = run([executable, "--weights", weights, "--image-list",
                   image_list, "--quiet", "--threads", str(threads),
                   "--capacity-ratio", str(capacity),
                   "--bench", str(args.repeats)], env=thread_env(threads))
        match = re.search(r"median ([0-9.]+) images/s", out)
        if not match:
            raise SystemExit(f"model_bench: no bench line in {out!r}")
        return float(match.group(1))

    def torch_images_per_s(threads, capacity):
        out = run(child[:-6] + [
            "--repeats", str(args.repeats), "--warmup", "1",
            "--capacity", str(capacity), "--threads", str(threads)],
            env=thread_env(threads, torch=True))
        return json.loads(out.splitlines()[-1])["images_per_s"]

    for threads in args.threads:
        for capacity in args.capacities:
            # Round-robin rounds, so that load from other processes hits
            # every implementation alike; medians over the rounds.
            times = {"vmoe": [], "torch": [], "before": []}
            for _ in range(args.rounds):
                times["vmoe"].append(images_per_s(exe, threads, capacity))
                if before:
                    times["before"].append(
                        images_per_s(before, threads, capacity))
                times["torch"].append(torch_images_per_s(threads, capacity))
            compiled = float(np.median(times["vmoe"]))
            reference = float(np.median(times["torch"]))
            previous = float(np.median(times["before"])) if before else None
            stats = run([exe, "--weights", weights, "--image-list",
                         image_list, "--quiet", "--stats",
                         "--capacity-ratio", str(capacity)])
            counts = [(int(a), int(b)) for a, b in
                      re.findall(r"dropped (\d+)/(\d+)", stats)]
            dropped = sum(a for a, _ in counts) / max(
                1, sum(b for _, b in counts))
            rows.append({"model": name, "threads": threads, "C": capacity,
                         "vmoe_images_per_s": compiled,
                         "torch_images_per_s": reference,
                         "dropped_fraction": dropped,
                         "logits_max_abs_diff": diff,
                         "before_images_per_s": previous,
                         "rounds": times})
            print(f"{name:<8}{threads:>8}{capacity:>6g}{100 * dropped:>8.1f}%"
                  f"{compiled:>12.1f}"
                  f"{reference:>13.1f}{compiled / reference:>11.2f}x"
                  + (f"{previous:>14.1f}{compiled / previous:>12.2f}x"
                     if before else ""),
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
    # Child mode (internal).
    parser.add_argument("--torch-child", action="store_true",
                        help=argparse.SUPPRESS)
    parser.add_argument("--desc", help=argparse.SUPPRESS)
    parser.add_argument("--weights", help=argparse.SUPPRESS)
    parser.add_argument("--images-npy", help=argparse.SUPPRESS)
    parser.add_argument("--capacity", type=float, help=argparse.SUPPRESS)
    parser.add_argument("--warmup", type=int, default=1,
                        help=argparse.SUPPRESS)
    parser.add_argument("--logits-out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.torch_child:
        args.threads = args.threads[0] if isinstance(args.threads, list) \
            else args.threads
        torch_child(args)
        return 0
    for model in args.models:
        if model not in ("s32", "digits"):
            parser.error(f"unknown model {model!r} (s32, digits)")
    if not os.path.exists(args.vmoe_compile):
        raise SystemExit(f"model_bench: {args.vmoe_compile} not found "
                         "(scripts/build.sh)")
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
