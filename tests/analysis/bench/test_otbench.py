"""The OTBench evaluator (SPEC §6.1): oracle replay, endpoints, a plain twin, determinism, messages."""

import dataclasses
import json
import math
from fractions import Fraction

import numpy as np
import pytest
from _otbench_helpers import (
    bench_sets,
    best_under,
    build,
    cell_units,
    nondominated_twin,
    oracle,
    weights_twin,
)
from hypothesis import given, settings
from otbench.analysis import simulate
from otbench.analysis.bench._evaluate import SCHEMA, evaluate, nondominated
from otbench.analysis.bench._methods import MethodError
from otbench.analysis.bench._splits import assign_splits
from otbench.analysis.frontier._frontiers import frontiers
from otbench.analysis.measurement._types import SPLITS

STRATS = ("dr", "fb", "dee")


def _test_split_of(ms):
    return ms.take(np.flatnonzero(ms.split == 2))


# -- oracle replay: a method taking the oracle's action lands on the frontier ------------

class _Replay:
    """Takes the exact oracle's action at relative budget `θ` in every cell of `test`.

    It is handed the test split (labels included) on purpose: it is the
    reference that must land exactly on the frontier (gap 0).
    """

    def __init__(self, strategy, test):
        self.strategy = strategy
        self.name = f"oracle-replay-{strategy}"
        self.test = test
        self.plans = {}

    def plan(self, theta):
        if theta not in self.plans:
            t = self.test
            dec = {}
            for c in np.unique(t.cell):
                rows = t.cell_rows(int(c))
                units, keys = cell_units(t, rows, self.strategy)
                budget = math.floor(Fraction(str(theta)) * int(t.L[rows, -1].sum()))
                _, _, d = best_under(oracle(units), budget)
                for key, dd in zip(keys, d):
                    dec[(int(c), key)] = dd
            self.plans[theta] = dec
        return self.plans[theta]

    def unit_keys(self, units):
        t = self.test
        out = []
        for mname, g, q in zip(units.model, units.group, units.question_id):
            rows = [r for r in range(t.num_trajectories)
                    if t.models[t.cell_model[t.cell[r]]] == mname
                    and t.groups[t.cell_group[t.cell[r]]] == g and t.question_id[t.question[r]] == q]
            out.append((int(t.cell[rows[0]]), int(t.question[rows[0]])))
        return out


class ReplayDR(_Replay):
    def route(self, units, theta):
        p = self.plan(theta)
        return np.array([p[k] for k in self.unit_keys(units)], dtype=bool)


class ReplayFB(_Replay):
    def budget(self, units, theta):
        p = self.plan(theta)
        return np.array([p[k] for k in self.unit_keys(units)], dtype=np.float64)


class ReplayDEE(_Replay):
    def stop(self, view, theta):
        p = self.plan(theta)
        c = self.test.cell
        return np.array([p[(int(c[r]), int(r))] == view.k for r in view.rows], dtype=bool)


REPLAY = {"dr": ReplayDR, "fb": ReplayFB, "dee": ReplayDEE}
BETAS = [0.0, 0.05, 0.2, 0.35, 0.5, 0.8, 1.0]


@pytest.mark.parametrize("strategy", STRATS)
def test_oracle_replay_has_zero_gap_on_simulated_set(strategy):
    ms = assign_splits(simulate("tiny", 3))
    test = _test_split_of(ms)
    res = evaluate(ms, REPLAY[strategy](strategy, test), thetas=BETAS)
    fr = frontiers(test, strategies=[strategy], grid=BETAS).strategies[strategy]
    for p in res.points:
        assert p.gap == 0.0 and p.acc == p.frontier_acc
    for i, cell in enumerate(res.cells):
        for j, p in enumerate(cell.points):
            assert p.gap == 0.0
            # ... and the point is the frontier's value at the replayed budget β
            assert p.acc == fr.acc[i, j]
            assert p.rel_cost <= BETAS[j]


