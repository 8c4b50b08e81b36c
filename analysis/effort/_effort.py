"""`effort_map`: per cell and effort level, the smallest token cap certified within δ (docs/rules.md).

The rule, per (model, benchmark group) cell and level δ (accuracy points):
the cap is the smallest candidate `c` (`_cells`) whose paired difference
`acc(c) - acc(full)` has the lower end of its two-stage bootstrap interval
at or above `-δ`. Both accuracies come from the same replicate (the same
drawn questions and trajectories), so the difference is paired. The
bootstrap is the project's (`resampling.replicate_weights`: the draw of
`otbench bootstrap` with the same seed). Where no cap below the cell's
longest full thinking meets it, the cell has no budget for that level.

The budget's own interval: in each replicate, the smallest candidate cap
whose replicate difference is `>= -δ` (the point rule read on the
replicate; "none" counts as +inf), and the percentiles of those caps. Its
point estimate is the same rule on the data (`point_budget`); a point
outside its interval is flagged with the shares of replicates on either side.
"""

import dataclasses
import math
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

import numpy as np
from otbench.analysis.frontier import frontiers
from otbench.analysis.measurement import MeasurementSet, content_hash
from otbench.analysis.resampling import percentile, replicate_weights
from otbench.errors import ArgumentError

from ._cells import CellArrays, at_budget, scan
from ._levels import DEFAULT_LEVELS, delta_fraction, levels_iv

SCHEMA = "otbench.effort/1"
SEED = 20260721
"""The project's recorded bootstrap seed (docs/rules.md)."""
REPLICATES = 2000


@dataclasses.dataclass(frozen=True)
class LevelBudget:
    """One level's budget in one cell (accuracies and costs as fractions)."""

    level: str
    delta: float                     # accuracy points below full thinking
    budget: int | None               # the certified cap; None: no cap below full thinking meets δ
    at_budget: dict[str, Any] | None  # accuracy, difference, relative cost (+ intervals), tokens
    oracle_fb: float | None          # the oracle FB frontier at the budget's relative cost
    point_budget: int | None         # the same rule on the point difference (no interval)
    budget_interval: tuple[float | None, float | None]  # of the per-replicate cap; None: no cap
    budget_flag: str | None          # the point budget outside its interval: why


@dataclasses.dataclass(frozen=True)
class CellEffort:
    model: str
    group: str
    trajectories: int
    full_accuracy: float
    full_tokens: float               # mean thinking tokens at full thinking
    longest: int                     # the longest full thinking: caps below it are candidates
    candidates: int
    levels: tuple[LevelBudget, ...]


@dataclasses.dataclass(frozen=True)
class EffortMap:
    levels: dict[str, float]
    confidence: float
    replicates: int
    seed: int
    cells: tuple[CellEffort, ...]
    synthetic: bool
    content_hash: str

    @property
    def percentiles(self) -> tuple[float, float]:
        return _percentiles(self.confidence)

    def unmet(self) -> int:
        """How many (cell, level) pairs have no budget."""
        return sum(lv.budget is None for c in self.cells for lv in c.levels)

    def to_json(self) -> dict[str, Any]:
        """The `otbench.effort/1` document (accuracies and costs as fractions, caps in tokens)."""
        return {
            "schema": SCHEMA, "synthetic": bool(self.synthetic),
            "rule": "the smallest thinking-token cap whose paired two-stage bootstrap interval of "
                    "accuracy(cap) - accuracy(full thinking) has its lower end >= -delta "
                    "(docs/rules.md, effort levels)",
            "levels": {k: {"delta_points": v} for k, v in self.levels.items()},
            "confidence": self.confidence, "percentiles": list(self.percentiles),
            "replicates": self.replicates, "seed": self.seed, "content_hash": self.content_hash,
            "map": {lv: {f"{c.model}/{c.group}": next(x.budget for x in c.levels if x.level == lv)
                         for c in self.cells} for lv in self.levels},
            "cells": [{**{k: v for k, v in dataclasses.asdict(c).items() if k != "levels"},
                       "levels": [_level_json(x) for x in c.levels]} for c in self.cells],
        }


def _percentiles(confidence: float) -> tuple[float, float]:
    a = round(100.0 * (1.0 - confidence) / 2.0, 10)        # 2.5, not 2.500000000000002
    return (a, 100.0 - a)


def _level_json(x: LevelBudget) -> dict[str, Any]:
    d = dataclasses.asdict(x)
    d["budget_interval"] = list(x.budget_interval)
    if x.at_budget is not None:
        d["at_budget"] = {k: (list(v) if isinstance(v, tuple) else v) for k, v in x.at_budget.items()}
    if x.budget is None:
        d["note"] = "no budget meets delta: no cap below full thinking is within delta by its interval"
    return d


