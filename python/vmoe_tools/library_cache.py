"""A folder of compiled case libraries, keyed by what they are built from.

check_layers lowers every case with vmoe-opt, then translates the lowered
MLIR to LLVM IR and compiles it with clang. The library is a function of
the lowered MLIR, the tools and their arguments only, so a case whose
lowering is identical to one built before (the same case under another
pipeline option that does not change it, or an earlier run of the suite)
takes the library from the cache instead of compiling it again. Entries are
written to a temporary name and renamed, so concurrent jobs and lit tests
can share one folder.
"""

import hashlib
import os
import shutil
import tempfile
import threading

# Libraries taken from the cache in this process (check_layers' summary).
HITS = 0
_HITS_LOCK = threading.Lock()


class _Entry:
    def __init__(self, path):
        self.path = path

    def fetch(self, destination):
        """Copies the cached library to `destination`; False on a miss."""
        global HITS  # pylint: disable=global-statement
        if self.path is None or not os.path.exists(self.path):
            return False
        shutil.copyfile(self.path, destination)
        with _HITS_LOCK:
            HITS += 1
        return True

    def store(self, library):
        if self.path is None:
            return
        folder = os.path.dirname(self.path)
        os.makedirs(folder, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=folder, suffix=".tmp")
        os.close(handle)
        shutil.copyfile(library, temporary)
        os.replace(temporary, self.path)


def _tool_identity(command):
    """The resolved path, size and mtime of an executable argument."""
    resolved = shutil.which(command) if os.sep not in command else command
    if resolved and os.path.isfile(resolved):
        status = os.stat(os.path.realpath(resolved))
        return f"{os.path.realpath(resolved)}:{status.st_size}:" \
               f"{status.st_mtime_ns}"
    return command


def lookup(folder, lowered_mlir, tool_args):
    """The cache entry of a library built from `lowered_mlir` with
    `tool_args` (tools first); a disabled cache when `folder` is None."""
    if not folder:
        return _Entry(None)
    digest = hashlib.sha256()
    with open(lowered_mlir, "rb") as f:
        digest.update(f.read())
    for arg in tool_args:
        digest.update(b"\0" + _tool_identity(arg).encode())
    return _Entry(os.path.join(folder, digest.hexdigest() + ".so"))
