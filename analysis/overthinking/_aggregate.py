"""Equal-weight aggregation: trajectory -> (model, question) -> cell -> model / group / macro (docs/rules.md).

Every summary of the analysis is averaged the same way: mean over the
trajectories of a question, mean over the questions of a benchmark group,
then equal weights over groups (a model's "Avg." column), over models (a
group's "Avg." row) and over models for the macro value. The kernels here
express that chain with segment ids and *weights*, so that one compiled
function serves both the point estimate (all weights 1) and the two-stage
bootstrap (docs/rules.md), which vmaps it over replicates whose weights are draw
multiplicities:

* `weight: float64[traj]` -- how many times each trajectory row was drawn
  into its (model, question) segment. A segment's value is
  `sum(w * v) / sum(w)`: the mean over all draws.
* `q_weight: float64[seg]` -- how many times each (model, question) segment
  was drawn (occurrences). A cell's value is the `q_weight`-weighted mean of
  its segment values.

For a bootstrap in which every occurrence of a question draws `R_q`
trajectories, passing `weight` = total draws of each row over the
occurrences and `q_weight` = number of occurrences reproduces exactly the
"mean over occurrences of the occurrence means" (every occurrence has the
same number of draws, so pooling the draws does not reweight them). The one
exception is the pairwise metric (`segment_pair_mad`), which would mix
draws of different occurrences when pooled; a caller that needs it per
occurrence gives each occurrence its own segment id (the kernels take `seg`
as data, so a layout whose rows are draws and whose segments are
occurrences works unchanged, with all weights 1).

Missing data never becomes a silent zero:
* a segment with total weight 0 (not drawn) has value NaN and must be given
  `q_weight` 0 by the caller; `aggregate` ignores segments whose `q_weight`
  is 0 (their NaN is masked, not summed), but a NaN value with a positive
  `q_weight` propagates;
* a cell whose segments all have `q_weight` 0 is NaN, and a NaN cell makes
  its model's and its group's average and the macro average NaN (an
  equal-weight average over groups is undefined when a group is missing;
  averaging the remaining groups would silently reweight them).

Only cells that have at least one trajectory in the set take part: a model
evaluated on fewer groups is averaged over the groups it has, and a subset
made with `MeasurementSet.take` (whose name tables stay whole) does not
report its absent cells.
"""

import dataclasses
import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from otbench.analysis.measurement import MeasurementSet


@functools.partial(
    jax.tree_util.register_dataclass,
    data_fields=["seg", "seg_cell", "cell_model", "cell_group"],
    meta_fields=["num_models", "num_groups"],
)
@dataclasses.dataclass(frozen=True)
class Layout:
    """Index arrays of the aggregation chain (a pytree; the counts are static).

    Segment and cell indices are dense over what is present in the set:
    `num_segments = seg_cell.shape[0]`, `num_cells = cell_model.shape[0]`.

    Attributes:
      seg: int32[traj] (model, question) segment of each row.
      seg_cell: int32[seg] cell of each segment.
      cell_model: int32[cell] model of each cell, `0..num_models-1`.
      cell_group: int32[cell] group of each cell, `0..num_groups-1`.
      num_models, num_groups: static counts.
    """

    seg: jax.Array
    seg_cell: jax.Array
    cell_model: jax.Array
    cell_group: jax.Array
    num_models: int
    num_groups: int

    @property
    def num_segments(self) -> int:
        return int(self.seg_cell.shape[0])

    @property
    def num_cells(self) -> int:
        return int(self.cell_model.shape[0])


class LayoutNames(NamedTuple):
    """Names and counts that go with a `Layout` (host side, for reports)."""

    models: tuple[str, ...]               # [model]
    groups: tuple[str, ...]               # [group]
    cells: tuple[tuple[str, str], ...]    # [cell] (model, group)
    cell_index: np.ndarray                # int64[cell] index into ms.cell_model / cell_group
    cell_questions: np.ndarray            # int64[cell] segments (questions) per cell
    cell_trajectories: np.ndarray         # int64[cell] rows per cell
    seg_size: np.ndarray                  # int64[seg] rows (R) per segment


