"""Overthinking metrics: earliest maximizer, OR, AD and their summaries (docs/rules.md).

Per trajectory (`trajectory_metrics`): the earliest maximizer `k*` of the
probe accuracy, the Overthinking Ratio `OR = (L(n) - L(k*)) / L(n)` (0 when
`L(n) = 0`), the Accuracy Degradation `AD = P(k*) - P(n)`, the STP endpoint
accuracy `P(n)` and the zero-step accuracy `P(0)`. Per cell, model, group
and macro (`summarize`, equal weights, see `_aggregate`): those means plus
the original full-thinking accuracy (mean `y`), the mean thinking tokens
`L(n)` and the within-question variation (`pairwise_or`, `pairwise_ad`).
`local_change_counts` tallies `ΔP(k)` by token progress. All values are
fractions (never percent) and token counts; `format_metrics` converts to
% and pp for display only.
"""

from collections.abc import Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from otbench.analysis.measurement import MeasurementSet, Tidy

from ._aggregate import (
    Layout,
    aggregate,
    build_layout,
    segment_mean,
    segment_pair_mad,
    spearman,
)
from ._edge import ZERO_ACCURACY_MARK, ZERO_ACCURACY_NOTE, spearman_note, zero_accuracy_places
from otbench.errors import ArgumentError

SCHEMA = "otbench.metrics/1"
METRICS = ("or", "ad", "full_acc", "tokens", "endpoint_acc", "zero_step_acc",
           "pairwise_or", "pairwise_ad")
"""Metric keys, in the order of the `metric` axis of `Summary`."""

DEFAULT_BIN_EDGES = tuple(range(0, 32768 + 1, 2048))
"""Local-change bins: [0, 2048), ..., [30720, 32768) and the open [32768, inf)."""


class TrajectoryMetrics(NamedTuple):
    """Per-trajectory quantities (docs/rules.md)."""

    k_star: jax.Array        # int32[traj] earliest maximizer of C(k) over k = 0..n
    tokens: jax.Array        # int32[traj] L(n), full thinking length
    tokens_star: jax.Array   # int32[traj] L(k*)
    ratio: jax.Array         # float64[traj] OR, fraction of L(n) after k*
    degradation: jax.Array   # float64[traj] AD = P(k*) - P(n)
    endpoint: jax.Array      # float64[traj] P(n)
    zero_step: jax.Array     # float64[traj] P(0)


def _one_trajectory(L, C, n, probes):
    """Metrics of one padded row: L, C int32[pos], n, probes int32[]."""
    k = jnp.arange(L.shape[0], dtype=jnp.int32)
    # P is constant along a row, so the maximizer of C(k)/P is that of C(k),
    # found on integers. argmax returns the first maximum: the earliest-max
    # tie rule, and k* = 0 for a flat curve. Positions past n are masked
    # even though the padding repeats C(n) and could never win a tie.
    k_star = jnp.argmax(jnp.where(k <= n, C, -1)).astype(jnp.int32)
    l_n, l_star = L[n], L[k_star]
    c_n, c_star = C[n], C[k_star]
    p = probes.astype(jnp.float64)
    has = l_n > 0
    ratio = jnp.where(has, (l_n - l_star).astype(jnp.float64)
                      / jnp.where(has, l_n, 1).astype(jnp.float64), 0.0)
    return TrajectoryMetrics(
        k_star=k_star, tokens=l_n.astype(jnp.int32), tokens_star=l_star.astype(jnp.int32),
        ratio=ratio, degradation=(c_star - c_n).astype(jnp.float64) / p,
        endpoint=c_n.astype(jnp.float64) / p, zero_step=C[0].astype(jnp.float64) / p)


@jax.jit
def trajectory_metrics(L: jax.Array, C: jax.Array, n: jax.Array,
                       probes: jax.Array) -> TrajectoryMetrics:
    """Per-trajectory k*, OR, AD, P(n), P(0) (vmapped over rows).

    Args:
      L: int32[traj, pos] retained tokens, padded by repeating L(n) (docs/rules.md).
      C: int32[traj, pos] correct probes, same padding.
      n: int32[traj] steps; positions 0..n are valid.
      probes: int32[traj] probes per position P.
    """
    return jax.vmap(_one_trajectory)(L.astype(jnp.int32), C.astype(jnp.int32),
                                     n.astype(jnp.int32), probes.astype(jnp.int32))


