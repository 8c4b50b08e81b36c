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
from otbench.analysis.bench._areas import nondominated
from otbench.analysis.bench._evaluate import SCHEMA, evaluate
from otbench.analysis.methods import MethodError
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


def area_twin(ints, keep, states, T, P, zero):
    """The area terms by a unit-token Riemann sum (exact: both curves step at integer costs)."""
    on = [ints[i] for i in range(len(keep)) if keep[i]]

    def M(b):      # floored at A0, an action of every strategy at cost 0 (issue 37)
        return max([zero] + [r for c, r in on if c <= b])

    def F(b):
        return best_under(states, b)[0]

    lo, hi = min(c for c, _ in on), max(c for c, _ in on)

    def mean_gap(a, b):
        if a == b:
            return Fraction(F(a) - M(a), P)
        return Fraction(sum(F(x) - M(x) for x in range(a, b)), (b - a) * P)

    if T == 0:
        return mean_gap(0, 0), mean_gap(0, 0), Fraction(0), Fraction(0), Fraction(0), Fraction(0)
    return (mean_gap(lo, hi), mean_gap(0, T),
            Fraction(sum(M(x) - zero for x in range(T)), T * P),
            Fraction(sum(F(x) - zero for x in range(T)), T * P), Fraction(lo, T), Fraction(hi, T))


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
        vals, ints = [], []
        for th in thetas:
            pos = positions_twin(test, kind, th)
            cost = sum(int(test.L[t, pos[t]]) for t in rows)
            rew = sum(int(test.C[t, pos[t]]) for t in rows)
            front = best_under(states, cost)[0]
            assert front >= rew                       # a feasible action never beats the frontier
            vals.append((Fraction(cost, len(rows)), Fraction(cost, T) if T else Fraction(0),
                         Fraction(rew, P), Fraction(front, P)))
            ints.append((cost, rew))
        per.append((vals, ints, states, T, P, zero))
    w = weights_twin([int(test.cell_model[c]) for c in cells])

    def check_points(points, vals):
        tok, rel, acc, fr = (list(x) for x in zip(*vals))
        keep = nondominated_twin(rel, acc)
        for p, th, a, b, cc, d, k in zip(points, thetas, tok, rel, acc, fr, keep):
            assert (p.theta, p.cost, p.rel_cost, p.acc, p.frontier_acc, p.gap, p.nondominated) == (
                th, float(a), float(b), float(cc), float(d), float(d - cc), k)
        return keep

    terms = []
    for cres, (vals, ints, states, T, P, zero) in zip(res.cells, per):
        keep = check_points(cres.points, vals)
        g, gf, real, gain, lo, hi = area_twin(ints, keep, states, T, P, zero)
        terms.append((g, gf, real, gain))
        assert cres.summary == {
            "gap_area": float(g), "gap_area_full": float(gf),
            "realized_share": float(real / gain) if gain > 0 else None,
            "range": [float(lo), float(hi)], "points": len(thetas), "curve_points": sum(keep)}
    macro = [tuple(sum(wc * per[c][0][i][j] for c, wc in enumerate(w)) for j in range(4))
             for i in range(len(thetas))]
    keep = check_points(res.points, macro)
    g, gf, real, gain = (sum(wc * t[j] for wc, t in zip(w, terms)) for j in range(4))
    assert res.summary == {
        "gap_area": float(g), "gap_area_full": float(gf),
        "realized_share": float(real / gain) if gain > 0 else None,
        "points": len(thetas), "curve_points": sum(keep)}


@settings(max_examples=40)
@given(bench_sets())
def test_evaluator_matches_plain_twin(ms):
    thetas = [0.0, 0.25, 0.5, 1.0, 2.0]
    check_against_twin(ms, evaluate(ms, ParityRouter(), thetas=thetas), "dr", "dr", thetas)
    check_against_twin(ms, evaluate(ms, ScaledCap(), thetas=thetas), "fb", "fb", thetas)
    check_against_twin(ms, evaluate(ms, "thinkbrake-onectx", thetas=thetas), "dee", "dee", thetas)


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
    for m in ("thinkswitcher", "predictive-scheduling", "thinkbrake-onectx"):
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
    for m in ("thinkbrake-onectx", ParityRouter()):
        a, b = evaluate(ms, m, thetas=[0.0, 1.0, 5.0]), evaluate(other, m, thetas=[0.0, 1.0, 5.0])
        assert [p.to_json() for p in a.points] == [p.to_json() for p in b.points]


