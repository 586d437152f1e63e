"""The V-MoE layer in JAX, jit-compiled by XLA:CPU: a peer row of
moe_layer_bench.py ("jax xla"), run by the peer Python of
scripts/bench_peers.sh (which installs jax[cpu]).

Same semantics as moe_layer_bench.moe_tutel: softmax router, top-k after
softmax, BPR order by the max gate (stable), slots by a cumsum over the
choices in dispatch order (choice-major, then priority), overflow dropped;
experts as batched GEMMs on [E, G, B, D] buffers; tanh GELU.
"""

import functools


@functools.lru_cache(maxsize=None)
def jitted_layer(k, B):
    """The layer for static k and B, jit-compiled on first call."""
    import jax
    import jax.numpy as jnp

    def layer(x, router, w1, b1, w2, b2):
        G, S, D = x.shape
        E = router.shape[1]
        gates = jax.nn.softmax(x @ router, axis=-1)            # [G, S, E]
        weights, ids = jax.lax.top_k(gates, k)                 # [G, S, k]
        order = jnp.argsort(-weights[..., 0], axis=-1, stable=True)  # [G, S]
        by_rank = jnp.broadcast_to(order[..., None], (G, S, k))
        queue = jnp.take_along_axis(ids, by_rank, axis=1)      # rank order
        queue = queue.transpose(0, 2, 1).reshape(G, k * S)     # choice-major
        onehot = jax.nn.one_hot(queue, E, dtype=jnp.int32)     # [G, kS, E]
        position = (jnp.cumsum(onehot, axis=1) * onehot).sum(-1) - 1
        queued = jnp.where(position < B, position, -1)
        queued = queued.reshape(G, k, S).transpose(0, 2, 1)    # [G, S(rank), k]
        g_index = jnp.arange(G)[:, None, None]
        k_index = jnp.arange(k)[None, None, :]
        slots = jnp.zeros((G, S, k), jnp.int32).at[
            g_index, by_rank, k_index].set(queued)             # token order
        kept = slots >= 0
        # Dispatch: dropped choices write out of bounds (mode="drop").
        slot_or_drop = jnp.where(kept, slots, B)
        tokens = jnp.broadcast_to(x[:, :, None, :], (G, S, k, D))
        buffers = jnp.zeros((E, G, B, D), x.dtype).at[
            ids, g_index, slot_or_drop].set(tokens, mode="drop")
        h = jnp.einsum("egbd,edh->egbh", buffers, w1) + b1[:, None, None, :]
        h = jax.nn.gelu(h, approximate=True)
        y = jnp.einsum("egbh,ehd->egbd", h, w2) + b2[:, None, None, :]
        # Combine: gather each kept choice's row, weight it, sum over k.
        rows = y[ids, g_index, jnp.where(kept, slots, 0)]      # [G, S, k, D]
        scale = jnp.where(kept, weights, 0)[..., None]
        return (rows * scale).sum(axis=2)

    return jax.jit(layer)


def run_layer(inputs, k, B):
    """A callable computing the layer on `inputs` (numpy arrays named as
    moe_layer_bench.INPUT_NAMES), returning a numpy array; the inputs are
    put on the device once."""
    import jax
    import numpy as np
    layer = jitted_layer(k, B)
    args = [jax.device_put(inputs[n])
            for n in ("x", "router", "w1", "b1", "w2", "b2")]

    def call():
        return np.asarray(layer(*args).block_until_ready())
    return call
