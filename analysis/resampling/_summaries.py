"""Bootstrap replicates of the remaining cell summaries: `P(0)` and the within-question spreads (docs/rules.md).

docs/rules.md asks for an interval on *every* cell summary. The main kernel
(`_draws.replicate_kernel`) sums values that are linear in the draws (OR, AD,
`y`, `L(n)`, `P(n)`); this module adds, on exactly the same draws (the same
`occurrence_items`, so the summaries stay paired with the others):

* ``zero_step_acc``: the occurrence mean of `P(0)`, averaged over the cell's
  occurrences like every other metric;
* ``pairwise_or`` / ``pairwise_ad``: per occurrence, the mean absolute
  difference of OR (AD) over the pairs of its `R` draws that come from
  *distinct* source trajectories (docs/rules.md). A trajectory drawn twice
  is not a pair with itself: counted, its zero difference would pull every
  replicate below the point estimate (by `(R-1)/R` on average), which then
  sat above its own interval. With `w_j` draws of trajectory `j` the
  occurrence has `D = (R^2 - Σ w_j^2) / 2` such pairs; an occurrence that
  drew one trajectory only (`D = 0`) has no spread in that replicate and is
  left out of its cell's average there, like an occurrence with `R < 2`
  (as in `metrics`). Pairs are formed within an occurrence only: two
  occurrences of one question are two separate (model, question) samples.

Exactness. Values enter as the fixed-point integers of `_draws.fixed_point`
(divisor `R` for `P(0)`; none for the spreads, whose divisor `D` depends on
the draw); an occurrence's draws are counted per trajectory, and its pair
sum is computed from the counts over the segment's values sorted once on
the host (`pair_sum_sorted`), an exact int64 sum, then floor-divided by `D`
(an integer division: exact and the same on every device; it moves an
occurrence mean by less than `2**-F`). So replicate `i` is a pure function
of `(seed, i)` here too, bit-identical for any batch size. The Spearman OR-AD correlation of a replicate
is computed from its cell OR and AD (the main kernel's values) by
`overthinking.spearman`.
"""

import functools
from collections.abc import Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from otbench.analysis.core import Array, Int32, Int64
from otbench.analysis.overthinking import spearman

from otbench.errors import ArgumentError

from ._draws import SUM_BITS, Resampling, Tables, exponents, fixed_point, occurrence_items

SUMMARY_METRICS = ("zero_step_acc", "pairwise_or", "pairwise_ad")
"""The metrics of this module, in the order of its metric axis."""


class SummarySums(NamedTuple):
    """Integer replicate statistics (leading axis: replicates when vmapped)."""

    sums: Int64[Array, "cell metric"]   # fixed-point sums of occurrence values
    count: Int32[Array, " cell"]        # occurrences (P(0))
    paired: Int32[Array, " cell"]       # occurrences with a distinct-trajectory pair (the spreads)


class SegmentValues(NamedTuple):
    """Fixed-point values and value ranks (device arrays; see `summary_table`)."""

    zero_step: Int64[Array, " item"]          # P(0) / R of each item, 0 for the zero item
    ascending: Int64[Array, "seg two draw"]   # OR, AD of a segment sorted ascending (padding 0)
    rank: Int32[Array, "item two"]            # position of the item's OR / AD in `ascending`


def summary_table(zero_step: np.ndarray, ratio: np.ndarray, degradation: np.ndarray,
                  res: Resampling, seg: np.ndarray) -> tuple[SegmentValues, np.ndarray]:
    """Segment tables and F int64[3] for `P(0)`, OR and AD (see the module docstring)."""
    seg = np.asarray(seg, dtype=np.int64)
    R = res.seg_size.astype(np.int64)
    nseg, Rm = R.shape[0], res.rmax
    t0, f0 = fixed_point(np.asarray(zero_step, dtype=np.float64)[None, :], res, seg)
    spread = np.stack([np.asarray(ratio, dtype=np.float64), np.asarray(degradation, dtype=np.float64)])
    t1, f1 = fixed_point(spread, res, seg, np.ones_like(R), pair_exponents(spread, res))
    local = t1[:-1].reshape(nseg, Rm, 2).transpose(0, 2, 1)        # [seg, two, draw]
    pad = np.arange(Rm)[None, :] >= R[:, None]                     # [seg, draw]
    key = np.where(pad[:, None, :], np.iinfo(np.int64).max, local)
    order = np.argsort(key, axis=-1, kind="stable")               # padding keeps the end
    rank = np.empty_like(order)
    np.put_along_axis(rank, order, np.arange(Rm)[None, None, :], axis=-1)
    rank_item = np.full((nseg * Rm + 1, 2), Rm, dtype=np.int32)   # zero item: no position
    rank_item[:-1] = rank.transpose(0, 2, 1).reshape(nseg * Rm, 2)
    return (SegmentValues(zero_step=jnp.asarray(t0[:, 0]),
                          ascending=jnp.asarray(np.take_along_axis(local, order, axis=-1)),
                          rank=jnp.asarray(rank_item)),
            np.concatenate([f0, f1]))


def pair_exponents(values: np.ndarray, res: Resampling) -> np.ndarray:
    """int64[metric] F for undivided spread values: a cell sum and an occurrence's pair sum fit.

    Before its division by `D`, every term `w_j x_j (2 W_<j + w_j - N)` of
    `pair_sum_sorted` is at most `w_j N max|v|` in size, so the terms of an
    occurrence sum to at most `Rmax^2 max|v|` in absolute value: no partial
    sum leaves int64. The cell sum bound of `_draws.exponents` holds as well.
    """
    top = np.abs(np.asarray(values, dtype=np.float64)).max(axis=1, initial=0.0)
    F = exponents(top, res)
    pair_bound = top * float(max(res.rmax, 1)) ** 2
    with np.errstate(divide="ignore"):
        cap = np.where(pair_bound > 0, SUM_BITS - 1 - np.ceil(np.log2(np.where(
            pair_bound > 0, pair_bound, 1.0))), 60).astype(np.int64)
    F = np.minimum(F, cap)
    if np.any(F < 0):
        raise ArgumentError("values too large for exact int64 bootstrap sums")
    return F


