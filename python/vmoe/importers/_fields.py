"""The fields of a model description read as vmoe-compile's front end
reads them (lib/Frontend/ModelDescription.cpp's FieldReader): types,
ranges, choices, defaults, placement, capacity, groups, overrides, the
`preprocess` pipeline (preprocess.py) and unknown fields, each error the
compiler's one line naming the field.
`parse` returns the values with the compiler's defaults (for checks.py).
"""

import math

from ..errors import ImporterError
from .limits import MAX_CAPACITY_RATIO, MAX_DEPTH, MAX_DIMENSION, shortest
from .preprocess import check as check_preprocess
from .preprocess import parse as parse_preprocess

__all__ = ["ACTIVATIONS", "ROUTINGS", "as_integer", "parse"]

ACTIVATIONS = ("gelu_tanh", "gelu_erf", "relu", "silu")
ROUTINGS = ("vanilla", "bpr", "expert_choice", "soft")
_INT64 = (-(1 << 63), (1 << 63) - 1)


def as_integer(value):
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
        value = as_integer(self.get(key))
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
        index = as_integer(entry)
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
        sizes = [as_integer(v) for v in value] if len(value) == 2 else []
        if len(sizes) != 2 or any(s is None or s < 1 for s in sizes):
            f.fail("patch_size", "must be an integer >= 1 or a list "
                                 "[height, width] of two")
        return tuple(sizes)
    size = f.integer("patch_size", 1)
    return size, size


def _preprocess(f, m, has_input):
    """ModelDescription.cpp's parsePreprocessField: the pipeline checked
    against the image; its value_range and `input` both normalize."""
    if "preprocess" not in f.obj:
        f.seen.add("preprocess")
        return
    spec = parse_preprocess(f.string("preprocess"))
    check_preprocess(spec, m["channels"], m["height"], m["width"])
    if spec.value_range is not None and has_input:
        f.fail("input", "not used with value_range in preprocess (both "
                        "normalize the pixels: give one)")


def parse(desc):
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
    _preprocess(f, m, source is not None)
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
