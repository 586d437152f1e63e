"""timm VisionTransformer state dicts (.safetensors or .pth) -> a dense ViT.

Keys (timm's names, PyTorch layouts: Linear weights [out, in]):

  patch_embed.proj.weight [D, C, ph, pw], .bias    -> embedding (flattened
                                                      (c, i, j), transposed)
  cls_token [1, 1, D]                               -> cls_token
  pos_embed [1, T, D] (or [1, P, D]: no_embed_class) -> pos_embedding (a zero
                                                      row for the class token)
  blocks.N.norm1 / norm2 .weight, .bias             -> blocks.N.ln1 / ln2
  blocks.N.attn.qkv.weight [3D, D], .bias [3D]      -> attn.qkv (transposed;
                                                      q, k, v and heads in
                                                      the same order)
  blocks.N.attn.proj                                -> attn.out
  blocks.N.ls1.gamma / ls2.gamma (LayerScale)       -> folded into attn.out /
                                                      mlp.fc2
  blocks.N.mlp.fc1 / fc2                            -> mlp.fc1 / fc2
  norm (global_pool token)  | fc_norm (avg, ...)    -> final_ln on the tokens
                                                      | on the pooled vector
  attn_pool.{latent, q, kv, proj, norm, mlp.fc1, mlp.fc2} -> map.* (head map)
  pre_logits.fc (older timm)                        -> pre_logits (+ tanh)
  head.weight [classes, D], .bias                   -> head (transposed)

The number of heads is not in the weights (--heads); timm's defaults are
LayerNorm epsilon 1e-6 and exact (erf) GELU, as options. Register tokens,
qk-norm, norm_pre, per-layer q/v biases and pooling a class token model
by mean or attention (timm then leaves the class token out) are refused
with a one-line error.

The image preprocessing is timm's evaluation transform from the model's
pretrained_cfg (--pretrained-cfg: the Hugging Face hub's config.json of a
timm model, or the pretrained_cfg as JSON): input_size, crop_pct,
crop_mode, mean and std; without it timm's defaults (crop_pct 0.875,
center crop) and mean = std = 0.5 (evaluation.timm_eval).
"""

import os

import numpy as np

from . import _safetensors, _torch
from .common import ImporterError, Params, channel_values, description, \
    read_json, show_json, square_grid
from .evaluation import pipeline_fields, timm_eval
from .preprocess import parse as parse_preprocess

__all__ = ["import_timm", "load_state_dict"]


def load_state_dict(path):
    """{key: float32 array} of a .safetensors file or a torch .pth/.pt/.bin
    (read without torch and without running code: _torch.py). A
    `state_dict`, `model` or `module` entry is unwrapped: timm's training
    checkpoints (state_dict, args, optimizer, epoch, ...) give their model
    weights."""
    if path.endswith(".safetensors"):
        return _safetensors.read(path)
    state = _torch.load(path)
    for key in ("state_dict", "model", "module"):
        if isinstance(state, dict) and isinstance(state.get(key), dict):
            state = state[key]
    if not isinstance(state, dict):
        raise ImporterError(f"{path}: not a state dict (a "
                            f"{type(state).__name__})")
    out = {}
    for key, value in state.items():
        if not isinstance(key, str):
            raise ImporterError(f"{path}: key {_torch.brief(key)} is not a "
                                "string")
        if not isinstance(value, _torch.Tensor):
            raise ImporterError(f"{path}: {key!r} is not a tensor (a "
                                f"{type(value).__name__})")
        out[key] = value.floats(f"{path}: {key!r}")
    return out


