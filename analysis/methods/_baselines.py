"""The three OTBench baselines, one per strategy (docs/rules.md).

* `ThinkSwitcher` (DR, ``thinkswitcher``): per model, a ridge regression
  from question features to the question's mean probe accuracy with no
  thinking (each trajectory at its latest position with `L = 0`, the
  oracle's DR zero action) and at its end (`k = n`); both predictions are
  clipped to [0, 1]; think when the predicted gain exceeds `θ`.
* `PredictiveScheduling` (FB, ``predictive-scheduling``): per model, a
  ridge regression from question features to `log1p` of the question's mean
  `L(k*)` (`k*` the earliest maximizer of the probe curve, docs/rules.md; the log
  because token counts span three orders of magnitude); the cap is `θ` times
  the prediction `expm1(·)` (floored at 0).
* `ThinkBrakeOneContext` (DEE, ``thinkbrake-onectx``): stop at the first
  boundary where the recorded ``margin`` signal (log-probability of the most
  likely non-ending token minus that of the thinking-end token, both read in
  one context, docs/rules.md) is `<= θ`. Nothing is learned; the train split
  only places the default `θ` sweep. It is otbench's departure from
  ThinkBrake's own rule (`_thinkbrake.ThinkBrake`, ``thinkbrake``): it asks at
  every boundary, not only where the text ends with ``.\n\n``; it reads one
  context, not two; it takes the most likely non-end token, not the token
  sampled; and it is charged one prefill token per check (plus the prefix's
  partial block, `_cost`). Every probe set records its signal, and the online
  logits processor runs it (its ``margin`` is the recorded ``margin_own``).

Learned parts are trained on the train split only; the ridge penalty is
picked per model on the validation split by mean squared error (ties to the
larger penalty; `_methods_features.ridge_select`). Default sweeps are placed
from train (and validation) quantities, never from the test split:

* ThinkSwitcher: `θ = -1` (every question with a predicted gain above -1
  thinks), quantiles of the predicted gains of the train and validation
  units, `θ = 1` (nothing thinks);
* PredictiveScheduling: `θ = 0` (no thinking) and a geometric sweep from
  1/8 to 32;
* ThinkBrakeOneContext: quantiles of the train margins at the boundaries where it
  can stop (`k < n`), widened by 1 nat at each end.
"""

from typing import Any

import numpy as np
from otbench.analysis.measurement import MeasurementSet

from . import _detmath as detmath
from ._cost import SignalCost
from ._features import DEFAULT_LAMBDAS, PerModelRidge, featurizer, unit_mean, units_of
from ._contract import UnitTable
from otbench.errors import ArgumentError

# -- supervision targets (per trajectory; averaged per unit) -------------------------

def zero_position(L: np.ndarray) -> np.ndarray:
    """int64[traj] latest position with `L = 0` (no thinking retained)."""
    return (np.asarray(L) == 0).sum(axis=1).astype(np.int64) - 1


def endpoint_accuracies(ms: MeasurementSet) -> tuple[np.ndarray, np.ndarray]:
    """(float64[traj] probe accuracy with no thinking, float64[traj] at `k = n`)."""
    t = np.arange(ms.num_trajectories)
    p = ms.probes.astype(np.float64)
    a0 = ms.C[t, zero_position(ms.L)] / p
    a1 = ms.C[t, ms.n] / p
    return a0, a1


def earliest_max_tokens(ms: MeasurementSet) -> np.ndarray:
    """float64[traj] `L(k*)`, `k*` the earliest maximizer of `C` over `0..n` (docs/rules.md).

    Padding repeats `C(n)`, so the earliest maximizer of the padded row is
    the earliest valid one.
    """
    k = np.argmax(ms.C, axis=1)
    return ms.L[np.arange(ms.num_trajectories), k].astype(np.float64)


def _grid_between(lo: float, hi: float, inner: np.ndarray, n: int) -> list[float]:
    """`n` values: `lo`, quantiles of `inner` at even levels, `hi`; duplicates removed."""
    if n == 1:
        return [float(np.median(inner))] if inner.size else [0.0]
    levels = np.linspace(0.0, 1.0, n)[1:-1]
    mids = np.quantile(inner, levels).tolist() if inner.size else []
    out = sorted(set([float(lo), *map(float, mids), float(hi)]))
    return out


class _Learned:
    """Shared plumbing: a featurizer, per-model ridge, prediction cache."""

    def __init__(self, features: Any = "hashed", lambdas: tuple[float, ...] = DEFAULT_LAMBDAS):
        self.features = featurizer(features)
        self.lambdas = tuple(float(x) for x in lambdas)
        self._ridge: PerModelRidge | None = None
        self._cache: tuple[UnitTable, np.ndarray] | None = None

    def _targets(self, ms: MeasurementSet, stored: Any) -> tuple[UnitTable, np.ndarray]:
        raise NotImplementedError

    def fit(self, train: MeasurementSet, validation: MeasurementSet, *,
            stored_features: Any = None) -> None:
        units, Y = self._targets(train, stored_features)
        vunits, Yv = self._targets(validation, stored_features)
        self._ridge = PerModelRidge(self.features, self.lambdas)
        self._ridge.fit(units, Y, vunits, Yv)
        self._cache = None
        self._after_fit(units, vunits)

    def _after_fit(self, units: UnitTable, vunits: UnitTable) -> None:
        pass

    def _predict(self, units: UnitTable) -> np.ndarray:
        if self._ridge is None:
            raise ArgumentError(f"{self.name}: call fit(train, validation) before deciding")
        # The evaluator asks once per θ with the same table: predict once. The
        # cache holds the table itself (not its id, which a new object could reuse).
        if self._cache is None or self._cache[0] is not units:
            self._cache = (units, self._ridge.predict(units))
        return self._cache[1]

    def config(self) -> dict[str, Any]:
        feats = self.features.config() if callable(getattr(self.features, "config", None)) \
            else type(self.features).__name__
        chosen = {} if self._ridge is None else dict(sorted(self._ridge.chosen.items()))
        return {"features": feats, "lambdas": list(self.lambdas), "chosen_lambda": chosen}


