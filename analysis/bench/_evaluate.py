"""OTBench: evaluate a termination method against its strategy's exact oracle frontier (docs/rules.md).

Protocol (`evaluate`):

1. The set must carry a question-level split (`_splits`). The method is fit
   on train and validation (if it has `fit`), then its `θ` sweep is fixed;
   only then is the evaluated split (default test) touched.
2. For each `θ` the method's decisions map to a stopping position per test
   trajectory (`_otbench_walk`). Per cell `g` (model x group): cost
   `B_g = Σ L(k)` retained thinking tokens and reward `Σ C(k)` correct
   probes over the cell's trajectories. Reported per cell: ``cost`` =
   `B_g` / trajectories (mean retained tokens per trajectory),
   ``rel_cost`` = `B_g / T_g` (`T_g = Σ L(n)`, full thinking; 0 for a cell
   that never thinks), ``acc`` = reward / `Σ P` (pooled at probe level, the
   frontier's normalization, docs/rules.md).
3. The oracle frontier of the method's strategy is solved exactly on the
   same test questions (`_frontier.frontiers`) and read, per cell, at the
   method's exact cost `B_g` -- the largest reward whose minimum cost is
   `<= B_g` -- so no point is interpolated. Every method decision is a
   feasible action of its strategy, hence ``frontier_acc >= acc`` in every
   cell; ``gap`` = ``frontier_acc - acc`` (a fraction, like every accuracy).
4. Macro values weight cells equally through the project's chain (mean over
   a model's cells, then over models; docs/rules.md), computed with exact
   rationals and rounded once: macro ``acc``, ``frontier_acc`` (the macro
   of the per-cell frontier values at the per-cell costs), ``gap``,
   ``cost`` and ``rel_cost``.
5. A point is non-dominated when no other point of the sweep has
   ``rel_cost <=`` and ``acc >=`` with one strict (exact comparisons); of
   identical points only the first in sweep order counts. Non-dominated
   points form the method's curve (per cell: by the cell's own values).
6. Summary over the curve, as areas over relative cost (so it does not
   depend on how many `θ` land in a region, only on what the method can
   reach). Per cell, the method's step curve is `M(x) = max(A0, best
   accuracy of its curve points with rel_cost <= x)`: `A0`, the
   zero-thinking accuracy (every trajectory at its latest position with
   `L = 0`), is an action of every strategy at cost 0, so no point -- a
   cost-0 point below `A0` included -- can pull the curve under it (and a
   net curve never scores better than its gross twin); beyond its most
   expensive point it stays at that point's accuracy. `F(x)` is the exact
   frontier's step function (largest reward whose minimum cost is
   `<= x T_g`). Both step only at integer token costs, so the integrals are
   exact rationals.

   * ``gap_area`` (fraction; shown in pp): `∫ (F - M) dx / (hi - lo)` over the method's own
     range ``range = [lo, hi]`` (its cheapest to its most expensive curve
     point); the point gap when the range has zero width;
   * ``gap_area_full`` (fraction; shown in pp): `∫ (F - M) dx` over `[0, 1]`;
   * ``realized_share``: `∫ (M - A0) dx / ∫ (F - A0) dx` over `[0, 1]`, the
     share of the frontier's area over no thinking that the method
     realizes (``None`` when the frontier gains nothing).

   Macro: ``gap_area`` and ``gap_area_full`` are the equal-weight chain of
   the cell values; ``realized_share`` is the chain of the cells' realized
   areas over the chain of their frontier areas. (The macro curve is not
   integrated against the macro frontier `F_C`: a method may spend
   different relative budgets in different cells, so `F_C` at the macro
   cost is no upper bound on its macro accuracy.)

Token cost counts retained thinking tokens `L(k)` only: feature extraction,
signal computation (e.g. the early-exit margin) and answer probes are
excluded (docs/rules.md). Beside these gross points every result carries net
points (``net``, `_net.net_block`, docs/rules.md): the same stops with the
method's declared signal cost per decision added, against the same frontier.
"""

