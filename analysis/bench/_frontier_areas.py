"""The oracle frontier's area on every leaderboard replicate: the other half of a gap area.

A method's gap area over `[0, 1]` is ``∫ (F - M) dx``, its strategy's exact
oracle frontier `F` minus its own step curve `M`, chained over cells
(docs/rules.md). Ranking needs only ``∫ M`` (`_intervals`: every method of a
strategy faces the same `F`); a method's own gap-area interval needs ``∫ F``
on every replicate too. So the frontier is re-solved on each replicate's
draw as the frontier bootstrap re-solves it (docs/rules.md "The
bootstrap"): DR and FB units are the drawn question occurrences, DEE units
the drawn trajectories, and the area runs over the replicate's own
full-thinking tokens `T`. On a replicate's draw every stop a method makes is
an action of its strategy, so ``∫ F >= ∫ M`` cell by cell and a replicate's
gap is never negative.

The area of the step `F` (largest reward whose least cost is `<= b`) is an
exact integer: with `g[r]` the least cost of an offset reward of at least
`r` and `base` the reward every unit gets at no cost,
``∫_0^T F(b) db = base * T + Σ_{r >= 1} max(0, T - g[r])`` (level `r` is held
on `[g[r], T]`). With numba it comes from the compiled CPU kernels
(`frontier._cpu.frontier_area_batch`, replicates in parallel); without it
from the NumPy DP (`frontier._host_dp`), one replicate at a time. Both run
the same recurrence on the same units and give the same integers (tested);
neither loads JAX.
"""

from collections.abc import Sequence

import numpy as np
from otbench.analysis.frontier import _cpu, _host_dp
from otbench.analysis.frontier._units import CellData, Occurrences, actions, cell_data, fb_events
from otbench.analysis.measurement import MeasurementSet

from ._intervals import chain_weights, weights


def _cell_data(test: MeasurementSet, cell: int) -> tuple[np.ndarray, CellData]:
    rows = test.cell_rows(cell)
    return rows, cell_data(test.L[rows], test.C[rows], test.n[rows], test.probes[rows],
                           test.question[rows])


def _occurrences(d: CellData, local: np.ndarray) -> Occurrences:
    """`_units.Occurrences` of cell-local draws `local` int64[rep, slot, draw] (-1 pads)."""
    qof = np.repeat(np.arange(d.num_questions), np.diff(d.qoff))
    b, s = np.nonzero(local[:, :, 0] >= 0)                      # occurrences in (rep, slot) order
    q = qof[local[b, s, 0]]
    R = np.diff(d.qoff)[q]
    start = np.cumsum(R) - R
    mult = np.zeros(int(R.sum()), dtype=np.int64)
    for o in range(b.size):
        drawn = local[b[o], s[o]]
        np.add.at(mult, start[o] + drawn[drawn >= 0] - d.qoff[q[o]], 1)
    return Occurrences(problem=b.astype(np.int64), question=q.astype(np.int64), mult=mult,
                       num_problems=local.shape[0])


def _host_areas(strategy: str, d: CellData, local: np.ndarray, tokens: np.ndarray) -> np.ndarray:
    acts = actions(strategy, d, _occurrences(d, local), fb_events(d) if strategy == "fb" else None)
    base = acts.base_total()
    out = np.zeros((local.shape[0], 2), dtype=np.int64)
    for b in range(local.shape[0]):
        g = _host_dp.solve(acts, b)[1:]
        T = int(tokens[b])
        out[b] = (int(base[b]) * T + int(np.maximum(T - g, 0).sum()), int(base[b]) + int((g <= 0).sum()))
    return out


