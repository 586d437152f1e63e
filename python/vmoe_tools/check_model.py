"""Checks a compiled model description against the PyTorch reference.

    cd python && /usr/bin/python3 -m vmoe_tools.check_model \\
        --model DESC.json --vmoe-compile PATH/vmoe-compile --work DIR \\
        [--images 13] [--seed 0] [--capacities 0.5,1.05] \\
        [--padding masked|zeros] [--groups-per-batch 1] [--atol 1e-4] \\
        [--weights W.safetensors] [--training-seed N]

For any description (every field of docs/ModelFormat.md §1: non-square
patches, map/gap/token heads, representation_size, final_norm, an expert
width of its own, any MoE placement, token groups, a fixed capacity, no
MoE at all, RMSNorm, SwiGLU and shared experts, the dropless mode): draws random weights with vmoe_ref.model (every tensor,
biases and LayerNorm scales included, so that each one matters) unless
--weights gives them, writes random 8-bit PNG images, compiles the
description with vmoe-compile, runs the executable (--print-logits
--stats, at each capacity ratio, with the padding mode) and compares with
vmoe_ref.model.evaluate on the same images: every logit within --atol and
the same kept choices per expert and dropped choices per MoE layer.

A random draw can put two gates, or two BPR scores, so close that float32
rounding decides between them, differently in torch and in the compiled
code. Draws whose smallest routing margin (over the batches actually run)
is below --min-margin are rejected and the next seed is tried, as the
layer checks do; the seed used is printed.

With --compare-all-token-rows the description is also compiled with
vmoe-compile --all-token-rows (every token's row in the last block, where
by default a class-token head makes the last block compute the class
tokens' rows only), and both executables must print the same logits and
statistics, bit for bit, at every capacity ratio.

With --training-seed N the description is compiled as a training graph
(vmoe-compile --training --seed N: noisy gating from the seed) and the
reference runs with the same seed; the executable's --losses (the
importance, load and GShard losses per MoE layer) must then agree too,
within --atol (relative above 1).

Exit status 0 when every run agrees, 1 otherwise; errors print one line.
"""

import argparse
import math
import os
import subprocess
import sys

import numpy as np
import torch

from vmoe_ref import model as vmodel
from vmoe_tools.executable import RunError, capacity_list, run_executable
from vmoe_tools.png import write_png

class CheckError(Exception):
    pass


