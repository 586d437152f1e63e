"""Flax ViT / V-MoE parameter trees (flat .npz) -> a vmoe model.

The checkpoint is a flat .npz whose keys are the param tree's paths joined
by '/' (a leading 'params/' is dropped), in one of three naming schemes,
recognized by their keys:

  scheme      encoder       block i                         pos. embedding
  vmoe        Encoder/      encoderblock_i/{LayerNorm_0,    Encoder/posembed_input/
  (V-MoE)                   SelfAttention, LayerNorm_1,     pos_embedding [1, T, D]
                            Mlp | Moe}
  vit_jax     Transformer/  encoderblock_i/{LayerNorm_0,    Transformer/posembed_input/
  (Google ViT)              MultiHeadDotProductAttention_1, pos_embedding [1, T, D]
                            LayerNorm_2, MlpBlock_3}
  big_vision  Transformer/  encoderblock_i/{LayerNorm_0,    pos_embedding [1, P, D]
                            MultiHeadDotProductAttention_0, (not the class token's)
                            LayerNorm_1, MlpBlock_0}
                            (or scanned: encoderblock/ with
                            a leading depth axis)

plus embedding/{kernel [ph, pw, C, D], bias}, cls [1, 1, D] (class token),
{Encoder,Transformer}/encoder_norm, MapHead | MAPHead_0 (attention
pooling: probe, attention, LayerNorm, MLP), pre_logits (dense + tanh) and
head. Attention kernels are query/key/value [D, heads, dh] and out
[heads, dh, D]; MoE blocks hold Moe/Router/dense/kernel [D, E] and
Moe/Mlp/Dense_{0,1}/{kernel,bias} stacked over experts. docs/ModelFormat.md
§6 lists every mapping.

Sizes come from the shapes. What the weights do not say -- the image size
when the patch grid is not square, and for MoE checkpoints k, the
capacity, the group size and BPR -- comes from the model config of V-MoE
(`config.model` of its configs, as JSON), whose every field is read or
explicitly ignored (training-only fields); an unknown field is an error.
Flax defaults: LayerNorm epsilon 1e-6, GELU tanh approximation.
"""

import os

import numpy as np

from .. import _json
from . import _npz
from .common import ImporterError, Params, channel_values, description, \
    square_grid

__all__ = ["import_flax", "load_npz"]

_SCHEMES = {
    "vmoe": {"encoder": "Encoder", "ln1": "LayerNorm_0",
             "attn": "SelfAttention", "ln2": "LayerNorm_1", "mlp": "Mlp",
             "pos": "Encoder/posembed_input/pos_embedding", "pos_cls": True,
             "map": ("MapHead", "MultiHeadDotProductAttention", "LayerNorm",
                     "Mlp")},
    "vit_jax": {"encoder": "Transformer", "ln1": "LayerNorm_0",
                "attn": "MultiHeadDotProductAttention_1", "ln2": "LayerNorm_2",
                "mlp": "MlpBlock_3",
                "pos": "Transformer/posembed_input/pos_embedding",
                "pos_cls": True, "map": None},
    "big_vision": {"encoder": "Transformer", "ln1": "LayerNorm_0",
                   "attn": "MultiHeadDotProductAttention_0",
                   "ln2": "LayerNorm_1", "mlp": "MlpBlock_0",
                   "pos": "pos_embedding", "pos_cls": False,
                   "map": ("MAPHead_0", "MultiHeadDotProductAttention_0",
                           "LayerNorm_0", "MlpBlock_0")},
}

# Fields of V-MoE's model config (VisionTransformerMoe) that only matter
# for training, initialization or partitioning: read and ignored.
_IGNORED = {
    "": {"name", "deterministic", "head_bias_init", "head_kernel_zero_init"},
    "encoder.": {"dropout_rate", "attention_dropout_rate"},
    "encoder.moe.": {"dropout_rate", "split_rngs"},
    "encoder.moe.router.": {"noise_std", "gshard_loss_weight",
                            "importance_loss_weight", "load_loss_weight",
                            "deterministic"},
    "encoder.moe.router.dispatcher.": {"name", "bfloat16", "partition_spec",
                                       "einsum_precision"},
}


