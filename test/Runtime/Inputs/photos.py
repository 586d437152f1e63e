"""Images of any size and format for the runtime tests, and the independent
check of the runtime's decoding and preprocessing (PIL, numpy, torch).

The runtime reads PNG and JPEG files of any size and runs the model's
preprocessing ops on them (docs/ModelFormat.md §4). This script writes such
files (PIL) from pixel arrays it generates, and checks what the runtime
makes of them (through the Python package, i.e. the C API's
vmoe_load_image) against its own computation: the generated pixels (PNG)
or PIL's decoding (JPEG), torch.nn.functional.interpolate for the bilinear
resize, an exact box integral in torch for the area resize, slicing for the
central crop, numpy for the normalization.

  photos.py images DIR [--weights WDIR]
      the test images in DIR with image lists of them (list.txt: all,
      list_gray.txt: those a 1-channel model reads), broken files in
      DIR/broken; with --weights, the weights of the photo variants of
      fake_model.c in WDIR (photo.safetensors, square.safetensors)
  photos.py check --python-path P DIR --model LIB WEIGHTS SET [LOGITS]...
      for each model library LIB and each image of SET (all, gray): the
      model input the runtime makes, within 1 gray level of the reference
      (--jpeg-tolerance for JPEGs decoded with the fast IDCT, which PIL does
      not have); numpy normalization (vmoe.Model.normalize) of the
      runtime's integer pixels equal to it when the pipeline ends on
      integers; with LOGITS (the executable's --print-logits output for
      the list of SET), the executable's logits equal vmoe.Model.forward
      on the runtime's inputs. Prints one line per image; exit status 1 on
      any mismatch.
"""

import argparse
import io
import os
import re
import struct
import sys
import zlib

import numpy as np

# ----------------------------------------------------------------------------
# The images: name -> (width, height, kind). Sizes are odd and unlike the
# models' (7x5, 6x6, 2x2), but for one of each model's own size.

IMAGES = {
    "rgb_37x23.png": (37, 23, "rgb"),
    "rgb_5x7.png": (5, 7, "rgb"),
    "rgb_3x2.png": (3, 2, "rgb"),
    "rgba_13x9.png": (13, 9, "rgba"),
    "palette_9x13.png": (9, 13, "palette"),
    "gray_31x17.png": (31, 17, "gray"),
    "gray16_17x31.png": (17, 31, "gray16"),
    "gray_alpha_11x7.png": (11, 7, "gray_alpha"),
    "gray1_19x11.png": (19, 11, "gray1"),
    "rgb420_23x37.jpg": (23, 37, "jpeg420"),
    "rgb444_progressive_101x64.jpg": (101, 64, "jpeg444p"),
    "gray_29x21.jpg": (29, 21, "jpeg_gray"),
}
GRAY_KINDS = {"gray", "gray16", "gray_alpha", "gray1", "jpeg_gray"}


def generate(width, height, channels, seed):
    """Smooth waves plus noise, uint8 [height, width, channels]."""
    rng = np.random.RandomState(seed)
    y, x = np.mgrid[0:height, 0:width].astype(np.float64)
    planes = []
    for c in range(channels):
        fx, fy = rng.uniform(0.1, 0.9, size=2)
        wave = 128 + 90 * np.sin(fx * x + fy * y + c)
        planes.append(wave + rng.normal(0, 25, size=wave.shape))
    return np.clip(np.stack(planes, -1), 0, 255).round().astype(np.uint8)


def seed_of(name):
    return zlib.crc32(name.encode())


