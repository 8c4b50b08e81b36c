"""Probe thinning (exact, SPEC §7) against scipy, subset enumeration and exact-fraction twins;
trajectory thinning against a plain-Python twin of its stream and selection."""

import itertools
import math
from collections import Counter, defaultdict
from fractions import Fraction

import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats
from _sets import build_set
from hypothesis import given, settings
from hypothesis import strategies as st
from otbench.analysis import (
    build_layout,
    metrics,
    simulate,
    trajectory_metrics,
)
from otbench.analysis.core import GAMMA
from otbench.analysis.resampling import _trajectory_thinning as tt
from otbench.analysis.resampling._draws import resampling
from otbench.analysis.resampling._probe_thinning import expected, hypergeom_tables
from otbench.analysis.resampling._thinning import (
    format_thinning,
    probe_thinning,
    thinning,
    trajectory_thinning,
)

# Kernel probabilities are products of at most ~2K + m correctly rounded
# factors in [0, 1] (K <= 80 positions here): relative error < 1e-13, so
# 1e-12 against exact fractions leaves a margin of 10x.
TOL = 1e-12
MASK64 = (1 << 64) - 1


def build(trajs, synthetic=False):
    return build_set(trajs, synthetic=synthetic)

# -- exact twins ---------------------------------------------------------------------------------

def ref_expected(L, C, P, m):
    """(E[OR], E[AD], retention) in Fractions, from the product formula over positions."""
    n = len(C) - 1
    pmf = [[Fraction(math.comb(c, x) * math.comb(P - c, m - x), math.comb(P, m))
            for x in range(m + 1)] for c in C]
    cdf = [list(itertools.accumulate(row)) for row in pmf]

    def F(i, x):
        return Fraction(0) if x < 0 else cdf[i][min(x, m)]

    pk, ex = [], Fraction(0)
    for j in range(n + 1):
        pj = Fraction(0)
        for x in range(m + 1):
            t = pmf[j][x]
            for i in range(j):
                t *= F(i, x - 1)
            for i in range(j + 1, n + 1):
                t *= F(i, x)
            pj += t
            ex += x * t
        pk.append(pj)
    k_star = C.index(max(C))
    Ln = L[-1]
    e_or = sum((p * Fraction(Ln - L[j], Ln) if Ln else Fraction(0)) for j, p in enumerate(pk))
    return e_or, ex / m - Fraction(C[-1], P), pk[k_star]


def brute_expected(L, C, P, m):
    """The same by enumerating every m-subset of the P probes at every position."""
    subsets = list(itertools.combinations(range(P), m))
    per_pos = []
    for c in C:
        correct = [1] * c + [0] * (P - c)
        per_pos.append(Counter(sum(correct[i] for i in s) for s in subsets))
    e_or = e_ad = ret = Fraction(0)
    total = len(subsets) ** len(C)
    k_star = C.index(max(C))
    for combo in itertools.product(*[list(d.items()) for d in per_pos]):
        w = math.prod(cnt for _, cnt in combo)
        xs = [x for x, _ in combo]
        k = xs.index(max(xs))                      # earliest maximizer of the thinned curve
        e_or += w * (Fraction(L[-1] - L[k], L[-1]) if L[-1] else 0)
        e_ad += w * Fraction(xs[k] - xs[-1], m)
        ret += w * (k == k_star)
    return e_or / total, e_ad / total, ret / total


def kernel_one(L, C, P, m):
    e = expected(np.asarray([L]), np.asarray([C]), np.asarray([len(C) - 1]), np.asarray([P]), m)
    return e.ratio[0], e.degradation[0], e.retention[0]


# -- tables ----------------------------------------------------------------------------------------

