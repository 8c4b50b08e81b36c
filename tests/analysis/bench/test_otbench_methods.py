"""The OTBench method interface (SPEC §6.1): online causality, plug-in loading, interface violations."""

import dataclasses
import gc
import importlib
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from _otbench_helpers import bench_sets
from hypothesis import given, settings
from otbench.analysis import simulate
from otbench.analysis.methods._baselines import ThinkBrakeOneContext
from otbench.analysis.bench._evaluate import evaluate
from otbench.analysis.methods._features import units_of
from otbench.analysis.methods import (
    resolve,
    BUILTINS,
    MethodError,
    OnlineView,
    UnitTable,
    load_method,
)
from otbench.analysis.bench._splits import assign_splits
from otbench.analysis.bench._walk import dee_positions
from otbench.analysis.measurement._types import MeasurementSet

ROOT = Path(__file__).resolve().parents[3]


def split_set(seed=0, scale="tiny"):
    return assign_splits(simulate(scale, seed))


# -- online causality ----------------------------------------------------------------

class HistoryExit:
    """Uses the whole visible past: stop when the mean margin so far is <= θ."""

    strategy = "dee"

    def stop(self, view, theta):
        return view.history("margin").mean(axis=1) <= theta


class Recorder:
    """Checks, at every call, that the view shows exactly the past of its rows."""

    strategy = "dee"

    def __init__(self, test):
        self.test = test
        self.calls = 0

    def stop(self, view, theta):
        t, k = self.test, view.k
        self.calls += 1
        assert isinstance(view, OnlineView)
        assert np.all(t.n[view.rows] > k)                    # asked only before the end
        h = view.history("margin")
        assert h.shape == (len(view), k + 1)
        assert np.array_equal(h, t.signals["margin"][view.rows, :k + 1])
        assert np.array_equal(view.signal("margin"), t.signals["margin"][view.rows, k])
        assert np.array_equal(view.token_history(), t.L[view.rows, :k + 1])
        assert np.array_equal(view.tokens, t.L[view.rows, k])
        for a in (h, view.tokens, view.rows, view.unit):
            assert not a.flags.writeable
            with pytest.raises(ValueError):
                a[...] = 0
        # Nothing reachable from the view holds a later position or any label:
        # walk its attributes and the objects behind its reader (not modules).
        seen, todo = set(), [view]
        while todo:
            o = todo.pop()
            if id(o) in seen or isinstance(o, type(sys)) or callable(o) and not hasattr(o, "__self__"):
                continue
            seen.add(id(o))
            assert not isinstance(o, MeasurementSet)
            if isinstance(o, np.ndarray) and o.ndim == 2 and o.dtype.kind == "f":
                assert np.all(np.isnan(o[:, k + 1:]))            # the future is not in memory
            if isinstance(o, np.ndarray) and o.ndim == 2 and o.dtype.kind == "i":
                assert np.all(o[:, k + 1:] == -1)
            if hasattr(o, "__self__"):
                todo.append(o.__self__)
            elif isinstance(o, (dict, list, tuple, OnlineView)) or hasattr(o, "__dict__"):
                if not isinstance(o, UnitTable):
                    todo.extend(gc.get_referents(o))
        return view.signal("margin") <= theta


def test_view_shows_only_the_past():
    ms = split_set()
    test = ms.take(np.flatnonzero(ms.split == 2))
    rec = Recorder(test)
    evaluate(ms, rec, thetas=[-10.0, 3.0, 8.0], audit=0)
    assert rec.calls > 10


def _perturb_after(ms, pos, rng):
    """Signals replaced after each test row's stop; every label of the test rows redrawn."""
    test = ms.split == 2
    K = ms.num_positions
    after = np.arange(K)[None, :] > pos[:, None]
    sig = {name: np.where(test[:, None] & after, rng.normal(size=v.shape) * 50, v)
           for name, v in ms.signals.items()}
    C = np.where(test[:, None], rng.integers(0, ms.probes[:, None] + 1, size=ms.C.shape), ms.C)
    # keep the padding rule: positions past n repeat C(n)
    C = np.where(np.arange(K)[None, :] > ms.n[:, None], C[np.arange(len(C)), ms.n][:, None], C)
    return dataclasses.replace(ms, signals=sig, C=C.astype(np.int32),
                               y=np.where(test, 1 - ms.y, ms.y).astype(np.int8))


@settings(max_examples=40)
@given(bench_sets())
def test_decisions_do_not_depend_on_the_future_or_labels(ms):
    test = ms.take(np.flatnonzero(ms.split == 2))
    unit, units = units_of(test)
    rng = np.random.default_rng(0)
    for method in (HistoryExit(), ThinkBrakeOneContext()):
        for theta in (-0.5, 0.0, 0.7):
            pos = dee_positions(test, unit, units, resolve(method), theta)
            full = np.full(ms.num_trajectories, -1)
            full[ms.split == 2] = pos
            other = _perturb_after(ms, full, rng)
            o_test = other.take(np.flatnonzero(other.split == 2))
            assert np.array_equal(dee_positions(o_test, unit, units, resolve(method), theta), pos)