def _scramble_test_labels(ms):
    test = ms.split == 2
    C = np.where(test[:, None], ms.probes[:, None] - ms.C, ms.C).astype(np.int32)
    y = np.where(test, 1 - ms.y, ms.y).astype(np.int8)
    return dataclasses.replace(ms, C=C, y=y)


@pytest.mark.parametrize("method", ["thinkswitcher", "predictive-scheduling", "thinkbrake-onectx"])
def test_test_labels_never_reach_a_method(method):
    ms = assign_splits(simulate("small", 0))
    a = evaluate(ms, method, theta_grid=9)
    b = evaluate(_scramble_test_labels(ms), method, theta_grid=9)
    assert a.config["thetas"] == b.config["thetas"]               # sweep fixed before test
    assert [p.cost for p in a.points] == [p.cost for p in b.points]   # same decisions
    assert [p.acc for p in a.points] != [p.acc for p in b.points]     # the labels did change


def test_fit_sees_train_and_validation_only():
    from otbench.analysis.methods._baselines import ThinkSwitcher

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
    res = evaluate(ms, "thinkbrake-onectx", split="validation", theta_grid=3)
    val_q = np.unique(ms.question[ms.split == 1]).size
    assert res.split == "validation"
    assert sum(c.questions for c in res.cells) == val_q * len(ms.models)


def test_gap_is_never_negative_and_curve_is_monotone():
    ms = assign_splits(simulate("small", 1))
    for m in ("thinkswitcher", "predictive-scheduling", "thinkbrake-onectx"):
        res = evaluate(ms, m)
        assert all(p.gap >= 0 for c in res.cells for p in c.points)
        curve = sorted((p.rel_cost, p.acc) for p in res.points if p.nondominated)
        assert all(a2 > a1 and c2 > c1 for (c1, a1), (c2, a2) in zip(curve, curve[1:]))


# -- output ---------------------------------------------------------------------------------

def test_json_schema():
    ms = assign_splits(simulate("tiny", 0))
    doc = evaluate(ms, "thinkbrake-onectx", thetas=[0.0, 2.0]).to_json()
    assert doc["schema"] == SCHEMA == "otbench.bench/1"
    assert {"schema", "method", "strategy", "split", "points", "summary", "cells"} <= set(doc)
    assert (doc["method"], doc["strategy"], doc["split"]) == ("thinkbrake-onectx", "dee", "test")
    keys = {"theta", "cost", "rel_cost", "acc", "frontier_acc", "gap", "nondominated"}
    assert all(set(p) == keys for p in doc["points"])
    assert {"gap_area", "gap_area_full", "realized_share"} <= set(doc["summary"])
    assert all({"model", "group", "points"} <= set(c) for c in doc["cells"])
    assert all(set(p) == keys for c in doc["cells"] for p in c["points"])
    assert "excluded" in doc["token_cost"]
    json.dumps(doc, allow_nan=False)


def test_stored_features_reach_the_units():
    import pyarrow as pa
    from otbench.analysis.methods._features import read_question_features

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
        evaluate(ms, "thinkbrake-onectx")
    sp = assign_splits(ms)
    with pytest.raises(ValueError, match=r"`split` must be 'test' or 'validation', got 'train'"):
        evaluate(sp, "thinkbrake-onectx", split="train")
    with pytest.raises(ValueError, match=r"`ms` must be a MeasurementSet, got list"):
        evaluate([], "thinkbrake-onectx")
    with pytest.raises(ValueError, match=r"`audit` must be a non-negative integer, got -1"):
        evaluate(sp, "thinkbrake-onectx", audit=-1)
    no_test = assign_splits(ms, ratios=(1, 1, 0))
    with pytest.raises(ValueError, match=r"the test split has no trajectories"):
        evaluate(no_test, "thinkbrake-onectx")
    with pytest.raises(ValueError, match=r"pass at most one of `thetas` and `theta_grid`"):
        evaluate(sp, "thinkbrake-onectx", thetas=[1.0], theta_grid=3)
    with pytest.raises(ValueError, match=r"`thetas` must not repeat a value"):
        evaluate(sp, "thinkbrake-onectx", thetas=[1.0, 1.0])
    with pytest.raises(ValueError, match=r"`thetas` must be finite"):
        evaluate(sp, "thinkbrake-onectx", thetas=[math.inf])
    with pytest.raises(ValueError, match=r"`thetas` must not be empty"):
        evaluate(sp, "thinkbrake-onectx", thetas=[])
    with pytest.raises(ValueError, match=r"`thetas` must be numbers"):
        evaluate(sp, "thinkbrake-onectx", thetas=["a"])
    with pytest.raises(ValueError, match=r"`theta_grid` must be a positive integer, got 0"):
        evaluate(sp, "thinkbrake-onectx", theta_grid=0)
    with pytest.raises(MethodError, match=r"defines no θ sweep"):
        evaluate(sp, ParityRouter())
    no_sig = dataclasses.replace(sp, signals={})
    with pytest.raises(MethodError, match=r"method 'thinkbrake-onectx' needs the per-position signal "
                                          r"'margin'; the set records: none"):
        evaluate(no_sig, "thinkbrake-onectx")