def load_npz(path):
    """{key: float32 array} of a flat .npz ('params/' prefix dropped)."""
    tensors = _npz.read(path)  # sizes checked before reading, no pickles
    out = {}
    for key, value in tensors.items():
        name = key[len("params/"):] if key.startswith("params/") else key
        if not np.issubdtype(value.dtype, np.floating):
            raise ImporterError(f"{path}: {key!r} has dtype {value.dtype}, "
                                "expected floating point")
        out[name] = value.astype(np.float32)
    return out


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
        return "vit_jax"
    if "Transformer/encoder_norm/scale" in params:
        return "big_vision"
    raise ImporterError(f"{params.source}: not a Flax ViT param tree (no "
                        "Encoder/encoder_norm or Transformer/encoder_norm)")


class _Config:
    """Reads a V-MoE model config dict, field by field (paths named)."""

    def __init__(self, config):
        self.config = config or {}
        self.seen = set()

    def get(self, path, default=None):
        node = self.config
        for part in path.split("."):
            if not isinstance(node, dict) or part not in node:
                return default
            node = node[part]
        self.seen.add(path)
        return node

    def check_unknown(self):
        def walk(node, prefix):
            for key, value in node.items():
                path = prefix + key
                if isinstance(value, dict) and path in (
                        "encoder", "encoder.moe", "encoder.moe.router",
                        "encoder.moe.router.dispatcher",
                        "encoder.position_emb"):
                    walk(value, path + ".")
                elif path not in self.seen and key not in _IGNORED.get(
                        prefix, ()):
                    raise ImporterError(f"config: {path}: unknown field")
        if not isinstance(self.config, dict):
            raise ImporterError("config: must be a JSON object")
        walk(self.config, "")


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
    router = params.take(prefix + "/Router/dense/kernel", (width, None))
    experts = router.shape[1]
    w1 = params.take(prefix + "/Mlp/Dense_0/kernel", (experts, width, None))
    hidden = w1.shape[2]
    out.update({
        name + ".router.kernel": router, name + ".w1": w1,
        name + ".b1": params.take(prefix + "/Mlp/Dense_0/bias",
                                  (experts, hidden)),
        name + ".w2": params.take(prefix + "/Mlp/Dense_1/kernel",
                                  (experts, hidden, width)),
        name + ".b2": params.take(prefix + "/Mlp/Dense_1/bias",
                                  (experts, width))})
    return experts, hidden


def _moe_settings(cfg, moe_blocks, experts, hidden, mlp_dim, tokens, source):
    """The description's moe object from the config's encoder.moe."""
    if not cfg.config:
        raise ImporterError(f"{source}: MoE blocks {moe_blocks} need the "
                            "model config (--config): k, capacity and group "
                            "size are not in the weights")
    layers = cfg.get("encoder.moe.layers")
    if not isinstance(layers, list) or not all(
            type(b) is int for b in layers) or sorted(layers) != moe_blocks:
        raise ImporterError(f"config: encoder.moe.layers: {layers!r} does "
                            f"not match the MoE blocks of the weights "
                            f"{moe_blocks}")
    if cfg.get("encoder.moe.num_experts") != experts:
        raise ImporterError(f"config: encoder.moe.num_experts: "
                            f"{cfg.get('encoder.moe.num_experts')!r}, the "
                            f"weights have {experts} experts")
    cfg_mlp = cfg.get("encoder.moe.mlp_dim", mlp_dim)
    if cfg_mlp != hidden:
        raise ImporterError(f"config: encoder.moe.mlp_dim: {cfg_mlp!r}, the "
                            f"experts are {hidden} wide")
    router = cfg.get("encoder.moe.router.name", "NoisyTopExpertsPerItemRouter")
    if router != "NoisyTopExpertsPerItemRouter":
        raise ImporterError(f"config: encoder.moe.router.name: {router!r} "
                            "is not supported (only "
                            "NoisyTopExpertsPerItemRouter)")
    k = cfg.get("encoder.moe.router.num_selected_experts", 1)
    group = cfg.get("encoder.moe.group_size")
    if not isinstance(group, int) or group < 1:
        raise ImporterError(f"config: encoder.moe.group_size: {group!r}, "
                            "expected tokens per group (an integer)")
    d = "encoder.moe.router.dispatcher."
    batch_priority = cfg.get(d + "batch_priority", False)
    moe = {"placement": "layers", "layers": moe_blocks,
           "num_experts": experts, "k": k}
    if hidden != mlp_dim:
        moe["mlp_dim"] = hidden
    capacity, factor = cfg.get(d + "capacity"), cfg.get(d + "capacity_factor")
    if (capacity is None) == (factor is None):
        raise ImporterError(f"config: {d}capacity / capacity_factor: give "
                            "exactly one")
    if capacity is not None:
        # V-MoE applies neither rounding nor multiple_of to a fixed capacity.
        cfg.get(d + "capacity_ceil_or_round")
        cfg.get(d + "capacity_multiple_of")
        moe["capacity"] = capacity
    else:
        moe["capacity_ratio"] = factor
        # V-MoE's defaults: ceil, and a multiple of 4.
        moe["capacity_rule"] = cfg.get(d + "capacity_ceil_or_round", "ceil")
        moe["multiple_of"] = cfg.get(d + "capacity_multiple_of", 4) or 1
    moe.update({"routing": "bpr" if batch_priority else "vanilla",
                "score": "max", "order": "softmax_topk", "normalize": False,
                "activation": "gelu_tanh"})
    if group % tokens == 0:
        moe["group_size"] = group // tokens
    else:
        moe["group_tokens"] = group
    return moe


