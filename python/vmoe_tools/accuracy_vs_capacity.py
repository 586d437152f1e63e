"""Test accuracy against the capacity ratio C, vanilla routing vs BPR.

    cd python && /usr/bin/python3 -m vmoe_tools.accuracy_vs_capacity \\
        --model ../examples/digits/digits.json \\
        --weights ../examples/digits/digits.safetensors \\
        --images ../examples/digits/test [--plot accuracy.png]

BPR exists so that C can be lowered after training (SPEC §5): with vanilla
routing the tokens that come last in a group lose their experts first, with
BPR the least confident ones do. `accuracy_table` takes any
`predict(routing, C) -> predicted labels` callable, so the compiled
executable can be measured the same way as the PyTorch model
(`torch_predictor`). `plot` draws the table with matplotlib (Agg).
"""

import argparse
import sys

import numpy as np

from vmoe_ref import model as vmodel
from vmoe_tools.digits_reference import load_images

CAPACITIES = (0.1, 0.25, 0.5, 0.75, 1.0, 1.05, 1.5, 2.0)
ROUTINGS = ("vanilla", "bpr")


def accuracy_table(predict, labels, capacities=CAPACITIES,
                   routings=ROUTINGS):
    """{routing: {C: accuracy}} from predict(routing, C) -> labels [N]."""
    labels = np.asarray(labels)
    return {routing: {C: float((np.asarray(predict(routing, C))
                                == labels).mean())
                      for C in capacities}
            for routing in routings}


def torch_predictor(net, images, score="max", groups_per_batch=1):
    """predict(routing, C) with the PyTorch model on uint8 images."""
    batch = net.desc["moe"]["group_size"] * groups_per_batch

    def predict(routing, capacity_ratio):
        logits, _ = vmodel.evaluate(net, images, batch=batch,
                                    routing=routing, score=score,
                                    capacity_ratio=capacity_ratio)
        return logits.argmax(1)
    return predict


def format_table(table):
    """The table as text: one row per C, one column per routing."""
    routings = list(table)
    capacities = list(table[routings[0]])
    lines = ["C      " + "".join(f"{r:>10}" for r in routings)]
    for C in capacities:
        lines.append(f"{C:<7g}" + "".join(f"{table[r][C]:>10.4f}"
                                          for r in routings))
    return "\n".join(lines)


def plot(table, path, title="Test accuracy vs capacity ratio"):
    """Writes a PNG plot of accuracy against C, one line per routing."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for routing, row in table.items():
        capacities = list(row)
        ax.plot(capacities, [row[C] for C in capacities], marker="o",
                label="BPR" if routing == "bpr" else routing)
    ax.set_xlabel("capacity ratio C")
    ax.set_ylabel("test accuracy")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True, help="description JSON")
    parser.add_argument("--weights", required=True, help="safetensors file")
    parser.add_argument("--images", required=True,
                        help="folder of PNGs with labels.txt")
    parser.add_argument("--score", choices=("max", "sum_topk"),
                        default="max", help="BPR priority score")
    parser.add_argument("--groups-per-batch", type=int, default=1)
    parser.add_argument("--plot", help="also write a PNG plot here")
    args = parser.parse_args(argv)
    try:
        net = vmodel.load_model(args.model, args.weights)
        _, images, labels = load_images(args.images, net.desc)
        if labels is None:
            raise ValueError(f"{args.images}: no labels.txt")
    except (ValueError, OSError) as err:
        print(f"accuracy_vs_capacity: error: {err}", file=sys.stderr)
        return 1
    predict = torch_predictor(net, images, args.score, args.groups_per_batch)
    table = accuracy_table(predict, labels)
    print(format_table(table))
    if args.plot:
        plot(table, args.plot)
        print(f"wrote {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