def randomize(net, seed):
    """Draws every parameter of `net`: kernels ~ N(0, 1/fan_in), routers
    wider (clear routing decisions), biases and embeddings ~ N(0, 0.1..0.5),
    LayerNorm scales 1 + N(0, 0.1)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in net.named_parameters():
            noise = torch.randn(param.shape, generator=gen)
            if name.endswith("router.kernel"):
                value = noise * 3.0 / math.sqrt(param.shape[0])
            elif name.endswith(".scale"):
                value = 1.0 + 0.1 * noise
            elif name.endswith(("kernel", ".w1", ".w2", ".w_gate", ".w_up",
                                ".w_down")):
                value = noise / math.sqrt(param.shape[-2])
            elif name in ("pos_embedding", "cls_token", "map.probe"):
                value = 0.5 * noise
            else:
                value = 0.1 * noise
            param.copy_(value)


def _smallest_gap(gaps):
    """The smallest nonzero gap: exact ties come from identical values
    (identical padding tokens, a zero router), which both sides compute
    bitwise alike and break alike (lower index first)."""
    gaps = gaps[gaps > 0]
    return float(gaps.min()) if gaps.numel() else math.inf


def routing_margin(net, images, batch, capacity_ratio, padding,
                   training_seed=None):
    """The smallest routing margin of the batches evaluate() runs: the gap
    between adjacent gates among a token's k + 1 largest, and between
    adjacent BPR scores in a group (masked tokens excluded)."""
    desc = net.desc
    if "moe" not in desc:
        return math.inf
    moe = desc["moe"]
    k = moe.get("k", 1)
    x_all = vmodel.normalize_images(images, desc["input"]["mean"],
                                    desc["input"]["std"],
                                    vmodel.value_range(desc))
    margin = math.inf
    net.eval()
    with torch.no_grad():
        for start in range(0, len(images), batch):
            real = min(batch, len(images) - start)
            x = x_all[start:start + real]
            if real < batch:
                x = torch.cat([x, x.new_zeros((batch - real,) +
                                              x.shape[1:])])
            valid_images = real if padding == "masked" else None
            _, layers = net(x, capacity_ratio=capacity_ratio,
                            valid_images=valid_images,
                            training_seed=training_seed)
            for layer in layers:
                if layer["routing"] == "soft":
                    continue  # no discrete routing decision
                gates = layer["gates"].double()
                valid = layer.get("valid")
                if valid is None:
                    valid = torch.ones(gates.shape[:2], dtype=torch.bool)
                if layer["routing"] == "expert_choice":
                    # Each expert ranks the valid tokens of its group. Two
                    # padding tokens next to each other in a ranking may
                    # swap freely: identical black images give gates that
                    # differ in the last bits on some hosts (AVX2 torch),
                    # and which of them an expert takes changes neither the
                    # real images' logits nor the counts.
                    per_image = gates.shape[0] * gates.shape[1] // batch
                    token = torch.arange(gates.shape[0] * gates.shape[1])
                    real_token = (token // per_image < real).reshape(
                        gates.shape[:2])
                    for g in range(gates.shape[0]):
                        col, order = torch.sort(gates[g][valid[g]], 0,
                                                descending=True)
                        real_rank = real_token[g][valid[g]][order]
                        either = real_rank[:-1] | real_rank[1:]
                        gap = col[:-1] - col[1:]
                        margin = min(margin, _smallest_gap(gap[either]))
                    continue
                top = torch.sort(gates, -1, descending=True).values
                depth = min(k + 1, gates.shape[-1])
                if depth > 1:
                    gaps = top[..., :depth - 1] - top[..., 1:depth]
                    margin = min(margin, _smallest_gap(gaps[valid]))
                if layer["routing"] == "bpr":
                    if moe["score"] == "sum_topk":
                        score = top[..., :k].sum(-1)
                    else:
                        score = top[..., 0]
                    for g in range(score.shape[0]):
                        s = torch.sort(score[g][valid[g]],
                                       descending=True).values
                        margin = min(margin, _smallest_gap(s[:-1] - s[1:]))
    return margin


def compare_losses(net, got, ref, atol):
    """Prints the training losses of both sides; True when every loss
    agrees within atol * max(1, |ref|)."""
    ok = True
    for block, row in zip(net.moe_block_ids, ref):
        mine = got.get(block)
        agree = mine is not None and all(
            abs(a - b) <= atol * max(1.0, abs(b)) for a, b in zip(mine, row))
        ok = ok and agree
        print(f"  losses block {block}: compiled {mine}, torch "
              f"{[float(f'{v:.9g}') for v in row]}"
              f"{'' if agree else '  FAIL'}")
    return ok


def write_images(folder, images):
    """PNGs 0000.png ... and list.txt (one name per line)."""
    os.makedirs(folder, exist_ok=True)
    names = []
    for i, image in enumerate(images):
        name = f"{i:04d}.png"
        pixels = image[0] if image.shape[0] == 1 else image.transpose(1, 2, 0)
        write_png(os.path.join(folder, name), pixels)
        names.append(name)
    path = os.path.join(folder, "list.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(name + "\n" for name in names))
    return path


def check(args):
    desc = vmodel.load_description(args.model)
    name = desc["name"]
    if desc["image"]["channels"] not in (1, 3):
        raise CheckError("only 1- and 3-channel models take PNG images")
    fixed = ("moe" not in desc or "capacity" in desc["moe"]
             or vmodel.is_dropless(desc["moe"])
             or desc["moe"]["routing"] == "soft")
    capacities = [None] if fixed else args.capacities
    batch = vmodel.images_per_group_unit(desc) * args.groups_per_batch
    rng = np.random.default_rng(args.seed)
    image = desc["image"]
    images = rng.integers(0, 256, (args.images, image["channels"],
                                   image["height"], image["width"]),
                          dtype=np.uint8)
    os.makedirs(args.work, exist_ok=True)
    weights = os.path.join(args.work, "weights.safetensors")
    net = vmodel.VMoE(desc).eval()
    if args.weights:
        net.load_tensors(vmodel.load_safetensors(args.weights))
        weights = args.weights
        seed = None
    else:
        for seed in range(args.seed, args.seed + 50):
            randomize(net, seed)
            margin = min(routing_margin(net, images, batch, C, args.padding,
                                        args.training_seed)
                         for C in capacities)
            if margin >= args.min_margin:
                break
        else:
            raise CheckError(f"no draw with routing margins >= "
                             f"{args.min_margin} in 50 seeds")
        vmodel.save_safetensors(weights, net.export_tensors())
    image_list = write_images(os.path.join(args.work, "images"), images)
    exe = os.path.join(args.work, "model")
    command = [args.vmoe_compile, args.model, "-o", exe,
               f"--groups-per-batch={args.groups_per_batch}"]
    training = args.training_seed is not None
    if training:
        command += ["--training", f"--seed={args.training_seed}"]
    exes = [exe]
    if args.compare_all_token_rows:
        exes.append(exe + "-all-rows")
    for out in exes:
        extra = ["--all-token-rows"] if out != exe else []
        done = subprocess.run(command[:3] + [out] + command[4:] + extra,
                              capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            raise CheckError(f"vmoe-compile exited with {done.returncode}: "
                             f"{done.stderr.strip()}")
    print(f"check_model: {name}: {args.images} images in batches of "
          f"{batch}, padding {args.padding}"
          + (f", weights seed {seed}" if seed is not None else ""))
    failures = 0
    for C in capacities:
        got, got_stats, *got_losses = run_executable(
            exe, weights, image_list, C, args.padding, losses=training)
        ref, ref_stats, *ref_losses = vmodel.evaluate(
            net, images, batch=batch, capacity_ratio=C, padding=args.padding,
            training_seed=args.training_seed)
        if got.shape != ref.shape:
            raise CheckError(f"compiled logits have shape {got.shape}, "
                             f"expected {ref.shape}")
        diff = float(np.abs(got - ref).max())
        expected = {int(b): row.tolist()
                    for b, row in zip(net.moe_block_ids, ref_stats)}
        same = got_stats == expected
        ok = diff <= args.atol and same
        if training:
            ok = compare_losses(net, got_losses[0], ref_losses[0],
                                args.atol) and ok
        label = "fixed" if C is None else f"C={C:g}"
        if args.compare_all_token_rows:
            all_rows, all_stats, *_ = run_executable(
                exes[1], weights, image_list, C, args.padding,
                losses=training)
            identical = (np.array_equal(got, all_rows)
                         and got_stats == all_stats)
            ok = ok and identical
            print(f"  {label}: --all-token-rows "
                  f"{'identical' if identical else 'DIFFERENT'}")
        failures += not ok
        counted = [sum(row) for _, row in sorted(got_stats.items())]
        print(f"  {label}: max|dlogit| {diff:.2e}, stats "
              f"{'same' if same else 'DIFF'} {sorted(got_stats.items())}, "
              f"choices counted {counted}"
              f"{'' if ok else '  FAIL'}", flush=True)
        if not same:
            print(f"  torch stats {sorted(expected.items())}")
    runs = len(capacities)
    print(f"check_model: {name}: {runs} runs, {runs - failures} agree, "
          f"{failures} differ (atol {args.atol})")
    return 1 if failures else 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True, help="description JSON")
    parser.add_argument("--vmoe-compile", required=True)
    parser.add_argument("--work", required=True, help="output folder")
    parser.add_argument("--weights", help="safetensors weights (default: "
                        "random, drawn here)")
    parser.add_argument("--images", type=int, default=13)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--capacities", type=capacity_list, default=[1.05])
    parser.add_argument("--padding", choices=vmodel.PADDINGS,
                        default="masked")
    parser.add_argument("--groups-per-batch", type=int, default=1)
    parser.add_argument("--atol", type=float, default=1e-4)
    parser.add_argument("--min-margin", type=float, default=1e-5)
    parser.add_argument("--compare-all-token-rows", action="store_true",
                        help="also compile with --all-token-rows and "
                        "require identical outputs")
    parser.add_argument("--training-seed", type=int, default=None,
                        help="compile a training graph (vmoe-compile "
                        "--training --seed N) and compare the losses too")
    args = parser.parse_args(argv)
    try:
        return check(args)
    except (CheckError, RunError, vmodel.DescriptionError, ValueError,
            OSError,
            subprocess.TimeoutExpired) as err:
        print(f"check_model: error: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
