"""Matched-horizon kernels and inference against plain NumPy / Python twins (SPEC §8).

Twins: readout scores by explicit loops over options; means of item means by
nested loops; SplitMix64 draws re-derived with Python integers; McNemar
against scipy.stats.binomtest / scipy.stats.chi2; the sign-flip test against
a NumPy re-derivation of its bit draws and, for few items, against full
enumeration of the 2^n sign vectors.
"""

import itertools
import math

import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats
from hypothesis import given, settings
from hypothesis import strategies as st
from otbench.analysis.horizon import _inference as inf
from otbench.analysis.horizon import _kernels as K
from otbench.probe.horizon._readout import score_logp

MASK64 = (1 << 64) - 1
GAMMA = 0x9E3779B97F4A7C15


def splitmix(seed: int, p: int) -> int:
    z = (seed + p * GAMMA) & MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def twin_weights(seed, b, n_items, n_reps, two_way):
    """Item and replicate counts of bootstrap replicate `b`, from Python integers."""
    hi = (n_items + 1) // 2
    hr = (n_reps + 1) // 2 if two_way else 0
    W = max(hi + hr, 1)

    def nums(first_word, H, count):
        w = [splitmix(seed, b * W + 1 + first_word + j) for j in range(H)]
        halves = [x & 0xFFFFFFFF for x in w] + [x >> 32 for x in w]
        return halves[:count]

    ci = [0] * n_items
    for u in nums(0, hi, n_items):
        ci[(u * n_items) >> 32] += 1
    cr = [1] * n_reps
    if two_way:
        cr = [0] * n_reps
        for u in nums(hi, hr, n_reps):
            cr[(u * n_reps) >> 32] += 1
    return ci, cr


def twin_item_means(x, a, ci, cr):
    """Mean over items (weights ci) of the mean over available replicates (weights cr), per k."""
    I, R, Kk = x.shape
    out = []
    for k in range(Kk):
        top = bot = 0.0
        for i in range(I):
            num = sum(cr[r] * x[i, r, k] for r in range(R) if a[i, r, k])
            den = sum(cr[r] for r in range(R) if a[i, r, k])
            if den > 0:
                top += ci[i] * num / den
                bot += ci[i]
        out.append(top / bot if bot > 0 else math.nan)
    return np.array(out)


@st.composite
def grids(draw, max_items=6, max_reps=4, max_k=3):
    I = draw(st.integers(0, max_items))
    R = draw(st.integers(1, max_reps))
    Kk = draw(st.integers(1, max_k))
    vals = draw(st.lists(st.sampled_from([0.0, 1.0, -1.0, 0.5, 2.25]), min_size=I * R * Kk,
                         max_size=I * R * Kk))
    mask = draw(st.lists(st.booleans(), min_size=I * R * Kk, max_size=I * R * Kk))
    x = np.array(vals, dtype=np.float64).reshape(I, R, Kk)
    a = np.array(mask, dtype=bool).reshape(I, R, Kk)
    return x, a


# -- weights ---------------------------------------------------------------------------------

@settings(max_examples=12)
@given(seed=st.integers(0, 2**64 - 1), n_items=st.integers(0, 9), n_reps=st.integers(1, 5),
       two_way=st.booleans(), first=st.integers(0, 50))
def test_draw_weights_match_a_python_splitmix_twin(seed, n_items, n_reps, two_way, first):
    w = K.draw_weights(jnp.uint64(seed), jnp.uint64(first), 3, n_items, n_reps, two_way)
    for j in range(3):
        ci, cr = twin_weights(seed, first + j, n_items, n_reps, two_way)
        assert np.asarray(w.item[j]).tolist() == ci
        assert np.asarray(w.replicate[j]).tolist() == cr
        assert sum(ci) == n_items


