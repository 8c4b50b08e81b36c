"""Sensitivity to probe and trajectory counts: exact probe thinning and trajectory thinning (docs/rules.md).

* `probe_thinning`: for each `m`, the exact expected OR, AD and earliest-
  maximizer retention when every position keeps `m` of its `P` probes
  (hypergeometric, independent across positions; `_thinning_exact`), per
  trajectory, then averaged with the usual equal weights (docs/rules.md: mean over
  a question's trajectories, over a group's questions, over groups and
  models). Means of expectations are expectations of the means, so these
  are the expected reported metrics. No Monte Carlo.
* `trajectory_thinning`: for each `r`, `draws` subsamples of `r` trajectories
  per (model, question) without replacement (`_thinning_trajectories`), the
  macro OR and AD of each, their 2.5-97.5 percentile range and mean.
* `thinning`: both, as the `otbench.thinning/1` document.

Values are fractions (OR, AD, retention), as in `metrics`.
"""

import dataclasses
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from otbench.analysis.measurement import MeasurementSet, Tidy, concat_columns, melt_columns
from otbench.analysis.overthinking import (
    LayoutNames,
    aggregate,
    build_layout,
    segment_mean,
    trajectory_metrics,
)

from ._bootstrap import PERCENTILES, SEED, chain, provenance
from ._replicates import percentile
from ._draws import fixed_point, resampling
from ._limits import check_draws_budget
from ._probe_thinning import expected
from ._trajectory_thinning import cell_sums
from otbench.errors import ArgumentError

SCHEMA = "otbench.thinning/1"
PROBES = (4, 8, 12, 16)
TRAJECTORIES = (2, 4, 8, 16)
DRAWS = 2000
THINNING_METRICS = ("or", "ad", "retention")


@dataclasses.dataclass(frozen=True)
class ProbeThinning(Tidy):
    """Expected metrics under probe thinning (axis 0: the requested `m` values).

    `to_arrow()`: one row per (m, metric, scope, model, group): `probes`
    (`m`), `metric` (`or` | `ad` | `retention`, fractions), `scope` (`cell` |
    `model` | `group` | `macro`), `model`, `group` (null where the scope has
    none), `value`.
    """

    probes: tuple[int, ...]
    names: LayoutNames
    trajectory: np.ndarray   # float64[m, metric, traj] per-trajectory expectations
    cell: np.ndarray         # float64[m, metric, cell]
    model: np.ndarray        # float64[m, metric, model]
    group: np.ndarray        # float64[m, metric, group]
    macro: np.ndarray        # float64[m, metric]; metric axis: THINNING_METRICS

    def _tidy_columns(self) -> dict[str, Any]:
        lead = [("probes", list(self.probes)), ("metric", list(THINNING_METRICS))]
        return _scoped(self.names, lead, self.cell, self.model, self.group, self.macro)


@dataclasses.dataclass(frozen=True)
class TrajectoryThinning(Tidy):
    """Macro OR / AD of every draw (axis 0: the requested `r` values).

    `to_arrow()`: one row per (r, draw, metric, scope, cell): `trajectories`
    (`r`), `draw`, `metric` (`or` | `ad`, fractions), `scope` (`cell` |
    `macro`), `model`, `group` (null for macro), `value`.
    """

    trajectories: tuple[int, ...]
    draws: int
    seed: int
    names: LayoutNames
    cell: np.ndarray     # float64[r, draw, metric(or, ad), cell]
    macro: np.ndarray    # float64[r, draw, metric(or, ad)]
    full: np.ndarray     # float64[metric(or, ad)] the full-pool macro values

    def _tidy_columns(self) -> dict[str, Any]:
        lead = [("trajectories", list(self.trajectories)), ("draw", list(range(self.draws))),
                ("metric", ["or", "ad"])]
        return _scoped(self.names, lead, self.cell, None, None, self.macro)