import dataclasses
import math
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

import numpy as np
from otbench.analysis.frontier import frontiers
from otbench.analysis.measurement import SPLITS, MeasurementSet, Tidy

from otbench.analysis.methods import METHODS, Method, resolve, signal_tokens, units_of

from . import _walk as walk
from ._areas import cell_areas, cell_summary, frac, nondominated
from ._intervals import Stops
from ._macro import area_summary, frontier_at
from ._macro import chain as macro_chain
from ._net import net_block
from otbench.errors import ArgumentError

SCHEMA = "otbench.bench/1"
COMPARE_SCHEMA = "otbench.bench-compare/1"
DEFAULT_THETA_POINTS = 21
TOKEN_COST = ("retained thinking tokens L(k) only; feature extraction, signal computation and "
              "answer-probe tokens are excluded")


@dataclasses.dataclass(frozen=True)
class Point:
    """One operating point (macro or one cell). Accuracies and `gap` are fractions."""

    theta: float
    cost: float          # mean retained thinking tokens per trajectory
    rel_cost: float      # relative to full thinking
    acc: float
    frontier_acc: float
    gap: float           # frontier_acc - acc (fraction)
    nondominated: bool

    def to_json(self) -> dict[str, Any]:
        # θ = inf (an FB cap of none) has no JSON number: it is written as null.
        return {**dataclasses.asdict(self), "theta": _theta_json(self.theta)}


def _theta_json(theta: float) -> float | None:
    return None if math.isinf(theta) else theta


@dataclasses.dataclass(frozen=True)
class CellResult:
    """One cell's points and summary."""

    model: str
    group: str
    trajectories: int
    questions: int
    total_tokens: int    # T_g of the evaluated split
    points: tuple[Point, ...]
    summary: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"model": self.model, "group": self.group, "trajectories": self.trajectories,
                "questions": self.questions, "total_tokens": self.total_tokens,
                "points": [p.to_json() for p in self.points], "summary": dict(self.summary)}


@dataclasses.dataclass(frozen=True)
class BenchResult(Tidy):
    """An OTBench evaluation (see the module docstring); `to_json` is ``otbench.bench/1``.

    `to_arrow()`: one row per (scope, cell, θ): `method`, `strategy`, `scope`
    (`macro` | `cell`), `model`, `group` (null for macro), and the `Point`
    fields `theta`, `cost` (mean retained thinking tokens per trajectory),
    `rel_cost`, `acc`, `frontier_acc`, `gap` (fractions), `nondominated`.
    """

    method: str
    strategy: str
    split: str
    points: tuple[Point, ...]
    summary: dict[str, Any]
    cells: tuple[CellResult, ...]
    reference: dict[str, float]
    config: dict[str, Any]
    synthetic: bool
    net: dict[str, Any] = dataclasses.field(default_factory=dict)   # `_net.net_block`
    # The stops and signal tokens on the evaluated split (`_intervals.Stops`), which the
    # leaderboard's bootstrap intervals read; not part of the document.
    stops: Any = dataclasses.field(default=None, compare=False, repr=False)

    def _tidy_columns(self) -> dict[str, Any]:
        rows = [(None, None, p) for p in self.points]
        rows += [(c.model, c.group, p) for c in self.cells for p in c.points]
        fields = [f.name for f in dataclasses.fields(Point)]
        out: dict[str, Any] = {"method": [self.method] * len(rows),
                               "strategy": [self.strategy] * len(rows),
                               "scope": ["macro" if m is None else "cell" for m, _, _ in rows],
                               "model": [m for m, _, _ in rows], "group": [g for _, g, _ in rows]}
        for f in fields:
            out[f] = np.asarray([getattr(p, f) for _, _, p in rows])
        return out

    def to_json(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "method": self.method, "strategy": self.strategy,
                "split": self.split, "synthetic": self.synthetic, "token_cost": TOKEN_COST,
                "points": [p.to_json() for p in self.points], "summary": dict(self.summary),
                "reference": dict(self.reference), "config": dict(self.config),
                "cells": [c.to_json() for c in self.cells], "net": dict(self.net)}


