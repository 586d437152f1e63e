"""A compiled model in this process: the C API of vmoe_runtime.h over numpy.

`Model` wraps one shared library from `vmoe-compile --emit=lib` (or
`vmoe.compile`): load weights, read PNG and JPEG images (of any size, with
the model's preprocessing), run the forward pass at a run-time capacity
ratio, and return logits and routing statistics as numpy arrays. Every
failure of the C API becomes a `VMoEError` with its one-line message.
"""

import ctypes
import json
import operator
import os
import re
import tempfile
import threading
from dataclasses import dataclass

import numpy as np

from . import safetensors
from ._capi import Library
from .errors import VMoEError

__all__ = ["Model", "RoutingStats", "load"]

# The runtime's limit on OpenMP threads (docs/Limits.md).
MAX_THREADS = 1024


def _ratio(value, what="capacity ratio"):
    """A capacity ratio as a float (the C API checks its range)."""
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        raise VMoEError(f"{what} must be a number, got {value!r}") from None


def _path_bytes(path, what):
    try:
        return os.fsencode(path)
    except TypeError:
        raise VMoEError(f"{what} must be a path, got "
                        f"{type(path).__name__}") from None


def _float32(array, what):
    try:
        return np.ascontiguousarray(array, dtype=np.float32)
    except (TypeError, ValueError, OverflowError) as err:
        raise VMoEError(f"{what}: not an array of numbers "
                        f"({str(err).splitlines()[0]})") from None


@dataclass(frozen=True)
class RoutingStats:
    """Routing statistics of one forward call, summed over its batches.

    Attributes:
        blocks: [L] encoder block (0-based) of each MoE layer.
        kept: [L, E] choices each expert processed.
        dropped: [L] choices dropped for lack of capacity.
    Padding images of a short last batch are counted (vmoe_runtime.h).
    """

    blocks: np.ndarray
    kept: np.ndarray
    dropped: np.ndarray

    @property
    def total(self):
        """[L] choices made per MoE layer (kept + dropped)."""
        return self.kept.sum(axis=1) + self.dropped

    @property
    def drop_rate(self):
        """[L] fraction of the choices dropped per MoE layer."""
        total = self.total
        return np.where(total > 0, self.dropped / np.maximum(total, 1), 0.0)


def _float_pointer(array):
    return array.ctypes.data_as(ctypes.POINTER(ctypes.c_float))


def _value_range(preprocess):
    """(vmin, vmax) of the value_range op ending a manifest's `preprocess`
    string (docs/ModelFormat.md §4), or None."""
    match = re.search(r"value_range\s*\(([^)]*)\)\s*$", preprocess or "")
    if not match:
        return None
    bounds = {}
    for index, arg in enumerate(match.group(1).split(",")[:2]):
        key, _, value = arg.rpartition("=")
        bounds[key.strip() or ("vmin", "vmax")[index]] = float(value)
    return bounds["vmin"], bounds["vmax"]


