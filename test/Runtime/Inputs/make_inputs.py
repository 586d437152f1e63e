"""Inputs and expected outputs of the test/Runtime tests (stdlib only).

The tests run the runtime linked with fake_model.c, a test double of a
compiled model: logits = bias + pixels . kernel over the normalized pixels.
This script is the independent side of those tests: it writes PNG images
(with its own minimal encoder), safetensors files (good and broken) and
image lists, and computes what the runtime must print for them from the
format rules of docs/ModelFormat.md §4, emulating float32 arithmetic.

  make_inputs.py images DIR              all PNG files and image lists
  make_inputs.py weights DIR             good and broken safetensors files
  make_inputs.py expect --model MODEL [options] PATH...
      FileCheck lines (PREFIX, then PREFIX-NEXT) for the images PATH and the
      --list entries: the top classes (named as in --labels FILE when
      given), or with --logits the logits in %.9g; then the accuracy when
      the list has labels.
"""

import argparse
import json
import math
import os
import struct
import sys
import zlib

# ----------------------------------------------------------------------------
# The two fake models (must match fake_model.c).

MODELS = {
    "gray": {
        "channels": 1,
        "mean": [0.5],
        "std": [0.25],
        "class_names": ["dark", "bright"],
        "kernel": [[-1.0, 1.0], [-0.5, 0.75], [-0.25, 1.5], [-2.0, 0.125]],
        "bias": [0.5, -0.25],
    },
    "rgb": {
        "channels": 3,
        "mean": [0.5, 0.25, 0.125],
        "std": [0.5, 0.25, 2.0],
        "class_names": None,
        "kernel": [[((i * 7 + c * 3) % 11 - 5) / 8.0 for c in range(2)]
                   for i in range(12)],
        "bias": [0.25, -0.5],
    },
}

# ----------------------------------------------------------------------------
# PNG encoder.

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
GRAY, RGB, PALETTE, GRAY_ALPHA, RGBA = 0, 2, 3, 4, 6
SAMPLES = {GRAY: 1, RGB: 3, PALETTE: 1, GRAY_ALPHA: 2, RGBA: 4}
# Adam7 passes: first row, first column, row step, column step.
ADAM7 = [(0, 0, 8, 8), (0, 4, 8, 8), (4, 0, 8, 4), (0, 2, 4, 4),
         (2, 0, 4, 2), (0, 1, 2, 2), (1, 0, 2, 1)]


def chunk(kind, data):
    return (struct.pack(">I", len(data)) + kind + data +
            struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))


def pack_row(pixels, bit_depth):
    samples = [s for pixel in pixels for s in pixel]
    if bit_depth == 16:
        return b"".join(struct.pack(">H", s) for s in samples)
    if bit_depth == 8:
        return bytes(samples)
    out, acc, bits = bytearray(), 0, 0
    for s in samples:
        acc, bits = (acc << bit_depth) | s, bits + bit_depth
        if bits == 8:
            out.append(acc)
            acc, bits = 0, 0
    if bits:
        out.append(acc << (8 - bits))
    return bytes(out)


def encode_png(spec):
    """spec: color, depth, pixels (rows of sample tuples), optional palette,
    trns, interlace."""
    pixels = spec["pixels"]
    height, width = len(pixels), len(pixels[0])
    interlace = spec.get("interlace", False)
    raw = b""
    for row0, col0, drow, dcol in (ADAM7 if interlace else [(0, 0, 1, 1)]):
        rows, cols = range(row0, height, drow), range(col0, width, dcol)
        if len(rows) and len(cols):
            for r in rows:
                raw += b"\0" + pack_row([pixels[r][c] for c in cols],
                                        spec["depth"])
    data = PNG_SIGNATURE + chunk(b"IHDR", struct.pack(
        ">IIBBBBB", width, height, spec["depth"], spec["color"], 0, 0,
        1 if interlace else 0))
    if "palette" in spec:
        data += chunk(b"PLTE", bytes(v for rgb in spec["palette"] for v in rgb))
    if "trns" in spec:
        data += chunk(b"tRNS", spec["trns"])
    return data + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


