"""Trains the small V-MoE of examples/digits on scikit-learn's digits.

    cd python && /usr/bin/python3 -m vmoe_tools.train_digits [--epochs N]

Data: sklearn.datasets.load_digits (1,797 real 8x8 images, values 0..16),
converted to 8-bit pixels p = round(v * 255 / 16), exactly what the PNGs
hold, then normalized as ModelFormat §4 (p/255, mean 0.5, std 0.5). A fixed
stratified split (seed 0) keeps 360 test images (45 groups of 8); the other
1,437 train.

Model: the example description of ModelFormat §1 (8x8x1, patch 2, D=64,
depth 4, 4 heads, H=128, every-2 -> MoE in blocks 1 and 3, E=8, k=2, groups
of 8 images). Training uses vanilla routing at C=1.05 with router noise
(std 1/E), the V-MoE auxiliary loss and label smoothing 0.1, AdamW with
warm-up and cosine decay; the exported description says routing "bpr"
(score max, C=1.05), the deployed default. Training is deterministic
(seeded, deterministic algorithms, 2 threads): the same run gives the same
bytes.

Writes to examples/digits/: digits.json, digits.safetensors,
test/0000.png .. test/0359.png (8-bit grayscale) and test/labels.txt
(`NNNN.png LABEL` per line).
"""

import argparse
import json
import os
import re
import struct
import time
import zlib

import numpy as np
import torch
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

from vmoe_ref import model as vmodel

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))

DESCRIPTION = {
    "format": "vmoe-model",
    "version": 1,
    "name": "digits-vmoe",
    "image": {"height": 8, "width": 8, "channels": 1},
    "input": {"mean": [0.5], "std": [0.5]},
    "patch_size": 2,
    "width": 64,
    "depth": 4,
    "heads": 4,
    "mlp_dim": 128,
    "classes": 10,
    "class_names": [str(d) for d in range(10)],
    "head": "token",
    "layer_norm_epsilon": 1e-6,
    "mlp_activation": "gelu_tanh",
    "dtype": "f32",
    "moe": {
        "placement": "every-2",
        "num_experts": 8,
        "k": 2,
        "capacity_ratio": 1.05,
        "capacity_rule": "round",
        "multiple_of": 1,
        "routing": "bpr",
        "score": "max",
        "order": "softmax_topk",
        "normalize": False,
        "activation": "gelu_tanh",
        "group_size": 8,
    },
}

TEST_SIZE = 360
SPLIT_SEED = 0
AUX_LOSS_WEIGHT = 0.01  # per MoE layer, as in V-MoE
LABEL_SMOOTHING = 0.1


def digits_uint8():
    """(images uint8 [1797, 1, 8, 8], labels int64): p = round(v*255/16)."""
    digits = load_digits()
    pixels = np.rint(digits.images * 255.0 / 16.0)
    return pixels.astype(np.uint8)[:, None], digits.target.astype(np.int64)


def split(images, labels):
    """The fixed stratified split: (train images, labels, test ..., ...)."""
    x_train, x_test, y_train, y_test = train_test_split(
        images, labels, test_size=TEST_SIZE, stratify=labels,
        random_state=SPLIT_SEED)
    return x_train, y_train, x_test, y_test


def write_png(path, pixels):
    """Writes uint8 [H, W] as an 8-bit grayscale PNG (no filtering)."""
    height, width = pixels.shape

    def chunk(kind, data):
        body = kind + data
        return (struct.pack(">I", len(data)) + body
                + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF))
    rows = b"".join(b"\x00" + bytes(row) for row in
                    np.asarray(pixels, dtype=np.uint8))
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n")
        f.write(chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0,
                                           0, 0, 0)))
        f.write(chunk(b"IDAT", zlib.compress(rows, 9)))
        f.write(chunk(b"IEND", b""))


