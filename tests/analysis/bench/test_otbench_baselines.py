"""The OTBench baselines and their parts (SPEC §6.2): targets, features, ridge, decisions."""

import hashlib

import numpy as np
import pyarrow as pa
import pytest
from _otbench_helpers import bench_sets
from hypothesis import given, settings
from otbench.analysis import MeasurementSetError, simulate
from otbench.analysis.methods._baselines import (
    PredictiveScheduling,
    ThinkBrakeOneContext,
    ThinkSwitcher,
    earliest_max_tokens,
    endpoint_accuracies,
)
from otbench.analysis.bench._evaluate import evaluate
from otbench.analysis.methods import _detmath as detmath
from otbench.analysis.methods._features import (
    DEFAULT_LAMBDAS,
    HashedText,
    PerModelRidge,
    StoredFeatures,
    featurizer,
    read_question_features,
    ridge_fit,
    ridge_path,
    ridge_select,
    unit_mean,
    units_of,
)
from otbench.analysis.bench._splits import assign_splits


def parts(ms):
    return [ms.take(np.flatnonzero(ms.split == s)) for s in range(3)]


# -- supervision targets -------------------------------------------------------------------

@settings(max_examples=60)
@given(bench_sets())
def test_targets_match_loops(ms):
    a0, a1 = endpoint_accuracies(ms)
    lk = earliest_max_tokens(ms)
    for t in range(ms.num_trajectories):
        n = int(ms.n[t])
        L, C, P = ms.L[t, :n + 1].tolist(), ms.C[t, :n + 1].tolist(), int(ms.probes[t])
        k0 = max(k for k in range(n + 1) if L[k] == 0)
        kstar = min(k for k in range(n + 1) if C[k] == max(C))   # earliest maximizer, SPEC §4
        assert (a0[t], a1[t], lk[t]) == (C[k0] / P, C[n] / P, float(L[kstar]))
    unit, units = units_of(ms)
    means = unit_mean(unit, a1, len(units))
    for u in range(len(units)):
        assert means[u] == pytest.approx(np.mean(a1[unit == u]), abs=1e-15)
        rows = np.flatnonzero(unit == u)
        assert {ms.question_id[q] for q in ms.question[rows]} == {units.question_id[u]}
        assert {ms.models[ms.cell_model[c]] for c in ms.cell[rows]} == {units.model[u]}


# -- ridge -------------------------------------------------------------------------------------

def ridge_twin(X, Y, lam):
    """Least squares on the augmented system [X 1; sqrt(lam) I 0] (intercept unpenalized)."""
    n, d = X.shape
    A = np.block([[X, np.ones((n, 1))], [np.sqrt(lam) * np.eye(d), np.zeros((d, 1))]])
    B = np.vstack([Y, np.zeros((d, Y.shape[1]))])
    sol = np.linalg.lstsq(A, B, rcond=None)[0]
    return sol[:d], sol[d]


@pytest.mark.parametrize("n, d", [(30, 5), (6, 40), (1, 3), (12, 12)])
def test_ridge_matches_augmented_least_squares(n, d):
    rng = np.random.default_rng(n * 100 + d)
    X, Y = rng.normal(size=(n, d)), rng.normal(size=(n, 2))
    for lam in (1e-3, 1.0, 100.0):
        w, b = ridge_twin(X, Y, lam)
        r = ridge_fit(X, Y, lam)
        # tolerance: both are backward-stable solves of systems with condition
        # number below ~1e5 here; 1e-8 leaves ample room
        np.testing.assert_allclose(r.w, w, rtol=1e-8, atol=1e-8)
        np.testing.assert_allclose(r.b, b, rtol=1e-8, atol=1e-8)
    for r, lam in zip(ridge_path(X, Y, DEFAULT_LAMBDAS), DEFAULT_LAMBDAS):
        q = ridge_fit(X, Y, lam)
        np.testing.assert_allclose(r.predict(X), q.predict(X), rtol=1e-7, atol=1e-8)


