"""Flax ViT / V-MoE parameter trees -> a vmoe model.

The checkpoint (an .npz, vmoe's partitioned PREFIX.index + data shards, or
a flax msgpack file: flax_checkpoint.py) holds the param tree, its paths
joined by '/', in one of these naming schemes, recognized by their keys:

  scheme      encoder       block i                         pos. embedding
  vmoe        Encoder/      encoderblock_i/{LayerNorm_0,    Encoder/posembed_input/
  (V-MoE)                   SelfAttention, LayerNorm_1,     pos_embedding [1, T, D]
                            Mlp | Moe}
  vit_jax     Transformer/  encoderblock_i/{LayerNorm_0,    Transformer/posembed_input/
  (Google ViT)              MultiHeadDotProductAttention_1, pos_embedding [1, T, D]
                            LayerNorm_2, MlpBlock_3}
                            (the released .npz); built with
                            today's flax, which numbers each
                            module type apart: {LayerNorm_0,
                            MultiHeadDotProductAttention_0,
                            LayerNorm_1, MlpBlock_0}
  big_vision  Transformer/  encoderblock_i/{LayerNorm_0,    pos_embedding [1, P, D]
                            MultiHeadDotProductAttention_0, (not the class token's)
                            LayerNorm_1, MlpBlock_0}
                            (or scanned: encoderblock/ with
                            a leading depth axis)

plus embedding/{kernel [ph, pw, C, D], bias}, cls [1, 1, D] (class token),
{Encoder,Transformer}/encoder_norm, MapHead | MAPHead_0 (attention
pooling: probe, attention, LayerNorm, MLP), pre_logits (dense + tanh) and
head. Attention kernels are query/key/value [D, heads, dh] and out
[heads, dh, D]; MoE blocks hold Moe/Router/dense/kernel [D, E] (token or
expert choice) or Moe/Router/{mu [D, E, P], scale []} (Soft MoE) and
Moe/Mlp/Dense_{0,1}/{kernel,bias} stacked over experts.
docs/ModelFormat.md §6 lists every mapping.

Sizes come from the shapes. What the weights do not say -- the image size
when the patch grid is not square, and for MoE checkpoints the router,
k, the capacity, the group size and BPR -- comes from the model config of
V-MoE (flax_config.py), and so does the description's `preprocess`: the
image ops of the config's evaluation pipeline (evaluation.py). Flax
defaults: LayerNorm epsilon 1e-6, GELU tanh approximation.
"""

import os

import numpy as np

from .common import ImporterError, Params, description, square_grid
from .evaluation import default_flax, pipeline_fields
from .flax_checkpoint import load_checkpoint
from .flax_config import Config, check_model, load_config, moe_settings, \
    split_config
from .preprocess import evaluation_ops
from .preprocess import parse as parse_preprocess

__all__ = ["import_flax", "load_checkpoint"]

_VMOE_MAP = ("MapHead", "MultiHeadDotProductAttention", "LayerNorm", "Mlp")
_BIG_VISION_MAP = ("MAPHead_0", "MultiHeadDotProductAttention_0",
                   "LayerNorm_0", "MlpBlock_0")
_SCHEMES = {
    "vmoe": {"encoder": "Encoder", "ln1": "LayerNorm_0",
             "attn": "SelfAttention", "ln2": "LayerNorm_1", "mlp": "Mlp",
             "pos": "Encoder/posembed_input/pos_embedding", "pos_cls": True,
             "map": _VMOE_MAP},
    "vit_jax": {"encoder": "Transformer", "ln1": "LayerNorm_0",
                "attn": "MultiHeadDotProductAttention_1", "ln2": "LayerNorm_2",
                "mlp": "MlpBlock_3",
                "pos": "Transformer/posembed_input/pos_embedding",
                "pos_cls": True, "map": None},
    "vit_jax_current": {"encoder": "Transformer", "ln1": "LayerNorm_0",
                        "attn": "MultiHeadDotProductAttention_0",
                        "ln2": "LayerNorm_1", "mlp": "MlpBlock_0",
                        "pos": "Transformer/posembed_input/pos_embedding",
                        "pos_cls": True, "map": None},
    "big_vision": {"encoder": "Transformer", "ln1": "LayerNorm_0",
                   "attn": "MultiHeadDotProductAttention_0",
                   "ln2": "LayerNorm_1", "mlp": "MlpBlock_0",
                   "pos": "pos_embedding", "pos_cls": False,
                   "map": _BIG_VISION_MAP},
}