@settings(max_examples=40)
@given(bench_sets())
def test_oracle_replay_has_zero_gap_on_random_sets(ms):
    test = _test_split_of(ms)
    for s in STRATS:
        res = evaluate(ms, REPLAY[s](s, test), thetas=[0.0, 0.3, 0.6, 1.0])
        assert all(p.gap == 0.0 for c in res.cells for p in c.points)
        assert all(p.gap == 0.0 for p in res.points)


# -- endpoints ---------------------------------------------------------------------------

class Constant:
    """Think never / always, in each strategy's own terms."""

    def __init__(self, strategy, think):
        self.strategy, self.think = strategy, think
        self.name = f"{'full' if think else 'no'}-thinking-{strategy}"

    def route(self, units, theta):
        return np.full(len(units), self.think)

    def budget(self, units, theta):
        return np.full(len(units), np.inf if self.think else 0.0)

    def stop(self, view, theta):
        return np.full(len(view), not self.think)


@pytest.mark.parametrize("strategy", ["dr", "fb"])
def test_no_and_full_thinking_land_on_the_endpoints(strategy):
    ms = assign_splits(simulate("small", 0))
    none = evaluate(ms, Constant(strategy, False), thetas=[0.0])
    full = evaluate(ms, Constant(strategy, True), thetas=[0.0])
    p0, p1 = none.points[0], full.points[0]
    assert (p0.cost, p0.rel_cost, p0.gap) == (0.0, 0.0, 0.0)
    assert p0.acc == none.reference["a_zero"]
    assert p1.rel_cost == 1.0 and p1.acc == full.reference["a_full"]
    assert p1.frontier_acc == full.reference["frontier_at_full"]
    # the reference endpoints, from the definitions
    test = _test_split_of(ms)
    a0, a1 = [], []
    for c in np.unique(test.cell):
        rows = test.cell_rows(int(c))
        k0 = [max(k for k in range(test.n[t] + 1) if test.L[t, k] == 0) for t in rows]
        P = int(test.probes[rows].sum())
        a0.append((int(test.cell_model[c]), Fraction(sum(int(test.C[t, k]) for t, k in zip(rows, k0)), P)))
        a1.append((int(test.cell_model[c]), Fraction(int(sum(test.C[t, test.n[t]] for t in rows)), P)))
    w = weights_twin([m for m, _ in a0])
    assert none.reference["a_zero"] == float(sum(wi * v for wi, (_, v) in zip(w, a0)))
    assert full.reference["a_full"] == float(sum(wi * v for wi, (_, v) in zip(w, a1)))
    mean_len = [Fraction(int(test.L[test.cell == c, -1].sum()), int((test.cell == c).sum()))
                for c in np.unique(test.cell)]
    assert p1.cost == float(sum(wi * v for wi, v in zip(w, mean_len)))


def test_dee_never_stopping_is_full_thinking():
    ms = assign_splits(simulate("tiny", 0))
    p = evaluate(ms, Constant("dee", True), thetas=[0.0]).points[0]
    r = evaluate(ms, Constant("dr", True), thetas=[0.0]).points[0]
    assert (p.cost, p.rel_cost, p.acc) == (r.cost, r.rel_cost, r.acc)


# -- a plain twin of the whole evaluator --------------------------------------------------

class ParityRouter:
    strategy = "dr"

    def route(self, units, theta):
        return np.array([(len(q) + mi + int(10 * theta)) % 2 == 0
                         for q, mi in zip(units.question_id, units.model_index)], dtype=bool)


class ScaledCap:
    strategy = "fb"

    def budget(self, units, theta):
        return np.array([theta * (1 + int(q[1:]) % 3) * 2.0 for q in units.question_id])


def positions_twin(test, method, theta):
    out = []
    for t in range(test.num_trajectories):
        n = int(test.n[t])
        L = test.L[t, :n + 1].tolist()
        q = test.question_id[test.question[t]]
        mi = int(test.cell_model[test.cell[t]])
        if method == "dr":
            think = (len(q) + mi + int(10 * theta)) % 2 == 0
            out.append(n if think else max(k for k in range(n + 1) if L[k] == 0))
        elif method == "fb":
            cap = theta * (1 + int(q[1:]) % 3) * 2.0
            out.append(max(k for k in range(n + 1) if L[k] <= cap))
        else:
            m = test.signals["margin"][t]
            out.append(next((k for k in range(n) if m[k] <= theta), n))
    return out


