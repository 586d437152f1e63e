"""Flax checkpoint files as users have them -> {'/'-joined path: float32}.

Recognized by their contents, not their names:

  .npz (zip)                     numpy.savez of the flattened param tree
                                 (big_vision, the released ViT/V-MoE .npz)
  PREFIX.index + .data-*-of-*    vmoe's partitioned checkpoints (the
                                 released V-MoE checkpoints); give PREFIX,
                                 PREFIX.index or one of the data shards
  msgpack (a map)                flax.serialization.to_bytes, e.g. flax's
                                 legacy checkpoints/checkpoint_N files

The param tree is the whole tree, or its 'params' subtree when the file
holds a training state or Flax variables: then the other top-level
entries must be training state (step, opt_state, opt, rngs), skipped
unread where the format allows.
"""

import os

from .._files import open_regular
from . import _msgpack, _npz, partitioned
from .common import ImporterError

__all__ = ["load_checkpoint", "select_params"]

_TRAINING = ("step", "opt_state", "opt", "rngs")
_CHUNKED = "__msgpack_chunked_array__"


def select_params(paths, source):
    """{path: name} of the param tree's leaves among `paths`."""
    if not any(p.startswith("params/") for p in paths):
        return {p: p for p in paths}
    names = {}
    for path in paths:
        top, _, rest = path.partition("/")
        if top == "params":
            names[path] = rest
        elif top not in _TRAINING:
            raise ImporterError(f"{source}: unknown key {path!r} beside "
                                "'params' (not part of a supported model "
                                "or training state)")
    return names


def _kind(path):
    if path.startswith(("gs://", "http://", "https://")):
        raise ImporterError(f"{path}: download the checkpoint first (for "
                            "gs://: gsutil -m cp 'PREFIX*' .) and give the "
                            "local file or prefix")
    prefix = partitioned.prefix_of(path)
    if prefix is not None:
        return "partitioned", prefix
    if os.path.isdir(path):
        raise ImporterError(f"{path}: a directory (an Orbax checkpoint?); "
                            "give an .npz, a msgpack file or a vmoe "
                            "checkpoint prefix")
    try:
        with open_regular(path, ImporterError) as f:
            head = f.read(8)
    except OSError as err:
        raise ImporterError(f"{path}: cannot read ({err.strerror or err})") \
            from None
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        return "npz", path
    if head.startswith(b"\x93NUMPY"):
        raise ImporterError(f"{path}: a .npy file (one array), not an .npz "
                            "of the param tree")
    if head and _msgpack.is_map_start(head[0]):
        return "msgpack", path
    raise ImporterError(f"{path}: not a Flax checkpoint (an .npz, a msgpack "
                        "file, or a vmoe PREFIX with PREFIX.index)")


def load_checkpoint(path):
    """{param path: float32 array} of a Flax checkpoint (module doc)."""
    kind, where = _kind(path)
    if kind == "npz":
        names = select_params(_npz.keys(where), where)
        tensors = _npz.read(where, names)
    elif kind == "partitioned":
        tensors = partitioned.read(where,
                                   lambda p: select_params(p, where))
    else:
        tensors = _read_msgpack(where)
    for key, value in tensors.items():
        if 0 in value.shape:
            raise ImporterError(f"{path}: {key!r} has a zero-sized "
                                f"dimension {list(value.shape)}")
    return tensors


def _read_msgpack(path):
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as err:
        raise ImporterError(f"{path}: cannot read ({err.strerror or err})") \
            from None
    tree = _msgpack.unpack(data, path)
    leaves = partitioned.flatten(_unchunk_paths(tree, path), path)
    names = select_params([p for p, _ in leaves], path)
    out = {}
    for leaf_path, leaf in leaves:
        if leaf_path in names:
            out[names[leaf_path]] = _leaf(leaf, f"{path}: {leaf_path!r}")
    return out


def _unchunk_paths(tree, path):
    """Flax splits arrays over 1 GiB into {'__msgpack_chunked_array__':
    True, 'shape': {'0': d0, ...}, 'chunks': {'0': array, ...}}: those
    maps become one leaf, the rest of the tree is kept."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if not isinstance(node, dict):
            continue
        for key, value in node.items():
            if isinstance(value, dict) and _CHUNKED in value:
                node[key] = _Chunked(value)
            else:
                stack.append(value)
    if isinstance(tree, dict) and _CHUNKED in tree:
        raise ImporterError(f"{path}: one chunked array, not a param tree")
    return tree


class _Chunked:  # pylint: disable=too-few-public-methods
    def __init__(self, value):
        self.value = value


def _leaf(leaf, what):
    if isinstance(leaf, _Chunked):
        return _chunked(leaf.value, what)
    code = getattr(leaf, "code", None)
    if code == _msgpack.NPSCALAR:
        return _msgpack.ndarray(leaf, what, _msgpack.NPSCALAR)
    return _msgpack.ndarray(leaf, what)


def _chunked(value, what):
    shape, chunks = value.get("shape"), value.get("chunks")
    if not isinstance(shape, dict) or not isinstance(chunks, dict):
        raise ImporterError(f"{what}: a chunked array needs 'shape' and "
                            "'chunks' maps")
    try:
        dims = [shape[str(i)] for i in range(len(shape))]
        parts = [chunks[str(i)] for i in range(len(chunks))]
    except KeyError as err:
        raise ImporterError(f"{what}: chunked array without entry "
                            f"{err.args[0]}") from None
    if not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0
               for d in dims):
        raise ImporterError(f"{what}: chunked array shape {dims!r:.60}")
    data, dtype = [], None
    for part in parts:
        part_shape, name, payload = _msgpack.ndarray_parts(part, what)
        if dtype not in (None, name) or len(part_shape) != 1:
            raise ImporterError(f"{what}: chunks differ in dtype or are not "
                                "1-D")
        dtype = name
        data.append(payload)
    if dtype is None:
        raise ImporterError(f"{what}: a chunked array without chunks")
    return _msgpack.from_bytes(b"".join(data), dims, dtype, what)
