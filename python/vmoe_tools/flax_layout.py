"""Flax-layout ViT / V-MoE checkpoints and their forward pass, in NumPy.

The independent side of the Flax importer's tests: `random_params` writes
a param tree in the naming and layouts of V-MoE (`vmoe`), Google's ViT
(`vit_jax` as released, `vit_jax_current` as today's flax names its
modules) or big_vision (`big_vision`, optionally scanned), flattened
with '/' as those checkpoints are, and `forward` computes the logits as
those codebases define the model -- NHWC patch convolution with a
[ph, pw, C, D] kernel, attention with [D, heads, dh] kernels and the query
scaled first, LayerNorm epsilon 1e-6, GELU with the tanh approximation,
and V-MoE's routers without noise: TopExpertsPerItem (softmax, top-k, BPR
by the top-1 gate, choice-major buffer positions by cumulative count,
capacity by `compute_capacity`: ceil and a multiple of 4 by default),
TopItemsPerExpert (expert choice: each expert's top-capacity tokens) and
Soft MoE's SoftRouter (unit-normalized tokens and mu, scale, softmax over
the tokens to dispatch and over all slots to combine) -- in float64.
It shares no code with vmoe_ref or the importers.

The model config is a dict in the form of V-MoE's `config.model`.
"""

import math

import numpy as np

SCHEMES = ("vmoe", "vit_jax", "vit_jax_current", "big_vision")

_NAMES = {
    "vmoe": ("Encoder", "LayerNorm_0", "SelfAttention", "LayerNorm_1", "Mlp",
             ("MapHead", "MultiHeadDotProductAttention", "LayerNorm", "Mlp")),
    "vit_jax": ("Transformer", "LayerNorm_0",
                "MultiHeadDotProductAttention_1", "LayerNorm_2", "MlpBlock_3",
                None),
    # vit_jax's model built with today's flax: a name counter per type.
    "vit_jax_current": ("Transformer", "LayerNorm_0",
                        "MultiHeadDotProductAttention_0", "LayerNorm_1",
                        "MlpBlock_0", None),
    "big_vision": ("Transformer", "LayerNorm_0",
                   "MultiHeadDotProductAttention_0", "LayerNorm_1",
                   "MlpBlock_0",
                   ("MAPHead_0", "MultiHeadDotProductAttention_0",
                    "LayerNorm_0", "MlpBlock_0")),
}


def _moe_layers(config):
    return list(config["encoder"].get("moe", {}).get("layers", ()))


def router_name(moe):
    """The router's class name (a dotted path names it too)."""
    name = moe.get("router", {}).get("name", "NoisyTopExpertsPerItemRouter")
    return name.rsplit(".", 1)[-1]


def soft_slots(moe):
    """SoftRouter's slots per expert: num_slots, else
    round(group_size * capacity_factor / E) (Python's round)."""
    router = moe.get("router", {})
    if router.get("num_slots"):
        return router["num_slots"]
    return round(moe["group_size"] * router.get("capacity_factor", 1.0) /
                 moe["num_experts"])