class ThinkSwitcher(_Learned):
    """DR router: think when the predicted accuracy gain of thinking exceeds `θ`."""

    name = "thinkswitcher"
    strategy = "dr"
    summary = "ThinkSwitcher-style router: ridge-predicted accuracy gain of thinking > theta"
    signal_cost = SignalCost(note="hashed text features: no model tokens")

    def _targets(self, ms: MeasurementSet, stored: Any) -> tuple[UnitTable, np.ndarray]:
        unit, units = units_of(ms, stored)
        a0, a1 = endpoint_accuracies(ms)
        Y = np.stack([unit_mean(unit, a0, len(units)), unit_mean(unit, a1, len(units))], axis=1)
        return units, Y

    def predicted_gain(self, units: UnitTable) -> np.ndarray:
        """float64[unit] clipped predicted accuracy at `k = n` minus at no thinking."""
        p = np.clip(self._predict(units), 0.0, 1.0)
        return p[:, 1] - p[:, 0]

    def _after_fit(self, units: UnitTable, vunits: UnitTable) -> None:
        self._fit_gains = np.concatenate([self.predicted_gain(units), self.predicted_gain(vunits)])
        self._cache = None

    def theta_grid(self, n: int) -> list[float]:
        return _grid_between(-1.0, 1.0, self._fit_gains, n)

    def route(self, units: UnitTable, theta: float) -> np.ndarray:
        return self.predicted_gain(units) > theta


class PredictiveScheduling(_Learned):
    """FB budget: cap each question at `θ` times its predicted mean `L(k*)`."""

    name = "predictive-scheduling"
    strategy = "fb"
    summary = "Predictive-Scheduling-style cap: theta x ridge-predicted mean L(k*)"
    signal_cost = SignalCost(note="hashed text features: no model tokens")

    def _targets(self, ms: MeasurementSet, stored: Any) -> tuple[UnitTable, np.ndarray]:
        unit, units = units_of(ms, stored)
        target = unit_mean(unit, earliest_max_tokens(ms), len(units))
        return units, detmath.log1p(target)[:, None]

    def predicted_tokens(self, units: UnitTable) -> np.ndarray:
        """float64[unit] predicted mean `L(k*)` in tokens (>= 0)."""
        return np.maximum(detmath.expm1(self._predict(units)[:, 0]), 0.0)

    def theta_grid(self, n: int) -> list[float]:
        if n == 1:
            return [1.0]
        return [0.0] + detmath.geomspace(1 / 8, 32.0, n - 1)

    def budget(self, units: UnitTable, theta: float) -> np.ndarray:
        return theta * self.predicted_tokens(units)


class ThinkBrakeOneContext:
    """DEE early exit: stop at the first boundary whose one-context margin signal is `<= θ`."""

    summary = ("otbench's one-context reading of ThinkBrake, not its source's rule: first boundary "
               "with margin signal <= theta (top non-end token vs the end token, one context)")
    online = "processor"        # the logits processor reads the margin per step

    name = "thinkbrake-onectx"
    strategy = "dee"
    # The margin needs the thinking-end token's log-probability at the
    # boundary; a server returning only top-k log-probabilities gives it by a
    # forked request with that one token appended: one prefill token per check.
    signal_cost = SignalCost(prefill=1, paid="asked",
                             note="one forked prefill token per boundary for the end token's "
                                  "log-probability")

    def __init__(self, signal: str = "margin"):
        self.signal = signal
        self.signals = (signal,)
        self._train_margins: np.ndarray | None = None

    def fit(self, train: MeasurementSet, validation: MeasurementSet) -> None:
        if self.signal not in train.signals:
            raise ArgumentError(f"{self.name} needs the per-position signal {self.signal!r} "
                                f"(docs/rules.md); the set records: "
                                f"{', '.join(sorted(train.signals)) or 'none'}")
        # The boundaries where a stop is asked: k < n.
        can_stop = np.arange(train.num_positions)[None, :] < train.n[:, None]
        self._train_margins = np.asarray(train.signals[self.signal])[can_stop]

    def theta_grid(self, n: int) -> list[float]:
        m = self._train_margins
        if m is None or m.size == 0:
            return np.linspace(-5.0, 10.0, n).tolist()
        return _grid_between(float(m.min()) - 1.0, float(m.max()) + 1.0, m, n)

    def stop(self, view, theta: float) -> np.ndarray:
        return view.signal(self.signal) <= theta

    # Online (`Method.online_parameters`): the processor rebuilds it on the same signal.
    def online_parameters(self, model: str | None, theta: float) -> dict[str, Any]:
        return {"signal": self.signal}

    @classmethod
    def from_online(cls, params: dict[str, Any]) -> "ThinkBrakeOneContext":
        return cls(**params)

    def device_signal(self) -> str:
        # Its stop is one threshold on one signal: V2 decides it on the device. The
        # processor reads the margin in the model's own context, the recorded margin_own.
        return "margin" if self.signal == "margin_own" else self.signal

    def config(self) -> dict[str, Any]:
        return {"signal": self.signal}
