"""PyTorch V-MoE ViT of docs/ModelFormat.md, for reference and training.

The network is the one of ModelFormat §2, built from a model description
(§1, the JSON as a dict) and holding its parameters in Flax layout (kernels
`[in, out]`) under exactly the safetensors names of §3, so that
`VMoE.export_tensors()` is a straight dump and `VMoE.load_tensors()` a
straight load.

The MoE layer follows SPEC §3/§4 and reuses `vmoe_ref.ops` (route, bpr_sort,
expert_ffn, combine, capacity). Only dispatch is re-implemented here, as a
batched, differentiable computation: the routing decisions (slots) are
computed with a cumulative count instead of the token-by-token walk of
`ops.dispatch`, and the buffers are gathered from the tokens by slot index.
Its forward values equal `ops.moe_layer` bit for bit (`test_model` checks it),
and gradients flow to the tokens, the router (through the combine weights)
and the experts.

Routing options (routing, score, capacity ratio) are arguments of
`VMoE.forward`, so a model trained with vanilla routing can be evaluated with
BPR and a lower C. In training mode the router adds Gaussian noise with std
noise_std/E (noise_std = 1) to its logits and each MoE layer returns the
auxiliary load-balancing loss of the paper (appendix A.2): the mean of the
importance loss and the load loss, both squared coefficients of variation
(population std) computed per group and averaged over groups.

Also here: description parsing/validation, MoE placement, the safetensors
reader/writer (re-exported from the user package, `vmoe.safetensors`), and
`evaluate` (normalization of §4, padded batches, routing
statistics in the layout of the manifest stats of §5).
"""

import json
import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from vmoe import safetensors
from vmoe.errors import ImporterError
from vmoe.importers.preprocess import parse as parse_preprocess

from . import decoder, expertchoice, ops, softmoe
from . import losses as aux_losses
from . import noise as router_noise

# noise_std of training graphs (vmoe-compile --training; V-MoE's default).
TRAINING_NOISE_STD = 1.0

# ---------------------------------------------------------------------------
# Model description (ModelFormat §1)

_TOP_FIELDS = ("format", "version", "name", "image", "input", "preprocess",
               "patch_size",
               "width", "depth", "heads", "mlp_dim", "classes", "class_names",
               "head", "final_norm", "representation_size",
               "layer_norm_epsilon", "norm", "mlp_activation", "dtype",
               "moe")
_MOE_FIELDS = ("placement", "last_n", "every", "layers", "num_experts", "k",
               "mlp_dim", "expert", "shared_experts", "capacity_ratio", "capacity", "capacity_rule",
               "multiple_of", "routing", "score", "order", "normalize",
               "activation", "group_size", "group_tokens", "slots_per_expert",
               "soft_group_size", "overrides")
# The fields a `moe.overrides` entry may set for its blocks.
_LAYER_FIELDS = ("routing", "k", "score", "order", "normalize",
                 "capacity_rule", "multiple_of", "activation",
                 "slots_per_expert", "soft_group_size")
PLACEMENTS = ("every-2", "every-n", "last-n", "layers")
HEADS = ("token", "gap", "map")
_MOE_DEFAULTS = {"capacity_rule": "round", "multiple_of": 1,
                 "routing": "vanilla", "score": "max",
                 "order": "softmax_topk", "normalize": False,
                 "activation": "gelu_tanh"}
# (soft_group_size defaults to 1 and slots_per_expert to round(S/E): see
# layer_settings.)
ROUTINGS = ("vanilla", "bpr", "expert_choice", "soft")
TOKEN_CHOICE = ("vanilla", "bpr")
NORMS = ("layernorm", "rmsnorm")
EXPERTS = ("mlp", "swiglu")
# moe.capacity_ratio of the dropless mode (B = S, nothing dropped).
DROPLESS = "none"


def is_dropless(moe):
    """Whether a (parsed) moe object is dropless (capacity_ratio "none")."""
    return moe.get("capacity_ratio") == DROPLESS


class DescriptionError(ValueError):
    """A model description that violates ModelFormat §1 (names the field)."""


def _fail(field, message):
    raise DescriptionError(f"{field}: {message}")


def _check_fields(obj, allowed, prefix):
    if not isinstance(obj, dict):
        _fail(prefix.rstrip(".") or "description", "must be an object")
    for key in obj:
        if key not in allowed:
            _fail(prefix + key, "unknown field")


def _int(obj, key, prefix, minimum=1):
    if key not in obj:
        _fail(prefix + key, "missing required field")
    value = obj[key]
    if isinstance(value, bool) or not isinstance(value, int):
        _fail(prefix + key, f"must be an integer, got {value!r}")
    if value < minimum:
        _fail(prefix + key, f"must be >= {minimum}, got {value}")
    return value


def _positive_float(value, field):
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not math.isfinite(value) or value <= 0:
        _fail(field, f"must be a positive number, got {value!r}")
    return float(value)


def _choice(obj, key, prefix, choices, default=None):
    value = obj.get(key, default)
    if value is None:
        _fail(prefix + key, "missing required field")
    if value not in choices:
        _fail(prefix + key, f"must be one of {', '.join(choices)}, "
                            f"got {value!r}")
    return value


def parse_description(desc):
    """Validates a model description dict; returns a copy with defaults.

    Raises DescriptionError naming the offending field. The result has every
    optional field filled in (input, layer_norm_epsilon, mlp_activation,
    dtype and the optional moe fields).
    """
    _check_fields(desc, _TOP_FIELDS, "")
    if desc.get("format") != "vmoe-model":
        _fail("format", f"must be \"vmoe-model\", got {desc.get('format')!r}")
    if desc.get("version") != 1 or isinstance(desc.get("version"), bool):
        _fail("version", f"must be 1, got {desc.get('version')!r}")
    if not isinstance(desc.get("name"), str):
        _fail("name", "missing or not a string")
    out = {"format": "vmoe-model", "version": 1, "name": desc["name"]}

    image = desc.get("image")
    if image is None:
        _fail("image", "missing required field")
    _check_fields(image, ("height", "width", "channels"), "image.")
    out["image"] = {key: _int(image, key, "image.")
                    for key in ("height", "width", "channels")}
    channels = out["image"]["channels"]

    norm = desc.get("input", {})
    _check_fields(norm, ("mean", "std"), "input.")
    out["input"] = {}
    for key, default in (("mean", 0.0), ("std", 1.0)):
        values = norm.get(key, [default] * channels)
        if not isinstance(values, list) or len(values) != channels:
            _fail("input." + key, f"must be a list of {channels} numbers")
        for v in values:
            if isinstance(v, bool) or not isinstance(v, (int, float)) \
                    or not math.isfinite(v):
                _fail("input." + key, f"must hold finite numbers, got {v!r}")
        if key == "std" and any(v == 0 for v in values):
            _fail("input.std", "must not contain 0")
        out["input"][key] = [float(v) for v in values]

    # The image ops happen before the model (the runtime's); the reference
    # takes images of the model's size and applies value_range.
    if "preprocess" in desc:
        value_range(desc)
        out["preprocess"] = desc["preprocess"]

    out["patch_size"] = _patch_size(desc)
    for key in ("width", "depth", "heads", "mlp_dim", "classes"):
        out[key] = _int(desc, key, "")
    for key, ps in zip(("height", "width"), out["patch_size"]):
        if out["image"][key] % ps:
            _fail("image." + key, f"must be divisible by the patch {key} "
                                  f"({ps}), got {out['image'][key]}")
    if out["width"] % out["heads"]:
        _fail("width", f"must be divisible by heads ({out['heads']}), "
                       f"got {out['width']}")
    if "class_names" in desc:
        names = desc["class_names"]
        if not isinstance(names, list) or len(names) != out["classes"] \
                or not all(isinstance(n, str) for n in names):
            _fail("class_names", f"must be a list of {out['classes']} "
                                 "strings")
        out["class_names"] = list(names)
    out["head"] = _choice(desc, "head", "", HEADS)
    out["final_norm"] = _choice(desc, "final_norm", "", ("tokens", "pooled"),
                                "tokens")
    if "representation_size" in desc:
        out["representation_size"] = _int(desc, "representation_size", "")
    out["layer_norm_epsilon"] = _positive_float(
        desc.get("layer_norm_epsilon", 1e-6), "layer_norm_epsilon")
    out["norm"] = _choice(desc, "norm", "", NORMS, "layernorm")
    out["mlp_activation"] = _choice(desc, "mlp_activation", "",
                                    ops.ACTIVATIONS, "gelu_tanh")
    out["dtype"] = _choice(desc, "dtype", "", ("f32",), "f32")
    if "moe" in desc:
        out["moe"] = _parse_moe(desc["moe"], out)
    return out