def _unscan(tensors, encoder):
    """big_vision's scanned encoder (encoderblock/ with a leading depth
    axis) -> encoderblock_i/."""
    prefix = f"{encoder}/encoderblock/"
    stacked = {k: v for k, v in tensors.items() if k.startswith(prefix)}
    if not stacked:
        return tensors
    depths = {v.shape[0] for v in stacked.values()}
    if len(depths) != 1:
        raise ImporterError(f"{prefix}: stacked blocks disagree on the depth "
                            f"({sorted(depths)})")
    out = {k: v for k, v in tensors.items() if k not in stacked}
    for key, value in stacked.items():
        for i in range(value.shape[0]):
            out[f"{encoder}/encoderblock_{i}/{key[len(prefix):]}"] = value[i]
    return out


def _scheme(params):
    if "Encoder/encoder_norm/scale" in params:
        return "vmoe"
    if "Transformer/posembed_input/pos_embedding" in params:
        # vit_jax's module names: the released files' (one counter for all
        # module types) or today's flax's (a counter per type).
        if params.has_prefix("Transformer/encoderblock_0/"
                             "MultiHeadDotProductAttention_0/"):
            return "vit_jax_current"
        return "vit_jax"
    if "Transformer/encoder_norm/scale" in params:
        return "big_vision"
    raise ImporterError(f"{params.source}: not a Flax ViT param tree (no "
                        "Encoder/encoder_norm or Transformer/encoder_norm)")


def _dense(params, prefix, d_in, d_out):
    kernel = params.take(prefix + "/kernel", (d_in, d_out))
    return kernel, params.take(prefix + "/bias", (kernel.shape[1],))


def _attention(params, prefix, width):
    """Flax MultiHeadDotProductAttention -> q, k, v kernels [D, D] and
    biases [D], out kernel [D, D] and bias, and the number of heads."""
    query = params.take(prefix + "/query/kernel", (width, None, None))
    heads, dh = query.shape[1:]
    if heads * dh != width:
        raise ImporterError(f"{prefix}/query/kernel: {heads} heads of {dh} "
                            f"do not make the width {width}")
    parts = []
    for name in ("query", "key", "value"):
        kernel = params.take(f"{prefix}/{name}/kernel", (width, heads, dh))
        bias = params.take(f"{prefix}/{name}/bias", (heads, dh))
        parts.append((kernel.reshape(width, width), bias.reshape(width)))
    out = params.take(prefix + "/out/kernel", (heads, dh, width))
    out_bias = params.take(prefix + "/out/bias", (width,))
    return parts, (out.reshape(width, width), out_bias), heads


def _layer_norm(params, prefix, width, out, name):
    out[name + ".scale"] = params.take(prefix + "/scale", (width,))
    out[name + ".bias"] = params.take(prefix + "/bias", (width,))


def _mlp(params, prefix, width, out, name):
    fc1, b1 = _dense(params, prefix + "/Dense_0", width, None)
    fc2, b2 = _dense(params, prefix + "/Dense_1", fc1.shape[1], width)
    out.update({name + ".fc1.kernel": fc1, name + ".fc1.bias": b1,
                name + ".fc2.kernel": fc2, name + ".fc2.bias": b2})
    return fc1.shape[1]


def _moe(params, prefix, width, out, name):
    """A MoE block's router and experts; (experts, hidden, family, slots)
    with family 'soft' (Router/mu, scale) or 'dense_router'."""
    if prefix + "/Router/mu" in params:
        mu = params.take(prefix + "/Router/mu", (width, None, None))
        experts, slots = mu.shape[1:]
        out[name + ".phi"] = mu
        out[name + ".scale"] = params.take(prefix + "/Router/scale", ())
        family = "soft"
    else:
        router = params.take(prefix + "/Router/dense/kernel", (width, None))
        experts, slots, family = router.shape[1], None, "dense_router"
        out[name + ".router.kernel"] = router
    w1 = params.take(prefix + "/Mlp/Dense_0/kernel", (experts, width, None))
    hidden = w1.shape[2]
    out.update({
        name + ".w1": w1,
        name + ".b1": params.take(prefix + "/Mlp/Dense_0/bias",
                                  (experts, hidden)),
        name + ".w2": params.take(prefix + "/Mlp/Dense_1/kernel",
                                  (experts, hidden, width)),
        name + ".b2": params.take(prefix + "/Mlp/Dense_1/bias",
                                  (experts, width))})
    return experts, hidden, family, slots


