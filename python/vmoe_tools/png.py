"""A minimal 8-bit PNG writer (stdlib + numpy) for test images.

    write_png(path, pixels)   pixels: uint8 [H, W] (gray) or [H, W, 3] (RGB)

No filtering, one IDAT chunk: enough for the small images the checks and
the digits example write; the runtime's libpng reads them.
"""

import struct
import zlib

import numpy as np

_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_GRAY, _RGB = 0, 2


def _chunk(kind, data):
    body = kind + data
    return (struct.pack(">I", len(data)) + body
            + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF))


def write_png(path, pixels):
    """Writes uint8 [H, W] as gray or [H, W, 3] as RGB, 8 bits per sample."""
    pixels = np.asarray(pixels, dtype=np.uint8)
    if pixels.ndim == 2:
        color = _GRAY
    elif pixels.ndim == 3 and pixels.shape[2] == 3:
        color = _RGB
    else:
        raise ValueError(f"write_png: pixels must be [H, W] or [H, W, 3], "
                         f"got shape {pixels.shape}")
    height, width = pixels.shape[:2]
    rows = b"".join(b"\x00" + row.tobytes() for row in pixels)
    with open(path, "wb") as f:
        f.write(_SIGNATURE)
        f.write(_chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8,
                                            color, 0, 0, 0)))
        f.write(_chunk(b"IDAT", zlib.compress(rows, 9)))
        f.write(_chunk(b"IEND", b""))
