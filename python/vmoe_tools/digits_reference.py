"""Reference logits of a V-MoE model on a folder of PNGs (PyTorch).

    cd python && /usr/bin/python3 -m vmoe_tools.digits_reference \\
        --model ../examples/digits/digits.json \\
        --weights ../examples/digits/digits.safetensors \\
        --images ../examples/digits/test \\
        [--routing vanilla|bpr] [--score max|sum_topk] [--capacity-ratio C] \\
        [--groups-per-batch 1] --out FILE.npz

Loads and validates the description (ModelFormat §1) and the weights (§3:
every tensor present, F32, exact shapes, nothing extra), reads the images
(§4: 8- or 16-bit PNG, gray/RGB(A) converted to the model's channels) and
runs vmoe_ref.model.evaluate in batches of group_size * groups-per-batch
images, the last one padded with all-zero images masked out of routing
(the runtime's default padding). Routing options default to the
description's.

The images are the files listed in `labels.txt` (`NAME LABEL` per line) of
the folder, in that order, or else every *.png in name order (no labels,
accuracy NaN). The .npz holds: logits [N, classes] float32, predictions and
labels [N] int32 (labels -1 when unknown), accuracy (float64), stats
[L, E + 1] int32 (per MoE layer, kept choices per expert summed over
groups, then dropped choices; padding images excluded), moe_blocks [L],
files [N] (str). Errors print one line and exit 1.
"""

import argparse
import math
import os
import struct
import sys
import zlib

import numpy as np

from vmoe_ref import model as vmodel

_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_PNG_CHANNELS = {0: 1, 2: 3, 4: 2, 6: 4}  # color type -> samples per pixel