def test_replicate_is_independent_of_its_batch():
    a = K.draw_weights(jnp.uint64(7), jnp.uint64(0), 8, 11, 3, True)
    b = K.draw_weights(jnp.uint64(7), jnp.uint64(5), 3, 11, 3, True)
    assert np.array_equal(np.asarray(a.item[5:]), np.asarray(b.item))
    assert np.array_equal(np.asarray(a.replicate[5:]), np.asarray(b.replicate))


# -- means of item means ---------------------------------------------------------------------

def _pad(x, a, I=6, R=4, Kk=3):
    """Pad a grid to one fixed shape (absent cells: a = False) so the kernels compile once."""
    xp, ap = np.zeros((I, R, Kk)), np.zeros((I, R, Kk), bool)
    xp[:x.shape[0], :x.shape[1], :x.shape[2]] = x
    ap[:x.shape[0], :x.shape[1], :x.shape[2]] = a
    return xp, ap


@given(grids(), st.integers(0, 2**32), st.booleans())
def test_item_means_match_the_loop_twin(g, seed, two_way):
    x, a = _pad(*g)
    I, R, _ = x.shape
    w = K.draw_weights(jnp.uint64(seed), jnp.uint64(0), 4, I, R, two_way)
    got = np.asarray(K.item_means(jnp.asarray(np.where(a, x, 0.0)), jnp.asarray(a), w))
    for b in range(4):
        want = twin_item_means(x, a, np.asarray(w.item[b]), np.asarray(w.replicate[b]))
        # float64 sums of at most a few dozen terms: 1e-12 relative is ample
        np.testing.assert_allclose(got[b], want, rtol=1e-12, atol=1e-12, equal_nan=True)


@settings(max_examples=12)
@given(grids(max_items=5, max_reps=3), st.integers(0, 2**20), st.sampled_from(["item", "two-way"]),
       st.sampled_from([1, 5]))
def test_bootstrap_matches_twin_and_batch_never_changes_it(g, seed, scheme, batch):
    x, a = _pad(*g, I=5, R=3)
    I, R, _ = x.shape
    b = inf.bootstrap(x, a, replicates=12, seed=seed, scheme=scheme, batch=batch)
    ref = inf.bootstrap(x, a, replicates=12, seed=seed, scheme=scheme, batch=12)
    np.testing.assert_allclose(b.draws, ref.draws, rtol=1e-13, atol=1e-15, equal_nan=True)
    np.testing.assert_allclose(b.estimate, twin_item_means(x, a, [1] * I, [1] * R), rtol=1e-12,
                               atol=1e-12, equal_nan=True)
    for j in (0, 11):
        ci, cr = twin_weights(seed, j, I, R, scheme == "two-way")
        np.testing.assert_allclose(b.draws[j], twin_item_means(x, a, ci, cr), rtol=1e-12, atol=1e-12,
                                   equal_nan=True)


def test_bootstrap_of_a_constant_has_a_degenerate_interval_and_empty_items_are_undefined():
    x = np.ones((5, 2, 2))
    a = np.ones((5, 2, 2), bool)
    a[:, :, 1] = False
    b = inf.bootstrap(x, a, replicates=50, seed=0)
    assert b.estimate[0] == 1.0 and math.isnan(b.estimate[1])
    assert inf.interval(b.draws[:, 0]) == [1.0, 1.0]
    assert inf.interval(b.draws[:, 1]) is None


@pytest.mark.parametrize("kw, match", [
    (dict(x=np.zeros((2, 2)), a=np.zeros((2, 2), bool)), r"`x` and `a` must be \[item, rep, k\]"),
    (dict(replicates=-1), "`replicates` must be a non-negative integer"),
    (dict(batch=0), "`batch` must be a positive integer"),
    (dict(seed=-3), r"`seed` must be an integer in \[0, 2\*\*64\)"),
    (dict(scheme="paired"), "`scheme` must be one of item, two-way, nested"),
    (dict(x=np.full((1, 1, 1), np.inf)), "`x` must be finite where `a` is True"),
])
def test_bootstrap_validates_its_arguments(kw, match):
    args = dict(x=np.zeros((1, 1, 1)), a=np.ones((1, 1, 1), bool))
    args.update(kw)
    x, a = args.pop("x"), args.pop("a")
    with pytest.raises(inf.InferenceError, match=match):
        inf.bootstrap(x, a, **args)


