"""The leaderboard's bootstrap draw: multiplicities per trajectory, and the chain's cell weights.

Its own module because both the leaderboard's intervals (`_intervals`) and the
oracle frontier re-solved per replicate (`_frontier_areas`) read the same draw
(`_intervals`'s module docstring states it: docs/rules.md "The bootstrap").
"""

from collections.abc import Callable

import numpy as np
from otbench.analysis.measurement import MeasurementSet


def weights(ms: MeasurementSet, replicates: int, seed: int,
            on_cell: Callable[[int, int, np.ndarray], None] | None = None) -> np.ndarray:
    """int32[replicates, traj] multiplicities of the two-stage paired draw (module docstring).

    With `on_cell`, the same draw is also handed over occurrence by occurrence, once per
    (model, group): `on_cell(model, group, rows)`, `rows` int64[replicates, slot, draw] the rows
    of `ms` each drawn question occurrence drew (-1 pads; a slot without a first row is no
    occurrence). The oracle frontier needs it: its DR and FB units are the occurrences, which
    the multiplicities merge. Reading it never changes the random stream.
    """
    T = ms.num_trajectories
    out = np.zeros((replicates, T), dtype=np.int32)
    if not T:
        return out
    rng = np.random.default_rng(seed)
    group = ms.cell_group[ms.cell]
    model = ms.cell_model[ms.cell]
    seg_key = np.stack([model, ms.question], axis=1)
    order = np.lexsort((np.arange(T), ms.question, model))          # segments: (model, question)
    _, first, size = np.unique(seg_key[order], axis=0, return_index=True, return_counts=True)
    seg_of_q: dict[tuple[int, int], tuple[int, int]] = {}
    for f, n in zip(first, size):
        t = order[f]
        seg_of_q[(int(model[t]), int(ms.question[t]))] = (int(f), int(n))
    models = np.unique(model)
    for g in np.unique(group):
        pool = np.unique(ms.question[group == g])
        Q = pool.size
        drawn = rng.integers(0, Q, size=(replicates, Q))                            # stage 1
        counts = np.bincount((drawn + Q * np.arange(replicates)[:, None]).ravel(),
                             minlength=replicates * Q).reshape(replicates, Q)
        for m in models:
            occ = None
            if on_cell is not None:
                segs = [seg_of_q.get((int(m), int(q))) for q in pool]
                width = max((n for _, n in filter(None, segs)), default=0)
                occ = np.full((replicates, Q, width), -1, dtype=np.int64)
                slot = np.zeros(replicates, dtype=np.int64)
            for qi, q in enumerate(pool):
                seg = seg_of_q.get((int(m), int(q)))
                if seg is None:
                    continue
                f, n = seg
                hits = counts[:, qi]                                              # times q was drawn
                if not hits.any():
                    continue
                top = int(hits.max())
                # stage 2: per occurrence, n trajectories of the segment with replacement
                picks = rng.integers(0, n, size=(replicates, top, n))
                live = np.arange(top)[None, :, None] < hits[:, None, None]
                flat = (picks + n * np.arange(replicates)[:, None, None])[np.broadcast_to(live, picks.shape)]
                out[:, order[f:f + n]] += np.bincount(flat, minlength=replicates * n).reshape(
                    replicates, n).astype(np.int32)
                if occ is not None:
                    for j in range(top):
                        reps = np.flatnonzero(hits > j)
                        occ[reps, slot[reps], :n] = order[f + picks[reps, j]]
                        slot[reps] += 1
            if occ is not None and occ.shape[2]:
                on_cell(int(m), int(g), occ)
    return out


def chain_weights(ms: MeasurementSet) -> np.ndarray:
    """float64[cell] the equal-weight chain: 1 / (models x cells of the model)."""
    cm = np.asarray(ms.cell_model)
    present = np.unique(ms.cell)
    w = np.zeros(ms.num_cells)
    models = np.unique(cm[present])
    for m in models:
        cells = present[cm[present] == m]
        w[cells] = 1.0 / (models.size * cells.size)
    return w