def test_ridge_select_picks_validation_minimum():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(40, 8))
    Y = X[:, :1] * 2 + rng.normal(size=(40, 1))
    Xv = rng.normal(size=(20, 8))
    Yv = Xv[:, :1] * 2 + rng.normal(size=(20, 1))
    r, mse = ridge_select(X, Y, Xv, Yv)
    want = [np.mean((ridge_fit(X, Y, lam).predict(Xv) - Yv) ** 2) for lam in DEFAULT_LAMBDAS]
    np.testing.assert_allclose(mse, want, rtol=1e-9)
    assert r.lam == DEFAULT_LAMBDAS[int(np.argmin(want))]
    # ties go to the larger penalty: constant targets are fit equally well by every penalty
    r, mse = ridge_select(X, np.ones((40, 1)), Xv, np.ones((20, 1)))
    assert r.lam == max(DEFAULT_LAMBDAS)
    r, mse = ridge_select(X, Y, Xv[:0], Yv[:0])
    assert mse == [] and r.lam == DEFAULT_LAMBDAS[len(DEFAULT_LAMBDAS) // 2] == 1.0


# -- features ---------------------------------------------------------------------------------

def _bucket(tok, dim):
    h = int.from_bytes(hashlib.blake2b(tok.encode(), digest_size=8,
                                       key=b"otbench/features/v1").digest(), "big")
    return h % dim, (1.0 if h >> 63 else -1.0)


def test_hashed_text_twin():
    ms = assign_splits(simulate("tiny", 0))
    _, units = units_of(ms)
    f = HashedText(dim=64, ngrams=(1, 2), cat_dim=8)
    X = f.transform(units)
    assert X.shape == (len(units), 64 + 8 + 2)
    for i in range(len(units)):
        import re

        words = re.findall(r"[a-z0-9]+", (units.text[i] or "").lower())
        row = np.zeros(64 + 8 + 2)
        for n in (1, 2):
            for j in range(len(words) - n + 1):
                b, s = _bucket(" ".join(words[j:j + n]), 64)
                row[b] += s
        row[:64] /= np.linalg.norm(row[:64])
        for tok in (f"group={units.group[i]}", f"dataset={units.dataset[i]}"):
            b, s = _bucket(tok, 8)
            row[64 + b] += s
        row[-2:] = [np.log1p(len(words)) / 4, np.log1p(len(units.text[i])) / 8]
        np.testing.assert_allclose(X[i], row, rtol=1e-13, atol=1e-15)
    # units of one question share their features whatever the model
    same = [i for i in range(len(units)) if units.question_id[i] == units.question_id[0]]
    assert len(same) > 1 and all(np.array_equal(X[i], X[same[0]]) for i in same)


def test_stored_features_and_messages():
    ms = assign_splits(simulate("tiny", 0))
    g = [ms.groups[x] for x in ms.question_group.tolist()]
    q = list(ms.question_id)
    m0 = ms.models[0]
    table = pa.table({"group": g + [g[0]], "question": q + [q[0]],
                      "model": [None] * len(q) + [m0],
                      "emb": [[float(i), 1.0] for i in range(len(q))] + [[-1.0, -1.0]]})
    stored = read_question_features(table)
    _, units = units_of(ms, stored)
    X = StoredFeatures("emb").transform(units)
    for i in range(len(units)):
        qi = q.index(units.question_id[i])
        want = [-1.0, -1.0] if (units.model[i] == m0 and qi == 0) else [float(qi), 1.0]
        assert X[i].tolist() == want          # a model-specific vector overrides the shared one
    with pytest.raises(MeasurementSetError, match=r"missing column 'question'"):
        read_question_features(pa.table({"group": ["a"]}))
    with pytest.raises(MeasurementSetError, match=r"row 1: 'e' has 1 values, expected 2"):
        read_question_features(pa.table({"group": ["a", "a"], "question": ["x", "y"],
                                         "e": [[1.0, 2.0], [1.0]]}))
    with pytest.raises(MeasurementSetError, match=r"row 1: duplicate entry for question 'x' of group 'a'"):
        read_question_features(pa.table({"group": ["a", "a"], "question": ["x", "x"],
                                         "e": [[1.0], [2.0]]}))
    with pytest.raises(MeasurementSetError, match=r"row 0: 'e' must be a list of numbers"):
        read_question_features(pa.table({"group": ["a"], "question": ["x"], "e": ["s"]}))
    with pytest.raises(MeasurementSetError, match=r"no 'emb' features for question"):
        units_of(ms, {"emb": {}})


@pytest.mark.parametrize("spec, msg", [
    ("tfidf", r"`features` must be 'hashed', 'stored:NAME' or both joined by '\+', got 'tfidf'"),
    ("stored:", r"got 'stored:'"),
    (3, r"`features` must be 'hashed', 'stored:NAME' or an object with transform\(units\), got 3"),
])
def test_featurizer_messages(spec, msg):
    with pytest.raises(ValueError, match=msg):
        featurizer(spec)


def test_featurizer_specs():
    assert isinstance(featurizer("hashed"), HashedText)
    both = featurizer("hashed+stored:e")
    assert both.config()["parts"][1] == {"featurizer": "stored/1", "name": "e"}


# -- the learned baselines -------------------------------------------------------------------

def test_per_model_ridge_equals_separate_fits():
    ms = assign_splits(simulate("small", 0))
    tr, va, te = parts(ms)
    f = HashedText()
    a0, a1 = endpoint_accuracies(tr)
    unit, units = units_of(tr)
    Y = np.stack([unit_mean(unit, a0, len(units)), unit_mean(unit, a1, len(units))], axis=1)
    vunit, vunits = units_of(va)
    b0, b1 = endpoint_accuracies(va)
    Yv = np.stack([unit_mean(vunit, b0, len(vunits)), unit_mean(vunit, b1, len(vunits))], axis=1)
    pm = PerModelRidge(f)
    pm.fit(units, Y, vunits, Yv)
    assert pm.pooled is None and set(pm.fits) == set(ms.models)
    _, tunits = units_of(te)
    P = pm.predict(tunits)
    X, Xv, Xt = f.transform(units), f.transform(vunits), f.transform(tunits)
    for m in ms.models:
        s, sv, st = (np.asarray(u.model) == m for u in (units, vunits, tunits))
        r, _ = ridge_select(X[s], Y[s], Xv[sv], Yv[sv])
        assert pm.chosen[m] == r.lam
        np.testing.assert_allclose(P[st], r.predict(Xt[st]), rtol=1e-12, atol=1e-12)
    # text features carry signal on the simulator (its texts grow with difficulty):
    # validation error beats predicting the training mean for some model
    better = []
    for m in ms.models:
        s, sv = np.asarray(units.model) == m, np.asarray(vunits.model) == m
        base = np.mean((Yv[sv] - Y[s].mean(axis=0)) ** 2)
        better.append(np.mean((pm.fits[m].predict(Xv[sv]) - Yv[sv]) ** 2) < base)
    assert any(better)


def test_pooled_fallback_for_a_model_without_training_units():
    ms = assign_splits(simulate("tiny", 0))
    tr, va, te = parts(ms)
    keep = np.flatnonzero(tr.cell_model[tr.cell] == 0)
    tr1 = tr.take(keep)                            # model 1 has no training unit
    pm = PerModelRidge(HashedText(dim=16))
    unit, units = units_of(tr1)
    pm.fit(units, np.ones((len(units), 1)), units_of(va)[1], np.ones((len(units_of(va)[1]), 1)))
    assert pm.pooled is not None and "*" in pm.chosen
    np.testing.assert_allclose(pm.predict(units_of(te)[1]), 1.0)


def test_thinkswitcher_decisions():
    ms = assign_splits(simulate("small", 0))
    tr, va, te = parts(ms)
    m = ThinkSwitcher()
    m.fit(tr, va)
    _, tunits = units_of(te)
    p = np.clip(m._ridge.predict(tunits), 0, 1)
    gain = p[:, 1] - p[:, 0]
    for theta in (-1.0, 0.0, 0.2, 1.0):
        assert np.array_equal(m.route(tunits, theta), gain > theta)
    grid = m.theta_grid(9)
    assert grid[0] == -1.0 and grid[-1] == 1.0 and grid == sorted(set(grid))
    assert not m.route(tunits, 1.0).any()
    cfg = m.config()
    assert set(cfg["chosen_lambda"]) == set(ms.models)


def test_predictive_scheduling_decisions():
    ms = assign_splits(simulate("small", 0))
    tr, va, te = parts(ms)
    m = PredictiveScheduling()
    m.fit(tr, va)
    _, tunits = units_of(te)
    # the method rounds expm1 once, in decimal (`_detmath`): NumPy's SIMD expm1 may differ from it in
    # the last bit, by CPU (an AVX2 machine did), so equality is against the exact twin and within
    # one ulp of NumPy's
    raw = m._ridge.predict(tunits)[:, 0]
    pred = np.maximum(detmath.expm1(raw), 0)
    assert np.array_equal(m.budget(tunits, 2.5), 2.5 * pred)
    close = np.maximum(np.expm1(raw), 0)
    assert np.all(np.abs(pred - close) <= np.spacing(np.maximum(np.abs(close), 1e-300)))
    assert np.all(pred >= 0)
    g = m.theta_grid(5)
    assert g[0] == 0.0 and g[1] == 1 / 8 and g[-1] == pytest.approx(32.0) and len(g) == 5
    assert m.theta_grid(1) == [1.0]


def test_thinkbrake_grid_and_message():
    ms = assign_splits(simulate("small", 0))
    tr, va, _ = parts(ms)
    m = ThinkBrakeOneContext()
    m.fit(tr, va)
    asked = np.arange(tr.num_positions)[None, :] < tr.n[:, None]
    vals = tr.signals["margin"][asked]
    g = m.theta_grid(5)
    want = [vals.min() - 1, *np.quantile(vals, [0.25, 0.5, 0.75]), vals.max() + 1]
    np.testing.assert_allclose(g, want, rtol=0, atol=0)
    import dataclasses

    with pytest.raises(ValueError, match=r"thinkbrake-onectx needs the per-position signal 'margin' "
                                         r"\(docs/rules.md\); the set records: none"):
        m.fit(dataclasses.replace(tr, signals={}), va)


def test_predict_before_fit():
    ms = assign_splits(simulate("tiny", 0))
    with pytest.raises(ValueError, match=r"thinkswitcher: call fit\(train, validation\) before deciding"):
        ThinkSwitcher().route(units_of(ms)[1], 0.0)


def test_builtins_run_end_to_end_with_default_sweeps():
    ms = assign_splits(simulate("small", 0))
    for name, strategy in (("thinkswitcher", "dr"), ("predictive-scheduling", "fb"),
                           ("thinkbrake-onectx", "dee")):
        res = evaluate(ms, name)
        assert res.strategy == strategy and len(res.points) >= 15
        assert 0 < res.summary["curve_points"] <= len(res.points)
        # the sweep spans (nearly) no thinking to (nearly) full thinking
        assert min(p.rel_cost for p in res.points) < 0.02
        assert max(p.rel_cost for p in res.points) > 0.95
