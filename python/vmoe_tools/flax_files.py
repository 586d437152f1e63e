"""Flax checkpoint files written for the importer tests, with msgpack.

The writer side of the formats vmoe.importers reads, written from the
formats' definitions (flax.serialization, vmoe/checkpoints/{partitioned,
serialization,types}.py) and sharing no code with the readers:

- `write_partitioned`: vmoe's PREFIX.index + PREFIX.data-0000s-of-0000N,
  with chosen leaves in bfloat16, chosen arrays cut along their first
  axis over two shards, 1-D subchunks of at most `subchunk` elements, and
  optionally no 'version' (the format before 2022-06-22);
- `write_msgpack`: flax.serialization.to_bytes of {'params': tree,
  'step': n}, chosen arrays in flax's chunked form;
- `bf16_exact`: values that bfloat16 holds exactly.
"""

import msgpack
import numpy as np

__all__ = ["bf16_exact", "write_partitioned", "write_msgpack",
           "leaf_order", "nest"]

_CHUNKS_KEY = "__msgpack_array_chunk_a87ca2__"


def bf16_exact(array):
    """float32 `array` rounded toward zero to bfloat16's 8 mantissa bits."""
    bits = np.ascontiguousarray(array, np.float32).view(np.uint32)
    return (bits & np.uint32(0xFFFF0000)).view(np.float32)


def nest(flat):
    """Nested dicts of {'/'-path: value}."""
    tree = {}
    for path, value in flat.items():
        node = tree
        *parents, leaf = path.split("/")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return tree


def leaf_order(paths):
    """jax.tree_util's order of the leaves of nested dicts: keys sorted at
    every level, i.e. the paths' component tuples in order."""
    return sorted(paths, key=lambda p: tuple(p.split("/")))


def _array_ext(array, dtype, code=1):
    """flax's ExtType of an array: msgpack [shape, dtype name, bytes]."""
    array = np.ascontiguousarray(array, np.float32)
    if dtype == "bfloat16":
        data = (array.view(np.uint32) >> 16).astype("<u2").tobytes()
    else:
        data = array.astype("<" + np.dtype(dtype).str[1:]).tobytes()
    payload = msgpack.packb([list(array.shape), dtype, data],
                            use_bin_type=True)
    return msgpack.ExtType(code, payload)


def _slice_nd(bounds):
    return msgpack.packb([msgpack.packb([a, b, None]) for a, b in bounds],
                         use_bin_type=True)


def _subchunks(array, dtype, subchunk):
    flat = np.ascontiguousarray(array, np.float32).reshape(-1)
    step = subchunk or max(flat.size, 1)
    return [_array_ext(flat[i:i + step], dtype)
            for i in range(0, flat.size, step)]


def write_partitioned(prefix, flat, shards=2, bf16=(), split=(),
                      subchunk=None, version=True):
    """Writes {'/'-path: array} as a vmoe partitioned checkpoint; returns
    the files written."""
    data = [{_CHUNKS_KEY: True} for _ in range(shards)]
    infos = {}
    for number, path in enumerate(leaf_order(flat)):
        array = np.asarray(flat[path], np.float32)
        dtype = "bfloat16" if path in bf16 else "float32"
        full = [(0, d) for d in array.shape]
        if path in split:
            half = array.shape[0] // 2
            pieces = [[(0, half)] + full[1:],
                      [(half, array.shape[0])] + full[1:]]
            owners = [0, 1]
        else:
            pieces, owners = [full], [number % shards]
        for bounds, shard in zip(pieces, owners):
            index = tuple(slice(a, b) for a, b in bounds)
            data[shard].setdefault(str(number), []).append(
                [_subchunks(array[index], dtype, subchunk),
                 msgpack.ExtType(6, _slice_nd(bounds))])
        shaped = msgpack.packb([list(array.shape), dtype, False, {}],
                               use_bin_type=True)
        infos[path] = msgpack.ExtType(8, msgpack.packb(
            [shaped, [_slice_nd(b) for b in pieces], owners],
            use_bin_type=True))
    index = {"shard_count": shards, "index": nest(infos)}
    if version:
        index["version"] = "20220622"
    files = [prefix + ".index"]
    with open(files[0], "wb") as f:
        f.write(msgpack.packb(index, use_bin_type=True))
    for shard, content in enumerate(data):
        files.append(f"{prefix}.data-{shard:05d}-of-{shards:05d}")
        with open(files[-1], "wb") as f:
            f.write(msgpack.packb(content, use_bin_type=True))
    return files


def write_msgpack(path, flat, chunked=(), chunk_elements=5, step=1000):
    """Writes {'params': tree, 'step': step} as flax.serialization.to_bytes
    does; arrays in `chunked` in flax's chunked form."""
    leaves = {}
    for key, value in flat.items():
        value = np.asarray(value, np.float32)
        if key in chunked:
            flat1 = value.reshape(-1)
            leaves[key] = {
                "__msgpack_chunked_array__": True,
                "shape": {str(i): d for i, d in enumerate(value.shape)},
                "chunks": {str(i // chunk_elements): _array_ext(
                    flat1[i:i + chunk_elements], "float32")
                    for i in range(0, flat1.size, chunk_elements)}}
        else:
            leaves[key] = _array_ext(value, "float32")
    state = {"params": nest(leaves),
             "step": _array_ext(np.asarray(step), "int32", code=3)}
    with open(path, "wb") as f:
        f.write(msgpack.packb(state, use_bin_type=True))
    return path
