"""Writes a damaged copy of a safetensors file for error tests.

    edit_safetensors.py IN OUT drop NAME        # without tensor NAME
    edit_safetensors.py IN OUT dtype NAME F16   # NAME's dtype changed
    edit_safetensors.py IN OUT shape NAME       # NAME's first dim doubled

Only the JSON header changes (data offsets of the rest stay valid).
"""

import json
import struct
import sys


def main(src, dst, edit, name, *rest):
    with open(src, "rb") as f:
        data = f.read()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + length])
    if name not in header:
        sys.exit(f"edit_safetensors: no tensor {name!r} in {src}")
    if edit == "drop":
        del header[name]
    elif edit == "dtype":
        header[name]["dtype"] = rest[0]
    elif edit == "shape":
        header[name]["shape"][0] *= 2
    else:
        sys.exit(f"edit_safetensors: unknown edit {edit!r}")
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(dst, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data[8 + length:])


if __name__ == "__main__":
    main(*sys.argv[1:])
