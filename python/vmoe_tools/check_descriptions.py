"""The PyTorch reference's verdict on model descriptions, many per process.

    cd python && /usr/bin/python3 -m vmoe_tools.check_descriptions A.json ...

Loads each description and builds the reference model from it as
vmoe_ref.model.load_model does (without weights) and prints one line per file, in argument order:
`check_descriptions: NAME: error: MESSAGE` with the reference's one-line
error, or `check_descriptions: NAME: valid`. The Frontend tests check that
the reference refuses each bad description with the compiler's message;
one process imports torch once for all of them. Exit status 0.
"""

import os
import sys

from vmoe_ref import model as vmodel


def verdict(path):
    try:
        vmodel.VMoE(vmodel.load_description(path))
    except (ValueError, OSError) as err:
        return f"error: {err}"
    return "valid"


def main(argv):
    if not argv:
        sys.exit(__doc__)
    for path in argv:
        print(f"check_descriptions: {os.path.basename(path)}: "
              f"{verdict(path)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