def check_against_twin(ms, res, kind, strategy, thetas):
    test = _test_split_of(ms)
    cells = [int(c) for c in np.unique(test.cell)]
    per = []
    for c in cells:
        rows = test.cell_rows(c)
        units, _ = cell_units(test, rows, strategy)
        states = oracle(units)
        T = int(test.L[rows, -1].sum())
        P = int(test.probes[rows].sum())
        zero = sum(int(test.C[t, max(k for k in range(test.n[t] + 1) if test.L[t, k] == 0)])
                   for t in rows)
        vals = []
        for th in thetas:
            pos = positions_twin(test, kind, th)
            cost = sum(int(test.L[t, pos[t]]) for t in rows)
            rew = sum(int(test.C[t, pos[t]]) for t in rows)
            front = best_under(states, cost)[0]
            assert front >= rew                       # a feasible action never beats the frontier
            vals.append((Fraction(cost, len(rows)), Fraction(cost, T) if T else Fraction(0),
                         Fraction(rew, P), Fraction(front, P)))
        per.append((vals, Fraction(zero, P)))
    w = weights_twin([int(test.cell_model[c]) for c in cells])

    def check_points(points, vals, zero):
        tok, rel, acc, fr = (list(x) for x in zip(*vals))
        keep = nondominated_twin(rel, acc)
        for p, th, a, b, cc, d, k in zip(points, thetas, tok, rel, acc, fr, keep):
            assert (p.theta, p.cost, p.rel_cost, p.acc, p.frontier_acc, p.gap, p.nondominated) == (
                th, float(a), float(b), float(cc), float(d), float(d - cc), k)
        on = [i for i in range(len(keep)) if keep[i]]
        gain = sum(fr[i] - zero for i in on)
        return {"mean_gap": float(100 * sum(fr[i] - acc[i] for i in on) / len(on)),
                "realized_share": float(sum(acc[i] - zero for i in on) / gain) if gain > 0 else None,
                "points": len(thetas), "curve_points": len(on)}

    for cres, (vals, zero) in zip(res.cells, per):
        assert cres.summary == check_points(cres.points, vals, zero)
    macro = [tuple(sum(wc * per[c][0][i][j] for c, wc in enumerate(w)) for j in range(4))
             for i in range(len(thetas))]
    zero = sum(wc * per[c][1] for c, wc in enumerate(w))
    assert res.summary == check_points(res.points, macro, zero)


@settings(max_examples=40)
@given(bench_sets())
def test_evaluator_matches_plain_twin(ms):
    thetas = [0.0, 0.25, 0.5, 1.0, 2.0]
    check_against_twin(ms, evaluate(ms, ParityRouter(), thetas=thetas), "dr", "dr", thetas)
    check_against_twin(ms, evaluate(ms, ScaledCap(), thetas=thetas), "fb", "fb", thetas)
    check_against_twin(ms, evaluate(ms, "thinkbrake", thetas=thetas), "dee", "dee", thetas)


def test_nondominated_examples():
    F = Fraction
    cost = [F(0), F(1), F(1), F(2), F(2), F(3)]
    acc = [F(1), F(2), F(3), F(3), F(3), F(2)]
    # (1, 2) is beaten by (1, 3); (2, 3) by (1, 3); (3, 2) by (1, 3)
    assert nondominated(cost, acc) == [True, False, True, False, False, False]
    assert nondominated([F(1), F(1)], [F(2), F(2)]) == [True, False]   # duplicates: first counts
    assert nondominated(cost, acc) == nondominated_twin(cost, acc)


# -- determinism, splits, labels ------------------------------------------------------------

def test_same_inputs_give_bit_identical_json():
    ms = assign_splits(simulate("small", 2))
    for m in ("thinkswitcher", "predictive-scheduling", "thinkbrake"):
        a = json.dumps(evaluate(ms, m, theta_grid=7).to_json(), sort_keys=True)
        b = json.dumps(evaluate(ms, m, theta_grid=7).to_json(), sort_keys=True)
        assert a == b


