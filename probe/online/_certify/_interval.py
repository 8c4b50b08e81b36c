"""The certificate's intervals: OTBench's two-stage paired bootstrap draw, restated in NumPy.

The probe never imports JAX, so the draw of the analysis's bootstrap
(`otbench.analysis.resampling`, docs/rules.md "Uncertainty") is restated
here word for word; `tests/probe/online/test_certify_interval.py` checks it
equals the analysis's `occurrence_items` on the same seed, and a plain loop.

Draw (the analysis's layout, over the certified trajectories). Groups,
models and cells in sorted order; group `g`'s pool is the sorted list of
its questions (any model), `Q_g` its size; `S = Σ Q_g` slots; a (model,
question) segment holds its `R` trajectories in set order, `Rmax` the
largest `R`. Replicate `i` reads the SplitMix64 words `p = i W + 1 .. i W +
W` of the stream seeded with `seed` (`mix64(seed + p γ)` mod 2**64), `W =
ceil(S/2) + M S ceil(Rmax/2)`: stage 1, the first `ceil(S/2)` words give
slot `s` of group `g` the question `pool_g[floor(u_s Q_g / 2**32)]`, one
draw shared by every model (paired); stage 2, occurrence (model `m`, slot
`s`) owns the next `ceil(Rmax/2)` words and its number `r < R` draws the
local trajectory `floor(u_r R / 2**32)`. Number `j` of a block of `H` words
is the low half of word `j` for `j < H`, else the high half of word `j - H`.

The point at θ on a replicate is OTBench's point on the pseudo-set of the
drawn trajectories (each as often as drawn): per cell, accuracy `Σ C(k) /
Σ P` (online: `Σ P y / Σ P`, its one graded answer standing for the
position) and relative cost `Σ L(k) / Σ L(n)` (the replicate's own full
thinking, as the frontier bootstrap normalizes); the macro chain is the mean
over a model's cells, then over models. A cell none of whose questions was
drawn is NaN in that replicate; percentiles (linear, as `numpy.percentile`)
use the replicates where the value is defined.

Two intervals, for accuracy and for relative cost:

* of the point (offline and online): the percentiles of the two-stage
  replicates -- OTBench's own interval of that point;
* of the paired difference online - offline, which decides the certificate:
  the percentiles of the same replicates' stage-1 draw (each drawn
  question's trajectories taken once each), at Hesterberg's *expanded*
  levels for the smallest cell's question count `n` (`expanded_percentiles`:
  1.88 and 98.12 at `n = 30`, tending to 2.5 and 97.5 as `n` grows). Under
  the null -- online and offline answers from the same accuracies, on the
  same questions and trajectories -- the paired difference has no
  between-question part, and stage 2 counts its within-question variance a
  second time (the precision planner's step 4 states the double count): the
  two-stage interval of the difference rejects ~1 % of such runs instead of
  5 %. The plain stage-1 percentiles rejected 7.2 % on the paper-sized
  heterogeneous shape (400 runs, s.e. 1.1 pp: a percentile interval over
  30-question cells of widely differing questions is too short), hence the
  expanded levels (`benchmarks/certify_calibration.py`). The two-stage
  interval of the difference is recorded beside it
  (``two_stage_difference_interval``), and the levels used
  (``difference_levels``).
"""

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

SEED = 20260721
"""The project's recorded bootstrap seed (docs/rules.md); the certificate records the one it used."""
REPLICATES = 2000
PERCENTILES = (2.5, 97.5)
GAMMA = 0x9E3779B97F4A7C15
_MIX1, _MIX2 = 0xBF58476D1CE4E5B9, 0x94D049BB133111EB
_MASK32 = np.uint64(0xFFFFFFFF)
_BATCH_WORDS = 1 << 22
"""Words generated per batch of replicates (32 MiB): bounds memory at any scale."""


def mix64(z: np.ndarray) -> np.ndarray:
    """SplitMix64's output function, elementwise on uint64 (wrapping arithmetic)."""
    z = np.asarray(z, dtype=np.uint64)
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(30))) * np.uint64(_MIX1)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(_MIX2)
    return z ^ (z >> np.uint64(31))


def words(seed: int, first: int, count: int) -> np.ndarray:
    """Outputs `p = first .. first + count - 1` of the SplitMix64 stream seeded with `seed`."""
    p = np.uint64(first) + np.arange(count, dtype=np.uint64)
    with np.errstate(over="ignore"):
        return mix64(np.uint64(seed % 2**64) + p * np.uint64(GAMMA))