def test_hypergeom_tables_match_scipy():
    for P in (1, 2, 5, 16):
        for m in sorted({1, P // 2 or 1, P}):
            pmf, cdf = hypergeom_tables([P], m, P + 1)
            for c in range(P + 1):
                d = scipy.stats.hypergeom(P, c, m)          # (population, successes, draws)
                x = np.arange(P + 1)
                np.testing.assert_allclose(pmf[0, c], d.pmf(x), rtol=0, atol=1e-14)
                np.testing.assert_allclose(cdf[0, c], np.minimum(d.cdf(x), 1.0), rtol=0, atol=1e-14)


def test_tables_are_correctly_rounded_exact_values():
    pmf, cdf = hypergeom_tables([7], 3, 8)
    # Hand value: P = 7, c = 4, m = 3: Pr(X = 2) = C(4,2) C(3,1) / C(7,3) = 18/35.
    assert pmf[0, 4, 2] == float(Fraction(18, 35))
    assert cdf[0, 4, 2] == float(Fraction(1 + 12 + 18, 35))
    assert cdf[0, 4, 3] == 1.0 and pmf[0, 4, 4] == 0.0


# -- the kernel against exact twins ----------------------------------------------------------------

@st.composite
def curves(draw, max_p=4, max_n=3):
    P = draw(st.integers(1, max_p))
    n = draw(st.integers(0, max_n))
    L = [0] + list(itertools.accumulate(draw(st.lists(st.sampled_from([0, 0, 1, 3, 50]),
                                                      min_size=n, max_size=n))))
    if draw(st.booleans()):
        C = [draw(st.integers(0, P))] * (n + 1)                  # flat curve: ties everywhere
    else:
        C = draw(st.lists(st.integers(0, P), min_size=n + 1, max_size=n + 1))
    return L, C, P, draw(st.integers(1, P))


@settings(max_examples=25)
@given(curves())
def test_matches_subset_enumeration(curve):
    L, C, P, m = curve
    want = brute_expected(L, C, P, m)
    got = kernel_one(L, C, P, m)
    for g, w in zip(got, want):
        assert abs(g - float(w)) <= TOL, (curve, got, want)


def test_hand_example_tie_rule():
    # P = 2, m = 1, C = (1, 1): each position shows 0 or 1 with probability
    # 1/2; k~ = 1 only when X_0 = 0 and X_1 = 1 (probability 1/4), else 0.
    # L = (0, 10): E[OR] = 3/4 * 1 + 1/4 * 0 = 3/4; retention of k* = 0 is 3/4;
    # E[AD] = E[X_k~] - E[X_1] = (3/4) - (1/2) = 1/4.
    got = kernel_one([0, 10], [1, 1], 2, 1)
    assert got == pytest.approx((0.75, 0.25, 0.75), abs=1e-15)
    assert tuple(map(float, ref_expected([0, 10], [1, 1], 2, 1))) == (0.75, 0.25, 0.75)


@settings(max_examples=15)
@given(st.lists(curves(max_p=9, max_n=20), min_size=1, max_size=6))
def test_matches_exact_formula_on_ragged_batches(batch):
    # Rows of different lengths and P share a call: padding, buckets and P tables.
    m = min(P for _, _, P, _ in batch)
    trajs = [("m", "g", f"q{i}", 0, P, L, C, 0) for i, (L, C, P, _) in enumerate(batch)]
    ms = build(trajs)
    e = expected(ms.L, ms.C, ms.n, ms.probes, m)
    for t in range(ms.num_trajectories):
        n = int(ms.n[t])
        want = ref_expected(ms.L[t, :n + 1].tolist(), ms.C[t, :n + 1].tolist(), int(ms.probes[t]), m)
        for g, w in zip((e.ratio[t], e.degradation[t], e.retention[t]), want):
            assert abs(g - float(w)) <= TOL


def test_long_rows_cross_every_width_bucket():
    rng = np.random.default_rng(3)
    trajs = []
    for i, n in enumerate((0, 15, 16, 31, 40, 64, 79)):
        L = np.r_[0, np.cumsum(rng.choice([0, 5, 9], n))].tolist()
        C = rng.integers(0, 5, n + 1).tolist()
        trajs.append(("m", "g", f"q{i}", 0, 4, L, C, 0))
    ms = build(trajs)
    for m in (1, 2, 3):
        e = expected(ms.L, ms.C, ms.n, ms.probes, m)
        for t in range(ms.num_trajectories):
            n = int(ms.n[t])
            want = ref_expected(ms.L[t, :n + 1].tolist(), ms.C[t, :n + 1].tolist(), 4, m)
            for g, w in zip((e.ratio[t], e.degradation[t], e.retention[t]), want):
                assert abs(g - float(w)) <= TOL


# -- m = P and aggregation ---------------------------------------------------------------------------

def test_m_equal_P_reproduces_unthinned_metrics_exactly():
    ms = simulate("tiny", seed=1)
    P = int(ms.probes[0])
    pt = probe_thinning(ms, [P])
    tm = trajectory_metrics(jnp.asarray(ms.L), jnp.asarray(ms.C), jnp.asarray(ms.n),
                            jnp.asarray(ms.probes))
    assert np.array_equal(pt.trajectory[0, 0], np.asarray(tm.ratio))
    assert np.array_equal(pt.trajectory[0, 1], np.asarray(tm.degradation))
    assert np.all(pt.trajectory[0, 2] == 1.0)
    ref = metrics(ms)
    assert [c["or"] for c in ref["cells"]] == pt.cell[0, 0].tolist()
    assert [c["ad"] for c in ref["cells"]] == pt.cell[0, 1].tolist()
    assert ref["macro"]["or"] == pt.macro[0, 0] and ref["macro"]["ad"] == pt.macro[0, 1]
    assert pt.macro[0, 2] == 1.0


def test_aggregation_uses_the_equal_weight_chain():
    # Two models x two groups, unequal R and questions; values checked by hand chain.
    trajs = [("a", "g1", "q1", 0, 2, [0, 4], [0, 2], 0), ("a", "g1", "q1", 1, 2, [0, 2, 6], [1, 2, 1], 1),
             ("a", "g1", "q2", 0, 2, [0, 3], [1, 1], 0), ("a", "g2", "q3", 0, 2, [0], [2], 1),
             ("b", "g1", "q1", 0, 2, [0, 1, 1], [0, 2, 0], 0), ("b", "g2", "q3", 0, 2, [0, 8], [2, 0], 1),
             ("b", "g2", "q4", 0, 2, [0, 5], [0, 1], 0), ("b", "g2", "q4", 1, 2, [0, 5], [1, 1], 1)]
    ms = build(trajs)
    pt = probe_thinning(ms, [1])
    per = pt.trajectory[0]
    layout, names = build_layout(ms)
    seg = np.asarray(layout.seg)
    q_mean = {s: per[:, seg == s].mean(axis=1) for s in np.unique(seg)}
    seg_cell = np.asarray(layout.seg_cell)
    cell = np.stack([np.mean([q_mean[s] for s in np.flatnonzero(seg_cell == c)], axis=0)
                     for c in range(layout.num_cells)], axis=1)
    np.testing.assert_allclose(pt.cell[0], cell, rtol=0, atol=1e-15)
    cm = np.asarray(layout.cell_model)
    model = np.stack([cell[:, cm == i].mean(axis=1) for i in range(2)], axis=1)
    np.testing.assert_allclose(pt.macro[0], model.mean(axis=1), rtol=0, atol=1e-15)
    # Each value is also the exact formula's.
    for t in range(ms.num_trajectories):
        n = int(ms.n[t])
        want = ref_expected(ms.L[t, :n + 1].tolist(), ms.C[t, :n + 1].tolist(), 2, 1)
        assert np.allclose(per[:, t], [float(w) for w in want], rtol=0, atol=TOL)


def test_fewer_probes_raise_expected_or_on_simulated_data():
    # Thinning adds noise, and the earliest maximizer of a noisy curve moves
    # earlier or stays: expected OR and AD grow as m falls (SPEC §7 trend).
    pt = probe_thinning(simulate("tiny", seed=0), [1, 2, 4])
    assert pt.macro[0, 0] > pt.macro[1, 0] > pt.macro[2, 0]
    assert pt.macro[0, 2] < pt.macro[1, 2] < pt.macro[2, 2] == 1.0


@pytest.mark.parametrize("kw, msg", [
    (dict(probes=[5]), r"`probes` must not exceed the smallest probe count P of the set \(4\), got 5"),
    (dict(probes=[0]), r"`probes` must be a non-empty sequence of positive integers, got \[0\]"),
    (dict(probes=[]), r"`probes` must be a non-empty sequence of positive integers, got \[\]"),
    (dict(probes=[2, 2]), r"`probes` must not repeat a value, got \[2, 2\]"),
    (dict(probes=[1.5]), r"`probes` must be a non-empty sequence of positive integers, got \[1.5\]"),
])
def test_probe_thinning_messages(kw, msg):
    with pytest.raises(ValueError, match=msg):
        probe_thinning(simulate("tiny", seed=0), **kw)


def test_set_type_message():
    with pytest.raises(ValueError, match=r"`ms` must be a MeasurementSet, got dict"):
        probe_thinning({})


# -- trajectory thinning ------------------------------------------------------------------------------

def mix64(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def ref_trajectory_thinning(ms, rs, draws, seed):
    """Macro (OR, AD) per draw, by loops: the documented stream and Algorithm S, exact means."""
    layout, names = build_layout(ms)
    res = resampling(ms, layout, names)
    tm = trajectory_metrics(jnp.asarray(ms.L), jnp.asarray(ms.C), jnp.asarray(ms.n),
                            jnp.asarray(ms.probes))
    vals = [np.asarray(tm.ratio), np.asarray(tm.degradation)]
    rows_of = np.asarray(res.tables.rows)
    nseg, rmax = res.seg_size.shape[0], res.rmax
    hr = -(-rmax // 2)
    per_draw = nseg * hr
    out = np.zeros((len(rs), draws, 2))
    for a, r in enumerate(rs):
        for d in range(draws):
            base = (a * draws + d) * per_draw
            cells = defaultdict(list)
            for s in range(nseg):
                R = int(res.seg_size[s])
                need = min(r, R)
                kept = []
                for i in range(R):
                    j = i if i < hr else i - hr
                    w = mix64((seed + (base + s * hr + j + 1) * GAMMA) & MASK64)
                    u = (w & 0xFFFFFFFF) if i < hr else (w >> 32)
                    if (u * (R - i)) >> 32 < need:
                        kept.append(int(rows_of[s * rmax + i]))
                        need -= 1
                assert len(kept) == min(r, R)
                cells[int(res.seg_cell[s])].append([np.mean([v[t] for t in kept]) for v in vals])
            cell = {c: np.mean(q, axis=0) for c, q in cells.items()}
            cm = res.cell_model
            model = [np.mean([cell[c] for c in cell if cm[c] == i], axis=0)
                     for i in range(layout.num_models)]
            out[a, d] = np.mean(model, axis=0)
    return out


def test_trajectory_thinning_matches_python_twin():
    ms = simulate("tiny", seed=2)
    got = trajectory_thinning(ms, [1, 2, 3], draws=5, seed=11)
    want = ref_trajectory_thinning(ms, [1, 2, 3], 5, 11)
    # Fixed-point sums (2**-50 resolution) against float means: 1e-12.
    np.testing.assert_allclose(got.macro, want, rtol=0, atol=1e-12)


def test_mean_over_draws_matches_full_pool_within_monte_carlo_error():
    ms = simulate("small", seed=0)
    got = trajectory_thinning(ms, [2, 4, 8], draws=400, seed=5)
    for i in range(3):
        for k in range(2):
            x = got.macro[i, :, k]
            se = x.std(ddof=1) / np.sqrt(x.size)
            # Subsampling without replacement leaves every question mean unbiased,
            # so the draw mean estimates the full-pool value; 4 standard errors.
            assert abs(x.mean() - got.full[k]) <= 4 * se + 1e-15, (i, k, x.mean(), got.full[k], se)
            assert x.std() > 0
    full = metrics(ms)
    assert got.full[0] == pytest.approx(full["macro"]["or"], abs=1e-15)


def test_r_at_least_R_keeps_everything():
    ms = simulate("tiny", seed=0)                  # R in 3..4
    got = trajectory_thinning(ms, [4], draws=7, seed=1)
    np.testing.assert_allclose(got.macro, np.broadcast_to(got.full, got.macro.shape), rtol=0, atol=1e-15)
    # r beyond every R is refused, as probes beyond P are.
    with pytest.raises(ValueError, match=r"`trajectories` must not exceed the largest trajectory "
                                         r"count R of a \(model, question\) \(4\), got 9"):
        trajectory_thinning(ms, [4, 9], draws=7, seed=1)


def test_selection_is_uniform_over_subsets():
    # One segment of R = 4, r = 2: the 6 subsets are equally likely (chi-square).
    trajs = [("m", "g", "q", s, 1, [0, 1], [0, 1], 0) for s in range(4)]
    ms = build(trajs)
    layout, names = build_layout(ms)
    res = resampling(ms, layout, names)
    # Give row s the value 2**s so a sum identifies the subset.
    table = np.zeros((res.zero_item + 1, 1), dtype=np.int64)
    table[:4, 0] = [1, 2, 4, 8]
    sums = tt.cell_sums(res, table, 2, 0, 3000, seed=123)[:, 0, 0]
    counts = Counter(sums.tolist())
    assert sorted(counts) == [3, 5, 6, 9, 10, 12]
    assert scipy.stats.chisquare(list(counts.values())).pvalue > 1e-3


def test_trajectory_batches_do_not_change_draws(monkeypatch):
    ms = simulate("tiny", seed=0)
    a = trajectory_thinning(ms, [2], draws=9, seed=4)
    monkeypatch.setattr(tt, "BATCH", 4)
    b = trajectory_thinning(ms, [2], draws=9, seed=4)
    assert np.array_equal(a.macro, b.macro)


@pytest.mark.parametrize("kw, msg", [
    (dict(trajectories=[0]), r"`trajectories` must be a non-empty sequence of positive integers"),
    (dict(draws=0), r"`draws` must be a positive integer, got 0"),
    (dict(seed=-1), r"`seed` must be an integer >= 0 and < 2\*\*64, got -1"),
])
def test_trajectory_thinning_messages(kw, msg):
    with pytest.raises(ValueError, match=msg):
        trajectory_thinning(simulate("tiny", seed=0), **kw)


def test_thinning_document_and_format():
    ms = simulate("tiny", seed=0)
    doc = thinning(ms, probes=[2, 4], trajectories=[2], draws=20, seed=3)
    assert doc["schema"] == "otbench.thinning/1" and doc["synthetic"] is True
    assert list(doc["probes"]) == ["2", "4"] and list(doc["trajectories"]) == ["2"]
    e = doc["probes"]["4"]
    assert e["retention"] == 1.0 and len(e["cells"]) == 4
    assert set(e["cells"][0]) == {"model", "group", "or", "ad", "retention"}
    t = doc["trajectories"]["2"]
    assert t["or"][0] <= t["mean_or"] <= t["or"][1] and t["ad"][0] <= t["mean_ad"] <= t["ad"][1]
    text = format_thinning(doc)
    assert "SYNTHETIC" in text and "Probe thinning" in text and "Trajectory thinning" in text
    assert thinning(ms, probes=[], trajectories=[])["probes"] == {}
