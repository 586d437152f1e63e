"""Model configs of the V-MoE checkpoints Google released
(gs://vmoe_checkpoints/NAME, listed in the README of
github.com/google-research/vmoe), so that `--config NAME` needs no JAX.

Each is `config.model` as vmoe/configs/vmoe_paper/ builds it for that
checkpoint (common.get_vmoe_config: a paper description such as
'ViT-S/32, E=8, K=2, Last 2', the image size and the classes, then the
file's own changes), as a JSON-able dict. Where the training config
overrides the model for evaluation (`config.evaluate.model_overrides`),
the override is applied: the capacity factor the published accuracy was
measured with. The importer checks every size against the weights.
`config(NAME)` is the checkpoint's whole config as far as the importer
reads it: `model`, and the evaluation `process` string of `dataset.test`
(`dataset.val` for the ImageNet-21k pre-training, which has no test set),
copied from the config file with its label ops (flax_config.split_config
keeps the image ops).

vmoe_s32_last2_ilsvrc2012_randaug_medium has no config file in the
repository; its README entry differs from ..._light1 only in the epochs
and the augmentation, so it takes light1's model config. E^3 checkpoints
(eee_*) are ensembles (VisionTransformerMoeEnsemble): not supported.
"""

import copy
import math

__all__ = ["CONFIGS", "EVALUATION", "config", "ENSEMBLES"]

_VARIANTS = {  # hidden_size, num_layers, mlp_dim, num_heads
    "S": (512, 8, 2048, 8), "B": (768, 12, 3072, 12),
    "L": (1024, 24, 4096, 16), "H": (1280, 32, 5120, 16)}


def _paper_model(variant, patch, experts, k, where, image_size, classes,
                 representation=True, capacity_factor=1.05):
    """config.model of the V-MoE paper's configs. `where`: ('Every', n)
    or ('Last', n)."""
    width, depth, mlp_dim, heads = _VARIANTS[variant]
    kind, n = where
    if kind == "Every":
        layers = list(range(n - 1, depth, n))
    else:
        layers = list(range(1, depth, 2))[-n:]
    tokens = (image_size // patch) ** 2 + 1
    return {
        "name": "VisionTransformerMoe", "num_classes": classes,
        "patch_size": [patch, patch], "hidden_size": width,
        "classifier": "token",
        "representation_size": width if representation else None,
        "head_bias_init": -math.log(classes),
        "encoder": {
            "num_layers": depth, "mlp_dim": mlp_dim, "num_heads": heads,
            "dropout_rate": 0.0, "attention_dropout_rate": 0.0,
            "moe": {
                "num_experts": experts, "layers": layers,
                "dropout_rate": 0.0, "split_rngs": False,
                # 8 images per device, the smallest batch.
                "group_size": 8 * tokens,
                "router": {
                    "num_selected_experts": k, "noise_std": 1.0,
                    "importance_loss_weight": 0.005,
                    "load_loss_weight": 0.005,
                    "dispatcher": {
                        "name": "einsum", "bfloat16": True,
                        "capacity_factor": capacity_factor,
                        "partition_spec": [["expert", "replica"]],
                        "batch_priority": False}}}}}


_S32_LAST2 = dict(variant="S", patch=32, experts=8, k=2, where=("Last", 2))
_B16_EVERY2 = dict(variant="B", patch=16, experts=8, k=2,
                   where=("Every", 2))

CONFIGS = {
    # vmoe_s32_last2_ilsvrc2012_randaug_light1.py: 224 px, pre_logits,
    # evaluated with capacity_factor 4.0.
    "vmoe_s32_last2_ilsvrc2012_randaug_light1": _paper_model(
        **_S32_LAST2, image_size=224, classes=1000, capacity_factor=4.0),
    "vmoe_s32_last2_ilsvrc2012_randaug_medium": _paper_model(
        **_S32_LAST2, image_size=224, classes=1000, capacity_factor=4.0),
    # ..._light1_ft_ilsvrc2012.py: 384 px, no pre_logits, C = 1.5.
    "vmoe_s32_last2_ilsvrc2012_randaug_light1_ft_ilsvrc2012": _paper_model(
        **_S32_LAST2, image_size=384, classes=1000, representation=False,
        capacity_factor=1.5),
    # pretrain_imagenet21k.py: 224 px, 21843 classes, no pre_logits.
    "vmoe_b16_imagenet21k_randaug_strong": _paper_model(
        **_B16_EVERY2, image_size=224, classes=21843, representation=False),
    # vmoe_b16_imagenet21k_randaug_strong_ft_ilsvrc2012.py: 384 px, C = 1.5.
    "vmoe_b16_imagenet21k_randaug_strong_ft_ilsvrc2012": _paper_model(
        **_B16_EVERY2, image_size=384, classes=1000, representation=False,
        capacity_factor=1.5),
}
CONFIGS["vmoe_b16_imagenet21k_randaug_strong"]["head_bias_init"] = -10.0

_LABELS_1K = 'onehot(1000, inkey="label", outkey="labels")|keep("image", ' \
    '"labels")'
_EVAL_224 = "decode|resize_small(256)|central_crop(224)|value_range(-1,1)"
_EVAL_384 = "decode|resize(384)|value_range(-1,1)"
# (dataset entry, its process) of each config file: get_data_params_eval
# of ..._light1.py, get_data_eval_config of the _ft_ files, dataset.val of
# pretrain_imagenet21k.py.
EVALUATION = {
    "vmoe_s32_last2_ilsvrc2012_randaug_light1": (
        "test", f"{_EVAL_224}|{_LABELS_1K}"),
    "vmoe_s32_last2_ilsvrc2012_randaug_medium": (
        "test", f"{_EVAL_224}|{_LABELS_1K}"),
    "vmoe_s32_last2_ilsvrc2012_randaug_light1_ft_ilsvrc2012": (
        "test", f"{_EVAL_384}|{_LABELS_1K}"),
    "vmoe_b16_imagenet21k_randaug_strong": (
        "val", f'{_EVAL_224}|onehot(21843)|keep("image", "labels")'),
    "vmoe_b16_imagenet21k_randaug_strong_ft_ilsvrc2012": (
        "test", f"{_EVAL_384}|{_LABELS_1K}"),
}

ENSEMBLES = ("eee_s32_last2_ilsvrc2012", "eee_s32_last2_ilsvrc2012_ft_cifar100")


def config(name):
    """The released checkpoint NAME's config ({model, dataset: {entry:
    {process}}}, a copy), or None."""
    if name not in CONFIGS:
        return None
    entry, process = EVALUATION[name]
    return {"model": copy.deepcopy(CONFIGS[name]),
            "dataset": {entry: {"process": process}}}