def _scoped(names: LayoutNames, lead, cell, model, group, macro) -> dict[str, Any]:
    """Long columns of per-cell / model / group / macro arrays sharing the leading axes `lead`."""
    parts = []
    for scope, values, axis in (("cell", cell, (("model", "group"), list(names.cells))),
                                ("model", model, ("model", list(names.models))),
                                ("group", group, ("group", list(names.groups))),
                                ("macro", None if macro is None else macro[..., None],
                                 ("scope", ["macro"]))):
        if values is None:
            continue
        part = melt_columns(values, [*lead, axis])
        part["scope"] = np.full(part["value"].size, scope, dtype=object)
        parts.append(part)
    cols = concat_columns(parts)
    order = [name for name, _ in lead] + ["scope", "model", "group", "value"]
    return {k: cols[k] for k in order}


def _counts_iv(name: str, values: Any, hi: int | None = None, hi_rule: str = "") -> tuple[int, ...]:
    if isinstance(values, (int, np.integer)) and not isinstance(values, bool):
        values = (values,)
    try:
        out = tuple(values)
    except TypeError:
        out = None
    if not out or any(isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1
                      for v in out):
        raise ArgumentError(f"`{name}` must be a non-empty sequence of positive integers, got {values!r}")
    if len(set(out)) != len(out):
        raise ArgumentError(f"`{name}` must not repeat a value, got {list(out)}")
    if hi is not None and max(out) > hi:
        raise ArgumentError(f"`{name}` must not exceed {hi_rule}, got {max(out)}")
    return tuple(int(v) for v in out)


def max_trajectories(ms: MeasurementSet) -> int:
    """The largest number of trajectories of one (model, question) of `ms`."""
    model = np.asarray(ms.cell_model)[ms.cell].astype(np.int64)
    key = model * (int(ms.question.max()) + 1) + ms.question.astype(np.int64)
    return int(np.unique(key, return_counts=True)[1].max())


def default_levels(ms: MeasurementSet, standard: Sequence[int], top: int) -> tuple[int, ...]:
    """The standard levels below `top` (the set's P or R), then `top`: defaults that fit the set."""
    return tuple(v for v in standard if v < top) + (int(top),)


def _set_iv(ms: Any) -> MeasurementSet:
    if not isinstance(ms, MeasurementSet):
        raise ArgumentError(f"`ms` must be a MeasurementSet, got {type(ms).__name__}")
    if ms.num_trajectories == 0:
        raise ArgumentError("`ms` has no trajectories")
    return ms


def probe_thinning(ms: MeasurementSet, probes: Sequence[int] | None = None) -> ProbeThinning:
    """Exact expected OR, AD and retention when thinning to `m` probes (docs/rules.md).

    Args:
      ms: the measurement set.
      probes: the `m` values; each at most the smallest `P` of the set
        (thinning cannot add probes).

    Returns:
      `ProbeThinning`; `m = P` reproduces the unthinned metrics exactly,
      with retention 1.
    """
    ms = _set_iv(ms)
    pmin = int(ms.probes.min())
    if probes is None:
        probes = default_levels(ms, PROBES, pmin)
    probes = _counts_iv("probes", probes, pmin, f"the smallest probe count P of the set ({pmin})")
    layout, names = build_layout(ms)
    per = []
    for m in probes:
        e = expected(ms.L, ms.C, ms.n, ms.probes, m)
        per.append(np.stack([e.ratio, e.degradation, e.retention]))
    per = np.stack(per)                                          # [m, metric, traj]
    agg = _aggregate_rows(jnp.asarray(per), layout)
    return ProbeThinning(probes=probes, names=names, trajectory=per,
                         cell=np.asarray(agg[0]), model=np.asarray(agg[1]),
                         group=np.asarray(agg[2]), macro=np.asarray(agg[3]))


@jax.jit
def _aggregate_rows(values, layout):
    """Unit-weight aggregation of `[..., traj]` rows (the point-estimate chain of `metrics`)."""
    flat = values.reshape((-1, values.shape[-1]))
    w = jnp.ones(values.shape[-1], dtype=jnp.float64)

    def one(v):
        mean, total = segment_mean(v, w, layout.seg, layout.num_segments)
        a = aggregate(mean, jnp.where(total > 0, 1.0, 0.0), layout)
        return a.cell, a.model, a.group, a.macro

    lead = values.shape[:-1]
    return tuple(x.reshape(lead + x.shape[1:]) for x in jax.vmap(one)(flat))