class Summary(NamedTuple):
    """Every metric of `METRICS` at every aggregation level.

    The metric axis comes first and follows `METRICS`; cells, models and
    groups are indexed as in the `Layout`. NaN marks a level without data
    (see `_aggregate`).
    """

    cell: jax.Array       # float64[metric, cell]
    model: jax.Array      # float64[metric, model]
    group: jax.Array      # float64[metric, group]
    macro: jax.Array      # float64[metric]
    spearman_or_ad: jax.Array  # float64[] across the cell means of OR and AD


@jax.jit
def summarize(tm: TrajectoryMetrics, y: jax.Array, weight: jax.Array,
              q_weight: jax.Array, layout: Layout) -> Summary:
    """Aggregate trajectory metrics with multiplicity weights (docs/rules.md).

    The point estimate uses unit weights; the bootstrap vmaps this function
    over `(weight, q_weight)` replicates (probe curves, hence `tm`, stay
    fixed). Questions whose total weight is 0 are dropped from every metric;
    questions with fewer than two draws are dropped from `pairwise_or` and
    `pairwise_ad` only. A question drawn several times (`q_weight > 1`)
    pools its draws for the pairwise metrics; for pairs within each
    occurrence only, give occurrences their own segments (`_aggregate`).

    Args:
      tm: per-trajectory metrics, `[traj]` each.
      y: int8[traj] original answer correctness.
      weight: float64[traj] draws of each row within its segment.
      q_weight: float64[seg] occurrences of each (model, question) segment.
      layout: aggregation layout (`_aggregate.build_layout`).
    """
    cols = jnp.stack([tm.ratio, tm.degradation, y.astype(jnp.float64),
                      tm.tokens.astype(jnp.float64), tm.endpoint, tm.zero_step], axis=0)
    S = layout.num_segments
    means, total = jax.vmap(segment_mean, in_axes=(0, None, None, None),
                            out_axes=(0, None))(cols, weight, layout.seg, S)
    pair_or, _ = segment_pair_mad(tm.ratio, weight, layout.seg, S)
    pair_ad, _ = segment_pair_mad(tm.degradation, weight, layout.seg, S)
    q_value = jnp.concatenate([means, jnp.stack([pair_or, pair_ad], axis=0)], axis=0)
    u_mean = jnp.where(total > 0, q_weight, 0.0)
    u_pair = jnp.where(total > 1, q_weight, 0.0)
    q_w = jnp.stack([u_mean] * 6 + [u_pair] * 2, axis=0)
    agg = jax.vmap(aggregate, in_axes=(0, 0, None))(q_value, q_w, layout)
    return Summary(cell=agg.cell, model=agg.model, group=agg.group, macro=agg.macro,
                   spearman_or_ad=spearman(agg.cell[0], agg.cell[1]))


_COMPARE_BINS = 64
"""Up to this many bins, `local_change_counts` bins by comparing with every edge."""


class LocalChangeCounts(NamedTuple):
    """Counts of `ΔP(k) = P(k) - P(k-1)`, k = 1..n, pooled over trajectories, per bin."""

    positive: jax.Array   # int64[bin]
    negative: jax.Array   # int64[bin]
    flat: jax.Array       # int64[bin]


@jax.jit
def local_change_counts(L: jax.Array, C: jax.Array, n: jax.Array,
                        edges: jax.Array) -> LocalChangeCounts:
    """Tally the signs of the local changes by absolute token progress `L(k)`.

    A change at position k (k = 1..n) is binned by `L(k)`, the tokens
    retained after the step: bin `i` holds `edges[i] <= L(k) < edges[i+1]`
    and the last bin `L(k) >= edges[-1]` (open). `edges[0]` must be 0 so
    every change has a bin. Every measured change counts once (pooled over
    trajectories, questions and cells: a histogram of changes, as the
    paper's Figure 2). The sign of ΔP equals that of ΔC, P being constant
    within a trajectory, so the test is on integers.

    Args:
      L, C: int32[traj, pos] padded rows (docs/rules.md); n: int32[traj].
      edges: int64[bin] strictly increasing, `edges[0] == 0`.
    """
    C = C.astype(jnp.int32)
    d = C[:, 1:] - C[:, :-1]                                   # change at k = 1..K-1
    k = jnp.arange(1, L.shape[1], dtype=jnp.int32)
    valid = k[None, :] <= n.astype(jnp.int32)[:, None]
    Lk = L[:, 1:].astype(jnp.int64)
    e = edges.astype(jnp.int64)
    nb = edges.shape[0]
    if nb <= _COMPARE_BINS:
        # Bin = number of edges[1:] at or below L(k) (edges[0] = 0 <= L): a
        # fused compare-and-count, measured ~3x faster on CPU than a binary
        # search for the default 17 bins; its cost grows with the bin count.
        b = jnp.sum(Lk[:, :, None] >= e[None, None, 1:], axis=2, dtype=jnp.int32)
    else:
        b = (jnp.searchsorted(e, Lk, side="right") - 1).astype(jnp.int32)
    b = b.reshape(-1)

    def tally(mask):
        return jax.ops.segment_sum((valid & mask).astype(jnp.int64).reshape(-1), b, nb)

    return LocalChangeCounts(positive=tally(d > 0), negative=tally(d < 0), flat=tally(d == 0))


