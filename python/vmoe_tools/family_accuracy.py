"""Test accuracy of the digits examples of every MoE family, compiled.

    cd python && /usr/bin/python3 -m vmoe_tools.family_accuracy \\
        --images ../examples/digits/test \\
        --vmoe MODEL.json WEIGHTS VANILLA_EXE BPR_EXE \\
        --expert-choice MODEL.json WEIGHTS EXE \\
        --soft MODEL.json WEIGHTS EXE [--soft ...] \\
        [--capacities 0.1,0.25,...] [--ec-capacities 0.25,...]
        [--markdown] [--plot FILE.png]

Every accuracy is measured with the compiled executable and checked in the
same run against the PyTorch model on the same images
(vmoe_tools.check_family.compare: logits within --atol, identical routing
statistics per MoE layer, identical accuracy). V-MoE (both routings of one
executable pair) is measured at every C of --capacities, expert choice at
every C of --ec-capacities (its B = round(S*C/E) is 0 below C = 0.25
here); each Soft MoE model (one per slot count P) once, as its
compute does not depend on C. The table adds the expert compute: expert
MLP rows per token (V-MoE: E*B/S for its k = 2; expert choice: E*B/S;
Soft MoE: E*P/S of a Soft MoE group). Exit status 0 when every run
agrees with PyTorch.
"""

import argparse
import sys

from vmoe_ref import model as vmodel
from vmoe_ref import ops
from vmoe_tools.check_family import CheckError, capacities, compare

CAPACITIES = (0.1, 0.25, 0.5, 0.75, 1.0, 1.05, 1.5, 2.0)
EC_CAPACITIES = (0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 4.0)


def rows_per_token(desc, C):
    """Expert MLP rows per token of the (single) MoE layer at ratio C."""
    moe = desc["moe"]
    layer = vmodel.layer_settings(desc, vmodel.moe_blocks(
        desc["depth"], moe["placement"], moe.get("last_n"))[0])
    E = moe["num_experts"]
    if layer["routing"] == "soft":
        return E * layer["slots_per_expert"] / vmodel.layer_tokens_per_group(
            desc, layer)
    S = moe["group_size"] * vmodel.tokens_per_image(desc)
    k = layer["k"] if layer["routing"] in vmodel.TOKEN_CHOICE else 1
    B = ops.capacity(k, S, C, E, layer["capacity_rule"],
                     layer["multiple_of"])
    return E * min(B, S * k) / S


def measure(args):
    """{family label: [(C or P, rows per token, accuracy)]}, failures."""
    results, failures = {}, 0
    if args.vmoe:
        model, weights, vanilla, bpr = args.vmoe
        net = vmodel.load_model(model, weights)
        for label, exe, routing in (("V-MoE vanilla", vanilla, "vanilla"),
                                    ("V-MoE BPR", bpr, "bpr")):
            accuracies, bad = compare(net, exe, weights, args.images,
                                      args.capacities, args.atol, routing)
            failures += bad
            results[label] = [(C, rows_per_token(net.desc, C), acc)
                              for C, acc in accuracies.items()]
    if args.expert_choice:
        model, weights, exe = args.expert_choice
        net = vmodel.load_model(model, weights)
        accuracies, bad = compare(net, exe, weights, args.images,
                                  args.ec_capacities, args.atol)
        failures += bad
        results["expert choice"] = [(C, rows_per_token(net.desc, C), acc)
                                    for C, acc in accuracies.items()]
    for model, weights, exe in args.soft or []:
        net = vmodel.load_model(model, weights)
        accuracies, bad = compare(net, exe, weights, args.images, [1.0],
                                  args.atol)
        failures += bad
        P = vmodel.layer_settings(net.desc, net.moe_block_ids[0])[
            "slots_per_expert"]
        results.setdefault("Soft MoE", []).append(
            (P, rows_per_token(net.desc, 1.0), accuracies[1.0],
             P * net.desc["moe"]["num_experts"]))
    return results, failures


def markdown(results):
    """Two Markdown tables: accuracy vs C, and Soft MoE vs P."""
    by_c = {k: {C: (rows, acc) for C, rows, acc in v}
            for k, v in results.items() if k != "Soft MoE"}
    lines = []
    if by_c:
        labels = list(by_c)
        lines.append("| C | " + " | ".join(
            f"{label} (rows/token)" for label in labels) + " |")
        lines.append("|---|" + "---|" * len(labels))
        capacities = sorted({C for row in by_c.values() for C in row})
        for C in capacities:
            cells = [f"{100 * by_c[label][C][1]:.2f}% "
                     f"({by_c[label][C][0]:.2f})" if C in by_c[label]
                     else "—" for label in labels]
            lines.append(f"| {C:g} | " + " | ".join(cells) + " |")
    if "Soft MoE" in results:
        lines += ["", "| Soft MoE slots per expert P | slots per group "
                      "E*P (rows/token) | accuracy |", "|---|---|---|"]
        for P, rows, acc, slots in sorted(results["Soft MoE"]):
            lines.append(f"| {P} | {slots} ({rows:.2f}) | "
                         f"{100 * acc:.2f}% |")
    return "\n".join(lines)


def plot(results, path):
    """Accuracy vs C (left) and vs expert compute, Soft MoE included
    (right)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    for label, points in results.items():
        points = sorted(points)
        if label != "Soft MoE":
            left.plot([p[0] for p in points], [p[2] for p in points],
                      marker="o", label=label)
        right.plot([p[1] for p in points], [p[2] for p in points],
                   marker="o", label=label + (" (P = 1, 2, 3, 4)"
                                              if label == "Soft MoE" else ""))
    left.set_xlabel("capacity ratio C")
    left.set_ylabel("test accuracy")
    left.set_title("digits: accuracy vs C (compiled)")
    right.set_xlabel("expert MLP rows per token (expert compute)")
    right.set_title("digits: accuracy vs expert compute (compiled)")
    for ax in (left, right):
        ax.grid(True, alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--images", required=True,
                        help="folder of PNGs with labels.txt")
    parser.add_argument("--vmoe", nargs=4,
                        metavar=("MODEL", "WEIGHTS", "VANILLA", "BPR"))
    parser.add_argument("--expert-choice", nargs=3,
                        metavar=("MODEL", "WEIGHTS", "EXE"))
    parser.add_argument("--soft", nargs=3, action="append",
                        metavar=("MODEL", "WEIGHTS", "EXE"))
    parser.add_argument("--capacities", type=capacities,
                        default=list(CAPACITIES), help="C of V-MoE")
    parser.add_argument("--ec-capacities", type=capacities,
                        default=list(EC_CAPACITIES),
                        help="C of expert choice")
    parser.add_argument("--atol", type=float, default=1e-4)
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--plot", help="write the PNG plot here")
    args = parser.parse_args(argv)
    try:
        results, failures = measure(args)
    except (CheckError, ValueError, OSError) as err:
        print(f"family_accuracy: error: {err}", file=sys.stderr)
        return 1
    if args.markdown:
        print(markdown(results))
    if args.plot:
        plot(results, args.plot)
        print(f"wrote {args.plot}")
    runs = sum(len(v) for v in results.values())
    print(f"family_accuracy: {runs} results, {failures} runs differ from "
          f"PyTorch (atol {args.atol})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
