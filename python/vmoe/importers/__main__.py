"""python3 -m vmoe.importers {flax,timm} CHECKPOINT -o PREFIX [options]

Writes PREFIX.json (model description) and PREFIX.safetensors (weights),
ready for `vmoe-compile PREFIX.json`. Every error is one line on stderr
(`vmoe.importers: error: ...`): exit status 2 for a bad command line, 1
for anything else, never a traceback.
"""

import argparse
import os
import sys

from . import import_flax, import_timm, upcycle, write_model
from ..errors import VMoEError
from .limits import integer, number
from .common import describe_failure

_PROG = "vmoe.importers"


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (no usage block), exit status 2."""

    def error(self, message):
        print(f"{_PROG}: error: {message.splitlines()[0]} (see --help)",
              file=sys.stderr)
        sys.exit(2)


def _option(check, **bounds):
    """An argparse type: `check` (limits.integer or number) of the text,
    its error as argparse's one-line reason."""
    def convert(text):
        try:
            return check(text, "value", **bounds)
        except VMoEError as err:
            # argparse prefixes "argument --option:"; keep the reason.
            raise argparse.ArgumentTypeError(str(err).split(": ", 1)[-1]) \
                from None
    return convert


def _image_size(text):
    parts = text.lower().split("x")
    if len(parts) not in (1, 2):
        raise argparse.ArgumentTypeError(f"{text!r}: expected N or HxW")
    sizes = [_option(integer)(part) for part in parts]
    return tuple(sizes * (3 - len(sizes)))


def _floats(text):
    return [_option(number)(value) for value in text.split(",")]


def _parser():
    parser = _Parser(
        prog="python3 -m vmoe.importers",
        description="Convert a Flax or timm ViT / V-MoE checkpoint into a "
                    "vmoe model description and safetensors weights.")
    sub = parser.add_subparsers(dest="format", required=True)
    common = _Parser(add_help=False)
    common.add_argument("checkpoint")
    common.add_argument("-o", "--output", required=True, metavar="PREFIX",
                        help="writes PREFIX.json and PREFIX.safetensors")
    common.add_argument("--name", help="model name (default: the file's)")
    common.add_argument("--image-size", type=_image_size, metavar="HxW",
                        help="input size (default: a square patch grid)")
    common.add_argument("--preprocess", metavar="SPEC",
                        help="the description's image preprocessing, e.g. "
                             "'decode|resize_small(256)|central_crop(224)|"
                             "value_range(-1, 1)' (default: the model's "
                             "evaluation pipeline; docs/ModelFormat.md §4)")
    common.add_argument("--mean", type=_floats,
                        help="input normalization mean, 1 or C values, "
                             "instead of the pipeline's value_range "
                             "(default: the model's; 0.5 beside --std)")
    common.add_argument("--std", type=_floats,
                        help="input normalization std (as --mean)")
    common.add_argument("--layer-norm-epsilon",
                        type=_option(number, above=0.0), default=1e-6,
                        help="LayerNorm epsilon, finite and > 0 (default "
                             "1e-6)")
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
                               "(.safetensors, or .pth read without torch)")
    timm.add_argument("--heads", type=_option(integer), required=True,
                      help="attention heads (not in the weights)")
    timm.add_argument("--global-pool", choices=("token", "avg", "map"),
                      help="timm's global_pool (default: from the keys)")
    timm.add_argument("--mlp-activation", default="gelu_erf",
                      choices=("gelu_erf", "gelu_tanh"))
    timm.add_argument("--pretrained-cfg", metavar="JSON",
                      help="the model's pretrained_cfg (the hub's "
                           "config.json): its evaluation transform and "
                           "mean/std (default: timm's defaults, crop_pct "
                           "0.875, mean = std = 0.5)")
    return parser


def _convert(args):
    """Imports, upcycles and writes; returns (paths, desc, tensors)."""
    common = {"image_size": args.image_size, "mean": args.mean,
              "std": args.std, "name": args.name,
              "layer_norm_epsilon": args.layer_norm_epsilon,
              "mlp_activation": args.mlp_activation,
              "preprocess": args.preprocess}
    if args.format == "flax":
        desc, tensors = import_flax(args.checkpoint, args.config, **common)
    else:
        desc, tensors = import_timm(args.checkpoint, heads=args.heads,
                                    global_pool=args.global_pool,
                                    pretrained_cfg=args.pretrained_cfg,
                                    **common)
    if args.upcycle is not None:
        desc, tensors = upcycle(desc, tensors, args.upcycle)
    folder = os.path.dirname(args.output)
    if folder:
        os.makedirs(folder, exist_ok=True)
    return write_model(args.output, desc, tensors), desc, tensors


def main(argv=None):
    """The command line; returns the exit status (0, 1, or 2 for usage)."""
    args = None
    try:
        args = _parser().parse_args(argv)
        paths, desc, tensors = _convert(args)
    except (VMoEError, OSError) as err:
        print(f"{_PROG}: error: {str(err).splitlines()[0]}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{_PROG}: error: interrupted", file=sys.stderr)
        return 130
    except Exception as err:  # pylint: disable=broad-except
        # Never a traceback: the checks should have caught it; name the file.
        what = f"{args.checkpoint}: " if args else ""
        print(f"{_PROG}: error: {what}{describe_failure(err)}",
              file=sys.stderr)
        return 1
    moe = desc.get("moe")
    print(f"{_PROG}: wrote {paths[0]} and {paths[1]}: "
          f"{len(tensors)} tensors, depth {desc['depth']}, width "
          f"{desc['width']}, head {desc['head']}"
          + (f", MoE in blocks {_blocks(desc)} (E={moe['num_experts']}, "
             f"{_choices(moe)})" if moe else ", dense")
          + f", preprocess '{desc['preprocess']}'")
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