def format_json(value, indent=0):
    """JSON laid out as in ModelFormat §1: lists and short nested objects
    on one line, other objects one key per line; floats as 1e-6, not 1e-06.
    """
    if isinstance(value, float):
        return re.sub(r"e([+-])0(\d)", r"e\1\2", json.dumps(value))
    if isinstance(value, list):
        return "[" + ", ".join(format_json(v) for v in value) + "]"
    if not isinstance(value, dict):
        return json.dumps(value)
    items = [f"{json.dumps(k)}: {format_json(v, indent + 2)}"
             for k, v in value.items()]
    inline = "{" + ", ".join(items) + "}"
    if indent > 0 and len(inline) <= 60:
        return inline
    pad = " " * (indent + 2)
    return ("{\n" + ",\n".join(pad + item for item in items) + "\n"
            + " " * indent + "}")


def export(net, x_test, y_test, out_dir):
    """Writes the description, weights, test PNGs and labels."""
    test_dir = os.path.join(out_dir, "test")
    os.makedirs(test_dir, exist_ok=True)
    with open(os.path.join(out_dir, "digits.json"), "w") as f:
        f.write(format_json(DESCRIPTION) + "\n")
    vmodel.save_safetensors(os.path.join(out_dir, "digits.safetensors"),
                            net.export_tensors(), {"format": "pt"})
    lines = []
    for i, (image, label) in enumerate(zip(x_test, y_test)):
        name = f"{i:04d}.png"
        write_png(os.path.join(test_dir, name), image[0])
        lines.append(f"{name} {label}\n")
    with open(os.path.join(test_dir, "labels.txt"), "w") as f:
        f.writelines(lines)


def accuracy(net, images, labels, routing, capacity_ratio=1.05):
    """Test accuracy with the given routing (score max)."""
    logits, _ = vmodel.evaluate(net, images, routing=routing, score="max",
                                capacity_ratio=capacity_ratio)
    return float((logits.argmax(1) == labels).mean())


def train(net, x_train, y_train, x_test, y_test, epochs, batch, lr):
    """AdamW with linear warm-up and cosine decay; prints each epoch.

    Batches are whole routing groups of shuffled training images; the
    images left over (1,437 mod 8 per epoch) change from epoch to epoch.
    """
    desc = net.desc
    mean, std = desc["input"]["mean"], desc["input"]["std"]
    inputs = vmodel.normalize_images(x_train, mean, std)
    targets = torch.from_numpy(y_train)
    group = desc["moe"]["group_size"]
    usable = len(inputs) // group * group  # whole routing groups only
    steps_per_epoch = -(-usable // batch)
    total = epochs * steps_per_epoch
    warmup = steps_per_epoch * 2
    opt = torch.optim.AdamW(net.parameters(), lr=lr, weight_decay=0.05)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(
        (s + 1) / warmup, 0.5 * (1 + np.cos(np.pi * s / total))))
    for epoch in range(epochs):
        net.train()
        perm = torch.randperm(len(inputs))[:usable]
        losses = []
        for start in range(0, usable, batch):
            idx = perm[start:start + batch]
            logits, layers = net(inputs[idx], routing="vanilla",
                                 capacity_ratio=1.05)
            loss = torch.nn.functional.cross_entropy(
                logits, targets[idx], label_smoothing=LABEL_SMOOTHING)
            aux = sum(layer["aux_loss"] for layer in layers)
            opt.zero_grad()
            (loss + AUX_LOSS_WEIGHT * aux).backward()
            opt.step()
            sched.step()
            losses.append(float(loss))
        acc = accuracy(net, x_test, y_test, "vanilla")
        print(f"epoch {epoch + 1:3d}  loss {np.mean(losses):.4f}  "
              f"aux (last step) {float(aux):.4f}  test acc (vanilla, C=1.05) "
              f"{acc:.4f}", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--batch", type=int, default=64,
                        help="images per step (a multiple of 8)")
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=os.path.join(REPO, "examples",
                                                      "digits"))
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(2)

    x_train, y_train, x_test, y_test = split(*digits_uint8())
    print(f"train {len(x_train)} images, test {len(x_test)} images")
    net = vmodel.VMoE(DESCRIPTION)
    start = time.time()
    train(net, x_train, y_train, x_test, y_test, args.epochs, args.batch,
          args.lr)
    print(f"training time {time.time() - start:.1f} s")
    net.eval()
    for routing in ("vanilla", "bpr"):
        print(f"final test accuracy ({routing}, C=1.05): "
              f"{accuracy(net, x_test, y_test, routing):.4f}")
    export(net, x_test, y_test, args.out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