def numbers(w: np.ndarray, count: int) -> np.ndarray:
    """The first `count` 32-bit numbers of each block of words (last axis; module docstring)."""
    return np.concatenate([w & _MASK32, w >> np.uint64(32)], axis=-1)[..., :count]


def pick(u: np.ndarray, n: np.ndarray) -> np.ndarray:
    """`floor(u n / 2**32)` for 32-bit `u` and `n < 2**32`, exact in uint64."""
    return ((u * np.asarray(n, dtype=np.uint64)) >> np.uint64(32)).astype(np.int64)


@dataclasses.dataclass(frozen=True)
class Design:
    """The resampling layout of the certified trajectories (module docstring).

    Per-row arrays are in the caller's order; `item_row` maps segment `s`'s
    local trajectory `r` (set order) to that position (-1: padding).
    """

    cell: np.ndarray          # int64[row] dense cell
    cell_model: np.ndarray    # int64[cell] dense model
    cell_group: np.ndarray    # int64[cell] dense group
    questions: np.ndarray     # int64[row] question index (comparable across rows)
    pool: np.ndarray          # int64[pool] questions of each group, groups in order
    slot_lo: np.ndarray       # int64[slot] first pool position of the slot's group
    slot_n: np.ndarray        # int64[slot] Q_g of the slot's group
    seg_of: np.ndarray        # int64[model, question] segment or -1
    seg_size: np.ndarray      # int64[seg] R
    item_row: np.ndarray      # int64[seg * Rmax]
    models: int
    rmax: int

    @property
    def slots(self) -> int:
        return int(self.slot_lo.size)

    @property
    def words_per_replicate(self) -> int:
        return -(-self.slots // 2) + self.models * self.slots * (-(-self.rmax // 2))

    def questions_per_cell(self) -> np.ndarray:
        return np.array([np.unique(self.questions[self.cell == c]).size
                         for c in range(self.cell_model.size)], dtype=np.int64)


def design(cell: Sequence[int], cell_model: Sequence[int], cell_group: Sequence[int],
           question: Sequence[int], order: Sequence[int] | None = None) -> Design:
    """The layout of rows with cell ids `cell` (into `cell_model` / `cell_group`) and `question`.

    `order`: each row's position in the set (rows of a segment are taken in
    this order, as the analysis takes them in set order); default as given.
    """
    cell = np.asarray(cell, dtype=np.int64)
    question = np.asarray(question, dtype=np.int64)
    order = np.arange(cell.size) if order is None else np.asarray(order, dtype=np.int64)
    present = np.unique(cell)
    dense = np.searchsorted(present, cell)
    cm_orig = np.asarray(cell_model, dtype=np.int64)[present]
    cg_orig = np.asarray(cell_group, dtype=np.int64)[present]
    cm = np.searchsorted(np.unique(cm_orig), cm_orig)
    cg = np.searchsorted(np.unique(cg_orig), cg_orig)
    nq = int(question.max(initial=-1)) + 1
    _, first, seg = np.unique(dense * max(nq, 1) + question, return_index=True, return_inverse=True)
    seg = seg.reshape(-1)
    nseg = first.size
    seg_cell = dense[first]
    seg_question = question[first]
    size = np.bincount(seg, minlength=nseg).astype(np.int64)
    rmax = int(size.max(initial=1))
    by = np.lexsort((order, seg))                      # segment, then set order
    start = np.cumsum(size) - size
    local = np.arange(seg.size) - np.repeat(start, size)
    item_row = np.full(nseg * rmax, -1, dtype=np.int64)
    item_row[seg[by] * rmax + local] = by
    M = int(cm.max(initial=-1)) + 1
    seg_of = np.full((M, max(nq, 1)), -1, dtype=np.int64)
    seg_of[cm[seg_cell], seg_question] = np.arange(nseg)
    groups = int(cg.max(initial=-1)) + 1
    pools = [np.unique(seg_question[cg[seg_cell] == g]) for g in range(groups)]
    sizes = np.array([p.size for p in pools], dtype=np.int64)
    lo = np.cumsum(sizes) - sizes
    return Design(cell=dense, cell_model=cm, cell_group=cg, questions=question,
                  pool=np.concatenate(pools) if pools else np.zeros(0, np.int64),
                  slot_lo=np.repeat(lo, sizes), slot_n=np.repeat(sizes, sizes), seg_of=seg_of,
                  seg_size=size, item_row=item_row, models=M, rmax=rmax)


def design_of(ms: Any, rows: Sequence[int]) -> Design:
    """The layout of `ms`'s trajectories `rows` (a measurement set's cells and questions)."""
    rows = np.asarray(rows, dtype=np.int64)
    return design(np.asarray(ms.cell)[rows], ms.cell_model, ms.cell_group,
                  np.asarray(ms.question)[rows], order=rows)


def draws(d: Design, seed: int, start: int, count: int) -> tuple[np.ndarray, np.ndarray]:
    """Replicates `start .. start + count - 1`: (segment [rep, model, slot] or -1, row [rep, model,
    slot, Rmax] or -1) -- the analysis's `occurrence_items`, rows instead of table items."""
    S, M, Rm, W = d.slots, d.models, d.rmax, d.words_per_replicate
    Hs, Hr = -(-S // 2), -(-Rm // 2)
    w = words(seed, start * W + 1, count * W).reshape(count, W)
    q = d.pool[d.slot_lo + pick(numbers(w[:, :Hs], S), d.slot_n)]           # [rep, slot]
    seg = d.seg_of[:, q].transpose(1, 0, 2)                                   # [rep, model, slot]
    has = seg >= 0
    R = np.where(has, d.seg_size[np.where(has, seg, 0)], 0)
    local = pick(numbers(w[:, Hs:].reshape(count, M, S, Hr), Rm), R[..., None])
    r = np.arange(Rm)
    ok = r < R[..., None]
    row = np.where(ok, d.item_row[np.where(ok, seg[..., None] * Rm + local, 0)], -1)
    return np.where(has, seg, -1), row


def multiplicities(d: Design, seed: int, start: int, count: int) -> tuple[np.ndarray, np.ndarray]:
    """float64[rep, row] how often each row enters replicate `i`: (two-stage, stage 1 only)."""
    nrow = d.cell.size
    seg, row = draws(d, seed, start, count)
    rep = np.arange(count)[:, None, None, None]
    two = np.bincount((rep * (nrow + 1) + np.where(row >= 0, row, nrow)).reshape(-1),
                      minlength=count * (nrow + 1)).reshape(count, nrow + 1).astype(np.float64)
    # stage 1: every trajectory of each drawn occurrence once
    ns = d.seg_size.size + 1
    per_seg = np.bincount((rep[..., 0] * ns + np.where(seg >= 0, seg, ns - 1)).reshape(-1),
                          minlength=count * ns).reshape(count, ns).astype(np.float64)
    seg_of_row = np.full(nrow, d.seg_size.size, dtype=np.int64)
    have = d.item_row >= 0
    seg_of_row[d.item_row[have]] = np.flatnonzero(have) // d.rmax
    return two[:, :nrow], per_seg[:, seg_of_row]


def chain(cells: np.ndarray, d: Design) -> np.ndarray:
    """Macro chain of cell values `[..., cell]`: mean over a model's cells, then over models."""
    out = np.zeros(cells.shape[:-1])
    for m in range(d.models):
        mine = np.flatnonzero(d.cell_model == m)
        out = out + cells[..., mine].mean(axis=-1)
    return out / d.models


def macro_ratio(num: np.ndarray, den: np.ndarray, weight: np.ndarray, d: Design) -> np.ndarray:
    """Macro chain of per-cell `Σ w num / Σ w den` (0 where the cell's `Σ w den` is 0 but it was
    drawn, NaN where it was not), for `weight [..., row]`."""
    return macro_ratios([(num, den)], weight, d)[0]


def macro_ratios(pairs: Sequence[tuple[np.ndarray, np.ndarray]], weight: np.ndarray, d: Design
                 ) -> list[np.ndarray]:
    """`macro_ratio` of several (numerator, denominator) pairs with one product of the weights."""
    C = d.cell_model.size
    onehot = (d.cell[:, None] == np.arange(C)[None, :]).astype(np.float64)        # [row, cell]
    cols = [onehot] + [v[:, None] * onehot for nd in pairs for v in nd]
    sums = weight @ np.concatenate(cols, axis=1)                                  # [..., (1 + 2 k) C]
    drawn = sums[..., :C] > 0
    out = []
    for j in range(len(pairs)):
        top = sums[..., (1 + 2 * j) * C:(2 + 2 * j) * C]
        bot = sums[..., (2 + 2 * j) * C:(3 + 2 * j) * C]
        with np.errstate(invalid="ignore", divide="ignore"):
            cells = np.where(bot > 0, top / np.where(bot > 0, bot, 1), np.where(drawn, 0.0, np.nan))
        out.append(chain(cells, d))
    return out


def percentile_interval(x: np.ndarray, percentiles: Sequence[float] = PERCENTILES) -> list[float | None]:
    """Linear percentiles over the replicates where `x` is defined ([None, None] if none)."""
    x = np.asarray(x, dtype=np.float64)
    x = x[np.isfinite(x)]
    return [float(v) for v in np.percentile(x, percentiles)] if x.size else [None, None]


def t_quantile(p: float, df: int) -> float:
    """Student's t quantile for `p` in (0.5, 1) by the Cornish-Fisher expansion in `1/df` (three
    terms: within 1e-4 of the exact quantile for `df >= 10`, the range it is used in)."""
    z = _normal_quantile(p)
    v = float(df)
    return (z + (z ** 3 + z) / (4 * v) + (5 * z ** 5 + 16 * z ** 3 + 3 * z) / (96 * v ** 2)
            + (3 * z ** 7 + 19 * z ** 5 + 17 * z ** 3 - 15 * z) / (384 * v ** 3))


def _normal_quantile(p: float) -> float:
    """The standard normal quantile, by bisection on `erf` (exact to 1e-12)."""
    lo, hi = -10.0, 10.0
    for _ in range(100):
        mid = (lo + hi) / 2
        if 0.5 * (1 + math.erf(mid / math.sqrt(2))) < p:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def expanded_percentiles(n: int, percentiles: Sequence[float] = PERCENTILES) -> tuple[float, float]:
    """Hesterberg's expanded percentile levels for `n` resampled units (a small-sample correction:
    the plain percentile interval is too narrow by about `sqrt((n - 1) / n) z / t_{n-1}`).

    For two-sided level `1 - α` the levels are `Φ(∓ sqrt(n / (n - 1)) t_{1-α/2, n-1})`: at
    `n = 30` and 95 %, 1.88 and 98.12 instead of 2.5 and 97.5 (T. Hesterberg, "What teachers
    should know about the bootstrap", The American Statistician 69(4), 2015, section 4.1).
    """
    lo, hi = percentiles
    if n < 2:
        return float(lo), float(hi)
    a = (lo + (100.0 - hi)) / 200.0                       # α / 2
    z = math.sqrt(n / (n - 1)) * t_quantile(1.0 - a, n - 1)
    tail = 100.0 * 0.5 * (1 + math.erf(-z / math.sqrt(2)))
    return tail, 100.0 - tail


def paired_point(d: Design, metrics: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]], *,
                 seed: int = SEED, replicates: int = REPLICATES,
                 percentiles: Sequence[float] = PERCENTILES) -> dict[str, Any]:
    """Point, intervals and paired-difference test of each metric (module docstring).

    `metrics`: name -> (offline numerator, online numerator, denominator), float64[row] each.
    """
    one = np.ones(d.cell.size)
    per = max(1, _BATCH_WORDS // max(1, d.words_per_replicate))
    reps = {nm: ([], [], []) for nm in metrics}
    pairs = [p for off, on, den in metrics.values() for p in ((off, den), (on, den))]
    for start in range(0, replicates, per):
        two, first = multiplicities(d, seed, start, min(per, replicates - start))
        r2, r1 = macro_ratios(pairs, two, d), macro_ratios(pairs, first, d)
        for j, nm in enumerate(metrics):
            a, b, c = reps[nm]
            a.append(r2[2 * j])
            b.append(r2[2 * j + 1])
            c.append(r1[2 * j + 1] - r1[2 * j])
    out = {}
    # The decision's interval: expanded percentiles at the smallest cell's question count
    # (the cell whose resampled mean is least normal), `expanded_percentiles`.
    per_cell = d.questions_per_cell()
    n_min = int(per_cell.min()) if per_cell.size else 0
    levels = expanded_percentiles(n_min, percentiles)
    for nm, (off, on, den) in metrics.items():
        x_off, x_on = float(macro_ratio(off, den, one, d)), float(macro_ratio(on, den, one, d))
        r_off, r_on, r_diff = (np.concatenate(v) for v in reps[nm])
        lo, hi = percentile_interval(r_diff, levels)
        out[nm] = {"offline": x_off, "online": x_on, "difference": x_on - x_off,
                   "offline_interval": percentile_interval(r_off, percentiles),
                   "online_interval": percentile_interval(r_on, percentiles),
                   "difference_interval": [lo, hi], "difference_levels": [float(x) for x in levels],
                   "two_stage_difference_interval": percentile_interval(r_on - r_off, percentiles),
                   "inside": lo is not None and lo <= 0.0 <= hi}
    return out
