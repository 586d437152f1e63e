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

from . import ops

# ---------------------------------------------------------------------------
# Model description (ModelFormat §1)

_TOP_FIELDS = ("format", "version", "name", "image", "input", "patch_size",
               "width", "depth", "heads", "mlp_dim", "classes", "class_names",
               "head", "layer_norm_epsilon", "mlp_activation", "dtype", "moe")
_MOE_FIELDS = ("placement", "last_n", "num_experts", "k", "capacity_ratio",
               "capacity_rule", "multiple_of", "routing", "score", "order",
               "normalize", "activation", "group_size")
_MOE_DEFAULTS = {"capacity_rule": "round", "multiple_of": 1,
                 "routing": "vanilla", "score": "max",
                 "order": "softmax_topk", "normalize": False,
                 "activation": "gelu_tanh"}
ROUTINGS = ("vanilla", "bpr")


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

    for key in ("patch_size", "width", "depth", "heads", "mlp_dim",
                "classes"):
        out[key] = _int(desc, key, "")
    for key in ("height", "width"):
        if out["image"][key] % out["patch_size"]:
            _fail("image." + key, f"must be divisible by patch_size "
                                  f"({out['patch_size']}), got "
                                  f"{out['image'][key]}")
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
    out["head"] = _choice(desc, "head", "", ("token", "gap"))
    out["layer_norm_epsilon"] = _positive_float(
        desc.get("layer_norm_epsilon", 1e-6), "layer_norm_epsilon")
    out["mlp_activation"] = _choice(desc, "mlp_activation", "",
                                    ops.ACTIVATIONS, "gelu_tanh")
    out["dtype"] = _choice(desc, "dtype", "", ("f32",), "f32")

    moe = desc.get("moe")
    if moe is None:
        _fail("moe", "missing required field")
    _check_fields(moe, _MOE_FIELDS, "moe.")
    m = {"placement": _choice(moe, "placement", "moe.",
                              ("every-2", "last-n"))}
    if m["placement"] == "last-n":
        m["last_n"] = _int(moe, "last_n", "moe.")
        odd_blocks = out["depth"] // 2
        if m["last_n"] > odd_blocks:
            _fail("moe.last_n", f"must be <= the number of odd-indexed "
                                f"blocks ({odd_blocks}), got {m['last_n']}")
    elif "last_n" in moe:
        _fail("moe.last_n", "only allowed with placement \"last-n\"")
    m["num_experts"] = _int(moe, "num_experts", "moe.")
    m["k"] = _int(moe, "k", "moe.")
    if m["k"] > m["num_experts"]:
        _fail("moe.k", f"must be <= moe.num_experts ({m['num_experts']}), "
                       f"got {m['k']}")
    if "capacity_ratio" not in moe:
        _fail("moe.capacity_ratio", "missing required field")
    m["capacity_ratio"] = _positive_float(moe["capacity_ratio"],
                                          "moe.capacity_ratio")
    m["capacity_rule"] = _choice(moe, "capacity_rule", "moe.",
                                 ops.CAPACITY_RULES, "round")
    m["multiple_of"] = (_int(moe, "multiple_of", "moe.")
                        if "multiple_of" in moe else 1)
    m["routing"] = _choice(moe, "routing", "moe.", ROUTINGS, "vanilla")
    m["score"] = _choice(moe, "score", "moe.", ops.PRIORITY_SCORES, "max")
    m["order"] = _choice(moe, "order", "moe.", ops.ROUTE_ORDERS,
                         "softmax_topk")
    normalize = moe.get("normalize", False)
    if not isinstance(normalize, bool):
        _fail("moe.normalize", f"must be true or false, got {normalize!r}")
    m["normalize"] = normalize
    m["activation"] = _choice(moe, "activation", "moe.", ops.ACTIVATIONS,
                              "gelu_tanh")
    m["group_size"] = _int(moe, "group_size", "moe.")
    out["moe"] = m
    # The default capacity must size to B >= 1 (SPEC §4).
    try:
        ops.sized_capacity(m["k"], m["group_size"] * tokens_per_image(out),
                           m["capacity_ratio"], m["num_experts"],
                           m["capacity_rule"], m["multiple_of"])
    except ValueError as err:
        _fail("moe.capacity_ratio", str(err))
    return out


