"""Two-stage paired bootstrap (SPEC §7): the draw against a plain-Python twin, exactness,
invariance under batching and jit, intervals, calibration, validation messages."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats
from _sets import build_set
from _sets import ragged_set as _ragged_set
from otbench.analysis import build_layout, core, metrics, simulate
from otbench.analysis.resampling import BOOT_METRICS, bootstrap, chain, format_bootstrap, percentile
from otbench.analysis.resampling import _draws as bd

MASK64 = (1 << 64) - 1


def build(trajs, synthetic=False):
    return build_set(trajs, synthetic=synthetic)

def ragged_set(seed=0):
    """Two models x two groups, R from 1 to 4, model b lacks question q2 of g1, ties,
    flat curves, zero-length steps, n = 0."""
    return _ragged_set(seed, max_r=4, jumps=(0, 1, 7, 300), flat=0.3, random_y=True)


# -- the generator -----------------------------------------------------------------------------------

def mix64(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


# -- a replicate against a plain-Python twin -----------------------------------------------------------

def ref_row_values(ms, t):
    """(OR, AD, y, L(n), P(n)) of row t by the SPEC §4 definitions."""
    n = int(ms.n[t])
    L, C, P = ms.L[t, :n + 1].tolist(), ms.C[t, :n + 1].tolist(), int(ms.probes[t])
    k = C.index(max(C))
    return np.asarray([(L[n] - L[k]) / L[n] if L[n] else 0.0, (C[k] - C[n]) / P, float(ms.y[t]),
                       float(L[n]), C[n] / P])


def ref_replicate(ms, i, seed):
    """Cell values [metric, cell] and drawn rows {(model, slot): [rows]} of replicate i."""
    layout, names = build_layout(ms)
    models, groups = list(names.models), list(names.groups)
    pools = [sorted({int(q) for q in np.unique(ms.question)
                     if ms.groups[ms.question_group[q]] == g}) for g in groups]
    seg_rows = {}
    for t in range(ms.num_trajectories):             # rows are in (cell, question, trajectory) order
        m = ms.models[ms.cell_model[ms.cell[t]]]
        seg_rows.setdefault((m, int(ms.question[t])), []).append(t)
    S = sum(len(p) for p in pools)
    rmax = max(len(v) for v in seg_rows.values())
    hs, hr = -(-S // 2), -(-rmax // 2)
    W = hs + len(models) * S * hr

    def number(block, H, j):
        w = mix64((seed + (i * W + 1 + block + (j if j < H else j - H)) * core.GAMMA) & MASK64)
        return (w & 0xFFFFFFFF) if j < H else (w >> 32)

    slot_q, slot_g = [], []
    for g, pool in enumerate(pools):
        for _ in pool:
            s = len(slot_q)
            slot_q.append(pool[(number(0, hs, s) * len(pool)) >> 32])
            slot_g.append(g)
    values = {t: ref_row_values(ms, t) for t in range(ms.num_trajectories)}
    occ = {}
    drawn = {}
    for mi, m in enumerate(models):
        for s, q in enumerate(slot_q):
            rows = seg_rows.get((m, q))
            if rows is None:
                continue                            # the model lacks the question: no occurrence
            R = len(rows)
            pick = [rows[(number(hs + (mi * S + s) * hr, hr, r) * R) >> 32] for r in range(R)]
            drawn[(mi, s)] = pick
            occ.setdefault((m, groups[slot_g[s]]), []).append(np.mean([values[t] for t in pick], axis=0))
    cell = np.full((5, len(names.cells)), np.nan)
    for c, key in enumerate(names.cells):
        if key in occ:
            cell[:, c] = np.mean(occ[key], axis=0)
    return cell, drawn


def test_replicates_match_python_twin():
    ms = ragged_set(0)
    r = bootstrap(ms, replicates=6, seed=77, batch=4)
    layout, names = build_layout(ms)
    rr = np.arange(ms.num_trajectories)
    ints = np.stack([ms.y, ms.C[rr, ms.n], ms.C[rr, ms.n], ms.L[rr, ms.n]]).astype(np.int64)
    assert bd.packing(ints, ms.probes, bd.resampling(ms, layout, names)) is not None   # packed path
    for i in range(6):
        want, _ = ref_replicate(ms, i, 77)
        # Fixed-point sums round each value to 2**-F (F >= 38 here) once: 1e-12
        # relative covers tokens (~1e3) and fractions alike.
        np.testing.assert_allclose(r.cell[i, :5], want, rtol=1e-12, atol=1e-13, equal_nan=True)
        model, group, macro = chain(want, np.asarray(layout.cell_model), np.asarray(layout.cell_group),
                                    layout.num_models, layout.num_groups)
        np.testing.assert_allclose(r.macro[i, :5], macro, rtol=1e-12, atol=1e-13, equal_nan=True)
        np.testing.assert_allclose(r.model[i, :5], model, rtol=1e-12, atol=1e-13, equal_nan=True)


def test_wide_values_take_the_unpacked_path_and_match_the_twin():
    # P = 16384 and L(n) near 2**30: the integer fields need more than 63 bits
    # together, so the kernel keeps one fixed-point column per metric.
    rng = np.random.default_rng(5)
    trajs = []
    for m in ("a", "b"):
        for q in range(3):
            for s in range(int(rng.integers(1, 4))):
                L = [0, int(rng.integers(1, 2 ** 29)), 2 ** 30 - int(rng.integers(0, 9))]
                trajs.append((m, "g", f"q{q}", s, 16384, L, rng.integers(0, 16385, 3).tolist(),
                              int(rng.integers(0, 2))))
    ms = build(trajs)
    layout, names = build_layout(ms)
    res = bd.resampling(ms, layout, names)
    rr = np.arange(ms.num_trajectories)
    ints = np.stack([ms.y, ms.C[rr, ms.n], ms.C[rr, ms.n], ms.L[rr, ms.n]]).astype(np.int64)
    assert bd.packing(ints, ms.probes, res) is None
    assert bd.packing(ints // 1024, ms.probes // 1024, res) is not None
    r = bootstrap(ms, replicates=4, seed=2)
    for i in range(4):
        want, _ = ref_replicate(ms, i, 2)
        np.testing.assert_allclose(r.cell[i, :5], want, rtol=1e-12, atol=1e-13, equal_nan=True)


def test_drawn_rows_match_python_twin_and_eager_single_replicate():
    ms = ragged_set(1)
    layout, names = build_layout(ms)
    res = bd.resampling(ms, layout, names)
    mesh = jax.sharding.Mesh(np.asarray(jax.devices()[:1]), ("rep",))
    sh = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("rep"))
    rep = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
    table, _ = bd.fixed_point(np.ones((5, ms.num_trajectories)), res, np.asarray(layout.seg))
    kern = bd.replicate_kernel(res, sh, rep, rows=True)
    out = kern(jnp.arange(3, dtype=jnp.uint64), jnp.uint64(5), res.tables, jnp.asarray(table))
    for i in range(3):
        _, drawn = ref_replicate(ms, i, 5)
        rows = np.asarray(out.rows[i])
        for (m, s), want in drawn.items():
            assert rows[m, s, :len(want)].tolist() == want
            assert np.all(rows[m, s, len(want):] == -1)
        absent = {(m, s) for m in range(res.models) for s in range(res.slots)} - set(drawn)
        assert all(np.all(rows[m, s] == -1) for m, s in absent)
        if i > 0:
            continue                                    # eager execution is slow: one replicate
        # The same replicate, eager and unbatched: identical integers.
        with jax.disable_jit():
            seg, items = bd.occurrence_items(jnp.uint64(i), jnp.uint64(5), res.tables, slots=res.slots,
                                             models=res.models, rmax=res.rmax,
                                             words_per_replicate=res.words_per_replicate)
            cs = bd.cell_sums(items, seg, jnp.asarray(table), res.tables,
                              tuple(res.cell_model.tolist()), tuple(res.cell_group.tolist()),
                              res.group_slots)
        assert np.array_equal(np.asarray(cs.sums), np.asarray(out.sums[i]))
        assert np.array_equal(np.asarray(res.tables.rows)[np.asarray(items)], rows)


@pytest.mark.filterwarnings("ignore:some cells have no drawn question")
def test_batch_size_never_changes_a_result():
    ms = ragged_set(2)
    ref = bootstrap(ms, replicates=13, seed=3, batch=13)
    for batch in (1, 4, 100):
        got = bootstrap(ms, replicates=13, seed=3, batch=batch)
        for name in ("cell", "model", "group", "macro"):
            assert np.array_equal(getattr(got, name), getattr(ref, name), equal_nan=True), (batch, name)
    # A prefix of a longer run is the shorter run: replicate i depends on (seed, i) only.
    longer = bootstrap(ms, replicates=20, seed=3, batch=7)
    assert np.array_equal(longer.cell[:13], ref.cell, equal_nan=True)
    other = bootstrap(ms, replicates=13, seed=4, batch=13)
    assert not np.array_equal(other.cell, ref.cell, equal_nan=True)


def test_kernel_compiles_once_per_layout(caplog):
    import logging

    ms = simulate("tiny", seed=0).take(np.arange(23))
    # Compiled here whatever ran before in this process (the suite runs files in any order on
    # its workers): the kernel's cache and JAX's are emptied, the compile log is captured.
    bd._replicate_kernel.cache_clear()
    jax.clear_caches()
    caplog.set_level(logging.WARNING)
    for name in [n for n in logging.root.manager.loggerDict if n.startswith("jax")]:
        lg = logging.getLogger(name)
        lg.setLevel(logging.NOTSET)
        lg.disabled, lg.propagate = False, True
    with jax.log_compiles():
        bootstrap(ms, replicates=4, batch=4)
    assert [r for r in caplog.records if "_replicate" in r.getMessage()]     # compiled once here
    before = bd._replicate_kernel.cache_info().misses
    with jax.log_compiles():
        caplog.clear()
        bootstrap(ms, replicates=8, batch=4, seed=9)
    assert bd._replicate_kernel.cache_info().misses == before
    assert not [r for r in caplog.records if "_replicate" in r.getMessage()]


def test_point_estimates_and_replicate_centre():
    ms = simulate("tiny", seed=3)
    r = bootstrap(ms, replicates=400, batch=200)
    ref = metrics(ms)
    assert r.estimate_spearman == pytest.approx(ref["spearman_or_ad"], rel=1e-12)
    for j, k in enumerate(BOOT_METRICS):
        assert r.estimate_macro[j] == pytest.approx(ref["macro"][k], rel=1e-12)
        assert r.estimate_cell[j].tolist() == pytest.approx([c[k] for c in ref["cells"]], rel=1e-12)
        # The bootstrap distribution is centred near the estimate (the mean of a
        # resampled mean is the sample mean; 5 Monte Carlo standard errors). The
        # pairwise spreads too: over pairs of distinct source trajectories, every
        # pair of the question is equally likely (SPEC §7). Counting a trajectory
        # drawn twice as a pair would centre them near (R-1)/R of the estimate:
        # with R = 3 or 4 here, about 30 standard errors below it.
        x = r.macro[:, j]
        assert abs(x.mean() - r.estimate_macro[j]) <= 5 * x.std() / np.sqrt(x.size), k
    # Paired: every cell's values vary, and the intervals bracket the estimates.
    lo, hi = percentile(r.cell, (2.5, 97.5))
    est = r.estimate_cell
    assert np.all(lo <= est + 1e-12) and np.all(est <= hi + 1e-12)


def ref_summaries(ms, drawn, names):
    """Cell P(0), pairwise |dOR| and |dAD| [3, cell] of one replicate from its drawn rows."""
    models = list(names.models)
    occ = {}
    for (mi, s), rows in drawn.items():
        t0 = rows[0]
        key = (models[mi], ms.groups[ms.question_group[ms.question[t0]]])
        vals = [ref_row_values(ms, t) for t in rows]
        p0 = np.mean([ms.C[t, 0] / ms.probes[t] for t in rows])
        # Pairs of draws from distinct source trajectories only (SPEC §7).
        pairs = [(a, b) for a in range(len(rows)) for b in range(a + 1, len(rows))
                 if rows[a] != rows[b]]
        spread = [np.mean([abs(vals[a][i] - vals[b][i]) for a, b in pairs]) if pairs else None
                  for i in (0, 1)]
        occ.setdefault(key, []).append((p0, *spread))
    out = np.full((3, len(names.cells)), np.nan)
    for c, key in enumerate(names.cells):
        if key not in occ:
            continue
        out[0, c] = np.mean([o[0] for o in occ[key]])
        for i in (1, 2):
            v = [o[i] for o in occ[key] if o[i] is not None]
            out[i, c] = np.mean(v) if v else np.nan
    return out


def test_zero_step_and_spreads_match_python_twin():
    ms = ragged_set(1)
    r = bootstrap(ms, replicates=7, seed=5, batch=3)
    layout, names = build_layout(ms)
    k0 = BOOT_METRICS.index("zero_step_acc")
    for i in range(7):
        want, drawn = ref_replicate(ms, i, 5)
        got = r.cell[i, k0:k0 + 3]
        np.testing.assert_allclose(got, ref_summaries(ms, drawn, names), rtol=1e-12, atol=1e-13,
                                   equal_nan=True)
        # Spearman across the replicate's cells, as scipy (average ranks for ties)
        rho = scipy.stats.spearmanr(want[0], want[1]).statistic
        if np.isnan(want[:2]).any() or np.ptp(want[0]) == 0 or np.ptp(want[1]) == 0:
            assert np.isnan(r.spearman_or_ad[i])
        else:
            assert r.spearman_or_ad[i] == pytest.approx(rho, rel=1e-12, abs=1e-12)


def test_zero_step_and_spreads_do_not_depend_on_the_batch(monkeypatch):
    from otbench.analysis.resampling import _bootstrap

    ms = ragged_set(2)
    monkeypatch.setattr(_bootstrap, "SUMMARY_BATCH", 2)
    a = bootstrap(ms, replicates=9, seed=3, batch=2)
    monkeypatch.setattr(_bootstrap, "SUMMARY_BATCH", 16)
    b = bootstrap(ms, replicates=9, seed=3, batch=9)
    assert np.array_equal(a.cell, b.cell, equal_nan=True)
    assert np.array_equal(a.spearman_or_ad, b.spearman_or_ad, equal_nan=True)


# -- intervals -----------------------------------------------------------------------------------------

def test_percentile_matches_numpy_and_handles_nan_and_inf():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(101, 3))
    np.testing.assert_array_equal(percentile(x, (2.5, 50, 97.5)),
                                  np.percentile(x, (2.5, 50, 97.5), axis=0))
    y = x.copy()
    y[:10, 1] = np.nan                                   # undefined replicates are left out
    np.testing.assert_allclose(percentile(y, (2.5, 97.5))[:, 1],
                               np.percentile(x[10:, 1], (2.5, 97.5)), rtol=0, atol=0)
    z = np.r_[np.arange(9.0), np.inf]                    # "never" counts as +inf
    assert percentile(z, (50.0,))[0] == 4.5
    assert percentile(z, (95.0,))[0] == np.inf           # interpolation touches inf
    assert percentile(np.r_[np.inf, np.inf], (0.0,))[0] == np.inf
    assert np.isnan(percentile(np.full(4, np.nan), (50.0,))[0])


def test_cell_without_a_drawn_question_is_undefined_not_zero():
    # Model b has one question of four in g1: some replicates never draw it.
    trajs = [("a", "g1", f"q{k}", 0, 1, [0, 1], [0, 1], 1) for k in range(4)]
    trajs += [("b", "g1", "q0", 0, 1, [0, 1], [1, 1], 1)]
    ms = build(trajs)
    with pytest.warns(UserWarning, match="some cells have no drawn question"):
        r = bootstrap(ms, replicates=60, batch=60)
    b = [c for c, (m, _) in enumerate(r.names.cells) if m == "b"][0]
    undefined = np.isnan(r.cell[:, 0, b])
    # Pr(q0 not drawn in 4 draws) = (3/4)**4 = 0.32: some, not all, replicates.
    assert 0 < undefined.sum() < 60
    assert np.array_equal(np.isnan(r.macro[:, 0]), undefined)      # NaN propagates to averages
    doc = r.to_json()
    assert doc["cells"][b]["defined"] == 60 - int(undefined.sum())


# -- calibration -----------------------------------------------------------------------------------

def test_interval_coverage_is_consistent_with_95_percent():
    # 300 independent cells (10 models x 30 groups), 40 questions each, R = 3;
    # a question's accuracy is Beta(2, 2) (mean 1/2) and y ~ Bernoulli of it,
    # so every cell's full-thinking accuracy estimates exactly 1/2. The paired
    # draw shares question indices across models, not data, so the coverage
    # events are (conditionally) independent; a binomial test at the 0.001 level.
    rng = np.random.default_rng(20260721)
    trajs = []
    for m in range(10):
        for g in range(30):
            for q in range(40):
                p = rng.beta(2.0, 2.0)
                for s in range(3):
                    trajs.append((f"m{m}", f"g{g:02d}", f"q{q}", s, 1, [0, 1], [0, 1],
                                  int(rng.random() < p)))
    ms = build(trajs)
    r = bootstrap(ms, replicates=1000, batch=500)
    j = BOOT_METRICS.index("full_acc")
    lo, hi = percentile(r.cell[:, j], (2.5, 97.5))
    covered = int(np.sum((lo <= 0.5) & (0.5 <= hi)))
    n = lo.shape[0]
    assert n == 300
    assert scipy.stats.binomtest(covered, n, 0.95).pvalue > 1e-3, covered


# -- documents and messages ------------------------------------------------------------------------

def test_json_document_and_tables():
    ms = simulate("tiny", seed=0)
    r = bootstrap(ms, replicates=50, batch=25)
    doc = r.to_json()
    assert doc["schema"] == "otbench.bootstrap/1" and doc["replicates"] == 50
    assert doc["seed"] == 20260721 and doc["synthetic"] is True
    cell = doc["cells"][0]
    assert set(BOOT_METRICS) <= set(cell) and {"model", "group"} <= set(cell)
    assert all(cell[k][0] <= cell[k][1] for k in BOOT_METRICS)
    assert set(doc["macro"]) == set(BOOT_METRICS) and "frontiers" not in doc
    assert set(doc["by_model"]) == set(r.names.models)
    prov = doc["provenance"]                       # what produced the numbers (STYLE: seeds are data)
    assert prov["draws"] == "otbench.bootstrap.draws/1" and prov["libraries"]["jax"] and prov["devices"]
    text = format_bootstrap(r)
    assert set(doc["spearman_or_ad"]) == {"estimate", "interval", "defined"}
    for title in ("Overthinking Ratio OR (%)", "Accuracy Degradation AD (pp)",
                  "Original full-thinking accuracy (%)", "Zero-step accuracy P(0) (%)",
                  "Within-question mean pairwise |dOR| (pp)", "Spearman OR-AD", "Avg."):
        assert title in text
    assert text.startswith("SYNTHETIC")


@pytest.mark.parametrize("kw, msg", [
    (dict(replicates=0), r"`replicates` must be an integer >= 1, got 0"),
    (dict(replicates=2.0), r"`replicates` must be an integer >= 1, got 2.0"),
    (dict(seed=-1), r"`seed` must be an integer >= 0 and < 2\*\*64, got -1"),
    (dict(seed=2 ** 64), r"`seed` must be an integer >= 0 and < 2\*\*64, got 18446744073709551616"),
    (dict(batch=0), r"`batch` must be an integer >= 1, got 0"),
    (dict(workers=-1), r"`workers` must be an integer >= 0, got -1"),
    (dict(checkpoint_every=0), r"`checkpoint_every` must be an integer >= 1, got 0"),
    (dict(resume=True), r"`resume` needs a `checkpoint_dir`"),
    (dict(percentiles=(97.5, 2.5)), r"`percentiles` must be two increasing numbers in \[0, 100\]"),
    (dict(grid=1), r"`grid` must be at least 2 points, got 1"),
])
def test_bootstrap_messages(kw, msg):
    with pytest.raises(ValueError, match=msg):
        bootstrap(simulate("tiny", seed=0), **kw)


def test_set_type_message():
    with pytest.raises(ValueError, match=r"`ms` must be a MeasurementSet, got list"):
        bootstrap([])


def test_no_warning_on_complete_sets():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        bootstrap(simulate("tiny", seed=0), replicates=10)
