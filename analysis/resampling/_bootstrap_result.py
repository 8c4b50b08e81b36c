"""The bootstrap's result types, their JSON and text forms (docs/rules.md).

`BootstrapResult` holds every replicate value of every summary (and, with
frontiers, `FrontierBootstrap`); `to_json()` is the `otbench.bootstrap/1`
document, `format_bootstrap` the interval matrices of the paper's Tables
4-6. Percentiles follow `numpy.percentile`'s linear interpolation, with NaN
as "undefined in this replicate" and +inf as "never".
"""

import dataclasses
from fractions import Fraction
from typing import Any

import numpy as np
from otbench.analysis.frontier import MACRO_WEIGHTING
from otbench.analysis.frontier import summarize as frontier_summary
from otbench.analysis.measurement import Tidy, concat_columns, melt_columns
from otbench.analysis.overthinking import SUMMARY_DISPLAY, LayoutNames

from ._replicates import BOOT_METRICS, percentile

SCHEMA = "otbench.bootstrap/1"


@dataclasses.dataclass(frozen=True)
class FrontierBootstrap(Tidy):
    """Replicate distributions of the frontiers (axis 0: replicates; strategies in `strategies` order).

    `to_arrow()`: one row per (replicate, strategy, budget): `replicate`,
    `strategy`, `beta` (fraction of the replicate's full-thinking tokens),
    `macro` (F_C(β), fraction) -- percentiles of any statistic are then a
    group-by away.
    """

    grid: tuple[Fraction, ...]
    strategies: tuple[str, ...]
    reward: np.ndarray       # int64[rep, strategy, cell, grid] best total reward at β * T_rep
    reward_one: np.ndarray   # int64[rep, strategy, cell] at β = 1
    tokens: np.ndarray       # int64[rep, cell] the replicate's full-thinking tokens T
    probes: np.ndarray       # int64[rep, cell] the replicate's total probes
    endpoint: np.ndarray     # int64[rep, cell] the replicate's sum of C(n)
    macro: np.ndarray        # float64[rep, strategy, grid] F_C(β)
    a_full: np.ndarray       # float64[rep] macro STP endpoint accuracy
    ceiling: np.ndarray      # float64[rep, strategy] F_C(1)
    beta_match: np.ndarray   # float64[rep, strategy]; NaN: never reached (or undefined)
    beta_sat: np.ndarray     # float64[rep, strategy]; NaN: never reached (or undefined)

    @property
    def acc(self) -> np.ndarray:
        """float64[rep, strategy, cell, grid] cell frontier accuracy (fraction; NaN: no draw)."""
        p = self.probes[:, None, :, None].astype(np.float64)
        return np.where(p > 0, self.reward / np.where(p > 0, p, 1.0), np.nan)

    @property
    def beta(self) -> np.ndarray:
        return np.asarray([float(b) for b in self.grid], dtype=np.float64)

    def _tidy_columns(self) -> dict[str, Any]:
        reps = list(range(self.macro.shape[0]))
        return melt_columns(self.macro, [("replicate", reps), ("strategy", list(self.strategies)),
                                         ("beta", list(self.beta))], "macro")