def _iv(ms: MeasurementSet, replicates: Any, seed: Any, confidence: Any) -> None:
    if not isinstance(ms, MeasurementSet):
        raise ArgumentError(f"`ms` must be a MeasurementSet, got {type(ms).__name__}")
    if ms.num_trajectories == 0:
        raise ArgumentError("the set has no trajectories")
    for name, v, least in (("replicates", replicates, 1), ("seed", seed, 0)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < least:
            raise ArgumentError(f"`{name}` must be an integer >= {least}, got {v!r}")
    if isinstance(confidence, bool) or not isinstance(confidence, (int, float)) \
            or not math.isfinite(confidence) or not 0 < confidence < 1:
        raise ArgumentError(f"`confidence` must lie strictly between 0 and 1, got {confidence!r}")


def effort_map(ms: MeasurementSet, levels: Mapping[str, float] | str = DEFAULT_LEVELS, *,
               replicates: int = REPLICATES, seed: int = SEED, confidence: float = 0.95,
               oracle: bool = True) -> EffortMap:
    """Per cell and level, the smallest token cap certified within δ of full thinking.

    Args:
      ms: the measurement set.
      levels: {name: δ in accuracy points} or text `low=2,medium=1,high=0.5`.
      replicates, seed: the two-stage bootstrap (recorded in the result).
      confidence: the two-sided interval's level; the rule reads its lower end.
      oracle: also read the oracle FB frontier at each budget's relative cost.
    """
    lv = levels_iv(levels)
    _iv(ms, replicates, seed, confidence)
    deltas = [delta_fraction(v) for v in lv.values()]
    pcts = _percentiles(float(confidence))
    W = replicate_weights(ms, int(replicates), int(seed))
    cells = []
    for c in np.unique(ms.cell):
        rows = ms.cell_rows(int(c))
        k = int(ms.n[rows].max()) + 1
        arr = CellArrays(L=ms.L[rows, :k].astype(np.int64), C=ms.C[rows, :k].astype(np.int64),
                         n=ms.n[rows].astype(np.int64), P=ms.probes[rows].astype(np.int64))
        cells.append(_cell(ms, int(c), arr, W[:, rows], lv, deltas, pcts))
    if oracle:
        cells = _with_oracle(ms, cells)
    return EffortMap(levels=lv, confidence=float(confidence), replicates=int(replicates),
                     seed=int(seed), cells=tuple(cells), synthetic=bool(ms.synthetic),
                     content_hash=content_hash(ms))


def _cell(ms, c, arr, Wc, lv, deltas, pcts) -> CellEffort:
    sc = scan(arr, Wc, deltas, pcts[0], percentile)
    C_full, L_full = arr.full
    out = []
    for i, (name, d) in enumerate(lv.items()):
        meets = np.flatnonzero(sc.lower >= -float(deltas[i]))
        budget = int(sc.caps[meets[0]]) if meets.size else None
        pm = np.flatnonzero(sc.point_meets[i])
        point = int(sc.caps[pm[0]]) if pm.size else None
        f = sc.first[i]
        caps = np.append(sc.caps, 0).astype(np.float64)             # index-safe with no candidate
        per = np.where(f >= 0, caps[np.maximum(f, 0)],
                       np.where(f == -1, np.inf, np.nan))
        lo, hi = percentile(per[:, None], pcts)[:, 0]
        out.append(LevelBudget(
            level=name, delta=d, budget=budget,
            at_budget=None if budget is None else at_budget(arr, Wc, budget, pcts, percentile),
            oracle_fb=None, point_budget=point,
            budget_interval=(_cap(lo), _cap(hi)),
            budget_flag=_flag(per, point, lo, hi)))
    m, g = ms.cell_name(c)
    return CellEffort(model=m, group=g, trajectories=int(arr.n.size),
                      full_accuracy=float(C_full.sum() / arr.P.sum()),
                      full_tokens=float(L_full.mean()), longest=int(L_full.max(initial=0)),
                      candidates=int(sc.caps.size), levels=tuple(out))


def _cap(x: float) -> float | None:
    return None if not np.isfinite(x) else float(x)


def _flag(per: np.ndarray, point: int | None, lo: float, hi: float) -> str | None:
    """Why the point budget lies outside its interval (None: inside)."""
    p = np.inf if point is None else float(point)
    if np.isnan(lo) or lo <= p <= hi:
        return None
    ok = per[~np.isnan(per)]
    below, above = float(np.mean(ok < p)), float(np.mean(ok > p))
    return (f"point budget {'none' if point is None else point} outside its interval: "
            f"{100 * below:.1f}% of {ok.size} defined replicates below it, {100 * above:.1f}% above")


def _with_oracle(ms: MeasurementSet, cells: list[CellEffort]) -> list[CellEffort]:
    """Each budget's oracle FB accuracy at its exact relative cost (`frontier.frontiers`)."""
    betas = sorted({Fraction(*x.at_budget["cost"]) for c in cells for x in c.levels
                    if x.at_budget is not None and x.at_budget["cost"][1] > 0})
    if not betas:
        return cells
    res = frontiers(ms, strategies="fb", grid=betas)
    acc = res.strategies["fb"].acc
    where = {(cl.model, cl.group): i for i, cl in enumerate(res.cells)}
    at = {b: j for j, b in enumerate(betas)}
    out = []
    for c in cells:
        i = where[(c.model, c.group)]
        lv = tuple(dataclasses.replace(x, oracle_fb=float(acc[i, at[Fraction(*x.at_budget["cost"])]]))
                   if x.at_budget is not None and x.at_budget["cost"][1] > 0 else x
                   for x in c.levels)
        out.append(dataclasses.replace(c, levels=lv))
    return out
