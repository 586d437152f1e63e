"""What the importers share: errors, key bookkeeping, the description.

Every importer reads a checkpoint into a `Params` (name -> float32 array),
takes each tensor it knows by name (`take`), converts its layout to the
vmoe one (docs/ModelFormat.md §3: kernels [in, out], fused qkv) and finally
calls `Params.finish()`, which rejects any key nobody took: an unknown or
missing key is a one-line ImporterError, never a silently ignored tensor.
`write_model` writes only what vmoe-compile and the runtime accept: the
description passes `checks.check_description` and the weights match its
layout. `guarded` makes a public function fail only with ImporterError.
"""

import functools
import json
import math

import numpy as np

from .. import _json
from .._files import open_regular
from ..errors import ImporterError
from .checks import check_description
from .limits import number

__all__ = ["ImporterError", "Params", "check_weights", "describe_failure",
           "description", "guarded", "read_json", "show_json",
           "write_model"]


def describe_failure(err):
    """One line for an exception no check anticipated."""
    if isinstance(err, MemoryError):
        return "out of memory (a size in the input is too large)"
    if isinstance(err, RecursionError):
        return "nested too deeply"
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0] if text else 'failed'}"


def guarded(function, returns_model=False):
    """`function` raising only ImporterError: any other exception becomes
    one naming the first argument (the file or spec) and the failure.
    With `returns_model`, the (description, tensors) it returns pass
    check_weights. The unguarded function stays as `__wrapped__` (the
    fuzzer calls it to see every exception a check missed)."""
    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        try:
            result = function(*args, **kwargs)
            if returns_model:
                check_weights(*result)
            return result
        except ImporterError:
            raise
        except Exception as err:  # pylint: disable=broad-except
            what = args[0] if args and isinstance(args[0], str) else \
                function.__name__
            raise ImporterError(f"{what}: {describe_failure(err)}") \
                from None
    return wrapper


class Params:
    """A checkpoint's tensors with the bookkeeping of which were used."""

    def __init__(self, tensors, source):
        self.tensors = {str(k): np.asarray(v, dtype=np.float32)
                        for k, v in tensors.items()}
        self.source = source
        self.used = set()

    def __contains__(self, key):
        return key in self.tensors

    def has_prefix(self, prefix):
        return any(k.startswith(prefix) for k in self.tensors)

    def take(self, key, shape=None):
        """The tensor `key` (checked against `shape`, None = any dim)."""
        if key not in self.tensors:
            raise ImporterError(f"{self.source}: missing key {key!r}")
        value = self.tensors[key]
        if 0 in value.shape:
            raise ImporterError(f"{self.source}: {key!r} has shape "
                                f"{list(value.shape)}: an empty dimension")
        if shape is not None and (len(shape) != value.ndim or any(
                want is not None and want != got
                for want, got in zip(shape, value.shape))):
            want = ", ".join("?" if d is None else str(d) for d in shape)
            raise ImporterError(f"{self.source}: {key!r} has shape "
                                f"{list(value.shape)}, expected [{want}]")
        self.used.add(key)
        return value

    def finish(self):
        """Fails on the first key that no importer rule took."""
        for key in self.tensors:
            if key not in self.used:
                raise ImporterError(f"{self.source}: unknown key {key!r} "
                                    "(not part of a supported model)")


def square_grid(patches, what):
    """The side of a square grid of `patches` patches."""
    if patches < 1:
        raise ImporterError(f"{what}: {patches} patches")
    side = math.isqrt(patches)
    if side * side != patches:
        raise ImporterError(f"{what}: {patches} patches are not a square "
                            "grid; give --image-size HxW")
    return side


def description(*, name, image, channels, pipeline, patch, width, depth,
                heads, mlp_dim, classes, head, final_norm="tokens",
                representation_size=None, layer_norm_epsilon=1e-6,
                mlp_activation="gelu_tanh", moe=None):
    """A model description dict (docs/ModelFormat.md §1); `pipeline`: its
    `preprocess` and optional `input` (evaluation.pipeline_fields)."""
    height, image_width = image
    desc = {"format": "vmoe-model", "version": 1, "name": name,
            "image": {"height": height, "width": image_width,
                      "channels": channels}}
    if "input" in pipeline:
        desc["input"] = pipeline["input"]
    desc.update({"preprocess": pipeline["preprocess"],
                 "patch_size": (patch[0] if patch[0] == patch[1]
                                else list(patch)),
                 "width": width, "depth": depth, "heads": heads,
                 "mlp_dim": mlp_dim, "classes": classes, "head": head})
    if final_norm != "tokens":
        desc["final_norm"] = final_norm
    if representation_size:
        desc["representation_size"] = representation_size
    desc["layer_norm_epsilon"] = layer_norm_epsilon
    desc["mlp_activation"] = mlp_activation
    desc["dtype"] = "f32"
    if moe is not None:
        desc["moe"] = moe
    return desc


_MAX_JSON_BYTES = 1 << 24


def read_json(path, what):
    """The JSON value of the regular file `path` (`what` it should be, for
    the size error): UTF-8, at most 16 MiB, 64 levels, finite numbers
    (docs/Limits.md)."""
    try:
        with open_regular(path, ImporterError) as f:
            data = f.read(_MAX_JSON_BYTES + 1)
    except OSError as err:
        raise ImporterError(f"{path}: cannot read ({err.strerror or err})"
                            ) from None
    if len(data) > _MAX_JSON_BYTES:
        raise ImporterError(f"{path}: over {_MAX_JSON_BYTES >> 20} MiB, not "
                            f"a {what}")
    return _json.parse(data, path, ImporterError)


def show_json(value):
    """`value` as JSON for a message, at most 40 characters."""
    text = json.dumps(value) if not isinstance(value, float) or \
        math.isfinite(value) else repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def channel_values(values, channels, what):
    """Per-channel mean or std: one value repeated, or one per channel,
    each finite (std: not 0)."""
    values = [number(v, what) for v in values]
    if what.endswith("std") and 0 in values:
        raise ImporterError(f"{what}: must not contain 0")
    if len(values) == 1:
        values *= channels
    if len(values) != channels:
        raise ImporterError(f"{what}: give 1 or {channels} values, got "
                            f"{len(values)}")
    return values


def check_weights(desc, tensors, what="model description"):
    """The weights `tensors` match the layout `desc` needs (names and
    shapes; the runtime refuses anything else), `desc` passes
    check_description. Errors: ImporterError naming the field (after
    `what`) or the tensor."""
    try:
        layout = dict(check_description(desc))
    except ImporterError as err:
        raise ImporterError(f"{what}: {err}") from None
    for name, value in tensors.items():
        if name not in layout:
            raise ImporterError(f"weights: tensor {name!r} is not part of "
                                "the described model")
        if tuple(np.shape(value)) != tuple(layout[name]):
            raise ImporterError(f"weights: tensor {name!r} has shape "
                                f"{list(np.shape(value))}, the description "
                                f"needs {list(layout[name])}")
    for name in layout:
        if name not in tensors:
            raise ImporterError(f"weights: missing tensor {name!r}")


def write_model(prefix, desc, tensors):
    """Writes PREFIX.json (the description) and PREFIX.safetensors after
    check_weights; nothing is written when a check fails."""
    from . import _safetensors
    check_weights(desc, tensors)
    text = json.dumps(desc, indent=1, allow_nan=False) + "\n"
    with open(prefix + ".json", "w", encoding="utf-8") as f:
        f.write(text)
    _safetensors.write(prefix + ".safetensors", tensors)
    return prefix + ".json", prefix + ".safetensors"
