"""Exact oracle Pareto frontiers of DR, FB and DEE per cell, macro summaries, hierarchy check (docs/rules.md).

For each cell (model x benchmark group) and strategy, `_units` builds the
decision units and their pruned integer actions and `_host_dp` combines them
exactly. The cell frontier at relative budget `β` is the largest total reward
whose minimum cost is at most `β * T_g` (`T_g` = the cell's full-thinking
tokens), divided by the cell's total probes (sum of `P` over trajectories).

Budgets are compared in exact integer arithmetic and macro values are
correctly rounded exact rationals (`_frontier_budgets`). The macro frontier
weights cells through the project's chain (docs/rules.md): equal weights over
models of equal-weighted groups, i.e. the mean over a model's cells, then the
mean over models; on the full 6 x 4 grid this is the plain mean over the 24
cells, on an incomplete grid it is not and the chain is the rule (the JSON
says so in ``weighting``). `A_full` is the same macro mean of
each cell's STP endpoint accuracy, pooled at probe level inside the cell
(`sum C(n) / sum P` over the cell's trajectories), i.e. the accuracy of the
all-full action, the normalization the frontier itself uses (docs/rules.md: "cell
STP endpoint accuracy (all probes at k = n)"). With equal `R` and `P` per
question this equals the docs/rules.md mean over trajectories and questions.
"""

import concurrent.futures
import concurrent.futures.process
import dataclasses
import os
import threading
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import numpy as np
from otbench.analysis.measurement import MeasurementSet, Tidy, concat_columns, melt_columns

from otbench.errors import OtbenchError

from . import _host_dp
from ._budgets import (
    MACRO_WEIGHTING,
    Weights,
    budget_grid,
    check_grid_memory,
    budgets,
    pareto_points,
    query,
    summarize,
)
from ._units import STRATEGIES, CellData, actions, cell_data, isum, totals
from otbench.errors import ArgumentError

SCHEMA = "otbench.frontier/1"
NAMES = {"dr": "DR", "fb": "FB", "dee": "DEE"}


class FrontierHierarchyError(OtbenchError, AssertionError):
    """`F_DR <= F_FB <= F_DEE` failed somewhere: a bug (the feasible sets are nested)."""


def strategies_iv(strategies: Sequence[str]) -> tuple[str, ...]:
    """Validate a strategy list (names or "dr,fb" text): non-empty, each of dr / fb / dee."""
    if isinstance(strategies, str):
        strategies = [s for s in strategies.split(",") if s]
    out = tuple(strategies)
    if not out:
        raise ArgumentError("`strategies` must name at least one of dr, fb, dee")
    for s in out:
        if s not in STRATEGIES:
            raise ArgumentError(f"`strategies` must be among {', '.join(STRATEGIES)}, got {s!r}")
    if len(set(out)) != len(out):
        raise ArgumentError(f"`strategies` must not repeat a strategy, got {', '.join(out)}")
    # Report in the hierarchy's order whatever order was asked for.
    return tuple(s for s in STRATEGIES if s in out)


@dataclasses.dataclass(frozen=True)
class Cell:
    """One cell's identity and totals (docs/rules.md normalizers)."""

    index: int               # index into ms.cell_model / ms.cell_group
    model: str
    group: str
    total_tokens: int        # T_g = sum L(n)
    total_probes: int        # sum P
    endpoint: int            # sum C(n)


@dataclasses.dataclass(frozen=True)
class StrategyFrontier(Tidy):
    """One strategy's frontiers over the cells of a set.

    `to_arrow()`: one row per (cell, grid point): `cell` (index into the
    result's `cells`), `point` (index into its `grid`), `reward`, `acc`.
    `FrontierResult.to_arrow()` gives the same with names and budgets.
    """

    reward: np.ndarray       # int64[cell, grid] best total reward at each budget
    reward_one: np.ndarray   # int64[cell] best total reward at β = 1 (F(1) of the cell)
    acc: np.ndarray          # float64[cell, grid] reward / total probes (fraction)
    macro: np.ndarray        # float64[grid] F_C(β)
    ceiling: float           # F_C(1)
    beta_match: float | None
    beta_sat: float | None
    pareto: tuple[tuple[np.ndarray, np.ndarray], ...] | None  # [cell] (cost, reward) int64

    def _tidy_columns(self) -> dict[str, Any]:
        cells, points = self.acc.shape
        out = melt_columns(self.acc, [("cell", list(range(cells))), ("point", list(range(points)))],
                           "acc")
        return {"cell": out["cell"], "point": out["point"], "reward": self.reward.reshape(-1),
                "acc": out["acc"]}


