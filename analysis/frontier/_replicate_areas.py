"""The exact area under a cell's oracle frontier on each replicate of a draw (docs/rules.md).

The OTBench leaderboard's gap-area intervals need, per replicate, ``∫_0^T F(b) db``
of a strategy's frontier `F` (largest reward whose least cost is `<= b`) over the
replicate's own full-thinking tokens `T`, not its values on a budget grid. With
`g[r]` the least cost of an offset reward of at least `r` and `base` the reward
every unit gets at no cost, the area is an exact integer:
``base * T + Σ_{r >= 1} max(0, T - g[r])`` (level `r` is held on `[g[r], T]`).

Units are those of the frontier bootstrap: DR and FB units the drawn question
occurrences (actions recomputed from their drawn trajectories), DEE units the
drawn trajectories. With numba the DP runs in the compiled CPU kernels
(`_cpu.frontier_area_batch`, replicates in parallel); without it in the NumPy
DP (`_host_dp`), one replicate at a time; both give the same integers (tested).
"""

import numpy as np
from otbench.analysis.measurement import MeasurementSet

from . import _cpu, _host_dp
from ._units import CellData, Occurrences, actions, cell_data, fb_events
from otbench.errors import ArgumentError


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
    occ_id = np.full(local.shape[:2], -1, dtype=np.int64)
    occ_id[b, s] = np.arange(b.size)
    vb, vs, vj = np.nonzero(local >= 0)                        # every drawn row, by occurrence
    o = occ_id[vb, vs]
    mult = np.bincount(start[o] + local[vb, vs, vj] - d.qoff[q[o]], minlength=int(R.sum()))
    return Occurrences(problem=b.astype(np.int64), question=q.astype(np.int64), mult=mult,
                       num_problems=local.shape[0])


def _host_areas(strategy: str, d: CellData, local: np.ndarray, tokens: np.ndarray,
                chunk: int = 32) -> np.ndarray:
    out = np.zeros((local.shape[0], 2), dtype=np.int64)
    ev = fb_events(d) if strategy == "fb" else None
    # a chunk of replicates at a time: `_host_dp.solve` scans every unit of `acts` per problem
    for first in range(0, local.shape[0], chunk):
        part = local[first:first + chunk]
        acts = actions(strategy, d, _occurrences(d, part), ev)
        base = acts.base_total()
        for b in range(part.shape[0]):
            g = _host_dp.solve(acts, b)[1:]
            T = int(tokens[first + b])
            out[first + b] = (int(base[b]) * T + int(np.maximum(T - g, 0).sum()),
                              int(base[b]) + int((g <= 0).sum()))
    return out


def replicate_areas(test: MeasurementSet, cell: int, strategy: str, rows: np.ndarray, *,
                        engine: str = "auto") -> np.ndarray:
    """int64[rep, 2] per replicate: ``∫_0^T F(b) db`` of `cell`'s `strategy` frontier (reward x
    tokens) and `F(0)`, on the draw `rows` int64[rep, slot, draw] (rows of `test`, -1 pads;
    one row per drawn question occurrence). `engine`: "auto" (numba when installed), "cpu" or "host"."""
    if engine not in ("auto", "cpu", "host"):
        raise ArgumentError(f"`engine` must be auto, cpu or host, got {engine!r}")
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


def point_rows(test: MeasurementSet, cell: int) -> np.ndarray:
    """int64[1, question, draw]: the evaluated split itself as one replicate's draw."""
    cell_rows, d = _cell_data(test, cell)
    R = np.diff(d.qoff)
    out = np.full((1, d.num_questions, int(R.max())), -1, dtype=np.int64)
    for q in range(d.num_questions):
        out[0, q, :R[q]] = cell_rows[d.qoff[q]:d.qoff[q + 1]]
    return out