@dataclasses.dataclass(frozen=True)
class _CellTotals:
    rows: np.ndarray
    model: str
    group: str
    model_index: int
    tokens: int          # T_g
    probes: int
    zero: int            # reward with no thinking
    endpoint: int        # reward at k = n
    pareto: tuple[np.ndarray, np.ndarray]


# -- validation ----------------------------------------------------------------------

def _evaluate_iv(ms: Any, split: Any, audit: Any) -> int:
    if not isinstance(ms, MeasurementSet):
        raise ArgumentError(f"`ms` must be a MeasurementSet, got {type(ms).__name__}")
    if isinstance(audit, bool) or not isinstance(audit, (int, np.integer)) or audit < 0:
        raise ArgumentError(f"`audit` must be a non-negative integer, got {audit!r}")
    if split not in ("test", "validation"):
        raise ArgumentError(f"`split` must be 'test' or 'validation', got {split!r}")
    if ms.num_trajectories and np.any(ms.split < 0):
        raise ArgumentError("the set has no split assignment (some questions are unassigned); "
                            "assign one first (`otbench split DIR` or `assign_splits`, docs/rules.md)")
    s = SPLITS.index(split)
    if not np.any(ms.split == s):
        raise ArgumentError(f"the {split} split has no trajectories")
    return s