class Model:
    """A compiled V-MoE model with its C API.

    Args:
        library: path of a model library (`vmoe-compile --emit=lib`).
        weights: safetensors file or {name: array} to load now (optional).
        capacity_ratio: run-time capacity ratio used when a call names
            none (default: the one the model was compiled with).

    Not safe to call from several threads at once (calls are serialized
    by a lock); separate models are independent.
    """

    def __init__(self, library, weights=None, capacity_ratio=None):
        self._lib = Library(library)
        self._handle = None
        self._lock = threading.Lock()
        manifest = self._lib.vmoe_model_manifest()
        if not manifest:
            raise VMoEError(f"{self.library_path}: the model has no manifest")
        try:
            self._manifest = json.loads(manifest.decode("utf-8"))
        except ValueError as err:  # JSONDecodeError, UnicodeDecodeError
            raise VMoEError(f"{self.library_path}: malformed manifest: "
                            f"{err}") from None
        self._capacity_ratio = None
        if weights is not None:
            self.load_weights(weights)
        if capacity_ratio is not None:
            self.capacity_ratio = capacity_ratio

    # -- lifecycle -----------------------------------------------------------

    @property
    def library_path(self):
        """The path the model library was loaded from."""
        return self._lib.path

    def load_weights(self, weights):
        """Loads weights: a safetensors file, or {name: array} (written to a
        temporary safetensors file). Replaces weights loaded before."""
        if isinstance(weights, dict):
            with tempfile.TemporaryDirectory(prefix="vmoe-weights-") as tmp:
                path = os.path.join(tmp, "weights.safetensors")
                safetensors.save(path, weights)
                try:
                    self._load(path)
                except VMoEError as err:
                    raise VMoEError(str(err).replace(path, "<weights>")) \
                        from None
        else:
            self._load(weights)

    def _load(self, path):
        error = Library.error_buffer()
        handle = self._lib.vmoe_model_load(_path_bytes(path, "weights"),
                                           error, len(error))
        if not handle:
            raise VMoEError(Library.message(error))
        with self._lock:
            self._free()
            self._handle = handle

    def _free(self):
        if self._handle:
            self._lib.vmoe_model_free(self._handle)
            self._handle = None

    def close(self):
        """Frees the weights and buffers (the library stays loaded)."""
        with self._lock:
            self._free()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        # During interpreter shutdown the library may be gone already.
        lib = getattr(self, "_lib", None)
        if lib is not None and getattr(self, "_handle", None):
            lib.vmoe_model_free(self._handle)
            self._handle = None

    def _require_weights(self):
        if not self._handle:
            raise VMoEError("no weights loaded: call load_weights() first")
        return self._handle

    # -- what the model is ---------------------------------------------------

    @property
    def manifest(self):
        """The compiled model's manifest (docs/ModelFormat.md §5) as a dict."""
        return self._manifest

    @property
    def name(self):
        return self._manifest["name"]

    @property
    def target(self):
        """"cpu" or "cuda"."""
        return self._manifest.get("target", "cpu")

    @property
    def routing(self):
        """The routing compiled in: "vanilla" or "bpr"."""
        return self._manifest.get("routing")

    @property
    def batch_images(self):
        """Images per compiled batch; calls run in batches of this size."""
        return int(self._manifest["batch_images"])

    @property
    def input_shape(self):
        """(channels, height, width) of one image."""
        image = self._manifest["image"]
        return (int(image["channels"]), int(image["height"]),
                int(image["width"]))

    @property
    def num_classes(self):
        return int(self._manifest["classes"])

    @property
    def class_names(self):
        """Class names, or None when the description has none."""
        names = self._manifest.get("class_names")
        return list(names) if names else None

    @property
    def moe_blocks(self):
        """[L] encoder block of each MoE layer."""
        return np.array([layer["block"] for layer in
                         self._manifest["moe_layers"]], dtype=np.int64)

    @property
    def num_experts(self):
        """Experts per MoE layer (0 without MoE layers)."""
        layers = self._manifest["moe_layers"]
        return int(layers[0]["num_experts"]) if layers else 0

    @property
    def default_capacity_ratio(self):
        return float(self._manifest["capacity_ratio"])

    @property
    def max_capacity_ratio(self):
        return float(self._manifest["max_capacity_ratio"])

    # -- run-time settings ---------------------------------------------------

    @property
    def capacity_ratio(self):
        """Capacity ratio C of calls that name none (checked on set)."""
        if self._capacity_ratio is None:
            return self.default_capacity_ratio
        return self._capacity_ratio

    @capacity_ratio.setter
    def capacity_ratio(self, ratio):
        self.check_capacity_ratio(ratio)
        self._capacity_ratio = _ratio(ratio)

    def check_capacity_ratio(self, ratio):
        """Raises VMoEError unless `ratio` is usable (finite, > 0, at most
        the compiled maximum, at least one slot per expert)."""
        error = Library.error_buffer()
        with self._lock:
            handle = self._require_weights()
            status = self._lib.vmoe_model_check_capacity_ratio(
                handle, _ratio(ratio), error, len(error))
        if status != 0:
            raise VMoEError(Library.message(error))

    # Padding modes of the C API (vmoe_model_set_padding).
    _PADDING = {"masked": 0, "zeros": 1}

    @property
    def padding(self):
        """How the last, short batch is filled up with all-zero images:
        "masked" (default: their tokens take no expert capacity and are not
        counted in the statistics) or "zeros" (routed like real images, as
        in the original V-MoE evaluation)."""
        with self._lock:
            mode = self._lib.vmoe_model_get_padding(self._require_weights())
        return {v: k for k, v in self._PADDING.items()}[mode]

    @padding.setter
    def padding(self, mode):
        if mode not in self._PADDING:
            raise VMoEError(f"padding must be 'masked' or 'zeros', got "
                            f"{mode!r}")
        error = Library.error_buffer()
        with self._lock:
            status = self._lib.vmoe_model_set_padding(
                self._require_weights(), self._PADDING[mode], error,
                len(error))
        if status != 0:
            raise VMoEError(Library.message(error))

    @property
    def threads(self):
        """OpenMP threads of the forward pass. Process-wide: setting it
        affects every model of the process."""
        return int(self._lib.vmoe_model_get_threads())

    @threads.setter
    def threads(self, count):
        # Checked here: a Python int above 2^31 would wrap in the C int.
        try:
            value = operator.index(count)
        except TypeError:
            value = None
        if value is None or isinstance(count, bool) or \
                not 1 <= value <= MAX_THREADS:
            raise VMoEError(f"threads must be in [1, {MAX_THREADS}], got "
                            f"{count!r}")
        if self._lib.vmoe_model_set_threads(value) != 0:
            raise VMoEError(f"threads must be in [1, {MAX_THREADS}], got "
                            f"{count!r}")

    # -- images --------------------------------------------------------------

    def normalize(self, pixels):
        """Raw 8-bit pixels [N, C, H, W] (or [C, H, W]) of the model's size
        -> model input, float32 as the runtime computes it after the
        resizes and crops: x = p / 255, with value_range(a, b) in the
        model's preprocessing x = a + x * (b - a), then (x - mean[c]) /
        std[c]."""
        pixels = _float32(pixels, "pixels")
        channels = self.input_shape[0]
        if pixels.shape[-3:] != self.input_shape:
            raise VMoEError(f"pixels of shape {pixels.shape}, expected "
                            f"[..., {', '.join(map(str, self.input_shape))}]")
        source = self._manifest.get("input", {})
        mean = np.asarray(source.get("mean", [0.0] * channels), np.float32)
        std = np.asarray(source.get("std", [1.0] * channels), np.float32)
        x = pixels.astype(np.float32) / np.float32(255)
        bounds = _value_range(self._manifest.get("preprocess"))
        if bounds:
            low, high = bounds
            x = np.float32(low) + x * np.float32(high - low)
        return ((x - mean[:, None, None]) / std[:, None, None]).astype(
            np.float32)

    def load_image(self, path):
        """Reads a PNG or JPEG file of any size (docs/ModelFormat.md §4) ->
        [C, H, W] float32: the model's input after its preprocessing
        (resizes, crops, normalization)."""
        image = np.empty(self.input_shape, dtype=np.float32)
        error = Library.error_buffer()
        with self._lock:
            handle = self._require_weights()
            status = self._lib.vmoe_load_image(handle,
                                               _path_bytes(path, "image path"),
                                             _float_pointer(image), error,
                                             len(error))
        if status != 0:
            raise VMoEError(Library.message(error))
        return image

    def load_images(self, paths):
        """Reads PNG or JPEG files -> [N, C, H, W] float32."""
        paths = list(paths)
        images = np.empty((len(paths), *self.input_shape), dtype=np.float32)
        for i, path in enumerate(paths):
            images[i] = self.load_image(path)
        return images

    # -- the forward pass ----------------------------------------------------

    def forward(self, images, capacity_ratio=None, stats=False):
        """Runs the model on normalized images [N, C, H, W] (float32).

        Returns the logits [N, classes] (float32), or (logits,
        RoutingStats) with `stats=True`. N may be any count: the runtime
        runs ceil(N / batch_images) batches, the last one padded.
        """
        images = _float32(images, "images")
        if images.ndim != 4 or images.shape[1:] != self.input_shape:
            raise VMoEError(
                f"images of shape {images.shape}, expected [N, "
                f"{', '.join(map(str, self.input_shape))}]")
        count = images.shape[0]
        ratio = self.capacity_ratio if capacity_ratio is None \
            else _ratio(capacity_ratio)
        logits = np.empty((count, self.num_classes), dtype=np.float32)
        error = Library.error_buffer()
        with self._lock:
            handle = self._require_weights()
            raw_stats = None
            stats_pointer = None
            if stats:
                size = int(self._lib.vmoe_model_stats_size(handle))
                raw_stats = np.zeros(size, dtype=np.int32)
                stats_pointer = raw_stats.ctypes.data_as(
                    ctypes.POINTER(ctypes.c_int32))
            status = self._lib.vmoe_model_forward(
                handle, _float_pointer(images), count, ratio,
                _float_pointer(logits), stats_pointer, error, len(error))
        if status != 0:
            raise VMoEError(Library.message(error))
        if not stats:
            return logits
        layers = len(self._manifest["moe_layers"])
        table = raw_stats.reshape(layers, -1)
        return logits, RoutingStats(blocks=self.moe_blocks,
                                    kept=table[:, :-1].copy(),
                                    dropped=table[:, -1].copy())

    @property
    def training(self):
        """True for a training graph (vmoe-compile --training --seed N):
        noisy gating and the auxiliary losses (losses())."""
        return bool(self._manifest.get("training", False))

    def losses(self):
        """A training graph: float64 [L, 3], per MoE layer the importance,
        load and GShard losses of the last forward(), each the mean over all
        routing groups of its batches."""
        if not self.training:
            raise VMoEError("the model is an inference graph (compile it "
                            "with vmoe-compile --training --seed N)")
        layers = len(self._manifest["moe_layers"])
        values = np.zeros(3 * layers, dtype=np.float64)
        with self._lock:
            handle = self._require_weights()
            count = int(self._lib.vmoe_model_losses(
                handle, values.ctypes.data_as(
                    ctypes.POINTER(ctypes.c_double))))
        if count != values.size:
            raise VMoEError("no losses yet: call forward() first")
        return values.reshape(layers, 3)

    def __call__(self, images, capacity_ratio=None):
        """The logits [N, classes] of normalized images [N, C, H, W]."""
        return self.forward(images, capacity_ratio=capacity_ratio)

    def predict(self, images, capacity_ratio=None):
        """The class index [N] of each image (ties: the lowest index)."""
        return np.argmax(self.forward(images, capacity_ratio), axis=1)

    def __repr__(self):
        return (f"<vmoe.Model {self.name!r} target={self.target} "
                f"input={self.input_shape} classes={self.num_classes} "
                f"moe_blocks={self.moe_blocks.tolist()}>")


def load(library, weights=None, capacity_ratio=None):
    """Loads a model library built by `vmoe-compile --emit=lib`."""
    return Model(library, weights=weights, capacity_ratio=capacity_ratio)
