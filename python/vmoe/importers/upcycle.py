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

Numbers are checked (finite, in range; E, K and N at most 2^24, C in
(0, 4096]) and the upcycled description must pass check_description,
before the experts are allocated.

Invariant: with noise 0, normalize true and no drops, each token's K
equal experts give back the dense MLP, so the logits equal the dense
model's.
"""

import numpy as np

from .checks import check_description
from .common import ImporterError, check_weights
from .limits import MAX_CAPACITY_RATIO, MAX_DIMENSION, integer, number

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


def _field(fields, key, default=None):
    """The text of `key` (popped), or `default` (None: required)."""
    if key not in fields:
        if default is None:
            raise ImporterError(f"--upcycle: {key}= is required")
        return default
    return fields.pop(key)


def _integer(fields, key, default=None, minimum=1, maximum=MAX_DIMENSION):
    return integer(_field(fields, key, default), f"--upcycle {key}",
                   minimum, maximum)


def _float(fields, key, default, **bounds):
    return number(_field(fields, key, default), f"--upcycle {key}",
                  **bounds)


def _choice(fields, key, choices, default):
    value = fields.pop(key, default)
    if value not in choices:
        raise ImporterError(f"--upcycle {key}={value}: expected one of "
                            f"{', '.join(choices)}")
    return value


def _settings(desc, spec):
    """(moe object, upcycled blocks, noise, rng, router) of a spec."""
    fields = parse_spec(spec) if isinstance(spec, str) else dict(spec)
    experts = _integer(fields, "experts")
    k = _integer(fields, "k")
    if k > experts:
        raise ImporterError(f"--upcycle k={k}: must be <= experts "
                            f"({experts})")
    if "placement" not in fields:
        raise ImporterError("--upcycle: placement= is required")
    placement, blocks = _placement(fields.pop("placement"), desc["depth"])
    noise = _float(fields, "noise", 0.0, minimum=0.0)
    seed = _integer(fields, "seed", 0, minimum=0, maximum=2**64 - 1)
    router = _choice(fields, "router", ("zeros", "normal"), "zeros")
    router_std = _float(fields, "router_std", 0.02, minimum=0.0)
    normalize = _BOOLS[_choice(fields, "normalize", tuple(_BOOLS), "true")]
    ratio = _float(fields, "capacity_ratio", experts / k, above=0.0,
                   maximum=MAX_CAPACITY_RATIO)
    routing = _choice(fields, "routing", ("vanilla", "bpr"), "bpr")
    group = _integer(fields, "group_size", 1)
    if fields:
        raise ImporterError(f"--upcycle: unknown field {next(iter(fields))}")
    moe = dict(placement)
    moe.update({"num_experts": experts, "k": k, "capacity_ratio": ratio,
                "routing": routing, "normalize": normalize,
                "activation": desc.get("mlp_activation", "gelu_tanh"),
                "group_size": group})
    rng = np.random.default_rng(seed)
    return moe, blocks, noise, rng, (router, router_std)


def upcycle(desc, tensors, spec):
    """(description, tensors) of the upcycled V-MoE of a dense ViT.

    The input must be a valid dense model (check_weights); the upcycled
    description is checked (check_description: sizes within the limits)
    before any expert is allocated."""
    if "moe" in desc:
        raise ImporterError("--upcycle: the model already has MoE layers")
    check_weights(desc, tensors, "--upcycle: the model to upcycle")
    moe, blocks, noise, rng, (router, router_std) = _settings(desc, spec)
    upcycled = dict(desc, moe=moe)
    try:
        check_description(upcycled)
    except ImporterError as err:
        raise ImporterError(f"--upcycle: {err}") from None
    try:
        return upcycled, _expert_tensors(desc, tensors, moe, blocks, noise,
                                         rng, router, router_std)
    except MemoryError:
        raise ImporterError(f"--upcycle experts={moe['num_experts']}: out "
                            "of memory for the expert weights") from None


def _expert_tensors(desc, tensors, moe, blocks, noise, rng, router,
                    router_std):
    """The tensors with each upcycled block's MLP copied into experts."""
    experts, width = moe["num_experts"], desc["width"]
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
    return out