def test_view_is_dead_after_its_walk():
    kept = []

    class Keeper:
        strategy = "dee"

        def stop(self, view, theta):
            kept.append(view)
            return np.zeros(len(view), dtype=bool)

    evaluate(split_set(), Keeper(), thetas=[0.0], audit=0)
    with pytest.raises(MethodError, match=r"an OnlineView was used after its walk ended"):
        kept[0].history("margin")


def test_unknown_signal_message():
    class Wrong:
        strategy = "dee"

        def stop(self, view, theta):
            return view.signal("entropy") <= theta

    with pytest.raises(MethodError, match=r"no signal 'entropy' in the set \(recorded: margin\)"):
        evaluate(split_set(), Wrong(), thetas=[0.0])


def test_batch_dependent_methods_are_rejected():
    class BatchMean:
        """Stops below the batch's mean margin: uses other trajectories."""

        strategy = "dee"

        def stop(self, view, theta):
            m = view.signal("margin")
            return m <= m.mean() + theta

    with pytest.raises(MethodError, match=r"decisions depend on the other trajectories of the batch"):
        evaluate(split_set(scale="small"), BatchMean(), thetas=[0.0])
    # the same method passes when the audit is off (the caller's responsibility then)
    evaluate(split_set(scale="small"), BatchMean(), thetas=[0.0], audit=0)


# -- interface violations at decision time ---------------------------------------------------

def _method(strategy, fn):
    name = {"dr": "route", "fb": "budget", "dee": "stop"}[strategy]
    return type("M", (), {"strategy": strategy, name: lambda self, x, theta: fn(x)})()


@pytest.mark.parametrize("strategy, fn, msg", [
    ("dr", lambda u: np.ones(len(u) + 1, dtype=bool),
     r"route\(units, theta\) returned shape \(\d+,\), expected \(\d+,\) \(one think/no-think "
     r"decision per unit\)"),
    ("dr", lambda u: np.ones(len(u)), r"route\(units, theta\) must return booleans, got dtype float64"),
    ("dr", lambda u: None, r"route\(units, theta\) returned shape \(\), expected"),
    ("fb", lambda u: np.full(len(u), -1.0),
     r"budget\(units, theta\) caps must be >= 0 \(inf = no cap\), got -1.0"),
    ("fb", lambda u: np.full(len(u), np.nan), r"caps must be >= 0 \(inf = no cap\), got nan"),
    ("fb", lambda u: np.array(["a"] * len(u)),
     r"budget\(units, theta\) must return numbers, got dtype <U1"),
    ("fb", lambda u: np.ones(len(u), dtype=bool), r"must return numbers, got dtype bool"),
    ("dee", lambda v: np.zeros(len(v) + 2, dtype=bool),
     r"stop\(view, theta\) returned shape .* \(one stop/continue decision per active trajectory\)"),
    ("dee", lambda v: np.zeros(len(v), dtype=int),
     r"stop\(view, theta\) must return booleans, got dtype int64"),
])
def test_decision_violations(strategy, fn, msg):
    with pytest.raises(MethodError, match=msg):
        evaluate(split_set(), _method(strategy, fn), thetas=[0.0])


def test_integer_caps_are_fine():
    res = evaluate(split_set(), _method("fb", lambda u: np.full(len(u), 10 ** 9)), thetas=[0.0])
    assert res.points[0].rel_cost == 1.0


# -- plug-in loading -----------------------------------------------------------------------