def random_params(config, image_size, channels, scheme, seed, scan=False):
    """{'/'-joined path: float32 array} of a model of `config`."""
    rng = np.random.default_rng(seed)
    enc_name, ln1, attn, ln2, mlp, map_names = _NAMES[scheme]
    ph, pw = config["patch_size"]
    D = config["hidden_size"]
    enc = config["encoder"]
    H, heads, depth = enc["mlp_dim"], enc["num_heads"], enc["num_layers"]
    dh = D // heads
    moe = enc.get("moe", {})
    He = moe.get("mlp_dim", H)
    E = moe.get("num_experts")
    classifier = config.get("classifier", "token")
    patches = (image_size[0] // ph) * (image_size[1] // pw)
    has_cls = classifier == "token"
    p = {}

    def normal(shape, std):
        return (rng.standard_normal(shape) * std).astype(np.float32)

    def layer_norm(prefix):
        p[prefix + "/scale"] = 1.0 + normal((D,), 0.1)
        p[prefix + "/bias"] = normal((D,), 0.1)

    def attention(prefix):
        for name in ("query", "key", "value"):
            p[f"{prefix}/{name}/kernel"] = normal((D, heads, dh),
                                                  1 / math.sqrt(D))
            p[f"{prefix}/{name}/bias"] = normal((heads, dh), 0.1)
        p[prefix + "/out/kernel"] = normal((heads, dh, D), 1 / math.sqrt(D))
        p[prefix + "/out/bias"] = normal((D,), 0.1)

    def dense_mlp(prefix, hidden):
        p[prefix + "/Dense_0/kernel"] = normal((D, hidden), 1 / math.sqrt(D))
        p[prefix + "/Dense_0/bias"] = normal((hidden,), 0.1)
        p[prefix + "/Dense_1/kernel"] = normal((hidden, D),
                                               1 / math.sqrt(hidden))
        p[prefix + "/Dense_1/bias"] = normal((D,), 0.1)

    p["embedding/kernel"] = normal((ph, pw, channels, D),
                                   1 / math.sqrt(ph * pw * channels))
    p["embedding/bias"] = normal((D,), 0.1)
    if has_cls:
        p["cls"] = normal((1, 1, D), 0.5)
    if scheme == "big_vision":
        p["pos_embedding"] = normal((1, patches, D), 0.5)
    else:
        p[f"{enc_name}/posembed_input/pos_embedding"] = normal(
            (1, patches + has_cls, D), 0.5)
    for i in range(depth):
        block = f"{enc_name}/encoderblock_{i}/"
        layer_norm(block + ln1)
        attention(block + attn)
        layer_norm(block + ln2)
        if i in _moe_layers(config):
            if router_name(moe) == "SoftRouter":
                p[block + "Moe/Router/mu"] = normal((D, E, soft_slots(moe)),
                                                    1.0)
                p[block + "Moe/Router/scale"] = np.float32(
                    4.0 + rng.random())
            else:
                p[block + "Moe/Router/dense/kernel"] = normal(
                    (D, E), 3 / math.sqrt(D))
            p[block + "Moe/Mlp/Dense_0/kernel"] = normal((E, D, He),
                                                         1 / math.sqrt(D))
            p[block + "Moe/Mlp/Dense_0/bias"] = normal((E, He), 0.1)
            p[block + "Moe/Mlp/Dense_1/kernel"] = normal((E, He, D),
                                                         1 / math.sqrt(He))
            p[block + "Moe/Mlp/Dense_1/bias"] = normal((E, D), 0.1)
        else:
            dense_mlp(block + mlp, H)
    layer_norm(f"{enc_name}/encoder_norm")
    if classifier == "map":
        root, map_attn, map_ln, map_mlp = map_names
        p[root + "/probe"] = normal((1, 1, D), 0.5)
        attention(f"{root}/{map_attn}")
        layer_norm(f"{root}/{map_ln}")
        dense_mlp(f"{root}/{map_mlp}", H)
    R = config.get("representation_size")
    if R:
        p["pre_logits/kernel"] = normal((D, R), 1 / math.sqrt(D))
        p["pre_logits/bias"] = normal((R,), 0.1)
    classes = config["num_classes"]
    p["head/kernel"] = normal((R or D, classes), 1 / math.sqrt(R or D))
    p["head/bias"] = normal((classes,), 0.1)
    if scan:
        prefix = f"{enc_name}/encoderblock_"
        stacked = {}
        for key in [k for k in p if k.startswith(prefix)]:
            rest = key[len(prefix):].split("/", 1)[1]
            stacked.setdefault(rest, []).append((key, p.pop(key)))
        for rest, items in stacked.items():
            items.sort(key=lambda kv: int(kv[0][len(prefix):].split("/")[0]))
            p[f"{enc_name}/encoderblock/{rest}"] = np.stack(
                [v for _, v in items])
    return p


# ---------------------------------------------------------------------------
# Forward pass (float64)

def _layer_norm(x, p, prefix):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-6) * p[prefix + "/scale"] + \
        p[prefix + "/bias"]


def _gelu(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) *
                                  (x + 0.044715 * x ** 3)))


def _softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _attention(xq, xkv, p, prefix):
    """flax.linen.MultiHeadDotProductAttention (no dropout, no mask)."""
    def proj(x, name):
        return np.einsum("...d,dhc->...hc", x, p[f"{prefix}/{name}/kernel"]) \
            + p[f"{prefix}/{name}/bias"]
    q, k, v = proj(xq, "query"), proj(xkv, "key"), proj(xkv, "value")
    q = q / math.sqrt(q.shape[-1])
    weights = _softmax(np.einsum("nqhc,nkhc->nhqk", q, k))
    mixed = np.einsum("nhqk,nkhc->nqhc", weights, v)
    return np.einsum("nqhc,hcd->nqd", mixed, p[prefix + "/out/kernel"]) + \
        p[prefix + "/out/bias"]


def _mlp(x, p, prefix):
    h = _gelu(x @ p[prefix + "/Dense_0/kernel"] + p[prefix + "/Dense_0/bias"])
    return h @ p[prefix + "/Dense_1/kernel"] + p[prefix + "/Dense_1/bias"]


