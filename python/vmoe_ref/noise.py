"""The router noise of training graphs (`vmoe-compile --training --seed N`,
docs/ModelFormat.md "Training graphs"): standard normal samples from a
counter-based generator, so that the compiled model and this reference draw
the same numbers from the same seed.

For MoE block b (0-based block index) and the sample at row-major index i of
the layer's [G, S, E] noise tensor (one compiled batch):

    K   = splitmix64(seed)
    h_j = splitmix64(K xor ((b << 40) | (2 i + j)))       j = 0, 1
    u1  = ((h_0 >> 11) + 1) / 2^53                        in (0, 1]
    u2  = (h_1 >> 11) / 2^53                              in [0, 1)
    z   = sqrt(-2 ln u1) cos(2 pi u2)                     (Box-Muller, f64)

rounded to float32; all integer arithmetic modulo 2^64. Every batch uses the
same samples (the seed picks them; a training loop varies the seed per
step).
"""

import math

import numpy as np
import torch

_MASK = (1 << 64) - 1


def splitmix64(x):
    """The splitmix64 finalizer of a Python int (modulo 2^64)."""
    z = (x + 0x9E3779B97F4A7C15) & _MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return z ^ (z >> 31)


def _splitmix64_array(x):
    """splitmix64 of a uint64 numpy array (wrapping arithmetic)."""
    with np.errstate(over="ignore"):
        z = x + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def training_noise(seed, block, shape):
    """float32 tensor of `shape` ([G, S, E]): the noise of MoE block `block`
    with seed `seed` (an integer in [0, 2^64))."""
    if not 0 <= seed < 1 << 64:
        raise ValueError(f"seed must be in [0, 2^64), got {seed}")
    count = int(np.prod(shape))
    if count >= 1 << 39 or not 0 <= block < 1 << 24:
        raise ValueError("noise tensor or block index too large")
    key = np.uint64(splitmix64(seed))
    index = np.arange(count, dtype=np.uint64)
    base = np.uint64(block << 40)
    h0 = _splitmix64_array(key ^ (base | (np.uint64(2) * index)))
    h1 = _splitmix64_array(key ^ (base | (np.uint64(2) * index +
                                          np.uint64(1))))
    scale = 2.0 ** -53
    u1 = ((h0 >> np.uint64(11)) + np.uint64(1)).astype(np.float64) * scale
    u2 = (h1 >> np.uint64(11)).astype(np.float64) * scale
    # libm's log and cos (Python's math), as the compiled code calls them.
    z = [math.sqrt(-2.0 * math.log(a)) * math.cos(2.0 * math.pi * b)
         for a, b in zip(u1.tolist(), u2.tolist())]
    return torch.tensor(np.asarray(z, dtype=np.float64).astype(np.float32)
                        .reshape(shape))