@dataclasses.dataclass(frozen=True)
class BootstrapResult(Tidy):
    """Replicate distributions of the bootstrap (axis 0: replicates).

    Values are fractions (OR, AD, accuracies) and tokens, as in `metrics`;
    the metric axis follows `BOOT_METRICS`; cells, models and groups follow
    `names` (the `_aggregate` layout).

    `to_arrow()`: one row per (metric, scope, model, group): `metric` (a
    `BOOT_METRICS` name), `scope` (`cell` | `model` | `group` | `macro`),
    `model`, `group` (null where the scope has none), `estimate` (all data
    once), `lo`, `hi` (the `percentiles` of the replicates), `defined`
    (replicates in which the value exists).
    """

    replicates: int
    seed: int
    percentiles: tuple[float, float]
    names: LayoutNames
    estimate_cell: np.ndarray    # float64[metric, cell] point estimate (all data once)
    estimate_model: np.ndarray   # float64[metric, model]
    estimate_group: np.ndarray   # float64[metric, group]
    estimate_macro: np.ndarray   # float64[metric]
    cell: np.ndarray             # float64[rep, metric, cell]
    model: np.ndarray            # float64[rep, metric, model]
    group: np.ndarray            # float64[rep, metric, group]
    macro: np.ndarray            # float64[rep, metric]
    frontiers: FrontierBootstrap | None
    synthetic: bool
    provenance: dict[str, Any] = dataclasses.field(default_factory=dict)
    spearman_or_ad: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0))
    # float64[rep] Spearman OR-AD across the replicate's cells (NaN: undefined)
    estimate_spearman: float = float("nan")

    def _tidy_columns(self) -> dict[str, Any]:
        metrics = list(BOOT_METRICS)
        n = self.names
        scopes = (("cell", self.estimate_cell, self.cell, [("model", "group"), list(n.cells)]),
                  ("model", self.estimate_model, self.model, ["model", list(n.models)]),
                  ("group", self.estimate_group, self.group, ["group", list(n.groups)]),
                  ("macro", self.estimate_macro[:, None], self.macro[:, :, None], None))
        parts = []
        for scope, est, reps, axis in scopes:
            axes = [("metric", metrics), tuple(axis) if axis else ("scope", [scope])]
            part = melt_columns(est, axes, "estimate")
            lohi = percentile(reps, self.percentiles)                  # [2, metric, x]
            part["lo"], part["hi"] = lohi[0].reshape(-1), lohi[1].reshape(-1)
            part["defined"] = np.sum(~np.isnan(reps), axis=0).reshape(-1)
            part["scope"] = np.full(part["estimate"].size, scope, dtype=object)
            parts.append(part)
        cols = concat_columns(parts)
        order = ("metric", "scope", "model", "group", "estimate", "lo", "hi", "defined")
        return {k: cols[k] for k in order}

    def to_json(self) -> dict[str, Any]:
        """The `otbench.bootstrap/1` document (fractions and tokens; null = undefined / never)."""
        q = self.percentiles
        iv = _json_interval

        def keyed(x):             # x: [rep, metric] -> {metric: [lo, hi]}
            lohi = percentile(x, q)
            return {k: iv(lohi[:, j]) for j, k in enumerate(BOOT_METRICS)}

        cells = []
        for c, (m, g) in enumerate(self.names.cells):
            entry = {"model": m, "group": g, "defined": int(np.sum(~np.isnan(self.cell[:, 0, c])))}
            entry.update(keyed(self.cell[:, :, c]))
            entry["estimate"] = {k: _num(self.estimate_cell[j, c]) for j, k in enumerate(BOOT_METRICS)}
            cells.append(entry)
        out = {
            "schema": SCHEMA, "replicates": int(self.replicates), "seed": int(self.seed),
            "synthetic": bool(self.synthetic), "percentiles": list(q),
            "cells": cells,
            "by_model": {m: keyed(self.model[:, :, i]) for i, m in enumerate(self.names.models)},
            "by_group": {g: keyed(self.group[:, :, i]) for i, g in enumerate(self.names.groups)},
            "macro": keyed(self.macro),
            "estimate": {
                "macro": {k: _num(v) for k, v in zip(BOOT_METRICS, self.estimate_macro)},
                "by_model": {m: {k: _num(self.estimate_model[j, i]) for j, k in enumerate(BOOT_METRICS)}
                             for i, m in enumerate(self.names.models)},
                "by_group": {g: {k: _num(self.estimate_group[j, i]) for j, k in enumerate(BOOT_METRICS)}
                             for i, g in enumerate(self.names.groups)}},
            "spearman_or_ad": {
                "estimate": _num(self.estimate_spearman),
                "interval": iv(percentile(self.spearman_or_ad, q)),
                "defined": int(np.sum(~np.isnan(self.spearman_or_ad)))},
            "provenance": dict(self.provenance),
        }
        from ._flags import outside_intervals

        # Estimates outside their own interval, each with its measured reason (docs/rules.md).
        out["outside_intervals"] = outside_intervals(self)
        f = self.frontiers
        if f is not None:
            fr: dict[str, Any] = {"grid": f.beta.tolist(), "a_full": iv(percentile(f.a_full, q)),
                                  "weighting": MACRO_WEIGHTING}
            for k, s in enumerate(f.strategies):
                acc = f.acc[:, k]                                       # [rep, cell, grid]
                lo, hi = percentile(f.macro[:, k], q)
                fr[s] = {
                    "lo": _json_list(lo), "hi": _json_list(hi),
                    "median": _json_list(percentile(f.macro[:, k], (50.0,))[0]),
                    "beta_match": iv(percentile(_never(f.beta_match[:, k]), q)),
                    "ceiling": iv(percentile(f.ceiling[:, k], q)),
                    "beta_sat": iv(percentile(_never(f.beta_sat[:, k]), q)),
                    "cells": [{"model": m, "group": g,
                               "lo": _json_list(percentile(acc[:, c], q)[0]),
                               "hi": _json_list(percentile(acc[:, c], q)[1]),
                               "median": _json_list(percentile(acc[:, c], (50.0,))[0])}
                              for c, (m, g) in enumerate(self.names.cells)],
                }
            out["frontiers"] = fr
        return out