@dataclasses.dataclass(frozen=True)
class FrontierResult(Tidy):
    """Frontiers of several strategies on one measurement set (see `frontiers`).

    `to_arrow()`: one row per (strategy, cell or macro, budget): `strategy`,
    `scope` (`cell` | `macro`), `model`, `group` (null for macro), `beta`
    (fraction of full-thinking tokens), `acc` (fraction), `reward` (correct
    probes; null for macro).
    """

    grid: tuple[Fraction, ...]
    cells: tuple[Cell, ...]
    a_full: float
    strategies: dict[str, StrategyFrontier]
    synthetic: bool

    @property
    def beta(self) -> np.ndarray:
        """float64[grid] the budgets as floats."""
        return np.asarray([float(b) for b in self.grid], dtype=np.float64)

    def _tidy_columns(self) -> dict[str, Any]:
        cells = [(c.model, c.group) for c in self.cells]
        parts = []
        for s, f in self.strategies.items():
            cell = melt_columns(f.acc, [(("model", "group"), cells), ("beta", self.beta)], "acc")
            cell["reward"] = f.reward.reshape(-1)
            macro = melt_columns(f.macro, [("beta", self.beta)], "acc")
            for part, scope in ((cell, "cell"), (macro, "macro")):
                n = part["acc"].size
                parts.append({"strategy": np.full(n, s, dtype=object),
                              "scope": np.full(n, scope, dtype=object), **part})
        return concat_columns(parts)

    def to_json(self) -> dict[str, Any]:
        """The `otbench.frontier/1` document (accuracies and budgets as fractions)."""
        def opt(x):
            return None if x is None else float(x)

        return {
            "schema": SCHEMA,
            "synthetic": bool(self.synthetic),
            "grid": self.beta.tolist(),
            "a_full": float(self.a_full),
            "weighting": MACRO_WEIGHTING,
            "strategies": {
                s: {"macro": f.macro.tolist(), "beta_match": opt(f.beta_match),
                    "ceiling": float(f.ceiling), "beta_sat": opt(f.beta_sat),
                    "cells": [{"model": c.model, "group": c.group,
                               "total_tokens": c.total_tokens, "total_probes": c.total_probes,
                               "acc": f.acc[i].tolist()} for i, c in enumerate(self.cells)]}
                for s, f in self.strategies.items()},
        }

    def pareto_table(self):
        """pyarrow Table: one row per (strategy, cell, Pareto point)."""
        import pyarrow as pa

        keys, counts, costs, rewards = [], [], [], []
        for s, f in self.strategies.items():
            if f.pareto is None:
                raise ArgumentError("the result has no Pareto sets; call `frontiers(..., pareto=True)`")
            for c, (cost, reward) in zip(self.cells, f.pareto):
                keys.append((s, c.model, c.group))
                counts.append(cost.shape[0])
                costs.append(cost)
                rewards.append(reward)
        counts = np.asarray(counts, dtype=np.int64)

        def names(j):     # repeat each (strategy, cell) name over its points
            return pa.array(np.repeat(np.asarray([k[j] for k in keys], dtype=object), counts),
                            type=pa.string())

        def ints(xs):
            return pa.array(np.concatenate(xs) if xs else np.zeros(0, np.int64), type=pa.int64())

        return pa.table({"strategy": names(0), "model": names(1), "group": names(2),
                         "cost": ints(costs), "reward": ints(rewards)})