def to_8bit(sample, depth):
    """The 8-bit value of a sample per §4 (16 bits scaled with rounding)."""
    if depth == 16:
        return (sample * 255 + 32895) >> 16
    if depth < 8:
        return sample * 255 // ((1 << depth) - 1)
    return sample


def planes(spec, channels):
    """Raw 8-bit values per model channel, row-major, from the PNG rules."""
    out = [[] for _ in range(channels)]
    for row in spec["pixels"]:
        for pixel in row:
            if spec["color"] == PALETTE:
                rgb = list(spec["palette"][pixel[0]])
            else:
                values = [to_8bit(s, spec["depth"]) for s in pixel]
                gray = spec["color"] in (GRAY, GRAY_ALPHA)
                rgb = values[:1] * 3 if gray else values[:3]
            for c in range(channels):
                out[c].append(rgb[c])
    return out


def gray8(rows):
    return {"color": GRAY, "depth": 8, "pixels": [[(v,) for v in r] for r in rows]}


# Images both models read; name -> spec.
GRAY_IMAGES = {
    "black": gray8([[0, 0], [0, 0]]),
    "white": gray8([[255, 255], [255, 255]]),
    "checker": gray8([[0, 255], [255, 0]]),
    "gradient": gray8([[10, 100], [150, 250]]),
    "gray16": {"color": GRAY, "depth": 16,
               "pixels": [[(51528,), (0,)], [(65535,), (257 * 77 + 200,)]]},
    "gray1": {"color": GRAY, "depth": 1, "pixels": [[(1,), (0,)], [(0,), (1,)]]},
    "gray_alpha": {"color": GRAY_ALPHA, "depth": 8,
                   "pixels": [[(30, 0), (60, 128)], [(90, 255), (200, 7)]]},
    "interlaced": dict(gray8([[11, 222], [133, 44]]), interlace=True),
}
# Color images, for the 3-channel model only.
RGB_IMAGES = {
    "rgb": {"color": RGB, "depth": 8,
            "pixels": [[(255, 0, 0), (0, 255, 0)], [(0, 0, 255), (12, 34, 56)]]},
    "rgba": {"color": RGBA, "depth": 8,
             "pixels": [[(200, 10, 20, 0), (30, 40, 50, 255)],
                        [(60, 70, 80, 128), (90, 100, 110, 1)]]},
    "rgb16": {"color": RGB, "depth": 16,
              "pixels": [[(51528, 65535, 0), (1000, 2000, 3000)],
                         [(40000, 50000, 60000), (257, 514, 771)]]},
    "palette": {"color": PALETTE, "depth": 8,
                "palette": [(250, 0, 125), (5, 6, 7), (100, 150, 200)],
                "trns": b"\x00\x80",
                "pixels": [[(0,), (1,)], [(2,), (1,)]]},
}
IMAGES = dict(GRAY_IMAGES, **RGB_IMAGES)


