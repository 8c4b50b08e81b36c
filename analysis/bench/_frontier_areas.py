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
exact integer (`otbench.analysis.frontier.replicate_areas`, with numba in
the compiled CPU kernels, else in the NumPy DP; the same integers).
"""

from collections.abc import Sequence

import numpy as np
from otbench.analysis.frontier import point_rows, replicate_areas
from otbench.analysis.measurement import MeasurementSet

from ._draws import chain_weights, weights


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
                per[s][c] = replicate_areas(test, c, s, rows, engine=engine)

    W = weights(test, replicates, seed, on_cell=on_cell)
    ones = np.ones((1, test.num_trajectories), dtype=np.int32)
    point = {s: float(macro_frontier(test, ones, {c: replicate_areas(
        test, c, s, point_rows(test, c), engine=engine) for c in cell_of.values()})[0])
        for s in strategies}
    return W, {s: macro_frontier(test, W, per[s]) for s in strategies}, point
