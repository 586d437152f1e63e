"""V-MoE's model config (`config.model` of its configs, as JSON) for the
Flax importer: loading, typed fields, and the description's `moe` object.

A whole training config (JSON with a `model` object, e.g. ml_collections'
`get_config().to_json()`) gives its `model` with `evaluate.model_overrides`
applied, and the evaluation pipeline of `dataset.test.process` (else
`dataset.val`, else the first other entry but `train` with a `process`);
its other fields are training settings, not read (split_config).

Every field is read or explicitly ignored (training, initialization or
partitioning only); an unknown field, a value of the wrong type, NaN or
infinity, k = 0 or k > E, an unknown capacity rule ... is an
ImporterError naming the field: `config: encoder.moe.router.
num_selected_experts: 0, expected an integer in 1..8`.

Three routers of the original become three description families:

  router name                        description            routing weights
  NoisyTopExpertsPerItemRouter       vanilla / bpr          Router/dense/kernel
  (the paper's; the default)         (dispatcher.batch_priority)
  NoisyTopItemsPerExpertRouter       expert_choice          Router/dense/kernel
  SoftRouter (projects/soft_moe)     soft                   Router/mu, scale

The dispatchers' capacity defaults are the original's (ceil, a multiple
of 4: vmoe.moe.compute_capacity), written into the description
explicitly, not the description's own defaults (round, 1).
"""

import math
import os

from . import released
from .common import ImporterError, read_json
from .common import show_json as _show

__all__ = ["Config", "load_config", "split_config", "moe_settings",
           "check_model", "ROUTERS"]

ROUTERS = {"NoisyTopExpertsPerItemRouter": "token",
           "NoisyTopItemsPerExpertRouter": "expert_choice",
           "SoftRouter": "soft",
           "vmoe.projects.soft_moe.router.SoftRouter": "soft"}

# Objects of the config whose fields are listed one by one.
_OBJECTS = ("encoder", "encoder.moe", "encoder.moe.router",
            "encoder.moe.router.dispatcher", "encoder.position_emb")

# Read and ignored: training, initialization or partitioning only.
_IGNORED = ("deterministic", "head_bias_init", "head_kernel_zero_init",
            "encoder.dropout_rate", "encoder.attention_dropout_rate",
            "encoder.moe.dropout_rate", "encoder.moe.split_rngs",
            "encoder.moe.router.noise_std",
            "encoder.moe.router.deterministic")
_IGNORED_BY_FAMILY = {
    "token": ("gshard_loss_weight", "importance_loss_weight",
              "load_loss_weight", "dispatcher.partition_spec",
              "dispatcher.einsum_precision"),
    "expert_choice": ("dispatcher.partition_spec",
                      "dispatcher.einsum_precision"),
    "soft": ("partition_spec", "precision", "compute_similarity_metrics"),
}


def load_config(config):
    """The config dict of `config`: a dict, the name of a released
    checkpoint (released.py), or the path of a JSON file; None stays
    None."""
    if config is None or isinstance(config, dict):
        return config
    if not isinstance(config, str):
        raise ImporterError("config: expected a dict, a JSON file or a "
                            "released checkpoint's name")
    if config in released.ENSEMBLES:
        raise ImporterError(f"config: {config} is an E^3 ensemble "
                            "(VisionTransformerMoeEnsemble): not supported")
    named = released.config(config)
    if named is not None:
        return named
    if not os.path.exists(config) and os.sep not in config and \
            not config.endswith(".json"):
        raise ImporterError(f"config: {config!r}: no such file, nor a "
                            "released checkpoint's name ("
                            + ", ".join(released.CONFIGS) + ")")
    value = read_json(config, "model config")
    if not isinstance(value, dict):
        raise ImporterError(f"{config}: must be a JSON object (config.model"
                            ")")
    return value


def _merged(base, override):
    """`base` with the fields of `override` replaced, objects merged."""
    out = dict(base)
    for key, value in override.items():
        out[key] = _merged(out[key], value) if isinstance(value, dict) and \
            isinstance(out.get(key), dict) else value
    return out


