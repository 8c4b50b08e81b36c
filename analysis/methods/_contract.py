"""The OTBench method interface, its online view, and plug-in loading (docs/rules.md).

A *method* is any object with

* ``strategy``: ``"dr"``, ``"fb"`` or ``"dee"`` (docs/rules.md's action spaces);
* one decision function for its strategy, taking the control parameter `θ`:

  - DR  ``route(units: UnitTable, theta) -> bool[unit]``: think (True) or
    not, per decision unit (a (model, question) pair). Not thinking retains
    no thinking tokens: each trajectory stops at its latest position with
    ``L = 0`` (position 0 on segmented data), the oracle's DR zero action;
  - FB  ``budget(units: UnitTable, theta) -> float[unit]``: an absolute
    thinking-token cap per unit, ``>= 0`` (``inf`` = no cap); every
    trajectory of the unit stops at its latest position with ``L <= cap``;
  - DEE ``stop(view: OnlineView, theta) -> bool[active]``: called at each
    boundary ``k = 0, 1, ...`` for the trajectories still thinking, True to
    stop there (a trajectory that reaches its own end stops there anyway);

* optionally ``fit(train, validation)`` (two `MeasurementSet` splits: train
  supervises learned parts, validation picks hyper-parameters; the test
  split never reaches a method except through the decision calls); a `fit`
  that accepts the keyword ``stored_features`` also receives the stored
  question features (``_methods_features.units_of(train, stored_features)``
  gives its training units with them);
* optionally a default `θ` sweep: ``thetas`` (a sequence), or
  ``theta_grid(n) -> sequence`` / ``theta_range = (lo, hi)`` for
  ``--theta-grid N``; ``name``, ``signals`` (the recorded per-position
  signals a DEE method needs, checked up front), ``config()`` (JSON
  data, recorded in the output) and ``signal_cost`` (a `_cost.SignalCost`:
  what its signal costs per decision, for the net points) are optional too.

DR and FB decisions see a `UnitTable`: question text, group, dataset, the
model, and stored question-level features -- never a label or outcome.
DEE decisions are online: the evaluator walks all active trajectories in
lock step and hands the method an `OnlineView` built from buffers that the
walker fills one position at a time, so at boundary `k` nothing later than
`k` exists in memory the view can reach, and no `C`, `y` or `n` ever does
(see `OnlineView`). The walker never asks at a trajectory's last position:
reaching it is the model ending its thinking, observable online. Every walk
(one per `θ`) starts at ``k = 0``; a method keeping per-trajectory state
keyed by ``view.rows`` resets it there. Decisions must use only their own
trajectory's row: the evaluator re-walks a few trajectories alone and
rejects a method whose decisions change (`_otbench_walk.check_independent`).

Plug-ins load by ``"module:object"`` (the object may be a class, which is
instantiated without arguments, an instance, or a zero-argument factory);
built-ins load by name through a lazy registry like lm-evaluation-harness's.
"""

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, Protocol, runtime_checkable

import numpy as np

from otbench.errors import OtbenchError

STRATEGIES = ("dr", "fb", "dee")
DECISION = {"dr": "route", "fb": "budget", "dee": "stop"}


class MethodError(OtbenchError, ValueError):
    """A method that cannot be loaded or that broke the interface; the message says how."""


# -- what a method sees ----------------------------------------------------------

def _frozen(a: np.ndarray) -> np.ndarray:
    a = np.array(a, copy=True)          # an owned copy: `.base` reaches nothing else
    a.setflags(write=False)
    return a


@dataclasses.dataclass(frozen=True, eq=False)
class UnitTable:
    """Decision units of a split, one per (model, question) pair with trajectories.

    Everything here is known before a model thinks; there is no label,
    outcome, length or probe count.

    Attributes:
      model, group, dataset, question_id: str per unit.
      text: the question text per unit (None when not stored).
      model_index: int64[unit] index into `models`; group_index likewise.
      models, groups: name tables of the measurement set.
      features: name -> float64[unit, dim] stored question-level features
        (e.g. prompt embeddings written by the probe); may be empty.
    """

    model: tuple[str, ...]
    group: tuple[str, ...]
    dataset: tuple[str, ...]
    question_id: tuple[str, ...]
    text: tuple[str | None, ...]
    model_index: np.ndarray
    group_index: np.ndarray
    models: tuple[str, ...]
    groups: tuple[str, ...]
    features: Mapping[str, np.ndarray] = dataclasses.field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.model)


class OnlineView:
    """What a DEE method may see at boundary `k`: the active trajectories' past.

    All arrays are fresh read-only copies. The view reads the walker's
    buffers, in which position `j` of a trajectory is written only when the
    walk reaches `j` with the trajectory still active; later positions are
    NaN (signals) or -1 (tokens) in memory, so no attribute, closure or
    array base reachable from the view holds the future.

    Attributes:
      k: the boundary (position) being decided, 0-based.
      rows: int64[active] ids of the active trajectories, stable over the
        walk (their row index in the evaluated split).
      unit: int64[active] each trajectory's decision unit (row of `units`).
      units: the `UnitTable` of the evaluated split.
      tokens: int64[active] retained thinking tokens `L(k)`.
      signal_names: names of the recorded per-position signals.
    """

    __slots__ = ("k", "rows", "unit", "units", "tokens", "signal_names", "_read")

    def __init__(self, k: int, rows: np.ndarray, unit: np.ndarray, units: UnitTable,
                 tokens: np.ndarray, signal_names: tuple[str, ...],
                 read: Callable[[str, np.ndarray, int, bool], np.ndarray]):
        self.k = k
        self.rows = _frozen(rows)
        self.unit = _frozen(unit)
        self.units = units
        self.tokens = _frozen(tokens)
        self.signal_names = signal_names
        self._read = read

    def __len__(self) -> int:
        return int(self.rows.shape[0])

    def signal(self, name: str) -> np.ndarray:
        """float64[active] the signal at boundary `k`."""
        return self._read(name, self.rows, self.k, False)

    def history(self, name: str) -> np.ndarray:
        """float64[active, k + 1] the signal at boundaries `0..k`."""
        return self._read(name, self.rows, self.k, True)

    def token_history(self) -> np.ndarray:
        """int64[active, k + 1] retained tokens `L(0..k)`."""
        return self._read("", self.rows, self.k, True).astype(np.int64)


# -- the interface as protocols (documentation and isinstance checks) ------------

@runtime_checkable
class RoutingMethod(Protocol):
    """A DR method: `route(units, theta)` picks each unit's routing (think or answer now)."""

    strategy: str

    def route(self, units: UnitTable, theta: float) -> Any: ...


@runtime_checkable
class BudgetMethod(Protocol):
    """An FB method: `budget(units, theta)` gives each unit's fixed thinking budget."""

    strategy: str

    def budget(self, units: UnitTable, theta: float) -> Any: ...


@runtime_checkable
class ExitMethod(Protocol):
    """A DEE method: `stop(view, theta)` decides online, boundary by boundary, when to stop."""

    strategy: str

    def stop(self, view: OnlineView, theta: float) -> Any: ...



def call_method(label: str, call: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """`fn(*args, **kwargs)` of a method; anything it raises (a `SystemExit` too: a plug-in
    must not end the run with no result) becomes one `MethodError` naming the call."""
    try:
        return fn(*args, **kwargs)
    except MethodError:
        raise
    except (Exception, SystemExit) as e:  # noqa: BLE001 -- any failure is the method's
        raise MethodError(f"method {label}: {call} raised {type(e).__name__}: {e}") from None