def check_hierarchy(reward: dict[str, np.ndarray], reward_one: dict[str, np.ndarray],
                    grid: Sequence[Fraction], cells: Sequence[Cell]) -> None:
    """Raise `FrontierHierarchyError` unless DR <= FB <= DEE at every cell and budget.

    Args:
      reward: strategy -> int64[cell, grid]; reward_one: strategy -> int64[cell].
      Only the strategies present are compared, in the order DR, FB, DEE.
    """
    present = [s for s in STRATEGIES if s in reward]
    for lo, hi in zip(present, present[1:]):
        at_one = (reward_one[lo][:, None], reward_one[hi][:, None], True)
        for a, b, one in ((reward[lo], reward[hi], False), at_one):
            bad = np.argwhere(a > b)
            if bad.size:
                c, i = bad[0]
                beta = Fraction(1) if one else grid[i]
                cell = cells[c]
                raise FrontierHierarchyError(
                    f"hierarchy violated in cell ({cell.model}, {cell.group}) at beta = {float(beta):g}: "
                    f"{NAMES[lo]} reward {int(a[c, i])} > {NAMES[hi]} reward {int(b[c, i])} "
                    "(the feasible sets are nested, so this is a bug)")


def _cells_of(ms: MeasurementSet) -> list[tuple[int, np.ndarray]]:
    present = np.unique(ms.cell)
    return [(int(c), ms.cell_rows(int(c))) for c in present]


def _cell_data(ms: MeasurementSet, rows: np.ndarray) -> CellData:
    if rows.size and bool(np.all(np.diff(rows) == 1)):
        # A cell's rows are contiguous (sets are sorted by cell): a slice is a view, so
        # `cell_data`'s widening to int64 is the only copy of L and C.
        rows = slice(int(rows[0]), int(rows[-1]) + 1)
    return cell_data(ms.L[rows], ms.C[rows], ms.n[rows], ms.probes[rows], ms.question[rows])


def _frontiers_iv(ms: Any, strategies: Any, grid: Any) -> tuple[tuple[str, ...], tuple[Fraction, ...]]:
    if not isinstance(ms, MeasurementSet):
        raise ArgumentError(f"`ms` must be a MeasurementSet, got {type(ms).__name__}")
    if ms.num_trajectories == 0:
        raise ArgumentError("`ms` has no trajectories")
    strategies = strategies_iv(strategies)
    if isinstance(grid, (int, np.integer)) and not isinstance(grid, bool) and grid >= 2:
        check_grid_memory(int(grid), ms.num_cells, f"frontiers of {ms.num_cells} cells")
    return strategies, budget_grid(grid)


def frontiers(ms: MeasurementSet, *, strategies: Sequence[str] | str = STRATEGIES,
              grid: int | Sequence[Any] = 1001, pareto: bool = False,
              check: bool = True) -> FrontierResult:
    """Exact oracle frontiers of every cell of `ms` for each strategy (docs/rules.md).

    Args:
      ms: the measurement set (all its cells; use `ms.take` for a split).
      strategies: any of "dr", "fb", "dee" (or a comma-separated string).
      grid: number of budget points (`i / (N-1)`, default 1,001) or explicit
        budgets in [0, 1], strictly increasing (read as exact decimals).
      pareto: also return every cell's exact Pareto set (cost, reward).
      check: verify `F_DR <= F_FB <= F_DEE` at every cell and budget
        (raises `FrontierHierarchyError`, which would be a bug).

    Returns:
      `FrontierResult`; cells in the set's cell order.
    """
    strategies, grid = _frontiers_iv(ms, strategies, grid)
    cell_rows = _cells_of(ms)
    solved = _solve_cells(ms, cell_rows, strategies)
    states = {(s, i): g for i, (_, gs, _) in enumerate(solved) for s, g in gs.items()}
    bases = {(s, i): b for i, (_, _, bs) in enumerate(solved) for s, b in bs.items()}
    cells = []
    for (c, _), (t, _, _) in zip(cell_rows, solved):
        model, group = ms.cell_name(c)
        cells.append(Cell(index=c, model=model, group=group, total_tokens=int(t["tokens"][0]),
                          total_probes=int(t["probes"][0]), endpoint=int(t["endpoint"][0])))
    tokens = np.asarray([c.total_tokens for c in cells], dtype=np.int64)
    B = budgets(grid, tokens)                                      # [cell, grid]
    cell_model = ms.cell_model[[c.index for c in cells]]
    probes = np.asarray([c.total_probes for c in cells], dtype=np.int64)
    endpoint = np.asarray([c.endpoint for c in cells], dtype=np.int64)
    rewards, ones, out = {}, {}, {}
    for s in strategies:
        rw = np.zeros((len(cells), len(grid)), dtype=np.int64)
        r1 = np.zeros(len(cells), dtype=np.int64)
        par = []
        for i in range(len(cells)):
            g, base = states[(s, i)], bases[(s, i)]
            rw[i] = query(g, base, B[i])
            r1[i] = query(g, base, tokens[i])
            if pareto:
                par.append(pareto_points(g, base))
        rewards[s], ones[s] = rw, r1
        summ = summarize(grid, rw, r1, endpoint, probes, cell_model)
        out[s] = StrategyFrontier(
            reward=rw, reward_one=r1, acc=rw / probes[:, None].astype(np.float64),
            macro=summ.macro, ceiling=float(summ.ceiling),
            beta_match=None if np.isnan(summ.beta_match) else float(summ.beta_match),
            beta_sat=None if np.isnan(summ.beta_sat) else float(summ.beta_sat),
            pareto=tuple(par) if pareto else None)
    if check:
        check_hierarchy(rewards, ones, grid, cells)
    a_full = Weights.of(cell_model, probes)
    a = a_full.value(a_full.numerators(endpoint[:, None])[..., 0])
    return FrontierResult(grid=grid, cells=tuple(cells), a_full=float(a),
                          strategies=out, synthetic=bool(ms.synthetic))