def split_config(value):
    """(config.model, evaluation `process` or None, its field) of a loaded
    config: a whole training config (a `model` object) or config.model."""
    if not isinstance(value, dict) or not isinstance(value.get("model"),
                                                     dict):
        return value, None, None
    model = value["model"]
    overrides = (value.get("evaluate") or {})
    overrides = overrides.get("model_overrides") \
        if isinstance(overrides, dict) else None
    if overrides is not None:
        if not isinstance(overrides, dict):
            raise ImporterError("config: evaluate.model_overrides: expected "
                                f"an object, got {_show(overrides)}")
        model = _merged(model, overrides)
    datasets = value.get("dataset") or {}
    if not isinstance(datasets, dict):
        raise ImporterError(f"config: dataset: expected an object, got "
                            f"{_show(datasets)}")
    names = [n for n in ("test", "val") if n in datasets] + [
        n for n in datasets if n not in ("test", "val", "train")]
    for name in names:
        entry = datasets[name]
        if isinstance(entry, dict) and "process" in entry:
            return model, entry["process"], f"config: dataset.{name}.process"
    return model, None, None


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


class Config:
    """A V-MoE model config dict, read field by field (paths named)."""

    def __init__(self, config):
        self.config = config or {}
        self.seen = set()
        if not isinstance(self.config, dict):
            raise ImporterError("config: must be a JSON object")
        for path in _OBJECTS:
            value = self.get(path)
            if value is not None and not isinstance(value, dict):
                raise ImporterError(f"config: {path}: expected an object, "
                                    f"got {_show(value)}")
        self.seen.clear()

    def __bool__(self):
        return bool(self.config)

    def get(self, path, default=None):
        node = self.config
        for part in path.split("."):
            if not isinstance(node, dict) or part not in node:
                return default
            node = node[part]
        self.seen.add(path)
        return default if node is None else node

    def has(self, path):
        return self.get(path) is not None

    def integer(self, path, default=None, low=1, high=None):
        value = self.get(path, default)
        if value is None:
            return None
        if not _is_int(value) or value < low or (high is not None and
                                                 value > high):
            bound = f"in {low}..{high}" if high is not None else f">= {low}"
            raise ImporterError(f"config: {path}: {_show(value)}, expected "
                                f"an integer {bound}")
        return value

    def number(self, path, default=None):
        """A finite number > 0."""
        value = self.get(path, default)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) \
                or not math.isfinite(value) or value <= 0:
            raise ImporterError(f"config: {path}: {_show(value)}, expected "
                                "a finite number > 0")
        return float(value)

    def boolean(self, path, default=False):
        value = self.get(path, default)
        if not isinstance(value, bool):
            raise ImporterError(f"config: {path}: {_show(value)}, expected "
                                "true or false")
        return value

    def choice(self, path, default, choices):
        value = self.get(path, default)
        if value not in choices:
            raise ImporterError(f"config: {path}: {_show(value)}, expected "
                                "one of " + ", ".join(map(repr, choices)))
        return value

    def int_list(self, path):
        value = self.get(path)
        if value is None:
            return None
        if not isinstance(value, list) or not all(
                _is_int(v) and v >= 0 for v in value) or \
                len(set(value)) != len(value):
            raise ImporterError(f"config: {path}: {_show(value)}, expected "
                                "a list of distinct block indices")
        return sorted(value)

    def ignore(self, *paths):
        self.seen.update(paths)

    def ignore_tree(self, path):
        """Marks `path` and every field below it read."""
        def walk(node, prefix):
            self.seen.add(prefix)
            if isinstance(node, dict):
                for key, value in node.items():
                    walk(value, f"{prefix}.{key}")
        node = self.config
        for part in path.split("."):
            if not isinstance(node, dict) or part not in node:
                return
            node = node[part]
        walk(node, path)

    def check_no_moe(self):
        """A dense checkpoint: encoder.moe may only list no layers (its
        other fields are then unused, as in the original)."""
        layers = self.int_list("encoder.moe.layers")
        if layers:
            raise ImporterError(f"config: encoder.moe.layers: {layers}, the "
                                "weights have no MoE block")
        self.ignore_tree("encoder.moe")

    def check_unknown(self):
        """Fails on the first field nobody read."""
        def walk(node, prefix):
            for key, value in node.items():
                path = prefix + key
                if path in _OBJECTS and isinstance(value, dict):
                    walk(value, path + ".")
                elif path not in self.seen:
                    raise ImporterError(f"config: {path}: unknown field")
        walk(self.config, "")