def _embedding(params, scheme, out, path, image_size):
    """Patch embedding, class token, position embedding; (patch, channels,
    width, patches, has_cls, image size)."""
    embedding = params.take("embedding/kernel", (None, None, None, None))
    ph, pw, channels, width = embedding.shape
    out["embedding.kernel"] = embedding.transpose(2, 0, 1, 3).reshape(
        channels * ph * pw, width)
    out["embedding.bias"] = params.take("embedding/bias", (width,))
    has_cls = "cls" in params
    if has_cls:
        out["cls_token"] = params.take("cls", (1, 1, width)).reshape(1, width)
    if scheme["pos"] not in params:
        raise ImporterError(f"{path}: missing key {scheme['pos']!r} (only "
                            "learned position embeddings are supported)")
    pos = params.take(scheme["pos"], (1, None, width))[0]
    patches = pos.shape[0] - (has_cls if scheme["pos_cls"] else 0)
    if patches < 1:
        raise ImporterError(f"{path}: {scheme['pos']!r} has no row for the "
                            "patches")
    if has_cls and not scheme["pos_cls"]:
        # big_vision adds the position embedding before the class token
        # joins: the class token's row is zero.
        pos = np.concatenate([np.zeros((1, width), np.float32), pos])
    out["pos_embedding"] = pos
    if image_size is None:
        side = square_grid(patches, path)
        image_size = (side * ph, side * pw)
    height, image_width = image_size
    if height % ph or image_width % pw or \
            (height // ph) * (image_width // pw) != patches:
        raise ImporterError(f"image size {height}x{image_width} does not "
                            f"give the {patches} patches of {ph}x{pw} the "
                            "position embedding has")
    return (ph, pw), channels, width, patches, has_cls, image_size


def _blocks(params, scheme, width, out, path):
    """The encoder blocks; (depth, heads, dense MLP width or None, MoE
    weights: blocks, experts, expert_dim, family, slots)."""
    enc = scheme["encoder"]
    depth = 0
    while params.has_prefix(f"{enc}/encoderblock_{depth}/"):
        depth += 1
    if depth == 0:
        raise ImporterError(f"{path}: no {enc}/encoderblock_0")
    heads, mlp_dim = None, None
    moe = {"blocks": [], "experts": None, "expert_dim": None,
           "family": None, "slots": None}
    for i in range(depth):
        block, name = f"{enc}/encoderblock_{i}/", f"blocks.{i}."
        _layer_norm(params, block + scheme["ln1"], width, out, name + "ln1")
        (q, k, v), (o, ob), heads = _attention(params, block + scheme["attn"],
                                               width)
        out[name + "attn.qkv.kernel"] = np.concatenate([q[0], k[0], v[0]],
                                                       axis=1)
        out[name + "attn.qkv.bias"] = np.concatenate([q[1], k[1], v[1]])
        out[name + "attn.out.kernel"] = o
        out[name + "attn.out.bias"] = ob
        _layer_norm(params, block + scheme["ln2"], width, out, name + "ln2")
        if scheme["encoder"] == "Encoder" and params.has_prefix(block +
                                                                "Moe/"):
            e, h, family, slots = _moe(params, block + "Moe", width, out,
                                       name + "moe")
            this = {"experts": e, "expert_dim": h, "family": family,
                    "slots": slots}
            if moe["blocks"] and any(moe[k] != this[k] for k in this):
                raise ImporterError(
                    f"{block}Moe: {e} experts of width {h} ({family}), "
                    f"unlike the earlier MoE blocks ({moe['experts']} of "
                    f"{moe['expert_dim']}, {moe['family']})")
            moe.update(this)
            moe["blocks"].append(i)
        else:
            h = _mlp(params, block + scheme["mlp"], width, out, name + "mlp")
            if mlp_dim not in (None, h):
                raise ImporterError(f"{block}{scheme['mlp']}: width {h}, "
                                    f"unlike the earlier blocks ({mlp_dim})")
            mlp_dim = h
    _layer_norm(params, f"{enc}/encoder_norm", width, out, "final_ln")
    return depth, heads, mlp_dim, moe


def _map_head(params, scheme, width, heads, mlp_dim, out, path):
    """big_vision / V-MoE attention pooling; the MLP width it has."""
    root, attn, ln, mlp = scheme["map"]
    out["map.probe"] = params.take(root + "/probe",
                                   (1, 1, width)).reshape(1, width)
    (q, k, v), (o, ob), map_heads = _attention(params, f"{root}/{attn}",
                                               width)
    if map_heads != heads:
        raise ImporterError(f"{path}: {root}/{attn}: {map_heads} heads, the "
                            f"encoder has {heads}")
    out.update({"map.attn.q.kernel": q[0], "map.attn.q.bias": q[1],
                "map.attn.kv.kernel": np.concatenate([k[0], v[0]], 1),
                "map.attn.kv.bias": np.concatenate([k[1], v[1]]),
                "map.attn.out.kernel": o, "map.attn.out.bias": ob})
    _layer_norm(params, f"{root}/{ln}", width, out, "map.ln")
    hidden = _mlp(params, f"{root}/{mlp}", width, out, "map.mlp")
    if mlp_dim not in (None, hidden):
        raise ImporterError(f"{path}: {root}/{mlp}: width {hidden}, the "
                            f"encoder's MLP width is {mlp_dim}")
    return hidden


def import_flax(path, config=None, *, image_size=None, mean=None,
                std=None, name=None, layer_norm_epsilon=1e-6,
                mlp_activation="gelu_tanh", preprocess=None):
    """(description, {vmoe name: float32 array}) of a Flax checkpoint.

    config: V-MoE config dict (config.model, or a whole training config
    with `model` and `dataset`), the path of its JSON, or a released
    checkpoint's name (released.py); image_size: (height, width) when the
    patch grid is not square; preprocess: the description's `preprocess`
    (default: the image ops of the config's evaluation `process`, else
    decode|resize(S)|value_range(-1, 1)); mean/std: input normalization
    instead of the pipeline's value_range (evaluation.pipeline_fields).
    """
    if preprocess is not None:
        parse_preprocess(preprocess, "--preprocess")
    model_config, process, process_field = split_config(load_config(config))
    cfg = Config(model_config)
    tensors = load_checkpoint(path)
    params = Params(tensors, path)
    scheme = _SCHEMES[_scheme(params)]
    params = Params(_unscan(tensors, scheme["encoder"]), path)
    out = {}
    patch, channels, width, patches, has_cls, image = _embedding(
        params, scheme, out, path, image_size)
    depth, heads, mlp_dim, moe_weights = _blocks(params, scheme, width, out,
                                                 path)
    head = "token" if has_cls else "gap"
    if scheme["map"] and params.has_prefix(scheme["map"][0] + "/"):
        if has_cls:
            raise ImporterError(f"{path}: a class token and a MAP head "
                                "together are not supported")
        head = "map"
        mlp_dim = _map_head(params, scheme, width, heads, mlp_dim, out, path)
    # Every block a MoE and no MAP head: nothing has encoder.mlp_dim's
    # width; the description takes the config's (unused), else the experts'.
    mlp_checked = mlp_dim is not None
    if not mlp_checked:
        mlp_dim = cfg.integer("encoder.mlp_dim") or moe_weights["expert_dim"]
    representation = None
    if params.has_prefix("pre_logits/"):
        kernel, bias = _dense(params, "pre_logits", width, None)
        representation = kernel.shape[1]
        out["pre_logits.kernel"], out["pre_logits.bias"] = kernel, bias
    kernel, bias = _dense(params, "head", representation or width, None)
    out["head.kernel"], out["head.bias"] = kernel, bias
    params.finish()

    moe = None
    if not moe_weights["blocks"]:
        cfg.check_no_moe()
    else:
        tokens = patches + (1 if head == "token" else 0)
        moe = moe_settings(cfg, dict(moe_weights,
                                     description_mlp_dim=mlp_dim),
                           tokens, path)
    check_model(cfg, width=width, depth=depth, heads=heads, mlp_dim=mlp_dim,
                classes=kernel.shape[1], head=head, patch=patch,
                representation=representation, mlp_checked=mlp_checked)
    if preprocess is not None:
        pipeline, what = preprocess, "--preprocess"
    elif process is not None:
        pipeline, what = evaluation_ops(process, process_field), \
            process_field
    else:
        pipeline, what = default_flax(*image), "preprocess"
    desc = description(
        name=name or _model_name(path), image=image, channels=channels,
        pipeline=pipeline_fields(pipeline, what, channels=channels,
                                 image=image, mean=mean, std=std,
                                 explicit=preprocess is not None),
        patch=patch,
        width=width, depth=depth, heads=heads, mlp_dim=mlp_dim,
        classes=kernel.shape[1], head=head,
        representation_size=representation,
        layer_norm_epsilon=layer_norm_epsilon,
        mlp_activation=mlp_activation, moe=moe)
    return desc, out


def _model_name(path):
    base = os.path.basename(path.rstrip("/"))
    for suffix in (".index", ".npz", ".msgpack"):
        if base.endswith(suffix):
            return base[:-len(suffix)]
    head, _, tail = base.rpartition(".data-")
    return head if head and tail[:5].isdigit() else base