# -- bands and summaries -----------------------------------------------------------------------

@given(st.lists(st.floats(-1, 1), min_size=1, max_size=4), st.integers(0, 1000))
def test_simultaneous_band_is_the_95th_percentile_of_the_max_deviation(est, seed):
    rng = np.random.default_rng(seed)
    est = np.array(est)
    draws = est + rng.normal(0, 0.1, size=(200, est.size))
    draws[rng.random(draws.shape) < 0.05] = np.nan
    want = np.percentile([max((abs(d - e) for d, e in zip(row, est) if np.isfinite(d)), default=-np.inf)
                          for row in draws if np.isfinite(row).any()], 95)
    assert inf.simultaneous_band(est, draws) == pytest.approx(want, rel=1e-12)
    # a simultaneous band is never narrower than any pointwise deviation quantile
    assert inf.simultaneous_band(est, draws) >= max(
        np.nanpercentile(np.abs(draws[:, k] - est[k]), 95) for k in range(est.size)) - 1e-12


@given(st.lists(st.floats(-2, 2), min_size=1, max_size=6))
def test_log2_trapezoid_matches_numpy_trapezoid_over_log2(vals):
    hz = [0, 64, 512, 2048, 8192, 16384][:len(vals)]
    got = float(inf.log2_trapezoid(np.array(vals), hz))
    pos = [(math.log2(b), v) for b, v in zip(hz, vals) if b > 0]
    if len(pos) < 2:
        assert math.isnan(got)
        return
    xs, ys = zip(*pos)
    want = np.trapezoid(ys, xs) / (xs[-1] - xs[0])
    assert got == pytest.approx(want, rel=1e-12, abs=1e-12)


def test_log2_trapezoid_of_a_constant_is_the_constant():
    assert float(inf.log2_trapezoid(np.full(5, 0.3), [0, 512, 2048, 8192, 16384])) == pytest.approx(0.3)


# -- readout scores ---------------------------------------------------------------------------

@st.composite
def option_logps(draw):
    O = draw(st.integers(2, 10))
    vals = draw(st.lists(st.one_of(st.floats(-40, 0), st.just(-math.inf), st.just(-1.0)), min_size=O,
                         max_size=O))
    n_valid = draw(st.integers(2, O))
    gold = draw(st.integers(0, n_valid - 1))
    return np.array(vals), n_valid, gold


@given(st.lists(option_logps(), min_size=1, max_size=8))
def test_readout_scores_match_the_loop_twin_and_the_probe_reference(rows):
    O = max(len(v) for v, _, _ in rows)
    lp = np.full((len(rows), O), -np.inf)
    valid = np.zeros((len(rows), O), bool)
    gold = np.zeros(len(rows), np.int64)
    for j, (v, nv, g) in enumerate(rows):
        lp[j, :len(v)] = v
        valid[j, :nv] = True
        gold[j] = g
    # padded to 8 rows x 10 options (masked), so the kernel compiles once
    lp = np.pad(lp, ((0, 8 - lp.shape[0]), (0, 10 - O)), constant_values=-np.inf)
    valid = np.pad(valid, ((0, 8 - valid.shape[0]), (0, 10 - O)))
    valid[len(rows):, :2] = True
    gold = np.pad(gold, (0, 8 - gold.shape[0]))
    s = K.readout_scores(jnp.asarray(lp), jnp.asarray(gold), jnp.asarray(valid))
    for j, (v, nv, g) in enumerate(rows):
        p = [math.exp(x) for x in v[:nv]]
        M = sum(p)
        ref = score_logp(v[:nv])
        assert float(s.mass[j]) == pytest.approx(M, rel=1e-12, abs=1e-300)
        assert ref.M == pytest.approx(M, rel=1e-12, abs=1e-300)
        if M == 0:
            assert ref.argmax is None
            continue
        q = [x / M for x in p]
        lv = list(v[:nv])
        assert int(s.argmax[j]) == lv.index(max(lv)) == ref.argmax    # ties: the earliest letter
        assert float(s.q_true[j]) == pytest.approx(q[g], rel=1e-9, abs=1e-300)
        assert ref.q[g] == pytest.approx(q[g], rel=1e-9, abs=1e-300)
        assert float(s.brier[j]) == pytest.approx(sum((qq - (k == g)) ** 2 for k, qq in enumerate(q)),
                                                  rel=1e-9, abs=1e-12)
        if q[g] > 0:
            assert float(s.log_loss[j]) == pytest.approx(-math.log(q[g]), rel=1e-9, abs=1e-12)
        rest = sum(x for k, x in enumerate(p) if k != g)   # not M - p[g]: no cancellation
        if p[g] > 0 and rest > 0:
            assert float(s.log_odds[j]) == pytest.approx(math.log(p[g]) - math.log(rest), rel=1e-9,
                                                         abs=1e-9)


