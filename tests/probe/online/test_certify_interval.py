"""The certificate's interval (issue 37, item 3): the NumPy restatement of OTBench's two-stage paired
bootstrap draw equals the analysis's draw on the same seed, and a plain-Python loop twin gives the
same replicates, points and intervals; the verdict refuses too little evidence.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from otbench.probe.online import (
    MIN_QUESTIONS,
    OnlineResult,
    Trajectory,
    certificate_line,
    compare,
    design_of,
    disagreement_line,
    paired_point,
)
from otbench.probe.online._certify import _interval as ci

MASK64 = (1 << 64) - 1


def mix64_twin(z: int) -> int:
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def test_splitmix_reference_vectors_and_the_projects_seed():
    # Vigna's splitmix64.c, seed 0: the stream's first outputs
    assert ci.words(0, 1, 3).tolist() == [0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4, 0x06C45D188009454F]
    zs = np.array([0, 1, 2**63, MASK64, 0x123456789ABCDEF], dtype=np.uint64)
    assert ci.mix64(zs).tolist() == [mix64_twin(int(z)) for z in zs]
    from otbench.analysis.resampling import PERCENTILES, SEED

    assert (ci.SEED, ci.PERCENTILES) == (SEED, PERCENTILES)


@pytest.mark.parametrize("seed", [0, 20260721, 2**63 + 5])
def test_the_numpy_draw_is_the_analysis_draw(seed):
    import jax.numpy as jnp
    from otbench.analysis import simulate
    from otbench.analysis.bench import assign_splits
    from otbench.analysis.overthinking import build_layout
    from otbench.analysis.resampling._draws import occurrence_items, resampling

    ms = assign_splits(simulate("small", 1))
    rows = np.flatnonzero(ms.split == 2)
    rows = rows[(np.arange(rows.size) % 5) != 1]          # ragged: some segments lose a trajectory
    sub = ms.take(rows)
    res = resampling(sub, *build_layout(sub))
    d = design_of(ms, rows[::-1])                         # any caller order: rows map back
    assert (d.slots, d.models, d.rmax, d.words_per_replicate) == \
        (res.slots, res.models, res.rmax, res.words_per_replicate)
    seg, got = ci.draws(d, seed, 3, 4)
    table_rows = np.asarray(res.tables.rows)
    for i in range(4):
        s, items = occurrence_items(jnp.uint64(3 + i), jnp.uint64(seed), res.tables, slots=res.slots,
                                    models=res.models, rmax=res.rmax,
                                    words_per_replicate=res.words_per_replicate)
        items = np.asarray(items)
        want = np.where(items < res.zero_item, table_rows[np.minimum(items, res.zero_item)], -1)
        mine = np.where(got[i] >= 0, rows[::-1][np.maximum(got[i], 0)], -1)
        assert np.array_equal(np.where(want >= 0, rows[np.maximum(want, 0)], -1), mine)
        assert np.array_equal(np.asarray(s), seg[i])


# -- a plain loop twin of the whole interval ------------------------------------------------------

def _loop_replicate(seed, i, pools, segs, M, W, Hs, Hr):
    """Counts (two-stage, stage 1) per row of replicate i, by loops over Python-integer words."""
    w = [mix64_twin((seed + (i * W + 1 + j) * ci.GAMMA) & MASK64) for j in range(W)]
    S = sum(map(len, pools))

    def num(block, H, j):              # number j of the block of H words starting at word `block`
        word = w[block + (j if j < H else j - H)]
        return word & 0xFFFFFFFF if j < H else word >> 32

    two, one = {}, {}
    s = 0
    for pool in pools:
        for _ in pool:
            q = pool[(num(0, Hs, s) * len(pool)) >> 32]
            for m in range(M):
                rows = segs.get((m, q))
                if rows is not None:
                    for r in rows:
                        one[r] = one.get(r, 0) + 1
                    for j in range(len(rows)):
                        pick = rows[(num(Hs + (m * S + s) * Hr, Hr, j) * len(rows)) >> 32]
                        two[pick] = two.get(pick, 0) + 1
            s += 1
    return two, one


def _loop_macro(counts, rows_of_cell, cell_model, num, den):
    cells = []
    for rows in rows_of_cell:
        t = sum(counts.get(r, 0) * num[r] for r in rows)
        b = sum(counts.get(r, 0) * den[r] for r in rows)
        drawn = sum(counts.get(r, 0) for r in rows) > 0
        cells.append(t / b if b > 0 else (0.0 if drawn else float("nan")))
    per_model = {}
    for c, m in zip(cells, cell_model):
        per_model.setdefault(m, []).append(c)
    return sum(sum(v) / len(v) for v in per_model.values()) / len(per_model)


@st.composite
def ragged_sets(draw):
    """Rows of 1-2 models x 1-3 groups, ragged questions and trajectories, values per row."""
    M, G = draw(st.integers(1, 2)), draw(st.integers(1, 3))
    rows = []
    for g in range(G):
        for q in range(draw(st.integers(1, 4))):
            for m in range(M):
                if M > 1 and draw(st.booleans()) and m:      # a model may lack a question
                    continue
                for _ in range(draw(st.integers(1, 4))):
                    rows.append((m * G + g, g * 10 + q))
    n = len(rows)
    vals = draw(st.lists(st.tuples(st.integers(0, 4), st.integers(0, 4), st.integers(0, 9), st.integers(0, 9)),
                         min_size=n, max_size=n))
    return M, G, rows, vals


@settings(max_examples=25, deadline=None)
@given(ragged_sets(), st.integers(0, 2**64 - 1), st.randoms(use_true_random=False))
def test_paired_point_equals_a_loop_twin(case, seed, rnd):
    M, G, rows, vals = case
    order = list(range(len(rows)))
    rnd.shuffle(order)                                   # the caller's order is any order
    rows = [rows[i] for i in order]
    vals = [vals[i] for i in order]
    cell = np.array([c for c, _ in rows])
    cm, cg = [c // G for c in range(M * G)], [c % G for c in range(M * G)]
    question = np.array([q for _, q in rows])
    d = ci.design(cell, cm, cg, question, order=order)
    P = np.array([4.0] * len(rows))
    off = np.array([float(a) for a, _, _, _ in vals])
    on = np.array([4.0 * (b % 2) for _, b, _, _ in vals])
    lo = np.array([float(c) for _, _, c, _ in vals])
    full = lo + np.array([float(x) for _, _, _, x in vals])
    reps = 30
    got = paired_point(d, {"acc": (off, on, P), "cost": (lo, lo[::-1].copy(), full)}, seed=seed,
                       replicates=reps)
    # the twin: layout by loops (cells, models, groups dense in sorted order; pools sorted)
    present = sorted(set(cell.tolist()))
    models = sorted({cm[c] for c in present})
    groups = sorted({cg[c] for c in present})
    pools = [sorted({q for (c, q) in rows if cg[c] == g}) for g in groups]
    segs = {}
    for i in sorted(range(len(rows)), key=lambda i: order[i]):
        c, q = rows[i]
        segs.setdefault((models.index(cm[c]), q), []).append(i)
    S = sum(map(len, pools))
    Rmax = max(len(v) for v in segs.values())
    Hs, Hr = -(-S // 2), -(-Rmax // 2)
    W = Hs + len(models) * S * Hr
    assert W == d.words_per_replicate
    rows_of_cell = [[i for i in range(len(rows)) if rows[i][0] == c] for c in present]
    cmodel = [cm[c] for c in present]
    for name, (a, b, den) in {"acc": (off, on, P), "cost": (lo, lo[::-1], full)}.items():
        r_off, r_on, r_diff = [], [], []
        for i in range(reps):
            two, one = _loop_replicate(seed, i, pools, segs, len(models), W, Hs, Hr)
            r_off.append(_loop_macro(two, rows_of_cell, cmodel, a, den))
            r_on.append(_loop_macro(two, rows_of_cell, cmodel, b, den))
            r_diff.append(_loop_macro(one, rows_of_cell, cmodel, b, den)
                          - _loop_macro(one, rows_of_cell, cmodel, a, den))
        ones = {i: 1 for i in range(len(rows))}
        g = got[name]
        assert np.isclose(g["offline"], _loop_macro(ones, rows_of_cell, cmodel, a, den))
        assert np.isclose(g["online"], _loop_macro(ones, rows_of_cell, cmodel, b, den))
        # the decision's interval at the expanded levels of the smallest cell's question count
        n_min = min(len({rows[i][1] for i in rc}) for rc in rows_of_cell)
        levels = {"difference_interval": ci.expanded_percentiles(n_min)}
        assert g["difference_levels"] == list(levels["difference_interval"])
        for key, r in (("offline_interval", r_off), ("online_interval", r_on), ("difference_interval", r_diff)):
            r = np.array(r)
            want = np.percentile(r[np.isfinite(r)], levels.get(key, ci.PERCENTILES)) \
                if np.isfinite(r).any() else [None, None]
            assert (g[key] == [None, None]) if want[0] is None else np.allclose(g[key], want)


# -- the verdict ------------------------------------------------------------------------------------

def _traj(q, r, L=(0, 10, 20, 30)):
    return Trajectory(q, r, (1,), tuple(range(100, 100 + L[-1])), L, 1, 2)


def _run(t, k, faithful=True, stopped=True):
    thinking = t.thinking[:t.L[k]] if faithful else (7,) + t.thinking[1:t.L[k]]
    return OnlineResult(t.L[k] if stopped and k < len(t.L) - 1 else None, k, thinking, (), faithful)


def test_the_issues_small_run_is_not_certified_and_says_why():
    # 3 of 3 equal stops, 1 of 3 replays faithful, none stopped early, all from one question
    ts = [_traj("q0", r) for r in range(3)]
    on = [_run(ts[0], 3), _run(ts[1], 3, faithful=False), _run(ts[2], 3, faithful=False)]
    cert = compare(ts, on, np.array([3, 3, 3]), np.array([0.5, 0.5, 0.5]), np.array([1, 1, 0]),
                   probes=np.full(3, 4.0), replicates=50)
    assert cert["equal"] == 3 and cert["verdict"] == "not certified"
    assert [x.split(":")[0] for x in cert["reasons"]] == ["too few questions", "unfaithful replays",
                                                            "no early stops"]
    line = certificate_line(cert)
    assert "not certified: too few questions: 1 in the smallest cell" in line and "inside" not in line


def _many(n_q, k_off, k_on, y_on, acc_off, faithful=None, context=None):
    ts = [_traj(f"q{q:02d}", r) for q in range(n_q) for r in range(2)]
    faithful = faithful or [True] * len(ts)
    on = [_run(t, k, f) for t, k, f in zip(ts, k_on, faithful)]
    return compare(ts, on, np.array(k_off), np.array(acc_off), np.array(y_on), probes=np.full(len(ts), 4.0),
                   online_signal_k=None if context is None else np.array(context), replicates=400)


def test_certified_and_rejected_with_enough_evidence():
    n = 2 * MIN_QUESTIONS
    k = [1 + i % 2 for i in range(n)]
    same = _many(MIN_QUESTIONS, k, k, [i % 2 for i in range(n)], [0.5] * n)
    assert same["verdict"] == "certified" and same["reasons"] == []
    assert same["interval"]["relative_cost"]["difference_interval"] == [0.0, 0.0]
    wrong = _many(MIN_QUESTIONS, k, k, [0] * n, [1.0] * n)                  # online never right
    assert wrong["verdict"] == "rejected"
    assert wrong["reasons"][0].startswith("accuracy gap -100.0 pp outside its paired interval")
    moved = _many(MIN_QUESTIONS, k, [3] * n, [i % 2 for i in range(n)], [0.5] * n)
    assert moved["verdict"] == "rejected" and moved["reasons"][0] == \
        f"stop position differs on {n} of {n} faithful replays"


def test_every_source_of_disagreement_is_named_with_its_share():
    n = 2 * MIN_QUESTIONS
    k_off = [1] * n
    k_on = [1] * n
    faithful = [True] * n
    context = [1] * n
    k_on[0], faithful[0] = 2, False               # the replay diverged
    k_on[1], context[1] = 3, 3                    # the signal read now walks where the controller stopped
    k_on[2] = 2                                   # the controller left the online-context walk
    cert = _many(MIN_QUESTIONS, k_off, k_on, [1] * n, [0.75] * n, faithful=faithful, context=context)
    src = {d["source"]: d for d in cert["disagreements"]}
    assert [d["source"] for d in cert["disagreements"]] == [
        "replay diverged", "signal read differs from the recorded one", "controller", "answer sampling"]
    assert src["replay diverged"]["examples"][0]["first_divergence"] == 0
    full = 30 * n
    assert np.isclose(src["replay diverged"]["cost_gap_pp"], 100 * 10 / full)
    assert np.isclose(src["signal read differs from the recorded one"]["cost_gap_pp"], 100 * 20 / full)
    # one cell: the shares add up to the gaps exactly
    assert np.isclose(sum(d["cost_gap_pp"] for d in cert["disagreements"]), cert["cost_gap_pp"])
    assert np.isclose(sum(d["acc_gap_pp"] for d in cert["disagreements"]), cert["acc_gap_pp"])
    line = disagreement_line(cert)
    assert line.startswith(f"disagreement sources: replay diverged: 1 trajectories, cost {100 * 10 / full:+.1f} pp")
    assert "q00#0 k 1->2 (diverged at token 0)" in line


def test_a_divergence_without_batch_invariance_in_both_runs_is_its_own_source():
    n = 2 * MIN_QUESTIONS
    k_on, faithful = [1] * n, [True] * n
    k_on[0], faithful[0] = 2, False
    base = _many(MIN_QUESTIONS, [1] * n, k_on, [1] * n, [0.75] * n, faithful=faithful)
    assert base["disagreements"][0]["source"] == "replay diverged"       # not recorded: as before
    for inv, name in (({"stored": True, "replay": False, "both": False}, "replay diverged without batch invariance"),
                      ({"stored": True, "replay": True, "both": True}, "replay diverged")):
        cert = dict(base, batch_invariance=inv)
        from otbench.probe.online._certify._verdict import NOTES, disagreements
        src = disagreements(cert, np.full(n, 4.0), np.ones(n), np.full(n, 0.75))
        assert src[0]["source"] == name and src[0]["note"] == NOTES[name]
        assert src[0]["trajectories"] == 1


def test_batch_invariance_is_read_from_both_runs_configurations():
    from otbench.probe.engines import EngineConfig
    from otbench.probe.online._certify._stored import batch_invariance

    prov = {"engine": {"config": {"model": "m", "batch_invariant": True}}}
    assert batch_invariance(prov, EngineConfig(model="m", batch_invariant=True)) == {
        "stored": True, "replay": True, "both": True}
    assert batch_invariance(prov, {"batch_invariant": False})["both"] is False
    assert batch_invariance({"engine": {}}, None) == {"stored": None, "replay": None, "both": False}


def test_t_quantiles_match_the_tables():
    from otbench.probe.online._certify._interval import _normal_quantile, t_quantile

    assert abs(_normal_quantile(0.975) - 1.959963985) < 1e-8
    # Student's t, two-sided 95 %: the usual table values
    for df, want in ((10, 2.228139), (29, 2.045230), (60, 2.000298), (120, 1.979930)):
        assert abs(t_quantile(0.975, df) - want) < 2e-4, df


def test_expanded_percentiles_widen_the_decision_interval():
    from otbench.probe.online._certify._interval import expanded_percentiles

    lo, hi = expanded_percentiles(30)
    assert abs(lo - 1.875) < 0.01 and abs(hi - 98.125) < 0.01 and abs(lo + hi - 100) < 1e-9
    assert expanded_percentiles(30)[0] < expanded_percentiles(100)[0] < expanded_percentiles(10_000)[0] < 2.5
    assert abs(expanded_percentiles(10 ** 7)[0] - 2.5) < 1e-3           # large n: the plain levels
