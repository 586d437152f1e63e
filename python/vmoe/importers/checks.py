"""The rules of a model description, as vmoe-compile applies them.

`check_description` refuses, with the compiler's one-line message, every
description that vmoe-compile would refuse at its default options: the
field rules of lib/Frontend/ModelDescription.cpp (types, ranges, choices,
unknown fields, placement, capacity, groups, overrides), the size limits of
docs/Limits.md (SizeLimits.cpp), and the checks ModelBuilder.cpp makes
before building (capacity rounding to 0 slots, buffers above the limits).
`weight_layout` is the compiler's tensor layout (name -> shape), so that
`write_model` can check the weights against the description. The checks
of option values (`number`, `integer`) use the same limits.
"""

import math

from ..errors import ImporterError

__all__ = ["MAX_DIMENSION", "MAX_DEPTH", "MAX_TENSOR_ELEMENTS",
           "MAX_CAPACITY_RATIO", "check_description",
           "integer", "number", "weight_layout"]

# docs/Limits.md (include/vmoe/Support/Limits.h).
MAX_DIMENSION = 1 << 24
MAX_TENSOR_ELEMENTS = 1 << 40
MAX_TOTAL_WEIGHTS = 1 << 40
MAX_DEPTH = 1024
MAX_CAPACITY_RATIO = 4096.0

ACTIVATIONS = ("gelu_tanh", "gelu_erf", "relu", "silu")
ROUTINGS = ("vanilla", "bpr", "expert_choice", "soft")
_INT64 = (-(1 << 63), (1 << 63) - 1)


def shortest(value):
    """`value` as the compiler prints a double (%g, shortest round trip)."""
    value = float(value)
    for precision in range(1, 18):
        text = f"{value:.{precision}g}"
        if float(text) == value or math.isnan(value):
            return text
    return text


