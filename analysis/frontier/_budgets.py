"""Exact budget arithmetic and macro summaries of frontiers (docs/rules.md).

Budgets are compared in integers: with `β = num / den` exactly, a cost `c`
is allowed iff `c * den <= num * T`, i.e. `c <= floor(num * T / den)`,
computed without rounding. A grid given as a number of points `N` is
`β_i = i / (N - 1)`; explicit values are read as exact decimals
(`Fraction(str(x))`: 0.35 means 7/20). Macro values are sums of rationals;
they are computed as exact integer numerators over one common denominator
and rounded once (Python's int / int is correctly rounded), so every float
reported is the correctly rounded exact value and the comparisons behind
`β_match` and `β_sat` are decided on the exact values.

Aggregation: the equal-weight chain of the project (docs/rules.md; the same as
`_aggregate.aggregate`): the mean over a model's cells, then the mean over
models. On the full 6 x 4 grid this is the plain mean over the 24 cells.
"""

import dataclasses
import math
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import numpy as np
from otbench.resources import check_budget
from otbench.errors import ArgumentError

MACRO_WEIGHTING = ("equal weights over models of equal-weighted groups: the mean over a model's "
                   "cells, then the mean over models (docs/rules.md); the plain mean over cells only "
                   "on a full model x group grid")
"""The macro rule, written into the frontier documents."""


FRONTIER_POINT_BYTES = (600, 250)
"""Bytes per budget point of `frontiers`: fixed, and per cell (budgets, rewards, accuracies,
the exact macro numerators, the JSON lists); measured peak growth 980 B per point on 4 cells
and 2,330 on 12 (`frontiers(ms, grid=200_000).to_json()`), rounded up."""


def check_grid_memory(points: int, cells: int = 1, what: str = "frontiers of a budget grid"
                      ) -> None:
    """Refuse, before any allocation, a grid of `points` budgets whose arrays do not fit.

    The model is that of `frontiers` over `cells` cells; a grid always feeds at least one
    cell's frontier, so `budget_grid` checks one cell (its Fractions alone take ~130 B and
    ~3 us a point) and `frontiers` the set's count. Raises `ResourceLimitError` (a
    ValueError) with the numbers.
    """
    per = FRONTIER_POINT_BYTES[0] + FRONTIER_POINT_BYTES[1] * max(int(cells), 1)
    check_budget(what, "`grid`", points, per_unit=per, minimum=2, unit="budget point")


def budget_grid(grid: int | Sequence[Any]) -> tuple[Fraction, ...]:
    """Exact relative budgets: `N` points `i / (N - 1)`, or explicit values in [0, 1].

    Raises ValueError naming the rule broken (`ResourceLimitError` for a
    number of points whose budgets do not fit in memory).
    """
    if isinstance(grid, (int, np.integer)) and not isinstance(grid, bool):
        if grid < 2:
            raise ArgumentError(f"`grid` must be at least 2 points, got {grid}")
        N = int(grid)
        check_grid_memory(N)
        return tuple(Fraction(i, N - 1) for i in range(N))
    if isinstance(grid, (str, bytes, bool)) or not isinstance(grid, (Sequence, np.ndarray)):
        raise ArgumentError(f"`grid` must be a number of points or a sequence of budgets, got {grid!r}")
    out = []
    for x in grid:
        if isinstance(x, Fraction):
            f = x
        elif isinstance(x, (int, np.integer)) and not isinstance(x, bool):
            f = Fraction(int(x))
        elif isinstance(x, (float, np.floating)) and math.isfinite(x):
            f = Fraction(str(float(x)))            # the decimal the user wrote
        else:
            raise ArgumentError(f"`grid` values must be finite numbers, got {x!r}")
        out.append(f)
    if not out:
        raise ArgumentError("`grid` must not be empty")
    if out[0] < 0 or out[-1] > 1:
        raise ArgumentError(f"`grid` values must lie in [0, 1], got {float(min(out))}..{float(max(out))}")
    if any(b <= a for a, b in zip(out, out[1:])):
        raise ArgumentError("`grid` values must be strictly increasing")
    return tuple(out)


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