def _metrics_iv(ms: Any, bin_edges: Any) -> np.ndarray:
    """Validate the arguments of `metrics`; return the bin edges as int64."""
    if not isinstance(ms, MeasurementSet):
        # a caller's bug (a Python caller passed no set): the CLI and the readers always pass one
        raise TypeError(f"`ms` must be a MeasurementSet, got {type(ms).__name__}.")
    if ms.num_trajectories == 0:
        raise ArgumentError("`ms` has no trajectories; metrics need at least one.")
    edges = np.asarray(DEFAULT_BIN_EDGES if bin_edges is None else bin_edges)
    if edges.ndim != 1 or edges.size == 0 or edges.dtype.kind not in "iu":
        raise ArgumentError("`bin_edges` must be a non-empty 1-D sequence of integers "
                            f"(token counts), got {bin_edges!r}.")
    if edges[0] != 0:
        raise ArgumentError(f"`bin_edges` must start at 0, got {edges[0]}.")
    if np.any(np.diff(edges) <= 0):
        raise ArgumentError("`bin_edges` must be strictly increasing.")
    return edges.astype(np.int64)


def _num(x) -> float | None:
    """A JSON number, or None for NaN (JSON has no NaN)."""
    x = float(x)
    return x if np.isfinite(x) else None


def _ratio(a: np.ndarray, b: np.ndarray) -> list[float | None]:
    return [None if d == 0 else float(v) / float(d) for v, d in zip(a.tolist(), b.tolist())]


class MetricsResult(dict, Tidy):
    """The `metrics` document: a JSON-able dict (``otbench.metrics/1``) with dataframe readers.

    It is a plain `dict` for every reader of the document (``json.dumps``,
    ``doc["macro"]["or"]``) and a `Tidy` result: `to_arrow()`, `to_pandas()`,
    `to_polars()` give one row per (scope, cell, metric) with columns
    `scope` (`cell` | `model` | `group` | `macro`), `model`, `group` (null
    where the scope has none), `metric` (a `METRICS` name) and `value`
    (fractions; `tokens` in tokens; null: undefined).
    """

    def to_json(self) -> dict[str, Any]:
        return dict(self)

    def _tidy_columns(self) -> dict[str, Any]:
        rows = [("cell", c["model"], c["group"], c) for c in self["cells"]]
        rows += [("model", m, None, v) for m, v in self["by_model"].items()]
        rows += [("group", None, g, v) for g, v in self["by_group"].items()]
        rows.append(("macro", None, None, self["macro"]))
        long = [(sc, m, g, k, v.get(k)) for sc, m, g, v in rows for k in METRICS]
        names = ("scope", "model", "group", "metric")
        out: dict[str, Any] = {n: np.asarray([r[i] for r in long], dtype=object)
                               for i, n in enumerate(names)}
        out["value"] = np.asarray([np.nan if r[4] is None else float(r[4]) for r in long])
        return out