def _unfilter(raw, height, width, bpp, path):
    """Undoes the PNG row filters; returns uint8 [height, width * bpp]."""
    stride = width * bpp
    if len(raw) != height * (stride + 1):
        raise ValueError(f"{path}: image data is {len(raw)} bytes, "
                         f"expected {height * (stride + 1)}")
    rows = np.frombuffer(raw, dtype=np.uint8).reshape(height, stride + 1)
    out = np.zeros((height, stride), dtype=np.uint8)
    prior = np.zeros(stride, dtype=np.int32)
    for y in range(height):
        kind, line = rows[y, 0], rows[y, 1:].astype(np.int32)
        if kind == 0:
            cur = line
        elif kind == 1:  # Sub: running sum per byte position mod bpp
            cur = np.cumsum(line.reshape(width, bpp), axis=0).reshape(-1)
        elif kind == 2:  # Up
            cur = line + prior
        elif kind in (3, 4):  # Average, Paeth: sequential
            cur = line.tolist()
            up = prior.tolist()
            for i in range(stride):
                left = cur[i - bpp] if i >= bpp else 0
                if kind == 3:
                    cur[i] = (cur[i] + (left + up[i]) // 2) & 255
                else:
                    upleft = up[i - bpp] if i >= bpp else 0
                    p = left + up[i] - upleft
                    pa, pb, pc = abs(p - left), abs(p - up[i]), \
                        abs(p - upleft)
                    pred = left if pa <= pb and pa <= pc else (
                        up[i] if pb <= pc else upleft)
                    cur[i] = (cur[i] + pred) & 255
            cur = np.array(cur, dtype=np.int32)
        else:
            raise ValueError(f"{path}: row {y} has unknown filter {kind}")
        prior = cur & 255
        out[y] = prior
    return out


def read_png(path):
    """Reads a non-interlaced 8/16-bit gray, gray+alpha, RGB or RGBA PNG.

    Returns (uint8 [H, W, samples], color type). 16-bit samples are scaled
    to 8 bits by rounding v * 255 / 65535. Raises ValueError on anything
    malformed or unsupported.
    """
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != _PNG_SIGNATURE:
        raise ValueError(f"{path}: not a PNG file")
    pos, header, idat = 8, None, []
    while True:
        if pos + 12 > len(data):
            raise ValueError(f"{path}: truncated PNG (no IEND chunk)")
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        name = kind.decode("latin-1")
        body = data[pos + 8:pos + 8 + length]
        crc = data[pos + 8 + length:pos + 12 + length]
        if len(body) != length or len(crc) != 4:
            raise ValueError(f"{path}: truncated {name} chunk")
        if zlib.crc32(kind + body) & 0xFFFFFFFF != \
                struct.unpack(">I", crc)[0]:
            raise ValueError(f"{path}: CRC mismatch in {name} chunk")
        pos += 12 + length
        if kind == b"IHDR":
            if length != 13:
                raise ValueError(f"{path}: bad IHDR length {length}")
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
    if header is None:
        raise ValueError(f"{path}: missing IHDR chunk")
    width, height, depth, color, compression, filtering, interlace = header
    if color not in _PNG_CHANNELS:
        raise ValueError(f"{path}: unsupported PNG color type {color} "
                         "(palette images are not supported)")
    if depth not in (8, 16):
        raise ValueError(f"{path}: unsupported bit depth {depth} "
                         "(8 or 16 only)")
    if compression or filtering or interlace:
        raise ValueError(f"{path}: unsupported PNG (interlaced or unknown "
                         "compression/filter method)")
    if width == 0 or height == 0:
        raise ValueError(f"{path}: empty image {width}x{height}")
    samples = _PNG_CHANNELS[color]
    try:
        raw = zlib.decompress(b"".join(idat))
    except zlib.error as err:
        raise ValueError(f"{path}: corrupt image data: {err}") from None
    rows = _unfilter(raw, height, width, samples * depth // 8, path)
    if depth == 16:
        wide = rows.reshape(height, -1, 2).astype(np.uint32)
        values = (wide[..., 0] << 8) | wide[..., 1]
        rows = ((values * 255 + 32767) // 65535).astype(np.uint8)
    return rows.reshape(height, width, samples), color


def image_to_model(pixels, color, channels, path):
    """uint8 [H, W, samples] -> [channels, H, W] per ModelFormat §4.

    1-channel models take gray PNGs only (alpha dropped); 3-channel models
    take RGB (alpha dropped) or gray (replicated).
    """
    gray = color in (0, 4)
    if channels == 1:
        if not gray:
            raise ValueError(f"{path}: the model takes 1 channel; convert "
                             "the image to grayscale (RGB is not averaged)")
        return pixels[..., :1].transpose(2, 0, 1)
    if channels == 3:
        rgb = np.repeat(pixels[..., :1], 3, axis=2) if gray \
            else pixels[..., :3]
        return rgb.transpose(2, 0, 1)
    raise ValueError(f"{path}: models with {channels} channels take no PNGs")


def load_images(folder, desc):
    """(file names, uint8 [N, C, H, W], labels int32 [N] or None)."""
    listing = os.path.join(folder, "labels.txt")
    if os.path.exists(listing):
        names, labels = [], []
        with open(listing, encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                fields = line.split()
                if not fields:
                    continue
                if len(fields) != 2 or not fields[1].lstrip("-").isdigit():
                    raise ValueError(f"{listing}:{number}: expected "
                                     f"'NAME LABEL', got {line.strip()!r}")
                names.append(fields[0])
                labels.append(int(fields[1]))
        labels = np.array(labels, dtype=np.int32)
    else:
        names = sorted(n for n in os.listdir(folder)
                       if n.lower().endswith(".png"))
        labels = None
    if not names:
        raise ValueError(f"{folder}: no images")
    image = desc["image"]
    images = []
    for name in names:
        path = os.path.join(folder, name)
        pixels, color = read_png(path)
        if pixels.shape[:2] != (image["height"], image["width"]):
            raise ValueError(f"{path}: image is {pixels.shape[1]}x"
                             f"{pixels.shape[0]}, the model takes "
                             f"{image['width']}x{image['height']}")
        images.append(image_to_model(pixels, color, image["channels"],
                                     path))
    return names, np.stack(images), labels


def accuracy(predictions, labels):
    """Fraction of correct predictions (NaN without labels)."""
    if labels is None:
        return math.nan
    return float((predictions == labels).mean())


def main(argv=None):
    parser = argparse.ArgumentParser(
        description="PyTorch reference logits of a V-MoE model on PNGs")
    parser.add_argument("--model", required=True, help="description JSON")
    parser.add_argument("--weights", required=True, help="safetensors file")
    parser.add_argument("--images", required=True, help="folder of PNGs")
    parser.add_argument("--routing", choices=vmodel.ROUTINGS)
    parser.add_argument("--score", choices=("max", "sum_topk"))
    parser.add_argument("--capacity-ratio", type=float)
    parser.add_argument("--groups-per-batch", type=int, default=1)
    parser.add_argument("--out", required=True, help="output .npz")
    args = parser.parse_args(argv)
    try:
        if args.groups_per_batch < 1:
            raise ValueError("--groups-per-batch must be >= 1")
        if args.capacity_ratio is not None and not (
                math.isfinite(args.capacity_ratio)
                and args.capacity_ratio > 0):
            raise ValueError("--capacity-ratio must be positive and finite")
        net = vmodel.load_model(args.model, args.weights)
        desc = net.desc
        names, images, labels = load_images(args.images, desc)
        logits, stats = vmodel.evaluate(
            net, images,
            batch=desc["moe"]["group_size"] * args.groups_per_batch,
            routing=args.routing, score=args.score,
            capacity_ratio=args.capacity_ratio)
        predictions = logits.argmax(1).astype(np.int32)
        acc = accuracy(predictions, labels)
        np.savez(args.out, logits=logits, predictions=predictions,
                 labels=(labels if labels is not None
                         else np.full(len(names), -1, np.int32)),
                 accuracy=np.float64(acc), stats=stats,
                 moe_blocks=np.array(net.moe_block_ids, dtype=np.int32),
                 files=np.array(names))
    except (ValueError, OSError) as err:
        print(f"digits_reference: error: {err}", file=sys.stderr)
        return 1
    moe = desc["moe"]
    routing = args.routing or moe["routing"]
    C = moe["capacity_ratio"] if args.capacity_ratio is None \
        else args.capacity_ratio
    if routing == "bpr":
        routing += f" ({args.score or moe['score']})"
    print(f"{desc['name']}: {len(names)} images, routing {routing}, C={C}")
    for block, row in zip(net.moe_block_ids, stats):
        print(f"  block {block}: kept per expert {row[:-1].tolist()}, "
              f"dropped {row[-1]}")
    if labels is not None:
        print(f"accuracy {acc:.4f} ({int((predictions == labels).sum())}/"
              f"{len(labels)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