def build_layout(ms: MeasurementSet) -> tuple[Layout, LayoutNames]:
    """The aggregation layout of `ms`, over the cells that have rows.

    Segment ids follow the row order of `ms` (sorted by cell, question), but
    are computed with `np.unique`, so they do not depend on it.
    """
    cell = np.asarray(ms.cell, dtype=np.int64)
    question = np.asarray(ms.question, dtype=np.int64)
    present = np.unique(cell)                                # original cell ids
    cell_dense = np.searchsorted(present, cell)
    key = cell_dense * max(ms.num_questions, 1) + question
    seg_key, first_row, seg = np.unique(key, return_index=True, return_inverse=True)
    seg_cell = cell_dense[first_row]
    cm_orig = np.asarray(ms.cell_model, dtype=np.int64)[present]
    cg_orig = np.asarray(ms.cell_group, dtype=np.int64)[present]
    models_present = np.unique(cm_orig)
    groups_present = np.unique(cg_orig)
    cell_model = np.searchsorted(models_present, cm_orig)
    cell_group = np.searchsorted(groups_present, cg_orig)
    layout = Layout(
        seg=jnp.asarray(seg.reshape(-1), dtype=jnp.int32),
        seg_cell=jnp.asarray(seg_cell, dtype=jnp.int32),
        cell_model=jnp.asarray(cell_model, dtype=jnp.int32),
        cell_group=jnp.asarray(cell_group, dtype=jnp.int32),
        num_models=int(models_present.size),
        num_groups=int(groups_present.size),
    )
    names = LayoutNames(
        models=tuple(ms.models[i] for i in models_present),
        groups=tuple(ms.groups[i] for i in groups_present),
        cells=tuple((ms.models[m], ms.groups[g]) for m, g in zip(cm_orig, cg_orig)),
        cell_index=present,
        cell_questions=np.bincount(seg_cell, minlength=present.size),
        cell_trajectories=np.bincount(cell_dense, minlength=present.size),
        seg_size=np.bincount(seg.reshape(-1), minlength=seg_key.size),
    )
    return layout, names


def segment_mean(values: jax.Array, weight: jax.Array, seg: jax.Array,
                 num_segments: int) -> tuple[jax.Array, jax.Array]:
    """Weighted mean of `values` per segment.

    Args:
      values: float64[traj] per-row values (finite).
      weight: float64[traj] non-negative multiplicities.
      seg: int32[traj] segment of each row.
      num_segments: static number of segments.

    Returns:
      (mean float64[seg], total weight float64[seg]); the mean is NaN where
      the total weight is 0.
    """
    total = jax.ops.segment_sum(weight, seg, num_segments)
    s = jax.ops.segment_sum(weight * values, seg, num_segments)
    has = total > 0
    return jnp.where(has, s / jnp.where(has, total, 1.0), jnp.nan), total


def segment_pair_mad(values: jax.Array, weight: jax.Array, seg: jax.Array,
                     num_segments: int) -> tuple[jax.Array, jax.Array]:
    """Mean absolute difference over all unordered pairs of draws, per segment.

    With unit weights this is the mean of `|v_a - v_b|` over the
    `R(R-1)/2` trajectory pairs of the segment (docs/rules.md, within-question
    variation). A row of weight `w` counts as `w` identical draws: pairs of
    draws of the same row differ by 0, so the value equals that of the
    explicitly repeated rows. With `N = sum(w)` draws the result is
    `sum_{a<b} w_a w_b |v_a - v_b| / (N (N - 1) / 2)`.

    Computed in O(T log T) without `[R, R]` matrices: after sorting by
    (segment, value), the pair sum is `sum_b w_b v_b (W_before(b) -
    W_after(b))`, where `W_before` / `W_after` are the weights of the
    segment's rows sorted before / after `b`. Only prefix sums of *weights*
    are needed; for integral weights (multiplicities) they are exact in
    float64 even as one global cumsum, so no segmented scan (slow to
    compile) is required.

    Returns:
      (mad float64[seg], total weight float64[seg]); NaN where `N < 2` (a
      segment with fewer than two draws has no pair).
    """
    order = jnp.lexsort((values, seg))          # by segment, then by value
    v, w, s = values[order], weight[order], seg[order]
    excl = jnp.cumsum(w) - w                     # weight of all rows sorted before
    # Weights are >= 0, so the exclusive sum is non-decreasing and its
    # minimum over a segment is its value at the segment's first row.
    base = jax.ops.segment_min(excl, s, num_segments)
    total = jax.ops.segment_sum(weight, seg, num_segments)
    before = excl - base[s]
    after = total[s] - before - w
    # Ties contribute 0 whichever side they fall, so the sort's tie order
    # does not matter.
    pair_sum = jax.ops.segment_sum(w * v * (before - after), s, num_segments)
    ok = total > 1
    pairs = jnp.where(ok, total * (total - 1.0) / 2.0, 1.0)
    return jnp.where(ok, pair_sum / pairs, jnp.nan), total