def metrics(ms: MeasurementSet, *, bin_edges: Sequence[int] | None = None) -> "MetricsResult":
    """All overthinking metrics of a measurement set, as a JSON-able dict (docs/rules.md).

    Values are fractions (OR, AD, accuracies, local-change fractions) or
    tokens; `null` (None) marks a value without data:
    * a cell whose questions all have one trajectory has `pairwise_or` and
      `pairwise_ad` null (a question needs R >= 2 for a pair), and so do the
      model / group / macro averages over it (equal weights cannot be kept
      with a missing cell);
    * `spearman_or_ad` is null with fewer than 2 cells or when the OR or AD
      cell means are all equal;
    * a local-change bin without changes has null fractions, and
      `neg_pos_ratio` is null when the bin has no positive change (the ratio
      is undefined or infinite; the counts show which).

    Only cells with trajectories appear; models and groups are averaged over
    their present cells (see `_aggregate`).

    Args:
      ms: the measurement set.
      bin_edges: local-change bin edges in tokens (default
        `DEFAULT_BIN_EDGES`); integers, strictly increasing, starting at 0;
        the last bin is open.

    Returns:
      A `MetricsResult`: a dict (JSON-able, `null` for missing values) with
      `to_arrow` / `to_pandas` / `to_polars`::

        {"schema": "otbench.metrics/1", "synthetic": bool,
         "cells": [{"model", "group", "n_questions", "n_trajectories",
                    <metric>: float | None, ...}, ...],   # sorted (model, group)
         "by_model": {model: {<metric>: ...}}, "by_group": {group: {...}},
         "macro": {<metric>: ...}, "spearman_or_ad": float | None,
         "local_changes": {"bin_edges": [int], "positive": [...],
                           "negative": [...], "flat": [...],
                           "neg_pos_ratio": [...]}}

      with <metric> in `METRICS`: `or`, `ad` (fractions), `full_acc` (mean
      original correctness `y`), `tokens` (mean `L(n)`), `endpoint_acc`
      (`P(n)`), `zero_step_acc` (`P(0)`), `pairwise_or`, `pairwise_ad`
      (mean absolute difference over a question's trajectory pairs).
      `n_questions` counts the cell's questions, `n_trajectories` its rows.
      Local-change lists have one entry per bin; bin `i` is
      `[bin_edges[i], bin_edges[i+1])`, the last `[bin_edges[-1], inf)`.
    """
    edges = _metrics_iv(ms, bin_edges)
    layout, names = build_layout(ms)
    tm = trajectory_metrics(jnp.asarray(ms.L), jnp.asarray(ms.C), jnp.asarray(ms.n),
                            jnp.asarray(ms.probes))
    s = summarize(tm, jnp.asarray(ms.y), jnp.ones(ms.num_trajectories, dtype=jnp.float64),
                  jnp.ones(layout.num_segments, dtype=jnp.float64), layout)
    lc = local_change_counts(jnp.asarray(ms.L), jnp.asarray(ms.C), jnp.asarray(ms.n),
                             jnp.asarray(edges))
    cell, model, group, macro = (np.asarray(a) for a in (s.cell, s.model, s.group, s.macro))

    def keyed(col: np.ndarray) -> dict[str, float | None]:
        return {k: _num(v) for k, v in zip(METRICS, col)}

    cells = []
    for c, (m, g) in enumerate(names.cells):
        entry: dict[str, Any] = {"model": m, "group": g,
                                 "n_questions": int(names.cell_questions[c]),
                                 "n_trajectories": int(names.cell_trajectories[c])}
        entry.update(keyed(cell[:, c]))
        cells.append(entry)
    pos, neg, flat = (np.asarray(a, dtype=np.int64) for a in lc)
    total = pos + neg + flat
    return MetricsResult({
        "schema": SCHEMA,
        "synthetic": bool(ms.synthetic),
        "cells": cells,
        "by_model": {m: keyed(model[:, i]) for i, m in enumerate(names.models)},
        "by_group": {g: keyed(group[:, i]) for i, g in enumerate(names.groups)},
        "macro": keyed(macro),
        "spearman_or_ad": _num(s.spearman_or_ad),
        "local_changes": {
            "bin_edges": [int(e) for e in edges],
            "positive": _ratio(pos, total),
            "negative": _ratio(neg, total),
            "flat": _ratio(flat, total),
            "neg_pos_ratio": _ratio(neg, pos),
        },
    })


def _fmt(v: float | None, scale: float, digits: int) -> str:
    return "n/a" if v is None else f"{v * scale:.{digits}f}"


