"""Each method's own gap-area interval on the leaderboard (issue 58): the oracle frontier re-solved
on every replicate, exact areas, equal intervals for tied methods, and every estimate inside its
interval or flagged with the measured reason, over 20 simulated sets."""

import numpy as np
import pytest
from otbench.analysis import simulate
from otbench.analysis.bench import assign_splits, evaluate, leaderboard
from otbench.analysis.bench._areas import step_integral
from otbench.analysis.bench._evaluate import _cell_totals
from otbench.analysis.bench._frontier_areas import frontier_draws
from otbench.analysis.bench._draws import weights
from otbench.analysis.bench._intervals import intervals, own_interval
from otbench.analysis.bench._leaderboard import MARK
from otbench.analysis.frontier import _cpu
from otbench.analysis.frontier import point_rows as _point_rows
from otbench.analysis.frontier import replicate_areas as cell_frontier_areas

METHODS = ("thinkbrake-onectx", "budget-forcing", "thinkswitcher")


@pytest.fixture(scope="module")
def tiny():
    ms = assign_splits(simulate("tiny", 2, field_signals=True))
    return ms, ms.take(np.flatnonzero(ms.split == 2))


def _draws(test, replicates, seed):
    got = {}
    W = weights(test, replicates, seed, on_cell=lambda m, g, rows: got.__setitem__((m, g), rows))
    return W, got


def test_the_occurrence_draw_is_the_weights_draw(tiny):
    _, test = tiny
    W, occ = _draws(test, 40, 9)
    assert np.array_equal(W, weights(test, 40, 9))          # reading the occurrences moves nothing
    per_row = np.zeros_like(W)
    for rows in occ.values():
        for b in range(rows.shape[0]):
            r = rows[b][rows[b] >= 0]
            np.add.at(per_row[b], r, 1)
            # every occurrence draws rows of one question, as many as that question has there
            for slot in rows[b]:
                drawn = slot[slot >= 0]
                if drawn.size:
                    q = test.question[drawn]
                    same = np.flatnonzero((test.question == q[0]) & (test.cell == test.cell[drawn[0]]))
                    assert (q == q[0]).all() and drawn.size == same.size
    assert np.array_equal(per_row, W)


@pytest.mark.parametrize("strategy", ["dr", "fb", "dee"])
def test_frontier_areas_are_exact_and_both_engines_agree(tiny, strategy):
    _, test = tiny
    _, occ = _draws(test, 25, 4)
    cell_of = {(int(test.cell_model[c]), int(test.cell_group[c])): int(c) for c in np.unique(test.cell)}
    for ct in _cell_totals(test, strategy):
        c = int(test.cell[ct.rows[0]])
        point = cell_frontier_areas(test, c, strategy, _point_rows(test, c), engine="host")
        # the point draw is the split itself: the exact frontier's step integral over [0, T]
        pc, pr = ct.pareto
        assert point[0, 0] == step_integral(pc, pr, 0, ct.tokens)
        assert point[0, 1] == pr[np.searchsorted(pc, 0, side="right") - 1]
        for (m, g), rows in occ.items():
            if cell_of.get((m, g)) != c:
                continue
            host = cell_frontier_areas(test, c, strategy, rows, engine="host")
            if _cpu.available():
                assert np.array_equal(host, cell_frontier_areas(test, c, strategy, rows, engine="cpu"))
            # F(0) <= F <= every drawn probe over [0, T]: T F(0) <= area <= T P
            def drawn(v):
                return np.where(rows >= 0, v[np.maximum(rows, 0)], 0).sum(axis=(1, 2))
            T, P = drawn(test.L[:, -1].astype(np.int64)), drawn(test.probes.astype(np.int64))
            assert (T * host[:, 1] <= host[:, 0]).all() and (host[:, 0] <= T * P).all()
            assert (host[:, 1] <= P).all()


