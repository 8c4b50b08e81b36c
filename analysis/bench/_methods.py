"""The OTBench method interface, its online view, and plug-in loading (SPEC §6.1).

A *method* is any object with

* ``strategy``: ``"dr"``, ``"fb"`` or ``"dee"`` (SPEC §5's action spaces);
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
import hashlib
import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from otbench.errors import OtbenchError
from otbench.resources import check_budget

STRATEGIES = ("dr", "fb", "dee")
DECISION = {"dr": "route", "fb": "budget", "dee": "stop"}
BUILTINS = {
    "thinkswitcher": "otbench.analysis.bench:ThinkSwitcher",
    "predictive-scheduling": "otbench.analysis.bench:PredictiveScheduling",
    "thinkbrake": "otbench.analysis.bench:ThinkBrake",
    "dynasor-cot": "otbench.analysis.bench:DynasorCoT",
    "deer": "otbench.analysis.bench:Deer",
    "budget-forcing": "otbench.analysis.bench:BudgetForcing",
    "answer-consistency": "otbench.analysis.bench:AnswerConsistency",
}
"""Built-in method names -> ``module:object`` (imported only when chosen)."""


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


# -- loading and checking -----------------------------------------------------------

def method_name(method: Any, spec: str | None = None) -> str:
    name = getattr(method, "name", None)
    if isinstance(name, str) and name:
        return name
    return spec if spec else type(method).__name__


def call_method(label: str, call: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """`fn(*args, **kwargs)` of a method; anything it raises (a `SystemExit` too: a plug-in
    must not end the run with no result) becomes one `MethodError` naming the call."""
    try:
        return fn(*args, **kwargs)
    except MethodError:
        raise
    except (Exception, SystemExit) as e:  # noqa: BLE001 -- any failure is the method's
        raise MethodError(f"method {label}: {call} raised {type(e).__name__}: {e}") from None


def check_method(method: Any, label: str) -> Any:
    """Return `method` if it satisfies the interface, else raise `MethodError` saying what is missing."""
    strategy = getattr(method, "strategy", None)
    if strategy not in STRATEGIES:
        raise MethodError(f"method {label}: `strategy` must be one of {', '.join(STRATEGIES)}, "
                          f"got {strategy!r}")
    decide = DECISION[strategy]
    if not callable(getattr(method, decide, None)):
        raise MethodError(f"method {label}: a {strategy} method must define "
                          f"`{decide}(...)`; see the OTBench method interface")
    fit = getattr(method, "fit", None)
    if fit is not None and not callable(fit):
        raise MethodError(f"method {label}: `fit` must be callable, got {type(fit).__name__}")
    return method


def _import_file(spec: str, path: str) -> Any:
    """A plug-in given as ``path/to/file.py:Object``: imported from that file, from any directory."""
    import importlib.util
    import sys
    from pathlib import Path

    file = Path(path)
    if not file.is_file():
        raise MethodError(f"method {spec!r}: no such file {path!r}")
    name = "otbench_plugin_" + hashlib.sha256(str(file.resolve()).encode()).hexdigest()[:12]
    if name in sys.modules:
        return sys.modules[name]
    loader_spec = importlib.util.spec_from_file_location(name, file)
    mod = importlib.util.module_from_spec(loader_spec)
    sys.modules[name] = mod
    try:
        loader_spec.loader.exec_module(mod)
    except Exception as e:
        del sys.modules[name]
        raise MethodError(f"method {spec!r}: importing {path!r} failed "
                          f"({type(e).__name__}: {e})") from None
    return mod


def load_method(spec: Any, **kwargs: Any) -> Any:
    """A method from a built-in name, a ``"module:object"`` string, or an object.

    Args:
      spec: built-in name (`BUILTINS`), ``"package.module:Object"`` (dotted
        attributes allowed after the colon), ``"path/to/file.py:Object"``
        (imported from that file), or a method object.
      kwargs: passed to the class or factory (e.g. ``features=`` for the
        built-ins); not allowed with an instance.

    Raises:
      MethodError: unknown name, bad format, import failure, missing object,
        or an object that does not satisfy the interface.
    """
    if not isinstance(spec, str):
        if kwargs:
            raise MethodError("keyword arguments need a method class or name, not an instance")
        return check_method(spec, repr(method_name(spec)))
    target = BUILTINS.get(spec, spec)
    if ":" not in target:
        raise MethodError(f"method must be a built-in name ({', '.join(BUILTINS)}) or "
                          f"'module:object', got {spec!r}")
    mod_name, _, attr = target.partition(":")
    if not mod_name or not attr:
        raise MethodError(f"method must be 'module:object' with both parts, got {spec!r}")
    if not mod_name.endswith(".py") and not all(p.isidentifier() for p in mod_name.split(".")):
        raise MethodError(f"method {spec!r}: {mod_name!r} is neither a dotted module name "
                          f"(package.module) nor a path to a .py file")
    if not all(p.isidentifier() and not (p.startswith("__") and p.endswith("__"))
               for p in attr.split(".")):
        raise MethodError(f"method {spec!r}: the object {attr!r} must be dotted names "
                          f"without dunders (Object or Object.attribute)")
    mod = _import_file(spec, mod_name) if mod_name.endswith(".py") else None
    try:
        mod = mod or importlib.import_module(mod_name)
    except ImportError as e:
        raise MethodError(f"method {spec!r}: cannot import module {mod_name!r} ({e})") from None
    obj: Any = mod
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise MethodError(f"method {spec!r}: module {mod_name!r} has no object {attr!r}")
        obj = getattr(obj, part)
    if isinstance(obj, type) or (callable(obj) and getattr(obj, "strategy", None) is None):
        import types

        if isinstance(obj, (types.BuiltinFunctionType, types.BuiltinMethodType)):
            raise MethodError(f"method {spec!r}: a built-in function is not a method class or "
                              f"factory")
        try:
            obj = obj(**kwargs)
        except TypeError as e:
            raise MethodError(f"method {spec!r}: cannot construct it ({e})") from None
        except (Exception, SystemExit) as e:  # noqa: BLE001 -- any failure is the method's
            raise MethodError(f"method {spec!r}: constructing it raised {type(e).__name__}: "
                              f"{e}") from None
    elif kwargs:
        raise MethodError(f"method {spec!r} is an instance; it takes no options")
    return check_method(obj, repr(spec))


THETA_CELL_BYTES = 1000
"""Bytes per (θ, cell) of an evaluation: the int64 cost, reward and frontier sums, four exact
fractions and the point of the result; measured 670 B on 12 cells
(`evaluate(ms, "thinkbrake", theta_grid=2000).to_json()`), rounded up."""
THETA_POSITION_OPS = 20
"""Element operations per (θ, position of the set): one walk of the method over the split;
measured 23-67 ns per position for the built-in methods, so this is a lower bound."""


def check_sweep_budget(ms: Any, theta_grid: Any) -> None:
    """Refuse, before the method is fit, a `theta_grid` whose sweep does not fit in memory or
    would walk the set for more than the time bound (`otbench.resources`)."""
    if isinstance(theta_grid, bool) or not isinstance(theta_grid, (int, np.integer)) \
            or theta_grid < 1:
        return                               # `method_thetas` names the rule
    cells, positions = int(ms.num_cells), int(np.asarray(ms.L).size)
    check_budget(f"a θ sweep over {cells} cells, {positions:,} positions", "`theta_grid`",
                 int(theta_grid), per_unit=THETA_CELL_BYTES * (cells + 1),
                 per_unit_ops=THETA_POSITION_OPS * positions, unit="θ")


def method_thetas(method: Any, label: str, thetas: Sequence[Any] | None,
                  theta_grid: int | None, default_points: int) -> tuple[float, ...]:
    """The `θ` sweep: explicit values, `theta_grid` points, or the method's default."""
    if thetas is not None and theta_grid is not None:
        raise ValueError("pass at most one of `thetas` and `theta_grid`")
    if thetas is None:
        n = default_points if theta_grid is None else theta_grid
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
            raise ValueError(f"`theta_grid` must be a positive integer, got {n!r}")
        n = int(n)
        if theta_grid is None and getattr(method, "thetas", None) is not None:
            thetas = method.thetas
        elif callable(getattr(method, "theta_grid", None)):
            thetas = call_method(label, f"theta_grid({n})", method.theta_grid, n)
        elif getattr(method, "theta_range", None) is not None:
            rng = call_method(label, "theta_range()", method.theta_range) \
                if callable(method.theta_range) else method.theta_range
            try:
                lo, hi = (float(x) for x in rng)
            except (TypeError, ValueError):
                raise MethodError(f"method {label}: `theta_range` must be two numbers (lo, hi), "
                                  f"got {rng!r}") from None
            thetas = np.linspace(lo, hi, n).tolist()
        else:
            raise MethodError(f"method {label} defines no θ sweep (`thetas`, `theta_grid(n)` "
                              "or `theta_range`); pass explicit thetas")
    try:
        out = tuple(float(x) for x in thetas)
    except (TypeError, ValueError):
        raise ValueError(f"`thetas` must be numbers, got {thetas!r}") from None
    if not out:
        raise ValueError("`thetas` must not be empty")
    # FB's θ scales a token cap, and a cap of inf means none (full thinking).
    ok = [np.isfinite(t) or (getattr(method, "strategy", None) == "fb" and t == np.inf)
          for t in out]
    if not all(ok):
        allowed = "finite (or inf for an FB method: no cap)" \
            if getattr(method, "strategy", None) == "fb" else "finite"
        raise ValueError(f"`thetas` must be {allowed}, got {list(out)}")
    if len(set(out)) != len(out):
        raise ValueError("`thetas` must not repeat a value")
    return out