def load_pretrained_cfg(source):
    """(fields, label) of timm's pretrained_cfg: a dict, or a JSON file
    holding a `pretrained_cfg` object (the hub's config.json) or the
    pretrained_cfg itself; the fields the evaluation transform uses, each
    checked (None when absent or null), the others ignored."""
    fields = dict.fromkeys(("input_size", "crop_pct", "crop_mode", "mean",
                            "std"))
    if source is None:
        return fields, "pretrained_cfg"
    label = f"{source}: pretrained_cfg" if isinstance(source, str) else \
        "pretrained_cfg"
    value = read_json(source, "timm config") if isinstance(source, str) \
        else source
    if isinstance(value, dict) and isinstance(value.get("pretrained_cfg"),
                                              dict):
        value = value["pretrained_cfg"]
    if not isinstance(value, dict):
        raise ImporterError(f"{label}: must be a JSON object")
    for key in fields:
        fields[key] = value.get(key)
    size = fields["input_size"]
    if size is not None and not (
            isinstance(size, list) and len(size) == 3 and all(
                isinstance(v, int) and not isinstance(v, bool) and v >= 1
                for v in size)):
        raise ImporterError(f"{label}.input_size: expected [C, H, W], got "
                            f"{show_json(size)}")
    pct = fields["crop_pct"]
    if pct is not None and (isinstance(pct, bool) or not isinstance(
            pct, (int, float)) or not 0 < pct <= 1):
        raise ImporterError(f"{label}.crop_pct: expected a number in (0, "
                            f"1], got {show_json(pct)}")
    for key in ("mean", "std"):
        if fields[key] is not None and not isinstance(fields[key], list):
            raise ImporterError(f"{label}.{key}: expected a list of "
                                f"numbers, got {show_json(fields[key])}")
    return fields, label


def _pipeline(cfg, label, preprocess, image, channels, mean, std):
    """The description's `preprocess` and `input` (evaluation.py) from
    load_pretrained_cfg's (cfg, label)."""
    if cfg["input_size"] is not None and \
            cfg["input_size"] != [channels, *image]:
        raise ImporterError(f"{label}.input_size: {cfg['input_size']}, the "
                            f"weights are for {channels}x{image[0]}x"
                            f"{image[1]} images")
    fallback = tuple(
        channel_values(cfg[key], channels, f"{label}.{key}")
        if cfg[key] is not None else (0.5,) for key in ("mean", "std"))
    if preprocess is not None:
        pipeline, what = preprocess, "--preprocess"
    else:
        pipeline = timm_eval(*image, cfg["crop_pct"], cfg["crop_mode"],
                             label)
        what = label if any(v is not None for v in cfg.values()) else \
            "preprocess"
    return pipeline_fields(pipeline, what, channels=channels, image=image,
                           mean=mean, std=std,
                           explicit=preprocess is not None,
                           fallback=fallback)


def _linear(params, prefix, d_in=None, d_out=None, bias=True):
    """A torch Linear [out, in] as a kernel [in, out] and bias [out]."""
    weight = params.take(prefix + ".weight", (d_out, d_in))
    if bias or prefix + ".bias" in params:
        b = params.take(prefix + ".bias", (weight.shape[0],))
    else:
        b = np.zeros(weight.shape[0], np.float32)
    return weight.T.copy(), b


def _norm(params, prefix, width, out, name):
    out[name + ".scale"] = params.take(prefix + ".weight", (width,))
    out[name + ".bias"] = params.take(prefix + ".bias", (width,))


def _refuse(params, prefix, what):
    if params.has_prefix(prefix):
        raise ImporterError(f"{params.source}: {what} ({prefix}*) are not "
                            "supported")