def compute_capacity(tokens, experts, factor, rule="ceil", multiple_of=4):
    """V-MoE's compute_capacity (num_tokens = group size * k)."""
    raw = tokens * factor / experts
    capacity = int(math.ceil(raw)) if rule == "ceil" else int(round(raw))
    if capacity < 1:
        raise ValueError(f"capacity {capacity} < 1")
    if multiple_of and multiple_of > 0:
        capacity += (-capacity) % multiple_of
    return capacity


def _experts(p, prefix):
    return (p[prefix + "/Mlp/Dense_0/kernel"], p[prefix + "/Mlp/Dense_0/bias"],
            p[prefix + "/Mlp/Dense_1/kernel"], p[prefix + "/Mlp/Dense_1/bias"])


def _expert(x, weights, e):
    w1, b1, w2, b2 = weights
    return _gelu(x @ w1[e] + b1[e]) @ w2[e] + b2[e]


def _dispatcher_capacity(disp, tokens, experts):
    if disp.get("capacity") is not None:
        return disp["capacity"]
    return compute_capacity(tokens, experts, disp["capacity_factor"],
                            disp.get("capacity_ceil_or_round", "ceil"),
                            disp.get("capacity_multiple_of", 4))


def _moe(x, p, prefix, moe_cfg, margins):
    """V-MoE's MlpMoeBlock at inference, with the router of its config."""
    n, t, d = x.shape
    xg = x.reshape(-1, moe_cfg["group_size"], d)
    name = router_name(moe_cfg)
    if name == "SoftRouter":
        out = _soft_moe(xg, p, prefix)
    elif name == "NoisyTopItemsPerExpertRouter":
        out = _expert_choice(xg, p, prefix, moe_cfg, margins)
    else:
        out = _top_experts(xg, p, prefix, moe_cfg, margins)
    return out.reshape(n, t, d)


def _top_experts(xg, p, prefix, moe_cfg, margins):
    """NoisyTopExpertsPerItemRouter (the paper's) without noise."""
    group = xg.shape[1]
    router = moe_cfg.get("router", {})
    k = router.get("num_selected_experts", 1)
    disp = router.get("dispatcher", {})
    gates = _softmax(xg @ p[prefix + "/Router/dense/kernel"])
    experts = gates.shape[-1]
    capacity = _dispatcher_capacity(disp, group * k, experts)
    out = np.zeros_like(xg)
    weights = _experts(p, prefix)
    for g in range(xg.shape[0]):
        # top_k: largest first, ties to the lower expert index.
        order = np.argsort(-gates[g], axis=-1, kind="stable")
        top = order[:, :k]
        top_gates = np.take_along_axis(gates[g], top, -1)
        sorted_gates = np.take_along_axis(gates[g], order, -1)
        gaps = sorted_gates[:, :min(k + 1, experts) - 1] - \
            sorted_gates[:, 1:min(k + 1, experts)]
        margins.append(gaps[gaps > 0].min() if (gaps > 0).any() else np.inf)
        items = np.arange(group)
        if disp.get("batch_priority", False):
            items = np.argsort(-top_gates[:, 0], kind="stable")
            score = np.sort(top_gates[:, 0])
            diff = np.diff(score)
            if (diff > 0).any():
                margins.append(diff[diff > 0].min())
        count = np.zeros(experts, np.int64)
        for i in range(k):
            for s in items:
                e = top[s, i]
                position = count[e]
                count[e] += 1
                if position < capacity:
                    out[g, s] += top_gates[s, i] * _expert(xg[g, s], weights,
                                                           e)
    return out


def _expert_choice(xg, p, prefix, moe_cfg, margins):
    """NoisyTopItemsPerExpertRouter without noise: each expert takes its
    `capacity` tokens of largest gate (jax.lax.top_k: ties to the lower
    token index); the output sums gate * expert over the experts."""
    group = xg.shape[1]
    disp = moe_cfg.get("router", {}).get("dispatcher", {})
    gates = _softmax(xg @ p[prefix + "/Router/dense/kernel"])
    experts = gates.shape[-1]
    capacity = _dispatcher_capacity(disp, group, experts)
    if capacity > group:
        raise ValueError(f"expert choice capacity {capacity} > group {group}")
    out = np.zeros_like(xg)
    weights = _experts(p, prefix)
    for g in range(xg.shape[0]):
        for e in range(experts):
            order = np.argsort(-gates[g, :, e], kind="stable")
            if capacity < group:
                column = gates[g, order, e]
                margins.append(column[capacity - 1] - column[capacity])
            for s in order[:capacity]:
                out[g, s] += gates[g, s, e] * _expert(xg[g, s], weights, e)
    return out