def evaluate(ms: MeasurementSet, method: Any, *, thetas: Sequence[Any] | None = None,
             theta_grid: int | None = None, split: str = "test",
             stored_features: Mapping[str, Mapping] | None = None,
             options: Mapping[str, Any] | None = None, audit: int = 8) -> BenchResult:
    """Evaluate `method` on the `split` of `ms` against its strategy's oracle frontier.

    Args:
      ms: a measurement set with an assigned split.
      method: a built-in name, ``"module:object"``, or a method object.
      options: keyword arguments for the method's class (e.g. ``features``).
      thetas: explicit `θ` values (finite, distinct), or
      theta_grid: a number of points for the method's `theta_grid` /
        `theta_range`; default: the method's `thetas`, else 21 grid points.
      split: ``"test"`` (the reported numbers) or ``"validation"`` (for a
        user's own tuning; the method is still fit on train).
      stored_features: from `read_question_features`, exposed to methods as
        `UnitTable.features`.
      audit: DEE only: the number of trajectories re-walked without the rest
        of the batch at every `θ` to check that decisions are per
        trajectory (0 disables).

    Raises:
      ValueError: bad arguments or a set without a usable split.
      MethodError: a method that cannot be loaded or breaks the interface.
    """
    s = _evaluate_iv(ms, split, audit)
    m = resolve(method, **dict(options or {}))
    sweep = m.prepare(ms, thetas, theta_grid, stored_features, DEFAULT_THETA_POINTS)
    # The evaluated split is built only now, after the method has been fit
    # and its sweep fixed (SPEC §6.1: test is touched only for the final numbers).
    test = ms.take(np.flatnonzero(ms.split == s))
    cells = _cell_totals(test, m.strategy)
    ks: list[np.ndarray] = []
    cost, reward, front = _sweep_cells(test, m, sweep, cells, stored_features, audit, ks)

    # -- per cell: exact (mean tokens, rel cost, acc, frontier acc) per θ -----------
    cell_results, per_cell, areas = [], [], []
    for c, ct in enumerate(cells):
        ntraj = ct.rows.size
        vals = tuple([frac(x[i, c], d) for i in range(len(sweep))]
                     for x, d in ((cost, ntraj), (cost, ct.tokens), (reward, ct.probes),
                                  (front, ct.probes)))
        per_cell.append(vals)
        pts = _points(sweep, vals)
        keep = [p.nondominated for p in pts]
        areas.append(cell_areas(cost[:, c], reward[:, c], keep, ct.pareto, ct.tokens,
                                ct.probes, ct.zero))
        cell_results.append(CellResult(
            model=ct.model, group=ct.group, trajectories=int(ntraj),
            questions=int(np.unique(test.question[ct.rows]).size),
            total_tokens=ct.tokens, points=pts, summary=cell_summary(areas[-1], keep)))

    # -- macro: the equal-weight chain, exact -------------------------------------
    w = _weights([ct.model_index for ct in cells])

    def chain(per: Sequence[Fraction]) -> Fraction:
        return macro_chain(w, per)

    macro = tuple([chain([per_cell[c][j][i] for c in range(len(cells))]) for i in range(len(sweep))]
                  for j in range(4))
    zero = chain([frac(ct.zero, ct.probes) for ct in cells])
    points = _points(sweep, macro)
    summary = {**area_summary(w, areas),
               "points": len(points), "curve_points": sum(p.nondominated for p in points)}
    reference = {"a_zero": float(zero),
                 "a_full": float(chain([frac(ct.endpoint, ct.probes) for ct in cells])),
                 "frontier_at_full": float(chain([frac(ct.pareto[1][-1], ct.probes)
                                                  for ct in cells]))}
    config = {"method_config": m.config(), "thetas": [_theta_json(t) for t in sweep],
              "audit_rows": int(walk.audit_rows(test.num_trajectories, audit).size)
              if m.strategy == "dee" else 0,
              "splits": dict(ms.provenance.get("split", {})) if isinstance(ms.provenance, Mapping) else {},
              "spec": m.config_spec,
              "options": {k: v if isinstance(v, (str, int, float, bool)) or v is None else repr(v)
                          for k, v in sorted(dict(options or {}).items())}}
    if m.target is not None:
        # `otbench.bench/1` records a built-in by its path in OTBench's public API
        # (`otbench.analysis.bench` re-exports every built-in), as it did before the methods
        # moved to their JAX-free package: documents of the same method stay byte-identical.
        mod, _, obj = m.target.partition(":")
        config["builtin"] = f"otbench.analysis.bench:{obj}" if mod == "otbench.analysis.methods" \
            else m.target
    stops = Stops(k=np.stack(ks).astype(np.int64),
                  signal=np.stack([signal_tokens(test, m.strategy, m.signal_cost, k) for k in ks]))
    return BenchResult(method=m.name, strategy=m.strategy, split=split,
                       points=points, summary=summary, cells=tuple(cell_results),
                       reference=reference, config=config, synthetic=bool(ms.synthetic),
                       net=net_block(test, m, sweep, cells, ks, cost, reward, w), stops=stops)


