"""Compares a model compiled with --precision=bf16 against the same model
compiled in f32 (SPEC §9: the accuracy loss is measured and reported).

    cd python && /usr/bin/python3 -m vmoe_tools.check_precision \\
        --f32 EXE_F32 --bf16 EXE_BF16 --weights W.safetensors \\
        --images DIR [--min-agreement 0.99] [--max-accuracy-drop 0.01] \\
        [--logit-bound-ulps 8] [--logit-quantile 1.0]

Both executables run on the images of DIR/labels.txt (--print-logits).
Printed: the largest |logit difference|, that bound, top-1 agreement and
the accuracy of each. The bound on the logit error is derived from bf16's
unit roundoff u = 2^-9: every product of an expert GEMM carries a
relative error of at most 2u + u^2 (weight and row each rounded once), so
to first order an expert layer's output moves by at most ~2u times the
magnitudes it sums, and the logits, which stay within a few times those
magnitudes in a trained ViT, by `--logit-bound-ulps` x u x max|logit| (8
ulps of bf16 on the largest logit by default). That bound holds while the
routing stays the same; when bf16 layers feed a router (a dense MLP before
a MoE layer, the whole model in bf16), a token whose expert or drop
changes moves its image's logits by far more. `--logit-quantile Q` then
bounds the Q-quantile of the images' largest |logit difference| instead
of the largest (1.0, the default: every image). Exit status 0 when the
logit error, top-1 agreement and accuracy drop are within their bounds.
"""

import argparse
import os
import sys

import numpy as np

from vmoe_tools.executable import RunError, run_executable

BF16_UNIT_ROUNDOFF = 2.0 ** -9


def labels_of(images_dir):
    """The labels of DIR/labels.txt (`name label` per line)."""
    with open(os.path.join(images_dir, "labels.txt")) as f:
        return np.array([int(line.split()[1]) for line in f if line.strip()])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--f32", required=True, help="f32 executable")
    parser.add_argument("--bf16", required=True, help="bf16 executable")
    parser.add_argument("--weights", required=True)
    parser.add_argument("--images", required=True,
                        help="folder of PNGs with labels.txt")
    parser.add_argument("--min-agreement", type=float, default=0.99)
    parser.add_argument("--max-accuracy-drop", type=float, default=0.01)
    parser.add_argument("--logit-bound-ulps", type=float, default=8.0)
    parser.add_argument("--logit-quantile", type=float, default=1.0,
                        help="bound this quantile of the per-image largest "
                             "|logit difference| (1.0: the largest)")
    args = parser.parse_args(argv)
    image_list = os.path.join(args.images, "labels.txt")
    try:
        reference, _ = run_executable(args.f32, args.weights, image_list)
        got, _ = run_executable(args.bf16, args.weights, image_list)
    except (RunError, OSError) as err:
        print(f"check_precision: error: {err}", file=sys.stderr)
        return 1
    labels = labels_of(args.images)
    if got.shape != reference.shape or len(labels) != len(got):
        print(f"check_precision: error: logits {got.shape} vs "
              f"{reference.shape}, {len(labels)} labels", file=sys.stderr)
        return 1
    per_image = np.abs(got - reference).max(axis=1)
    error = float(per_image.max())
    bounded = float(np.quantile(per_image, args.logit_quantile))
    bound = (args.logit_bound_ulps * BF16_UNIT_ROUNDOFF *
             float(np.abs(reference).max()))
    agreement = float((got.argmax(1) == reference.argmax(1)).mean())
    acc_f32 = float((reference.argmax(1) == labels).mean())
    acc_bf16 = float((got.argmax(1) == labels).mean())
    checks = {"logit error": bounded <= bound,
              "top-1 agreement": agreement >= args.min_agreement,
              "accuracy": acc_f32 - acc_bf16 <= args.max_accuracy_drop}
    quantile = ("" if args.logit_quantile >= 1.0 else
                f", {args.logit_quantile:g}-quantile {bounded:.3e}")
    print(f"check_precision: {len(labels)} images: max|dlogit| {error:.3e}"
          f"{quantile} (bound {bound:.3e}), top-1 agreement "
          f"{agreement:.4f}, accuracy f32 {acc_f32:.4f} bf16 {acc_bf16:.4f}")
    failed = [name for name, ok in checks.items() if not ok]
    print("check_precision: " +
          ("ok" if not failed else "FAIL: " + ", ".join(failed)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
