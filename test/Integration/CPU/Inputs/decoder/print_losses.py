"""Prints the losses of a training graph library through the Python API
(vmoe.Model.losses) in the executable's --losses format.

usage: print_losses.py LIBRARY WEIGHTS IMAGE_LIST
"""

import os
import sys

import vmoe

library, weights, image_list = sys.argv[1:4]
folder = os.path.dirname(image_list)
with open(image_list, encoding="utf-8") as f:
    paths = [os.path.join(folder, line.split()[0]) for line in f
             if line.strip()]
model = vmoe.Model(library, weights=weights)
assert model.training
model.forward(model.load_images(paths))
for block, (importance, load, gshard) in zip(model.moe_blocks,
                                             model.losses()):
    print(f"losses: MoE block {block}: importance {importance:.9g}, load "
          f"{load:.9g}, gshard {gshard:.9g} (means over the routing groups)")