def _solve_cells(ms: MeasurementSet, cell_rows: Sequence[tuple[int, np.ndarray]],
                 strategies: Sequence[str]) -> list[tuple[dict, dict, dict]]:
    """Per cell: its totals (`_units.totals`), and per strategy the point-estimate state
    (`_host_dp.solve` of its pruned actions) and base reward.

    One state type for the run (`dtype_for` the largest full-thinking total);
    any type gives the same values, int32 only moves half the bytes. The cells
    are independent: they run on a few workers, largest first, in any order
    with the same exact integers. A cell's int64 copy of its rows (`CellData`)
    lives only while its cell is solved (every page first touched costs a
    fault: all cells' copies were ~190 MB on a paper-scale set).
    """
    tokens = isum(ms.cell.astype(np.int64), ms.L[:, -1], ms.num_cells)
    dtype = _host_dp.dtype_for(int(tokens.max(initial=0)))

    def solve(rows):
        d = _cell_data(ms, rows)
        occ = d.point()
        states, bases = {}, {}
        for s in strategies:
            a = actions(s, d, occ)
            states[s], bases[s] = _host_dp.solve(a, dtype=dtype), int(a.base_total()[0])
        return totals(d, occ), states, bases

    order = sorted(range(len(cell_rows)), key=lambda i: -cell_rows[i][1].size)
    done = _map(solve, [cell_rows[i][1] for i in order])
    out: list = [None] * len(cell_rows)
    for i, r in zip(order, done):
        out[i] = r
    return out


def _workers(tasks: int) -> int:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, min(_THREADS, cores, tasks))


_TASK = None          # the function forked workers run (they inherit it; closures do not pickle)


def _run_task(item):
    return _TASK(item)


def _map(fn, items: Sequence) -> list:
    """`[fn(x) for x in items]` on `_workers` workers: forked processes where that is safe, else threads.

    The per-pass Python work of the NumPy DP holds the GIL, so threads ran the
    cells of a paper-scale set barely faster than one (2.0 s vs 1.2 s forked,
    two cores). Forking is used on Linux only, never in a daemonic process (it
    may not have children) and never once JAX is imported (JAX runs threads
    that a fork would leave in an undefined state); only items and results
    cross (pickled), the set itself is inherited.
    """
    global _TASK
    workers = _workers(len(items))
    if workers == 1:
        return [fn(x) for x in items]
    import multiprocessing
    import sys

    if (sys.platform.startswith("linux") and "jax" not in sys.modules
            and not multiprocessing.current_process().daemon):
        with _FORK:
            _TASK = fn
            try:
                with concurrent.futures.ProcessPoolExecutor(
                        workers, mp_context=multiprocessing.get_context("fork")) as pool:
                    return list(pool.map(_run_task, items))
            except concurrent.futures.process.BrokenProcessPool:
                pass         # a worker was killed (memory?): run here, as without workers
            finally:
                _TASK = None
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        return list(pool.map(fn, items))


_FORK = threading.Lock()
"""One forked map at a time: the workers read `_TASK` as it was when they forked."""
_THREADS = 8
"""At most this many workers solve a run's cells."""
