"""Trajectory thinning: macro OR / AD from `r` trajectories per (model, question) (docs/rules.md).

Draw `d` keeps, in every (model, question) segment with `R` trajectories,
`min(r, R)` of them uniformly at random without replacement (a segment with
`R <= r` keeps all), recomputes the segment means of OR and AD from the kept
rows, and aggregates them with the usual equal weights (docs/rules.md) to cell,
model, group and macro values. Probe curves stay fixed.

Selection is Knuth's selection sampling (Algorithm S): slot `i` of a segment
is kept when `floor(u_i * (R - i) / 2**32) < still needed`, which keeps each
`r`-subset with probability `1 / C(R, r)` up to the `2**-32` resolution of the
index map (`_bootstrap_draws`), with `Rmax` cheap steps per segment instead
of a sort. Random numbers: SplitMix64 with the given seed (`_bootstrap_draws`);
draw `d` for the `a`-th requested `r` uses the words `p = (a * D + d) * W + 1
.. + W`, `W = nseg * ceil(Rmax / 2)`: segment `s` owns a block of
`ceil(Rmax / 2)` words whose number `i` (low halves first) serves slot `i`.
Values enter as exact fixed-point integers divided by `min(r, R)`
(`_bootstrap_draws.fixed_point`), so a draw's statistics do not depend on
the batch it is computed in.
"""

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from otbench.analysis.core import (  # shapes in annotations (STYLE.md)
    Array,
    Int32,
    Int64,
    UInt64,
    numbers,
    pick,
    words,
)

from ._draws import Resampling


class SelectState(NamedTuple):
    """Carry of the selection scan over slots."""

    need: Int32[Array, " seg"]          # rows still to keep
    total: Int64[Array, "seg metric"]   # fixed-point sum of the kept rows


UNROLL = 64
"""Up to this many slots the selection loop is unrolled (measured ~10x faster
than a scan for 16 slots on CPU); longer segments use `lax.scan`."""


def select_sums(u: UInt64[Array, "seg slot"], size: Int32[Array, " seg"], keep: Int32[Array, " seg"],
                table: Int64[Array, "seg slot metric"]) -> Int64[Array, "seg metric"]:
    """Sum of `table` over the slots Algorithm S keeps (`keep` of the `size` valid slots)."""
    def step(s: SelectState, i, ui, ti):
        left = size - i                                         # valid slots from i on
        take = (left > 0) & (pick(ui, jnp.maximum(left, 1)) < s.need)
        return SelectState(s.need - take.astype(jnp.int32),
                           s.total + jnp.where(take[:, None], ti, 0))

    slots = u.shape[1]
    s = SelectState(keep, jnp.zeros((u.shape[0], table.shape[2]), dtype=jnp.int64))
    if slots <= UNROLL:
        for i in range(slots):
            s = step(s, i, u[:, i], table[:, i])
        return s.total
    s, _ = jax.lax.scan(lambda c, x: (step(c, *x), None), s,
                        (jnp.arange(slots, dtype=jnp.int32), u.T, jnp.transpose(table, (1, 0, 2))))
    return s.total


@functools.partial(jax.jit, static_argnames=("num_cells", "rmax", "per_draw"))
def draw_cell_sums(draw: jax.Array, seed: jax.Array, size: jax.Array, keep: jax.Array,
                   table: jax.Array, seg_cell: jax.Array, *, num_cells: int, rmax: int,
                   per_draw: int) -> Int64[Array, "draw cell metric"]:
    """Fixed-point cell sums of a batch of draws (`draw`: uint64[batch] global draw numbers)."""
    nseg = size.shape[0]
    hr = -(-rmax // 2)

    def one(d):
        w = words(seed, d * jnp.uint64(per_draw) + jnp.uint64(1), per_draw)
        u = numbers(w.reshape(nseg, hr), rmax)
        sums = select_sums(u, size, keep, table)
        return jax.ops.segment_sum(sums, seg_cell, num_cells)

    return jax.vmap(one)(draw)


BATCH = 250
"""Draws per kernel call."""


def cell_sums(res: Resampling, table: np.ndarray, r: int, first_draw: int, draws: int,
              seed: int) -> np.ndarray:
    """int64[draw, cell, metric] fixed-point cell sums of draws `first_draw ..` for `r`.

    Args:
      res: the layout (segments, sizes, cells).
      table: int64[seg * Rmax + 1, metric] values divided by `min(r, R)`
        (`fixed_point(..., divisor=min(r, R))`).
    """
    nseg, rmax = res.seg_size.shape[0], res.rmax
    per_draw = nseg * (-(-rmax // 2))
    size = jnp.asarray(res.seg_size, dtype=jnp.int32)
    keep = jnp.minimum(size, r)
    tab = jnp.asarray(table[:-1].reshape(nseg, rmax, -1))
    seg_cell = jnp.asarray(res.seg_cell, dtype=jnp.int32)
    out = []
    for s in range(0, draws, BATCH):
        d = np.arange(first_draw + s, first_draw + s + BATCH, dtype=np.uint64)   # fixed shape
        out.append(np.asarray(draw_cell_sums(
            jnp.asarray(d), jnp.asarray(seed, dtype=jnp.uint64), size, keep, tab, seg_cell,
            num_cells=res.num_cells, rmax=rmax, per_draw=per_draw))[:min(BATCH, draws - s)])
    return np.concatenate(out, axis=0)