def trajectory_thinning(ms: MeasurementSet, trajectories: Sequence[int] | None = None, *,
                        draws: int = DRAWS, seed: int = SEED) -> TrajectoryThinning:
    """Macro OR / AD from `r` trajectories per (model, question), `draws` times (docs/rules.md).

    Args:
      ms: the measurement set.
      trajectories: the `r` values; a (model, question) with `R <= r`
        trajectories keeps all of them.
      draws: subsamples per `r` (default 2,000).
      seed: stream seed, `0 <= seed < 2**64` (default 20260721).
    """
    ms = _set_iv(ms)
    rmax = max_trajectories(ms)
    if trajectories is None:
        trajectories = default_levels(ms, TRAJECTORIES, rmax)
    trajectories = _counts_iv("trajectories", trajectories, rmax,
                              f"the largest trajectory count R of a (model, question) ({rmax})")
    if isinstance(draws, bool) or not isinstance(draws, (int, np.integer)) or draws < 1:
        raise ArgumentError(f"`draws` must be a positive integer, got {draws!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= seed < 2 ** 64:
        raise ArgumentError(f"`seed` must be an integer >= 0 and < 2**64, got {seed!r}")
    check_draws_budget(ms.num_cells, len(trajectories), ms.num_trajectories, int(draws))
    layout, names = build_layout(ms)
    res = resampling(ms, layout, names)
    tm = trajectory_metrics(jnp.asarray(ms.L), jnp.asarray(ms.C), jnp.asarray(ms.n),
                            jnp.asarray(ms.probes))
    values = np.stack([np.asarray(tm.ratio), np.asarray(tm.degradation)])
    seg = np.asarray(layout.seg)
    nseg_cell = np.bincount(res.seg_cell, minlength=res.num_cells).astype(np.float64)
    cells, macros = [], []
    for a, r in enumerate(trajectories):
        table, F = fixed_point(values, res, seg, divisor=np.minimum(res.seg_size, r))
        if np.all(res.seg_size <= r):
            # Every draw keeps every row: the draws are identical, whatever the random numbers.
            sums = np.repeat(cell_sums(res, table, r, a * int(draws), 1, int(seed)), draws, axis=0)
        else:
            # [draw, cell, metric]
            sums = cell_sums(res, table, r, a * int(draws), int(draws), int(seed))
        cell = (sums.astype(np.float64) * np.exp2(-F.astype(np.float64))
                / nseg_cell[None, :, None]).transpose(0, 2, 1)                  # [draw, metric, cell]
        _, _, macro = chain(cell, res.cell_model, res.cell_group, layout.num_models,
                            layout.num_groups)
        cells.append(cell)
        macros.append(macro)
    full = _aggregate_rows(jnp.asarray(values), layout)[3]
    return TrajectoryThinning(trajectories=trajectories, draws=int(draws), seed=int(seed),
                              names=names, cell=np.stack(cells), macro=np.stack(macros),
                              full=np.asarray(full))


def _num(x) -> float | None:
    x = float(x)
    return x if np.isfinite(x) else None


def thinning(ms: MeasurementSet, *, probes: Sequence[int] | None = None,
             trajectories: Sequence[int] | None = None, draws: int = DRAWS, seed: int = SEED,
             percentiles: Sequence[float] = PERCENTILES) -> dict[str, Any]:
    """Probe and trajectory thinning as the `otbench.thinning/1` document.

    Either part is skipped when its sequence is empty; None (the default)
    means the levels that fit the set: those of 4, 8, 12, 16 below its
    smallest P, then P (probes), and those of 2, 4, 8, 16 below its largest
    R, then R (trajectories). Returns::

        {"schema": "otbench.thinning/1", "synthetic": bool,
         "probes": {"4": {"or", "ad", "retention",            # macro expectations
                          "cells": [{"model", "group", "or", "ad", "retention"}],
                          "by_model": {...}, "by_group": {...}}, ...},
         "trajectories": {"2": {"or": [lo, hi], "ad": [lo, hi], "mean_or", "mean_ad"}, ...},
         "trajectory_draws": D, "seed": S, "percentiles": [2.5, 97.5],
         "full": {"or", "ad"}}                                 # the full-pool macro values
    """
    doc: dict[str, Any] = {"schema": SCHEMA, "synthetic": bool(ms.synthetic) if isinstance(
        ms, MeasurementSet) else False, "probes": {}, "trajectories": {},
        "provenance": provenance()}
    q = tuple(float(p) for p in percentiles)
    if len(q) != 2 or not (0 <= q[0] < q[1] <= 100):
        raise ArgumentError(f"`percentiles` must be two increasing numbers in [0, 100], got {percentiles!r}")
    if probes is None or len(tuple(probes)):
        pt = probe_thinning(ms, probes)
        for i, m in enumerate(pt.probes):
            def keyed(col):
                return {k: _num(v) for k, v in zip(THINNING_METRICS, col)}

            entry = keyed(pt.macro[i])
            entry["cells"] = [dict(model=mo, group=g, **keyed(pt.cell[i, :, c]))
                              for c, (mo, g) in enumerate(pt.names.cells)]
            entry["by_model"] = {mo: keyed(pt.model[i, :, j])
                                 for j, mo in enumerate(pt.names.models)}
            entry["by_group"] = {g: keyed(pt.group[i, :, j]) for j, g in enumerate(pt.names.groups)}
            doc["probes"][str(m)] = entry
    if trajectories is None or len(tuple(trajectories)):
        tt = trajectory_thinning(ms, trajectories, draws=draws, seed=seed)
        for i, r in enumerate(tt.trajectories):
            lohi = percentile(tt.macro[i], q)                       # [2, metric]
            doc["trajectories"][str(r)] = {
                "or": [_num(lohi[0, 0]), _num(lohi[1, 0])], "ad": [_num(lohi[0, 1]), _num(lohi[1, 1])],
                "mean_or": _num(tt.macro[i, :, 0].mean()), "mean_ad": _num(tt.macro[i, :, 1].mean())}
        doc.update(trajectory_draws=tt.draws, seed=tt.seed, percentiles=list(q),
                   full={"or": _num(tt.full[0]), "ad": _num(tt.full[1])})
    return doc


def format_thinning(doc: dict[str, Any]) -> str:
    """Human-readable tables of a `thinning` document (OR and retention in %, AD in pp)."""
    lines = ["SYNTHETIC DATA (simulated, not model outputs)"] if doc.get("synthetic") else []

    def pct(x, digits=2):
        return "n/a" if x is None else f"{100 * x:.{digits}f}"

    if doc["probes"]:
        lines += ["Probe thinning (exact hypergeometric expectation, macro average)",
                  f"{'probes':>6}  {'E[OR] %':>8}  {'E[AD] pp':>8}  {'retention %':>11}"]
        for m, e in doc["probes"].items():
            lines.append(f"{m:>6}  {pct(e['or']):>8}  {pct(e['ad']):>8}  {pct(e['retention']):>11}")
        lines.append("")
    if doc["trajectories"]:
        lo, hi = doc["percentiles"]
        lines += [f"Trajectory thinning ({doc['trajectory_draws']:,} draws, seed {doc['seed']}, "
                  f"{lo:g}-{hi:g} percentile range of the macro average)",
                  f"{'r':>4}  {'OR % range':>18}  {'mean OR %':>9}  {'AD pp range':>16}  "
                  f"{'mean AD pp':>10}"]
        for r, e in doc["trajectories"].items():
            orr = f"[{pct(e['or'][0])}, {pct(e['or'][1])}]"
            adr = f"[{pct(e['ad'][0])}, {pct(e['ad'][1])}]"
            lines.append(f"{r:>4}  {orr:>18}  {pct(e['mean_or']):>9}  {adr:>16}  "
                         f"{pct(e['mean_ad']):>10}")
        lines.append(f"full pool: OR {pct(doc['full']['or'])} %, AD {pct(doc['full']['ad'])} pp")
    return "\n".join(lines) + "\n"