def test_input_order_does_not_matter():
    ms = assign_splits(simulate("tiny", 0))
    rows = np.arange(ms.num_trajectories)[::-1]
    trajs = [(ms.models[ms.cell_model[ms.cell[t]]], ms.groups[ms.cell_group[ms.cell[t]]],
              ms.question_id[ms.question[t]], int(ms.trajectory[t]), int(ms.probes[t]),
              ms.L[t, :ms.n[t] + 1].tolist(), ms.C[t, :ms.n[t] + 1].tolist(),
              ms.signals["margin"][t, :ms.n[t] + 1].tolist()) for t in rows]
    splits = {(ms.groups[ms.question_group[q]], ms.question_id[q]): SPLITS[s]
              for q, s in zip(ms.question.tolist(), ms.split.tolist())}
    other = build(trajs, splits)
    for m in ("thinkbrake", ParityRouter()):
        a, b = evaluate(ms, m, thetas=[0.0, 1.0, 5.0]), evaluate(other, m, thetas=[0.0, 1.0, 5.0])
        assert [p.to_json() for p in a.points] == [p.to_json() for p in b.points]


def _scramble_test_labels(ms):
    test = ms.split == 2
    C = np.where(test[:, None], ms.probes[:, None] - ms.C, ms.C).astype(np.int32)
    y = np.where(test, 1 - ms.y, ms.y).astype(np.int8)
    return dataclasses.replace(ms, C=C, y=y)


@pytest.mark.parametrize("method", ["thinkswitcher", "predictive-scheduling", "thinkbrake"])
def test_test_labels_never_reach_a_method(method):
    ms = assign_splits(simulate("small", 0))
    a = evaluate(ms, method, theta_grid=9)
    b = evaluate(_scramble_test_labels(ms), method, theta_grid=9)
    assert a.config["thetas"] == b.config["thetas"]               # sweep fixed before test
    assert [p.cost for p in a.points] == [p.cost for p in b.points]   # same decisions
    assert [p.acc for p in a.points] != [p.acc for p in b.points]     # the labels did change


def test_fit_sees_train_and_validation_only():
    from otbench.analysis.bench._baselines import ThinkSwitcher

    seen = {}

    class Spy(ThinkSwitcher):
        def fit(self, train, validation):
            seen["train"] = set(np.unique(train.split).tolist())
            seen["validation"] = set(np.unique(validation.split).tolist())
            super().fit(train, validation)

        def route(self, units, theta):
            seen.setdefault("units", set()).update(zip(units.group, units.question_id))
            return super().route(units, theta)

    ms = assign_splits(simulate("small", 0))
    evaluate(ms, Spy(), theta_grid=3)
    assert seen["train"] == {0} and seen["validation"] == {1}
    test_q = {(ms.groups[ms.question_group[q]], ms.question_id[q])
              for q in np.unique(ms.question[ms.split == 2])}
    assert seen["units"] == test_q


def test_validation_split_can_be_evaluated():
    ms = assign_splits(simulate("small", 0))
    res = evaluate(ms, "thinkbrake", split="validation", theta_grid=3)
    val_q = np.unique(ms.question[ms.split == 1]).size
    assert res.split == "validation"
    assert sum(c.questions for c in res.cells) == val_q * len(ms.models)


def test_gap_is_never_negative_and_curve_is_monotone():
    ms = assign_splits(simulate("small", 1))
    for m in ("thinkswitcher", "predictive-scheduling", "thinkbrake"):
        res = evaluate(ms, m)
        assert all(p.gap >= 0 for c in res.cells for p in c.points)
        curve = sorted((p.rel_cost, p.acc) for p in res.points if p.nondominated)
        assert all(a2 > a1 and c2 > c1 for (c1, a1), (c2, a2) in zip(curve, curve[1:]))


# -- output ---------------------------------------------------------------------------------

