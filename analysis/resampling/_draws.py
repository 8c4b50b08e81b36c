"""The two-stage paired bootstrap draw: counter-based generator, resampling layout, kernel (docs/rules.md).

Generator. Draws come from SplitMix64 (Steele, Lea & Flood 2014; the
generator of Java's `SplittableRandom`), used counter-based: the `p`-th
64-bit output of the stream seeded with `seed` is `mix64(seed + p * γ)`
(mod 2**64, `p >= 1`, `γ = 0x9E3779B97F4A7C15`). Any output is a pure
function of `(seed, p)`, so a replicate's draws never depend on the batch it
is computed in, the device it runs on or what was computed before it: the
same seed gives bit-identical replicates on any batch size and device count,
and a resumed run continues the same streams. It passes BigCrush and costs a
few integer operations per word -- threefry (`jax.random`) was measured 9x
slower on this CPU, too slow for 10,000 replicates of 92,448 draws in the
10 s budget. Each 64-bit word gives two 32-bit numbers (see Layout).

Mapping to an index. A 32-bit `u` picks `floor(u * n / 2**32)` in
`0..n-1` (exact integer arithmetic): every index has probability
`floor(2**32 / n) / 2**32` or `ceil(2**32 / n) / 2**32`, within `2**-32` of
`1/n` and exactly `1/n` when `n` is a power of two (the paper's `R = 16`).

Layout (`Resampling`). Groups and models in the `_aggregate.Layout` order.
Group `g`'s pool is the sorted list of its questions present in the set
(any model); `Q_g` its size. There are `S = sum_g Q_g` *slots*, group 0's
first. A model's (model, question) segment has `R` trajectories (rows in
set order); `Rmax` is the largest `R`.

Replicate `i` uses the words `p = i * W + 1 .. i * W + W`, with
`W = Hs + M * S * Hr`, `Hs = ceil(S / 2)`, `Hr = ceil(Rmax / 2)`. Within a
block of `H` words, number `j < 2H` is the low half of word `j` for `j < H`
and the high half of word `j - H` otherwise (halves are never interleaved,
which costs a shuffle per word on CPU):

1. the first `Hs` words give slot `s` of group `g` the question
   `pool_g[floor(u_s * Q_g / 2**32)]` -- stage 1, one draw shared by every
   model (paired);
2. then occurrence (m, s) -- model `m` at slot `s`, in C order -- owns the
   next block of `Hr` words; its number `r < R` draws the local trajectory
   `floor(u_r * R / 2**32)` of the model's segment for that question (stage 2,
   `R` draws with replacement); numbers `r >= R` go unused. A model without
   the question has no occurrence at that slot.

Exact sums. Every per-trajectory value `v` enters as the integer
`round(v * 2**F / R)` (`F` per metric, the largest that keeps any cell sum
below `2**62`: 52 bits for fractions, 37 for token counts at paper
scale), so the replicate statistics are integer sums, identical under any
summation order, batch shape or device -- the bit-identity above does not
rest on how a compiler orders float reductions. The cell value is
`sum * 2**-F / occurrences`; rounding the table entries moves a cell mean by
less than `2**-F`, i.e. ~1e-16 relative, far below anything reported.
"""

import dataclasses
import functools
import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from otbench.analysis.core import (
    Array,
    Int32,
    Int64,
    UInt64,
    numbers,
    pick,
    words,
)
from otbench.analysis.measurement import MeasurementSet
from otbench.analysis.overthinking import Layout, LayoutNames
from otbench.errors import ArgumentError

SUM_BITS = 62
"""Fixed-point sums stay below 2**SUM_BITS (int64 with headroom)."""


class Tables(NamedTuple):
    """Device arrays of the resampling layout (see the module docstring)."""

    pool: Int32[Array, " pool"]          # question of each pool position, groups in order
    slot_lo: Int32[Array, " slot"]       # first pool position of the slot's group
    slot_n: UInt64[Array, " slot"]       # pool size Q_g of the slot's group
    seg_of: Int32[Array, "model question"]  # segment of (model, question), -1 if absent
    size: Int32[Array, " seg"]           # R: trajectories of each segment
    probes: Int32[Array, " seg"]         # P of each segment (constant within one, docs/rules.md)
    rows: Int32[Array, " item"]          # global row of item seg * Rmax + r, -1 for padding