def moe_settings(cfg, weights, tokens, source):
    """The description's moe object. `weights`: blocks (list), experts,
    expert_dim, mlp_dim (the dense width, None without dense blocks and
    MAP head), family ('dense_router' or 'soft') and slots (Soft MoE P)."""
    blocks, experts = weights["blocks"], weights["experts"]
    if not cfg:
        raise ImporterError(
            f"{source}: MoE blocks {blocks} need the model config "
            "(--config: JSON of config.model, or a released checkpoint's "
            "name: " + ", ".join(released.CONFIGS) + ")")
    layers = cfg.int_list("encoder.moe.layers")
    if layers != blocks:
        raise ImporterError(f"config: encoder.moe.layers: {_show(layers)} "
                            "does not match the MoE blocks of the weights "
                            f"{blocks}")
    num = cfg.integer("encoder.moe.num_experts")
    if num != experts:
        raise ImporterError(f"config: encoder.moe.num_experts: {_show(num)}"
                            f", the weights have {experts} experts")
    # The experts' width: moe.mlp_dim, else the encoder's (vit_moe.py).
    cfg_mlp = cfg.integer("encoder.moe.mlp_dim") or cfg.integer(
        "encoder.mlp_dim")
    if cfg_mlp is not None and cfg_mlp != weights["expert_dim"]:
        path = "encoder.moe.mlp_dim" if cfg.has("encoder.moe.mlp_dim") \
            else "encoder.mlp_dim"
        raise ImporterError(f"config: {path}: {cfg_mlp}, the experts are "
                            f"{weights['expert_dim']} wide")
    group = cfg.integer("encoder.moe.group_size")
    if group is None:
        raise ImporterError("config: encoder.moe.group_size: missing "
                            "(tokens per routing group)")
    name = cfg.choice("encoder.moe.router.name",
                      "NoisyTopExpertsPerItemRouter", tuple(ROUTERS))
    family = ROUTERS[name]
    if (family == "soft") != (weights["family"] == "soft"):
        raise ImporterError(
            f"config: encoder.moe.router.name: {name!r}, the weights have "
            + ("a Soft MoE router (Router/mu)" if weights["family"] == "soft"
               else "a dense router (Router/dense/kernel)"))
    cfg.ignore(*("encoder.moe.router." + p
                 for p in _IGNORED_BY_FAMILY[family]))
    moe = {"placement": "layers", "layers": blocks, "num_experts": experts}
    if family == "token":
        moe.update(_token_choice(cfg, experts))
    elif family == "expert_choice":
        moe.update(_expert_choice(cfg))
    else:
        moe.update(_soft(cfg, experts, group, tokens, weights["slots"]))
    moe["activation"] = "gelu_tanh"
    if weights["expert_dim"] != weights["description_mlp_dim"]:
        moe["mlp_dim"] = weights["expert_dim"]
    if family != "soft":
        if group % tokens == 0:
            moe["group_size"] = group // tokens
        else:
            moe["group_tokens"] = group
    return moe


_D = "encoder.moe.router.dispatcher."


def _capacity(cfg):
    """capacity or capacity_factor (+ rule, multiple) of the dispatcher,
    with vmoe.moe.compute_capacity's defaults: ceil, a multiple of 4."""
    capacity = cfg.integer(_D + "capacity")
    factor = cfg.number(_D + "capacity_factor")
    if (capacity is None) == (factor is None):
        raise ImporterError(f"config: {_D}capacity / capacity_factor: give "
                            "exactly one")
    rule = cfg.choice(_D + "capacity_ceil_or_round", "ceil",
                      ("ceil", "round"))
    multiple = cfg.get(_D + "capacity_multiple_of", 4)
    if not _is_int(multiple):
        raise ImporterError(f"config: {_D}capacity_multiple_of: "
                            f"{_show(multiple)}, expected an integer (<= 0 "
                            "or null: none)")
    if capacity is not None:
        # The original applies neither rule nor multiple to a fixed one.
        return {"capacity": capacity}
    return {"capacity_ratio": factor, "capacity_rule": rule,
            "multiple_of": max(multiple, 1)}


def _dispatcher_name(cfg, names):
    cfg.choice(_D + "name", names[0], names)
    cfg.boolean(_D + "bfloat16")


