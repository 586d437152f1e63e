"""The rules of a model description, as vmoe-compile applies them.

`check_description` refuses, with the compiler's one-line message, every
description that vmoe-compile would refuse at its default options: the
field rules (_fields.py), the rules across fields of
lib/Frontend/ModelDescription.cpp (placement, overrides, families), the
size limits of docs/Limits.md (SizeLimits.cpp), and the checks
ModelBuilder.cpp makes before building (capacity rounding to 0 slots,
buffers above the limits). `weight_layout` is the compiler's tensor
layout (name -> shape), so that `write_model` checks the weights too.
"""

import math

from ..errors import ImporterError
from ._fields import parse
from .limits import MAX_DIMENSION, MAX_TENSOR_ELEMENTS, MAX_TOTAL_WEIGHTS, \
    shortest

__all__ = ["check_description", "weight_layout"]


def _tokens(m):
    ph, pw = m["patch"]
    return (m["height"] // ph) * (m["width"] // pw) + \
        (1 if m["head"] == "token" else 0)


def _moe_blocks(m):
    moe = m["moe"]
    if moe is None:
        return []
    if moe["placement"] == "layers":
        return moe["layers"]
    step = moe["every"] if moe["placement"] == "every-n" else 2
    blocks = list(range(step - 1, m["depth"], step))
    if moe["placement"] == "last-n":
        blocks = blocks[max(0, len(blocks) - moe["last_n"]):]
    return blocks


def _layer(moe, block):
    """(settings of block's MoE layer, its overrides entry index or None)."""
    layer, index = dict(moe), None
    for i, entry in enumerate(moe["overrides"]):
        if block in entry["blocks"]:
            layer.update({k: v for k, v in entry.items() if k != "blocks"})
            index = i
    return layer, index


def _group_tokens(m, layer=None):
    moe = m["moe"]
    if layer is not None and layer["routing"] == "soft":
        return layer["soft_group_size"] * _tokens(m)
    return moe["group_tokens"] or moe["group_size"] * _tokens(m)


def _capacity_of(k, tokens, ratio, experts, rule, multiple):
    """Capacity.h's computeCapacity."""
    raw = k * tokens * ratio / experts
    # round() is std::nearbyint's rounding: half to even.
    rounded = math.ceil(raw) if rule == "ceil" else round(raw)
    if not rounded > 0:
        return 0, raw
    b = int(min(rounded, 1 << 62))
    if multiple > 1 and b % multiple:
        b += multiple - b % multiple
    return b, raw


def _slots_per_expert(m, layer):
    if layer["slots_per_expert"] > 0:
        return layer["slots_per_expert"]
    return _capacity_of(1, _group_tokens(m, layer), 1.0,
                        m["moe"]["num_experts"], "round", 1)[0]


def _field(index, key):
    return f"moe.overrides[{index}].{key}" if index is not None \
        else f"moe.{key}"


def _check_layers(m):
    moe, blocks = m["moe"], _moe_blocks(m)
    for index, entry in enumerate(moe["overrides"]):
        path = f"moe.overrides[{index}].blocks"
        for block in entry["blocks"]:
            if block not in blocks:
                listed = ", ".join(map(str, blocks)) or "none"
                raise ImporterError(f"{path}: block {block} is not a MoE "
                                       f"block (MoE blocks: {listed})")
            for other in range(index):
                if block in moe["overrides"][other]["blocks"]:
                    raise ImporterError(
                        f"{path}: block {block} is already in "
                        f"moe.overrides[{other}]")
    for block in blocks:
        layer, index = _layer(moe, block)
        entry = moe["overrides"][index] if index is not None else {}
        routing_field = _field(index if "routing" in entry else None,
                               "routing")
        token_choice = layer["routing"] in ("vanilla", "bpr")
        if not token_choice and layer["expert"] == "swiglu":
            raise ImporterError(
                f"{routing_field}: \"{layer['routing']}\" (block {block}) "
                "does not take moe.expert \"swiglu\" (token choice only: "
                "vanilla or bpr)")
        if not token_choice and layer["dropless"]:
            raise ImporterError(
                f"{routing_field}: \"{layer['routing']}\" (block {block}) "
                "does not take moe.capacity_ratio \"none\" (dropless is "
                "token choice only: vanilla or bpr)")
        if token_choice:
            field = _field(index if ("k" in entry or "routing" in entry)
                           else None, "k")
            if layer["k"] < 1:
                raise ImporterError(
                    f"{field}: missing (required by routing "
                    f"\"{layer['routing']}\" in block {block})")
            if layer["k"] > moe["num_experts"]:
                raise ImporterError(
                    f"{field}: must be <= moe.num_experts "
                    f"({moe['num_experts']}), got {layer['k']}")
        if layer["routing"] != "soft":
            continue
        if moe["group_size"] % layer["soft_group_size"]:
            field = _field(index if "soft_group_size" in entry else None,
                           "soft_group_size")
            raise ImporterError(
                f"{field}: must divide moe.group_size ({moe['group_size']}), "
                f"got {layer['soft_group_size']}")
        if _slots_per_expert(m, layer) < 1:
            field = _field(index if "slots_per_expert" in entry else None,
                           "slots_per_expert")
            raise ImporterError(
                f"{field}: missing, and round(S/E) = round("
                f"{_group_tokens(m, layer)}/{moe['num_experts']}) is 0 in "
                f"block {block}")


def _check_moe(m):
    moe = m["moe"]
    if moe["group_tokens"]:
        for block in _moe_blocks(m):
            if _layer(moe, block)[0]["routing"] == "soft":
                raise ImporterError(
                    "moe.group_tokens: not used by routing \"soft\" (block "
                    f"{block}): a Soft MoE group is whole images")
    odd = m["depth"] // 2
    if moe["placement"] == "last-n" and moe["last_n"] > odd:
        raise ImporterError(
            f"moe.last_n: depth {m['depth']} has only {odd} odd-indexed "
            f"blocks, got {moe['last_n']}")
    if moe["placement"] == "every-n" and moe["every"] > m["depth"]:
        raise ImporterError(f"moe.every: must be <= depth ({m['depth']}),"
                               f" got {moe['every']}")
    if moe["placement"] == "layers" and moe["layers"] and \
            moe["layers"][-1] >= m["depth"]:
        raise ImporterError(f"moe.layers: block {moe['layers'][-1]} does "
                               f"not exist (depth {m['depth']})")
    _check_layers(m)


def _check_tokens(m):
    ph, pw = m["patch"]
    patches = (m["height"] // ph) * (m["width"] // pw)
    if patches > MAX_DIMENSION:
        raise ImporterError(
            f"patch_size: {ph}x{pw} patches of a {m['height']}x{m['width']} "
            f"image are {patches} tokens, above the limit {MAX_DIMENSION}")
    vector = m["channels"] * ph * pw
    if vector > MAX_DIMENSION:
        raise ImporterError(
            f"patch_size: the patch vector of [{m['channels']}, {ph}, {pw}] "
            f"has {vector} elements, above the limit {MAX_DIMENSION}")
    moe = m["moe"]
    if moe is None or moe["group_tokens"]:
        return
    per_group = moe["group_size"] * _tokens(m)
    if per_group > MAX_DIMENSION:
        raise ImporterError(
            f"moe.group_size: {moe['group_size']} images of {_tokens(m)} "
            f"tokens are {per_group} tokens per group, above the limit "
            f"{MAX_DIMENSION}")


def _experts(prefix, kind, count, d, h):
    if kind == "swiglu":
        return [(prefix + ".w_gate", (count, d, h)),
                (prefix + ".w_up", (count, d, h)),
                (prefix + ".w_down", (count, h, d))]
    return [(prefix + ".w1", (count, d, h)), (prefix + ".b1", (count, h)),
            (prefix + ".w2", (count, h, d)), (prefix + ".b2", (count, d))]


def _layout(m):
    """[(name, shape)] in the compiler's order (weightLayout)."""
    d, h = m["d"], m["mlp_dim"]
    moe = m["moe"]
    he = (moe["mlp_dim"] or h) if moe else h
    out = []

    def dense(name, n_in, n_out):
        out.extend([(name + ".kernel", (n_in, n_out)),
                    (name + ".bias", (n_out,))])

    def norm(name):
        out.append((name + ".scale", (d,)))
        if m["norm"] == "layernorm":
            out.append((name + ".bias", (d,)))

    ph, pw = m["patch"]
    dense("embedding", m["channels"] * ph * pw, d)
    if m["head"] == "token":
        out.append(("cls_token", (1, d)))
    out.append(("pos_embedding", (_tokens(m), d)))
    blocks = set(_moe_blocks(m))
    for i in range(m["depth"]):
        b = f"blocks.{i}."
        norm(b + "ln1")
        dense(b + "attn.qkv", d, 3 * d)
        dense(b + "attn.out", d, d)
        norm(b + "ln2")
        if i not in blocks:
            dense(b + "mlp.fc1", d, h)
            dense(b + "mlp.fc2", h, d)
            continue
        layer = _layer(moe, i)[0]
        e = moe["num_experts"]
        if layer["routing"] == "soft":
            out.extend([(b + "moe.phi", (d, e, _slots_per_expert(m, layer))),
                        (b + "moe.scale", ())])
            out.extend(_experts(b + "moe", "mlp", e, d, he))
        else:
            out.append((b + "moe.router.kernel", (d, e)))
            out.extend(_experts(b + "moe", moe["expert"], e, d, he))
        if moe["shared_experts"]:
            out.extend(_experts(b + "moe.shared", moe["expert"],
                                moe["shared_experts"], d, he))
    norm("final_ln")
    if m["head"] == "map":
        out.append(("map.probe", (1, d)))
        dense("map.attn.q", d, d)
        dense("map.attn.kv", d, 2 * d)
        dense("map.attn.out", d, d)
        norm("map.ln")
        dense("map.mlp.fc1", d, h)
        dense("map.mlp.fc2", h, d)
    if m["representation"]:
        dense("pre_logits", d, m["representation"])
    dense("head", m["representation"] or d, m["classes"])
    return out


def _check_weight_sizes(layout):
    total = 0
    for name, shape in layout:
        n = math.prod(shape)
        if n > MAX_TENSOR_ELEMENTS:
            dims = ", ".join(map(str, shape))
            raise ImporterError(
                f"weights: tensor '{name}' [{dims}] has {n} elements, above "
                f"the limit {MAX_TENSOR_ELEMENTS}")
        total += (n + 15) // 16 * 16
    if total > MAX_TOTAL_WEIGHTS:
        raise ImporterError(f"weights: {total} floats in all, above the "
                               f"limit {MAX_TOTAL_WEIGHTS}")


def _check_elements(field, what, dims):
    n = math.prod(dims)
    if n > MAX_TENSOR_ELEMENTS:
        raise ImporterError(
            f"{field}: {what} [{', '.join(map(str, dims))}] has {n} "
            f"elements, above the limit {MAX_TENSOR_ELEMENTS}")


def _check_default_build(m):
    """ModelBuilder.cpp's validateBuildOptions and checkBuildSizes at the
    default options (one group per batch, max ratio max(C, 2))."""
    moe, t, d = m["moe"], _tokens(m), m["d"]
    he = (moe["mlp_dim"] or m["mlp_dim"]) if moe else m["mlp_dim"]
    n = 1
    if moe:
        n = moe["group_size"]
        if moe["group_tokens"]:
            n = math.lcm(moe["group_tokens"], t) // t
    if n > MAX_DIMENSION:
        raise ImporterError(
            f"groups-per-batch: 1 groups of {n} images, above the limit of "
            f"{MAX_DIMENSION} images per batch")
    _check_elements("groups-per-batch", "the input batch",
                    (n, m["channels"], m["height"], m["width"]))
    _check_elements("groups-per-batch", "the tokens",
                    (n, t, max(3 * d, m["mlp_dim"], he)))
    _check_elements("groups-per-batch", "the attention scores",
                    (n, m["heads"], t, t))
    if moe is None:
        return
    ratios = (moe["capacity_ratio"], max(moe["capacity_ratio"], 2.0))
    width = max(d, he)
    if moe["shared_experts"]:
        _check_elements("moe.shared_experts", "the shared expert buffers",
                        (moe["shared_experts"], n, t, width))
    fixed = _group_tokens(m) if moe["dropless"] else moe["capacity"]

    def capacity(layer, ratio):
        """(B, k*S*C/E, k) of a token or expert choice layer."""
        k = layer["k"] if layer["routing"] in ("vanilla", "bpr") else 1
        return _capacity_of(k, _group_tokens(m), ratio, moe["num_experts"],
                            layer["capacity_rule"], layer["multiple_of"]) \
            + (k,)

    for block in _moe_blocks(m):  # checkBuildSizes
        layer = _layer(moe, block)[0]
        soft = layer["routing"] == "soft"
        slots = _slots_per_expert(m, layer) if soft else \
            fixed or capacity(layer, ratios[1])[0]
        if slots > MAX_DIMENSION:
            raise ImporterError(
                f"{'moe.slots_per_expert' if soft else 'max-capacity-ratio'}"
                f": block {block} has capacity {slots} at capacity ratio "
                f"{shortest(ratios[1])}, above the limit {MAX_DIMENSION}")
        groups = max(1, n * t // _group_tokens(m, layer))
        _check_elements("max-capacity-ratio",
                        f"the expert buffers of block {block}",
                        (moe["num_experts"], groups, slots, width))
    for block in [] if fixed else _moe_blocks(m):  # validateBuildOptions
        layer = _layer(moe, block)[0]
        for ratio in ratios if layer["routing"] != "soft" else ():
            slots, raw, k = capacity(layer, ratio)
            if slots < 1:
                raise ImporterError(
                    f"moe.capacity_ratio: capacity rounds to 0 (k*S*C/E = "
                    f"{k}*{_group_tokens(m)}*{shortest(ratio)}/"
                    f"{moe['num_experts']} = {shortest(raw)})")


def check_description(desc):
    """Raises ImporterError (one line naming the field) unless
    vmoe-compile accepts `desc` at its default options; returns the
    weight layout [(name, shape)] the description needs."""
    m = parse(desc)
    ph, pw = m["patch"]
    if m["height"] % ph or m["width"] % pw:
        raise ImporterError(
            f"patch_size: image {m['height']}x{m['width']} is not divisible "
            f"into {ph}x{pw} patches")
    if m["d"] % m["heads"]:
        raise ImporterError(f"heads: width {m['d']} is not divisible by "
                               f"{m['heads']} heads")
    if m.get("class_names") and len(m["class_names"]) != m["classes"]:
        raise ImporterError(
            f"class_names: must have {m['classes']} entries (classes), got "
            f"{len(m['class_names'])}")
    _check_tokens(m)
    if m["moe"] is not None:
        _check_moe(m)
    layout = _layout(m)
    _check_weight_sizes(layout)
    _check_default_build(m)
    return layout


def weight_layout(desc):
    """{name: shape} of the weights `desc` needs (checked first)."""
    return dict(check_description(desc))
