"""`Method`: a stopping method resolved and checked once, then used everywhere (docs/rules.md).

A method object (`_contract`) is resolved from a registered name, a
``"module:object"`` / ``"file.py:object"`` plug-in or an object into one
frozen `Method`, which states everything the rest of otbench needs:

* ``name`` (the object's ``name``, else the spec string, else its class
  name), ``spec`` (the string it came from) and ``target`` (the registered
  ``module:object`` of a built-in);
* ``strategy`` and ``decide`` (its ``route`` / ``budget`` / ``stop``);
* ``fit`` (None without one) and ``fit_takes_features`` (whether it accepts
  the ``stored_features`` keyword);
* ``signals`` (the recorded per-position signals it reads),
  ``signal_cost`` (a `SignalCost`, None when undeclared: counted as 0);
* ``online``: how it runs while a model generates -- ``"processor"`` (a
  vLLM logits processor reads its signal per step), ``"side"`` (side
  requests on the prefix produce its probe signals, `SIDE_SIGNALS`), or
  ``None`` (not at all); a processor method crosses into the engine's
  process as its registered name (or allowed plug-in) and the JSON of its
  own ``online_parameters(model, theta)``, rebuilt there by its
  ``from_online(params)`` (`online_method`), and may declare a device-side
  form, ``device_signal`` (`Method.device_signal`);
* ``summary``: one line (its ``summary`` attribute, else the first line of
  its class docstring);
* its θ sweep (`thetas`), its JSON config (`config`), and whether a set can
  run it (`runnable_on`).

The evaluator, the per-trajectory stop positions, the net points, the
online controller and the CLI read these fields; none of them inspects the
raw object again.
"""

import dataclasses
import inspect
import json
import types
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from otbench.registry import Registry
from otbench.resources import check_budget

from ._contract import DECISION, STRATEGIES, MethodError, call_method
from ._cost import SignalCost
from otbench.errors import ArgumentError

ONLINE_MODES = ("processor", "side")
STP_SIDE_SIGNALS = ("answer", "answer_conf", "hesitation", "answer_tokens")
"""Signals of otbench's own STP answer probe (`otbench.probe.grading.probe_signals`)."""
OWN_SIDE_SIGNALS = {"dynasor": ("dynasor_window", "dynasor_uncertain", "dynasor_tokens"),
                    "deer": ("deer_conf", "deer_tokens")}
"""Signals of the field methods' own probes, per probe (the probe stage's ``probe.field_probes``)."""
SIDE_SIGNALS = STP_SIDE_SIGNALS + tuple(s for v in OWN_SIDE_SIGNALS.values() for s in v)
"""Signals the side-request controller computes per probed position, each from the probe the
probe stage records it with: a ``"side"`` method reads only these."""
PROCESSOR_SIGNALS = ("margin", "margin_own", "logp_end", "logp_other", "deepconf_min_conf")
"""Signals the logits processor reads per step (a ``"processor"`` method reads only these)."""
DEVICE_SIGNALS = ("logp_end", "logp_other", "margin")
"""Signals a device-side form may threshold: the ones Model Runner V2's step reads on the device
from the row's logits (the processor's ``margin`` is the recorded ``margin_own``, docs/rules.md)."""
CONFIDENCE_SIGNAL = "deepconf_min_conf"
"""The processor signal read from every step's token confidence over a window (the method's
``window``, in tokens), not from the logits at the boundary alone."""

THETA_CELL_BYTES = 1000
"""Bytes per (θ, cell) of an evaluation: the int64 cost, reward and frontier sums, four exact
fractions and the point of the result; measured 670 B on 12 cells
(`evaluate(ms, "thinkbrake-onectx", theta_grid=2000).to_json()`), rounded up."""
THETA_POSITION_OPS = 20
"""Element operations per (θ, position of the set): one walk of the method over the split;
measured 23-67 ns per position for the built-in methods, so this is a lower bound."""


def _unknown(reg: Registry, spec: str) -> str:
    return (f"method must be a built-in name ({', '.join(reg.names())}) or "
            f"'module:object', got {spec!r}")


