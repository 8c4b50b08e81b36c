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
