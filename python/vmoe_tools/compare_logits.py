"""Compares two `--print-logits` outputs of model executables.

    python3 -m vmoe_tools.compare_logits EXPECTED GOT [--atol A]
        [--min-agreement F]

Prints one line (images, largest |difference|, top-1 agreement) and exits
0 when every logit is within --atol of EXPECTED's (default 1e-4) and the
top-1 classes agree on at least --min-agreement of the images (default
1.0), else 1. Both files must list the same images in the same order.
numpy only (it runs on the GPU machines too).
"""

import argparse
import sys

import numpy as np


def read_logits(path):
    """(image names, logits [N, classes]) of a --print-logits file."""
    names, rows = [], []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            if line.startswith("accuracy: "):
                continue  # the executable's summary of labelled images
            if ": logits " not in line:
                raise SystemExit(f"compare_logits: {path}:{number}: not a "
                                 "'NAME: logits ...' line")
            name, values = line.rstrip("\n").split(": logits ", 1)
            names.append(name)
            rows.append([float(v) for v in values.split()])
    if not rows:
        raise SystemExit(f"compare_logits: {path}: no logits")
    return names, np.array(rows, dtype=np.float64)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python3 -m vmoe_tools.compare_logits",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("expected")
    parser.add_argument("got")
    parser.add_argument("--atol", type=float, default=1e-4)
    parser.add_argument("--min-agreement", type=float, default=1.0)
    args = parser.parse_args(argv)
    names, expected = read_logits(args.expected)
    got_names, got = read_logits(args.got)
    if names != got_names or expected.shape != got.shape:
        print(f"compare_logits: {len(names)} vs {len(got_names)} images, "
              "or different images or classes")
        return 1
    diff = float(np.abs(expected - got).max())
    agreement = float((expected.argmax(1) == got.argmax(1)).mean())
    ok = diff <= args.atol and agreement >= args.min_agreement
    print(f"{len(names)} images, max |diff| {diff:.2e} (tolerance "
          f"{args.atol:g}), top-1 agreement {agreement:.4f}: "
          f"{'ok' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