def _soft_moe(xg, p, prefix):
    """projects/soft_moe SoftRouter (no noise) with the f32 dispatcher
    (the original rounds the dispatched and expert outputs to bfloat16)."""
    def unit(v, axis):
        return v / np.sqrt((v * v).sum(axis=axis, keepdims=True) + 1e-6)
    mu = unit(p[prefix + "/Router/mu"], 0)
    x = unit(xg, -1)
    scale = p[prefix + "/Router/scale"]
    if x.size < mu.size:
        x = x * scale
    else:
        mu = mu * scale
    logits = np.einsum("gmd,dnp->gmnp", x, mu)
    dispatch = np.exp(logits - logits.max(1, keepdims=True))
    dispatch /= dispatch.sum(1, keepdims=True)
    g, m, n, slots = logits.shape
    flat = logits.reshape(g, m, n * slots)
    combine = _softmax(flat).reshape(g, m, n, slots)
    inputs = np.einsum("gmnp,gmd->gnpd", dispatch, xg)
    weights = _experts(p, prefix)
    outputs = np.stack([_expert(inputs[:, e], weights, e)
                        for e in range(n)], axis=1)
    return np.einsum("gmnp,gnpd->gmd", combine, outputs)


def forward(params, config, images, scheme, margins=None):
    """Normalized images [N, C, H, W] (float) -> logits [N, classes]
    (float64). `margins`, a list, receives the routing margins."""
    p = {k: np.asarray(v, np.float64) for k, v in params.items()}
    enc_name, ln1, attn, ln2, mlp, map_names = _NAMES[scheme]
    enc = config["encoder"]
    depth = enc["num_layers"]
    if f"{enc_name}/encoderblock/{ln1}/scale" in p:  # scanned
        for key in [k for k in p if k.startswith(f"{enc_name}/encoderblock/")]:
            rest = key[len(f"{enc_name}/encoderblock/"):]
            for i in range(depth):
                p[f"{enc_name}/encoderblock_{i}/{rest}"] = p[key][i]
    margins = [] if margins is None else margins
    x = np.asarray(images, np.float64).transpose(0, 2, 3, 1)  # NHWC
    n, height, width, channels = x.shape
    ph, pw = config["patch_size"]
    x = x.reshape(n, height // ph, ph, width // pw, pw, channels)
    x = np.einsum("naibjc,ijcd->nabd", x, p["embedding/kernel"]) + \
        p["embedding/bias"]
    x = x.reshape(n, -1, x.shape[-1])
    classifier = config.get("classifier", "token")
    if scheme == "big_vision":
        x = x + p["pos_embedding"]
    if classifier == "token":
        cls = np.broadcast_to(p["cls"], (n, 1, x.shape[-1]))
        x = np.concatenate([cls, x], axis=1)
    if scheme != "big_vision":
        x = x + p[f"{enc_name}/posembed_input/pos_embedding"]
    for i in range(depth):
        block = f"{enc_name}/encoderblock_{i}/"
        y = _layer_norm(x, p, block + ln1)
        x = x + _attention(y, y, p, block + attn)
        y = _layer_norm(x, p, block + ln2)
        if i in _moe_layers(config):
            x = x + _moe(y, p, block + "Moe", enc["moe"], margins)
        else:
            x = x + _mlp(y, p, block + mlp)
    x = _layer_norm(x, p, f"{enc_name}/encoder_norm")
    if classifier == "token":
        x = x[:, 0]
    elif classifier == "gap":
        x = x.mean(1)
    else:
        root, map_attn, map_ln, map_mlp = map_names
        probe = np.broadcast_to(p[root + "/probe"], (n, 1, x.shape[-1]))
        x = _attention(probe, x, p, f"{root}/{map_attn}")
        x = (x + _mlp(_layer_norm(x, p, f"{root}/{map_ln}"), p,
                      f"{root}/{map_mlp}"))[:, 0]
    if config.get("representation_size"):
        x = np.tanh(x @ p["pre_logits/kernel"] + p["pre_logits/bias"])
    return x @ p["head/kernel"] + p["head/bias"]


def evaluate(params, config, images, batch, scheme):
    """forward() in batches of `batch` images, the last padded with zero
    images that are routed (V-MoE's evaluation); (logits of the real
    images, smallest routing margin)."""
    images = np.asarray(images, np.float64)
    margins, logits = [], []
    for start in range(0, len(images), batch):
        chunk = images[start:start + batch]
        real = len(chunk)
        if real < batch:
            chunk = np.concatenate([chunk, np.zeros(
                (batch - real,) + chunk.shape[1:])])
        logits.append(forward(params, config, chunk, scheme, margins)[:real])
    return np.concatenate(logits), min(margins, default=np.inf)
