"""Exact oracle Pareto frontiers of DR, FB and DEE per cell, macro summaries, hierarchy check (SPEC §5).

For each cell (model x benchmark group) and strategy, `_units` builds the
decision units and their pruned integer actions and `_dp` combines them
exactly. The cell frontier at relative budget `β` is the largest total reward
whose minimum cost is at most `β * T_g` (`T_g` = the cell's full-thinking
tokens), divided by the cell's total probes (sum of `P` over trajectories).

Exactness. Budgets are compared in integers: with `β = num / den` exactly, a
cost `c` is allowed iff `c * den <= num * T_g`, i.e. `c <= floor(num * T_g /
den)`, computed with Python integers. A grid given as a number of points `N`
is `β_i = i / (N - 1)`; explicit values are read as exact decimals
(`Fraction(str(x))`: 0.35 means 7/20). Macro values are sums of rationals;
they are computed as exact integer numerators over one common denominator
and rounded once (Python's int / int is correctly rounded), so every float
reported is the correctly rounded exact value and comparisons (`β_match`,
`β_sat`) are decided on the exact values.

Aggregation (SPEC §4, §5). The macro frontier weights cells equally through
the project's chain: the mean over a model's cells, then the mean over
models (the same chain as `_aggregate.aggregate`); on the full 6 x 4 grid
this is the plain mean over the 24 cells. `A_full` is the same macro mean of
each cell's STP endpoint accuracy, pooled at probe level inside the cell
(`sum C(n) / sum P` over the cell's trajectories), i.e. the accuracy of the
all-full action, the normalization the frontier itself uses (SPEC §5: "cell
STP endpoint accuracy (all probes at k = n)"). With equal `R` and `P` per
question this equals the SPEC §4 mean over trajectories and questions.
"""

import dataclasses
import math
import threading
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from . import _dp
from ._types import MeasurementSet
from ._units import (STRATEGIES, Actions, CellData, Occurrences, actions, cell_data,
                     fb_events, totals)

SCHEMA = "otbench.frontier/1"
NAMES = {"dr": "DR", "fb": "FB", "dee": "DEE"}


class FrontierHierarchyError(AssertionError):
    """`F_DR <= F_FB <= F_DEE` failed somewhere: a bug (the feasible sets are nested)."""


# -- validation -------------------------------------------------------------

def budget_grid(grid: int | Sequence[Any]) -> tuple[Fraction, ...]:
    """Exact relative budgets: `N` points `i / (N - 1)`, or explicit values in [0, 1].

    Raises ValueError naming the rule broken.
    """
    if isinstance(grid, (int, np.integer)) and not isinstance(grid, bool):
        if grid < 2:
            raise ValueError(f"`grid` must be at least 2 points, got {grid}")
        N = int(grid)
        return tuple(Fraction(i, N - 1) for i in range(N))
    if isinstance(grid, (str, bytes, bool)) or not isinstance(grid, (Sequence, np.ndarray)):
        raise ValueError(f"`grid` must be a number of points or a sequence of budgets, got {grid!r}")
    out = []
    for x in grid:
        if isinstance(x, Fraction):
            f = x
        elif isinstance(x, (int, np.integer)) and not isinstance(x, bool):
            f = Fraction(int(x))
        elif isinstance(x, (float, np.floating)) and math.isfinite(x):
            f = Fraction(str(float(x)))            # the decimal the user wrote
        else:
            raise ValueError(f"`grid` values must be finite numbers, got {x!r}")
        out.append(f)
    if not out:
        raise ValueError("`grid` must not be empty")
    if out[0] < 0 or out[-1] > 1:
        raise ValueError(f"`grid` values must lie in [0, 1], got {float(min(out))}..{float(max(out))}")
    if any(b <= a for a, b in zip(out, out[1:])):
        raise ValueError("`grid` values must be strictly increasing")
    return tuple(out)


