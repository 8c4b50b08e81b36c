"""The leaderboard's bootstrap intervals (issue 40): the draw, the curve areas, ranks and gaps."""

from fractions import Fraction

import numpy as np
import pytest
from _otbench_helpers import bench_sets
from hypothesis import given, settings
from hypothesis import strategies as st
from otbench.analysis import simulate
from otbench.analysis.bench import assign_splits, compare, evaluate, leaderboard
from otbench.analysis.bench._areas import cell_areas
from otbench.analysis.bench._draws import weights
from otbench.analysis.bench._intervals import _ranks, curve_area, intervals


@pytest.fixture(scope="module")
def small():
    ms = assign_splits(simulate("small", 0, field_signals=True))
    return ms, compare(ms, theta_grid=7)


def test_the_draw_is_two_stage_and_paired():
    ms = assign_splits(simulate("small", 1))
    test = ms.take(np.flatnonzero(ms.split == 2))
    W = weights(test, 300, 5)
    assert W.shape == (300, test.num_trajectories) and (W >= 0).all()
    model = test.cell_model[test.cell]
    group = test.cell_group[test.cell]
    for g in np.unique(group):
        qs = np.unique(test.question[group == g])
        for m in np.unique(model):
            # occurrences of each question (its draws divided by its trajectories) are the same
            # for every model: stage 1 is shared
            occ = []
            for q in qs:
                rows = (model == m) & (test.question == q)
                occ.append(W[:, rows].sum(axis=1) / rows.sum())
            occ = np.stack(occ, axis=1)
            assert np.allclose(occ, np.round(occ))
            assert (occ.sum(axis=1) == qs.size).all()          # Q_g questions per group per replicate
            if m == np.unique(model)[0]:
                first = occ
            else:
                assert np.array_equal(occ, first)
    assert np.array_equal(W, weights(test, 300, 5))           # a recorded seed: the same draws
    assert not np.array_equal(W, weights(test, 300, 6))


def _area_twin(cost, reward, zero, total):
    """`∫_0^T max(zero, best reward with cost <= b) db` by walking every token (exact integers)."""
    out = 0
    for b in range(total):
        best = max([zero] + [r for c, r in zip(cost, reward) if c <= b])
        out += best
    return out


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 40), st.integers(0, 30)), min_size=1, max_size=8),
       st.integers(0, 30), st.integers(0, 50))
def test_curve_area_is_the_step_integral(points, zero, total):
    cost = np.array([[c for c, _ in points]])
    reward = np.array([[r for _, r in points]])
    got = curve_area(cost, reward, np.array([zero]), np.array([total]))[0]
    assert got == _area_twin([c for c, _ in points], [r for _, r in points], zero, total)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 40), st.integers(0, 30)), min_size=1, max_size=8),
       st.integers(0, 30), st.integers(1, 50), st.integers(1, 60))
def test_curve_area_agrees_with_the_exact_cell_areas(points, zero, total, probes):
    cost, reward = [min(c, total) for c, _ in points], [r for _, r in points]
    pareto = (np.array([0]), np.array([max(reward + [zero])]))
    a = cell_areas(cost, reward, [True] * len(cost), pareto, total, probes, zero)
    want = a.realized * total * probes + zero * total
    got = curve_area(np.array([cost]), np.array([reward]), np.array([zero]), np.array([total]))[0]
    assert Fraction(got) == want


def test_point_estimates_are_the_exact_gap_differences(small):
    ms, res = small
    iv = intervals(ms, res, replicates=50)
    for strategy in ("dr", "fb", "dee"):
        group = [r for r in res if r.strategy == strategy]
        best = min(group, key=lambda r: (r.summary["gap_area_full"], r.method))
        nbest = min(group, key=lambda r: (r.net["summary"]["gap_area_full"], r.method))
        for r in group:
            d = iv[r.method]
            assert d["best"] == best.method and d["net_best"] == nbest.method
            assert abs(d["gap_behind_best"] - (r.summary["gap_area_full"] - best.summary["gap_area_full"])) < 1e-12
            assert abs(d["net_gap_behind_best"] - (r.net["summary"]["gap_area_full"]
                                                   - nbest.net["summary"]["gap_area_full"])) < 1e-12
            lo, hi = d["rank_interval"]
            assert 1 <= lo <= hi <= len(group)