def _patch_size(desc):
    """patch_size: an integer (square) or [height, width] -> (ph, pw)."""
    value = desc.get("patch_size")
    if isinstance(value, (list, tuple)):
        if len(value) != 2 or not all(
                isinstance(v, int) and not isinstance(v, bool) and v >= 1
                for v in value):
            _fail("patch_size", "must be an integer >= 1 or a list "
                                "[height, width] of two")
        return tuple(value)
    size = _int(desc, "patch_size", "")
    return (size, size)


def _parse_moe(moe, out):
    """The `moe` object of a description (ModelFormat §1)."""
    _check_fields(moe, _MOE_FIELDS, "moe.")
    m = {"placement": _choice(moe, "placement", "moe.", PLACEMENTS)}
    parameter = {"last-n": "last_n", "every-n": "every", "layers": "layers"}
    for placement, key in parameter.items():
        if key in moe and m["placement"] != placement:
            _fail("moe." + key, f"only used with placement \"{placement}\"")
    depth = out["depth"]
    if m["placement"] == "last-n":
        m["last_n"] = _int(moe, "last_n", "moe.")
        odd_blocks = depth // 2
        if m["last_n"] > odd_blocks:
            _fail("moe.last_n", f"must be <= the number of odd-indexed "
                                f"blocks ({odd_blocks}), got {m['last_n']}")
    elif m["placement"] == "every-n":
        m["every"] = _int(moe, "every", "moe.")
        if m["every"] > depth:
            _fail("moe.every", f"must be <= depth ({depth}), got "
                               f"{m['every']}")
    elif m["placement"] == "layers":
        layers = moe.get("layers")
        if not isinstance(layers, list) or not all(
                isinstance(i, int) and not isinstance(i, bool) and i >= 0
                for i in layers):
            _fail("moe.layers", "must be a list of block indices "
                                "(integers >= 0)")
        if len(set(layers)) != len(layers):
            _fail("moe.layers", "lists a block twice")
        if layers and max(layers) >= depth:
            _fail("moe.layers", f"block {max(layers)} does not exist "
                                f"(depth {depth})")
        m["layers"] = sorted(layers)
    m["num_experts"] = _int(moe, "num_experts", "moe.")
    m["routing"] = _choice(moe, "routing", "moe.", ROUTINGS, "vanilla")
    _layer_fields(moe, m, "moe.", m["routing"])
    m["mlp_dim"] = (_int(moe, "mlp_dim", "moe.") if "mlp_dim" in moe
                    else out["mlp_dim"])
    m["expert"] = _choice(moe, "expert", "moe.", EXPERTS, "mlp")
    m["shared_experts"] = (_int(moe, "shared_experts", "moe.", minimum=0)
                           if "shared_experts" in moe else 0)
    if m["expert"] == "swiglu":
        _swiglu_activation(moe, "moe.")
        m["activation"] = "silu"
    if "capacity" in moe:
        for key in ("capacity_ratio", "capacity_rule", "multiple_of"):
            if key in moe:
                _fail("moe." + key, "not used with a fixed moe.capacity")
        m["capacity"] = _int(moe, "capacity", "moe.")
    elif isinstance(moe.get("capacity_ratio"), str):
        if moe["capacity_ratio"] != DROPLESS:
            _fail("moe.capacity_ratio", f"must be a number > 0 or \"none\" "
                                        f"(dropless), got "
                                        f"{moe['capacity_ratio']!r}")
        for key in ("capacity_rule", "multiple_of"):
            if key in moe:
                _fail("moe." + key, "not used with moe.capacity_ratio "
                                    "\"none\" (dropless)")
        m["capacity_ratio"] = DROPLESS
    else:
        # 1.05 when absent, as in the C++ front end (MoESettings).
        m["capacity_ratio"] = _positive_float(moe.get("capacity_ratio", 1.05),
                                              "moe.capacity_ratio")
    for key, default in _MOE_DEFAULTS.items():
        if ("capacity" in m or is_dropless(m)) and \
                key in ("capacity_rule", "multiple_of"):
            continue  # not used with a fixed capacity (keeps parsing
            # idempotent: a parsed description parses again)
        m.setdefault(key, default)
    if "group_tokens" in moe:
        if "group_size" in moe:
            _fail("moe.group_tokens", "give moe.group_size or "
                                      "moe.group_tokens, not both")
        m["group_tokens"] = _int(moe, "group_tokens", "moe.")
    else:
        m["group_size"] = _int(moe, "group_size", "moe.")
    m["overrides"] = []
    overrides = moe.get("overrides", [])
    if not isinstance(overrides, list):
        _fail("moe.overrides", "must be a list of objects")
    for index, entry in enumerate(overrides):
        prefix = f"moe.overrides[{index}]."
        _check_fields(entry, ("blocks",) + _LAYER_FIELDS, prefix)
        blocks = entry.get("blocks")
        if blocks is None:
            _fail(prefix + "blocks", "missing required field")
        if not isinstance(blocks, list) or not blocks or not all(
                isinstance(b, int) and not isinstance(b, bool) and b >= 0
                for b in blocks):
            _fail(prefix + "blocks", "must be a non-empty list of block "
                                     "indices")
        routing = _choice(entry, "routing", prefix, ROUTINGS, m["routing"])
        if m["expert"] == "swiglu":
            _swiglu_activation(entry, prefix)
        fields = {"blocks": list(blocks)}
        if "routing" in entry:
            fields["routing"] = routing
        _layer_fields(entry, fields, prefix, routing)
        m["overrides"].append(fields)
    _check_layers({**out, "moe": m})
    return m


def _swiglu_activation(obj, prefix):
    """SwiGLU experts use silu: any other `activation` is an error."""
    if obj.get("activation", "silu") != "silu":
        _fail(prefix + "activation", f"SwiGLU experts (moe.expert "
                                     f"\"swiglu\") use silu, got "
                                     f"{obj['activation']!r}")


