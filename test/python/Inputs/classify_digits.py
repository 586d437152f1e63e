"""Classifies the digits test set with the vmoe package (vmoe-package.test).

    python classify_digits.py EXAMPLES_DIGITS [capacity ratio | default...]

Prints where vmoe was imported from, then for each capacity ratio (default:
the model's) the accuracy and the expert load in the executable's format.
"""

import os
import sys

import numpy as np

import vmoe

root = sys.argv[1]
print("vmoe from", vmoe.__file__)
model = vmoe.compile(os.path.join(root, "digits.json"),
                     weights=os.path.join(root, "digits.safetensors"))
test = os.path.join(root, "test")
with open(os.path.join(test, "labels.txt"), encoding="utf-8") as f:
    entries = [line.split() for line in f
               if line.strip() and not line.startswith("#")]
images = model.load_images([os.path.join(test, path) for path, _ in entries])
labels = np.array([model.class_names.index(label) for _, label in entries])
for arg in sys.argv[2:] or ["default"]:
    ratio = None if arg == "default" else float(arg)
    logits, stats = model.forward(images, capacity_ratio=ratio, stats=True)
    correct = int((np.argmax(logits, axis=1) == labels).sum())
    print(f"python C={arg}: accuracy: {correct}/{len(labels)} = "
          f"{100.0 * correct / len(labels):.2f}%")
    for block, kept, dropped in zip(stats.blocks, stats.kept, stats.dropped):
        print(f"python C={arg}: MoE block {block}: kept per expert "
              f"[{', '.join(map(str, kept))}], dropped {dropped}")
