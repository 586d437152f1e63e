"""python3 -m vmoe.importers {flax,timm} CHECKPOINT -o PREFIX [options]

Writes PREFIX.json (model description) and PREFIX.safetensors (weights),
ready for `vmoe-compile PREFIX.json`. Errors print one line and exit 1.
"""

import argparse
import os
import sys

from .common import ImporterError, write_model
from .flax import import_flax
from .timm import import_timm
from .upcycle import upcycle


def _image_size(text):
    parts = text.lower().split("x")
    try:
        sizes = [int(p) for p in parts]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected N or HxW") \
            from None
    if len(sizes) == 1:
        sizes *= 2
    if len(sizes) != 2 or min(sizes) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected N or HxW")
    return tuple(sizes)


def _floats(text):
    try:
        return [float(v) for v in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected numbers "
                                         "separated by commas") from None


def _parser():
    parser = argparse.ArgumentParser(
        prog="python3 -m vmoe.importers",
        description="Convert a Flax or timm ViT / V-MoE checkpoint into a "
                    "vmoe model description and safetensors weights.")
    sub = parser.add_subparsers(dest="format", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("checkpoint")
    common.add_argument("-o", "--output", required=True, metavar="PREFIX",
                        help="writes PREFIX.json and PREFIX.safetensors")
    common.add_argument("--name", help="model name (default: the file's)")
    common.add_argument("--image-size", type=_image_size, metavar="HxW",
                        help="input size (default: a square patch grid)")
    common.add_argument("--mean", type=_floats, default=[0.5],
                        help="input normalization mean, 1 or C values "
                             "(default 0.5)")
    common.add_argument("--std", type=_floats, default=[0.5],
                        help="input normalization std (default 0.5)")
    common.add_argument("--layer-norm-epsilon", type=float, default=1e-6)
    common.add_argument("--upcycle", metavar="SPEC",
                        help="sparse upcycling: experts=E,k=K,placement="
                             "every-2|every-N|last-N|blocks-I+J[,noise=S,"
                             "seed=N,router=zeros|normal,capacity_ratio=C,"
                             "routing=vanilla|bpr,group_size=N,"
                             "normalize=true|false]")
    flax = sub.add_parser("flax", parents=[common],
                          help="Flax param tree: .npz, vmoe's partitioned "
                               "PREFIX(.index), or flax msgpack")
    flax.add_argument("--config", help="V-MoE model config: JSON of "
                                       "config.model, or a released "
                                       "checkpoint's name (needed for MoE "
                                       "checkpoints)")
    flax.add_argument("--mlp-activation", default="gelu_tanh",
                      choices=("gelu_tanh", "gelu_erf"))
    timm = sub.add_parser("timm", parents=[common],
                          help="timm VisionTransformer state dict "
                               "(.safetensors, or .pth with torch)")
    timm.add_argument("--heads", type=int, required=True,
                      help="attention heads (not in the weights)")
    timm.add_argument("--global-pool", choices=("token", "avg", "map"),
                      help="timm's global_pool (default: from the keys)")
    timm.add_argument("--mlp-activation", default="gelu_erf",
                      choices=("gelu_erf", "gelu_tanh"))
    return parser


def main(argv=None):
    args = _parser().parse_args(argv)
    common = {"image_size": args.image_size, "mean": args.mean,
              "std": args.std, "name": args.name,
              "layer_norm_epsilon": args.layer_norm_epsilon,
              "mlp_activation": args.mlp_activation}
    try:
        if args.format == "flax":
            desc, tensors = import_flax(args.checkpoint, args.config,
                                        **common)
        else:
            desc, tensors = import_timm(args.checkpoint, heads=args.heads,
                                        global_pool=args.global_pool,
                                        **common)
        if args.upcycle:
            desc, tensors = upcycle(desc, tensors, args.upcycle)
        folder = os.path.dirname(args.output)
        if folder:
            os.makedirs(folder, exist_ok=True)
        paths = write_model(args.output, desc, tensors)
    except (ImporterError, OSError) as err:
        print(f"vmoe.importers: error: {err}", file=sys.stderr)
        return 1
    moe = desc.get("moe")
    print(f"vmoe.importers: wrote {paths[0]} and {paths[1]}: "
          f"{len(tensors)} tensors, depth {desc['depth']}, width "
          f"{desc['width']}, head {desc['head']}"
          + (f", MoE in blocks {_blocks(desc)} (E={moe['num_experts']}, "
             f"{_choices(moe)})" if moe else ", dense"))
    return 0


def _choices(moe):
    """k for token choice, else the family (expert_choice, soft)."""
    return f"k={moe['k']}" if "k" in moe else moe["routing"]


def _blocks(desc):
    from .upcycle import _placement  # pylint: disable=import-outside-toplevel
    moe = desc["moe"]
    if moe["placement"] == "layers":
        return moe["layers"]
    text = {"every-2": "every-2", "every-n": f"every-{moe.get('every')}",
            "last-n": f"last-{moe.get('last_n')}"}[moe["placement"]]
    return _placement(text, desc["depth"])[1]


if __name__ == "__main__":
    sys.exit(main())
