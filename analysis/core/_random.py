"""Counter-based random numbers: SplitMix64 outputs addressed by (seed, position).

The `p`-th 64-bit output of the stream seeded with `seed` is
`mix64(seed + p * GAMMA)` (mod 2**64), a pure function of `(seed, p)`: a draw
never depends on batch size, device count or what ran before it. Shared by
the bootstrap draws, trajectory thinning and the matched-horizon item
bootstrap (their docstrings give the layouts that address the streams).
"""

import jax
import jax.numpy as jnp

from ._typing import Array, UInt64

GAMMA = 0x9E3779B97F4A7C15
"""SplitMix64's Weyl increment (the odd integer closest to 2**64 / golden ratio)."""
_MIX1, _MIX2 = 0xBF58476D1CE4E5B9, 0x94D049BB133111EB
_MASK32 = 0xFFFFFFFF
def mix64(z: jax.Array) -> jax.Array:
    """SplitMix64's output function (uint64 -> uint64), elementwise."""
    z = (z ^ (z >> 30)) * jnp.uint64(_MIX1)
    z = (z ^ (z >> 27)) * jnp.uint64(_MIX2)
    return z ^ (z >> 31)


def words(seed: jax.Array, first: jax.Array, count: int) -> UInt64[Array, " word"]:
    """Stream outputs `p = first .. first + count - 1` of SplitMix64 seeded with `seed`."""
    p = first.astype(jnp.uint64) + jnp.arange(count, dtype=jnp.uint64)
    return mix64(seed.astype(jnp.uint64) + p * jnp.uint64(GAMMA))


def pick(u: jax.Array, n: jax.Array) -> jax.Array:
    """`floor(u * n / 2**32)` for 32-bit `u` and `n < 2**32` (uint64, exact), as int32."""
    return ((u * n.astype(jnp.uint64)) >> 32).astype(jnp.int32)


def numbers(w: UInt64[Array, "... word"], count: int) -> UInt64[Array, "... count"]:
    """The first `count` 32-bit numbers of each block of words (last axis), as uint64 `< 2**32`.

    Number `j` of a block of `H` words is the low half of word `j` for
    `j < H` and the high half of word `j - H` otherwise.
    """
    return jnp.concatenate([w & jnp.uint64(_MASK32), w >> 32], axis=-1)[..., :count]