def test_readout_scores_keep_tiny_masses_in_log_space():
    lp = np.array([[-800.0, -801.0, -900.0, -np.inf]])
    s = K.readout_scores(jnp.asarray(lp), jnp.asarray([1]), jnp.asarray(np.ones((1, 4), bool)))
    # exp(-800) underflows float64, but q is a ratio computed in log space
    assert float(s.q_true[0]) == pytest.approx(1 / (1 + math.e + math.exp(-99)), rel=1e-12)
    assert float(s.log_loss[0]) == pytest.approx(-math.log(float(s.q_true[0])), rel=1e-12)


# -- dense readouts ------------------------------------------------------------------------------

@given(st.lists(st.lists(st.booleans(), min_size=1, max_size=9), min_size=1, max_size=5).filter(
    lambda rows: len({len(r) for r in rows}) == 1))
def test_stable_correctness_is_correct_at_t_and_every_later_checkpoint(rows):
    c = np.array(rows, bool)
    got = np.asarray(K.stable_correct(jnp.asarray(c)))
    want = [[all(r[t:]) for t in range(len(r))] for r in rows]
    assert got.tolist() == want


@given(st.lists(st.floats(-5, 5), min_size=1, max_size=9))
def test_trapezoid_mean_is_area_over_span(vals):
    t = np.arange(len(vals)) * 64.0
    got = float(K.trapezoid_mean(jnp.asarray(np.array([vals])), t)[0])
    want = vals[0] if len(vals) == 1 else np.trapezoid(vals, t) / t[-1]
    assert got == pytest.approx(want, rel=1e-12, abs=1e-12)


# -- McNemar ---------------------------------------------------------------------------------

@pytest.mark.parametrize("b, c", [(0, 0), (0, 1), (3, 9), (12, 12), (24, 0), (10, 14), (13, 12),
                                  (20, 5), (40, 10), (100, 130), (0, 25)])
def test_mcnemar_against_scipy(b, c):
    m = inf.mcnemar_counts(b, c)
    n = b + c
    if n < 25:
        assert m.method == "exact" and m.statistic is None
        want = 1.0 if n == 0 else scipy.stats.binomtest(b, n, 0.5).pvalue
        assert m.p == pytest.approx(want, rel=1e-12)
    else:
        assert m.method == "chi2-cc"
        stat = (abs(b - c) - 1) ** 2 / n
        assert m.statistic == pytest.approx(stat, rel=1e-12)
        assert m.p == pytest.approx(scipy.stats.chi2.sf(stat, 1), rel=1e-10)


@given(st.lists(st.tuples(st.integers(0, 1), st.integers(0, 1)), max_size=60))
def test_mcnemar_counts_the_discordant_pairs(pairs):
    f = np.array([p[0] for p in pairs], dtype=np.int64)
    s = np.array([p[1] for p in pairs], dtype=np.int64)
    m = inf.mcnemar(f, s)
    assert (m.n10, m.n01) == (sum(1 for x, y in pairs if x > y), sum(1 for x, y in pairs if x < y))
    assert m == inf.mcnemar_counts(m.n10, m.n01)