def import_timm(path, *, heads, global_pool=None, image_size=None,
                mean=None, std=None, name=None, layer_norm_epsilon=1e-6,
                mlp_activation="gelu_erf", preprocess=None,
                pretrained_cfg=None):
    """(description, {vmoe name: float32 array}) of a timm ViT state dict.

    global_pool: "token", "avg" or "map" (default: map with attn_pool,
    token with a class token, else avg); pretrained_cfg: timm's (a dict or
    a JSON file), for the evaluation transform; preprocess: the
    description's `preprocess` instead; mean/std: the normalization
    (default: the pretrained_cfg's, else 0.5).
    """
    if preprocess is not None:
        parse_preprocess(preprocess, "--preprocess")
    cfg, cfg_label = load_pretrained_cfg(pretrained_cfg)
    params = Params(load_state_dict(path), path)
    for prefix, what in (("reg_token", "register tokens"),
                         ("norm_pre.", "pre-norm (norm_pre)"),
                         ("attn_pool.pos_embed", "attention-pool position "
                          "embeddings")):
        _refuse(params, prefix, what)
    for key in params.tensors:
        if any(part in key for part in (".q_norm.", ".k_norm.", ".q_bias",
                                        ".v_bias")):
            raise ImporterError(f"{path}: {key!r}: qk-norm and separate q/v "
                                "biases are not supported")
    if not isinstance(heads, int) or heads < 1:
        raise ImporterError("--heads: the number of attention heads is not "
                            "in a timm state dict; give it")
    out = {}
    proj = params.take("patch_embed.proj.weight", (None, None, None, None))
    width, channels, ph, pw = proj.shape
    if width % heads:
        raise ImporterError(f"--heads {heads}: does not divide the width "
                            f"{width}")
    out["embedding.kernel"] = proj.reshape(width, -1).T.copy()
    out["embedding.bias"] = params.take("patch_embed.proj.bias", (width,))
    has_cls = "cls_token" in params
    if has_cls:
        out["cls_token"] = params.take("cls_token",
                                       (1, 1, width)).reshape(1, width)
    pos = params.take("pos_embed", (1, None, width))[0]

    if image_size is not None:
        height, image_width = image_size
        if height % ph or image_width % pw:
            raise ImporterError(f"--image-size {height}x{image_width}: not "
                                f"divisible into {ph}x{pw} patches")
        patches = (height // ph) * (image_width // pw)
    elif has_cls and square_grid_or_none(pos.shape[0]) is not None \
            and square_grid_or_none(pos.shape[0] - 1) is None:
        patches = pos.shape[0]  # no_embed_class
    else:
        patches = pos.shape[0] - (1 if has_cls else 0)
    if pos.shape[0] == patches and has_cls:
        # no_embed_class: the position embedding skips the class token.
        pos = np.concatenate([np.zeros((1, width), np.float32), pos])
    if pos.shape[0] != patches + (1 if has_cls else 0):
        raise ImporterError(f"pos_embed: {pos.shape[0]} positions for "
                            f"{patches} patches")
    out["pos_embedding"] = pos
    if image_size is None:
        side = square_grid(patches, path)
        image_size = (side * ph, side * pw)

    depth = 0
    while params.has_prefix(f"blocks.{depth}."):
        depth += 1
    if depth == 0:
        raise ImporterError(f"{path}: no blocks.0")
    mlp_dim = None
    for i in range(depth):
        src, dst = f"blocks.{i}.", f"blocks.{i}."
        _norm(params, src + "norm1", width, out, dst + "ln1")
        qkv, qkv_bias = _linear(params, src + "attn.qkv", width, 3 * width,
                                bias=False)
        out[dst + "attn.qkv.kernel"], out[dst + "attn.qkv.bias"] = qkv, \
            qkv_bias
        o, ob = _linear(params, src + "attn.proj", width, width)
        if src + "ls1.gamma" in params:
            gamma = params.take(src + "ls1.gamma", (width,))
            o, ob = o * gamma, ob * gamma
        out[dst + "attn.out.kernel"], out[dst + "attn.out.bias"] = o, ob
        _norm(params, src + "norm2", width, out, dst + "ln2")
        fc1, b1 = _linear(params, src + "mlp.fc1", width)
        if mlp_dim not in (None, fc1.shape[1]):
            raise ImporterError(f"{src}mlp.fc1: width {fc1.shape[1]}, unlike "
                                f"the earlier blocks ({mlp_dim})")
        mlp_dim = fc1.shape[1]
        fc2, b2 = _linear(params, src + "mlp.fc2", mlp_dim, width)
        if src + "ls2.gamma" in params:
            gamma = params.take(src + "ls2.gamma", (width,))
            fc2, b2 = fc2 * gamma, b2 * gamma
        out.update({dst + "mlp.fc1.kernel": fc1, dst + "mlp.fc1.bias": b1,
                    dst + "mlp.fc2.kernel": fc2, dst + "mlp.fc2.bias": b2})

    has_pool = params.has_prefix("attn_pool.")
    pool = global_pool or ("map" if has_pool else
                           "token" if has_cls else "avg")
    if pool not in ("token", "avg", "map"):
        raise ImporterError(f"--global-pool {pool!r}: expected token, avg or "
                            "map")
    if pool == "token" and not has_cls:
        raise ImporterError("--global-pool token: the model has no "
                            "cls_token")
    if pool != "token" and has_cls:
        raise ImporterError(f"--global-pool {pool}: timm leaves the class "
                            "token out of the pooling, which vmoe cannot "
                            "express")
    if (pool == "map") != has_pool:
        raise ImporterError(f"--global-pool {pool}: the weights "
                            f"{'have' if has_pool else 'lack'} attn_pool.*")
    has_norm, has_fc_norm = "norm.weight" in params, "fc_norm.weight" in params
    if has_norm == has_fc_norm:
        raise ImporterError(f"{path}: expected exactly one of norm.* and "
                            "fc_norm.*")
    _norm(params, "norm" if has_norm else "fc_norm", width, out, "final_ln")
    if pool == "map":
        latent = params.take("attn_pool.latent", (1, None, width))
        if latent.shape[1] != 1:
            raise ImporterError(f"attn_pool.latent: {latent.shape[1]} latent "
                                "queries; only 1 is supported")
        out["map.probe"] = latent.reshape(1, width)
        q, qb = _linear(params, "attn_pool.q", width, width)
        kv, kvb = _linear(params, "attn_pool.kv", width, 2 * width)
        o, ob = _linear(params, "attn_pool.proj", width, width)
        out.update({"map.attn.q.kernel": q, "map.attn.q.bias": qb,
                    "map.attn.kv.kernel": kv, "map.attn.kv.bias": kvb,
                    "map.attn.out.kernel": o, "map.attn.out.bias": ob})
        _norm(params, "attn_pool.norm", width, out, "map.ln")
        fc1, b1 = _linear(params, "attn_pool.mlp.fc1", width, mlp_dim)
        fc2, b2 = _linear(params, "attn_pool.mlp.fc2", mlp_dim, width)
        out.update({"map.mlp.fc1.kernel": fc1, "map.mlp.fc1.bias": b1,
                    "map.mlp.fc2.kernel": fc2, "map.mlp.fc2.bias": b2})
    representation = None
    if params.has_prefix("pre_logits.fc."):
        kernel, bias = _linear(params, "pre_logits.fc", width)
        representation = kernel.shape[1]
        out["pre_logits.kernel"], out["pre_logits.bias"] = kernel, bias
    kernel, bias = _linear(params, "head", representation or width)
    out["head.kernel"], out["head.bias"] = kernel, bias
    params.finish()

    desc = description(
        name=name or os.path.splitext(os.path.basename(path))[0],
        image=image_size, channels=channels,
        pipeline=_pipeline(cfg, cfg_label, preprocess, image_size,
                           channels, mean, std),
        patch=(ph, pw),
        width=width, depth=depth, heads=heads, mlp_dim=mlp_dim,
        classes=kernel.shape[1], head={"avg": "gap"}.get(pool, pool),
        final_norm="tokens" if has_norm else "pooled",
        representation_size=representation,
        layer_norm_epsilon=layer_norm_epsilon,
        mlp_activation=mlp_activation)
    return desc, out


def square_grid_or_none(patches):
    """The side of a square grid of `patches`, or None."""
    try:
        return square_grid(patches, "")
    except ImporterError:
        return None
