"""Bootstrap intervals of the leaderboard: ranks, the gap behind the best, each method's own gap area.

Ranking inside a strategy (`_leaderboard.leaderboard_key`) is by the macro
gap area over `[0, 1]`, ``gap_full = ∫ (F - M) dx``, chained over cells.
Every method of a strategy faces the same frontier `F` in a replicate, so
``gap_full(i) - gap_full(j) = ∫ M_j - ∫ M_i``: ranks and the gap behind the
best method are functions of the methods' own step curves alone, and need
no frontier per replicate (a method's own gap area does). (The realized-share tie-break is monotone
in the same ``∫ M`` within a replicate, so it never reorders what the gap
does not.) What this gives, per method, over `replicates` draws:

* ``rank_interval``: the 2.5 and 97.5 percentiles of its rank within its
  strategy (lower / higher integer ranks: never narrower than the draws);
  methods tied in a replicate share their best rank there, so methods tied
  in every replicate get equal intervals;
* ``gap_behind_best`` and its interval: the macro ``gap_full`` minus that of
  the strategy's best method on the point estimate, per replicate -- paired,
  since all methods are scored on the same drawn trajectories; 0 inside the
  interval says the data do not separate the two;
* ``gap_area_full`` and its interval: the method's own macro gap area over
  `[0, 1]`, ``∫ F - ∫ M``, with ``∫ F`` its strategy's exact frontier
  re-solved on every replicate (`_frontier_areas`; this one does need the
  frontier), and ``gap_area_full_outside``: why the estimate lies outside
  its interval, measured on the replicates, or None (`own_interval`);
* the same for the net points (``net_rank_interval``,
  ``net_gap_behind_best``, ``net_gap_area_full``): costs plus the signal
  tokens of each stop, against the same frontier.

The draw is OTBench's two-stage paired bootstrap of the evaluated split
(docs/rules.md "The bootstrap"): stage 1 draws, per group, as many questions
as the group has, with replacement, one draw shared by every model and every
method; stage 2 draws, for each drawn (model, question), as many of its
trajectories as it has, with replacement. A replicate is a multiplicity per
trajectory, and every sum of the point estimate (retained tokens `L(k)`,
correct probes `C(k)`, probes `P`, full thinking `L(n)`, the zero-thinking
reward) is taken with those multiplicities. Draws come from NumPy's PCG64
seeded with the recorded `seed`; a cell none of whose trajectories was drawn
(possible only for a cell of one model where other models have more
questions) is left out of that replicate's chain.

Areas per replicate are float64 sums of integer step widths (exact to
~1e-15); the point estimates on the leaderboard stay the exact ones.
"""

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np
from otbench.analysis.measurement import SPLITS, MeasurementSet

from otbench.errors import ArgumentError

from ._draws import chain_weights

SEED = 20260721
"""The project's recorded bootstrap seed (docs/rules.md)."""
REPLICATES = 2000
PERCENTILES = (2.5, 97.5)


@dataclasses.dataclass(frozen=True)
class Stops:
    """What the intervals read of one evaluation: its stops and signal tokens on the split.

    Attributes:
      k: int64[θ, traj] stop position of each trajectory of the evaluated split per θ.
      signal: int64[θ, traj] the signal tokens each stop paid (the net rule).
    """

    k: np.ndarray
    signal: np.ndarray


def curve_area(cost: np.ndarray, reward: np.ndarray, zero: np.ndarray, total: np.ndarray) -> np.ndarray:
    """float64[rep] `∫_0^T M(b) db` of the step curve `M = max(zero, best reward with cost <= b)`.

    cost, reward: [rep, θ] per replicate the cell's retained (or net) tokens and reward per θ;
    zero, total: [rep]. In reward x token units (divide by `T * probes` for the area over [0, 1]).
    """
    order = np.argsort(cost, axis=1, kind="stable")
    c = np.take_along_axis(cost, order, axis=1).astype(np.float64)
    r = np.take_along_axis(reward, order, axis=1).astype(np.float64)
    xs = np.concatenate([np.zeros((c.shape[0], 1)), c], axis=1)
    ys = np.maximum.accumulate(np.concatenate([zero[:, None].astype(np.float64), r], axis=1), axis=1)
    hi = total.astype(np.float64)[:, None]
    left = np.clip(xs, 0.0, hi)
    right = np.clip(np.concatenate([xs[:, 1:], hi], axis=1), 0.0, hi)
    return np.sum(ys * (right - left), axis=1)


