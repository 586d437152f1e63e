"""Checks that two check_layers work directories hold bit-identical outputs.

    /usr/bin/python3 -m vmoe_tools.same_outputs DIR_A DIR_B

Used to show that compiled layers are deterministic: the same case built
with different thread counts (or run twice) must give the same expert ids,
slots and output bits. Exit status 0 when every case matches, 1 otherwise.
"""

import os
import sys

import numpy as np


def main(argv):
    if len(argv) != 2:
        sys.exit(__doc__)
    first, second = argv
    names = sorted(n for n in os.listdir(first)
                   if os.path.exists(os.path.join(first, n, "outputs.npz")))
    differing = []
    for name in names:
        with np.load(os.path.join(first, name, "outputs.npz")) as a, \
                np.load(os.path.join(second, name, "outputs.npz")) as b:
            if sorted(a.files) != sorted(b.files) or any(
                    a[k].tobytes() != b[k].tobytes() for k in a.files):
                differing.append(name)
    for name in differing:
        print(f"DIFFERENT {name}")
    print(f"same_outputs: {len(names)} cases, "
          f"{len(names) - len(differing)} bit-identical")
    return 1 if differing or not names else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
