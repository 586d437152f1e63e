"""Checkpoint importers: Flax (V-MoE, Google ViT, big_vision) and timm ViTs
to a vmoe model description + safetensors weights (numpy; torch only to
read .pth files, msgpack only for vmoe's partitioned and flax's msgpack
checkpoints).

    from vmoe import importers
    desc, tensors = importers.import_flax("vmoe.npz", config="config.json")
    desc, tensors = importers.import_flax(   # a released V-MoE checkpoint
        "ckpt/vmoe_s32_last2_ilsvrc2012_randaug_light1_ft_ilsvrc2012",
        config="vmoe_s32_last2_ilsvrc2012_randaug_light1_ft_ilsvrc2012")
    desc, tensors = importers.import_timm("vit.safetensors", heads=12)
    desc, tensors = importers.upcycle(desc, tensors,
                                      "experts=8,k=2,placement=every-2")
    importers.write_model("out/model", desc, tensors)  # .json, .safetensors

or from the command line: `python3 -m vmoe.importers --help`. The name
mappings are in docs/ModelFormat.md §6; errors are `ImporterError` (a
ValueError with a one-line message).
"""

from .common import ImporterError, write_model
from .flax import import_flax
from .timm import import_timm
from .upcycle import upcycle

__all__ = ["ImporterError", "import_flax", "import_timm", "upcycle",
           "write_model"]