def import_flax(path, config=None, *, image_size=None, mean=(0.5,),
                std=(0.5,), name=None, layer_norm_epsilon=1e-6,
                mlp_activation="gelu_tanh"):
    """(description, {vmoe name: float32 array}) of a Flax .npz.

    config: V-MoE model config dict (or a path to its JSON); image_size:
    (height, width) when the patch grid is not square; mean/std: input
    normalization (default value_range(-1, 1): 0.5 and 0.5).
    """
    if isinstance(config, str):
        config = _json.read(config, error=ImporterError)
    cfg = _Config(config)
    tensors = load_npz(path)
    params = Params(tensors, path)
    scheme = _SCHEMES[_scheme(params)]
    params = Params(_unscan(tensors, scheme["encoder"]), path)
    out = {}

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

    enc = scheme["encoder"]
    depth = 0
    while params.has_prefix(f"{enc}/encoderblock_{depth}/"):
        depth += 1
    if depth == 0:
        raise ImporterError(f"{path}: no {enc}/encoderblock_0")
    heads, mlp_dim, moe_blocks, experts, expert_dim = None, None, [], None, \
        None
    for i in range(depth):
        block, name_ = f"{enc}/encoderblock_{i}/", f"blocks.{i}."
        _layer_norm(params, block + scheme["ln1"], width, out, name_ + "ln1")
        (q, k, v), (o, ob), heads = _attention(params, block + scheme["attn"],
                                               width)
        out[name_ + "attn.qkv.kernel"] = np.concatenate([q[0], k[0], v[0]],
                                                        axis=1)
        out[name_ + "attn.qkv.bias"] = np.concatenate([q[1], k[1], v[1]])
        out[name_ + "attn.out.kernel"] = o
        out[name_ + "attn.out.bias"] = ob
        _layer_norm(params, block + scheme["ln2"], width, out, name_ + "ln2")
        if scheme is _SCHEMES["vmoe"] and params.has_prefix(block + "Moe/"):
            e, h = _moe(params, block + "Moe", width, out, name_ + "moe")
            if experts not in (None, e) or expert_dim not in (None, h):
                raise ImporterError(f"{block}Moe: {e} experts of width {h}, "
                                    f"unlike the earlier MoE blocks "
                                    f"({experts} of {expert_dim})")
            experts, expert_dim = e, h
            moe_blocks.append(i)
        else:
            h = _mlp(params, block + scheme["mlp"], width, out,
                     name_ + "mlp")
            if mlp_dim not in (None, h):
                raise ImporterError(f"{block}{scheme['mlp']}: width {h}, "
                                    f"unlike the earlier blocks ({mlp_dim})")
            mlp_dim = h
    _layer_norm(params, f"{enc}/encoder_norm", width, out, "final_ln")

    head = "token" if has_cls else "gap"
    if scheme["map"] and params.has_prefix(scheme["map"][0] + "/"):
        if has_cls:
            raise ImporterError(f"{path}: a class token and a MAP head "
                                "together are not supported")
        head = "map"
        root, attn, ln, mlp = scheme["map"]
        out["map.probe"] = params.take(root + "/probe",
                                       (1, 1, width)).reshape(1, width)
        (q, k, v), (o, ob), map_heads = _attention(params, f"{root}/{attn}",
                                                   width)
        if map_heads != heads:
            raise ImporterError(f"{root}/{attn}: {map_heads} heads, the "
                                f"encoder has {heads}")
        out.update({"map.attn.q.kernel": q[0], "map.attn.q.bias": q[1],
                    "map.attn.kv.kernel": np.concatenate([k[0], v[0]], 1),
                    "map.attn.kv.bias": np.concatenate([k[1], v[1]]),
                    "map.attn.out.kernel": o, "map.attn.out.bias": ob})
        _layer_norm(params, f"{root}/{ln}", width, out, "map.ln")
        if mlp_dim is None:
            mlp_dim = params.tensors[f"{root}/{mlp}/Dense_0/kernel"].shape[1]
        if _mlp(params, f"{root}/{mlp}", width, out, "map.mlp") != mlp_dim:
            raise ImporterError(f"{root}/{mlp}: its width differs from the "
                                f"encoder's MLP width {mlp_dim}")
    if mlp_dim is None:
        # Every block is a MoE (V-MoE "Every 1"): the dense width is unused.
        mlp_dim = expert_dim
    representation = None
    if params.has_prefix("pre_logits/"):
        kernel, bias = _dense(params, "pre_logits", width, None)
        representation = kernel.shape[1]
        out["pre_logits.kernel"], out["pre_logits.bias"] = kernel, bias
    kernel, bias = _dense(params, "head", representation or width, None)
    out["head.kernel"], out["head.bias"] = kernel, bias
    params.finish()

    tokens = patches + (1 if head == "token" else 0)
    moe = None
    if moe_blocks:
        moe = _moe_settings(cfg, moe_blocks, experts, expert_dim, mlp_dim,
                            tokens, path)
    _check_config(cfg, width=width, depth=depth, heads=heads,
                  mlp_dim=mlp_dim, classes=kernel.shape[1], head=head,
                  patch=(ph, pw), representation=representation)
    desc = description(
        name=name or os.path.splitext(os.path.basename(path))[0],
        image=(height, image_width), channels=channels,
        mean=channel_values(mean, channels, "mean"),
        std=channel_values(std, channels, "std"), patch=(ph, pw),
        width=width, depth=depth, heads=heads, mlp_dim=mlp_dim,
        classes=kernel.shape[1], head=head,
        representation_size=representation,
        layer_norm_epsilon=layer_norm_epsilon,
        mlp_activation=mlp_activation, moe=moe)
    return desc, out


