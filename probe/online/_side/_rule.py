"""The side-request controller's rule: a `Method` run online, its probe schedule from its declared cost.

`FieldRule` is what `_controller.SideController` asks at each decision point:
which positions to probe before or after deciding (from the method's
`SignalCost`: ``paid``, ``first``, ``max_decisions``), whether the probe needs
log-probabilities (the method reads ``answer_conf``), an FB method's cap,
and the decision itself -- the method's own ``stop(view, theta)`` on an
`OnlineView` of the one trajectory, the call OTBench's offline walk makes.
No method is known here by name.
"""

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from otbench.analysis.methods import METHODS, SIDE_SIGNALS, MethodError, resolve

from .._processor._rule import ask_stop, one_unit, trajectory_view
from .._request import OnlineControlError
from ._probes import probes_of

if TYPE_CHECKING:
    from ._controller import SideJob

RECORD = "record"
"""A pseudo-method: probe every position `0..n` and never stop (the field signals of a stored trajectory)."""
FIELD_NAMES = SIDE_SIGNALS


def side_methods() -> tuple[str, ...]:
    """The registered methods that run under this controller (``online = "side"``)."""
    return tuple(n for n in METHODS if resolve(n).online == "side")


class FieldRule:
    """A method and its θ as the controller runs it, its probe schedule read from its declared
    signal cost (`Method.signal_cost`; module docstring).

    `method`: a registered name, a plug-in, a method object or a `Method` whose ``online`` is
    ``"side"`` (DEE: its decisions read only `SIDE_SIGNALS`; FB: a per-trajectory cap, the
    job's `SideJob.cap` or the method's ``budget`` of a unit with no question data), or
    `RECORD`. `options`: keyword arguments for the method's class (e.g. DEER's
    ``max_judge_steps``). Probes: with ``paid = "asked"`` the decision at `k` reads the probe
    at `k` (from ``first``, at most ``max_decisions`` of them); with ``"before_stop"`` the
    probe at `k` is decoded after deciding to go on and read by the next decision.
    """

    def __init__(self, method: Any, theta: float, *, options: Any = None):
        t = theta
        self.record = isinstance(method, str) and method == RECORD
        if self.record:
            self.m, self.name, self.strategy = None, RECORD, "dee"
        else:
            if isinstance(method, str) and method not in METHODS and ":" not in method:
                raise OnlineControlError(f"method {method!r} does not run as a request-level "
                                         f"controller (it runs: {', '.join(side_methods())})")
            try:
                self.m = resolve(method, **dict(options or {}))
            except MethodError as e:
                raise OnlineControlError(str(e)) from None
            self.name, self.strategy = self.m.name, self.m.strategy
            if self.m.online != "side":
                raise OnlineControlError(f"method {self.name!r} does not run as a request-level "
                                         f"controller (it runs: {', '.join(side_methods())})")
        if isinstance(t, bool) or not isinstance(t, (int, float)) or t != t:
            raise OnlineControlError(f"θ of {self.name} must be a number, got {t!r}")
        self.theta = float(t)
        cost = None if self.m is None else self.m.signal_cost
        self.paid = cost.paid if cost is not None else "asked"
        self.first = cost.first if cost is not None else 0
        self.max_decisions = cost.max_decisions if cost is not None else None
        self.is_cap = self.strategy == "fb"
        if self.is_cap and not self.theta >= 0:
            raise OnlineControlError(f"θ of {self.name} is a thinking-token cap >= 0, got {t}")
        self._caps: dict[str, float] = {}

    @property
    def method(self) -> str:
        """The method's name (as results and messages give it)."""
        return self.name

    @property
    def needs_conf(self) -> bool:
        return self.record or "answer_conf" in self.m.signals

    @property
    def probe_kinds(self) -> tuple[str, ...]:
        """The probes issued at a probed position (`_probes.probes_of`): otbench's STP probe,
        Dynasor-CoT's own, DEER's own."""
        return probes_of((), True) if self.record else probes_of(self.m.signals)

    @property
    def probes(self) -> bool:
        return self.record or any(s in SIDE_SIGNALS for s in self.m.signals)

    def probe_before(self, k: int) -> bool:
        """The decision at `k` reads the probe at `k` (decoded before deciding)."""
        if self.record:
            return True
        if not self.probes or self.paid != "asked" or k < self.first:
            return False
        return self.max_decisions is None or k - self.first + 1 <= self.max_decisions

    def probe_after(self, k: int) -> bool:
        """The probe at `k` is decoded after deciding to go on (read by the next decision)."""
        return not self.record and self.probes and self.paid == "before_stop" and k >= self.first

    def waits_for(self, k: int) -> tuple[int, ...]:
        """Positions whose probe must have arrived before deciding at `k`."""
        if not self.record and self.paid == "before_stop":
            return (k - 1,) if self.probes and k - 1 >= self.first else ()
        return (k,) if self.probe_before(k) else ()

    def paid_through(self, position: int) -> int:
        """The last position whose probe the decisions up to a stop at `position` paid for."""
        return position - 1 if self.paid == "before_stop" else position

    def cap(self, job: "SideJob") -> float:
        """An FB method's thinking-token cap for `job` (`SideJob.cap`, else its ``budget`` of a unit
        with no question data)."""
        if job.cap is not None:
            return float(job.cap)
        if job.task not in self._caps:
            out = np.asarray(self.m.call("budget(units, theta)", self.m.decide, one_unit(job.task),
                                         self.theta), dtype=np.float64).reshape(-1)
            if out.shape != (1,) or not out[0] >= 0:
                raise OnlineControlError(f"method {self.name!r}: budget(units, theta) must give one "
                                         f"cap >= 0 per unit, got {out.tolist()}")
            self._caps[job.task] = float(out[0])
        return self._caps[job.task]

    def stop(self, signals: dict[str, list], k: int, next_length: int | None,
             job: "SideJob | None" = None, lengths: Sequence[int] = (), row: int = 0) -> bool:
        """The method's decision at position `k` from this trajectory's signals at `0..k`.

        A DEE method decides through its own ``stop(view, theta)`` on an `OnlineView` of this
        one trajectory (row id `row`, its decision lengths `lengths` so far), exactly as
        OTBench's offline walk asks it.
        """
        if self.record:
            return False
        if self.is_cap:
            cap = self.theta if job is None else self.cap(job)
            return next_length is not None and next_length > cap
        hist = {name: np.array([[np.nan if v is None else v for v in signals[name][:k + 1]]
                                + [np.nan] * (k + 1 - len(signals[name][:k + 1]))])
                for name in SIDE_SIGNALS}
        toks = np.array([[int(x) for x in lengths[:k + 1]] + [-1] * (k + 1 - len(lengths[:k + 1]))],
                        dtype=np.float64)
        view = trajectory_view(int(k), row, job.task if job is not None else "math", hist, toks,
                               SIDE_SIGNALS, "side requests compute")
        return ask_stop(self.m, view, self.theta)
