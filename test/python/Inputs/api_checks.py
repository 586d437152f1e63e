"""Checks of the vmoe package's API on the digits model (vmoe-api.test).

    python api_checks.py EXAMPLES_DIGITS EXE_LOGITS WORKDIR

EXE_LOGITS holds `--print-logits --quiet` output of the digits executable
(vmoe-compile with the same description) for the test set. Prints one line
per check; vmoe-api.test verifies them with FileCheck.
"""

import json
import os
import struct
import sys
import zlib

import numpy as np

import vmoe

root, exe_logits_path, workdir = sys.argv[1:4]
description = os.path.join(root, "digits.json")
weights = os.path.join(root, "digits.safetensors")
test = os.path.join(root, "test")
with open(os.path.join(test, "labels.txt"), encoding="utf-8") as f:
    names = [line.split()[0] for line in f
             if line.strip() and not line.startswith("#")]
paths = [os.path.join(test, name) for name in names]


def error(call):
    """Runs `call`; returns 'Type: message' of the exception it raises."""
    try:
        call()
    except Exception as err:  # pylint: disable=broad-except
        message = str(err)
        assert "\n" not in message, f"multi-line message: {message!r}"
        return f"{type(err).__name__}: {message}"
    return "no error"


def write_png(path, pixels):
    """An 8-bit gray PNG of `pixels` [H, W] (uint8), with zlib only."""
    height, width = pixels.shape
    raw = b"".join(b"\0" + bytes(row) for row in pixels.astype(np.uint8))

    def chunk(kind, data):
        body = kind + data
        return (struct.pack(">I", len(data)) + body +
                struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF))

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) +
                chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


model = vmoe.compile(description, weights=weights)
print(repr(model))
print(f"batch {model.batch_images} classes {model.num_classes} experts "
      f"{model.num_experts} C {model.default_capacity_ratio} max "
      f"{model.max_capacity_ratio} routing {model.routing} target "
      f"{model.target} names {''.join(model.class_names)}")

# Logits: bit for bit those of the executable.
images = model.load_images(paths)
logits = model(images)
expected = {}
with open(exe_logits_path, encoding="utf-8") as f:
    for line in f:
        if ": logits " not in line:
            continue  # the accuracy line
        path, values = line.split(": logits ")
        expected[os.path.basename(path)] = np.array(values.split(),
                                                    dtype=np.float32)
same = sum(np.array_equal(logits[i], expected[name])
           for i, name in enumerate(names))
print(f"logits equal the executable's: {same}/{len(names)} "
      f"shape {logits.shape} {logits.dtype}")
print(f"predict equals argmax: "
      f"{np.array_equal(model.predict(images), logits.argmax(1))}")

# Statistics: every choice (k = 2 per token, 5 tokens per image) is kept
# or dropped; a short call counts its padding images.
_, stats = model.forward(images, stats=True)
print(f"stats: blocks {stats.blocks.tolist()} kept {stats.kept.shape} "
      f"total {stats.total.tolist()} drop rate "
      f"{np.round(stats.drop_rate, 4).tolist()}")
short, short_stats = model.forward(images[:13], stats=True)
print(f"13 images: logits {short.shape}, first batch unchanged "
      f"{np.array_equal(short[:8], logits[:8])}, choices "
      f"{short_stats.total.tolist()}")
model.padding = "zeros"
zeros, zeros_stats = model.forward(images[:13], stats=True)
model.padding = "masked"
print(f"padding zeros: first batch unchanged "
      f"{np.array_equal(zeros[:8], logits[:8])}, choices "
      f"{zeros_stats.total.tolist()}, mode back to {model.padding}")
print(f"padding black: {error(lambda: setattr(model, 'padding', 'black'))}")
print(f"0 images: {model(images[:0]).shape}")

# Run-time capacity ratio: per call or as the model's default.
half = model(images, capacity_ratio=0.5)
model.capacity_ratio = 0.5
print(f"C=0.5 differs from C=1.05: {not np.array_equal(half, logits)}; "
      f"default C now {model.capacity_ratio}, same logits "
      f"{np.array_equal(model(images), half)}")
model.capacity_ratio = model.default_capacity_ratio
for ratio in (0.0, 2.5, 0.05, float("nan")):
    print(f"capacity ratio {ratio}: "
          f"{error(lambda r=ratio: model.forward(images, capacity_ratio=r))}")
print(f"setting capacity ratio 3: "
      f"{error(lambda: setattr(model, 'capacity_ratio', 3))}")

# Threads: results do not depend on them.
model.threads = 1
print(f"threads {model.threads}: same logits "
      f"{np.array_equal(model(images), logits)}")
print(f"threads 0: {error(lambda: setattr(model, 'threads', 0))}")
# Checked in Python: 2^32 + 1 would wrap to 1 in the C int.
for count in (2**32 + 1, 2**31, 1025, 2.5, True, "4"):
    print(f"threads {count!r}: "
          f"{error(lambda c=count: setattr(model, 'threads', c))}")