def test_json_schema():
    ms = assign_splits(simulate("tiny", 0))
    doc = evaluate(ms, "thinkbrake", thetas=[0.0, 2.0]).to_json()
    assert doc["schema"] == SCHEMA == "otbench.bench/1"
    assert {"schema", "method", "strategy", "split", "points", "summary", "cells"} <= set(doc)
    assert (doc["method"], doc["strategy"], doc["split"]) == ("thinkbrake", "dee", "test")
    keys = {"theta", "cost", "rel_cost", "acc", "frontier_acc", "gap", "nondominated"}
    assert all(set(p) == keys for p in doc["points"])
    assert {"mean_gap", "realized_share"} <= set(doc["summary"])
    assert all({"model", "group", "points"} <= set(c) for c in doc["cells"])
    assert all(set(p) == keys for c in doc["cells"] for p in c["points"])
    assert "excluded" in doc["token_cost"]
    json.dumps(doc, allow_nan=False)


def test_stored_features_reach_the_units():
    import pyarrow as pa
    from otbench.analysis.bench._features import read_question_features

    ms = assign_splits(simulate("tiny", 0))
    rng = np.random.default_rng(0)
    table = pa.table({
        "group": [ms.groups[g] for g in ms.question_group.tolist()],
        "question": list(ms.question_id),
        "emb": [rng.standard_normal(4).tolist() for _ in range(ms.num_questions)]})
    stored = read_question_features(table)
    res = evaluate(ms, "thinkswitcher", options={"features": "stored:emb"},
                   stored_features=stored, theta_grid=3)
    assert res.config["method_config"]["features"] == {"featurizer": "stored/1", "name": "emb"}
    assert res.config["options"] == {"features": "stored:emb"}
    with pytest.raises(Exception, match=r"no stored feature 'emb' \(have: none\)"):
        evaluate(ms, "thinkswitcher", options={"features": "stored:emb"}, theta_grid=3)


# -- messages --------------------------------------------------------------------------------

def test_evaluate_messages():
    ms = simulate("tiny", 0)
    with pytest.raises(ValueError, match=r"the set has no split assignment .*\(`otbench split DIR`"):
        evaluate(ms, "thinkbrake")
    sp = assign_splits(ms)
    with pytest.raises(ValueError, match=r"`split` must be 'test' or 'validation', got 'train'"):
        evaluate(sp, "thinkbrake", split="train")
    with pytest.raises(ValueError, match=r"`ms` must be a MeasurementSet, got list"):
        evaluate([], "thinkbrake")
    with pytest.raises(ValueError, match=r"`audit` must be a non-negative integer, got -1"):
        evaluate(sp, "thinkbrake", audit=-1)
    no_test = assign_splits(ms, ratios=(1, 1, 0))
    with pytest.raises(ValueError, match=r"the test split has no trajectories"):
        evaluate(no_test, "thinkbrake")
    with pytest.raises(ValueError, match=r"pass at most one of `thetas` and `theta_grid`"):
        evaluate(sp, "thinkbrake", thetas=[1.0], theta_grid=3)
    with pytest.raises(ValueError, match=r"`thetas` must not repeat a value"):
        evaluate(sp, "thinkbrake", thetas=[1.0, 1.0])
    with pytest.raises(ValueError, match=r"`thetas` must be finite"):
        evaluate(sp, "thinkbrake", thetas=[math.inf])
    with pytest.raises(ValueError, match=r"`thetas` must not be empty"):
        evaluate(sp, "thinkbrake", thetas=[])
    with pytest.raises(ValueError, match=r"`thetas` must be numbers"):
        evaluate(sp, "thinkbrake", thetas=["a"])
    with pytest.raises(ValueError, match=r"`theta_grid` must be a positive integer, got 0"):
        evaluate(sp, "thinkbrake", theta_grid=0)
    with pytest.raises(MethodError, match=r"defines no θ sweep"):
        evaluate(sp, ParityRouter())
    no_sig = dataclasses.replace(sp, signals={})
    with pytest.raises(MethodError, match=r"method 'thinkbrake' needs the per-position signal "
                                          r"'margin'; the set records: none"):
        evaluate(no_sig, "thinkbrake")
