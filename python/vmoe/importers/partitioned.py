"""vmoe's partitioned checkpoints (PREFIX.index + PREFIX.data-NNNNN-of-MMMMM),
the format of the released V-MoE checkpoints, read without JAX.

`vmoe.checkpoints.partitioned.save_checkpoint` writes, in msgpack:

- PREFIX.index: {"shard_count": M, "version": "20220622" (absent before
  2022-06-22), "index": the param tree (nested maps) whose leaves are
  IndexInfo (ExtType 8: global shape and dtype, the slices the array was
  cut into, and the shard holding each slice)};
- PREFIX.data-0000s-of-0000M: {"__msgpack_array_chunk_a87ca2__": true,
  "<leaf number>": [[subchunks, slice], ...]}, the leaf number being the
  leaf's position in the tree flattened with keys sorted, each chunk a
  list of 1-D ExtType 1 arrays (C order) and its SliceNd (ExtType 6).

Every slice the index lists must arrive exactly once, from the shard the
index names, with the leaf's dtype and the slice's element count; the
slices of a leaf must tile it. Only the leaves `select` keeps are
assembled (float32; bfloat16 widened exactly).
"""

import math
import os

import numpy as np

from . import _msgpack
from .common import ImporterError

__all__ = ["read", "paths", "prefix_of", "flatten", "data_path", "VERSION"]

VERSION = "20220622"
_CHUNKS_KEY = "__msgpack_array_chunk_a87ca2__"


def data_path(prefix, shard, shard_count):
    return f"{prefix}.data-{shard:05d}-of-{shard_count:05d}"