def pair_sum_sorted(w: Int32[Array, "... draw"], x: Int64[Array, "... draw"],
                    N: Int32[Array, "..."]) -> Int64[Array, "..."]:
    """`Σ_{a<b} |x_a - x_b|` over `N` draws given as counts `w` of values `x` sorted ascending.

    `Σ_j w_j x_j (W_<j - W_>j)` with `W_<j` / `W_>j` the draws of smaller /
    larger positions, i.e. `2 W_<j + w_j - N`: exact in int64, O(draw).
    """
    w = w.astype(jnp.int64)
    before = jnp.cumsum(w, axis=-1) - w
    return jnp.sum(w * x * (2 * before + w - N[..., None].astype(jnp.int64)), axis=-1)


def summary_sums(items: Int32[Array, "model slot draw"], seg: Int32[Array, "model slot"],
                 sv: SegmentValues, t: Tables, cell_model: Sequence[int],
                 cell_group: Sequence[int], group_slots: Sequence[tuple[int, int]]) -> SummarySums:
    """One replicate's cell sums of `P(0)` means and OR / AD distinct-trajectory pair means.

    An occurrence's draws become counts per sorted position (each draw's
    rank compared with every position, `Rmax^2` int32 operations; a
    byte-packed count was no faster on CPU), then `pair_sum_sorted` works on
    the counts: measured ~3x the main kernel's time per replicate, against
    ~4x for sorting each occurrence's drawn values.
    """
    Rm = items.shape[-1]
    has = seg >= 0
    s0 = jnp.where(has, seg, 0)
    R = jnp.where(has, t.size[s0], 0)
    pos = jnp.arange(Rm, dtype=jnp.int32).reshape(1, 1, 1, Rm)
    rank = sv.rank[items]                                                  # [model, slot, draw, 2]
    v = sv.ascending[s0]                                                   # [model, slot, 2, draw]
    occ = [jnp.sum(sv.zero_step[items], axis=-1)]
    D = None
    for m in (0, 1):
        w = jnp.sum((rank[..., m][..., None] == pos).astype(jnp.int32), axis=-2)
        if D is None:     # pairs of distinct trajectories: the same counts for OR and AD
            w64 = w.astype(jnp.int64)
            D = (R.astype(jnp.int64) ** 2 - jnp.sum(w64 * w64, axis=-1)) // 2
        occ.append(pair_sum_sorted(w, v[:, :, m], R) // jnp.maximum(D, 1))
    occ = jnp.stack(occ, axis=-1)                                          # [model, slot, 3]
    paired = has & (D > 0)
    occ = occ * jnp.stack([has, paired, paired], axis=-1).astype(jnp.int64)
    h, p = has.astype(jnp.int32), paired.astype(jnp.int32)
    per = [(jnp.sum(occ[:, f:f + n], axis=1), jnp.sum(h[:, f:f + n], axis=1),
            jnp.sum(p[:, f:f + n], axis=1)) for f, n in group_slots]
    pick = list(zip(cell_model, cell_group))
    return SummarySums(sums=jnp.stack([per[g][0][m] for m, g in pick]),
                       count=jnp.stack([per[g][1][m] for m, g in pick]),
                       paired=jnp.stack([per[g][2][m] for m, g in pick]))


def summary_kernel(res: Resampling, sharding, replicated):
    """Jitted `(rep uint64[B], seed, tables, SegmentValues) -> SummarySums`, vmapped over `rep`."""
    return _summary_kernel(res.slots, res.models, res.rmax, res.words_per_replicate,
                           tuple(int(x) for x in res.cell_model),
                           tuple(int(x) for x in res.cell_group), res.group_slots,
                           sharding, replicated)


@functools.cache
def _summary_kernel(slots, models, rmax, words_per_replicate, cm, cg, gs, sharding, replicated):
    statics = dict(slots=slots, models=models, rmax=rmax, words_per_replicate=words_per_replicate)

    def _replicate(rep, seed, t, sv):
        seg, items = occurrence_items(rep, seed, t, **statics)
        return summary_sums(items, seg, sv, t, cm, cg, gs)

    return jax.jit(jax.vmap(_replicate, in_axes=(0, None, None, None)),
                   in_shardings=(sharding, replicated, replicated, replicated),
                   out_shardings=sharding)


def summary_values(sums: np.ndarray, count: np.ndarray, paired: np.ndarray,
                   F: np.ndarray) -> np.ndarray:
    """float64[rep, 3, cell] cell values (NaN: no occurrence, or no pair, in that replicate)."""
    scaled = sums.astype(np.float64) * np.exp2(-F.astype(np.float64))   # [rep, cell, 3]
    den = np.stack([count, paired, paired], axis=-1).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where(den > 0, scaled / np.where(den > 0, den, 1.0), np.nan)
    return out.transpose(0, 2, 1)


def spearman_replicates(or_cell: np.ndarray, ad_cell: np.ndarray) -> np.ndarray:
    """float64[rep] Spearman OR-AD across cells per replicate (NaN where undefined)."""
    f = jax.jit(jax.vmap(spearman))
    return np.asarray(f(jnp.asarray(or_cell, dtype=jnp.float64),
                        jnp.asarray(ad_cell, dtype=jnp.float64)))
