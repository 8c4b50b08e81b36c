"""Per-trajectory stopping positions of one method at one θ, as the evaluator computes them (docs/rules.md).

The evaluator reports means; a certificate of an online run needs the
position of every test trajectory. `stop_positions` fits the method on
train / validation exactly as `evaluate` does (`Method.prepare`) and walks
the split with the same walk (`_walk.positions`), so the positions are the
ones behind OTBench's point at that θ.
"""

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np
from otbench.analysis.measurement import MeasurementSet
from otbench.analysis.methods import Method, resolve, signal_tokens, units_of

from . import _walk as walk
from ._evaluate import DEFAULT_THETA_POINTS
from otbench.errors import ArgumentError


def stop_positions(ms: MeasurementSet, method: Any, theta: float, *, split: str = "test",
                   options: Mapping[str, Any] | None = None,
                   stored_features: Mapping[str, Mapping] | None = None
                   ) -> tuple[np.ndarray, np.ndarray, Method]:
    """(rows of `ms` in `split`, int64 positions `k` there, the fitted `Method`) at `theta`.

    FB methods also give their caps: ``method.decide(units, theta)``.
    """
    names = {"train": 0, "validation": 1, "test": 2}
    if split not in names:
        raise ArgumentError(f"`split` must be one of {', '.join(names)}, got {split!r}")
    if ms.split is None or not np.any(ms.split == names[split]):
        raise ArgumentError(f"the set has no {split} trajectories; assign a split first (`otbench split`)")
    m = resolve(method, **dict(options or {}))
    m.prepare(ms, [float(theta)], None, stored_features, DEFAULT_THETA_POINTS)
    rows = np.flatnonzero(ms.split == names[split])
    test = ms.take(rows)
    unit, units = units_of(test, stored_features)
    k = walk.positions(test, unit, units, m, float(theta))
    return rows, np.asarray(k, dtype=np.int64), m


def sweep_stops(ms: MeasurementSet, method: Any, rows: Any, *, points: int = 5,
                options: Mapping[str, Any] | None = None,
                stored_features: Mapping[str, Mapping] | None = None
                ) -> tuple[tuple[float, ...], np.ndarray, Method]:
    """(θs, int64[θ, rows] stops, the fitted `Method`): `method` at `points` θs of its sweep.

    The method is fit once on `ms`'s train / validation splits, exactly as
    `evaluate` and `stop_positions` fit it (`Method.prepare`, the default
    sweep), and `rows` of `ms` -- any split -- are walked with the same walk at
    each chosen θ: the sweep's first and last values and the evenly spaced
    ones between (all of them when the sweep has at most `points`). A row of
    the train or validation split is then an in-sample stop; a test row's stop
    is the one `stop_positions` gives at that θ.
    """
    if isinstance(points, bool) or not isinstance(points, int) or points < 1:
        raise ArgumentError(f"`points` must be an integer >= 1, got {points!r}")
    if ms.split is None or not np.any(ms.split >= 0):
        raise ArgumentError("the set has no split assignment; assign one first (`otbench split`)")
    m = resolve(method, **dict(options or {}))
    sweep = m.prepare(ms, None, None, stored_features, DEFAULT_THETA_POINTS)
    pick = np.unique(np.round(np.linspace(0, len(sweep) - 1, min(points, len(sweep)))).astype(int))
    thetas = tuple(float(sweep[i]) for i in pick)
    rows = np.asarray(rows, dtype=np.int64).reshape(-1)
    sub = ms.take(rows)                          # sorted: columns are put back in `rows` order
    unit, units = units_of(sub, stored_features)
    k = np.array([walk.positions(sub, unit, units, m, t) for t in thetas], dtype=np.int64)
    k = k.reshape(len(thetas), rows.size)[:, np.argsort(np.argsort(rows, kind="stable"))]
    return thetas, k, m


def offline_point(ms: MeasurementSet, method: Any, theta: float, *, split: str = "test") -> dict[str, Any]:
    """OTBench's point of `method` at `theta` per trajectory, for an online certificate.

    Returns ``rows`` (of `ms` in `split`), their stops ``k``, the net rule's
    ``signal_tokens`` and ``paid`` decisions per row (`signal_tokens` with
    one token per decision, nothing decoded, no partial block), and the declared
    ``prefill`` (+ helper FLOPs) per decision. Assigns the default split
    first when `ms` has none.
    """
    from ._splits import assign_splits

    if ms.split is None or not np.any(ms.split >= 0):
        ms = assign_splits(ms)
    rows, k, fitted = stop_positions(ms, method, theta, split=split)
    test, cost = ms.take(rows), fitted.signal_cost
    one = None if cost is None else dataclasses.replace(cost, prefill=1, decoded=0, flops_tokens=0,
                                                         recorded=None)
    return {"rows": rows, "k": k, "signal_tokens": signal_tokens(test, fitted.strategy, cost, k),
            "paid": signal_tokens(test, fitted.strategy, one, k, block=1),   # decisions, no block
            "prefill": 0 if cost is None else cost.prefill + cost.flops_tokens}
