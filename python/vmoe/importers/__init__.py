"""Checkpoint importers: Flax (V-MoE, Google ViT, big_vision) and timm ViTs
to a vmoe model description + safetensors weights (numpy; torch only to
read .pth files, msgpack only for vmoe's partitioned and flax's msgpack
checkpoints).

    from vmoe import importers
    desc, tensors = importers.import_flax("vmoe.npz", config="config.json")
    desc, tensors = importers.import_flax(   # a released V-MoE checkpoint
        "ckpt/vmoe_s32_last2_ilsvrc2012_randaug_light1_ft_ilsvrc2012",
        config="vmoe_s32_last2_ilsvrc2012_randaug_light1_ft_ilsvrc2012")
    desc, tensors = importers.import_timm("vit.safetensors", heads=12,
                                          pretrained_cfg="config.json")
    desc, tensors = importers.import_flax(   # another evaluation pipeline
        "vit.npz", preprocess="decode|resize(224)|value_range(-1, 1)")
    desc, tensors = importers.upcycle(desc, tensors,
                                      "experts=8,k=2,placement=every-2")
    importers.write_model("out/model", desc, tensors)  # .json, .safetensors

or from the command line: `python3 -m vmoe.importers --help`. The name
mappings are in docs/ModelFormat.md §6. The description's `preprocess` is
the model's evaluation pipeline (evaluation.py) unless `preprocess=`
gives one. Every failure of these four
functions is an `ImporterError` (a vmoe.VMoEError and a ValueError with a
one-line message naming the file, option or field), and what they return
or write is a description vmoe-compile accepts with weights that match it
(`checks.check_description`). Checkpoints never run code: .npz members are
read without pickles, .pth files with an allow-list unpickler (_torch.py).
"""

from . import flax as _flax
from . import timm as _timm
from . import upcycle as _upcycle
from .common import ImporterError, guarded
from .common import write_model as _write_model

import_flax = guarded(_flax.import_flax, returns_model=True)
import_timm = guarded(_timm.import_timm, returns_model=True)
upcycle = guarded(_upcycle.upcycle, returns_model=True)
write_model = guarded(_write_model)

__all__ = ["ImporterError", "import_flax", "import_timm", "upcycle",
           "write_model"]