def _as_integer(value):
    """llvm::json's getAsInteger: an int, or a double with no fraction."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if _INT64[0] <= value <= _INT64[1] else None
    if isinstance(value, float) and math.isfinite(value) and \
            value == int(value) and _INT64[0] <= value <= _INT64[1]:
        return int(value)
    return None


def _as_number(value):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _quote_list(choices):
    return ", ".join(f'"{c}"' for c in choices)


class _Fields:
    """Reads one JSON object field by field (ModelDescription.cpp's
    FieldReader): errors name the dotted path; the fields never read are
    unknown."""

    def __init__(self, obj, prefix):
        self.obj, self.prefix, self.seen = obj, prefix, set()

    def path(self, key):
        return self.prefix + key

    def fail(self, key, message):
        raise ImporterError(f"{self.path(key)}: {message}")

    def get(self, key):
        self.seen.add(key)
        return self.obj.get(key)

    def has(self, key):
        return self.get(key) is not None or key in self.obj

    def integer(self, key, minimum, default=None, maximum=MAX_DIMENSION):
        if key not in self.obj:
            self.seen.add(key)
            if default is None:
                self.fail(key, "missing (required)")
            return default
        value = _as_integer(self.get(key))
        if value is None:
            self.fail(key, "must be an integer")
        if value < minimum:
            self.fail(key, f"must be >= {minimum}, got {value}")
        if value > maximum:
            self.fail(key, f"must be <= {maximum} (the limit), got {value}")
        return value

    def positive(self, key, default, maximum=math.inf):
        if key not in self.obj:
            self.seen.add(key)
            return default
        value = _as_number(self.get(key))
        if value is None:
            self.fail(key, "must be a number")
        if not math.isfinite(value) or value <= 0:
            self.fail(key, f"must be a finite number > 0, got "
                           f"{shortest(value)}")
        if value > maximum:
            self.fail(key, f"must be <= {shortest(maximum)} (the limit), got "
                           f"{shortest(value)}")
        return value

    def boolean(self, key, default):
        if key not in self.obj:
            self.seen.add(key)
            return default
        value = self.get(key)
        if not isinstance(value, bool):
            self.fail(key, "must be true or false")
        return value

    def string(self, key, default=None, choices=()):
        if key not in self.obj:
            self.seen.add(key)
            if default is None:
                self.fail(key, "missing (required)")
            return default
        value = self.get(key)
        if not isinstance(value, str):
            self.fail(key, "must be a string")
        if choices and value not in choices:
            self.fail(key, f"must be one of {_quote_list(choices)}, got "
                           f"\"{value}\"")
        return value

    def object(self, key, required):
        if key not in self.obj:
            self.seen.add(key)
            if required:
                self.fail(key, "missing (required)")
            return None
        value = self.get(key)
        if not isinstance(value, dict):
            self.fail(key, "must be an object")
        return value

    def numbers(self, key, count, default):
        if key not in self.obj:
            self.seen.add(key)
            return default
        value = self.get(key)
        if not isinstance(value, list):
            self.fail(key, "must be a list of numbers")
        if len(value) != count:
            self.fail(key, f"must have {count} entries (one per channel), "
                           f"got {len(value)}")
        numbers = [_as_number(v) for v in value]
        if any(n is None or not math.isfinite(n) for n in numbers):
            self.fail(key, "must be a list of finite numbers")
        return numbers

    def only_used_by(self, key, used, users, routing):
        if not used and key in self.obj:
            self.seen.add(key)
            self.fail(key, f"only used by routing {users}, got routing "
                           f"\"{routing}\"")

    def reject_unknown(self):
        for key in self.obj:
            if key not in self.seen:
                self.fail(key, "unknown field")


def _block_list(fields, key, what, allow_empty):
    """A list of distinct block indices (>= 0, below the depth limit)."""
    value = fields.get(key)
    if not isinstance(value, list) or (not allow_empty and not value):
        fields.fail(key, what)
    blocks = []
    for entry in value:
        index = _as_integer(entry)
        if index is None or index < 0:
            fields.fail(key, "must be a list of block indices (integers >= "
                             "0)" if allow_empty else
                        "must be a list of integers >= 0")
        if index >= MAX_DEPTH:
            fields.fail(key, f"block {index} is not below the depth limit "
                             f"{MAX_DEPTH}")
        if index in blocks:
            fields.fail(key, f"block {index} is listed twice")
        blocks.append(index)
    return blocks


def _swiglu_activation(fields, expert):
    if expert != "swiglu" or "activation" not in fields.obj:
        return
    value = fields.get("activation")
    if value != "silu":
        got = f'"{value}"' if isinstance(value, str) else "a non-string"
        fields.fail("activation", "SwiGLU experts (moe.expert \"swiglu\") "
                                  f"use silu, got {got}")


_OVERRIDE_STRINGS = (("score", ("max", "sum_topk")),
                     ("order", ("softmax_topk", "topk_softmax")),
                     ("capacity_rule", ("round", "ceil")))


def _override(value, index, moe):
    prefix = f"moe.overrides[{index}]"
    if not isinstance(value, dict):
        raise ImporterError(f"{prefix}: must be an object")
    f = _Fields(value, prefix + ".")
    if "blocks" not in value:
        f.fail("blocks", "missing (required)")
    entry = {"blocks": _block_list(f, "blocks", "must be a non-empty list "
                                   "of block indices", False)}
    if "routing" in value:
        entry["routing"] = f.string("routing", choices=ROUTINGS)
    routing = entry.get("routing", moe["routing"])
    token_choice = routing in ("vanilla", "bpr")
    f.only_used_by("k", token_choice, "vanilla or bpr", routing)
    if "k" in value:
        entry["k"] = f.integer("k", 1)
    for key, choices in _OVERRIDE_STRINGS[:2]:
        if key in value:
            entry[key] = f.string(key, choices=choices)
    if "normalize" in value:
        entry["normalize"] = f.boolean("normalize", False)
    key, choices = _OVERRIDE_STRINGS[2]
    if key in value:
        entry[key] = f.string(key, choices=choices)
    if "multiple_of" in value:
        entry["multiple_of"] = f.integer("multiple_of", 1)
    _swiglu_activation(f, moe["expert"])
    if "activation" in value:
        entry["activation"] = f.string("activation", choices=ACTIVATIONS)
    for key in ("slots_per_expert", "soft_group_size"):
        f.only_used_by(key, routing == "soft", '"soft"', routing)
    for key in ("slots_per_expert", "soft_group_size"):
        if key in value:
            entry[key] = f.integer(key, 1)
    f.reject_unknown()
    return entry


def _placement(f, moe):
    moe["placement"] = f.string("placement", choices=(
        "every-2", "every-n", "last-n", "layers"))
    for key, placement in (("last_n", "last-n"), ("every", "every-n"),
                           ("layers", "layers")):
        if moe["placement"] != placement and key in f.obj:
            f.fail(key, f"only used with placement \"{placement}\"")
    if moe["placement"] == "last-n":
        moe["last_n"] = f.integer("last_n", 1)
    elif moe["placement"] == "every-n":
        moe["every"] = f.integer("every", 1)
    elif moe["placement"] == "layers":
        if "layers" not in f.obj:
            f.fail("layers", "missing (required)")
        moe["layers"] = sorted(_block_list(
            f, "layers", "must be a list of block indices", True))


def _capacity(f, moe):
    if "capacity" in f.obj:
        for key in ("capacity_ratio", "capacity_rule", "multiple_of"):
            if key in f.obj:
                f.fail(key, "not used with a fixed moe.capacity")
        moe["capacity"] = f.integer("capacity", 1)
        return
    ratio = f.obj.get("capacity_ratio")
    if isinstance(ratio, str):
        f.seen.add("capacity_ratio")
        if ratio != "none":
            f.fail("capacity_ratio", "must be a number > 0 or \"none\" "
                                     f"(dropless), got \"{ratio}\"")
        for key in ("capacity_rule", "multiple_of"):
            if key in f.obj:
                f.fail(key, "not used with moe.capacity_ratio \"none\" "
                            "(dropless)")
        moe["dropless"] = True
        return
    moe["capacity_ratio"] = f.positive("capacity_ratio", 1.05,
                                       MAX_CAPACITY_RATIO)
    moe["capacity_rule"] = f.string("capacity_rule", "round",
                                    ("round", "ceil"))
    moe["multiple_of"] = f.integer("multiple_of", 1, 1)


def _moe(obj):
    f = _Fields(obj, "moe.")
    moe = {"capacity": 0, "dropless": False, "capacity_ratio": 1.05,
           "capacity_rule": "round", "multiple_of": 1, "group_tokens": 0,
           "group_size": 1, "k": 0}
    _placement(f, moe)
    moe["num_experts"] = f.integer("num_experts", 1)
    moe["routing"] = f.string("routing", "vanilla", ROUTINGS)
    token_choice = moe["routing"] in ("vanilla", "bpr")
    f.only_used_by("k", token_choice, "vanilla or bpr", moe["routing"])
    if token_choice:
        moe["k"] = f.integer("k", 1)
    moe["mlp_dim"] = f.integer("mlp_dim", 1, 0)
    moe["expert"] = f.string("expert", "mlp", ("mlp", "swiglu"))
    moe["shared_experts"] = f.integer("shared_experts", 0, 0)
    _capacity(f, moe)
    moe["score"] = f.string("score", "max", ("max", "sum_topk"))
    moe["order"] = f.string("order", "softmax_topk",
                            ("softmax_topk", "topk_softmax"))
    moe["normalize"] = f.boolean("normalize", False)
    _swiglu_activation(f, moe["expert"])
    moe["activation"] = f.string(
        "activation", "silu" if moe["expert"] == "swiglu" else "gelu_tanh",
        ACTIVATIONS)
    if "group_tokens" in f.obj:
        if "group_size" in f.obj:
            f.fail("group_tokens", "give moe.group_size or "
                                   "moe.group_tokens, not both")
        moe["group_tokens"] = f.integer("group_tokens", 1)
    else:
        moe["group_size"] = f.integer("group_size", 1)
    for key in ("slots_per_expert", "soft_group_size"):
        f.only_used_by(key, moe["routing"] == "soft", '"soft"',
                       moe["routing"])
    moe["slots_per_expert"] = f.integer("slots_per_expert", 1, 0)
    moe["soft_group_size"] = f.integer("soft_group_size", 1, 1)
    moe["overrides"] = []
    if "overrides" in obj:
        overrides = f.get("overrides")
        if not isinstance(overrides, list):
            f.fail("overrides", "must be a list of objects")
        if len(overrides) > MAX_DEPTH:
            f.fail("overrides", f"has {len(overrides)} entries, above the "
                                f"depth limit {MAX_DEPTH}")
        for index, value in enumerate(overrides):
            moe["overrides"].append(_override(value, index, moe))
    f.reject_unknown()
    return moe


def _patch_size(f):
    if "patch_size" not in f.obj:
        f.fail("patch_size", "missing (required)")
    value = f.get("patch_size")
    if isinstance(value, list):
        sizes = [_as_integer(v) for v in value] if len(value) == 2 else []
        if len(sizes) != 2 or any(s is None or s < 1 for s in sizes):
            f.fail("patch_size", "must be an integer >= 1 or a list "
                                 "[height, width] of two")
        return tuple(sizes)
    size = f.integer("patch_size", 1)
    return size, size


def _parse(desc):
    """The description's values with the compiler's defaults filled in."""
    if not isinstance(desc, dict):
        raise ImporterError("the description must be a JSON object")
    f = _Fields(desc, "")
    f.string("format", choices=("vmoe-model",))
    version = f.integer("version", 1)
    if version != 1:
        f.fail("version", f"must be 1, got {version}")
    f.string("name")
    m = {}
    image = _Fields(f.object("image", True), "image.")
    for key in ("height", "width", "channels"):
        m[key] = image.integer(key, 1)
    image.reject_unknown()
    source = f.object("input", False)
    if source is not None:
        inputs = _Fields(source, "input.")
        inputs.numbers("mean", m["channels"], None)
        std = inputs.numbers("std", m["channels"], [])
        if 0 in std:
            inputs.fail("std", "must not contain 0")
        inputs.reject_unknown()
    m["patch"] = _patch_size(f)
    m["d"] = f.integer("width", 1)
    m["depth"] = f.integer("depth", 1, maximum=MAX_DEPTH)
    m["heads"] = f.integer("heads", 1)
    m["mlp_dim"] = f.integer("mlp_dim", 1)
    m["classes"] = f.integer("classes", 1)
    if "class_names" in desc:
        names = f.get("class_names")
        if not isinstance(names, list) or not all(
                isinstance(n, str) for n in names):
            f.fail("class_names", "must be a list of strings")
        m["class_names"] = names
    m["head"] = f.string("head", choices=("token", "gap", "map"))
    f.string("final_norm", "tokens", ("tokens", "pooled"))
    m["representation"] = f.integer("representation_size", 1, 0)
    f.positive("layer_norm_epsilon", 1e-6)
    m["norm"] = f.string("norm", "layernorm", ("layernorm", "rmsnorm"))
    f.string("mlp_activation", "gelu_tanh", ACTIVATIONS)
    f.string("dtype", "f32", ("f32",))
    moe = f.object("moe", False)
    m["moe"] = None if moe is None else _moe(moe)
    f.reject_unknown()
    return m


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
    rounded = math.ceil(raw) if rule == "ceil" else round(raw)  # nearbyint: ties to even
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
    for block in _moe_blocks(m):
        layer = _layer(moe, block)[0]
        soft = layer["routing"] == "soft"
        k = layer["k"] if layer["routing"] in ("vanilla", "bpr") else 1
        slots = 0
        for ratio in ratios:
            if soft:
                slots = _slots_per_expert(m, layer)
                break
            slots, raw = (fixed, 0) if fixed else _capacity_of(
                k, _group_tokens(m), ratio, moe["num_experts"],
                layer["capacity_rule"], layer["multiple_of"])
            if slots < 1:
                raise ImporterError(
                    f"moe.capacity_ratio: capacity rounds to 0 (k*S*C/E = "
                    f"{k}*{_group_tokens(m)}*{shortest(ratio)}/"
                    f"{moe['num_experts']} = {shortest(raw)})")
        if slots > MAX_DIMENSION:
            raise ImporterError(
                f"{'moe.slots_per_expert' if soft else 'max-capacity-ratio'}"
                f": block {block} has capacity {slots} at capacity ratio "
                f"{shortest(ratios[1])}, above the limit {MAX_DIMENSION}")
        groups = max(1, n * t // _group_tokens(m, layer))
        _check_elements("max-capacity-ratio",
                        f"the expert buffers of block {block}",
                        (moe["num_experts"], groups, slots, width))


def check_description(desc):
    """Raises ImporterError (one line naming the field) unless
    vmoe-compile accepts `desc` at its default options; returns the
    weight layout [(name, shape)] the description needs."""
    m = _parse(desc)
    ph, pw = m["patch"]
    if m["height"] % ph or m["width"] % pw:
        raise ImporterError(
            f"patch_size: image {m['height']}x{m['width']} is not divisible "
            f"into {ph}x{pw} patches")
    if m["d"] % m["heads"]:
        raise ImporterError(f"heads: width {m['d']} is not divisible by "
                               f"{m['heads']} heads")
    if "class_names" in m and len(m["class_names"]) != m["classes"]:
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


def number(value, what, minimum=None, maximum=None, above=None):
    """`value` as a finite float in range, else ImporterError naming
    `what` (`above`: an exclusive lower bound)."""
    try:
        x = float(value)
    except (TypeError, ValueError, OverflowError):
        raise ImporterError(f"{what}: expected a number, got "
                               f"{value!r}") from None
    if not math.isfinite(x):
        raise ImporterError(f"{what}: must be a finite number, got "
                               f"{shortest(x)}")
    if above is not None and not x > above:
        raise ImporterError(f"{what}: must be > {shortest(above)}, got "
                               f"{shortest(x)}")
    if minimum is not None and x < minimum:
        raise ImporterError(f"{what}: must be >= {shortest(minimum)}, got "
                               f"{shortest(x)}")
    if maximum is not None and x > maximum:
        raise ImporterError(f"{what}: must be <= {shortest(maximum)} (the "
                               f"limit), got {shortest(x)}")
    return x


def integer(value, what, minimum=1, maximum=MAX_DIMENSION):
    """`value` as an int in [minimum, maximum], else ImporterError."""
    if isinstance(value, bool):
        value = None
    try:
        n = int(value) if isinstance(value, str) else \
            value.__index__()
    except (AttributeError, TypeError, ValueError):
        raise ImporterError(f"{what}: expected an integer, got "
                               f"{value!r}") from None
    if n < minimum:
        raise ImporterError(f"{what}: must be >= {minimum}, got {n}")
    if n > maximum:
        raise ImporterError(f"{what}: must be <= {maximum} (the limit), "
                               f"got {n}")
    return n
