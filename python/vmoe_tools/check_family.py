"""Checks a compiled model of any MoE family (token choice, expert choice,
Soft MoE) against the PyTorch model, on a given image folder.

    cd python && /usr/bin/python3 -m vmoe_tools.check_family \\
        --model MODEL.json --weights W.safetensors --images DIR --exe EXE \\
        [--capacities 0.5,1.0,2.0] [--atol 1e-4] [--precision bf16]
        [--f32-attention]

    cd python && /usr/bin/python3 -m vmoe_tools.check_family make \\
        --model MODEL.json --out DIR [--seed 0] [--images 16]

The check runs EXE (vmoe-compile's executable of MODEL.json) on the images
of DIR/labels.txt at every capacity ratio C (--capacity-ratio C
--print-logits --stats) and vmoe_ref.model.evaluate on the same images,
then checks: logits within --atol, the same routing statistics per MoE
layer (token choice: kept choices per expert and dropped choices; expert
choice: the histogram of experts per token; Soft MoE: slots per expert),
and so the same accuracy. Exit status 0 when every run agrees, 1 otherwise.

`make` writes a test model for a description: random weights (every
parameter drawn at a scale that makes routing and the head non-trivial,
seeded) as DIR/weights.safetensors, and random 8-bit images with random
labels in DIR (labels.txt).
"""

import argparse
import math
import os
import subprocess
import sys

import numpy as np
import torch

from vmoe_ref import model as vmodel
from vmoe_tools.digits_reference import load_images
from vmoe_tools.executable import RunError, capacity_list, run_executable

class CheckError(Exception):
    pass


def compare(net, exe, weights, images_dir, capacities, atol,
            routing=None):
    """Runs `exe` and the PyTorch model at each C; prints one line per C.
    Returns ({C: compiled accuracy}, number of disagreeing runs)."""
    _, images, labels = load_images(images_dir, net.desc)
    if labels is None:
        raise CheckError(f"{images_dir}: no labels.txt")
    image_list = os.path.join(images_dir, "labels.txt")
    batch = net.desc["moe"]["group_size"]
    accuracies, failures = {}, 0
    for C in capacities:
        got, got_stats = run_executable(exe, weights, image_list, C)
        ref, ref_stats = vmodel.evaluate(net, images, batch=batch,
                                         routing=routing, capacity_ratio=C)
        if got.shape != ref.shape:
            raise CheckError(f"C={C}: compiled logits have shape "
                             f"{got.shape}, expected {ref.shape}")
        diff = float(np.abs(got - ref).max())
        expected = {int(b): row.tolist()
                    for b, row in zip(net.moe_block_ids, ref_stats)}
        same = got_stats == expected
        acc_got = float((got.argmax(1) == labels).mean())
        acc_ref = float((ref.argmax(1) == labels).mean())
        ok = diff <= atol and same and acc_got == acc_ref
        failures += not ok
        accuracies[C] = acc_got
        print(f"{os.path.basename(exe):<14} C={C:<5g} compiled {acc_got:.4f} "
              f"torch {acc_ref:.4f} max|dlogit| {diff:.2e} stats "
              f"{'same' if same else 'DIFF'}{'' if ok else '  FAIL'}",
              flush=True)
        if not same:
            print(f"  compiled stats {got_stats}\n  torch stats    {expected}")
    return accuracies, failures


def make(args):
    """Writes random weights and images for a description (see the module
    docstring)."""
    desc = vmodel.load_description(args.model)
    torch.manual_seed(args.seed)
    net = vmodel.VMoE(desc)
    with torch.no_grad():
        for name, param in net.named_parameters():
            if name.endswith(".scale") and param.dim() == 1:  # LayerNorm
                param.copy_(1 + 0.1 * torch.randn_like(param))
            elif name.endswith("moe.scale"):                 # Soft MoE
                param.fill_(2.0 + float(torch.rand(())))
            else:
                fan_in = (param.shape[0] if name.endswith("moe.phi")
                          else param.shape[-2] if param.dim() >= 2 else 4)
                param.copy_(torch.randn_like(param) / math.sqrt(fan_in))
    os.makedirs(args.out, exist_ok=True)
    vmodel.save_safetensors(os.path.join(args.out, "weights.safetensors"),
                            net.export_tensors())
    from vmoe_tools.train_digits import write_png
    rng = np.random.default_rng(args.seed)
    image = desc["image"]
    if image["channels"] != 1:
        raise CheckError("make writes gray images: the model must take 1 "
                         "channel")
    lines = []
    for i in range(args.images):
        pixels = rng.integers(0, 256, (image["height"], image["width"]),
                              dtype=np.uint8)
        name = f"{i:04d}.png"
        write_png(os.path.join(args.out, name), pixels)
        lines.append(f"{name} {int(rng.integers(0, desc['classes']))}\n")
    with open(os.path.join(args.out, "labels.txt"), "w") as f:
        f.writelines(lines)
    print(f"wrote {args.out}: weights.safetensors, {args.images} images")
    return 0


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "make":
        parser = argparse.ArgumentParser(prog="check_family make")
        parser.add_argument("--model", required=True)
        parser.add_argument("--out", required=True)
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--images", type=int, default=16)
        args = parser.parse_args(argv[1:])
        try:
            return make(args)
        except (CheckError, RunError, ValueError, OSError) as err:
            print(f"check_family: error: {err}", file=sys.stderr)
            return 1
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True, help="description JSON")
    parser.add_argument("--weights", required=True, help="safetensors file")
    parser.add_argument("--images", required=True,
                        help="folder of PNGs with labels.txt")
    parser.add_argument("--exe", required=True,
                        help="the model compiled by vmoe-compile")
    parser.add_argument("--routing", choices=("vanilla", "bpr"),
                        help="the --routing the executable was compiled "
                             "with, if any")
    parser.add_argument("--capacities", type=capacity_list, default=[1.0])
    parser.add_argument("--atol", type=float, default=1e-4)
    parser.add_argument("--precision", choices=("f32", "bf16"),
                        default="f32",
                        help="the --precision the executable was compiled "
                             "with: the PyTorch model computes its token "
                             "choice experts and panel-packed dense layers "
                             "the same way")
    parser.add_argument("--f32-attention", action="store_true",
                        help="with --precision bf16: the executable was "
                             "compiled with --bf16-attention=false")
    args = parser.parse_args(argv)
    try:
        net = vmodel.load_model(args.model, args.weights)
        vmodel.set_precision(net, args.precision,
                             attention=not args.f32_attention)
        _, failures = compare(net, args.exe, args.weights, args.images,
                              args.capacities, args.atol, args.routing)
    except (CheckError, RunError, ValueError, OSError,
            subprocess.TimeoutExpired) as err:
        print(f"check_family: error: {err}", file=sys.stderr)
        return 1
    runs = len(args.capacities)
    print(f"check_family: {runs} runs, {runs - failures} agree, {failures} "
          f"differ (atol {args.atol})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