def source_pixels(name):
    """The arrays the file of `name` is written from: (8-bit channels
    [H, W, C] as the runtime decodes them for 3 channels, extra data)."""
    width, height, kind = IMAGES[name]
    seed = seed_of(name)
    if kind in ("rgb", "jpeg420", "jpeg444p"):
        return generate(width, height, 3, seed), None
    if kind == "rgba":
        rgba = generate(width, height, 4, seed)
        return rgba[..., :3], rgba
    if kind == "palette":
        rng = np.random.RandomState(seed)
        palette = rng.randint(0, 256, size=(7, 3)).astype(np.uint8)
        indices = generate(width, height, 1, seed)[..., 0] % 7
        return palette[indices], (indices, palette)
    if kind == "gray16":
        rng = np.random.RandomState(seed)
        wide = generate(width, height, 1, seed)[..., 0].astype(np.uint32) * 257
        wide = (wide + rng.randint(0, 257, size=wide.shape)).clip(0, 65535)
        # libpng's png_set_scale_16: (v * 255 + 32895) >> 16.
        eight = ((wide * 255 + 32895) >> 16).astype(np.uint8)
        return np.repeat(eight[..., None], 3, -1), wide.astype(np.uint16)
    if kind == "gray1":
        bits = generate(width, height, 1, seed)[..., 0] >= 128
        eight = np.where(bits, 255, 0).astype(np.uint8)
        return np.repeat(eight[..., None], 3, -1), bits
    gray = generate(width, height, 1, seed)
    extra = None
    if kind == "gray_alpha":
        extra = generate(width, height, 1, seed + 1)[..., 0]
    return np.repeat(gray, 3, -1), extra


def write_image(directory, name):
    from PIL import Image

    width, height, kind = IMAGES[name]
    pixels, extra = source_pixels(name)
    path = os.path.join(directory, name)
    if kind == "rgb":
        Image.fromarray(pixels, "RGB").save(path)
    elif kind == "rgba":
        Image.fromarray(extra, "RGBA").save(path)
    elif kind == "palette":
        indices, palette = extra
        image = Image.fromarray(indices.astype(np.uint8), "P")
        image.putpalette(palette.flatten().tolist())
        image.save(path)
    elif kind == "gray16":
        Image.fromarray(extra, "I;16").save(path)
    elif kind == "gray1":
        Image.fromarray(extra).save(path)
    elif kind == "gray_alpha":
        Image.fromarray(np.stack([pixels[..., 0], extra], -1), "LA").save(path)
    elif kind == "gray":
        Image.fromarray(pixels[..., 0], "L").save(path)
    elif kind == "jpeg420":
        Image.fromarray(pixels, "RGB").save(path, quality=90, subsampling=2)
    elif kind == "jpeg444p":
        Image.fromarray(pixels, "RGB").save(path, quality=90, subsampling=0,
                                            progressive=True)
    elif kind == "jpeg_gray":
        Image.fromarray(pixels[..., 0], "L").save(path, quality=90)


# ----------------------------------------------------------------------------
# Broken files (image-errors.test).


def jpeg_bytes(pixels, **options):
    from PIL import Image

    out = io.BytesIO()
    Image.fromarray(pixels).save(out, "JPEG", **options)
    return out.getvalue()


def png_header_only(width, height):
    """A PNG whose IHDR (valid CRC) claims width x height, no data."""
    def chunk(kind, data):
        return (struct.pack(">I", len(data)) + kind + data +
                struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) +
            chunk(b"IDAT", zlib.compress(b"\0" * 16)) + chunk(b"IEND", b""))