def cell_frontier_areas(test: MeasurementSet, cell: int, strategy: str, rows: np.ndarray, *,
                        engine: str = "auto") -> np.ndarray:
    """int64[rep, 2] per replicate: ``∫_0^T F(b) db`` of `cell`'s `strategy` frontier (reward x
    tokens) and `F(0)`, on the draw `rows` int64[rep, slot, draw] (rows of `test`, -1 pads;
    `weights`' `on_cell` form). `engine`: "auto" (numba when installed), "cpu" or "host"."""
    cell_rows, d = _cell_data(test, cell)
    ok = rows >= 0
    local = np.where(ok, np.searchsorted(cell_rows, np.where(ok, rows, cell_rows[0])), -1)
    lend = d.L[:, -1].astype(np.int64)
    tokens = np.where(ok, lend[np.maximum(local, 0)], 0).sum(axis=(1, 2))
    if engine == "host" or (engine == "auto" and not _cpu.available()):
        return _host_areas(strategy, d, local, tokens)
    local_q = np.repeat(np.arange(d.num_questions), np.diff(d.qoff)).astype(np.int64)
    return _cpu.frontier_area_batch(strategy, _cpu.cpu_cell(d), local_q, local, tokens,
                                    _host_dp.dtype_for(int(tokens.max(initial=0))))


def _point_rows(test: MeasurementSet, cell: int) -> np.ndarray:
    """int64[1, question, draw]: the evaluated split itself as one replicate's draw."""
    cell_rows, d = _cell_data(test, cell)
    R = np.diff(d.qoff)
    out = np.full((1, d.num_questions, int(R.max())), -1, dtype=np.int64)
    for q in range(d.num_questions):
        out[0, q, :R[q]] = cell_rows[d.qoff[q]:d.qoff[q + 1]]
    return out


def macro_frontier(test: MeasurementSet, W: np.ndarray, per_cell: dict[int, np.ndarray]) -> np.ndarray:
    """float64[rep] the macro ``∫ F dx`` over [0, 1] on the draws `W`, chained as `macro_areas`
    chains ``∫ M`` (the same cells, weights and normalization; NaN where no cell was drawn)."""
    w = chain_weights(test)
    total = np.zeros(W.shape[0])
    norm = np.zeros(W.shape[0])
    for c in np.unique(test.cell):
        rows = np.flatnonzero(test.cell == c)
        Wc = W[:, rows].astype(np.float64)
        T = Wc @ test.L[rows, -1].astype(np.float64)
        P = Wc @ test.probes[rows].astype(np.float64)
        area = per_cell.get(int(c), np.zeros((W.shape[0], 2), dtype=np.int64)).astype(np.float64)
        ok = P > 0
        with np.errstate(invalid="ignore", divide="ignore"):
            # no thinking in the cell (T = 0): the frontier is its reward at no cost
            val = np.where(T > 0, area[:, 0] / np.where(T > 0, T * P, 1.0),
                           area[:, 1] / np.where(ok, P, 1.0))
        total += np.where(ok, w[c] * val, 0.0)
        norm += np.where(ok, w[c], 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return total / norm


def frontier_draws(test: MeasurementSet, replicates: int, seed: int, strategies: Sequence[str],
                   *, engine: str = "auto") -> tuple[np.ndarray, dict[str, np.ndarray], dict[str, float]]:
    """The leaderboard's draw `W` (`weights`), and per strategy the macro ``∫ F dx`` on each of
    its replicates (float64[rep]) and on the evaluated split itself (the point estimate)."""
    cell_of = {(int(test.cell_model[c]), int(test.cell_group[c])): int(c) for c in np.unique(test.cell)}
    per: dict[str, dict[int, np.ndarray]] = {s: {} for s in strategies}

    def on_cell(model: int, group: int, rows: np.ndarray) -> None:
        c = cell_of.get((model, group))
        if c is not None:
            for s in strategies:
                per[s][c] = cell_frontier_areas(test, c, s, rows, engine=engine)

    W = weights(test, replicates, seed, on_cell=on_cell)
    ones = np.ones((1, test.num_trajectories), dtype=np.int32)
    point = {s: float(macro_frontier(test, ones, {c: cell_frontier_areas(
        test, c, s, _point_rows(test, c), engine=engine) for c in cell_of.values()})[0])
        for s in strategies}
    return W, {s: macro_frontier(test, W, per[s]) for s in strategies}, point