METHODS = Registry("method", {
    "thinkswitcher": "otbench.analysis.methods:ThinkSwitcher",
    "predictive-scheduling": "otbench.analysis.methods:PredictiveScheduling",
    "thinkbrake": "otbench.analysis.methods:ThinkBrake",
    "thinkbrake-onectx": "otbench.analysis.methods:ThinkBrakeOneContext",
    "dynasor-cot": "otbench.analysis.methods:DynasorCoT",
    "deer": "otbench.analysis.methods:Deer",
    "dynasor-cot-stp": "otbench.analysis.methods:DynasorCoTSTP",
    "deer-stp": "otbench.analysis.methods:DeerSTP",
    "budget-forcing": "otbench.analysis.methods:BudgetForcing",
    "answer-consistency": "otbench.analysis.methods:AnswerConsistency",
    "deepconf-exit": "otbench.analysis.methods:DeepConfExit",
}, error=MethodError, unknown=_unknown, group="otbench.methods")
"""The method registry: built-in names -> ``module:object``, imported only when chosen.
One line adds a method: ``METHODS.register("my-method", "my_pkg.mod:MyMethod")``; an installed
distribution adds one by an entry point in the group ``otbench.methods``."""
DEFAULT_ONLINE = "thinkbrake-onectx"
"""The method `otbench online` runs without ``--method`` (the DEE baseline, in the logits processor:
the one-context margin it reads per step; ThinkBrake's own two-fork rule runs offline only)."""