def write_broken(directory):
    from PIL import Image

    def write(name, data):
        with open(os.path.join(directory, name), "wb") as f:
            f.write(data)

    good = jpeg_bytes(generate(16, 12, 3, 7), quality=90)
    sos = good.index(b"\xff\xda")
    write("truncated.jpg", good[:len(good) // 2])
    # The entropy-coded data complete, the EOI marker missing.
    write("no_eoi.jpg", good[:-2])
    # An EOI marker in the middle of the entropy-coded data.
    middle = (sos + len(good)) // 2
    write("cut_scan.jpg", good[:middle] + b"\xff\xd9")
    # The 16 code counts of the first Huffman table all 255.
    dht = good.index(b"\xff\xc4") + 5
    write("bad_huffman.jpg", good[:dht] + b"\xff" * 16 + good[dht + 16:])
    # The frame header claims 65500x65500 pixels.
    sof = good.index(b"\xff\xc0") + 5
    write("huge.jpg", good[:sof] + struct.pack(">HH", 65500, 65500) +
          good[sof + 4:])
    write("not_jpeg.jpg", b"\xff\xd8\xff" + b"this is not a JPEG" * 4)
    Image.new("L", (1, 1), 128).save(os.path.join(directory, "dot.png"))
    cmyk = io.BytesIO()
    Image.new("CMYK", (4, 4), (10, 20, 30, 40)).save(cmyk, "JPEG")
    write("cmyk.jpg", cmyk.getvalue())
    write("color.jpg", good)
    write("huge_side.png", png_header_only(100000, 2))
    write("huge_area.png", png_header_only(20000, 20000))


def write_images(directory):
    os.makedirs(os.path.join(directory, "broken"), exist_ok=True)
    for name in IMAGES:
        write_image(directory, name)
    for list_name, names in (("list.txt", image_set("all")),
                             ("list_gray.txt", image_set("gray"))):
        with open(os.path.join(directory, list_name), "w") as f:
            f.write("".join(name + "\n" for name in names))
    write_broken(os.path.join(directory, "broken"))


def image_set(which):
    """The names of the images of set "all" or "gray"."""
    return [name for name, (_, _, kind) in IMAGES.items()
            if which == "all" or kind in GRAY_KINDS]


# ----------------------------------------------------------------------------
# Weights of the photo variants of fake_model.c: head.kernel [C*H*W, 2] and
# head.bias [2].


def write_weights(directory):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(
        __file__)), "..", "..", "..", "python"))
    from vmoe import safetensors

    os.makedirs(directory, exist_ok=True)
    for name, pixels in (("photo", 105), ("square", 108)):
        kernel = np.array([[((i * 7 + c * 3) % 11 - 5) / 64.0
                            for c in range(2)] for i in range(pixels)],
                          np.float32)
        safetensors.save(os.path.join(directory, name + ".safetensors"),
                         {"head.kernel": kernel,
                          "head.bias": np.array([0.25, -0.5], np.float32)})


# ----------------------------------------------------------------------------
# The reference pipeline.


def parse_pipeline(text, height, width):
    """[(op, args)] of a `preprocess` string (the forms the tests use)."""
    if text is None:
        return [("resize", (height, width))]
    ops = []
    for part in text.split("|"):
        match = re.fullmatch(r"\s*(\w+)\s*(?:\((.*)\))?\s*", part)
        name, args = match.group(1), match.group(2) or ""
        values = [float(v) for v in re.findall(r"-?[0-9.]+", args)]
        if name == "decode":
            continue
        if name in ("resize", "central_crop") and len(values) == 1:
            values *= 2
        ops.append((name, tuple(values)))
    return ops


def decoded(path, name, channels):
    """The 8-bit image [H, W, C] the runtime should decode, float64."""
    from PIL import Image

    if name.endswith(".jpg"):
        image = Image.open(path)
        image = image.convert("L" if channels == 1 else "RGB")
        pixels = np.asarray(image, np.float64)
        return pixels.reshape(pixels.shape[0], pixels.shape[1], channels)
    pixels = source_pixels(name)[0].astype(np.float64)
    return pixels[..., :1] if channels == 1 else pixels


def reference(pixels, ops):
    """Runs `ops` on pixels [H, W, C] in float64 torch; returns the image
    and whether it holds integers (the original pipeline's uint8)."""
    import torch
    import torch.nn.functional as F

    x = torch.tensor(pixels).permute(2, 0, 1)[None]
    eight_bit = True
    value_range = None
    for name, args in ops:
        height, width = x.shape[2], x.shape[3]
        if name == "resize":
            size = (int(args[0]), int(args[1]))
            if size != (height, width):
                x = F.interpolate(x, size=size, mode="bilinear",
                                  align_corners=False, antialias=False)
            if eight_bit:
                x = torch.floor(x.clamp(0, 255))
        elif name == "resize_small":
            # tf.round(side * S / shorter) in float32, half to even.
            ratio = np.float32(args[0]) / np.float32(min(height, width))
            h = int(np.round(np.float32(height) * ratio))
            w = int(np.round(np.float32(width) * ratio))
            # The exact area average: each pixel split into h x w cells,
            # then every output pixel averages its height x width cells.
            cells = x.repeat_interleave(h, 2).repeat_interleave(w, 3)
            x = F.avg_pool2d(cells, (height, width), (height, width))
            eight_bit = False
        elif name == "central_crop":
            h, w = int(args[0]), int(args[1])
            top, left = (height - h) // 2, (width - w) // 2
            x = x[:, :, top:top + h, left:left + w]
        elif name == "value_range":
            value_range = args
    return x[0].permute(1, 2, 0).numpy(), eight_bit, value_range