def _matrix(title: str, result: dict[str, Any], key: str, scale: float, digits: int,
            flagged: set = frozenset()) -> list[str]:
    """One Table-1-style matrix: rows models + Avg., columns groups + Avg.

    An entry whose (scope, model, group) is in `flagged` carries `ZERO_ACCURACY_MARK`.
    """
    groups = list(result["by_group"])
    models = list(result["by_model"])
    by_cell = {(c["model"], c["group"]): c[key] for c in result["cells"]}

    def show(v, place):
        return _fmt(v, scale, digits) + (ZERO_ACCURACY_MARK if place in flagged else "")

    rows = [["model"] + groups + ["Avg."]]
    for m in models:
        rows.append([m] + ["-" if (m, g) not in by_cell else show(by_cell[(m, g)], ("cell", m, g))
                           for g in groups] + [show(result["by_model"][m][key], ("model", m, None))])
    rows.append(["Avg."] + [show(result["by_group"][g][key], ("group", None, g)) for g in groups]
                + [show(result["macro"][key], ("macro", None, None))])
    widths = [max(len(r[j]) for r in rows) for j in range(len(rows[0]))]
    out = [title]
    for r in rows:
        out.append("  ".join([r[0].ljust(widths[0])]
                             + [x.rjust(w) for x, w in zip(r[1:], widths[1:])]))
    return out


SUMMARY_DISPLAY = (
    ("Overthinking Ratio OR (%)", "or", 100.0, 1),
    ("Accuracy Degradation AD (pp)", "ad", 100.0, 2),
    ("Original full-thinking accuracy (%)", "full_acc", 100.0, 2),
    ("Mean full thinking tokens L(n)", "tokens", 1.0, 1),
    ("STP endpoint accuracy P(n) (%)", "endpoint_acc", 100.0, 2),
    ("Zero-step accuracy P(0) (%)", "zero_step_acc", 100.0, 2),
    ("Within-question mean pairwise |dOR| (pp)", "pairwise_or", 100.0, 2),
    ("Within-question mean pairwise |dAD| (pp)", "pairwise_ad", 100.0, 2),
)
"""(title, summary key, display scale, digits) of every cell summary, in the order the
text tables show them (`format_metrics`, `otbench.analysis.resampling.format_bootstrap`)."""


def format_metrics(result: dict[str, Any]) -> str:
    """Human-readable tables of a `metrics` result (OR in %, AD in pp, accuracy in %).

    Rows are models plus "Avg." (equal weight over models), columns groups
    plus "Avg." (equal weight over groups); "-" marks a cell without
    trajectories and "n/a" a value without data.
    """
    title = "OTBench overthinking metrics"
    if result.get("synthetic"):
        title += "  [SYNTHETIC DATA - not model measurements]"
    lines = [title, ""]
    zero = zero_accuracy_places(result["cells"])
    for heading, key, scale, digits in SUMMARY_DISPLAY:
        lines += _matrix(heading, result, key, scale, digits, zero if key == "or" else set())
        lines += [ZERO_ACCURACY_NOTE] if key == "or" and zero else []
        lines.append("")
    rho = result["spearman_or_ad"]
    lines.append(f"Spearman(OR, AD) across cells: {'n/a' if rho is None else f'{rho:.3f}'}"
                 + spearman_note(len(result["cells"])))
    lc = result["local_changes"]
    lines += ["", "Local changes dP(k) by token progress L(k) (% of changes in the bin)",
              f"{'L(k) bin':>16}  {'pos':>6}  {'neg':>6}  {'flat':>6}  {'neg/pos':>7}"]
    edges = lc["bin_edges"]
    # Bins past the last one holding any change are left out of the text (the
    # JSON keeps them all): a short-reasoning set would print pages of n/a.
    filled = [i for i, v in enumerate(lc["flat"]) if v is not None]
    shown = range(filled[-1] + 1 if filled else 0)
    if len(shown) < len(edges):
        lines.append(f"{'':>16}  (bins from L(k) >= {edges[len(shown)]} hold no change)")
    for i in shown:
        lo = edges[i]
        span = f"[{lo}, {edges[i + 1]})" if i + 1 < len(edges) else f">= {lo}"
        lines.append(f"{span:>16}  {_fmt(lc['positive'][i], 100.0, 1):>6}  "
                     f"{_fmt(lc['negative'][i], 100.0, 1):>6}  {_fmt(lc['flat'][i], 100.0, 1):>6}  "
                     f"{_fmt(lc['neg_pos_ratio'][i], 1.0, 2):>7}")
    return "\n".join(lines) + "\n"
