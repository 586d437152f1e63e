"""Checks a compiled V-MoE model against the PyTorch reference, over C.

    cd python && /usr/bin/python3 -m vmoe_tools.check_digits \\
        --model ../examples/digits/digits.json \\
        --weights ../examples/digits/digits.safetensors \\
        --images ../examples/digits/test \\
        --vanilla VANILLA_EXE --bpr BPR_EXE \\
        [--capacities 0.25,0.5,1.05,2.0] [--atol 1e-4] \\
        [--plot accuracy.png] [--markdown]

VANILLA_EXE and BPR_EXE are the model compiled by vmoe-compile with
--routing=vanilla and --routing=bpr. For every routing and capacity ratio C,
runs the executable on the images of labels.txt (--capacity-ratio C
--print-logits --stats) and vmoe_ref.model.evaluate on the same images, then
checks: logits within --atol, the same kept choices per expert and dropped
choices per MoE layer (routing decided identically), and prints both
accuracies. Exit status 0 when every run agrees, 1 otherwise; errors print
one line. The accuracy table and plot of docs/Accuracy.md come from here, so
they are measured with the compiled executable.
"""

import argparse
import os
import subprocess
import sys

import numpy as np

from vmoe_ref import model as vmodel
from vmoe_tools import accuracy_vs_capacity
from vmoe_tools.digits_reference import load_images
from vmoe_tools.executable import RunError, capacity_list, run_executable

class CheckError(Exception):
    pass


def check(args):
    net = vmodel.load_model(args.model, args.weights)
    _, images, labels = load_images(args.images, net.desc)
    if labels is None:
        raise CheckError(f"{args.images}: no labels.txt")
    image_list = os.path.join(args.images, "labels.txt")
    batch = net.desc["moe"]["group_size"]
    exes = {"vanilla": args.vanilla, "bpr": args.bpr}
    table = {routing: {} for routing in exes if exes[routing]}
    failures = 0
    print(f"{'routing':<8} {'C':>5} {'compiled':>9} {'torch':>9} "
          f"{'max|dlogit|':>12} {'stats':>6}")
    for routing in table:
        for C in args.capacities:
            got, got_stats = run_executable(exes[routing], args.weights,
                                            image_list, C)
            ref, ref_stats = vmodel.evaluate(net, images, batch=batch,
                                             routing=routing,
                                             capacity_ratio=C)
            if got.shape != ref.shape:
                raise CheckError(f"{routing} C={C}: compiled logits have "
                                 f"shape {got.shape}, expected {ref.shape}")
            diff = float(np.abs(got - ref).max())
            expected_stats = {int(b): row.tolist()
                              for b, row in zip(net.moe_block_ids, ref_stats)}
            same_stats = got_stats == expected_stats
            acc_got = float((got.argmax(1) == labels).mean())
            acc_ref = float((ref.argmax(1) == labels).mean())
            ok = diff <= args.atol and same_stats
            failures += not ok
            table[routing][C] = acc_got
            print(f"{routing:<8} {C:>5g} {acc_got:>9.4f} {acc_ref:>9.4f} "
                  f"{diff:>12.2e} {'same' if same_stats else 'DIFF':>6}"
                  f"{'' if ok else '  FAIL'}", flush=True)
            if not same_stats:
                print(f"  compiled stats {got_stats}\n"
                      f"  torch stats    {expected_stats}")
    if args.markdown:
        print("\n| C | " + " | ".join(
            "BPR" if r == "bpr" else r for r in table) + " |")
        print("|---|" + "---|" * len(table))
        for C in args.capacities:
            print(f"| {C:g} | " + " | ".join(
                f"{100 * table[r][C]:.2f}%" for r in table) + " |")
    if args.plot:
        accuracy_vs_capacity.plot(
            table, args.plot,
            title=f"{net.desc['name']}: test accuracy vs C (compiled)")
        print(f"wrote {args.plot}")
    runs = sum(len(row) for row in table.values())
    print(f"check_digits: {runs} runs, {runs - failures} agree, "
          f"{failures} differ (atol {args.atol})")
    return 1 if failures else 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True, help="description JSON")
    parser.add_argument("--weights", required=True, help="safetensors file")
    parser.add_argument("--images", required=True,
                        help="folder of PNGs with labels.txt")
    parser.add_argument("--vanilla", help="executable built with "
                        "--routing=vanilla")
    parser.add_argument("--bpr", help="executable built with --routing=bpr")
    parser.add_argument("--capacities", type=capacity_list,
                        default=[0.25, 0.5, 1.05, 2.0])
    parser.add_argument("--atol", type=float, default=1e-4)
    parser.add_argument("--plot", help="write a PNG plot of the compiled "
                        "accuracies here")
    parser.add_argument("--markdown", action="store_true",
                        help="also print the accuracies as a Markdown table")
    args = parser.parse_args(argv)
    if not (args.vanilla or args.bpr):
        parser.error("give --vanilla, --bpr or both")
    try:
        return check(args)
    except (CheckError, RunError, ValueError, OSError,
            subprocess.TimeoutExpired) as err:
        print(f"check_digits: error: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