def runtime_pixels(tensor, manifest, value_range):
    """The runtime's input [C, H, W] back in pixel values 0..255 [H, W, C]."""
    channels = tensor.shape[0]
    source = manifest.get("input", {})
    mean = np.array(source.get("mean", [0.0] * channels))[:, None, None]
    std = np.array(source.get("std", [1.0] * channels))[:, None, None]
    x = tensor.astype(np.float64) * std + mean
    if value_range:
        low, high = value_range
        x = (x - low) / (high - low)
    return (x * 255).transpose(1, 2, 0)


def check_model(vmoe, args, library, weights, names, logits_file):
    """Checks the images `names` on one model; returns whether all
    passed."""
    model = vmoe.Model(library, weights=weights)
    channels, height, width = model.input_shape
    text = model.manifest.get("preprocess")
    print(f"model {os.path.basename(library)}: {channels}x{height}x{width}, "
          f"preprocess {text or 'default'}")
    ops = parse_pipeline(text, height, width)
    fast_jpeg = "precise=True" not in (text or "")
    passed = True
    inputs = []
    for name in names:
        path = os.path.join(args.directory, name)
        tensor = model.load_image(path)
        inputs.append(tensor)
        expected, eight_bit, value_range = reference(
            decoded(path, name, channels), ops)
        got = runtime_pixels(tensor, model.manifest, value_range)
        difference = float(np.abs(got - expected).max())
        tolerance = 1.0
        if fast_jpeg and name.endswith(".jpg"):
            tolerance = args.jpeg_tolerance
        problems = []
        if difference > tolerance + 1e-3:
            problems.append(f"max difference {difference:.3f} gray levels")
        if eight_bit:
            # The runtime's pixels are integers: numpy's normalization of
            # them must give the runtime's input bit for bit.
            integers = np.round(got).clip(0, 255).astype(np.uint8)
            if not np.array_equal(model.normalize(integers.transpose(2, 0, 1)),
                                  tensor):
                problems.append("Model.normalize differs from load_image")
        if args.verbose:
            print(f"# {name}: max difference {difference:.4f}",
                  file=sys.stderr)
        print(f"{name}: " +
              ("FAIL " + ", ".join(problems) if problems else "ok"))
        passed &= not problems
    if logits_file:
        logits = model.forward(np.stack(inputs))
        lines = [line.split(": logits ") for line in open(logits_file)
                 if ": logits " in line]
        same = len(lines) == len(names) and all(
            os.path.basename(path) == name and
            values.split() == ["%.9g" % v for v in row]
            for (path, values), name, row in zip(lines, names, logits))
        print(f"executable logits {'equal' if same else 'DIFFER from'} "
              f"forward() on load_image(): {len(lines)} images")
        passed &= same
    return passed


def check(args):
    sys.path.insert(0, args.python_path)
    import vmoe

    passed = True
    for spec in args.model:
        if len(spec) not in (3, 4) or spec[2] not in ("all", "gray"):
            sys.exit("--model LIB WEIGHTS all|gray [LOGITS]")
        library, weights, which = spec[:3]
        logits_file = spec[3] if len(spec) == 4 else None
        passed &= check_model(vmoe, args, library, weights, image_set(which),
                              logits_file)
    return 0 if passed else 1


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    images = sub.add_parser("images")
    images.add_argument("directory")
    images.add_argument("--weights")
    chk = sub.add_parser("check")
    chk.add_argument("--python-path", required=True)
    chk.add_argument("--jpeg-tolerance", type=float, default=1.0)
    chk.add_argument("--model", nargs="+", action="append", required=True)
    chk.add_argument("--verbose", action="store_true")
    chk.add_argument("directory")
    args = parser.parse_args()
    if args.command == "check":
        return check(args)
    write_images(args.directory)
    if args.weights:
        write_weights(args.weights)
    return 0


if __name__ == "__main__":
    sys.exit(main())