def test_ranks_follow_the_leaderboard_order_and_ties_share_a_rank():
    rng = np.random.default_rng(0)
    areas = rng.choice([0.1, 0.2, 0.3, np.nan], size=(200, 4))
    got = _ranks(areas)
    for row, ranks in zip(areas, got):
        key = [-np.inf if np.isnan(a) else a for a in row]
        # competition ranking: 1 + the methods strictly ahead (1, 1, 3, ...)
        assert [int(x) for x in ranks] == [1 + sum(k > mine for k in key) for mine in key]
    assert _ranks(np.array([[0.2, 0.2, 0.1, 0.3]])).tolist() == [[2, 2, 4, 1]]


def test_an_identical_twin_is_never_separated(small):
    ms, _ = small
    a = evaluate(ms, "thinkbrake-onectx", theta_grid=7)
    twin = evaluate(ms, "thinkbrake-onectx", theta_grid=7)
    object.__setattr__(twin, "method", "thinkbrake-twin")
    iv = intervals(ms, [a, twin], replicates=100)
    assert iv["thinkbrake-twin"]["gap_behind_best_interval"] == [0.0, 0.0]
    # Tied methods get equal intervals, and the leaderboard gives them one rank.
    assert iv["thinkbrake-twin"]["rank_interval"] == iv["thinkbrake-onectx"]["rank_interval"] == [1, 1]
    assert iv["thinkbrake-twin"]["net_rank_interval"] == iv["thinkbrake-onectx"]["net_rank_interval"]
    for k in ("gap_area_full_interval", "net_gap_area_full_interval"):
        assert iv["thinkbrake-twin"][k] == iv["thinkbrake-onectx"][k]
    board = leaderboard([a, twin], ms, replicates=100)
    assert [(r["rank"], r["net_rank"], r["rank_lo"], r["rank_hi"]) for r in board.rows] == [(1, 1, 1, 1)] * 2


@settings(max_examples=15, deadline=None)
@given(bench_sets())
def test_ragged_sets_give_defined_intervals(ms):
    res = [evaluate(ms, "thinkbrake-onectx", audit=0), evaluate(ms, "budget-forcing", audit=0)]
    iv = intervals(ms, res, replicates=40)
    for r in res:
        d = iv[r.method]
        lo, hi = d["gap_behind_best_interval"]
        assert np.isfinite([lo, hi]).all() and lo <= hi
        assert d["gap_behind_best"] >= -1e-12                    # behind the best, or the best
        if d["best"] == r.method:
            assert d["gap_behind_best"] == 0.0 and lo == hi == 0.0
        assert 1 <= d["rank_interval"][0] <= d["rank_interval"][1] <= 1   # alone in its strategy
        # its own gap area: the evaluator's estimate, and an interval of non-negative replicates
        assert abs(d["gap_area_full"] - r.summary["gap_area_full"]) < 1e-12
        glo, ghi = d["gap_area_full_interval"]
        assert np.isfinite([glo, ghi]).all() and -1e-12 <= glo <= ghi
        assert (d["gap_area_full_outside"] is None) == (glo <= d["gap_area_full"] <= ghi)


def test_the_leaderboard_carries_them_in_every_form(small):
    ms, res = small
    plain = leaderboard(res)
    assert plain.intervals is None and "rank_lo" not in plain.rows[0] and "rank 95%" not in plain.to_markdown()
    board = leaderboard(res, ms, replicates=100, seed=3)
    doc = board.to_json()
    assert doc["intervals"]["replicates"] == 100 and doc["intervals"]["seed"] == 3
    assert all({"rank_lo", "rank_hi", "gap_behind_best_lo", "net_rank_lo"} <= set(r) for r in doc["rows"])
    assert "rank 95%" in board.to_markdown() and "gap_behind_best_lo (fraction)" in board.to_csv()
    assert "95% intervals: two-stage paired bootstrap" in board.format()
    with pytest.raises(ValueError, match="positive integer"):
        leaderboard(res, ms, replicates=0)