def _token_choice(cfg, experts):
    k = cfg.integer("encoder.moe.router.num_selected_experts", 1,
                    high=experts)
    _dispatcher_name(cfg, ("einsum", "indices"))
    bpr = cfg.boolean(_D + "batch_priority")
    out = {"k": k}
    out.update(_capacity(cfg))
    out.update({"routing": "bpr" if bpr else "vanilla", "score": "max",
                "order": "softmax_topk", "normalize": False})
    return out


def _expert_choice(cfg):
    _dispatcher_name(cfg, ("einsum",))
    out = {"routing": "expert_choice"}
    out.update(_capacity(cfg))
    return out


def _soft(cfg, experts, group, tokens, slots):
    r = "encoder.moe.router."
    num_slots = cfg.integer(r + "num_slots")
    factor = cfg.get(r + "capacity_factor", 1.0)
    if num_slots is None:
        factor = cfg.number(r + "capacity_factor", 1.0)
        # compute_capacity(S, E, C, round, multiple_of=1): Python's round.
        want = round(group * factor / experts)
        what = f"round({group} * {factor:g} / {experts}) = {want}"
        if want < 1:
            raise ImporterError(f"config: {r}capacity_factor: {what} slots "
                                "per expert")
    else:
        want, what = num_slots, str(num_slots)
    if want != slots:
        raise ImporterError(f"config: {r}num_slots: {what}, the weights "
                            f"(Router/mu) have {slots} slots per expert")
    if group % tokens:
        raise ImporterError(f"config: encoder.moe.group_size: {group} "
                            f"tokens are not whole images of {tokens} "
                            "tokens (a Soft MoE group is whole images)")
    images = group // tokens
    return {"routing": "soft", "slots_per_expert": slots,
            "group_size": images, "soft_group_size": images}


def check_model(cfg, *, width, depth, heads, mlp_dim, classes, head, patch,
                representation, mlp_checked):
    """Every config field that the weights also determine must agree;
    `mlp_checked` False: nothing in the weights has encoder.mlp_dim's
    width (every block a MoE, no MAP head)."""
    if not cfg:
        return
    name = cfg.get("name", "VisionTransformerMoe")
    if name != "VisionTransformerMoe":
        raise ImporterError(f"config: name: {_show(name)} is not supported "
                            "(VisionTransformerMoe only)")
    checks = [("hidden_size", width), ("encoder.num_layers", depth),
              ("encoder.num_heads", heads), ("num_classes", classes)]
    if mlp_checked:
        checks.append(("encoder.mlp_dim", mlp_dim))
    else:
        cfg.integer("encoder.mlp_dim")
    for path, value in checks:
        got = cfg.get(path)
        if got is not None and (not _is_int(got) or got != value):
            raise ImporterError(f"config: {path}: {_show(got)}, the weights "
                                f"say {value}")
    got = cfg.get("representation_size")
    if got is not None and (not _is_int(got) or got != representation):
        raise ImporterError(f"config: representation_size: {_show(got)}, "
                            f"the weights say {representation}")
    if got is None and "representation_size" in cfg.config and \
            representation:
        raise ImporterError(f"config: representation_size: null, the "
                            f"weights have pre_logits of {representation}")
    size = cfg.get("patch_size")
    if size is not None:
        pair = size if isinstance(size, list) else [size, size]
        if pair != list(patch):
            raise ImporterError(f"config: patch_size: {_show(size)}, the "
                                f"weights say {list(patch)}")
    classifier = cfg.get("classifier")
    if classifier is not None and (not isinstance(classifier, str) or {
            "0": "token"}.get(classifier, classifier) != head):
        raise ImporterError(f"config: classifier: {_show(classifier)}, the "
                            f"weights have a {head!r} head")
    if cfg.get("encoder.attention_qk_norm", False) is not False:
        raise ImporterError("config: encoder.attention_qk_norm: not "
                            "supported (only false)")
    position = cfg.get("encoder.position_emb.name", "learned")
    if position != "learned":
        raise ImporterError(f"config: encoder.position_emb.name: "
                            f"{_show(position)} is not supported (learned "
                            "only)")
    cfg.ignore(*_IGNORED, "name")
    cfg.check_unknown()