def _layer_fields(obj, out, prefix, routing):
    """Reads the per-layer fields present in `obj` (the moe object or an
    overrides entry whose blocks use `routing`) into `out`."""
    token_choice = routing in TOKEN_CHOICE
    if "k" in obj and not token_choice:
        _fail(prefix + "k", f"only used by routing vanilla or bpr, got "
                            f"routing {routing!r}")
    for key in ("slots_per_expert", "soft_group_size"):
        if key in obj and routing != "soft":
            _fail(prefix + key, f"only used by routing \"soft\", got "
                                f"routing {routing!r}")
    for key in ("k", "multiple_of", "slots_per_expert", "soft_group_size"):
        if key in obj:
            out[key] = _int(obj, key, prefix)
    if prefix == "moe." and token_choice:
        out["k"] = _int(obj, "k", prefix)
    choices = {"capacity_rule": ops.CAPACITY_RULES,
               "score": ops.PRIORITY_SCORES, "order": ops.ROUTE_ORDERS,
               "activation": ops.ACTIVATIONS}
    for key, allowed in choices.items():
        if key in obj:
            out[key] = _choice(obj, key, prefix, allowed)
    if "normalize" in obj:
        if not isinstance(obj["normalize"], bool):
            _fail(prefix + "normalize",
                  f"must be true or false, got {obj['normalize']!r}")
        out["normalize"] = obj["normalize"]


def layer_settings(desc, block):
    """The settings of the MoE layer of `block`: the moe object's fields
    with those of its overrides entry, if any; plus `explicit` (the fields
    the entry sets) and, for Soft MoE, `slots_per_expert` resolved."""
    moe = desc["moe"]
    layer = {key: moe[key] for key in moe if key != "overrides"}
    layer["explicit"] = ()
    for entry in moe["overrides"]:
        if block in entry["blocks"]:
            layer.update({k: v for k, v in entry.items() if k != "blocks"})
            layer["explicit"] = tuple(k for k in entry if k != "blocks")
    layer.setdefault("k", 0)
    if layer["routing"] == "soft" and "slots_per_expert" not in layer:
        layer["slots_per_expert"] = softmoe.default_slots(
            layer_tokens_per_group(desc, layer), moe["num_experts"])
    return layer


def layer_tokens_per_group(desc, layer):
    """Tokens per group of a MoE layer: one Soft MoE group, else S."""
    if layer["routing"] != "soft":
        return tokens_per_group(desc)
    return layer.get("soft_group_size", 1) * tokens_per_image(desc)


def _check_layers(desc):
    """The rules of moe.overrides and of every MoE layer's settings."""
    moe = desc["moe"]
    blocks = description_moe_blocks(desc)
    for index, entry in enumerate(moe["overrides"]):
        field = f"moe.overrides[{index}].blocks"
        for block in entry["blocks"]:
            if block not in blocks:
                listed = ", ".join(map(str, blocks)) or "none"
                _fail(field, f"block {block} is not a MoE block (MoE "
                             f"blocks: {listed})")
            for other in range(index):
                if block in moe["overrides"][other]["blocks"]:
                    _fail(field, f"block {block} is already in "
                                 f"moe.overrides[{other}]")

    def field(block, key, layer):
        for index, entry in enumerate(moe["overrides"]):
            if block in entry["blocks"] and key in layer["explicit"]:
                return f"moe.overrides[{index}].{key}"
        return f"moe.{key}"

    E = moe["num_experts"]
    for block in blocks:
        layer = layer_settings(desc, block)
        routing = layer["routing"]
        if routing not in TOKEN_CHOICE and (moe["expert"] == "swiglu"
                                            or is_dropless(moe)):
            what = ("take moe.expert \"swiglu\" (token choice only"
                    if moe["expert"] == "swiglu" else
                    "take moe.capacity_ratio \"none\" (dropless is token "
                    "choice only")
            _fail(field(block, "routing", layer),
                  f"\"{routing}\" (block {block}) does not {what}: vanilla "
                  f"or bpr)")
        if routing in TOKEN_CHOICE:
            if layer["k"] < 1:
                _fail(field(block, "routing" if "routing" in layer["explicit"]
                            else "k", layer).replace(".routing", ".k"),
                      f"missing (required by routing {routing!r} in block "
                      f"{block})")
            if layer["k"] > E:
                _fail(field(block, "k", layer),
                      f"must be <= moe.num_experts ({E}), got {layer['k']}")
        if routing == "soft":
            if "group_tokens" in moe:
                _fail("moe.group_tokens", f"not used by routing \"soft\" "
                                          f"(block {block}): a Soft MoE group "
                                          f"is whole images")
            if moe["group_size"] % layer.get("soft_group_size", 1):
                _fail(field(block, "soft_group_size", layer),
                      f"must divide moe.group_size ({moe['group_size']}), "
                      f"got {layer['soft_group_size']}")
            if layer["slots_per_expert"] < 1:
                S = layer_tokens_per_group(desc, layer)
                _fail(field(block, "slots_per_expert", layer),
                      f"missing, and round(S/E) = round({S}/{E}) is 0 in "
                      f"block {block}")
            continue
        if "capacity" in moe or is_dropless(moe):
            continue
        # The default capacity must size to B >= 1 (SPEC §4, §8).
        choices = layer["k"] if routing in TOKEN_CHOICE else 1
        try:
            ops.sized_capacity(choices, tokens_per_group(desc),
                               moe["capacity_ratio"], E,
                               layer["capacity_rule"], layer["multiple_of"])
        except ValueError as err:
            _fail("moe.capacity_ratio", str(err))


def load_description(path):
    """Reads and validates a model description JSON file."""
    with open(path, encoding="utf-8") as f:
        try:
            desc = json.load(f)
        except json.JSONDecodeError as err:
            raise DescriptionError(f"{path}: invalid JSON: {err}") from None
    return parse_description(desc)