@dataclasses.dataclass(frozen=True)
class Resampling:
    """Static description of the two-stage draw for one measurement set.

    Attributes:
      tables: device-ready arrays (`Tables`).
      slots: S, the number of question draws per replicate.
      models: M; rmax: Rmax.
      group_slots: ((first slot, Q_g), ...) per group: static slices.
      cell_model, cell_group: int64[cell] dense model / group of each layout cell.
      seg_cell: int64[seg] cell of each segment; seg_size: int64[seg] R.
      words_per_replicate: W (64-bit words).
    """

    tables: Tables
    slots: int
    models: int
    rmax: int
    group_slots: tuple[tuple[int, int], ...]
    cell_model: np.ndarray
    cell_group: np.ndarray
    seg_cell: np.ndarray
    seg_size: np.ndarray
    words_per_replicate: int

    @property
    def num_cells(self) -> int:
        return int(self.cell_model.shape[0])

    @property
    def zero_item(self) -> int:
        """Index of the all-zero padding row of a value table."""
        return int(self.seg_size.shape[0]) * self.rmax


def resampling(ms: MeasurementSet, layout: Layout, names: LayoutNames) -> Resampling:
    """The resampling layout of `ms` (host side; see the module docstring)."""
    seg = np.asarray(layout.seg, dtype=np.int64)
    seg_cell = np.asarray(layout.seg_cell, dtype=np.int64)
    cell_model = np.asarray(layout.cell_model, dtype=np.int64)
    cell_group = np.asarray(layout.cell_group, dtype=np.int64)
    nseg = seg_cell.shape[0]
    seg_model, seg_group = cell_model[seg_cell], cell_group[seg_cell]
    # Global question of each segment (rows of a segment share it).
    seg_question = np.zeros(nseg, dtype=np.int64)
    seg_question[seg] = np.asarray(ms.question, dtype=np.int64)
    seg_probes = np.zeros(nseg, dtype=np.int64)
    seg_probes[seg] = np.asarray(ms.probes, dtype=np.int64)        # one P per segment
    size = names.seg_size.astype(np.int64)
    rmax = int(size.max(initial=1))
    # Row r of a segment: its rows in set order (sorted by trajectory).
    order = np.argsort(seg, kind="stable")
    start = np.cumsum(size) - size
    local = np.arange(seg.shape[0]) - np.repeat(start, size)
    rows = np.full(nseg * rmax + 1, -1, dtype=np.int64)
    rows[seg[order] * rmax + local] = order
    M, G = layout.num_models, layout.num_groups
    seg_of = np.full((M, max(ms.num_questions, 1)), -1, dtype=np.int64)
    seg_of[seg_model, seg_question] = np.arange(nseg)
    pools = [np.unique(seg_question[seg_group == g]) for g in range(G)]
    sizes = [p.shape[0] for p in pools]
    first = np.cumsum(sizes) - np.asarray(sizes, dtype=np.int64)
    S = int(sum(sizes))
    tables = Tables(
        pool=jnp.asarray(np.concatenate(pools), dtype=jnp.int32),
        slot_lo=jnp.asarray(np.repeat(first, sizes), dtype=jnp.int32),
        slot_n=jnp.asarray(np.repeat(sizes, sizes), dtype=jnp.uint64),
        seg_of=jnp.asarray(seg_of, dtype=jnp.int32),
        size=jnp.asarray(size, dtype=jnp.int32),
        probes=jnp.asarray(seg_probes, dtype=jnp.int32),
        rows=jnp.asarray(rows, dtype=jnp.int32))
    W = -(-S // 2) + M * S * (-(-rmax // 2))
    return Resampling(tables=tables, slots=S, models=M, rmax=rmax,
                      group_slots=tuple((int(f), int(n)) for f, n in zip(first, sizes)),
                      cell_model=cell_model, cell_group=cell_group, seg_cell=seg_cell,
                      seg_size=size, words_per_replicate=W)


def exponents(bound_values: np.ndarray, res: Resampling) -> np.ndarray:
    """int64[metric] the largest `F <= 60` keeping `Q_g * max|v| * 2**F < 2**(SUM_BITS - 1)`."""
    most = max([n for _, n in res.group_slots], default=1)
    F = []
    for m in np.asarray(bound_values, dtype=np.float64):
        bound = most * float(m)
        F.append(60 if bound == 0 else int(min(60, SUM_BITS - 1 - math.ceil(math.log2(bound)))))
    F = np.asarray(F, dtype=np.int64)
    if np.any(F < 0):
        raise ArgumentError("values too large for exact int64 bootstrap sums")
    return F


@dataclasses.dataclass(frozen=True)
class Packing:
    """Integer per-row fields packed into one int64 table column (static, hashable).

    The fields (`y`, `C(n)`, `C(k*) - C(n)`, `L(n)`) are non-negative
    integers; each gets enough bits for its sum over one occurrence's `R`
    draws, so draws are summed packed and unpacked once per occurrence. The
    occurrence mean is then `floor(sum * 2**F / div)` with `div = R` (y,
    tokens) or `R * P` (the probe fractions; P is constant within a segment).
    """

    shifts: tuple[int, int, int, int]
    widths: tuple[int, int, int, int]
    F: tuple[int, int, int, int]


def packing(ints: np.ndarray, probes: np.ndarray, res: Resampling) -> Packing | None:
    """`Packing` of int fields [4, traj] (y, C(n), C(k*) - C(n), L(n)), or None if over 63 bits."""
    rmax = res.rmax
    pmax = int(np.max(probes, initial=1))
    lmax = int(np.max(ints[3], initial=0))
    widths = (int(rmax).bit_length(), int(rmax * pmax).bit_length(),
              int(rmax * pmax).bit_length(), int(rmax * lmax).bit_length())
    if sum(widths) > 63:
        return None
    shifts = tuple(int(x) for x in np.cumsum((0,) + widths[:-1]))
    cell_F = exponents(np.asarray([1.0, 1.0, 1.0, float(lmax)]), res)
    # The scaled occurrence sum `sum << F` must fit int64 as well.
    F = tuple(int(min(f, SUM_BITS - w)) for f, w in zip(cell_F, widths))
    return Packing(shifts=shifts, widths=widths, F=F)


def packed_table(ratio: np.ndarray, ints: np.ndarray, res: Resampling, seg: np.ndarray,
                 pk: Packing) -> tuple[np.ndarray, np.ndarray]:
    """Two-column table (OR fixed-point, packed int fields) and F in `BOOT` metric order.

    Metric order of the returned F: or, ad, full_acc, tokens, endpoint_acc.
    """
    or_table, F_or = fixed_point(ratio[None, :], res, seg)
    packed = np.zeros(ints.shape[1], dtype=np.int64)
    for v, sh in zip(np.asarray(ints, dtype=np.int64), pk.shifts):
        packed |= v << sh
    table = np.zeros((res.zero_item + 1, 2), dtype=np.int64)
    table[:, 0] = or_table[:, 0]
    rows = np.asarray(res.tables.rows, dtype=np.int64)
    have = rows >= 0
    table[have, 1] = packed[rows[have]]
    y, e, d, ln = pk.F
    return table, np.asarray([F_or[0], d, y, ln, e], dtype=np.int64)


def fixed_point(values: np.ndarray, res: Resampling, seg: np.ndarray,
                divisor: np.ndarray | None = None,
                F: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Integer value table `round(v * 2**F / R)` of per-row values, per metric.

    Args:
      values: float64[metric, traj] finite per-row values.
      res: the layout; seg: int[traj] segment of each row.
      divisor: int[seg] the draws an occurrence averages over (default `R`).
      F: int64[metric] exponents to use instead of `exponents`' (a caller
        whose sums have another bound, e.g. `_summaries.pair_exponents`).

    Returns:
      (table int64[seg * Rmax + 1, metric] with a zero last row, F int64[metric]).
      `F` is the largest exponent (at most 60) such that a cell sum -- at most
      `Q_g` occurrences of averages of values -- stays below `2**SUM_BITS`.
    """
    values = np.asarray(values, dtype=np.float64)
    seg = np.asarray(seg, dtype=np.int64)
    div = res.seg_size if divisor is None else np.asarray(divisor, dtype=np.int64)
    if F is None:
        F = exponents(np.abs(values).max(axis=1, initial=0.0), res)
    scaled = np.rint(values * np.exp2(F)[:, None] / div[seg][None, :]).astype(np.int64)
    table = np.zeros((res.zero_item + 1, values.shape[0]), dtype=np.int64)
    order = np.asarray(res.tables.rows, dtype=np.int64)
    have = order >= 0
    table[have] = scaled[:, order[have]].T
    return table, F


def occurrence_items(rep: jax.Array, seed: jax.Array, t: Tables, *, slots: int,
                     models: int, rmax: int, words_per_replicate: int
                     ) -> tuple[Int32[Array, "model slot"], Int32[Array, "model slot draw"]]:
    """One replicate's draws: (segment of every occurrence or -1, item of every draw).

    The item of draw `r` of occurrence (m, s) is `seg * Rmax + local row`, or
    `nseg * Rmax` (the zero row) when `r >= R` or the model lacks the question.

    Args:
      rep: uint64[] replicate index; seed: uint64[] the stream seed.
    """
    S, M, Rm = slots, models, rmax
    Hs, Hr = -(-S // 2), -(-Rm // 2)
    w = words(seed, rep * jnp.uint64(words_per_replicate) + jnp.uint64(1), words_per_replicate)
    q = t.pool[t.slot_lo + pick(numbers(w[:Hs], S), t.slot_n)]          # [slot]
    seg = t.seg_of[:, q]                                                  # [model, slot]
    has = seg >= 0
    R = jnp.where(has, t.size[jnp.where(has, seg, 0)], 0)
    draw = pick(numbers(w[Hs:].reshape(M, S, Hr), Rm), R[:, :, None])   # [model, slot, draw]
    r = jnp.arange(Rm, dtype=jnp.int32)
    zero = t.size.shape[0] * Rm
    item = jnp.where(r[None, None, :] < R[:, :, None], seg[:, :, None] * Rm + draw, zero)
    return jnp.where(has, seg, -1), item.astype(jnp.int32)


class CellSums(NamedTuple):
    """Integer replicate statistics of every cell (one replicate; vmapped: leading rep axis)."""

    sums: Int64[Array, "cell metric"]   # fixed-point sums of occurrence means
    count: Int32[Array, " cell"]        # occurrences (drawn questions the model has)


def unpack(raw: Int64[Array, "model slot col"], seg: Int32[Array, "model slot"], t: Tables,
           pk: Packing) -> Int64[Array, "model slot metric"]:
    """Occurrence sums in metric order (or, ad, full_acc, tokens, endpoint_acc) from packed columns."""
    has = seg >= 0
    s0 = jnp.where(has, seg, 0)
    R = jnp.where(has, t.size[s0], 1).astype(jnp.int64)
    RP = R * jnp.where(has, t.probes[s0], 1).astype(jnp.int64)
    packed = raw[..., 1]
    y, e, d, ln = (((packed >> sh) & ((1 << w) - 1)) << f
                   for sh, w, f in zip(pk.shifts, pk.widths, pk.F))
    # Exact integer floor division: deterministic on every device.
    return jnp.stack([raw[..., 0], d // RP, y // R, ln // R, e // RP], axis=-1)


def cell_sums(items: Int32[Array, "model slot draw"], seg: Int32[Array, "model slot"],
              table: Int64[Array, "item col"], t: Tables, cell_model: Sequence[int],
              cell_group: Sequence[int], group_slots: Sequence[tuple[int, int]],
              pk: Packing | None = None) -> CellSums:
    """Sum the drawn values of every occurrence, then the occurrences of every cell.

    Group slot ranges are static, so a cell sum is a sum over a static slice
    of its model's occurrences; all sums are int64 (exact). With a `Packing`
    the table has two columns (OR, packed integer fields), which halves the
    gathered bytes per draw (the kernel's main cost on CPU).
    """
    occ = jnp.sum(table[items], axis=2)                     # [model, slot, col]
    if pk is not None:
        occ = unpack(occ, seg, t, pk)
    has = (seg >= 0).astype(jnp.int32)
    per_group = [(jnp.sum(occ[:, f:f + n], axis=1), jnp.sum(has[:, f:f + n], axis=1))
                 for f, n in group_slots]
    sums = jnp.stack([per_group[g][0][m] for m, g in zip(cell_model, cell_group)], axis=0)
    count = jnp.stack([per_group[g][1][m] for m, g in zip(cell_model, cell_group)], axis=0)
    return CellSums(sums=sums, count=count.astype(jnp.int32))


class Replicates(NamedTuple):
    """Outputs of `replicate_kernel` for a batch (leading axis: replicates)."""

    sums: Int64[Array, "rep cell metric"]
    count: Int32[Array, "rep cell"]
    rows: Int32[Array, "rep model slot draw"] | None   # global rows drawn (-1: none); frontiers only


def replicate_kernel(res: Resampling, sharding: Any, replicated: Any, *, rows: bool,
                     pk: Packing | None = None):
    """Jitted `(rep uint64[B], seed uint64[], tables, value table) -> Replicates`, vmapped over `rep`.

    `rep` and the outputs are sharded over the devices of `sharding` (batch
    axis); the tables are replicated. With `rows=False` the drawn rows are
    not materialized (`Replicates.rows` is None). `pk` selects the packed
    two-column value table (`packed_table`). Kernels are cached by layout,
    so sets of the same shape compile once per process.
    """
    return _replicate_kernel(res.slots, res.models, res.rmax, res.words_per_replicate,
                             tuple(int(x) for x in res.cell_model),
                             tuple(int(x) for x in res.cell_group), res.group_slots,
                             sharding, replicated, rows, pk)


@functools.cache
def _replicate_kernel(slots, models, rmax, words_per_replicate, cm, cg, gs, sharding, replicated,
                      rows, pk):
    statics = dict(slots=slots, models=models, rmax=rmax, words_per_replicate=words_per_replicate)

    def _replicate(rep, seed, t, table):
        seg, items = occurrence_items(rep, seed, t, **statics)
        cs = cell_sums(items, seg, table, t, cm, cg, gs, pk)
        return Replicates(cs.sums, cs.count, t.rows[items] if rows else None)

    return jax.jit(jax.vmap(_replicate, in_axes=(0, None, None, None)),
                   in_shardings=(sharding, replicated, replicated, replicated),
                   out_shardings=sharding)