PLUGIN = textwrap.dedent('''
    import numpy as np

    class Router:
        strategy = "dr"
        theta_range = (0.0, 1.0)
        def route(self, units, theta):
            return np.array([len(t or "") % 2 == 0 for t in units.text]) | (theta < 0.5)

    router = Router()

    def make_router():
        return Router()

    class Outer:
        class Inner(Router):
            name = "inner"

    class NoStrategy:
        def route(self, units, theta):
            return None

    class BadStrategy:
        strategy = "early"

    class NoDecision:
        strategy = "fb"
        def route(self, units, theta):
            return None

    class BadFit(Router):
        fit = 3

    class NeedsArgs(Router):
        def __init__(self, x):
            pass

    class WithFeatures(Router):
        def __init__(self, features="hashed"):
            self.features = features
''')


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    (tmp_path / "otb_plugin_mod.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "otb_plugin_mod"
    sys.modules.pop("otb_plugin_mod", None)


def test_plugin_forms_load(plugin):
    for obj in ("Router", "router", "make_router", "Outer.Inner"):
        m = load_method(f"{plugin}:{obj}")
        assert m.strategy == "dr" and callable(m.route)
    assert load_method(f"{plugin}:WithFeatures", features="stored:x").features == "stored:x"
    res = evaluate(split_set(), f"{plugin}:Router", theta_grid=3)
    assert res.method == f"{plugin}:Router" and len(res.points) == 3
    assert res.config["thetas"] == [0.0, 0.5, 1.0]
    assert evaluate(split_set(), f"{plugin}:Outer.Inner", thetas=[0.0]).method == "inner"


@pytest.mark.parametrize("spec, msg", [
    ("nope", r"method must be a built-in name \(thinkswitcher, predictive-scheduling, "
             r"thinkbrake, thinkbrake-onectx, dynasor-cot, deer, dynasor-cot-stp, deer-stp, budget-forcing, answer-consistency, deepconf-exit\) or "
             r"'module:object', got 'nope'"),
    (":Router", r"method must be 'module:object' with both parts, got ':Router'"),
    ("otb_plugin_mod:", r"method must be 'module:object' with both parts"),
    ("otb_no_such_module:X", r"method 'otb_no_such_module:X': cannot import module 'otb_no_such_module'"),
    ("otb_plugin_mod:Missing", r"module 'otb_plugin_mod' has no object 'Missing'"),
    ("otb_plugin_mod:NoStrategy", r"`strategy` must be one of dr, fb, dee, got None"),
    ("otb_plugin_mod:BadStrategy", r"`strategy` must be one of dr, fb, dee, got 'early'"),
    ("otb_plugin_mod:NoDecision", r"a fb method must define `budget\(...\)`"),
    ("otb_plugin_mod:BadFit", r"`fit` must be callable, got int"),
    ("otb_plugin_mod:NeedsArgs", r"method 'otb_plugin_mod:NeedsArgs': cannot construct it"),
])
def test_plugin_errors(plugin, spec, msg):
    with pytest.raises(MethodError, match=msg):
        load_method(spec)


def test_options_need_a_class(plugin):
    with pytest.raises(MethodError, match=r"is an instance; it takes no options"):
        load_method(f"{plugin}:router", features="x")
    with pytest.raises(MethodError, match=r"keyword arguments need a method class or name"):
        load_method(ThinkBrakeOneContext(), features="x")


def test_builtins_load_lazily_by_name():
    for name, target in BUILTINS.items():
        m = load_method(name)
        assert m.name == name
        # the registry names the public home of each class (a stable path, recorded in outputs)
        module, _, cls = target.partition(":")
        assert type(m) is getattr(importlib.import_module(module), cls)


def test_readme_plugin_example():
    """The 20-line example of the README (artifacts/otbench/patient_brake.py), against a twin."""
    sys.path.insert(0, str(ROOT / "artifacts" / "otbench"))
    try:
        ms = split_set(1, "small")
        res = evaluate(ms, "patient_brake:PatientBrake", theta_grid=5)
    finally:
        sys.path.remove(str(ROOT / "artifacts" / "otbench"))
        sys.modules.pop("patient_brake", None)
    assert res.method == "patient-brake" and res.strategy == "dee"
    assert res.config["thetas"] == [-2.0, 1.5, 5.0, 8.5, 12.0]
    test = ms.take(np.flatnonzero(ms.split == 2))

    def twin(t, theta):
        m, n = test.signals["margin"][t], int(test.n[t])
        for k in range(n):
            if m[k] <= theta and (k == 0 or m[k - 1] <= theta):
                return k
        return n

    for p, theta in zip(res.points, res.config["thetas"]):
        pos = [twin(t, theta) for t in range(test.num_trajectories)]
        tokens = test.L[np.arange(test.num_trajectories), pos]
        per_cell = [tokens[test.cell == c].sum() / test.L[test.cell == c, -1].sum()
                    for c in np.unique(test.cell)]
        # three models x four groups: the chain is the plain mean over cells
        assert p.rel_cost == pytest.approx(np.mean(per_cell), abs=1e-12)
    lines = (ROOT / "artifacts" / "otbench" / "patient_brake.py").read_text().splitlines()
    assert len(lines) <= 22


def test_config_must_be_json():
    m = _method("dr", lambda u: np.ones(len(u), dtype=bool))
    type(m).config = lambda self: {"x": object()}
    with pytest.raises(MethodError, match=r"config\(\) must return JSON data"):
        evaluate(split_set(), m, thetas=[0.0])
    type(m).config = lambda self: {"x": float("nan")}
    with pytest.raises(MethodError, match=r"config\(\) must return JSON data"):
        evaluate(split_set(), m, thetas=[0.0])
