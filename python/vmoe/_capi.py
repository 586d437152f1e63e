"""ctypes declarations of the C API of compiled models.

One `Library` per shared library from `vmoe-compile --emit=lib`: the
functions of include/vmoe/Runtime/vmoe_runtime.h with their exact C
signatures, and `vmoe_model_manifest` (docs/ModelFormat.md §5). Each library
is opened with RTLD_LOCAL, so several models live side by side in one
process.
"""

import ctypes
import os

from .errors import VMoEError

__all__ = ["ERROR_SIZE", "Library"]

# Bytes of the buffer the C API writes its one-line messages into.
ERROR_SIZE = 1024

_int64 = ctypes.c_int64
_model = ctypes.c_void_p
_float_p = ctypes.POINTER(ctypes.c_float)
_int32_p = ctypes.POINTER(ctypes.c_int32)

# name: (result type, argument types)
_SIGNATURES = {
    "vmoe_model_load": (_model, [ctypes.c_char_p, ctypes.c_char_p,
                                 ctypes.c_size_t]),
    "vmoe_model_free": (None, [_model]),
    "vmoe_model_name": (ctypes.c_char_p, [_model]),
    "vmoe_model_batch_images": (_int64, [_model]),
    "vmoe_model_channels": (_int64, [_model]),
    "vmoe_model_height": (_int64, [_model]),
    "vmoe_model_width": (_int64, [_model]),
    "vmoe_model_classes": (_int64, [_model]),
    "vmoe_model_class_name": (ctypes.c_char_p, [_model, _int64]),
    "vmoe_model_num_moe_layers": (_int64, [_model]),
    "vmoe_model_num_experts": (_int64, [_model]),
    "vmoe_model_moe_block": (_int64, [_model, _int64]),
    "vmoe_model_stats_size": (_int64, [_model]),
    "vmoe_model_default_capacity_ratio": (ctypes.c_double, [_model]),
    "vmoe_model_max_capacity_ratio": (ctypes.c_double, [_model]),
    "vmoe_model_check_capacity_ratio": (ctypes.c_int, [
        _model, ctypes.c_double, ctypes.c_char_p, ctypes.c_size_t]),
    "vmoe_model_set_padding": (ctypes.c_int, [
        _model, ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t]),
    "vmoe_model_get_padding": (ctypes.c_int, [_model]),
    "vmoe_model_set_threads": (ctypes.c_int, [ctypes.c_int]),
    "vmoe_model_get_threads": (ctypes.c_int, []),
    "vmoe_load_image": (ctypes.c_int, [_model, ctypes.c_char_p, _float_p,
                                       ctypes.c_char_p, ctypes.c_size_t]),
    "vmoe_model_forward": (ctypes.c_int, [
        _model, _float_p, _int64, ctypes.c_double, _float_p, _int32_p,
        ctypes.c_char_p, ctypes.c_size_t]),
    "vmoe_model_is_training": (ctypes.c_int, [_model]),
    "vmoe_model_losses": (_int64, [_model, ctypes.POINTER(ctypes.c_double)]),
    "vmoe_model_manifest": (ctypes.c_char_p, []),
}


class Library:
    """The C API of one compiled model library; attributes are the C
    functions (`lib.vmoe_model_forward(...)`)."""

    def __init__(self, path):
        self.path = os.fspath(path)
        try:
            self._dll = ctypes.CDLL(self.path, mode=os.RTLD_LOCAL)
        except OSError as err:
            raise VMoEError(f"cannot load the model library: {err}") \
                from None
        for name, (restype, argtypes) in _SIGNATURES.items():
            try:
                function = getattr(self._dll, name)
            except AttributeError:
                raise VMoEError(
                    f"{self.path}: not a vmoe model library (no {name}; "
                    "build it with vmoe-compile --emit=lib)") from None
            function.restype = restype
            function.argtypes = argtypes
            setattr(self, name, function)

    @staticmethod
    def error_buffer():
        """A zeroed buffer for the C API's error message."""
        return ctypes.create_string_buffer(ERROR_SIZE)

    @staticmethod
    def message(buffer):
        """The message the C API wrote into `buffer`."""
        return buffer.value.decode("utf-8", errors="replace")