def test_the_point_gap_area_is_the_evaluators_and_replicates_never_go_negative(tiny):
    ms, test = tiny
    res = [evaluate(ms, m, theta_grid=5, audit=0) for m in METHODS]
    iv = intervals(ms, res, replicates=60, seed=11)
    for r in res:
        d = iv[r.method]
        assert d["gap_area_full"] == pytest.approx(r.summary["gap_area_full"], abs=1e-12)
        assert d["net_gap_area_full"] == pytest.approx(r.net["summary"]["gap_area_full"], abs=1e-12)
        lo, hi = d["gap_area_full_interval"]
        # on every replicate each stop of the method is an action of its strategy: F >= M
        assert -1e-12 <= lo <= hi <= 1.0
    W, front, point = frontier_draws(test, 60, 11, ["dee"])
    assert np.array_equal(W, weights(test, 60, 11))
    assert front["dee"].shape == (60,) and np.isfinite(point["dee"])


def test_tied_methods_get_equal_gap_area_intervals():
    ms = assign_splits(simulate("tiny", 3, field_signals=True))
    a = evaluate(ms, "thinkbrake-onectx", theta_grid=5, audit=0)
    twin = evaluate(ms, "thinkbrake-onectx", theta_grid=5, audit=0)
    object.__setattr__(twin, "method", "thinkbrake-twin")                # the same stops
    board = leaderboard([a, twin], ms, replicates=80)
    x, y = board.rows
    for k in ("gap_area_full", "gap_area_full_lo", "gap_area_full_hi", "gap_area_full_outside",
              "net_gap_area_full", "net_gap_area_full_lo", "net_gap_area_full_hi"):
        assert x[k] == y[k], k
    assert x["gap_area_full_lo"] is not None


@pytest.mark.parametrize("seed", range(20))
def test_every_gap_area_is_inside_its_interval_or_flagged(seed):
    ms = assign_splits(simulate("tiny", seed, field_signals=True))
    res = [evaluate(ms, m, theta_grid=5, audit=0) for m in METHODS]
    board = leaderboard(res, ms, replicates=60, seed=seed)
    text, md, doc = board.format(), board.to_markdown(), board.to_json()
    for row, jrow in zip(board.rows, doc["rows"]):
        for pre in ("", "net_"):
            est, lo, hi = (row[f"{pre}gap_area_full{e}"] for e in ("", "_lo", "_hi"))
            why = row[f"{pre}gap_area_full_outside"]
            assert lo is not None and lo <= hi
            if lo <= est <= hi:
                assert why is None
            else:
                side = "below" if est > hi else "above"
                assert f"lie {side} the estimate" in why
                line = f"{MARK} {row['method']} ({'net' if pre else 'gross'} gap area): {why}"
                assert line in text and line in md
            assert jrow[f"{pre}gap_area_full_outside"] == why
    assert (MARK in text) == any(r["gap_area_full_outside"] or r["net_gap_area_full_outside"]
                                 for r in board.rows)


def test_an_estimate_outside_names_its_side_share_and_undefined_replicates():
    reps = np.array([0.3, 0.31, 0.32, 0.33, np.nan])
    got = own_interval(0.1, reps)
    assert got["gap_area_full_interval"][0] > 0.1
    assert got["gap_area_full_outside"].startswith("100.0% of its 4 defined replicates lie above")
    assert "undefined in 1 of 5 replicates" in got["gap_area_full_outside"]
    inside = own_interval(0.315, reps, "net_")
    assert inside["net_gap_area_full_outside"] is None
    assert own_interval(0.2, np.array([np.nan]))["gap_area_full_interval"] == [None, None]


def test_a_flag_travels_into_every_form_of_the_leaderboard(tiny):
    import dataclasses

    ms, _ = tiny
    board = leaderboard([evaluate(ms, "budget-forcing", theta_grid=5, audit=0)], ms, replicates=30)
    why = "100.0% of its 30 defined replicates lie above the estimate (test)"
    flagged = dataclasses.replace(board, rows=({**board.rows[0], "net_gap_area_full_outside": why},))
    line = f"{MARK} budget-forcing (net gap area): {why}"
    assert line in flagged.format() and line in flagged.to_markdown()
    assert f"] {MARK}" in flagged.format() and why in flagged.to_csv()
    assert flagged.to_json()["rows"][0]["net_gap_area_full_outside"] == why
    assert MARK not in board.format()


def test_an_unknown_engine_is_refused(tiny):
    _, test = tiny
    c = int(test.cell[0])
    with pytest.raises(ValueError, match="`engine` must be auto, cpu or host"):
        cell_frontier_areas(test, c, "dee", _point_rows(test, c), engine="gpu")