def write_images(directory):
    os.makedirs(directory, exist_ok=True)

    def write(name, data):
        with open(os.path.join(directory, name), "wb") as f:
            f.write(data)

    for name, spec in IMAGES.items():
        write(name + ".png", encode_png(spec))
    gradient = encode_png(GRAY_IMAGES["gradient"])
    write("big.png", encode_png(gray8([[1, 2, 3], [4, 5, 6], [7, 8, 9]])))
    write("notpng.png", b"this is not a PNG file\n")
    write("empty.png", b"")
    write("truncated.png", gradient[:len(gradient) // 2])
    write("no_iend.png", gradient[:-12])
    # A flipped bit in the CRC of the IDAT chunk (just before IEND).
    crc = len(gradient) - 16
    write("bad_crc.png", gradient[:crc] + bytes([gradient[crc] ^ 1]) +
          gradient[crc + 1:])
    # Valid chunks around an IDAT that is not zlib data.
    raw = PNG_SIGNATURE + chunk(b"IHDR", struct.pack(
        ">IIBBBBB", 2, 2, 8, GRAY, 0, 0, 0))
    write("bad_zlib.png", raw + chunk(b"IDAT", b"\xff" * 16) + chunk(b"IEND", b""))
    write("zero_width.png", PNG_SIGNATURE + chunk(b"IHDR", struct.pack(
        ">IIBBBBB", 0, 2, 8, GRAY, 0, 0, 0)) + chunk(b"IEND", b""))

    with open(os.path.join(directory, "list.txt"), "w") as f:
        f.write("# images of the gray model, paths relative to this file\n"
                "black.png dark\n"
                "\n"
                "white.png bright\n"
                "   checker.png 1\n"
                "gradient.png\t0\n"
                "  # a comment after blanks\n"
                "gray16.png bright\n"
                "interlaced.png\n")
    with open(os.path.join(directory, "list_fields.txt"), "w") as f:
        f.write("black.png dark\nwhite.png bright extra\n")
    with open(os.path.join(directory, "list_label.txt"), "w") as f:
        f.write("black.png dark\nwhite.png cat\n")
    with open(os.path.join(directory, "list_missing.txt"), "w") as f:
        f.write("black.png\nnowhere.png\n")
    # Class name files (--labels) for the gray model's 2 classes.
    for name, text in (("labels.txt", "night\nday\n"),
                       ("labels_crlf.txt", "night \r\nday\r\n"),
                       ("labels_three.txt", "night\nday\ndusk\n"),
                       ("labels_empty_line.txt", "night\n\n")):
        with open(os.path.join(directory, name), "w", newline="") as f:
            f.write(text)
    with open(os.path.join(directory, "list_labels.txt"), "w") as f:
        f.write("black.png night\nwhite.png day\ngradient.png day\n")


# ----------------------------------------------------------------------------
# Safetensors.


def f32_bytes(values):
    return struct.pack("<%df" % len(values), *values)


def safetensors(entries, metadata=None, extra_header=None):
    """entries: (name, dtype, shape, data bytes); offsets are consecutive."""
    header, data = {}, b""
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape, payload in entries:
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [len(data), len(data) + len(payload)]}
        data += payload
    header.update(extra_header or {})
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data


def model_entries(model):
    kernel = [v for row in MODELS[model]["kernel"] for v in row]
    return [("head.kernel", "F32", [len(MODELS[model]["kernel"]), 2],
             f32_bytes(kernel)),
            ("head.bias", "F32", [2], f32_bytes(MODELS[model]["bias"]))]


def write_weights(directory):
    os.makedirs(directory, exist_ok=True)

    def write(name, data):
        with open(os.path.join(directory, name), "wb") as f:
            f.write(data)

    kernel, bias = model_entries("gray")
    good = safetensors([kernel, bias], metadata={"format": "pt"})
    write("good.safetensors", good)
    write("good_rgb.safetensors", safetensors(model_entries("rgb")))
    write("short.safetensors", good[:5])
    write("truncated.safetensors", good[:-4])
    write("huge_header.safetensors", struct.pack("<Q", 1 << 40) + good[8:])
    write("long_header.safetensors", struct.pack("<Q", len(good)) + good[8:])
    write("not_json.safetensors", struct.pack("<Q", 9) + b"{not json")
    write("not_object.safetensors", struct.pack("<Q", 8) + b"[1, 2]  ")
    write("entry_not_object.safetensors",
          safetensors([kernel], extra_header={"head.bias": [1, 2]}))
    no_dtype = json.dumps({
        "head.kernel": {"shape": [4, 2], "data_offsets": [0, 32]},
        "head.bias": {"dtype": "F32", "shape": [2], "data_offsets": [32, 40]},
    }).encode()
    write("no_dtype.safetensors",
          struct.pack("<Q", len(no_dtype)) + no_dtype + good[-40:])
    write("f16.safetensors", safetensors(
        [kernel, ("head.bias", "F16", [2], b"\0\x3c\0\x3c")]))
    write("misshapen.safetensors", safetensors(
        [("head.kernel", "F32", [2, 4], kernel[3]), bias]))
    write("bad_offsets.safetensors", safetensors(
        [kernel, ("head.bias", "F32", [2], bias[3][:4])]))
    write("missing.safetensors", safetensors([kernel]))

    def with_offsets(kernel_offsets, bias_offsets, data):
        text = json.dumps({
            "head.kernel": {"dtype": "F32", "shape": [4, 2],
                            "data_offsets": kernel_offsets},
            "head.bias": {"dtype": "F32", "shape": [2],
                          "data_offsets": bias_offsets}}).encode()
        return struct.pack("<Q", len(text)) + text + data
    data = kernel[3] + bias[3]
    # The tensors must cover the data area exactly (the format's rule).
    write("overlap.safetensors", with_offsets([0, 32], [24, 32], data))
    write("hole.safetensors",
          with_offsets([0, 32], [40, 48], kernel[3] + bytes(8) + bias[3]))
    write("trailing.safetensors",
          with_offsets([0, 32], [32, 40], data + bytes(8)))
    write("extra.safetensors", safetensors(
        [kernel, bias, ("head.extra", "F32", [1], f32_bytes([1.0]))]))


# ----------------------------------------------------------------------------
# Expected output, in float32 like the runtime and the fake model.


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def logits_of(name, model):
    spec, m = IMAGES[name], MODELS[model]
    x = []
    for c, plane in enumerate(planes(spec, m["channels"])):
        for p in plane:
            v = f32(f32(float(p)) / f32(255.0))
            x.append(f32(f32(v - f32(m["mean"][c])) / f32(m["std"][c])))
    out = []
    for c in range(2):
        acc = f32(m["bias"][c])
        for i, v in enumerate(x):
            acc = f32(acc + f32(v * f32(m["kernel"][i][c])))
        out.append(acc)
    return out


def ranked(logits):
    return sorted(range(len(logits)), key=lambda c: (-logits[c], c))


def top_line(path, logits, names, top):
    largest = max(logits)
    exps = [math.exp(v - largest) for v in logits]
    parts = []
    for c in ranked(logits)[:top]:
        label = names[c] if names else str(c)
        parts.append("%s (%.4f)" % (label, exps[c] / sum(exps)))
    return "%s: %s" % (path, ", ".join(parts))


def read_list(path):
    directory = os.path.dirname(path)
    for line in open(path):
        fields = line.split()
        if fields and not fields[0].startswith("#"):
            yield (os.path.join(directory, fields[0]),
                   fields[1] if len(fields) > 1 else None)


def expect(args):
    entries = [(p, None) for p in args.paths]
    if args.list:
        entries += list(read_list(args.list))
    names = MODELS[args.model]["class_names"] or []
    if args.labels:
        names = [line.strip() for line in open(args.labels)]
    correct = labeled = 0
    lines = []
    for path, label in entries:
        name = os.path.splitext(os.path.basename(path))[0]
        logits = logits_of(name, args.model)
        if args.logits:
            lines.append("%s: logits %s" % (
                path, " ".join("%.9g" % v for v in logits)))
        else:
            lines.append(top_line(path, logits, names, args.top))
        if label is not None:
            labeled += 1
            cls = names.index(label) if label in names else int(label)
            correct += ranked(logits)[0] == cls
    if labeled:
        lines.append("accuracy: %d/%d = %.2f%%" % (
            correct, labeled, 100.0 * correct / labeled))
    # The first line anywhere after what precedes it, the others next.
    for index, line in enumerate(lines):
        print("%s%s: %s" % (args.prefix, "-NEXT" if index else "", line))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("images").add_argument("directory")
    sub.add_parser("weights").add_argument("directory")
    exp = sub.add_parser("expect")
    exp.add_argument("--model", choices=sorted(MODELS), required=True)
    exp.add_argument("paths", nargs="*")
    exp.add_argument("--list")
    exp.add_argument("--top", type=int, default=1)
    exp.add_argument("--labels")
    exp.add_argument("--logits", action="store_true")
    exp.add_argument("--prefix", default="CHECK")
    args = parser.parse_args()
    if args.command == "images":
        write_images(args.directory)
    elif args.command == "weights":
        write_weights(args.directory)
    else:
        expect(args)


if __name__ == "__main__":
    sys.exit(main())
