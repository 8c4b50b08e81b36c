"""Precision planning (issue 26): `predict_precision` against a plain Python twin (the draws, the
exact variances), the pilot's own design against the bootstrap, monotone widths, thinning, refusals."""

import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from otbench.analysis.measurement import simulate
from otbench.analysis.resampling import (
    BOOT_METRICS,
    PrecisionError,
    bootstrap,
    predict_precision,
    thin_probes,
)

M64 = 2 ** 64 - 1
GAMMA = 0x9E3779B97F4A7C15


def mix64(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def numbers(ws, count):
    return ([w & 0xFFFFFFFF for w in ws] + [w >> 32 for w in ws])[:count]


def _ratio(L, C, n):
    """OR and AD of one trajectory (earliest maximizer), plain Python."""
    k = max(range(n + 1), key=lambda j: (C[j], -j))
    return (L[k] / L[n] if L[n] > 0 else 1.0), (C[k] - C[n])


@pytest.fixture(scope="module")
def small():
    ms = simulate("small", 3)
    keep = np.flatnonzero(ms.trajectory < 3)          # R = 3 everywhere, a quick set
    return ms.take(keep)


def twin(ms, questions, R, seed, N):
    """(θ1, θ12) macro OR, AD, P(0) per replicate: plain Python on the documented draws."""
    rows = {}
    for t in range(ms.num_trajectories):
        key = (int(ms.cell_model[ms.cell[t]]), int(ms.question[t]))
        rows.setdefault(key, []).append(t)
    models = sorted({m for m, _ in rows})
    groups = sorted({int(ms.question_group[q]) for _, q in rows})
    pools = [sorted({q for _, q in rows if ms.question_group[q] == g}) for g in groups]
    plan = [questions.get(ms.groups[g], len(p)) for g, p in zip(groups, pools)]
    S = sum(plan)
    Hs, Hr = -(-S // 2), -(-R // 2)
    W = Hs + len(models) * S * Hr
    val = {}
    for t in range(ms.num_trajectories):
        n = int(ms.n[t])
        o, a = _ratio(ms.L[t].tolist(), ms.C[t].tolist(), n)
        P = int(ms.probes[t])
        val[t] = (o, a / P, ms.C[t, 0] / P)
    out1, out12 = [], []
    for i in range(N):
        ws = [mix64((seed + (i * W + 1 + j) * GAMMA) & M64) for j in range(W)]
        u = numbers(ws[:Hs], S)
        slot_q, s = [], 0
        for g, pool in enumerate(pools):
            for _ in range(plan[g]):
                slot_q.append((g, pool[(u[s] * len(pool)) >> 32]))
                s += 1
        res1, res12 = [], []
        for stat in range(3):
            macro1 = macro12 = 0.0
            for mi, m in enumerate(models):
                cells1, cells12 = [], []
                for g in range(len(groups)):
                    occ1, occ12 = [], []
                    for s, (gg, q) in enumerate(slot_q):
                        if gg != g or (m, q) not in rows:
                            continue
                        traj = rows[(m, q)]
                        blk = ws[Hs + (mi * S + s) * Hr: Hs + (mi * S + s + 1) * Hr]
                        picks = [traj[(x * len(traj)) >> 32] for x in numbers(blk, R)]
                        occ1.append(sum(val[t][stat] for t in traj) / len(traj))
                        occ12.append(sum(val[t][stat] for t in picks) / R)
                    if occ1:
                        cells1.append(sum(occ1) / len(occ1))
                        cells12.append(sum(occ12) / len(occ12))
                macro1 += sum(cells1) / len(cells1)
                macro12 += sum(cells12) / len(cells12)
            res1.append(macro1 / len(models))
            res12.append(macro12 / len(models))
        out1.append(res1)
        out12.append(res12)
    return np.asarray(out1), np.asarray(out12)


def exact_twin(ms, questions, R):
    """v1, v2 of macro OR, AD, P(0) by hand: every model has every question here, so the macro is
    the sum over groups of `Q'_g` i.i.d. slot means of `Z_g(q) = Σ_models w (ȳ_{m,q} - μ_{m,g})`."""
    vals = {}
    for t in range(ms.num_trajectories):
        o, a = _ratio(ms.L[t].tolist(), ms.C[t].tolist(), int(ms.n[t]))
        P = int(ms.probes[t])
        key = (int(ms.cell_model[ms.cell[t]]), int(ms.question[t]))
        vals.setdefault(key, []).append((o, a / P, ms.C[t, 0] / P))
    models = sorted({m for m, _ in vals})
    groups = sorted({int(ms.question_group[q]) for _, q in vals})
    w = 1.0 / (len(models) * len(groups))
    v1, v2 = np.zeros(3), np.zeros(3)
    for g in groups:
        pool = sorted({q for _, q in vals if ms.question_group[q] == g})
        Qg = questions.get(ms.groups[g], len(pool))
        for j in range(3):
            ybar = {(m, q): sum(v[j] for v in vals[(m, q)]) / len(vals[(m, q)]) for m in models for q in pool}
            mu = {m: sum(ybar[(m, q)] for q in pool) / len(pool) for m in models}
            Z = [sum(w * (ybar[(m, q)] - mu[m]) for m in models) for q in pool]
            v1[j] += sum(z * z for z in Z) / len(pool) / Qg
            s2 = [sum(w * w * sum((v[j] - ybar[(m, q)]) ** 2 for v in vals[(m, q)]) / len(vals[(m, q)]) / R
                      for m in models) for q in pool]
            v2[j] += sum(s2) / len(pool) / Qg
    return v1, v2


def test_components_match_the_python_twin(small):
    questions = {"AIME": 7, "MATH500": 11}
    N, R, seed = 6, 5, 11
    pred = predict_precision(small, questions=questions, trajectories=R, probes=int(small.probes[0]),
                             replicates=N, seed=seed)
    t1, t12 = twin(small, questions, R, seed, N)
    v1, v2 = exact_twin(small, questions, R)
    comps = pred.levels[int(small.probes[0])]
    for j, s in enumerate(("or", "ad", "zero_step_acc")):
        c = comps[s]
        assert c.v1 == pytest.approx(v1[j], rel=1e-9, abs=1e-15)
        assert c.v2 == pytest.approx(v2[j], rel=1e-9, abs=1e-15)
        lo, hi = np.percentile(t12[:, j], (2.5, 97.5))
        assert c.width == pytest.approx(hi - lo, rel=1e-9, abs=1e-15)
        R_p, Q_p = 3.0, 4 / sum(1 / q for q in pred.pilot_questions.values())
        w = c.v2 * R * R_p / (R_p - 1)
        b = c.v1 * Q_p / (Q_p - 1) - w / R_p
        if b < 0:       # the moments' boundary: all of v1 + v2 within
            b, w = 0.0, (c.v1 + c.v2) / ((Q_p - 1) / (Q_p * R_p) + (R_p - 1) / (R_p * R))
        assert c.within == pytest.approx(w, rel=1e-12)
        assert c.between == pytest.approx(b, rel=1e-9, abs=1e-15)


def test_exact_variances_are_the_resamplings_variances(small):
    """The exact `v1`, `v2` against the Monte Carlo variances of the twin's own replicates."""
    questions = {"AIME": 5}
    pred = predict_precision(small, questions=questions, trajectories=2, probes=int(small.probes[0]),
                             replicates=2)
    t1, t12 = twin(small, questions, 2, 5, 400)
    c = pred.levels[int(small.probes[0])]["or"]
    # 400 replicates: the variance of a variance estimate is ~2/400 relative -> +-7 % at 1 sd
    assert np.var(t1[:, 0], ddof=1) == pytest.approx(c.v1, rel=0.3)
    assert np.var(t12[:, 0] - t1[:, 0], ddof=1) == pytest.approx(c.v2, rel=0.3)


def test_the_pilots_own_design_is_its_bootstrap_exactly(small):
    P = int(small.probes[0])
    pred = predict_precision(small, trajectories=3, probes=P, replicates=64, seed=7)
    boot = bootstrap(small, replicates=64, seed=7)
    for s in ("or", "ad", "zero_step_acc"):
        lo, hi = np.percentile(boot.macro[:, BOOT_METRICS.index(s)], (2.5, 97.5))
        assert pred.width(s, 3, P) == pytest.approx(hi - lo, rel=1e-9)


def test_widths_fall_with_questions_trajectories_and_probes(small):
    P = int(small.probes[0])
    pred = predict_precision(small, trajectories=3, probes=2 * P, replicates=200, seed=3)
    for s in ("or", "ad", "zero_step_acc"):
        w = [pred.width(s, R, P) for R in (2, 3, 4, 8, 16, 64)]
        assert all(a >= b for a, b in zip(w, w[1:])), (s, w)      # exact: V(R) is non-increasing for R >= 2
    # four times the questions: about half the width (Monte Carlo error ~5 % at 200 replicates)
    big = predict_precision(small, questions={g: 4 * q for g, q in pred.pilot_questions.items()},
                            trajectories=3, probes=P, replicates=200, seed=3)
    for s in ("or", "ad", "zero_step_acc"):
        assert 0.35 < big.width(s, 3, P) / pred.width(s, 3, P) < 0.7, s
    # AD's probe noise: beyond the pilot's P the extrapolated width is smaller
    assert pred.width("ad", 3, 2 * P) < pred.width("ad", 3, P)


def test_a_prediction_moved_to_other_question_counts_is_the_one_made_there(small):
    """`at_questions` (the questions a target needs, `otbench plan --target`): the variances equal a
    prediction made at the new counts; the widths differ only by the replicates' shape."""
    P = int(small.probes[0])
    pred = predict_precision(small, trajectories=3, probes=P, replicates=200, seed=3)
    four = {g: 4 * q for g, q in pred.pilot_questions.items()}
    moved = pred.at_questions(four)
    made = predict_precision(small, questions=four, trajectories=3, probes=P, replicates=200, seed=3)
    assert moved.questions == made.questions
    for s in ("or", "ad", "zero_step_acc"):
        for R in (2, 3, 8):
            assert moved.variance(s, R, P) == pytest.approx(made.variance(s, R, P), rel=1e-9), (s, R)
        assert moved.width(s, 3, P) == pytest.approx(made.width(s, 3, P), rel=0.1), s
        assert moved.width(s, 3, P) == pytest.approx(pred.width(s, 3, P) / 2, rel=0.05), s
    with pytest.raises(PrecisionError, match="want positive counts"):
        pred.at_questions({next(iter(four)): 0})


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(m=st.integers(1, 8), seed=st.integers(0, 2 ** 32))
def test_thinning_is_an_exact_subsample(small, m, seed):
    t = thin_probes(small, m, np.random.default_rng(seed))
    P = int(small.probes[0])
    assert (t.probes == m).all() and t.C.min() >= 0 and t.C.max() <= m
    k = np.arange(t.C.shape[1])[None, :]
    assert (t.C >= np.maximum(0, small.C - (P - m))).all() and (t.C <= np.minimum(small.C, m)).all()
    last = t.C[np.arange(t.num_trajectories), t.n]
    assert (np.where(k > t.n[:, None], t.C == last[:, None], True)).all()     # SPEC §2 padding


def test_thinning_keeps_the_mean():
    ms = simulate("tiny", 0)
    P = int(ms.probes[0])
    draws = [thin_probes(ms, 2, np.random.default_rng(s)).C.mean() for s in range(200)]
    assert np.mean(draws) == pytest.approx(ms.C.mean() * 2 / P, rel=0.02)


def test_refusals(small):
    one = small.take(np.flatnonzero(small.trajectory == 0))
    with pytest.raises(PrecisionError, match=r"needs >= 2 per \(model, question\)"):
        predict_precision(one, trajectories=4, probes=4)
    with pytest.raises(PrecisionError, match="group\\(s\\) NOPE not in the pilot"):
        predict_precision(small, questions={"NOPE": 3}, trajectories=4, probes=4)
    with pytest.raises(PrecisionError, match="`trajectories` must be an integer >= 1"):
        predict_precision(small, trajectories=0, probes=4)
    mixed = dataclasses.replace(small, probes=np.where(np.arange(small.num_trajectories) == 0, 4,
                                                       small.probes).astype(np.int32))
    with pytest.raises(PrecisionError, match="probes per position differ"):
        predict_precision(mixed, trajectories=4, probes=4)
    pred = predict_precision(small, trajectories=3, probes=int(small.probes[0]), replicates=8)
    with pytest.raises(PrecisionError, match="not a computed probe level"):
        pred.width("or", 3, 2)


def _random_set(seed, P, missing=False, R=None):
    """2 models x 2 groups, R in 2..4 (or `R`), a shared P; n = 0, zero-length steps, ties and flat curves."""
    from tests._sets import build_set

    rng = np.random.default_rng(seed)
    trajs = []
    for m in ("a", "b"):
        for g, qs in (("g1", ("q1", "q2", "q3")), ("g2", ("q4", "q5"))):
            for q in qs:
                if missing and m == "b" and q == "q2":
                    continue
                for s in range(R or int(rng.integers(2, 5))):
                    n = int(rng.integers(0, 5))
                    L = np.r_[0, np.cumsum(rng.choice([0, 1, 7, 30], n))].tolist()
                    C = ([int(rng.integers(0, P + 1))] * (n + 1) if rng.random() < 0.3
                         else rng.integers(0, P + 1, n + 1).tolist())
                    trajs.append((m, g, q, s, P, L, C))
    return build_set(trajs)


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2 ** 32), P=st.integers(1, 4), R=st.integers(1, 6), q1=st.integers(1, 6))
def test_exact_variances_match_the_twin_on_ragged_sets(seed, P, R, q1):
    ms = _random_set(seed, P)
    questions = {"g1": q1}
    pred = predict_precision(ms, questions=questions, trajectories=R, probes=P, replicates=2, seed=1)
    v1, v2 = exact_twin(ms, questions, R)
    for j, s in enumerate(("or", "ad", "zero_step_acc")):
        c = pred.levels[P][s]
        assert c.v1 == pytest.approx(v1[j], rel=1e-9, abs=1e-15)
        assert c.v2 == pytest.approx(v2[j], rel=1e-9, abs=1e-15)
        w = [pred.width(s, r, P) for r in (2, 3, 5, 9)]
        assert all(a >= b - 1e-15 for a, b in zip(w, w[1:]))


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 2 ** 32), P=st.integers(2, 4))
def test_a_model_lacking_a_question_still_predicts(seed, P):
    ms = _random_set(seed, P, missing=True)
    pred = predict_precision(ms, trajectories=3, probes=2 * P, replicates=16, seed=2)
    for s in ("or", "ad", "zero_step_acc"):
        for R, p in ((2, P), (8, 2 * P)):
            w = pred.width(s, R, p)
            assert np.isfinite(w) and w >= 0