@pytest.mark.parametrize("args, match", [
    ((np.zeros(3), np.zeros(4)), "`first` and `second` must be 1-d arrays of one shape"),
    ((np.array([0, 2]), np.array([0, 1])), "must hold 0/1 outcomes"),
])
def test_mcnemar_validates(args, match):
    with pytest.raises(inf.InferenceError, match=match):
        inf.mcnemar(*args)


def test_mcnemar_counts_validate():
    with pytest.raises(inf.InferenceError, match="`b` must be a non-negative integer"):
        inf.mcnemar_counts(-1, 2)


# -- sign-flip test ---------------------------------------------------------------------------

def twin_sign_flip(d, draws, seed):
    n = len(d)
    per = (n + 63) // 64
    obs = abs(np.mean(d))
    extreme = 0
    for j in range(draws):
        s = []
        for i in range(n):
            w = splitmix(seed, j * per + i // 64 + 1)
            s.append(-1.0 if (w >> (i % 64)) & 1 else 1.0)
        if abs(np.mean(np.array(s) * d)) >= obs - 1e-12:
            extreme += 1
    return (1 + extreme) / (1 + draws)


@settings(max_examples=10)
@given(st.lists(st.sampled_from([-1.0, -0.5, 0.0, 0.5, 1.0]), min_size=1, max_size=70),
       st.integers(0, 2**40))
def test_sign_flip_matches_the_bit_twin(d, seed):
    d = np.array(d)
    got = inf.sign_flip(d, draws=1100, seed=seed)
    assert got.p == pytest.approx(twin_sign_flip(d, 1100, seed), rel=1e-12)
    assert got.items == d.size and got.mean == pytest.approx(d.mean())


def test_sign_flip_agrees_with_full_enumeration_for_few_items():
    d = np.array([1.0, 0.5, 1.0, 0.25, 0.0, 1.0, -0.5, 1.0, 0.75])
    obs = abs(d.mean())
    exact = np.mean([abs(np.mean(np.array(s) * d)) >= obs - 1e-12
                     for s in itertools.product([-1.0, 1.0], repeat=d.size)])
    got = inf.sign_flip(d, draws=20_000, seed=3)
    # Monte Carlo p vs the exact permutation p: 5 standard errors at 20,000 draws
    se = math.sqrt(exact * (1 - exact) / 20_000)
    assert abs(got.p - exact) < 5 * se + 1e-4


def test_sign_flip_edge_cases():
    assert inf.sign_flip(np.zeros(0)) is None
    assert inf.sign_flip(np.zeros(5), draws=100).p == 1.0              # every draw ties
    big = inf.sign_flip(np.ones(40), draws=1000, seed=1)
    assert big.p == pytest.approx(1 / 1001)                           # only the observation
    with pytest.raises(inf.InferenceError, match="`draws` must be a positive integer"):
        inf.sign_flip(np.ones(3), draws=0)
    with pytest.raises(inf.InferenceError, match="`d` must be a 1-d array of finite differences"):
        inf.sign_flip(np.array([np.nan]))


def test_a_second_bootstrap_of_the_same_shapes_does_not_recompile():
    rng = np.random.default_rng(0)
    x = rng.random((9, 2, 5))
    a = rng.random((9, 2, 5)) < 0.8
    inf.bootstrap(x, a, replicates=30, batch=10)
    sizes = (K.item_means._cache_size(), K.item_means_fixed._cache_size(), K.draw_weights._cache_size())
    inf.bootstrap(x + 1.0, ~a | a, replicates=30, batch=10, seed=4)
    inf.bootstrap(x[..., :3], a[..., :3], replicates=30, batch=10)   # padded to the same width
    assert (K.item_means._cache_size(), K.item_means_fixed._cache_size(),
            K.draw_weights._cache_size()) == sizes
