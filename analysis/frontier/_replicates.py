"""Bootstrap entry point: exact frontiers of one cell for a batch of resampled replicates (docs/rules.md).

A replicate is a multiset of question occurrences, each with the
trajectories drawn for it (the two-stage paired draw), or multiplicity
weights over the cell's units. Units are rebuilt per replicate (DR and FB
actions are sums over the drawn trajectories; DEE units are the draws), the
DP is vmapped over the replicates of a batch (`_dp.solve`), and budgets are
normalized by each replicate's own full-thinking tokens.
"""

import dataclasses
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import numpy as np
from otbench.analysis.measurement import MeasurementSet

from . import _dp
from ._budgets import budget_grid, budgets, query
from ._units import (
    STRATEGIES,
    CellData,
    Occurrences,
    actions,
    cell_data,
    fb_events,
    totals,
)
from otbench.errors import ArgumentError


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
        raise ArgumentError(f"`strategy` must be one of {', '.join(STRATEGIES)}, got {strategy!r}")
    if not (0 <= cell < ms.num_cells) or not np.any(ms.cell == cell):
        raise ArgumentError(f"`cell` must index a cell with trajectories, got {cell}")
    rows = ms.cell_rows(cell)
    d = cell_data(ms.L[rows], ms.C[rows], ms.n[rows], ms.probes[rows], ms.question[rows])
    Q, T = d.num_questions, rows.shape[0]
    qlocal = np.repeat(np.arange(Q), np.diff(d.qoff))
    if (draws is None) == (weights is None):
        raise ArgumentError("pass exactly one of `draws` and `weights`")
    if weights is not None:
        w = np.asarray(weights)
        units = T if strategy == "dee" else Q
        if w.ndim != 2 or w.shape[1] != units or not np.issubdtype(w.dtype, np.integer):
            raise ArgumentError(f"`weights` must be integer [rep, {units}] "
                                f"({'trajectories' if strategy == 'dee' else 'questions'} of the cell), "
                                f"got shape {w.shape} dtype {w.dtype}")
        if np.any(w < 0):
            raise ArgumentError("`weights` must be non-negative")
        w = w.astype(np.int64)
        rep = w.shape[0]
        if strategy == "dee":
            if np.any(w.sum(axis=1) == 0):
                raise ArgumentError("every replicate must draw at least one unit")
            # One occurrence per (replicate, question); a row drawn m times is m units.
            return d, Occurrences(problem=np.repeat(np.arange(rep), Q),
                                  question=np.tile(np.arange(Q), rep),
                                  mult=w.reshape(-1), num_problems=rep)
        if np.any(w.sum(axis=1) == 0):
            raise ArgumentError("every replicate must draw at least one unit")
        # A question drawn m times is m occurrences, each with all its rows once.
        prob = np.repeat(np.repeat(np.arange(rep), Q), w.reshape(-1))
        qq = np.repeat(np.tile(np.arange(Q), rep), w.reshape(-1))
        return d, Occurrences(problem=prob, question=qq,
                              mult=np.ones(int(np.diff(d.qoff)[qq].sum()), dtype=np.int64),
                              num_problems=rep)
    dr = np.asarray(draws)
    if dr.ndim != 3 or not np.issubdtype(dr.dtype, np.integer):
        raise ArgumentError(f"`draws` must be an integer array [rep, occurrence, draw], got shape {dr.shape}")
    if np.any(dr < -1):
        raise ArgumentError("`draws` must hold rows of the set or -1")
    rep = dr.shape[0]
    valid = dr >= 0
    local = np.searchsorted(rows, np.where(valid, dr, rows[0]))
    inside = (local < T) & (rows[np.minimum(local, T - 1)] == np.where(valid, dr, rows[0]))
    if np.any(valid & ~inside):
        raise ArgumentError(f"`draws` must hold rows of cell {cell} (or -1 for no draw)")
    ql = np.where(valid, qlocal[np.minimum(local, T - 1)], -1)
    has = valid.any(axis=2)
    first_q = np.where(has, ql.max(axis=2), -1)
    if np.any(valid & (ql != first_q[..., None])):
        raise ArgumentError("every occurrence in `draws` must draw rows of a single question")
    if np.any(~has.any(axis=1)):
        raise ArgumentError("every replicate must draw at least one unit")
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
    """Exact frontiers of one cell for a batch of resampled replicates (docs/rules.md).

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
        raise ArgumentError(f"`batch` must be a positive integer, got {batch!r}")
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