@dataclasses.dataclass(frozen=True, eq=False)
class Method:
    """A resolved, checked stopping method (module docstring). Build one with `resolve`."""

    name: str
    spec: str | None
    target: str | None
    strategy: str
    impl: Any
    decide: Callable[..., Any]
    fit: Callable[..., Any] | None
    fit_takes_features: bool
    signals: tuple[str, ...]
    signal_cost: SignalCost | None
    online: str | None
    summary: str
    options: Mapping[str, Any]

    @property
    def label(self) -> str:
        """The name as messages quote it."""
        return repr(self.name)

    @property
    def config_spec(self) -> str:
        """What the result's ``config.spec`` records: the spec string, else the name."""
        return self.spec if self.spec is not None else self.name

    # -- the calls, each wrapped so a method's failure is one MethodError -----------------
    def call(self, call: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return call_method(self.label, call, fn, *args, **kwargs)

    def fit_on(self, train: Any, validation: Any, stored_features: Any = None) -> None:
        """Fit on the train / validation splits (nothing without a `fit`)."""
        if self.fit is None:
            return
        if self.fit_takes_features:
            self.call("fit(train, val)", self.fit, train, validation,
                      stored_features=stored_features)
        else:
            self.call("fit(train, val)", self.fit, train, validation)

    def config(self) -> Any:
        """The method's ``config()`` as JSON data (None without one)."""
        fn = getattr(self.impl, "config", None)
        if not callable(fn):
            return None
        cfg = self.call("config()", fn)
        try:
            json.dumps(cfg, allow_nan=False)
        except (TypeError, ValueError):
            raise MethodError(f"method {self.label}: config() must return JSON data (dicts, lists, "
                              f"strings, finite numbers), got {cfg!r}") from None
        return cfg

    def missing_signals(self, recorded: Any) -> list[str]:
        """The declared signals a set with `recorded` signals lacks."""
        return [s for s in self.signals if s not in recorded]

    def runnable_on(self, ms: Any) -> tuple[bool, str]:
        """(whether `ms` records every declared signal, the reason when not)."""
        need = self.missing_signals(ms.signals)
        if need:
            return False, f"the set records no signal {', '.join(need)}"
        return True, ""

    def check_signals(self, ms: Any) -> None:
        """Refuse a set that lacks a declared signal (before anything is fit)."""
        for sig in self.signals:
            if sig not in ms.signals:
                raise MethodError(f"method {self.label} needs the per-position signal {sig!r}; "
                                  f"the set records: {', '.join(sorted(ms.signals)) or 'none'}")

    def thetas(self, thetas: Sequence[Any] | None, theta_grid: int | None,
               default_points: int) -> tuple[float, ...]:
        """The `θ` sweep: explicit values, `theta_grid` points, or the method's default."""
        return method_thetas(self.impl, self.label, thetas, theta_grid, default_points)

    def prepare(self, ms: Any, thetas: Sequence[Any] | None, theta_grid: int | None,
                stored_features: Any, default_points: int) -> tuple[float, ...]:
        """Check the sweep's budget and the declared signals, fit on `ms`'s train / validation
        splits, and fix the `θ` sweep (docs/rules.md: the evaluated split is not touched here)."""
        check_sweep_budget(ms, theta_grid)
        self.check_signals(ms)
        if self.fit is not None:
            train = ms.take(np.flatnonzero(ms.split == 0))
            val = ms.take(np.flatnonzero(ms.split == 1))
            self.fit_on(train, val, stored_features)
        return self.thetas(thetas, theta_grid, default_points)

    def accepts(self, option: str) -> bool:
        """Whether the method's class takes the keyword `option` (e.g. ``features``)."""
        try:
            params = inspect.signature(type(self.impl)).parameters
        except (TypeError, ValueError):
            return False
        return option in params

    # -- the logits-processor form ---------------------------------------------------------
    def online_parameters(self, model: str | None, theta: float) -> dict[str, Any]:
        """The JSON data the logits processor rebuilds this method from (`online_method`).

        The method's own ``online_parameters(model, theta)`` (what its fitted state
        contributes to a decision at `theta` for `model`, e.g. a threshold read off the
        train split), else nothing: the processor then builds it with no arguments.
        """
        fn = getattr(self.impl, "online_parameters", None)
        if not callable(fn):
            return {}
        params = self.call("online_parameters(model, theta)", fn, model, float(theta))
        try:
            ok = isinstance(params, dict) and all(isinstance(k, str) for k in params)
            json.dumps(params, allow_nan=False)
        except (TypeError, ValueError):
            ok = False
        if not ok:
            raise MethodError(f"method {self.label}: online_parameters(model, theta) must return a "
                              f"JSON object (string keys, finite numbers), got {params!r}")
        return params

    def device_signal(self) -> str | None:
        """The method's device-side form, None without one: the processor signal (`DEVICE_SIGNALS`)
        whose value ``<= θ`` at a decided boundary is exactly its ``stop(view, theta)``, so Model
        Runner V2 decides it on the device without a blocking read (a method's ``device_signal``,
        an attribute or a zero-argument call)."""
        v = getattr(self.impl, "device_signal", None)
        if callable(v):
            v = self.call("device_signal()", v)
        if v is not None and v not in DEVICE_SIGNALS:
            raise MethodError(f"method {self.label}: device_signal must be one of "
                              f"{', '.join(DEVICE_SIGNALS)} or None, got {v!r}")
        return v

    def confidence_window(self) -> int | None:
        """The window (tokens) of the group confidence the processor computes for a method that
        reads `CONFIDENCE_SIGNAL` (its ``window``), None for any other method."""
        if CONFIDENCE_SIGNAL not in self.signals:
            return None
        w = getattr(self.impl, "window", None)
        if isinstance(w, bool) or not isinstance(w, int) or w < 1:
            raise MethodError(f"method {self.label} reads {CONFIDENCE_SIGNAL} online: its `window` "
                              f"must be the group confidence's window in tokens, an integer >= 1, "
                              f"got {w!r}")
        return int(w)

    def line(self) -> str:
        """One line: name, strategy, how it runs online, and its summary (the CLI's listing)."""
        how = {"processor": "online: logits processor", "side": "online: side requests",
               None: "offline only"}[self.online]
        return f"{self.name:24s}  {self.strategy.upper():4s}  {self.summary} [{how}]"


# -- resolution ------------------------------------------------------------------------

def _summary(obj: Any) -> str:
    text = getattr(obj, "summary", None)
    if not isinstance(text, str) or not text.strip():
        text = inspect.getdoc(type(obj)) or ""
    return " ".join(text.strip().splitlines()[0].split()) if text.strip() else ""


def _takes_stored(fit: Any) -> bool:
    """Whether `fit` accepts the optional ``stored_features`` keyword (`_contract`)."""
    try:
        params = inspect.signature(fit).parameters
    except (TypeError, ValueError):
        return False
    return "stored_features" in params or any(
        p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


def method_name(method: Any, spec: str | None = None) -> str:
    name = getattr(method, "name", None)
    if isinstance(name, str) and name:
        return name
    return spec if spec else type(method).__name__


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


def _online_mode(obj: Any, label: str, strategy: str, signals: tuple[str, ...]) -> str | None:
    mode = getattr(obj, "online", None)
    if mode is None:
        return None
    if mode not in ONLINE_MODES:
        raise MethodError(f"method {label}: `online` must be one of {', '.join(ONLINE_MODES)} or "
                          f"None, got {mode!r}")
    if mode == "side":
        bad = [s for s in signals if s not in SIDE_SIGNALS]
        if bad or strategy == "dr":
            what = f"reads {bad[0]!r}" if bad else "is a DR method (decided before generation)"
            raise MethodError(f"method {label}: runs online with side requests, but it {what}; side "
                              f"requests compute {', '.join(SIDE_SIGNALS)} for DEE and FB methods")
    if mode == "processor" and (strategy != "dee" or any(s not in PROCESSOR_SIGNALS for s in signals)):
        raise MethodError(f"method {label}: a logits-processor method is a DEE method reading "
                          f"{', '.join(PROCESSOR_SIGNALS)}")
    return mode


def _instantiate(obj: Any, spec: str, kwargs: Mapping[str, Any]) -> Any:
    if isinstance(obj, type) or (callable(obj) and getattr(obj, "strategy", None) is None):
        if isinstance(obj, (types.BuiltinFunctionType, types.BuiltinMethodType)):
            raise MethodError(f"method {spec!r}: a built-in function is not a method class or "
                              f"factory")
        try:
            return obj(**kwargs)
        except TypeError as e:
            raise MethodError(f"method {spec!r}: cannot construct it ({e})") from None
        except (Exception, SystemExit) as e:  # noqa: BLE001 -- any failure is the method's
            raise MethodError(f"method {spec!r}: constructing it raised {type(e).__name__}: "
                              f"{e}") from None
    if kwargs:
        raise MethodError(f"method {spec!r} is an instance; it takes no options")
    return obj


def resolve(spec: Any, **kwargs: Any) -> Method:
    """The `Method` of a registered name, a ``"module:object"`` string, or an object.

    Args:
      spec: a name in `METHODS`, ``"package.module:Object"`` (dotted
        attributes allowed after the colon), ``"path/to/file.py:Object"``
        (imported from that file), a method object, or a `Method` (returned
        as it is when no options are given).
      kwargs: passed to the class or factory (e.g. ``features=`` for the
        learned built-ins); not allowed with an instance.

    Raises:
      MethodError: unknown name, bad format, import failure, missing object,
        or an object that does not satisfy the interface.
    """
    if isinstance(spec, Method):
        if kwargs:
            raise MethodError("keyword arguments need a method class or name, not a resolved Method")
        return spec
    if isinstance(spec, str):
        obj = _instantiate(METHODS.resolve(spec), spec, kwargs)
        label, name = repr(spec), method_name(obj, spec)
        target = METHODS.target(spec) if spec in METHODS else None
        text = spec
    else:
        if kwargs:
            raise MethodError("keyword arguments need a method class or name, not an instance")
        obj, text, target = spec, None, None
        name = method_name(obj)
        label = repr(name)
    check_method(obj, label)
    strategy = obj.strategy
    signals = tuple(getattr(obj, "signals", ()) or ())
    cost = getattr(obj, "signal_cost", None)
    fit = getattr(obj, "fit", None)
    return Method(name=name, spec=text, target=target, strategy=strategy, impl=obj,
                  decide=getattr(obj, DECISION[strategy]), fit=fit if callable(fit) else None,
                  fit_takes_features=callable(fit) and _takes_stored(fit), signals=signals,
                  signal_cost=cost if isinstance(cost, SignalCost) else None,
                  online=_online_mode(obj, repr(name), strategy, signals),
                  summary=_summary(obj), options=dict(kwargs))


def online_method(spec: str, params: Mapping[str, Any] | None = None, *,
                  allowed: tuple[str, ...] | None = None) -> Method:
    """The `Method` a logits-processor request names, rebuilt where the processor runs.

    `spec`: a registered name or a ``module:object`` plug-in (with `allowed`, only one listed
    there); `params`: its `Method.online_parameters`, given to the object's
    ``from_online(params)`` (a class method or factory), or nothing for an object without
    one (built with no arguments). Refused unless it runs in the processor (``online =
    "processor"``).
    """
    obj = METHODS.resolve(spec, allowed=allowed)
    params = dict(params or {})
    make = getattr(obj, "from_online", None)
    if callable(make):
        obj = call_method(repr(spec), "from_online(params)", make, params)
    elif params:
        raise MethodError(f"method {spec!r} has online parameters {sorted(params)} but no "
                          f"from_online(params) to take them")
    else:
        obj = _instantiate(obj, spec, {})
    m = resolve(obj)
    if m.online != "processor":
        raise MethodError(f"method {spec!r} does not run in the logits processor (its `online` is "
                          f"{m.online!r}, not 'processor')")
    return m


def load_method(spec: Any, **kwargs: Any) -> Any:
    """The raw method object of `spec` (see `resolve`, which most callers want)."""
    return resolve(spec, **kwargs).impl


def builtin_methods() -> list[Method]:
    """Every registered method, resolved with its defaults, in registration order."""
    return [resolve(name) for name in METHODS.names()]


# -- the θ sweep -------------------------------------------------------------------------

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
        raise ArgumentError("pass at most one of `thetas` and `theta_grid`")
    if thetas is None:
        n = default_points if theta_grid is None else theta_grid
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
            raise ArgumentError(f"`theta_grid` must be a positive integer, got {n!r}")
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
        raise ArgumentError(f"`thetas` must be numbers, got {thetas!r}") from None
    if not out:
        raise ArgumentError("`thetas` must not be empty")
    # FB's θ scales a token cap, and a cap of inf means none (full thinking).
    ok = [np.isfinite(t) or (getattr(method, "strategy", None) == "fb" and t == np.inf)
          for t in out]
    if not all(ok):
        allowed = "finite (or inf for an FB method: no cap)" \
            if getattr(method, "strategy", None) == "fb" else "finite"
        raise ArgumentError(f"`thetas` must be {allowed}, got {list(out)}")
    if len(set(out)) != len(out):
        raise ArgumentError("`thetas` must not repeat a value")
    return out
