"""Input files opened for reading, refused unless they are regular files:
a FIFO would block a reader and /dev/zero would feed it forever."""

import os
import stat

__all__ = ["open_regular"]


def open_regular(path, error):
    """`path` opened "rb"; a non-regular file or an OSError raises
    `error` (an exception class) with one line naming the path."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise error(f"{path}: not a regular file")
        return open(path, "rb")  # pylint: disable=consider-using-with
    except OSError as err:
        raise error(f"{path}: {err.strerror or err}") from None