def _strategies_iv(strategies: Sequence[str]) -> tuple[str, ...]:
    if isinstance(strategies, str):
        strategies = [s for s in strategies.split(",") if s]
    out = tuple(strategies)
    if not out:
        raise ValueError("`strategies` must name at least one of dr, fb, dee")
    for s in out:
        if s not in STRATEGIES:
            raise ValueError(f"`strategies` must be among {', '.join(STRATEGIES)}, got {s!r}")
    if len(set(out)) != len(out):
        raise ValueError(f"`strategies` must not repeat a strategy, got {', '.join(out)}")
    # Report in the hierarchy's order whatever order was asked for.
    return tuple(s for s in STRATEGIES if s in out)


# -- budgets and summaries (exact integer arithmetic) -------------------------

def budgets(grid: Sequence[Fraction], tokens: np.ndarray) -> np.ndarray:
    """int64[..., grid] `floor(β * T)` exactly, for int64 totals `tokens[...]`."""
    tokens = np.asarray(tokens, dtype=np.int64)
    num = [b.numerator for b in grid]
    den = [b.denominator for b in grid]
    big = max(num) * int(tokens.max(initial=0))
    if big < 2 ** 62:
        return (np.asarray(num, dtype=np.int64) * tokens[..., None]) // np.asarray(den, dtype=np.int64)
    t = tokens.astype(object)[..., None]                 # Python ints: no overflow
    return ((np.asarray(num, dtype=object) * t) // np.asarray(den, dtype=object)).astype(np.int64)


def query(g: np.ndarray, base: int, budget: np.ndarray) -> np.ndarray:
    """int64[...] largest total reward with minimum cost `<= budget` (g non-decreasing, g[0] = 0)."""
    return base + np.searchsorted(g, budget, side="right").astype(np.int64) - 1


def pareto_points(g: np.ndarray, base: int) -> tuple[np.ndarray, np.ndarray]:
    """(cost int64[pt], reward int64[pt]) of the exact Pareto set, both strictly increasing."""
    keep = np.ones(g.shape[0], dtype=bool)
    keep[:-1] = g[1:] > g[:-1]               # r is dominated iff r + 1 costs no more
    r = np.flatnonzero(keep)
    return g[r].astype(np.int64), base + r.astype(np.int64)


@dataclasses.dataclass(frozen=True)
class Weights:
    """Exact equal-weight chain (model mean of group cells, then mean over models).

    Cell `c` weighs `1 / (M * G_m(c))`; `coef[c] = D * weight / probes[c]`
    are integers over the common denominator `D`, so a macro accuracy is
    `sum_c coef[c] * reward[c] / D`.
    """

    coef: tuple[int, ...]     # [cell] Python ints
    D: int

    @staticmethod
    def of(cell_model: np.ndarray, probes: np.ndarray) -> "Weights":
        cm = np.asarray(cell_model)
        models, per = np.unique(cm, return_counts=True)
        M = len(models)
        g_of = dict(zip(models.tolist(), per.tolist()))
        dens = [M * g_of[m] * int(p) for m, p in zip(cm.tolist(), np.asarray(probes).tolist())]
        D = math.lcm(*dens) if dens else 1
        return Weights(coef=tuple(D // d for d in dens), D=D)

    def numerators(self, reward: np.ndarray) -> np.ndarray:
        """object[..., grid] exact `sum_c coef[c] * reward[..., c, grid]` (Python ints)."""
        r = np.asarray(reward, dtype=np.int64).astype(object)
        coef = np.asarray(self.coef, dtype=object).reshape((-1, 1))
        return (coef * r).sum(axis=-2)

    def value(self, num: np.ndarray) -> np.ndarray:
        """float64[...] correctly rounded `num / D`."""
        flat = [int(x) / self.D for x in np.asarray(num, dtype=object).reshape(-1)]
        return np.asarray(flat, dtype=np.float64).reshape(np.shape(num))


@dataclasses.dataclass(frozen=True)
class Summary:
    """Macro summaries of one strategy (arrays carry any leading batch axes)."""

    macro: np.ndarray        # float64[..., grid] F_C(β)
    a_full: np.ndarray       # float64[...] macro STP endpoint accuracy
    ceiling: np.ndarray      # float64[...] F_C(1)
    beta_match: np.ndarray   # float64[...] min grid β with F_C(β) >= A_full; NaN if none
    beta_sat: np.ndarray     # float64[...] min grid β with F_C(β) = F_C(1); NaN if none


def summarize(grid: Sequence[Fraction], reward: np.ndarray, reward_one: np.ndarray,
              endpoint: np.ndarray, probes: np.ndarray, cell_model: np.ndarray) -> Summary:
    """Macro frontier, `A_full`, ceiling, `β_match`, `β_sat`, decided exactly.

    Leading batch axes (`...`, e.g. bootstrap replicates) are optional and
    shared by every argument but `grid` and `cell_model`.

    Args:
      grid: exact budgets.
      reward: int64[..., cell, grid] cell frontier rewards.
      reward_one: int64[..., cell] rewards at β = 1.
      endpoint: int64[..., cell] sum of C(n) (reward of the all-full action).
      probes: int64[..., cell] total probes of each cell.
      cell_model: int[cell] model of each cell (the equal-weight chain).
    """
    reward = np.asarray(reward, dtype=np.int64)
    lead = reward.shape[:-2]
    C, G = reward.shape[-2:]
    rw = reward.reshape((-1, C, G))
    r1 = np.broadcast_to(np.asarray(reward_one, dtype=np.int64), lead + (C,)).reshape((-1, C))
    en = np.broadcast_to(np.asarray(endpoint, dtype=np.int64), lead + (C,)).reshape((-1, C))
    pr = np.broadcast_to(np.asarray(probes, dtype=np.int64), lead + (C,)).reshape((-1, C))
    beta = np.asarray([float(b) for b in grid], dtype=np.float64)
    n = rw.shape[0]
    macro = np.zeros((n, G), dtype=np.float64)
    a_full, ceiling = np.zeros(n), np.zeros(n)
    meets = np.zeros((n, G), dtype=bool)
    cache: dict[tuple[int, ...], Weights] = {}
    for b in range(n):
        key = tuple(pr[b].tolist())
        w = cache.get(key)
        if w is None:
            w = cache[key] = Weights.of(cell_model, pr[b])
        num = w.numerators(rw[b])                                  # [grid]
        full = w.numerators(en[b][:, None])[0]
        one = w.numerators(r1[b][:, None])[0]
        macro[b] = w.value(num)
        a_full[b], ceiling[b] = w.value(np.asarray([full, one], dtype=object))
        meets[b] = [x >= full for x in num]          # exact F(β) >= A_full
    # F(β) = F(1) iff every cell is at its β = 1 reward: the cell frontiers are
    # non-decreasing in β and the weights are positive.
    sat = np.all(rw == r1[:, :, None], axis=1)
    return Summary(macro=macro.reshape(lead + (G,)), a_full=a_full.reshape(lead),
                   ceiling=ceiling.reshape(lead),
                   beta_match=_first_beta(meets, beta).reshape(lead),
                   beta_sat=_first_beta(sat, beta).reshape(lead))


def _first_beta(ok: np.ndarray, beta: np.ndarray) -> np.ndarray:
    any_ = ok.any(axis=-1)
    return np.where(any_, beta[np.argmax(ok, axis=-1)], np.nan)


# -- per cell, per strategy ---------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Cell:
    """One cell's identity and totals (SPEC §5 normalizers)."""

    index: int               # index into ms.cell_model / ms.cell_group
    model: str
    group: str
    total_tokens: int        # T_g = sum L(n)
    total_probes: int        # sum P
    endpoint: int            # sum C(n)


@dataclasses.dataclass(frozen=True)
class StrategyFrontier:
    """One strategy's frontiers over the cells of a set."""

    reward: np.ndarray       # int64[cell, grid] best total reward at each budget
    reward_one: np.ndarray   # int64[cell] best total reward at β = 1 (F(1) of the cell)
    acc: np.ndarray          # float64[cell, grid] reward / total probes (fraction)
    macro: np.ndarray        # float64[grid] F_C(β)
    ceiling: float           # F_C(1)
    beta_match: float | None
    beta_sat: float | None
    pareto: tuple[tuple[np.ndarray, np.ndarray], ...] | None  # [cell] (cost, reward) int64


@dataclasses.dataclass(frozen=True)
class FrontierResult:
    """Frontiers of several strategies on one measurement set (see `frontiers`)."""

    grid: tuple[Fraction, ...]
    cells: tuple[Cell, ...]
    a_full: float
    strategies: dict[str, StrategyFrontier]
    synthetic: bool

    @property
    def beta(self) -> np.ndarray:
        """float64[grid] the budgets as floats."""
        return np.asarray([float(b) for b in self.grid], dtype=np.float64)

    def to_json(self) -> dict[str, Any]:
        """The `otbench.frontier/1` document (accuracies and budgets as fractions)."""
        def opt(x):
            return None if x is None else float(x)

        return {
            "schema": SCHEMA,
            "synthetic": bool(self.synthetic),
            "grid": self.beta.tolist(),
            "a_full": float(self.a_full),
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

        cols: dict[str, list] = {"strategy": [], "model": [], "group": [], "cost": [], "reward": []}
        for s, f in self.strategies.items():
            if f.pareto is None:
                raise ValueError("the result has no Pareto sets; call `frontiers(..., pareto=True)`")
            for c, (cost, reward) in zip(self.cells, f.pareto):
                k = cost.shape[0]
                cols["strategy"] += [s] * k
                cols["model"] += [c.model] * k
                cols["group"] += [c.group] * k
                cols["cost"].append(cost)
                cols["reward"].append(reward)
        cat = (lambda xs: np.concatenate(xs) if xs else np.zeros(0, dtype=np.int64))
        return pa.table({
            "strategy": pa.array(cols["strategy"], type=pa.string()),
            "model": pa.array(cols["model"], type=pa.string()),
            "group": pa.array(cols["group"], type=pa.string()),
            "cost": pa.array(cat(cols["cost"]), type=pa.int64()),
            "reward": pa.array(cat(cols["reward"]), type=pa.int64()),
        })


def check_hierarchy(reward: dict[str, np.ndarray], reward_one: dict[str, np.ndarray],
                    grid: Sequence[Fraction], cells: Sequence[Cell]) -> None:
    """Raise `FrontierHierarchyError` unless DR <= FB <= DEE at every cell and budget.

    Args:
      reward: strategy -> int64[cell, grid]; reward_one: strategy -> int64[cell].
      Only the strategies present are compared, in the order DR, FB, DEE.
    """
    present = [s for s in STRATEGIES if s in reward]
    for lo, hi in zip(present, present[1:]):
        for a, b, where in ((reward[lo], reward[hi], None), (reward_one[lo][:, None], reward_one[hi][:, None], 1)):
            bad = np.argwhere(a > b)
            if bad.size:
                c, i = bad[0]
                beta = Fraction(1) if where == 1 else grid[i]
                cell = cells[c]
                raise FrontierHierarchyError(
                    f"hierarchy violated in cell ({cell.model}, {cell.group}) at beta = {float(beta):g}: "
                    f"{NAMES[lo]} reward {int(a[c, i])} > {NAMES[hi]} reward {int(b[c, i])} "
                    "(the feasible sets are nested, so this is a bug)")


def _cells_of(ms: MeasurementSet) -> list[tuple[int, np.ndarray]]:
    present = np.unique(ms.cell)
    return [(int(c), ms.cell_rows(int(c))) for c in present]


def _cell_data(ms: MeasurementSet, rows: np.ndarray) -> CellData:
    return cell_data(ms.L[rows], ms.C[rows], ms.n[rows], ms.probes[rows], ms.question[rows])


def _frontiers_iv(ms: Any, strategies: Any, grid: Any) -> tuple[tuple[str, ...], tuple[Fraction, ...]]:
    if not isinstance(ms, MeasurementSet):
        raise ValueError(f"`ms` must be a MeasurementSet, got {type(ms).__name__}")
    if ms.num_trajectories == 0:
        raise ValueError("`ms` has no trajectories")
    return _strategies_iv(strategies), budget_grid(grid)


def frontiers(ms: MeasurementSet, *, strategies: Sequence[str] | str = STRATEGIES,
              grid: int | Sequence[Any] = 1001, pareto: bool = False,
              check: bool = True) -> FrontierResult:
    """Exact oracle frontiers of every cell of `ms` for each strategy (SPEC §5).

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
    data = [_cell_data(ms, rows) for _, rows in cell_rows]
    cells = []
    for (c, _), d in zip(cell_rows, data):
        t = totals(d, d.point())
        model, group = ms.cell_name(c)
        cells.append(Cell(index=c, model=model, group=group, total_tokens=int(t["tokens"][0]),
                          total_probes=int(t["probes"][0]), endpoint=int(t["endpoint"][0])))
    tokens = np.asarray([c.total_tokens for c in cells], dtype=np.int64)
    B = budgets(grid, tokens)                                      # [cell, grid]
    states, bases = _solve_cells(data, strategies, max_total_cost=int(tokens.max()))
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


def _solve_cells(data: Sequence[CellData], strategies: Sequence[str], *,
                 max_total_cost: int) -> tuple[dict, dict]:
    """Point-estimate states of every (strategy, cell), pipelined on one compiled shape.

    The shape (front, chunk capacity, state capacity, dtype) is fixed up
    front from bounds that hold for every strategy -- an action's offset
    reward is at most its unit's probes, a state spans at most the cell's
    probes -- so the kernel compiles once per run, in a background thread,
    while the host builds the first units; each cell's device work is then
    dispatched asynchronously while the host builds the next cell's units.

    Returns:
      ({(strategy, i): g int64[top + 1]}, {(strategy, i): base reward int}).
    """
    _, lanes, _, _ = _dp._defaults(None, None, None)
    unit_reward = 0
    cap = 1
    for d in data:
        per_q = np.add.reduceat(d.probes, d.qoff[:-1]) if d.num_questions else d.probes
        unit_reward = max(unit_reward, int(per_q.max(initial=0)), int(d.probes.max(initial=0)))
        cap = max(cap, int(d.probes.sum()) + 1)
    shape = _dp.Shape(front=max(16, _dp._next_pow2(unit_reward)),
                      chunks=_dp._next_pow2(-(-unit_reward // lanes)), cap=cap,
                      dtype=_dp.dtype_for(max_total_cost))
    compiling = threading.Thread(target=_dp.warm, args=(shape,), daemon=True)
    compiling.start()
    waiting, pending = [], []
    # FB first: its units take the longest to build, which hides the compile;
    # work is dispatched as soon as the kernel is compiled, never waited for.
    for s in sorted(strategies, key=("fb", "dee", "dr").index):
        for i, d in enumerate(data):
            a = actions(s, d, d.point())
            waiting.append(((s, i), a, _dp.plan(a, shape=shape)))
            if not compiling.is_alive():
                pending += [(k, a_, p, _dp.run(p)) for k, a_, p in waiting]   # asynchronous
                waiting = []
    compiling.join()
    pending += [(k, a_, p, _dp.run(p)) for k, a_, p in waiting]
    states, bases = {}, {}
    for key, a, p, buf in pending:
        top = int(a.top_total()[0])
        states[key] = np.asarray(buf)[p.front:p.front + top + 1].astype(np.int64)
        bases[key] = int(a.base_total()[0])
    return states, bases


# -- bootstrap entry point ----------------------------------------------------

@dataclasses.dataclass(frozen=True)
class ReplicateFrontiers:
    """Frontiers of one cell and strategy over a batch of replicates (axis 0)."""

    grid: tuple[Fraction, ...]
    reward: np.ndarray       # int64[rep, grid] best total reward at β * T_rep
    reward_one: np.ndarray   # int64[rep] at β = 1
    tokens: np.ndarray       # int64[rep] the replicate's full-thinking tokens T
    probes: np.ndarray       # int64[rep] the replicate's total probes
    endpoint: np.ndarray     # int64[rep] the replicate's sum of C(n)

    @property
    def acc(self) -> np.ndarray:
        """float64[rep, grid] accuracy (fraction)."""
        return self.reward / self.probes[:, None].astype(np.float64)


def _occurrences_iv(ms: MeasurementSet, cell: int, strategy: str, draws: Any,
                    weights: Any) -> tuple[CellData, Occurrences]:
    if strategy not in STRATEGIES:
        raise ValueError(f"`strategy` must be one of {', '.join(STRATEGIES)}, got {strategy!r}")
    if not (0 <= cell < ms.num_cells) or not np.any(ms.cell == cell):
        raise ValueError(f"`cell` must index a cell with trajectories, got {cell}")
    rows = ms.cell_rows(cell)
    d = _cell_data(ms, rows)
    Q, T = d.num_questions, rows.shape[0]
    qlocal = np.repeat(np.arange(Q), np.diff(d.qoff))
    if (draws is None) == (weights is None):
        raise ValueError("pass exactly one of `draws` and `weights`")
    if weights is not None:
        w = np.asarray(weights)
        units = T if strategy == "dee" else Q
        if w.ndim != 2 or w.shape[1] != units or not np.issubdtype(w.dtype, np.integer):
            raise ValueError(f"`weights` must be integer [rep, {units}] "
                             f"({'trajectories' if strategy == 'dee' else 'questions'} of the cell), "
                             f"got shape {w.shape} dtype {w.dtype}")
        if np.any(w < 0):
            raise ValueError("`weights` must be non-negative")
        w = w.astype(np.int64)
        rep = w.shape[0]
        if strategy == "dee":
            if np.any(w.sum(axis=1) == 0):
                raise ValueError("every replicate must draw at least one unit")
            # One occurrence per (replicate, question); a row drawn m times is m units.
            return d, Occurrences(problem=np.repeat(np.arange(rep), Q),
                                  question=np.tile(np.arange(Q), rep),
                                  mult=w.reshape(-1), num_problems=rep)
        if np.any(w.sum(axis=1) == 0):
            raise ValueError("every replicate must draw at least one unit")
        # A question drawn m times is m occurrences, each with all its rows once.
        prob = np.repeat(np.repeat(np.arange(rep), Q), w.reshape(-1))
        qq = np.repeat(np.tile(np.arange(Q), rep), w.reshape(-1))
        return d, Occurrences(problem=prob, question=qq,
                              mult=np.ones(int(np.diff(d.qoff)[qq].sum()), dtype=np.int64),
                              num_problems=rep)
    dr = np.asarray(draws)
    if dr.ndim != 3 or not np.issubdtype(dr.dtype, np.integer):
        raise ValueError(f"`draws` must be an integer array [rep, occurrence, draw], got shape {dr.shape}")
    if np.any(dr < -1):
        raise ValueError("`draws` must hold rows of the set or -1")
    rep = dr.shape[0]
    valid = dr >= 0
    local = np.searchsorted(rows, np.where(valid, dr, rows[0]))
    inside = (local < T) & (rows[np.minimum(local, T - 1)] == np.where(valid, dr, rows[0]))
    if np.any(valid & ~inside):
        raise ValueError(f"`draws` must hold rows of cell {cell} (or -1 for no draw)")
    ql = np.where(valid, qlocal[np.minimum(local, T - 1)], -1)
    has = valid.any(axis=2)
    first_q = np.where(has, ql.max(axis=2), -1)
    if np.any(valid & (ql != first_q[..., None])):
        raise ValueError("every occurrence in `draws` must draw rows of a single question")
    if np.any(~has.any(axis=1)):
        raise ValueError("every replicate must draw at least one unit")
    ri, oi = np.nonzero(has)                     # occurrences in (rep, occ) order
    qq = first_q[ri, oi]
    R = np.diff(d.qoff)[qq]
    # Multiplicity of each row of the occurrence's question.
    mult = np.zeros(int(R.sum()), dtype=np.int64)
    start = np.cumsum(R) - R
    occ_id = np.cumsum(has.reshape(-1)) - 1
    vr, vo, vd = np.nonzero(valid)
    o = occ_id[vr * dr.shape[1] + vo]
    np.add.at(mult, start[o] + (local[vr, vo, vd] - d.qoff[qq[o]]), 1)
    return d, Occurrences(problem=ri.astype(np.int64), question=qq.astype(np.int64),
                          mult=mult, num_problems=rep)


def frontier_replicates(ms: MeasurementSet, cell: int, strategy: str, *,
                        draws: Any = None, weights: Any = None,
                        grid: int | Sequence[Any] = 101, batch: int | None = None) -> ReplicateFrontiers:
    """Exact frontiers of one cell for a batch of resampled replicates (SPEC §7).

    The DP is vmapped over the replicates of each batch (shared schedule,
    one compiled shape per batch size); budgets are normalized by each
    replicate's own full-thinking tokens.

    Args:
      ms, cell: the set and the cell index (into `ms.cell_model`).
      strategy: "dr", "fb" or "dee".
      draws: int[rep, occurrence, draw] rows of `ms` (global row indices),
        -1 for no draw. Each occurrence is one drawn question occurrence and
        lists the trajectories drawn for it (all of one question; a row may
        repeat). DR and FB units are the occurrences (actions recomputed from
        the drawn trajectories); DEE units are the drawn trajectories.
      weights: alternatively, int[rep, unit] multiplicities of the cell's
        units: questions (DR, FB; local order) or trajectories (DEE; the
        cell's rows in order). A unit of weight m counts as m units.
      grid: budgets (default the 101-point bootstrap grid).
      batch: replicates per vmapped DP call (bounds memory; never changes
        the result). Default: all at once.
    """
    g_exact = budget_grid(grid)
    d, occ = _occurrences_iv(ms, cell, strategy, draws, weights)
    if batch is not None and (not isinstance(batch, int) or batch < 1):
        raise ValueError(f"`batch` must be a positive integer, got {batch!r}")
    tot = totals(d, occ)
    ev = fb_events(d) if strategy == "fb" else None
    rep = occ.num_problems
    size = rep if batch is None else batch
    reward = np.zeros((rep, len(g_exact)), dtype=np.int64)
    reward_one = np.zeros(rep, dtype=np.int64)
    Bud = budgets(g_exact, tot["tokens"])
    for s in range(0, rep, size):
        sel = (occ.problem >= s) & (occ.problem < s + size)
        sub = _sub_occurrences(d, occ, sel, s, min(size, rep - s))
        a = actions(strategy, d, sub, ev)
        gs = _dp.solve(a, max_total_cost=int(tot["tokens"].max()), batched=True)
        base = a.base_total()
        for b, g in enumerate(gs):
            reward[s + b] = query(g, int(base[b]), Bud[s + b])
            reward_one[s + b] = query(g, int(base[b]), tot["tokens"][s + b])
    return ReplicateFrontiers(grid=g_exact, reward=reward, reward_one=reward_one,
                              tokens=tot["tokens"], probes=tot["probes"], endpoint=tot["endpoint"])


def _sub_occurrences(d: CellData, occ: Occurrences, sel: np.ndarray, first: int,
                     count: int) -> Occurrences:
    R = np.diff(d.qoff)[occ.question]
    item_sel = np.repeat(sel, R)
    return Occurrences(problem=occ.problem[sel] - first, question=occ.question[sel],
                       mult=occ.mult[item_sel], num_problems=count)