def _check_config(cfg, *, width, depth, heads, mlp_dim, classes, head,
                  patch, representation):
    """Every config field that the weights also determine must agree."""
    if not cfg.config:
        return
    checks = [("hidden_size", width), ("encoder.num_layers", depth),
              ("encoder.num_heads", heads), ("encoder.mlp_dim", mlp_dim),
              ("num_classes", classes),
              ("representation_size", representation)]
    for path, value in checks:
        got = cfg.get(path)
        if got is not None and got != value:
            raise ImporterError(f"config: {path}: {got!r}, the weights say "
                                f"{value}")
    size = cfg.get("patch_size")
    if size is not None and list(size if isinstance(size, (list, tuple))
                                 else (size, size)) != list(patch):
        raise ImporterError(f"config: patch_size: {size!r}, the weights say "
                            f"{list(patch)}")
    classifier = cfg.get("classifier")
    if classifier is not None and (not isinstance(classifier, str) or {
            "0": "token"}.get(classifier, classifier) != head):
        raise ImporterError(f"config: classifier: {classifier!r}, the "
                            f"weights have a {head!r} head")
    if cfg.get("encoder.attention_qk_norm", False):
        raise ImporterError("config: encoder.attention_qk_norm: not "
                            "supported")
    position = cfg.get("encoder.position_emb.name", "learned")
    if position != "learned":
        raise ImporterError(f"config: encoder.position_emb.name: "
                            f"{position!r} is not supported (learned only)")
    cfg.check_unknown()