# -- the area summary: exact values, and no weight on how many θ land in a region --------

def test_area_summary_by_hand():
    from otbench.analysis.bench._areas import cell_areas

    F = Fraction
    pareto = (np.array([0, 10, 20, 40]), np.array([2, 5, 7, 9]))   # T = 40 tokens, P = 10
    a = cell_areas([10, 40], [4, 8], [True, True], pareto, 40, 10, 2)
    # F on [10, 40): 5 x 10 + 7 x 20 = 190; M: 4 x 30 = 120
    assert (a.gap, a.lo, a.hi) == (F(70, 300), F(1, 4), F(1))
    # [0, 10): both at A0 = 2 (20 each); realized (140 - 80) / 400, gain (210 - 80) / 400
    assert (a.gap_full, a.realized, a.gain) == (F(70, 400), F(60, 400), F(130, 400))
    b = cell_areas([10, 20, 40], [4, 6, 8], [True, True, True], pareto, 40, 10, 2)
    assert b.gap == F(190 - (40 + 120), 300)         # a new step adds exactly its own area
    one = cell_areas([20], [6], [True], pareto, 40, 10, 2)
    assert one.gap == F(7 - 6, 10)                   # zero-width range: the point gap


def test_area_summary_ignores_extra_thetas_on_the_same_points():
    ms = assign_splits(simulate("small", 0))
    base = [-1e9, 0.0, 0.5, 1.0, 2.0, 1e9]
    # 40 more θ below every margin: all land on the full-thinking point (one region)
    dense = base[:1] + [-1e9 + i for i in range(1, 41)] + base[1:]
    a, b = evaluate(ms, "thinkbrake-onectx", thetas=base), evaluate(ms, "thinkbrake-onectx", thetas=dense)
    assert b.summary["points"] == a.summary["points"] + 40
    strip = ("points",)
    assert {k: v for k, v in a.summary.items() if k not in strip} == \
        {k: v for k, v in b.summary.items() if k not in strip}
    for ca, cb in zip(a.cells, b.cells):
        assert {k: v for k, v in ca.summary.items() if k not in strip} == \
            {k: v for k, v in cb.summary.items() if k not in strip}


def test_refined_region_moves_the_area_by_what_it_reaches_not_by_its_count():
    from otbench.analysis.bench._areas import cell_areas

    # The failure: three more curve points packed into 3 tokens moved the old
    # per-point mean gap by 10.8 pp although they change the attainable curve very little.
    T, P, zero = 1000, 100, 10
    pareto = (np.array([0, 1, 2, 3, 500, 1000]), np.array([10, 20, 30, 40, 80, 90]))
    coarse = cell_areas([0, 1000], [10, 90], [True, True], pareto, T, P, zero)
    fine = cell_areas([0, 1, 2, 3, 1000], [10, 11, 12, 13, 90], [True] * 5, pareto, T, P, zero)
    old_mean = (Fraction(0), Fraction(0 + 9 + 18 + 27 + 0, 5 * P))   # F - acc at each point
    assert old_mean[1] - old_mean[0] == Fraction(108, 1000)
    # M rises by 1 on [1, 2), 2 on [2, 3), 3 on [3, 1000): 2994 probe-tokens
    assert coarse.gap - fine.gap == Fraction(2994, T * P)
    assert fine.realized - coarse.realized == Fraction(2994, T * P)
    many = cell_areas([0, 1, 1, 2, 2, 3, 3, 1000], [10, 11, 11, 12, 12, 13, 13, 90],
                      [True, True, False, True, False, True, False, True], pareto, T, P, zero)
    assert many == fine                                   # duplicates of a point add nothing