def _sweep_cells(test: MeasurementSet, m: Method, sweep: Sequence[float],
                 cells: Sequence["_CellTotals"], stored_features: Any, audit: int,
                 ks: list | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """int64[θ, cell] method cost, method reward, and frontier reward at that cost
    (the stop positions per θ are appended to `ks` when given, for the net points)."""
    unit, units = units_of(test, stored_features)
    rows_audit = walk.audit_rows(test.num_trajectories, audit) if m.strategy == "dee" else None
    t_idx = np.arange(test.num_trajectories)
    cost = np.zeros((len(sweep), len(cells)), dtype=np.int64)
    reward = np.zeros_like(cost)
    front = np.zeros_like(cost)
    for i, theta in enumerate(sweep):
        k = walk.positions(test, unit, units, m, theta)
        if ks is not None:
            ks.append(k)
        if rows_audit is not None:
            walk.check_independent(test, unit, units, m, theta, k, rows_audit)
        L_k = test.L[t_idx, k].astype(np.int64)
        C_k = test.C[t_idx, k].astype(np.int64)
        for c, ct in enumerate(cells):
            cost[i, c] = int(L_k[ct.rows].sum())
            reward[i, c] = int(C_k[ct.rows].sum())
            front[i, c] = frontier_at(ct.pareto, cost[i, c])     # at the exact cost
    if np.any(front < reward):   # impossible for a feasible action: a bug, never data
        raise AssertionError("a method point lies above its strategy's exact frontier")
    return cost, reward, front


def _points(sweep: Sequence[float], vals: Sequence[Sequence[Fraction]]) -> tuple[Point, ...]:
    """Points from exact (mean tokens, rel cost, acc, frontier acc) per θ."""
    tok, rel, acc, fr = vals
    keep = nondominated(rel, acc)
    return tuple(_point(th, tok[i], rel[i], acc[i], fr[i], keep[i]) for i, th in enumerate(sweep))


def _point(theta: float, tok: Fraction, rel: Fraction, acc: Fraction, fr: Fraction,
           keep: bool) -> Point:
    return Point(theta=float(theta), cost=float(tok), rel_cost=float(rel), acc=float(acc),
                 frontier_acc=float(fr), gap=float(fr - acc), nondominated=bool(keep))


def _weights(cell_model: Sequence[int]) -> list[Fraction]:
    """Exact equal-weight chain: `1 / (models * cells of the model)` per cell."""
    models = sorted(set(cell_model))
    per = {mm: cell_model.count(mm) for mm in models}
    return [Fraction(1, len(models) * per[mm]) for mm in cell_model]


def _cell_totals(test: MeasurementSet, strategy: str) -> list[_CellTotals]:
    res = frontiers(test, strategies=[strategy], grid=2, pareto=True, check=False)
    f = res.strategies[strategy]
    t = np.arange(test.num_trajectories)
    k0 = walk.zero_positions(test.L)
    out = []
    for cell, (pc, pr) in zip(res.cells, f.pareto):
        rows = test.cell_rows(cell.index)
        out.append(_CellTotals(
            rows=rows, model=cell.model, group=cell.group,
            model_index=int(test.cell_model[cell.index]),
            tokens=int(test.L[rows, -1].astype(np.int64).sum()),
            probes=int(test.probes[rows].astype(np.int64).sum()),
            zero=int(test.C[t[rows], k0[rows]].astype(np.int64).sum()),
            endpoint=int(test.C[rows, -1].astype(np.int64).sum()),
            pareto=(np.asarray(pc, dtype=np.int64), np.asarray(pr, dtype=np.int64))))
    return out


# -- several methods and printing ------------------------------------------------------

def methods_for(ms: MeasurementSet, specs: Sequence[Any] | None = None, *, features: Any = None
                ) -> tuple[list[Method], list[tuple[str, str]]]:
    """Each method of `specs` resolved once (`resolve`), with ``features`` for those whose class takes
    it; default: every registered method whose declared signals `ms` records, with the others
    returned as ``(name, why)`` (`Method.runnable_on`). Given `specs` are all kept: a method the set
    cannot run then fails in `evaluate` with its own reason."""
    keep: list[Method] = []
    skipped: list[tuple[str, str]] = []
    for spec in (list(METHODS) if specs is None else list(specs)):
        m = resolve(spec)
        if features is not None and not isinstance(spec, Method) and m.accepts("features"):
            m = resolve(spec, features=features)
        if specs is None:
            ok, why = m.runnable_on(ms)
            if not ok:
                skipped.append((m.name, why))
                continue
        keep.append(m)
    return keep, skipped


def compare(ms: MeasurementSet, methods: Sequence[Any] | None = None, **kwargs: Any
            ) -> list[BenchResult]:
    """`evaluate` every method (default: every registered one whose declared signals `ms` records),
    each resolved once (`methods_for`)."""
    resolved, _ = methods_for(ms, methods)
    return [evaluate(ms, m, **kwargs) for m in resolved]


def compare_json(results: Sequence[BenchResult]) -> dict[str, Any]:
    """The `otbench.bench-compare/1` document: every result's `to_json()`, in order."""
    return {"schema": COMPARE_SCHEMA, "results": [r.to_json() for r in results]}


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def format_result(r: BenchResult) -> str:
    """Operating points (macro) and the summary as a short table."""
    lines = ["SYNTHETIC DATA (simulated, not model outputs)"] if r.synthetic else []
    lines.append(f"method {r.method} ({r.strategy.upper()}) on the {r.split} split, "
                 f"{len(r.cells)} cells; cost = {TOKEN_COST}")
    lines.append(f"{'theta':>10s}  {'tokens':>8s}  {'rel':>6s}  {'acc':>6s}  {'oracle':>6s}  "
                 f"{'gap pp':>6s}  curve")
    for p in r.points:
        lines.append(f"{p.theta:10.4g}  {p.cost:8.0f}  {100 * p.rel_cost:5.1f}%  "
                     f"{100 * p.acc:5.1f}%  {100 * p.frontier_acc:5.1f}%  {100 * p.gap:6.2f}  "
                     f"{'*' if p.nondominated else ''}")
    s = r.summary
    lines.append(f"summary ({s['curve_points']} curve points): gap area {100 * s['gap_area']:.2f} pp over "
                 f"the method's range, {100 * s['gap_area_full']:.2f} pp over [0, 1]; realized area share "
                 f"{_pct(s['realized_share'])}; no thinking "
                 f"{100 * r.reference['a_zero']:.1f}%, full thinking {100 * r.reference['a_full']:.1f}%")
    lines += _net_lines(r.net)
    return "\n".join(lines) + "\n"


def _net_lines(net: Mapping[str, Any]) -> list[str]:
    """The net points (docs/rules.md) under the gross table; none for a result without them."""
    if not net:
        return []
    out = [f"net (cost = {net['token_cost']}):",
           f"{'theta':>10s}  {'tokens':>8s}  {'signal':>8s}  {'rel':>6s}  {'oracle':>6s}  "
           f"{'gap pp':>6s}  curve"]
    for p in net["points"]:
        th = math.inf if p["theta"] is None else p["theta"]
        out.append(f"{th:10.4g}  {p['cost']:8.0f}  {p['signal_cost']:8.0f}  "
                   f"{100 * p['rel_cost']:5.1f}%  {100 * p['frontier_acc']:5.1f}%  "
                   f"{100 * p['gap']:6.2f}  {'*' if p['nondominated'] else ''}")
    s = net["summary"]
    out.append(f"net summary: gap area {100 * s['gap_area_full']:.2f} pp over [0, 1]; realized "
               f"area share {_pct(s['realized_share'])}")
    return out


def format_compare(results: Sequence[BenchResult]) -> str:
    """One table: a row per method."""
    lines = []
    if any(r.synthetic for r in results):
        lines.append("SYNTHETIC DATA (simulated, not model outputs)")
    lines.append(f"{'method':24s}  {'strategy':8s}  {'curve':>7s}  {'gap area':>9s}  "
                 f"{'on [0,1]':>9s}  {'realized':>8s}")
    for r in results:
        s = r.summary
        lines.append(f"{r.method:24s}  {r.strategy.upper():8s}  "
                     f"{s['curve_points']:>3d}/{s['points']:<3d}  {100 * s['gap_area']:6.2f} pp  "
                     f"{100 * s['gap_area_full']:6.2f} pp  {_pct(s['realized_share']):>8s}")
    lines.append("gap area: mean frontier-minus-method gap over the method's cost range (and over "
                 "[0, 1]); realized: share of the frontier's area over no thinking")
    lines.append(f"cost = {TOKEN_COST}")
    return "\n".join(lines) + "\n"
