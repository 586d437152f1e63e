"""vmoe: compile V-MoE models and run them from Python (numpy only).

    import vmoe
    model = vmoe.compile("examples/digits/digits.json",
                         weights="examples/digits/digits.safetensors")
    images = model.load_images(["examples/digits/test/0000.png"])
    logits = model(images)                       # [N, classes] float32
    logits, stats = model.forward(images, capacity_ratio=0.5, stats=True)

`compile` runs vmoe-compile (--emit=lib) and loads the library through the
C API of include/vmoe/Runtime/vmoe_runtime.h; `load` opens a library built
before. Errors are `VMoEError` (`CompileError` for vmoe-compile) carrying
the one-line message. `vmoe.safetensors` reads and writes weight files; `vmoe.importers` turns
Flax and timm checkpoints into a description and weights.
"""

from . import safetensors
from .compiler import cache_dir, compile, compile_library, find_compiler
from .errors import CompileError, FormatError, VMoEError
from .model import Model, RoutingStats, load

__version__ = "0.1.0"

__all__ = [
    "CompileError", "FormatError", "Model", "RoutingStats", "VMoEError",
    "cache_dir", "compile", "compile_library", "find_compiler", "load",
    "safetensors",
]