def load_description(path):
    """Reads and validates a model description JSON file."""
    with open(path, encoding="utf-8") as f:
        try:
            desc = json.load(f)
        except json.JSONDecodeError as err:
            raise DescriptionError(f"{path}: invalid JSON: {err}") from None
    return parse_description(desc)


def num_patches(desc):
    """P = (height / patch) * (width / patch)."""
    ps = desc["patch_size"]
    return (desc["image"]["height"] // ps) * (desc["image"]["width"] // ps)


def tokens_per_image(desc):
    """T = P + 1 with a class token, P with mean pooling."""
    return num_patches(desc) + (1 if desc["head"] == "token" else 0)


def moe_blocks(depth, placement, last_n=None):
    """0-based indices of the MoE blocks (SPEC §5 placement rules).

    every-2: blocks 1, 3, 5, ...; last-n: the last n odd-indexed blocks.
    """
    odd = list(range(1, depth, 2))
    if placement == "every-2":
        return odd
    if placement == "last-n":
        if last_n is None or not 1 <= last_n <= len(odd):
            raise ValueError(f"last_n must be in [1, {len(odd)}], "
                             f"got {last_n}")
        return odd[len(odd) - last_n:]
    raise ValueError(f"unknown placement {placement!r}")


def expected_shapes(desc):
    """Ordered {name: shape} of every tensor of ModelFormat §3."""
    D, H, E = desc["width"], desc["mlp_dim"], desc["moe"]["num_experts"]
    C, ps = desc["image"]["channels"], desc["patch_size"]
    shapes = {"embedding.kernel": (C * ps * ps, D), "embedding.bias": (D,)}
    if desc["head"] == "token":
        shapes["cls_token"] = (1, D)
    shapes["pos_embedding"] = (tokens_per_image(desc), D)
    moe = set(moe_blocks(desc["depth"], desc["moe"]["placement"],
                         desc["moe"].get("last_n")))
    for i in range(desc["depth"]):
        p = f"blocks.{i}."
        shapes.update({p + "ln1.scale": (D,), p + "ln1.bias": (D,),
                       p + "attn.qkv.kernel": (D, 3 * D),
                       p + "attn.qkv.bias": (3 * D,),
                       p + "attn.out.kernel": (D, D),
                       p + "attn.out.bias": (D,),
                       p + "ln2.scale": (D,), p + "ln2.bias": (D,)})
        if i in moe:
            shapes.update({p + "moe.router.kernel": (D, E),
                           p + "moe.w1": (E, D, H), p + "moe.b1": (E, H),
                           p + "moe.w2": (E, H, D), p + "moe.b2": (E, D)})
        else:
            shapes.update({p + "mlp.fc1.kernel": (D, H),
                           p + "mlp.fc1.bias": (H,),
                           p + "mlp.fc2.kernel": (H, D),
                           p + "mlp.fc2.bias": (D,)})
    shapes.update({"final_ln.scale": (D,), "final_ln.bias": (D,),
                   "head.kernel": (D, desc["classes"]),
                   "head.bias": (desc["classes"],)})
    return shapes


# ---------------------------------------------------------------------------
# Safetensors (F32 only, as ModelFormat §3 requires): the user package's
# reader and writer (vmoe/safetensors.py, numpy only).

save_safetensors = safetensors.save
load_safetensors = safetensors.load


# ---------------------------------------------------------------------------
# Differentiable MoE layer (SPEC §3, forward values equal ops.moe_layer)

def dispatch_slots(ids, order, num_experts, limit):
    """Slots [G,S,k] (int32) of SPEC §3 dispatch, computed without a loop.

    Choices are laid out in dispatch order (choice-major, tokens in priority
    order); a choice's position in its expert is the number of earlier
    choices of the same expert. Since an expert's fill only stops growing
    once it is full, a choice is kept iff that count is below `limit`, and
    then its slot is the count: exactly what the sequential walk gives.
    """
    G, S, k = ids.shape
    ids = ids.long()
    if order is not None:
        index = order.long().unsqueeze(-1).expand(G, S, k)
        ids = torch.gather(ids, 1, index)
    sequence = ids.transpose(1, 2).reshape(G, k * S)
    onehot = F.one_hot(sequence, num_experts)
    earlier = onehot.cumsum(1) - onehot
    count = torch.gather(earlier, 2, sequence.unsqueeze(-1)).squeeze(-1)
    slots = torch.where(count < limit, count, torch.full_like(count, -1))
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
                normalize=False, noise=None, noise_std=1.0):
    """One MoE layer on x [G,S,D]; the batched twin of ops.moe_layer.

    Same arguments and result dict as ops.moe_layer (gates, ids, weights,
    order, slots, buffers, y, out, B), plus `aux_loss` when `noise`
    ([G,S,E] standard normal, training only) is given; its std is
    noise_std/E.
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
    B = ops.sized_capacity(k, S, capacity_ratio, num_experts, capacity_rule,
                           multiple_of)
    slots = dispatch_slots(ids, priority, num_experts, B)
    buffers = gather_buffers(x, ids, slots, num_experts, B)
    y = ops.expert_ffn(buffers, w1, b1, w2, b2, activation)
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

    def forward(self, x):
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


class Attention(nn.Module):
    """Multi-head self-attention with a packed [D, 3D] qkv kernel."""

    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.qkv = Dense(dim, 3 * dim)
        self.out = Dense(dim, dim)

    def forward(self, x):
        N, T, D = x.shape
        dh = D // self.heads
        # [N, T, 3D] -> 3 x [N, heads, T, dh]: q, k, v; head h in columns
        # h*dh .. (h+1)*dh of each.
        q, k, v = self.qkv(x).view(N, T, 3, self.heads, dh).permute(
            2, 0, 3, 1, 4)
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(dh)
        mixed = torch.matmul(torch.softmax(scores, dim=-1), v)
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


class MoE(nn.Module):
    """Sparse MoE layer: router plus E expert MLPs (w1, b1, w2, b2)."""

    def __init__(self, dim, hidden, moe):
        super().__init__()
        E = moe["num_experts"]
        self.cfg = moe
        self.router = Router(dim, E)
        self.w1 = _xavier(E, dim, hidden)
        self.b1 = nn.Parameter(torch.zeros(E, hidden))
        self.w2 = _xavier(E, hidden, dim)
        self.b2 = nn.Parameter(torch.zeros(E, dim))

    def forward(self, x, tokens_per_group, routing, score, capacity_ratio):
        """x [N, T, D] -> (out [N, T, D], layer result dict).

        Tokens are grouped [G, S, D] image by image; router noise (and the
        auxiliary loss) only in training mode.
        """
        N, T, D = x.shape
        grouped = x.reshape(N * T // tokens_per_group, tokens_per_group, D)
        cfg = self.cfg
        noise = None
        if self.training:
            noise = torch.randn(*grouped.shape[:2], cfg["num_experts"])
        result = moe_forward(
            grouped, self.router.kernel, self.w1, self.b1, self.w2, self.b2,
            k=cfg["k"], num_experts=cfg["num_experts"],
            capacity_ratio=capacity_ratio, routing=routing, score=score,
            capacity_rule=cfg["capacity_rule"],
            multiple_of=cfg["multiple_of"], activation=cfg["activation"],
            order=cfg["order"], normalize=cfg["normalize"], noise=noise)
        return result["out"].reshape(N, T, D), result


class Block(nn.Module):
    """Pre-LN encoder block: x + attn(ln1(x)), then x + mlp|moe(ln2(x))."""

    def __init__(self, desc, is_moe):
        super().__init__()
        D, eps = desc["width"], desc["layer_norm_epsilon"]
        self.ln1 = LayerNorm(D, eps)
        self.attn = Attention(D, desc["heads"])
        self.ln2 = LayerNorm(D, eps)
        if is_moe:
            self.moe = MoE(D, desc["mlp_dim"], desc["moe"])
        else:
            self.mlp = Mlp(D, desc["mlp_dim"], desc["mlp_activation"])
        self.is_moe = is_moe

    def forward(self, x, **moe_args):
        x = x + self.attn(self.ln1(x))
        if not self.is_moe:
            return x + self.mlp(self.ln2(x)), None
        out, result = self.moe(self.ln2(x), **moe_args)
        return x + out, result


class VMoE(nn.Module):
    """The V-MoE ViT of ModelFormat §2, built from a description dict."""

    def __init__(self, description):
        super().__init__()
        desc = parse_description(description)
        self.desc = desc
        D, C, ps = desc["width"], desc["image"]["channels"], \
            desc["patch_size"]
        moe = desc["moe"]
        self.moe_block_ids = moe_blocks(desc["depth"], moe["placement"],
                                        moe.get("last_n"))
        self.embedding = Dense(C * ps * ps, D)
        if desc["head"] == "token":
            self.cls_token = nn.Parameter(torch.zeros(1, D))
        self.pos_embedding = nn.Parameter(
            torch.randn(tokens_per_image(desc), D) * 0.02)
        self.blocks = nn.ModuleList(
            Block(desc, i in self.moe_block_ids)
            for i in range(desc["depth"]))
        self.final_ln = LayerNorm(D, desc["layer_norm_epsilon"])
        self.head = Dense(D, desc["classes"], zero=True)

    def patches(self, images):
        """[N, C, H, W] -> [N, P, C*ps*ps], patches row-major, (c, i, j)."""
        N, C, H, W = images.shape
        ps = self.desc["patch_size"]
        x = images.reshape(N, C, H // ps, ps, W // ps, ps)
        return x.permute(0, 2, 4, 1, 3, 5).reshape(
            N, (H // ps) * (W // ps), C * ps * ps)

    def forward(self, images, routing=None, score=None, capacity_ratio=None):
        """Normalized images [N, C, H, W] -> (logits [N, classes], layers).

        routing / score / capacity_ratio override the description's moe
        settings (None = the description's). N must be a multiple of
        moe.group_size. `layers` holds the result dict of each MoE layer
        (see moe_forward), in block order.
        """
        moe = self.desc["moe"]
        group = moe["group_size"]
        if images.shape[0] % group:
            raise ValueError(f"batch of {images.shape[0]} images is not a "
                             f"multiple of moe.group_size ({group})")
        T = tokens_per_image(self.desc)
        moe_args = {
            "tokens_per_group": group * T,
            "routing": routing or moe["routing"],
            "score": score or moe["score"],
            "capacity_ratio": (moe["capacity_ratio"] if capacity_ratio is None
                               else capacity_ratio)}
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
        x = self.final_ln(x)
        pooled = x[:, 0] if self.desc["head"] == "token" else x.mean(1)
        return self.head(pooled), layers

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

def normalize_images(images_uint8, mean, std):
    """uint8 [N, C, H, W] -> float32 (p/255 - mean[c]) / std[c]."""
    x = torch.as_tensor(np.asarray(images_uint8, dtype=np.uint8))
    x = x.float() / 255.0
    mean = torch.tensor(mean, dtype=torch.float32).view(1, -1, 1, 1)
    std = torch.tensor(std, dtype=torch.float32).view(1, -1, 1, 1)
    return (x - mean) / std


def evaluate(model, images_uint8, mean=None, std=None, batch=None,
             routing=None, score=None, capacity_ratio=None):
    """Runs the model on uint8 images [N, C, H, W] in batches.

    batch (default: group_size, one group) must be a multiple of
    moe.group_size; the last batch is padded with black images (pixel 0
    before normalization), which take part in routing. mean/std default to
    the description's input normalization; routing/score/capacity_ratio to
    its moe settings. Returns (logits float32 [N, classes] of the real
    images, stats int32 [L, E + 1]: per MoE layer the kept choices per
    expert summed over all groups of all batches, padding included, then
    the dropped choices).
    """
    desc = model.desc
    mean = desc["input"]["mean"] if mean is None else mean
    std = desc["input"]["std"] if std is None else std
    batch = desc["moe"]["group_size"] if batch is None else batch
    E = desc["moe"]["num_experts"]
    images = np.asarray(images_uint8, dtype=np.uint8)
    n = images.shape[0]
    stats = np.zeros((len(model.moe_block_ids), E + 1), dtype=np.int64)
    logits = []
    was_training = model.training
    model.eval()
    with torch.no_grad():
        for start in range(0, n, batch):
            chunk = images[start:start + batch]
            if chunk.shape[0] < batch:
                pad = np.zeros((batch - chunk.shape[0],) + chunk.shape[1:],
                               dtype=np.uint8)
                chunk = np.concatenate([chunk, pad])
            out, layers = model(normalize_images(chunk, mean, std),
                                routing=routing, score=score,
                                capacity_ratio=capacity_ratio)
            logits.append(out[:min(batch, n - start)].numpy())
            for row, layer in zip(stats, layers):
                s = ops.routing_stats(layer["ids"], layer["slots"], E)
                row[:E] += s["fill"].numpy()
                row[E] += s["dropped"]
    model.train(was_training)
    return np.concatenate(logits).astype(np.float32), stats.astype(np.int32)