def num_patches(desc):
    """P = (height / patch height) * (width / patch width)."""
    ph, pw = desc["patch_size"]
    return (desc["image"]["height"] // ph) * (desc["image"]["width"] // pw)


def tokens_per_image(desc):
    """T = P + 1 with a class token, P with mean or attention pooling."""
    return num_patches(desc) + (1 if desc["head"] == "token" else 0)


def tokens_per_group(desc):
    """S: moe.group_tokens, or moe.group_size images of T tokens."""
    moe = desc["moe"]
    if "group_tokens" in moe:
        return moe["group_tokens"]
    return moe["group_size"] * tokens_per_image(desc)


def images_per_group_unit(desc):
    """The smallest number of images that fills whole routing groups:
    group_size, or lcm(S, T) / T with group_tokens; 1 for a dense ViT."""
    if "moe" not in desc:
        return 1
    if "group_tokens" not in desc["moe"]:
        return desc["moe"]["group_size"]
    t = tokens_per_image(desc)
    return math.lcm(desc["moe"]["group_tokens"], t) // t


def moe_blocks(depth, placement, last_n=None, every=None, layers=None):
    """0-based indices of the MoE blocks (SPEC §5 placement rules).

    every-2: blocks 1, 3, 5, ...; every-n: blocks n-1, 2n-1, ... (V-MoE's
    "Every n"); last-n: the last n odd-indexed blocks; layers: the list.
    """
    odd = list(range(1, depth, 2))
    if placement == "every-2":
        return odd
    if placement == "every-n":
        return list(range(every - 1, depth, every))
    if placement == "layers":
        return sorted(layers)
    if placement == "last-n":
        if last_n is None or not 1 <= last_n <= len(odd):
            raise ValueError(f"last_n must be in [1, {len(odd)}], "
                             f"got {last_n}")
        return odd[len(odd) - last_n:]
    raise ValueError(f"unknown placement {placement!r}")


def description_moe_blocks(desc):
    """The MoE blocks of a parsed description ([] for a dense ViT)."""
    moe = desc.get("moe")
    if moe is None:
        return []
    return moe_blocks(desc["depth"], moe["placement"], moe.get("last_n"),
                      moe.get("every"), moe.get("layers"))


def expected_shapes(desc):
    """Ordered {name: shape} of every tensor of ModelFormat §3."""
    D, H = desc["width"], desc["mlp_dim"]
    moe_cfg = desc.get("moe") or {}
    E, He = moe_cfg.get("num_experts", 0), moe_cfg.get("mlp_dim", H)
    C, (ph, pw) = desc["image"]["channels"], desc["patch_size"]
    shapes = {"embedding.kernel": (C * ph * pw, D), "embedding.bias": (D,)}
    if desc["head"] == "token":
        shapes["cls_token"] = (1, D)
    shapes["pos_embedding"] = (tokens_per_image(desc), D)
    moe = set(description_moe_blocks(desc))
    rms = desc.get("norm") == "rmsnorm"

    def norm(prefix):
        """A norm layer: scale, plus bias for LayerNorm."""
        return {prefix + ".scale": (D,)} if rms else \
            {prefix + ".scale": (D,), prefix + ".bias": (D,)}

    expert = moe_cfg.get("expert", "mlp")
    shared = moe_cfg.get("shared_experts", 0)
    for i in range(desc["depth"]):
        p = f"blocks.{i}."
        shapes.update(norm(p + "ln1"))
        shapes.update({p + "attn.qkv.kernel": (D, 3 * D),
                       p + "attn.qkv.bias": (3 * D,),
                       p + "attn.out.kernel": (D, D),
                       p + "attn.out.bias": (D,)})
        shapes.update(norm(p + "ln2"))
        if i in moe and layer_settings(desc, i)["routing"] == "soft":
            P = layer_settings(desc, i)["slots_per_expert"]
            shapes.update({p + "moe.phi": (D, E, P), p + "moe.scale": ()})
            shapes.update(expert_shapes(p + "moe", "mlp", E, D, He))
        elif i in moe:
            shapes.update({p + "moe.router.kernel": (D, E)})
            shapes.update(expert_shapes(p + "moe", expert, E, D, He))
        if i in moe and shared:
            shapes.update(expert_shapes(p + "moe.shared", expert, shared, D,
                                        He))
        if i not in moe:
            shapes.update({p + "mlp.fc1.kernel": (D, H),
                           p + "mlp.fc1.bias": (H,),
                           p + "mlp.fc2.kernel": (H, D),
                           p + "mlp.fc2.bias": (D,)})
    shapes.update(norm("final_ln"))
    if desc["head"] == "map":
        shapes.update({"map.probe": (1, D),
                       "map.attn.q.kernel": (D, D), "map.attn.q.bias": (D,),
                       "map.attn.kv.kernel": (D, 2 * D),
                       "map.attn.kv.bias": (2 * D,),
                       "map.attn.out.kernel": (D, D),
                       "map.attn.out.bias": (D,)})
        shapes.update(norm("map.ln"))
        shapes.update({"map.mlp.fc1.kernel": (D, H), "map.mlp.fc1.bias": (H,),
                       "map.mlp.fc2.kernel": (H, D),
                       "map.mlp.fc2.bias": (D,)})
    R = desc.get("representation_size")
    if R:
        shapes.update({"pre_logits.kernel": (D, R), "pre_logits.bias": (R,)})
    shapes.update({"head.kernel": (R or D, desc["classes"]),
                   "head.bias": (desc["classes"],)})
    return shapes


def expert_shapes(prefix, expert, count, D, H):
    """{name: shape} of `count` experts: MLP (w1, b1, w2, b2) or SwiGLU
    (w_gate, w_up, w_down)."""
    if expert == "swiglu":
        return {prefix + ".w_gate": (count, D, H),
                prefix + ".w_up": (count, D, H),
                prefix + ".w_down": (count, H, D)}
    return {prefix + ".w1": (count, D, H), prefix + ".b1": (count, H),
            prefix + ".w2": (count, H, D), prefix + ".b2": (count, D)}


# ---------------------------------------------------------------------------
# Safetensors (F32 only, as ModelFormat §3 requires): the user package's
# reader and writer (vmoe/safetensors.py, numpy only).

save_safetensors = safetensors.save
load_safetensors = safetensors.load


# ---------------------------------------------------------------------------
# Differentiable MoE layer (SPEC §3, forward values equal ops.moe_layer)

def dispatch_slots(ids, order, num_experts, limit, valid=None):
    """Slots [G,S,k] (int32) of SPEC §3 dispatch, computed without a loop.

    Choices are laid out in dispatch order (choice-major, tokens in priority
    order); a choice's position in its expert is the number of earlier
    choices of the same expert. Since an expert's fill only stops growing
    once it is full, a choice is kept iff that count is below `limit`, and
    then its slot is the count: exactly what the sequential walk gives.
    `valid` ([G,S] bool, None = all) masks tokens out of routing: their
    choices take no slot and do not count.
    """
    G, S, k = ids.shape
    ids = ids.long()
    if valid is None:
        valid = torch.ones(G, S, dtype=torch.bool)
    if order is not None:
        index = order.long().unsqueeze(-1).expand(G, S, k)
        ids = torch.gather(ids, 1, index)
        valid = torch.gather(valid, 1, order.long())
    sequence = ids.transpose(1, 2).reshape(G, k * S)
    present = valid.repeat(1, k)
    onehot = F.one_hot(sequence, num_experts) * present.unsqueeze(-1)
    earlier = onehot.cumsum(1) - onehot
    count = torch.gather(earlier, 2, sequence.unsqueeze(-1)).squeeze(-1)
    slots = torch.where(present & (count < limit), count,
                        torch.full_like(count, -1))
    slots = slots.reshape(G, k, S).transpose(1, 2)
    if order is not None:
        slots = torch.empty_like(slots).scatter_(1, index, slots)
    return slots.to(torch.int32)


def gather_buffers(x, ids, slots, num_experts, capacity):
    """Buffers [E,G,B,D]: row (e,g,b) is the token placed there, else 0.

    A gather from x (with an appended zero row for empty slots), so the
    gradient reaches the dispatched tokens.
    """
    G, S, D = x.shape
    g, t, i = torch.nonzero(slots >= 0, as_tuple=True)
    token = torch.full((num_experts, G, capacity), S, dtype=torch.long)
    token[ids[g, t, i].long(), g, slots[g, t, i].long()] = t
    padded = torch.cat([x, x.new_zeros(G, 1, D)], dim=1)
    return padded[torch.arange(G).view(1, G, 1), token]


def _squared_cv(values):
    """Squared coefficient of variation over the last dim (population std),
    averaged over the leading (group) dims."""
    mean = values.mean(-1)
    var = values.var(-1, unbiased=False)
    return (var / mean.square()).mean()


def auxiliary_loss(logits, noisy_logits, gates, k, noise_std):
    """V-MoE load-balancing loss (paper appendix A.2), averaged over groups.

    importance: squared CV of the per-expert sums of the (noisy) gates.
    load: P(expert e is among the top-k) under fresh noise of std
    `noise_std` (= noise_std/E of SPEC): 1 - Phi((threshold - logit_e)/std),
    threshold = the k-th largest noisy logit; summed over tokens, squared
    CV over experts. Returns (importance + load) / 2.
    """
    importance = _squared_cv(gates.sum(1))
    threshold = torch.topk(noisy_logits, k, dim=-1).values[..., -1:]
    z = (threshold - logits) / noise_std
    probability = 1.0 - 0.5 * (1.0 + torch.erf(z / math.sqrt(2.0)))
    load = _squared_cv(probability.sum(1))
    return 0.5 * (importance + load)


def moe_forward(x, router, w1, b1, w2, b2, *, k, num_experts, capacity_ratio,
                routing="vanilla", score="max", capacity_rule="round",
                multiple_of=1, activation="gelu_tanh", order="softmax_topk",
                normalize=False, noise=None, noise_std=1.0, capacity=None,
                valid=None, w_up=None, precision="f32"):
    """One MoE layer on x [G,S,D]; the batched twin of ops.moe_layer.

    Same arguments and result dict as ops.moe_layer (gates, ids, weights,
    order, slots, buffers, y, out, B), plus `aux_loss` when `noise`
    ([G,S,E] standard normal, training only) is given; its std is
    noise_std/E. `capacity` (an int) fixes B instead of capacity_ratio.
    `valid` ([G,S] bool) masks tokens out of routing (dispatch_slots).
    With `w_up` the experts are SwiGLU (decoder.expert_swiglu): w1 is the
    gate kernel, w2 the down kernel, b1 and b2 unused.
    `precision` "bf16": the expert MLPs as ops.expert_ffn computes them in
    bf16 (routing stays f32).
    """
    S = x.shape[1]
    if noise is None:
        gates, ids, weights = ops.route(x, router, k, order=order,
                                        normalize=normalize)
    else:
        gates, ids, weights = ops.route(x, router, k, order=order,
                                        normalize=normalize, noise=noise,
                                        noise_std=noise_std)
    if routing == "vanilla":
        priority = None
    elif routing == "bpr":
        priority = ops.bpr_sort(gates, score,
                                k if score == "sum_topk" else None)
    else:
        raise ValueError(f"unknown routing {routing!r}")
    B = capacity or ops.sized_capacity(k, S, capacity_ratio, num_experts,
                                       capacity_rule, multiple_of)
    slots = dispatch_slots(ids, priority, num_experts, B, valid)
    buffers = gather_buffers(x, ids, slots, num_experts, B)
    if w_up is None:
        y = ops.expert_ffn(buffers, w1, b1, w2, b2, activation, precision)
    else:
        y = decoder.expert_swiglu(buffers, w1, w_up, w2)
    out = ops.combine(y, ids, slots, weights)
    result = {"gates": gates, "ids": ids, "weights": weights,
              "order": priority, "slots": slots, "buffers": buffers, "y": y,
              "out": out, "B": B}
    if noise is not None:
        logits = torch.matmul(x, router)
        std = noise_std / num_experts
        result["aux_loss"] = auxiliary_loss(logits, logits + noise * std,
                                            gates, k, std)
    return result


# ---------------------------------------------------------------------------
# Modules (parameter names = safetensors names of ModelFormat §3)

def _xavier(*shape):
    """Xavier-uniform kernel [in, out] (Flax's default for ViT Dense)."""
    fan_in, fan_out = shape[-2], shape[-1]
    bound = math.sqrt(6.0 / (fan_in + fan_out))
    return nn.Parameter(torch.empty(*shape).uniform_(-bound, bound))


class Dense(nn.Module):
    """x · kernel + bias, kernel [in, out]."""

    def __init__(self, d_in, d_out, zero=False):
        super().__init__()
        self.kernel = (nn.Parameter(torch.zeros(d_in, d_out)) if zero
                       else _xavier(d_in, d_out))
        self.bias = nn.Parameter(torch.zeros(d_out))
        # Number format of the product (set_precision).
        self.precision = "f32"

    def forward(self, x):
        if self.precision == "bf16":
            # bf16-rounded rows times bf16-rounded kernel, exact products
            # accumulated in f32; the bias stays f32.
            return torch.matmul(ops.round_bf16(x),
                                ops.round_bf16(self.kernel)) + self.bias
        return torch.matmul(x, self.kernel) + self.bias


class LayerNorm(nn.Module):
    """LayerNorm over the last dim, population variance, scale and bias."""

    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.scale = nn.Parameter(torch.ones(dim))
        self.bias = nn.Parameter(torch.zeros(dim))

    def forward(self, x):
        return F.layer_norm(x, x.shape[-1:], self.scale, self.bias, self.eps)


class RMSNorm(nn.Module):
    """RMSNorm over the last dim: x / sqrt(mean(x^2) + eps) * scale."""

    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.scale = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        ms = x.square().mean(-1, keepdim=True)
        return x * (1.0 / torch.sqrt(ms + self.eps)) * self.scale


def make_norm(desc):
    """The norm layer of a description (`norm`: LayerNorm or RMSNorm)."""
    D, eps = desc["width"], desc["layer_norm_epsilon"]
    if desc.get("norm") == "rmsnorm":
        return RMSNorm(D, eps)
    return LayerNorm(D, eps)


class Attention(nn.Module):
    """Multi-head self-attention with a packed [D, 3D] qkv kernel."""

    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.qkv = Dense(dim, 3 * dim)
        self.out = Dense(dim, dim)
        # Number format of q kᵀ and p v (set_precision): with "bf16" both
        # operands are rounded to bf16, products exact, sums f32.
        self.precision = "f32"

    def forward(self, x):
        N, T, D = x.shape
        dh = D // self.heads
        rnd = ops.round_bf16 if self.precision == "bf16" else (lambda t: t)
        # [N, T, 3D] -> 3 x [N, heads, T, dh]: q, k, v; head h in columns
        # h*dh .. (h+1)*dh of each.
        q, k, v = self.qkv(x).view(N, T, 3, self.heads, dh).permute(
            2, 0, 3, 1, 4)
        scores = torch.matmul(rnd(q), rnd(k).transpose(-1, -2)) / math.sqrt(dh)
        mixed = torch.matmul(rnd(torch.softmax(scores, dim=-1)), rnd(v))
        return self.out(mixed.transpose(1, 2).reshape(N, T, D))


class Mlp(nn.Module):
    """Dense MLP: act(x · fc1 + b) · fc2 + b."""

    def __init__(self, dim, hidden, activation):
        super().__init__()
        self.activation = activation
        self.fc1 = Dense(dim, hidden)
        self.fc2 = Dense(hidden, dim)

    def forward(self, x):
        return self.fc2(ops.activate(self.fc1(x), self.activation))


class Router(nn.Module):
    """Router kernel [D, E], no bias."""

    def __init__(self, dim, num_experts):
        super().__init__()
        self.kernel = nn.Parameter(torch.randn(dim, num_experts) * 0.02)


def _valid_tokens(N, T, valid_images, S):
    """[N*T/S, S] bool: the tokens of the first valid_images of N images
    (T tokens each) in groups of S, or None when valid_images is None."""
    if valid_images is None:
        return None
    return (torch.arange(N * T) < valid_images * T).reshape(N * T // S, S)


def _add_experts(module, expert, count, dim, hidden):
    """Registers `count` experts on `module`: MLP (w1, b1, w2, b2) or SwiGLU
    (w_gate, w_up, w_down)."""
    if expert == "swiglu":
        module.w_gate = _xavier(count, dim, hidden)
        module.w_up = _xavier(count, dim, hidden)
        module.w_down = _xavier(count, hidden, dim)
        return
    module.w1 = _xavier(count, dim, hidden)
    module.b1 = nn.Parameter(torch.zeros(count, hidden))
    module.w2 = _xavier(count, hidden, dim)
    module.b2 = nn.Parameter(torch.zeros(count, dim))


class SharedExperts(nn.Module):
    """moe.shared_experts experts (MLP or SwiGLU) every token passes
    through; their outputs are added in ascending order (SPEC §8)."""

    def __init__(self, dim, hidden, layer):
        super().__init__()
        self.expert = layer["expert"]
        self.activation = layer["activation"]
        self.count = layer["shared_experts"]
        _add_experts(self, self.expert, self.count, dim, hidden)

    def add_to(self, routed, x):
        """routed [N, T, D] + sum over the shared experts of expert(x)."""
        N, T, D = x.shape
        buffers = x.reshape(1, 1, N * T, D).expand(self.count, 1, N * T, D)
        if self.expert == "swiglu":
            y = decoder.expert_swiglu(buffers, self.w_gate, self.w_up,
                                      self.w_down)
        else:
            y = ops.expert_ffn(buffers, self.w1, self.b1, self.w2, self.b2,
                               self.activation)
        out = routed
        for e in range(self.count):
            out = out + y[e, 0].reshape(N, T, D)
        return out


class MoE(nn.Module):
    """Sparse MoE layer: router plus E expert MLPs (w1, b1, w2, b2) or, with
    moe.expert "swiglu", E SwiGLU experts (w_gate, w_up, w_down)."""

    def __init__(self, dim, hidden, moe):
        super().__init__()
        E = moe["num_experts"]
        self.cfg = moe
        self.router = Router(dim, E)
        _add_experts(self, moe.get("expert", "mlp"), E, dim, hidden)
        # Number format of the expert MLPs (set_expert_precision).
        self.precision = "f32"

    def forward(self, x, tokens_per_group, routing, score, capacity_ratio,
                valid_images=None, training_seed=None):
        """x [N, T, D] -> (out [N, T, D], layer result dict).

        Tokens are grouped [G, S, D] image by image; router noise (and the
        auxiliary loss) only in training mode. With `valid_images`, the
        tokens of the images after the first valid_images are masked out of
        routing (padding). With `training_seed`, the training graph of
        vmoe-compile --training: the router noise of noise.training_noise
        for this block and the seed, and `losses` (losses.router_losses,
        [G] each) in the result.
        """
        N, T, D = x.shape
        grouped = x.reshape(N * T // tokens_per_group, tokens_per_group, D)
        valid = _valid_tokens(N, T, valid_images, grouped.shape[1])
        cfg = self.cfg
        if "routing" in cfg["explicit"] or routing is None:
            routing = cfg["routing"]
        if "score" in cfg["explicit"] or score is None:
            score = cfg["score"]
        if routing not in TOKEN_CHOICE:
            raise ValueError(f"a token choice layer cannot run with routing "
                             f"{routing!r}")
        noise = None
        if self.training:
            noise = torch.randn(*grouped.shape[:2], cfg["num_experts"])
        if training_seed is not None:
            noise = router_noise.training_noise(
                training_seed, self.block,
                grouped.shape[:2] + (cfg["num_experts"],))
        # Dropless: B = S, every expert has room for every token.
        capacity = (tokens_per_group if is_dropless(cfg)
                    else cfg.get("capacity"))
        swiglu = cfg.get("expert") == "swiglu"
        result = moe_forward(
            grouped, self.router.kernel,
            self.w_gate if swiglu else self.w1,
            None if swiglu else self.b1,
            self.w_down if swiglu else self.w2,
            None if swiglu else self.b2,
            k=cfg["k"], num_experts=cfg["num_experts"],
            capacity_ratio=capacity_ratio, routing=routing, score=score,
            capacity_rule=cfg.get("capacity_rule", "round"),
            multiple_of=cfg.get("multiple_of", 1), activation=cfg["activation"],
            order=cfg["order"], normalize=cfg["normalize"], noise=noise,
            capacity=capacity, valid=valid, precision=self.precision,
            w_up=self.w_up if swiglu else None,
            **({} if training_seed is None
               else {"noise_std": TRAINING_NOISE_STD}))
        if training_seed is not None:
            result["losses"] = aux_losses.router_losses(
                grouped, self.router.kernel, cfg["k"], noise,
                TRAINING_NOISE_STD)
        result["valid"] = valid
        result["routing"] = routing
        return result["out"].reshape(N, T, D), result


def set_expert_precision(net, precision):
    """Computes the expert MLPs of every token choice MoE layer of `net` in
    `precision` ("f32" or "bf16", as `vmoe-compile --precision`)."""
    if precision not in ("f32", "bf16"):
        raise ValueError(f"unknown precision {precision!r}")
    for module in net.modules():
        if type(module) is MoE:
            module.precision = precision


# Panel width of the CPU target's packed weights: dense kernels whose
# output width is a multiple of it are stored in panels, and as bf16 pair
# panels with --precision=bf16 (docs/ModelFormat.md §5).
PANEL_WIDTH = 16


def set_precision(net, precision, attention=True):
    """Computes `net` as `vmoe-compile --precision` does on the CPU target:
    with "bf16", the token choice experts (set_expert_precision) and every
    dense layer whose kernel is stored in panels (N a multiple of
    PANEL_WIDTH: patch embedding, attention projections, dense MLPs,
    pre-logits, MAP head layers; not the routers, nor a head of 1000 or 10
    classes) multiply bf16-rounded rows by bf16-rounded kernels; the
    blocks' attention products q kᵀ and p v multiply bf16-rounded operands
    unless `attention` is false (`--bf16-attention=false`; the MAP head's
    stay f32); softmax, routing and everything else stay f32."""
    set_expert_precision(net, precision)
    for module in net.modules():
        if isinstance(module, Attention):
            module.precision = precision if attention else "f32"
        if isinstance(module, Dense):
            packed = module.kernel.shape[-1] % PANEL_WIDTH == 0
            module.precision = precision if packed else "f32"


class ExpertChoiceMoE(MoE):
    """Expert choice layer (SPEC §8): the parameters of MoE (router [D, E]
    plus E expert MLPs), expert choice routing."""

    def forward(self, x, tokens_per_group, routing, score, capacity_ratio,
                valid_images=None, training_seed=None):
        """x [N, T, D] -> (out [N, T, D], expertchoice.expert_choice_layer's
        dict plus `routing` and `valid`). routing/score are unused; the
        tokens of the images after the first valid_images are never
        taken. No training graph (training_seed must be None)."""
        del routing, score
        if training_seed is not None:
            raise ValueError("training graphs have token choice layers only")
        N, T, D = x.shape
        grouped = x.reshape(N * T // tokens_per_group, tokens_per_group, D)
        valid = _valid_tokens(N, T, valid_images, grouped.shape[1])
        cfg = self.cfg
        result = expertchoice.expert_choice_layer(
            grouped, self.router.kernel, self.w1, self.b1, self.w2, self.b2,
            num_experts=cfg["num_experts"], capacity_ratio=capacity_ratio,
            capacity_rule=cfg.get("capacity_rule", "round"),
            multiple_of=cfg.get("multiple_of", 1),
            activation=cfg["activation"],
            valid=valid,
            capacity=(tokens_per_group if is_dropless(cfg)
                      else cfg.get("capacity")))
        result["routing"] = "expert_choice"
        result["valid"] = valid
        return result["out"].reshape(N, T, D), result


class SoftMoE(nn.Module):
    """Soft MoE layer (SPEC §8): slot parameters phi [D, E, P], the scalar
    scale, and E expert MLPs; groups of soft_group_size images."""

    def __init__(self, dim, hidden, layer, tokens_per_image):
        super().__init__()
        E, P = layer["num_experts"], layer["slots_per_expert"]
        self.cfg = layer
        self.tokens_per_group = layer.get("soft_group_size", 1) * \
            tokens_per_image
        # Google's init: lecun_normal phi (fan-in D), scale 1.
        self.phi = nn.Parameter(torch.randn(dim, E, P) / math.sqrt(dim))
        self.scale = nn.Parameter(torch.ones(()))
        self.w1 = _xavier(E, dim, hidden)
        self.b1 = nn.Parameter(torch.zeros(E, hidden))
        self.w2 = _xavier(E, hidden, dim)
        self.b2 = nn.Parameter(torch.zeros(E, dim))

    def forward(self, x, tokens_per_group, routing, score, capacity_ratio,
                valid_images=None, training_seed=None):
        """x [N, T, D] -> (out [N, T, D], softmoe.soft_moe's dict plus
        `routing` and `groups`). The MoE group size and capacity do not
        apply; the tokens of the images after the first valid_images are
        masked out of the dispatch softmax. No training graph."""
        del tokens_per_group, routing, score, capacity_ratio
        if training_seed is not None:
            raise ValueError("training graphs have token choice layers only")
        N, T, D = x.shape
        S = self.tokens_per_group
        valid = _valid_tokens(N, T, valid_images, S)
        result = softmoe.soft_moe(x.reshape(N * T // S, S, D), self.phi,
                                  self.scale, self.w1, self.b1, self.w2,
                                  self.b2, self.cfg["activation"], valid)
        result["routing"] = "soft"
        result["groups"] = N * T // S
        return result["out"].reshape(N, T, D), result


class Block(nn.Module):
    """Pre-norm encoder block: x + attn(ln1(x)), then x + mlp|moe(ln2(x))
    (moe: the routed experts plus the shared experts, if any)."""

    def __init__(self, desc, is_moe, block=None):
        super().__init__()
        D = desc["width"]
        self.ln1 = make_norm(desc)
        self.attn = Attention(D, desc["heads"])
        self.ln2 = make_norm(desc)
        if is_moe:
            layer = layer_settings(desc, block)
            if layer["routing"] == "soft":
                self.moe = SoftMoE(D, desc["moe"]["mlp_dim"], layer,
                                   tokens_per_image(desc))
            elif layer["routing"] == "expert_choice":
                self.moe = ExpertChoiceMoE(D, desc["moe"]["mlp_dim"], layer)
            else:
                self.moe = MoE(D, desc["moe"]["mlp_dim"], layer)
            self.moe.block = block  # the router noise's block index
            if layer.get("shared_experts", 0):
                self.moe.shared = SharedExperts(D, desc["moe"]["mlp_dim"],
                                                layer)
        else:
            self.mlp = Mlp(D, desc["mlp_dim"], desc["mlp_activation"])
        self.is_moe = is_moe

    def forward(self, x, **moe_args):
        x = x + self.attn(self.ln1(x))
        if not self.is_moe:
            return x + self.mlp(self.ln2(x)), None
        normed = self.ln2(x)
        out, result = self.moe(normed, **moe_args)
        if hasattr(self.moe, "shared"):
            out = self.moe.shared.add_to(out, normed)
        return x + out, result


class MAPHead(nn.Module):
    """Multihead attention pooling (big_vision's MAPHead, timm's
    AttentionPoolLatent): a learned probe attends to the tokens (query
    q, keys and values kv: k before v, head h in columns h*dh .. (h+1)*dh
    of each), then p + mlp(ln(p))."""

    def __init__(self, desc):
        super().__init__()
        D = desc["width"]
        self.heads = desc["heads"]
        self.probe = nn.Parameter(torch.randn(1, D) * 0.02)
        self.attn = nn.Module()
        self.attn.q = Dense(D, D)
        self.attn.kv = Dense(D, 2 * D)
        self.attn.out = Dense(D, D)
        self.ln = make_norm(desc)
        self.mlp = Mlp(D, desc["mlp_dim"], desc["mlp_activation"])

    def forward(self, x):
        N, T, D = x.shape
        dh = D // self.heads
        q = self.attn.q(self.probe).view(self.heads, 1, dh)
        k, v = self.attn.kv(x).view(N, T, 2, self.heads, dh).permute(
            2, 0, 3, 1, 4)
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(dh)
        mixed = torch.matmul(torch.softmax(scores, dim=-1), v)
        pooled = self.attn.out(mixed.reshape(N, D))
        return pooled + self.mlp(self.ln(pooled))


class VMoE(nn.Module):
    """The V-MoE ViT of ModelFormat §2, built from a description dict."""

    def __init__(self, description):
        super().__init__()
        desc = parse_description(description)
        self.desc = desc
        D, C, (ph, pw) = desc["width"], desc["image"]["channels"], \
            desc["patch_size"]
        self.moe_block_ids = description_moe_blocks(desc)
        self.embedding = Dense(C * ph * pw, D)
        if desc["head"] == "token":
            self.cls_token = nn.Parameter(torch.zeros(1, D))
        self.pos_embedding = nn.Parameter(
            torch.randn(tokens_per_image(desc), D) * 0.02)
        self.blocks = nn.ModuleList(
            Block(desc, i in self.moe_block_ids, i)
            for i in range(desc["depth"]))
        self.final_ln = make_norm(desc)
        if desc["head"] == "map":
            self.map = MAPHead(desc)
        R = desc.get("representation_size")
        if R:
            self.pre_logits = Dense(D, R)
        self.head = Dense(R or D, desc["classes"], zero=True)

    def patches(self, images):
        """[N, C, H, W] -> [N, P, C*ph*pw], patches row-major, (c, i, j)."""
        N, C, H, W = images.shape
        ph, pw = self.desc["patch_size"]
        x = images.reshape(N, C, H // ph, ph, W // pw, pw)
        return x.permute(0, 2, 4, 1, 3, 5).reshape(
            N, (H // ph) * (W // pw), C * ph * pw)

    def forward(self, images, routing=None, score=None, capacity_ratio=None,
                valid_images=None, training_seed=None):
        """Normalized images [N, C, H, W] -> (logits [N, classes], layers).

        routing / score / capacity_ratio override the description's moe
        settings (None = the description's). N must fill whole routing
        groups (a multiple of images_per_group_unit). With valid_images,
        the images after the first valid_images are padding, masked out of
        routing. `layers` holds the result dict of each MoE layer (see
        moe_forward), in block order. `training_seed`: the training graph
        of vmoe-compile --training --seed (noisy gating, losses).
        """
        T = tokens_per_image(self.desc)
        moe_args = {}
        if "moe" in self.desc:
            moe = self.desc["moe"]
            unit = images_per_group_unit(self.desc)
            if images.shape[0] % unit:
                raise ValueError(f"batch of {images.shape[0]} images does "
                                 f"not fill whole routing groups (a "
                                 f"multiple of {unit} images)")
            moe_args = {
                "tokens_per_group": tokens_per_group(self.desc),
                "routing": routing or moe["routing"],
                "score": score or moe["score"],
                "capacity_ratio": (moe.get("capacity_ratio")
                                   if capacity_ratio is None
                                   else capacity_ratio),
                "valid_images": valid_images,
                "training_seed": training_seed}
        x = self.embedding(self.patches(images))
        if self.desc["head"] == "token":
            cls = self.cls_token.expand(x.shape[0], 1, -1)
            x = torch.cat([cls, x], dim=1)
        x = x + self.pos_embedding
        layers = []
        for block in self.blocks:
            x, result = block(x, **moe_args)
            if result is not None:
                layers.append(result)
        return self.classify(x), layers

    def classify(self, x):
        """Encoded tokens [N, T, D] -> logits: final_ln (on the tokens or on
        the pooled vector), pooling, pre-logits (dense + tanh), head."""
        if self.desc["final_norm"] == "tokens":
            x = self.final_ln(x)
        if self.desc["head"] == "token":
            pooled = x[:, 0]
        elif self.desc["head"] == "gap":
            pooled = x.mean(1)
        else:
            pooled = self.map(x)
        if self.desc["final_norm"] == "pooled":
            pooled = self.final_ln(pooled)
        if self.desc.get("representation_size"):
            pooled = torch.tanh(self.pre_logits(pooled))
        return self.head(pooled)

    def export_tensors(self):
        """{name: float32 numpy array} in ModelFormat §3 names and order."""
        params = dict(self.named_parameters())
        return {name: params[name].detach().cpu().numpy().astype(np.float32)
                for name in expected_shapes(self.desc)}

    def load_tensors(self, tensors):
        """Loads {name: array}; every §3 tensor, exact shapes, no extras."""
        shapes = expected_shapes(self.desc)
        missing = [n for n in shapes if n not in tensors]
        if missing:
            raise ValueError(f"missing tensor {missing[0]!r}"
                             + (f" (and {len(missing) - 1} more)"
                                if len(missing) > 1 else ""))
        extra = [n for n in tensors if n not in shapes]
        if extra:
            raise ValueError(f"unexpected tensor {extra[0]!r}")
        for name, shape in shapes.items():
            if tuple(np.shape(tensors[name])) != shape:
                raise ValueError(f"tensor {name!r}: shape "
                                 f"{list(np.shape(tensors[name]))}, expected "
                                 f"{list(shape)}")
        params = dict(self.named_parameters())
        with torch.no_grad():
            for name, value in tensors.items():
                params[name].copy_(torch.from_numpy(
                    np.asarray(value, dtype=np.float32)))


def load_model(description_path, weights_path):
    """A VMoE from a description JSON and a safetensors file, in eval mode."""
    model = VMoE(load_description(description_path))
    model.load_tensors(load_safetensors(weights_path))
    return model.eval()


# ---------------------------------------------------------------------------
# Evaluation (ModelFormat §4 normalization, padded batches, §5 stats)

def value_range(desc):
    """(a, b) of the value_range op of the description's `preprocess`, or
    None."""
    if "preprocess" not in desc:
        return None
    try:
        return parse_preprocess(desc["preprocess"]).value_range
    except ImporterError as err:
        raise DescriptionError(str(err)) from None


def normalize_images(images_uint8, mean, std, bounds=None):
    """uint8 [N, C, H, W] -> float32 (x - mean[c]) / std[c] with x = p/255,
    or with value_range's bounds (a, b) x = a + (p/255)·(b - a), a and
    b - a rounded to float32 (docs/ModelFormat.md §4)."""
    x = torch.as_tensor(np.asarray(images_uint8, dtype=np.uint8))
    x = x.float() / 255.0
    if bounds is not None:
        low, high = bounds
        x = torch.tensor(low, dtype=torch.float32) + x * torch.tensor(
            high - low, dtype=torch.float32)
    mean = torch.tensor(mean, dtype=torch.float32).view(1, -1, 1, 1)
    std = torch.tensor(std, dtype=torch.float32).view(1, -1, 1, 1)
    return (x - mean) / std


PADDINGS = ("masked", "zeros")


def layer_stats(layer, num_experts):
    """The statistics row [E + 1] (int64) of one MoE layer result dict."""
    E = num_experts
    row = np.zeros(E + 1, dtype=np.int64)
    if layer["routing"] == "expert_choice":
        row += expertchoice.expert_choice_stats(
            layer["slots"], layer.get("valid"))["histogram"].numpy()
    elif layer["routing"] == "soft":
        row[:E] = layer["groups"] * layer["slots_in"].shape[2]
    else:
        s = ops.routing_stats(layer["ids"], layer["slots"], E,
                              layer.get("valid"))
        row[:E] = s["fill"].numpy()
        row[E] = s["dropped"]
    return row


def evaluate(model, images_uint8, mean=None, std=None, batch=None,
             routing=None, score=None, capacity_ratio=None, padding="masked",
             training_seed=None):
    """Runs the model on uint8 images [N, C, H, W] in batches.

    batch (default: images_per_group_unit) must fill whole routing groups.
    The last batch is padded with all-zero images (after normalization);
    with padding "masked" (the default, as the runtime) their tokens are
    masked out of routing, with "zeros" (the original V-MoE evaluation)
    they take part in it. mean/std default to the description's input
    normalization; routing/score/capacity_ratio to its moe settings.
    Returns (logits float32 [N, classes] of the real images, stats int32
    [L, E + 1]: per MoE layer, summed over all groups of all batches, for
    token choice the kept choices per expert then the dropped choices
    (masked tokens count in neither); for expert choice the histogram of
    experts per token (entry j: tokens taken by j experts); for Soft MoE the
    slots each expert processed, then 0).
    With `training_seed` (the training graph of vmoe-compile --training
    --seed), also returns the losses float64 [L, 3]: per MoE layer the
    importance, load and GShard losses, each the mean over all routing
    groups of all batches (padding images included).
    """
    if padding not in PADDINGS:
        raise ValueError(f"unknown padding {padding!r}")
    desc = model.desc
    mean = desc["input"]["mean"] if mean is None else mean
    std = desc["input"]["std"] if std is None else std
    batch = images_per_group_unit(desc) if batch is None else batch
    E = desc["moe"]["num_experts"] if "moe" in desc else 0
    images = np.asarray(images_uint8, dtype=np.uint8)
    n = images.shape[0]
    stats = np.zeros((len(model.moe_block_ids), E + 1), dtype=np.int64)
    losses = np.zeros((len(model.moe_block_ids), 3))
    logits = []
    was_training = model.training
    model.eval()
    with torch.no_grad():
        for start in range(0, n, batch):
            real = min(batch, n - start)
            x = normalize_images(images[start:start + real], mean, std,
                                 value_range(desc))
            if real < batch:
                x = torch.cat([x, x.new_zeros((batch - real,) + x.shape[1:])])
            out, layers = model(
                x, routing=routing, score=score,
                capacity_ratio=capacity_ratio,
                valid_images=real if padding == "masked" else None,
                training_seed=training_seed)
            logits.append(out[:real].numpy())
            for row, layer in zip(stats, layers):
                row += layer_stats(layer, E)
            if training_seed is not None:
                for row, layer in zip(losses, layers):
                    row += [float(layer["losses"][key].double().mean())
                            for key in ("importance", "load", "gshard")]
    model.train(was_training)
    batches = -(-n // batch)
    extra = (() if training_seed is None
             else (losses / max(batches, 1),))
    if not logits:
        return (np.zeros((0, desc["classes"]), np.float32),
                stats.astype(np.int32)) + extra
    return (np.concatenate(logits).astype(np.float32),
            stats.astype(np.int32)) + extra
