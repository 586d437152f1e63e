"""The image preprocessing an importer writes: the description's
`preprocess` (docs/ModelFormat.md §4) and `input` normalization.

The pipeline is the user's (`--preprocess`), else the imported model's
own evaluation: for Flax the image ops of the config's eval `process`
string (flax_config.split_config), else `decode|resize(S)|value_range(-1,
1)`; for timm its eval transform (`timm_eval`). Normalization:
`value_range` in the pipeline, or `input.mean`/`std` (a description may
not have both). Explicit --mean/--std replace a derived pipeline's
value_range; with an explicit --preprocess that has one they are an
error.
"""

import math

from .common import ImporterError, channel_values
from .preprocess import check, parse, without_value_range

__all__ = ["default_flax", "pipeline_fields", "timm_eval", "TIMM_CROP_PCT"]

# timm.data.constants.DEFAULT_CROP_PCT: transforms_imagenet_eval's default.
TIMM_CROP_PCT = 0.875


def _size(op, height, width):
    return f"{op}({height})" if height == width else \
        f"{op}({height}, {width})"


def default_flax(height, width):
    """V-MoE's, vit_jax's and big_vision's usual evaluation: a bilinear
    resize to the model's size, pixels to [-1, 1]."""
    return f"decode|{_size('resize', height, width)}|value_range(-1, 1)"


def timm_eval(height, width, crop_pct=None, crop_mode=None,
              what="pretrained_cfg"):
    """timm's transforms_imagenet_eval as ops (its normalization is
    `input`): scale_size = floor(side / crop_pct) (crop_pct 0 or None:
    0.875); `center` (the default): the shorter side to scale_size, then
    a central crop; `squash`: both sides to scale_size, then the crop.
    timm's interpolation (bicubic, antialiased, in PIL) is not vmoe's
    (area for resize_small, bilinear for resize): docs/ModelFormat.md §6."""
    crop_pct = crop_pct or TIMM_CROP_PCT
    scaled = (math.floor(height / crop_pct), math.floor(width / crop_pct))
    crop = _size("central_crop", height, width)
    if crop_mode == "squash":
        return f"decode|{_size('resize', *scaled)}|{crop}"
    if crop_mode not in (None, "center"):
        raise ImporterError(f"{what}: crop_mode {crop_mode!r} is not "
                            "supported (center or squash); give "
                            "--preprocess")
    if scaled[0] != scaled[1]:
        raise ImporterError(f"{what}: crop_mode 'center' of a non-square "
                            f"{height}x{width} input (timm's "
                            "ResizeKeepRatio) has no vmoe op; give "
                            "--preprocess")
    return f"decode|resize_small({scaled[0]})|{crop}"


def pipeline_fields(pipeline, what, *, channels, image, mean=None,
                    std=None, explicit=False, fallback=None):
    """{"preprocess": ..., and "input": {mean, std} where needed}.

    `pipeline` is checked against the image ((height, width), channels)
    with the compiler's rules, errors naming `what`. `mean`/`std`: the
    user's (None: not given; one alone: the other 0.5). `explicit`: the
    pipeline is the user's --preprocess. `fallback`: (mean, std) the model
    normalizes with when the pipeline has no value_range and the user gave
    none (timm's), or None (then no `input`: pixels p / 255)."""
    spec = parse(pipeline, what)
    check(spec, channels, image[0], image[1], what)
    given = mean is not None or std is not None
    if given and spec.value_range is not None:
        if explicit:
            raise ImporterError("--mean/--std: not used with value_range in "
                                "--preprocess (both normalize the pixels: "
                                "give one)")
        pipeline, spec.value_range = without_value_range(pipeline), None
    fields = {"preprocess": pipeline}
    if spec.value_range is None and (given or fallback):
        base_mean, base_std = fallback or ((0.5,), (0.5,))
        fields["input"] = {
            "mean": channel_values(base_mean if mean is None else mean,
                                   channels, "mean"),
            "std": channel_values(base_std if std is None else std,
                                  channels, "std")}
    return fields