def _read_bytes(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as err:
        raise ImporterError(f"{path}: cannot read ({err.strerror or err})") \
            from None


def flatten(tree, what):
    """[(path, leaf)] of nested maps in flattening order (keys sorted at
    every level, as jax.tree_util flattens dicts); None and empty maps
    hold no leaf. Iterative: msgpack nests up to 1024 levels."""
    leaves, stack = [], [("", tree)]
    while stack:
        path, node = stack.pop()
        if isinstance(node, dict):
            for key in sorted(node, reverse=True):
                stack.append((f"{path}/{key}" if path else key, node[key]))
        elif node is not None:
            leaves.append((path, node))
    if not leaves and not isinstance(tree, dict):
        raise ImporterError(f"{what}: the tree is not a map")
    return leaves


class _Leaf:
    """One array of the index: its slices and the chunks read so far."""

    def __init__(self, number, path, info, shard_count, what):
        self.number, self.path = number, path
        where = f"{what}: leaf {number} ({path})"
        self.shape, self.dtype, slices, shards = _msgpack.index_info(info,
                                                                     where)
        self.slices = {}
        for piece, shard in zip(slices, shards):
            _check_slice(piece, self.shape, where)
            if shard >= shard_count:
                raise ImporterError(f"{where}: shard {shard} of "
                                    f"{shard_count}")
            if tuple(piece) in self.slices:
                raise ImporterError(f"{where}: slice {_text(piece)} listed "
                                    "twice")
            self.slices[tuple(piece)] = shard
        _check_tiling(list(self.slices), self.shape, where)
        self.chunks = {}


def _text(piece):
    return "[" + ", ".join(f"{a}:{b}" for a, b in piece) + "]"


def _check_slice(piece, shape, where):
    if len(piece) != len(shape) or any(
            stop > size for (_, stop), size in zip(piece, shape)):
        raise ImporterError(f"{where}: slice {_text(piece)} is outside the "
                            f"shape {list(shape)}")


def _volume(piece):
    return math.prod(stop - start for start, stop in piece)


def _check_tiling(pieces, shape, where):
    """The slices' volumes add up to the array's (overlaps are found when
    the chunks are assembled)."""
    total = sum(map(_volume, pieces))
    if total != math.prod(shape):
        raise ImporterError(f"{where}: its slices hold {total} elements, "
                            f"the shape {list(shape)} has "
                            f"{math.prod(shape)}")


def _read_index(prefix):
    path = prefix + ".index"
    top = _msgpack.unpack(_read_bytes(path), path)
    if not isinstance(top, dict):
        raise ImporterError(f"{path}: not a vmoe checkpoint index (a "
                            "msgpack map with shard_count and index)")
    unknown = sorted(set(top) - {"shard_count", "index", "version"})
    if unknown:
        raise ImporterError(f"{path}: unknown field {unknown[0]!r}")
    version = top.get("version")
    if version not in (None, VERSION):
        raise ImporterError(f"{path}: version {version!r:.40}, this reader "
                            f"knows {VERSION!r} (and none, before it)")
    count = top.get("shard_count")
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        raise ImporterError(f"{path}: shard_count {count!r:.40}, expected "
                            "an integer >= 1")
    if "index" not in top:
        raise ImporterError(f"{path}: no 'index' tree")
    return top["index"], count, version


def paths(prefix):
    """The '/'-joined paths of the leaves of PREFIX.index."""
    index, _, _ = _read_index(prefix)
    return [p for p, _ in flatten(index, prefix + ".index")]


def read(prefix, select):
    """{select(paths)[path]: float32 array} of the leaves `select` keeps:
    `select` maps the list of all leaf paths to {path: name}."""
    index, shard_count, version = _read_index(prefix)
    what = prefix + ".index"
    leaves = flatten(index, what)
    names = select([p for p, _ in leaves])
    wanted = {}
    for number, (path, info) in enumerate(leaves):
        if path in names:
            wanted[number] = _Leaf(number, path, info, shard_count, what)
    hint = "" if version else (
        " (the index has no version: a checkpoint written before "
        "2022-06-22 numbers its leaves in the saved tree's order, which "
        "only the key order of a plain dict tree reproduces; restore it "
        "with vmoe and save it again)")
    shards = sorted({s for leaf in wanted.values()
                     for s in leaf.slices.values()})
    for shard in shards:
        _read_shard(data_path(prefix, shard, shard_count), shard, wanted,
                    len(leaves), hint)
    for leaf in wanted.values():
        for piece, shard in leaf.slices.items():
            if piece not in leaf.chunks:
                raise ImporterError(
                    f"{data_path(prefix, shard, shard_count)}: no chunk "
                    f"{_text(piece)} of leaf {leaf.number} ({leaf.path}), "
                    f"which the index places there{hint}")
    # Every chunk arrived with its data: the arrays are backed by bytes read.
    return {names[leaf.path]: _assemble(leaf, what)
            for leaf in wanted.values()}


def _assemble(leaf, what):
    """The leaf's array from its chunks, each element written once."""
    array = np.empty(leaf.shape, np.float32)
    written = np.zeros(leaf.shape, np.uint8)
    for piece, chunk in leaf.chunks.items():
        index = tuple(slice(a, b) for a, b in piece)
        array[index] = chunk
        written[index] += 1
    if (written != 1).any():
        raise ImporterError(f"{what}: leaf {leaf.number} ({leaf.path}): "
                            "its slices overlap")
    leaf.chunks = None
    return array


def _read_shard(path, shard, wanted, leaf_count, hint):
    """Adds the chunks of the wanted leaves found in one data shard."""
    top = _msgpack.unpack(_read_bytes(path), path)
    if not isinstance(top, dict) or top.get(_CHUNKS_KEY) is not True:
        raise ImporterError(f"{path}: not a vmoe checkpoint shard (no "
                            f"{_CHUNKS_KEY!r})")
    for key, chunks in top.items():
        if key == _CHUNKS_KEY:
            continue
        if not key.isdigit() or int(key) >= leaf_count:
            raise ImporterError(f"{path}: key {key!r:.40} is not a leaf "
                                f"number (the index has {leaf_count})")
        leaf = wanted.get(int(key))
        if leaf is None:
            continue
        where = f"{path}: leaf {leaf.number} ({leaf.path})"
        if not isinstance(chunks, list):
            raise ImporterError(f"{where}: expected a list of chunks")
        for chunk in chunks:
            _add_chunk(chunk, leaf, shard, where, hint)


def _add_chunk(chunk, leaf, shard, where, hint):
    if not isinstance(chunk, list) or len(chunk) != 2 or not isinstance(
            chunk[0], list):
        raise ImporterError(f"{where}: a chunk is [subchunks, slice]")
    piece = tuple(_msgpack.slice_nd(
        _msgpack.ext(chunk[1], _msgpack.SLICE_ND, where), where))
    if leaf.slices.get(piece) != shard:
        raise ImporterError(f"{where}: chunk {_text(piece)} is not a slice "
                            f"the index places in shard {shard}{hint}")
    if piece in leaf.chunks:
        raise ImporterError(f"{where}: chunk {_text(piece)} appears twice")
    data = []
    for sub in chunk[0]:
        shape, dtype, payload = _msgpack.ndarray_parts(sub, where)
        if dtype != leaf.dtype or len(shape) != 1:
            raise ImporterError(f"{where}: a subchunk of {dtype} {shape}, "
                                f"expected 1-D {leaf.dtype}{hint}")
        if len(payload) != shape[0] * _msgpack.ITEMSIZE[dtype]:
            raise ImporterError(f"{where}: a subchunk claims {shape[0]} "
                                f"elements and holds {len(payload)} bytes")
        data.append(payload)
    shape = [stop - start for start, stop in piece]
    leaf.chunks[piece] = _msgpack.from_bytes(b"".join(data), shape,
                                             leaf.dtype, where)


def prefix_of(path):
    """The checkpoint prefix of PREFIX, PREFIX.index or a data shard, or
    None when `path` is none of them."""
    if path.endswith(".index"):
        return path[:-len(".index")]
    head, _, tail = path.rpartition(".data-")
    if head and len(tail) == 14 and tail[5:9] == "-of-" and \
            tail[:5].isdigit() and tail[9:].isdigit():
        return head
    if os.path.isfile(path + ".index"):
        return path
    return None