model.threads = 2
print(f"threads after refusals: {model.threads}")

# Weights from {name: array}, and a dict missing a tensor.
tensors = vmoe.safetensors.load(weights)
from_dict = vmoe.load(model.library_path, weights=tensors)
print(f"weights from a dict: same logits "
      f"{np.array_equal(from_dict(images), logits)}")
del tensors["head.bias"]
print(f"dict without head.bias: "
      f"{error(lambda: from_dict.load_weights(tensors))}")
print(f"earlier weights kept: {np.array_equal(from_dict(images), logits)}")

# A second model in the process (vanilla routing, its own library, built
# with cache=False: no files left behind): both keep their own code and
# state.
vanilla = vmoe.compile(description, weights=weights, routing="vanilla",
                       cache=False)
print(f"vanilla: routing {vanilla.routing}, library removed "
      f"{not os.path.exists(os.path.dirname(vanilla.library_path))}, other "
      f"logits at C=0.5 {not np.array_equal(vanilla(images, 0.5), half)}")
print(f"bpr model unchanged: {np.array_equal(model(images), logits)}")

# The cache: the same description as a dict or a JSON string is the same
# library.
with open(description, encoding="utf-8") as f:
    text = f.read()
as_dict = vmoe.compile_library(json.loads(text))
as_text = vmoe.compile_library(text)
print(f"cached: dict {as_dict == model.library_path}, "
      f"JSON string {as_text == model.library_path}")

# Normalization in numpy equals the runtime's PNG reader.
pixels = (np.arange(64).reshape(8, 8) * 4 + 3).astype(np.uint8)
png = os.path.join(workdir, "ramp.png")
write_png(png, pixels)
print(f"normalize equals load_image: "
      f"{np.array_equal(model.normalize(pixels[None]), model.load_image(png))}")

# Errors: one line each.
bad = json.loads(text)
bad["moe"]["k"] = 9
print(f"bad description: {error(lambda: vmoe.compile(bad))}")
print(f"bad description file: "
      f"{error(lambda: vmoe.compile(os.path.join(workdir, 'bad.json')))}")
print(f"missing description: "
      f"{error(lambda: vmoe.compile(os.path.join(workdir, 'none.json')))}")
print(f"not a description: {error(lambda: vmoe.compile(42))}")
print(f"unknown option: "
      f"{error(lambda: vmoe.compile(description, no_such_option=1))}")
print(f"precision f64: "
      f"{error(lambda: vmoe.compile(description, precision='f64'))}")
print(f"bad compiler: "
      f"{error(lambda: vmoe.compile(description, compiler='/nonexistent'))}")
print(f"missing weights: "
      f"{error(lambda: vmoe.compile(description, weights='/nonexistent.st'))}")
compiler = vmoe.find_compiler()
os.environ["VMOE_COMPILE"] = "/nonexistent/vmoe-compile"
print(f"bad VMOE_COMPILE: {error(lambda: vmoe.compile(description))}")
unloaded = vmoe.load(model.library_path)
print(f"no weights: {error(lambda: unloaded(images))}")
print(f"wrong shape: {error(lambda: model(images[:, :, :4]))}")
print(f"missing image: "
      f"{error(lambda: model.load_image(os.path.join(workdir, 'no.png')))}")
print(f"not a model library: {error(lambda: vmoe.load(png))}")
print(f"capacity ratio 'abc': "
      f"{error(lambda: model.forward(images, capacity_ratio='abc'))}")
print(f"images of strings: "
      f"{error(lambda: model(np.full((1, 1, 8, 8), 'x')))}")
print(f"weights with a string: "
      f"{error(lambda: from_dict.load_weights({'head.bias': 'abc'}))}")
nan = json.loads(text)
nan["moe"]["capacity_ratio"] = float("nan")
print(f"NaN in a description dict: "
      f"{error(lambda: vmoe.compile(nan, compiler=compiler))}")
latin = os.path.join(workdir, "latin.json")
with open(latin, "wb") as f:
    f.write(text.replace('"digits-vmoe"', '"d\xefgits"').encode("latin-1"))
print(f"description not UTF-8: "
      f"{error(lambda: vmoe.compile(latin, compiler=compiler))}")
deep = os.path.join(workdir, "deep.safetensors")
with open(deep, "wb") as f:
    f.write((100000).to_bytes(8, "little") + b"[" * 100000)
print(f"safetensors header nested deeply: "
      f"{error(lambda: vmoe.safetensors.load(deep))}")
try:
    vmoe.safetensors.load(deep)
except vmoe.VMoEError as err:
    print(f"FormatError is a VMoEError and a ValueError: "
          f"{isinstance(err, vmoe.FormatError) and isinstance(err, ValueError)}")