def macro_areas(test: MeasurementSet, W: np.ndarray, stops: Stops, zero_k: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray]:
    """float64[rep] the macro `∫ M dx` over [0, 1] of one method on every replicate `W`: (gross, net)."""
    t = np.arange(test.num_trajectories)
    Lk = test.L[t[None, :], stops.k].astype(np.float64)               # [θ, traj]
    Sk = stops.signal.astype(np.float64)
    Ck = test.C[t[None, :], stops.k].astype(np.float64)
    Wf = W.astype(np.float64)
    w = chain_weights(test)
    total = np.zeros((2, W.shape[0]))
    norm = np.zeros(W.shape[0])
    for c in np.unique(test.cell):
        rows = np.flatnonzero(test.cell == c)
        Wc = Wf[:, rows]
        T = Wc @ test.L[rows, -1].astype(np.float64)
        P = Wc @ test.probes[rows].astype(np.float64)
        zero = Wc @ test.C[rows, zero_k[rows]].astype(np.float64)
        cost, reward = Wc @ Lk[:, rows].T, Wc @ Ck[:, rows].T
        ok = P > 0
        for i, cc in enumerate((cost, cost + Wc @ Sk[:, rows].T)):
            area = curve_area(cc, reward, zero, T)
            with np.errstate(invalid="ignore", divide="ignore"):
                # no thinking in the cell (T = 0): every point costs 0, so the curve is its best
                # reward there, as `_areas.cell_areas` reads it (at least the zero-thinking one)
                at0 = np.maximum(zero, reward.max(axis=1, initial=0.0))
                val = np.where(T > 0, area / np.where(T > 0, T * P, 1.0), at0 / np.where(ok, P, 1.0))
            total[i] += np.where(ok, w[c] * val, 0.0)
        norm += np.where(ok, w[c], 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return total[0] / norm, total[1] / norm


def _ranks(areas: np.ndarray) -> np.ndarray:
    """int64[rep, method] rank within the strategy per replicate: the larger macro `∫ M` first
    (the smaller gap area); tied methods share the best rank of their tie (1, 1, 3).

    A tie is not broken by the method's name here: two methods with the same
    curve in a replicate are not separated by it, and a name order would give
    identical methods different rank intervals (in the demo, 1-4 and 3-6 for two
    methods tied at every draw).
    """
    key = np.where(np.isnan(areas), -np.inf, areas)
    return 1 + (key[:, None, :] > key[:, :, None]).sum(axis=2)


def intervals(ms: MeasurementSet, results: Sequence[Any], *, replicates: int = REPLICATES,
              seed: int = SEED) -> dict[str, dict[str, Any]]:
    """Per method name: rank intervals and the gap behind the best, gross and net (module docstring).

    `results` are `BenchResult`s of one split of `ms`, each carrying its `stops`.
    """
    if isinstance(replicates, bool) or not isinstance(replicates, (int, np.integer)) or replicates < 1:
        raise ArgumentError(f"`replicates` must be a positive integer, got {replicates!r}")
    if any(getattr(r, "stops", None) is None for r in results):
        raise ArgumentError("leaderboard intervals need results of `evaluate` (they carry the stops)")
    split = {r.split for r in results}
    if len(split) != 1:
        raise ArgumentError(f"results come from different splits ({', '.join(sorted(split))})")
    test = ms.take(np.flatnonzero(ms.split == SPLITS.index(split.pop())))
    for r in results:
        if r.stops.k.shape[1] != test.num_trajectories:
            raise ArgumentError(f"result {r.method!r} was not evaluated on this set's split "
                                f"({r.stops.k.shape[1]} trajectories, the split has {test.num_trajectories})")
    from ._frontier_areas import frontier_draws
    from ._walk import zero_positions

    present = [s for s in ("dr", "fb", "dee") if any(r.strategy == s for r in results)]
    W, front, front_point = frontier_draws(test, int(replicates), int(seed), present)
    zero_k = zero_positions(test.L)
    out: dict[str, dict[str, Any]] = {}
    for strategy in ("dr", "fb", "dee"):
        group = [r for r in results if r.strategy == strategy]
        if not group:
            continue
        names = [r.method for r in group]
        both = [macro_areas(test, W, r.stops, zero_k) for r in group]
        ones = np.ones((1, test.num_trajectories), np.int32)
        point_both = [macro_areas(test, ones, r.stops, zero_k) for r in group]
        for net in (False, True):
            areas = np.stack([x[int(net)] for x in both], axis=1)
            point = np.array([x[int(net)][0] for x in point_both])
            best = int(sorted(range(len(group)), key=lambda i: (-point[i], names[i]))[0])
            ranks = _ranks(areas)
            behind = areas[:, [best]] - areas                      # gap_full(i) - gap_full(best)
            pre = "net_" if net else ""
            for i, r in enumerate(group):
                d = out.setdefault(r.method, {})
                d[f"{pre}rank_interval"] = [int(np.percentile(ranks[:, i], PERCENTILES[0], method="lower")),
                                            int(np.percentile(ranks[:, i], PERCENTILES[1], method="higher"))]
                b = behind[:, i][~np.isnan(behind[:, i])]
                d[f"{pre}gap_behind_best"] = float(point[best] - point[i])
                d[f"{pre}gap_behind_best_interval"] = [float(x) for x in np.percentile(b, PERCENTILES)] \
                    if b.size else [None, None]
                d[f"{pre}best"] = names[best]
                gap = front[strategy] - areas[:, i]              # its own gap area over [0, 1]
                d[f"{pre}gap_area_full"] = float(front_point[strategy] - point[i])
                d.update(own_interval(d[f"{pre}gap_area_full"], gap, pre))
    return out


def own_interval(estimate: float, reps: np.ndarray, pre: str = "") -> dict[str, Any]:
    """A method's own gap-area interval from its replicates (float64[rep], NaN: no cell drawn), and
    why the estimate lies outside it, measured on the replicates (None inside; docs/rules.md)."""
    x = reps[~np.isnan(reps)]
    if not x.size:
        return {f"{pre}gap_area_full_interval": [None, None], f"{pre}gap_area_full_outside": None}
    lo, hi = (float(v) for v in np.percentile(x, PERCENTILES))
    why = None
    if not lo <= estimate <= hi:
        side = "below" if np.mean(x < estimate) > np.mean(x > estimate) else "above"
        share = 100.0 * np.mean(x < estimate if side == "below" else x > estimate)
        why = (f"{share:.1f}% of its {x.size:,} defined replicates lie {side} the estimate (a gap "
               f"area is an oracle optimum re-solved on each draw minus the method's fixed stops, "
               f"so its replicates need not centre on the estimate)")
        if x.size < reps.size:
            why += f"; undefined in {reps.size - x.size:,} of {reps.size:,} replicates (no cell drawn)"
    return {f"{pre}gap_area_full_interval": [lo, hi], f"{pre}gap_area_full_outside": why}