class Aggregate(NamedTuple):
    """One metric aggregated at every level (equal weights, docs/rules.md)."""

    cell: jax.Array    # float64[cell] q_weight-weighted mean of segment values
    model: jax.Array   # float64[model] mean over the model's cells
    group: jax.Array   # float64[group] mean over the group's cells
    macro: jax.Array   # float64[] mean over models of `model`


def aggregate(q_value: jax.Array, q_weight: jax.Array, layout: Layout) -> Aggregate:
    """Aggregate per-segment values to cells, models, groups and the macro value.

    Args:
      q_value: float64[seg] segment (model, question) values; NaN allowed
        where `q_weight` is 0.
      q_weight: float64[seg] non-negative question weights (occurrences);
        0 excludes the segment.
      layout: the aggregation layout.

    Returns:
      `Aggregate`; NaN marks a cell without data and everything averaged
      over it (see the module docstring).
    """
    use = q_weight > 0
    u = jnp.where(use, q_weight, 0.0)
    qv = jnp.where(use, q_value, 0.0)     # masked, so excluded NaNs do not leak
    U = jax.ops.segment_sum(u, layout.seg_cell, layout.num_cells)
    S = jax.ops.segment_sum(u * qv, layout.seg_cell, layout.num_cells)
    has = U > 0
    cell = jnp.where(has, S / jnp.where(has, U, 1.0), jnp.nan)
    one = jnp.ones_like(cell)
    # Every present model / group has at least one cell, so the counts are > 0.
    model = (jax.ops.segment_sum(cell, layout.cell_model, layout.num_models)
             / jax.ops.segment_sum(one, layout.cell_model, layout.num_models))
    group = (jax.ops.segment_sum(cell, layout.cell_group, layout.num_groups)
             / jax.ops.segment_sum(one, layout.cell_group, layout.num_groups))
    return Aggregate(cell=cell, model=model, group=group, macro=jnp.mean(model))


def spearman(x: jax.Array, y: jax.Array) -> jax.Array:
    """Spearman rank correlation with average ranks for ties.

    The Pearson correlation of the average ranks (as `scipy.stats.spearmanr`).
    Returns a float64 scalar: NaN when there are fewer than 2 values, when
    either input is constant (its rank variance is 0, the correlation is
    undefined), or when either input contains NaN.

    Args:
      x, y: float64[m] paired values (e.g. the cell means of OR and AD).
    """
    m = x.shape[0]
    if m < 2:                     # static: no pair, no correlation
        return jnp.asarray(jnp.nan, dtype=jnp.float64)
    rx, ry = _average_rank(x), _average_rank(y)
    dx, dy = rx - jnp.mean(rx), ry - jnp.mean(ry)
    den = jnp.sqrt(jnp.sum(dx * dx) * jnp.sum(dy * dy))
    ok = (den > 0) & ~jnp.any(jnp.isnan(x)) & ~jnp.any(jnp.isnan(y))
    return jnp.where(ok, jnp.sum(dx * dy) / jnp.where(ok, den, 1.0), jnp.nan)


def _average_rank(x: jax.Array) -> jax.Array:
    """1-based ranks, ties sharing the mean of the ranks they span."""
    s = jnp.sort(x)
    lo = jnp.searchsorted(s, x, side="left")     # values strictly below
    hi = jnp.searchsorted(s, x, side="right")    # values at or below
    # A tie block occupies 0-based positions lo..hi-1, 1-based lo+1..hi.
    return (lo + hi + 1).astype(jnp.float64) / 2.0