@pytest.fixture(scope="module")
def small_frontiers(small):
    P = int(small.probes[0])
    pred = predict_precision(small, trajectories=3, probes=2 * P, replicates=24, seed=7, frontiers=True)
    boot = bootstrap(small, replicates=24, seed=7, frontiers=True)
    return pred, boot


def test_frontier_widths_at_the_pilots_own_design_are_its_bootstrap(small, small_frontiers):
    from otbench.analysis.frontier import STRATEGIES
    from otbench.analysis.resampling import frontier_area

    pred, boot = small_frontiers
    P, fb = int(small.probes[0]), boot.frontiers
    for i, s in enumerate(STRATEGIES):
        bm = fb.beta_match[:, i]
        lo, hi = np.percentile(bm[np.isfinite(bm)], (2.5, 97.5))
        assert pred.width(f"beta_match_{s}", 3, P) == pytest.approx(hi - lo, rel=1e-9, abs=1e-12), s
        lo, hi = np.percentile(frontier_area(fb.macro[:, i], fb.grid), (2.5, 97.5))
        assert pred.width(f"area_{s}", 3, P) == pytest.approx(hi - lo, rel=1e-9, abs=1e-12), s


def test_beta_match_width_is_its_simulated_width_scaled_by_the_area(small_frontiers):
    """Method step 7 by hand: `β_match`'s θ12 width times the area's predicted / simulated width ratio."""
    pred, _ = small_frontiers
    top = pred.levels[max(pred.levels)]
    Q = len(pred.questions) / sum(1.0 / q for q in pred.questions.values())
    for s in ("dr", "fb", "dee"):
        a = top[f"area_{s}"]
        for R, P in ((3, max(pred.levels)), (16, max(pred.levels)), (16, 2 * max(pred.levels))):
            if P in pred.levels:
                b, w = pred.levels[P][f"area_{s}"].between, pred.levels[P][f"area_{s}"].within
            else:
                fit = [m for m in pred.levels if m >= -(-pred.pilot_P // 2)]
                x = [1.0 / m for m in fit]
                b, w = (np.polyval(np.polyfit(x, [getattr(pred.levels[m][f"area_{s}"], k) for m in fit], 1), 1 / P)
                        for k in ("between", "within"))
            b, w = max(b, 0.0), max(w, 0.0)
            V = (Q - 1) / Q * b + w * ((Q - 1) / (Q * R) + (R - 1) / R ** 2)
            want = top[f"beta_match_{s}"].width * np.sqrt(V / (a.v1 + a.v2))
            assert pred.width(f"beta_match_{s}", R, P) == pytest.approx(want, rel=1e-9, abs=1e-15), (s, R, P)
        # more trajectories never widen it (V of the area is non-increasing in R >= 2)
        ws = [pred.width(f"beta_match_{s}", R, max(pred.levels)) for R in (2, 3, 8, 32)]
        assert all(x >= y - 1e-15 for x, y in zip(ws, ws[1:])), (s, ws)


@settings(max_examples=4, deadline=None)
@given(seed=st.integers(0, 2 ** 32), P=st.integers(2, 4), missing=st.booleans())
def test_frontier_widths_on_ragged_sets(seed, P, missing):
    """n = 0, zero-length steps, ties, flat curves, a model lacking a question: with R = 3 every
    frontier width at the pilot's own design is the bootstrap's; with R in 2..4 the widths are
    finite or NaN, >= 0, and `β_match`'s never grows with R."""
    from otbench.analysis.frontier import STRATEGIES
    from otbench.analysis.resampling import frontier_area

    ms = _random_set(seed, P, missing=missing, R=3)
    pred = predict_precision(ms, trajectories=3, probes=P, replicates=12, seed=4, frontiers=True)
    boot = bootstrap(ms, replicates=12, seed=4, frontiers=True)
    for i, s in enumerate(STRATEGIES):
        bm = boot.frontiers.beta_match[:, i]
        if np.isfinite(bm).sum() >= 6:
            lo, hi = np.percentile(bm[np.isfinite(bm)], (2.5, 97.5))
            assert pred.width(f"beta_match_{s}", 3, P) == pytest.approx(hi - lo, rel=1e-9, abs=1e-12)
        lo, hi = np.percentile(frontier_area(boot.frontiers.macro[:, i], boot.frontiers.grid), (2.5, 97.5))
        assert pred.width(f"area_{s}", 3, P) == pytest.approx(hi - lo, rel=1e-9, abs=1e-12)
    ragged = predict_precision(_random_set(seed, P, missing=missing), trajectories=3, probes=2 * P,
                               replicates=12, seed=4, frontiers=True)
    for s in STRATEGIES:
        ws = [ragged.width(f"beta_match_{s}", r, p) for p in (P, 2 * P) for r in (2, 4, 16)]
        assert all(np.isnan(w) or w >= 0 for w in ws)
        for k in (0, 3):
            a = [w for w in ws[k:k + 3] if np.isfinite(w)]
            assert all(x >= y - 1e-15 for x, y in zip(a, a[1:]))


def test_a_component_falling_like_one_over_m_is_never_zero_beyond_the_pilot():
    """The cause of P(0) and AD half-widths of exactly 0 beyond the pilot's P: an unconstrained
    `α + β/m` fit of `w = 1/m - 0.05` has `α = -0.05`, so at P' = 32 it went negative and was
    clipped to 0. With `α >= 0` the fit is `β/m` through the origin (`β = Σxy / Σx²`)."""
    from otbench.analysis.resampling._prediction import inverse_probe_fit

    x = np.asarray([1 / 2, 1 / 3, 1 / 4])
    y = x - 0.05
    beta, alpha = np.polyfit(x, y, 1)
    assert alpha == pytest.approx(-0.05) and alpha + beta / 32 < 0       # the old clipped value
    got = inverse_probe_fit(x, y, 32)
    assert got == pytest.approx(float(np.dot(x, y) / np.dot(x, x)) / 32) and got > 0
    flat = np.full(3, 0.01)                                          # a flat component stays flat
    assert inverse_probe_fit(x, flat, 32) == pytest.approx(0.01)


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 2 ** 32), P=st.integers(2, 6))
def test_half_widths_beyond_the_pilot_are_zero_only_without_noise(seed, P):
    ms = _random_set(seed, P)
    pred = predict_precision(ms, trajectories=3, probes=4 * P, replicates=16, seed=2)
    for s in ("or", "ad", "zero_step_acc"):
        noisy = any(c[s].between > 0 or c[s].within > 0 for c in pred.levels.values())
        top = pred.levels[max(pred.levels)][s]
        w = pred.width(s, 3, 4 * P)
        assert np.isfinite(w) and (w > 0 or not noisy or top.width == 0), (s, w)