def _never(beta: np.ndarray) -> np.ndarray:
    return np.where(np.isnan(beta), np.inf, beta)


def _num(x) -> float | None:
    x = float(x)
    return x if np.isfinite(x) else None


def _json_interval(lohi: np.ndarray) -> list[float | None]:
    return [_num(lohi[0]), _num(lohi[1])]


def _json_list(x: np.ndarray) -> list[float | None]:
    return [_num(v) for v in x]


def frontier_result(grid, strategies, arrays, cell_model) -> FrontierBootstrap:
    """Exact macro summaries per replicate; a replicate in which some cell drew no
    question has undefined (NaN) macro values, like the metric averages."""
    N, S, _, G = arrays["reward"].shape
    ok = np.all(arrays["probes"] > 0, axis=1)                        # [rep]
    macro = np.full((N, S, G), np.nan)
    a_full = np.full(N, np.nan)
    ceiling, beta_match, beta_sat = (np.full((N, S), np.nan) for _ in range(3))
    for i in range(S):
        if not ok.any():
            break
        summ = frontier_summary(grid, arrays["reward"][ok, i], arrays["reward_one"][ok, i],
                                arrays["endpoint"][ok], arrays["probes"][ok], cell_model)
        macro[ok, i], ceiling[ok, i] = summ.macro, summ.ceiling
        beta_match[ok, i], beta_sat[ok, i] = summ.beta_match, summ.beta_sat
        a_full[ok] = summ.a_full
    return FrontierBootstrap(
        grid=grid, strategies=strategies, reward=arrays["reward"], reward_one=arrays["reward_one"],
        tokens=arrays["tokens"], probes=arrays["probes"], endpoint=arrays["endpoint"], macro=macro,
        a_full=a_full, ceiling=ceiling, beta_match=beta_match, beta_sat=beta_sat)


def _fmt_iv(lohi, scale: float, digits: int, estimate: float | None = None) -> str:
    """`[lo, hi]`, or `estimate [lo, hi]` when the point estimate is given."""
    lo, hi = lohi
    if np.isnan(lo) or np.isnan(hi):
        return "n/a"
    iv = f"[{lo * scale:.{digits}f}, {hi * scale:.{digits}f}]"
    if estimate is None or np.isnan(estimate):
        return iv
    return f"{estimate * scale:.{digits}f} {iv}"


def _matrix(title: str, r: BootstrapResult, j: int, scale: float, digits: int,
            marks: dict) -> list[str]:
    """One interval matrix; an entry of `marks` ((scope, model, group) -> text) is appended."""
    q = r.percentiles
    groups, models = list(r.names.groups), list(r.names.models)
    by_cell = {cell: (percentile(r.cell[:, j, c], q), r.estimate_cell[j, c])
               for c, cell in enumerate(r.names.cells)}

    def show(lohi, est, place):
        return _fmt_iv(lohi, scale, digits, est) + marks.get(place, "")

    rows = [["model"] + groups + ["Avg."]]
    for i, m in enumerate(models):
        rows.append([m] + ["-" if (m, g) not in by_cell else show(*by_cell[(m, g)], ("cell", m, g))
                           for g in groups]
                    + [show(percentile(r.model[:, j, i], q), r.estimate_model[j, i],
                            ("model", m, None))])
    rows.append(["Avg."] + [show(percentile(r.group[:, j, i], q), r.estimate_group[j, i],
                                 ("group", None, g)) for i, g in enumerate(groups)]
                + [show(percentile(r.macro[:, j], q), r.estimate_macro[j], ("macro", None, None))])
    widths = [max(len(x[k]) for x in rows) for k in range(len(rows[0]))]
    return [title] + ["  ".join([x[0].ljust(widths[0])]
                                + [v.rjust(w) for v, w in zip(x[1:], widths[1:])]) for x in rows]


