"""Sparse upcycling (SPEC §8): a dense ViT becomes a V-MoE.

    upcycle(desc, tensors, "experts=8,k=2,placement=every-2,noise=0.01,seed=0")

The MLP of each chosen block is copied into all E experts (plus Gaussian
noise of std `noise` from `seed`, drawn per expert and tensor, when given)
and a router [D, E] is added: zeros (default; every gate is 1/E) or, with
router=normal, N(0, router_std) from the same seed. Dense blocks keep their
MLP. Fields of the spec:

  experts=E, k=K       required, 1 <= K <= E
  placement=P          required: every-2 (blocks 1, 3, ...), every-N
                       (blocks N-1, 2N-1, ...), last-N (the last N
                       odd-indexed blocks) or blocks-I+J+... (a list)
  noise=S, seed=N      expert noise std (default 0) and seed (default 0)
  router=zeros|normal, router_std=S (default 0.02)
  normalize=true|false combine weights renormalized over the K (default
                       true, which the invariant below needs)
  capacity_ratio=C     default E/K: B = S, so that nothing can drop
  routing=vanilla|bpr  default bpr
  group_size=N         images per routing group (default 1)

Invariant: with noise 0, normalize true and no drops, each token's K
equal experts give back the dense MLP, so the logits equal the dense
model's.
"""

import numpy as np

from .common import ImporterError

__all__ = ["parse_spec", "upcycle"]

_BOOLS = {"true": True, "false": False}


def _placement(text, depth):
    """(description placement fields, block list) of a placement value."""
    odd = list(range(1, depth, 2))
    try:
        if text == "every-2":
            return {"placement": "every-2"}, odd
        if text.startswith("every-"):
            n = int(text[len("every-"):])
            if not 1 <= n <= depth:
                raise ValueError
            return ({"placement": "every-n", "every": n},
                    list(range(n - 1, depth, n)))
        if text.startswith("last-"):
            n = int(text[len("last-"):])
            if not 1 <= n <= len(odd):
                raise ValueError
            return {"placement": "last-n", "last_n": n}, odd[len(odd) - n:]
        if text.startswith("blocks-"):
            blocks = sorted({int(b) for b in text[len("blocks-"):].split("+")})
            if not blocks or blocks[0] < 0 or blocks[-1] >= depth:
                raise ValueError
            return {"placement": "layers", "layers": blocks}, blocks
    except ValueError:
        pass
    raise ImporterError(f"--upcycle placement={text}: expected every-2, "
                        f"every-N, last-N or blocks-I+J (depth {depth}, "
                        f"{len(odd)} odd-indexed blocks)")


def parse_spec(spec):
    """'key=value,...' -> dict (values still strings); errors name the key."""
    fields = {}
    for item in spec.split(","):
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ImporterError(f"--upcycle: {item!r} is not key=value")
        if key in fields:
            raise ImporterError(f"--upcycle: {key} given twice")
        fields[key] = value.strip()
    return fields


def _number(fields, key, kind, default=None, minimum=None):
    if key not in fields:
        if default is None:
            raise ImporterError(f"--upcycle: {key}= is required")
        return default
    try:
        value = kind(fields.pop(key))
    except ValueError:
        raise ImporterError(f"--upcycle {key}=: not a valid "
                            f"{kind.__name__}") from None
    if minimum is not None and not value >= minimum:
        raise ImporterError(f"--upcycle {key}={value}: must be >= {minimum}")
    return value


def _choice(fields, key, choices, default):
    value = fields.pop(key, default)
    if value not in choices:
        raise ImporterError(f"--upcycle {key}={value}: expected one of "
                            f"{', '.join(choices)}")
    return value


def upcycle(desc, tensors, spec):
    """(description, tensors) of the upcycled V-MoE of a dense ViT."""
    if "moe" in desc:
        raise ImporterError("--upcycle: the model already has MoE layers")
    fields = parse_spec(spec) if isinstance(spec, str) else dict(spec)
    experts = _number(fields, "experts", int, minimum=1)
    k = _number(fields, "k", int, minimum=1)
    if k > experts:
        raise ImporterError(f"--upcycle k={k}: must be <= experts "
                            f"({experts})")
    if "placement" not in fields:
        raise ImporterError("--upcycle: placement= is required")
    placement, blocks = _placement(fields.pop("placement"), desc["depth"])
    noise = _number(fields, "noise", float, 0.0, 0.0)
    seed = _number(fields, "seed", int, 0, 0)
    router = _choice(fields, "router", ("zeros", "normal"), "zeros")
    router_std = _number(fields, "router_std", float, 0.02, 0.0)
    normalize = _BOOLS[_choice(fields, "normalize", tuple(_BOOLS), "true")]
    ratio = _number(fields, "capacity_ratio", float, experts / k)
    if not ratio > 0:
        raise ImporterError(f"--upcycle capacity_ratio={ratio}: must be > 0")
    routing = _choice(fields, "routing", ("vanilla", "bpr"), "bpr")
    group = _number(fields, "group_size", int, 1, 1)
    if fields:
        raise ImporterError(f"--upcycle: unknown field {next(iter(fields))}")

    rng = np.random.default_rng(seed)
    width = desc["width"]
    out = {}
    for name, value in tensors.items():
        block = name.split(".")[1] if name.startswith("blocks.") else None
        if block is None or int(block) not in blocks or ".mlp." not in name:
            out[name] = value
            continue
        if not name.endswith(".mlp.fc1.kernel"):
            continue
        prefix = f"blocks.{block}."
        if router == "zeros":
            kernel = np.zeros((width, experts), np.float32)
        else:
            kernel = rng.normal(0.0, router_std, (width, experts))
        out[prefix + "moe.router.kernel"] = kernel.astype(np.float32)
        for dst, src in (("w1", "fc1.kernel"), ("b1", "fc1.bias"),
                         ("w2", "fc2.kernel"), ("b2", "fc2.bias")):
            dense = tensors[prefix + "mlp." + src]
            stacked = np.repeat(dense[None], experts, axis=0)
            if noise:
                stacked = stacked + rng.normal(0.0, noise, stacked.shape)
            out[prefix + "moe." + dst] = stacked.astype(np.float32)
    moe = dict(placement)
    moe.update({"num_experts": experts, "k": k, "capacity_ratio": ratio,
                "routing": routing, "normalize": normalize,
                "activation": desc.get("mlp_activation", "gelu_tanh"),
                "group_size": group})
    return dict(desc, moe=moe), out