def _place(f: dict[str, Any]) -> str:
    """`metric, scope[ model / group]` of an `outside_intervals` entry, as the tables name it."""
    where = " / ".join(x for x in (f["model"], f["group"]) if x is not None)
    return f"{f['metric']}, {f['scope']}" + (f" {where}" if where else "")


def format_bootstrap(r: BootstrapResult) -> str:
    """Interval matrices in the layout of the paper's Tables 4-6 (models x groups, Avg. row/column)."""
    lo, hi = r.percentiles
    head = (f"Two-stage paired bootstrap: {r.replicates:,} replicates, seed {r.seed}; "
            f"each entry is the point estimate [{lo:g}-{hi:g} percentile interval]")
    from otbench.analysis.overthinking import (
        ZERO_ACCURACY_MARK,
        ZERO_ACCURACY_NOTE,
        spearman_note,
        zero_accuracy_places,
    )

    from ._flags import MARK, outside_intervals

    lines = ([("SYNTHETIC DATA (simulated, not model outputs)")] if r.synthetic else []) + [head, ""]
    flags = outside_intervals(r)
    flagged = {(f["metric"], f["scope"], f["model"], f["group"]) for f in flags}
    est = {k: r.estimate_cell[BOOT_METRICS.index(k)] for k in ("endpoint_acc", "ad")}
    zero = zero_accuracy_places({"model": m, "group": g, "endpoint_acc": est["endpoint_acc"][c],
                                 "ad": est["ad"][c]} for c, (m, g) in enumerate(r.names.cells))
    for title, key, scale, digits in SUMMARY_DISPLAY:
        digits = 0 if key == "tokens" else digits    # intervals of token means: whole tokens
        marks = {x[1:]: MARK for x in flagged if x[0] == key}
        for place in zero if key == "or" else ():
            marks[place] = marks.get(place, "") + ZERO_ACCURACY_MARK
        lines += _matrix(title, r, BOOT_METRICS.index(key), scale, digits, marks)
        lines += [ZERO_ACCURACY_NOTE] if key == "or" and zero else []
        lines.append("")
    if r.spearman_or_ad.size:
        mark = MARK if ("spearman_or_ad", "macro", None, None) in flagged else ""
        lines += [f"Spearman OR-AD across cells: {r.estimate_spearman:.3f} "
                  f"{_fmt_iv(percentile(r.spearman_or_ad, r.percentiles), 1.0, 3)}{mark}"
                  f"{spearman_note(len(r.names.cells))}", ""]
    if flags:
        lines.append(f"{MARK} point estimate outside its own interval:")
        lines += [f"  {_place(f)}: {f['reason']}" for f in flags]
        lines.append("")
    f = r.frontiers
    if f is not None:
        q = r.percentiles

        def beta(x):
            a, b = percentile(_never(x), q)
            return "[" + ", ".join("never" if not np.isfinite(v) else f"{100 * v:.1f}%"
                                   for v in (a, b)) + "]"

        lines.append(f"Oracle frontiers, {len(f.grid)}-point grid: A_full "
                     f"{_fmt_iv(percentile(f.a_full, q), 100.0, 2)}%")
        lines.append(f"{'strategy':8s}  {'beta_match':>16s}  {'ceiling (%)':>16s}  {'beta_sat':>16s}")
        for k, s in enumerate(f.strategies):
            lines.append(f"{s.upper():8s}  {beta(f.beta_match[:, k]):>16s}  "
                         f"{_fmt_iv(percentile(f.ceiling[:, k], q), 100.0, 2):>16s}  "
                         f"{beta(f.beta_sat[:, k]):>16s}")
    return "\n".join(lines) + "\n"
