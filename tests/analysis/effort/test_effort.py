"""`effort_map` against a plain brute force over every integer cap, and its bootstrap draw."""

from fractions import Fraction

import numpy as np
import pytest
from otbench.analysis import simulate
from otbench.analysis.effort import effort_map, parse_levels
from otbench.analysis.resampling import bootstrap, replicate_weights

from tests._sets import ragged_set

LEVELS = {"a": 0.0, "b": 3.7, "c": 12.3, "d": 40.0}


def twin(ms, W, levels, confidence):
    """Per (model, group): {level: (certified cap, point cap, per-replicate caps)}, every integer
    cap tried, each trajectory's latest position under the cap found by a loop."""
    lo_pct = 100 * (1 - confidence) / 2
    out = {}
    for c in np.unique(ms.cell):
        rows = np.flatnonzero(ms.cell == c)
        n, P = ms.n[rows], ms.probes[rows].astype(np.int64)
        Cf = np.array([ms.C[r, ms.n[r]] for r in rows], dtype=np.int64)
        top = max(int(ms.L[r, ms.n[r]]) for r in rows)
        Wc = W[:, rows].astype(np.int64)
        res = {name: [None, None, np.full(W.shape[0], np.inf)] for name in levels}
        probes, full = Wc @ P, Wc @ Cf
        defined = probes > 0
        for cap in range(top):
            Cc = np.array([ms.C[r, max(k for k in range(ms.n[r] + 1) if ms.L[r, k] <= cap)]
                           for r in rows], dtype=np.int64)
            diff = np.full(W.shape[0], np.nan)
            diff[defined] = (Wc @ Cc - full)[defined] / probes[defined]
            lower = np.percentile(diff[defined], lo_pct)
            point = Fraction(int(Cc.sum() - Cf.sum()), int(P.sum()))
            for name, d in levels.items():
                r = res[name]
                if r[0] is None and lower >= -d / 100:
                    r[0] = cap
                if r[1] is None and point >= -Fraction(str(d)) / 100:
                    r[1] = cap
                hit = defined & np.isinf(r[2]) & (diff >= -d / 100)
                r[2][hit] = cap
        for name in levels:
            res[name][2][~defined] = np.nan
        out[ms.cell_name(int(c))] = res
    return out


@pytest.mark.parametrize("seed", range(5))
def test_smallest_cap_within_delta_matches_brute_force(seed):
    ms = ragged_set(seed, jumps=(0, 1, 3, 8), max_r=3)
    em = effort_map(ms, LEVELS, replicates=60, seed=seed, confidence=0.9)
    W = replicate_weights(ms, 60, seed)
    ref = twin(ms, W, LEVELS, 0.9)
    assert {(c.model, c.group) for c in em.cells} == set(ref)
    for cell in em.cells:
        r = ref[(cell.model, cell.group)]
        for x in cell.levels:
            budget, point, per = r[x.level]
            assert x.budget == budget and x.point_budget == point, (cell.model, cell.group, x)
            # "no cap" is +inf, and an interpolation that touches it is +inf
            want = np.nanpercentile(np.where(np.isinf(per), 1e18, per), [5, 95])
            want = [np.inf if v > cell.longest else v for v in want]
            got = [np.inf if v is None else v for v in x.budget_interval]
            assert got == pytest.approx(want), (got, want)


def _cap_or_inf(v):
    return np.inf if v is None else v


@pytest.mark.parametrize("seed", range(3))
def test_every_budget_is_within_delta_by_its_interval_and_below_the_oracle(seed):
    ms = ragged_set(seed + 10, jumps=(0, 2, 5, 11), max_r=3)
    em = effort_map(ms, LEVELS, replicates=80, seed=seed)
    assert em.replicates == 80 and em.seed == seed and len(em.content_hash) == 64
    for cell in em.cells:
        for x in cell.levels:
            lo, hi = (_cap_or_inf(v) for v in x.budget_interval)
            p = _cap_or_inf(x.point_budget)
            # the point budget lies in its interval, or the flag says why it does not
            assert (x.budget_flag is None) == (lo <= p <= hi), x
            if x.budget is None:
                assert x.at_budget is None and x.oracle_fb is None
                continue
            assert 0 <= x.budget < cell.longest
            ab = x.at_budget
            assert ab["difference_interval"][0] >= -x.delta / 100
            # one cap for every question is an FB action at that cost: the oracle is at least as good
            assert ab["accuracy"] <= x.oracle_fb + 1e-12
            assert 0 <= ab["relative_cost"] <= 1
    # a larger delta never needs a larger budget
    for cell in em.cells:
        caps = [_cap_or_inf(x.budget) for x in sorted(cell.levels, key=lambda x: -x.delta)]
        assert caps == sorted(caps)


def test_replicate_weights_are_the_bootstraps_draw():
    """With R and P equal within each cell, a cell's endpoint accuracy per replicate is
    sum w C(n) / sum w P: it must equal `bootstrap`'s replicate values for the same seed."""
    ms = simulate("tiny", seed=0)
    key = ms.cell.astype(np.int64) * 100_000 + ms.question
    rank = np.array([np.sum(key[:i] == key[i]) for i in range(key.size)])
    sub = ms.take(np.flatnonzero(rank < 3))
    b = bootstrap(sub, replicates=25, seed=11)
    W = replicate_weights(sub, 25, 11, batch=7).astype(np.int64)
    rr = np.arange(sub.num_trajectories)
    metric = 4                                             # BOOT_METRICS: endpoint_acc
    for j, (m, g) in enumerate(b.names.cells):
        cell = next(c for c in range(sub.num_cells) if sub.cell_name(c) == (m, g))
        cols = sub.cell == cell
        num, den = W[:, cols] @ sub.C[rr, sub.n][cols], W[:, cols] @ sub.probes[cols]
        want = np.where(den > 0, num / np.maximum(den, 1), np.nan)
        np.testing.assert_allclose(b.cell[:, metric, j], want, rtol=1e-12, equal_nan=True)
    assert np.all(W.sum(axis=1) > 0)


def test_levels_text_and_errors():
    assert parse_levels("low=2, medium=1,high=0.5") == {"low": 2.0, "medium": 1.0, "high": 0.5}
    for bad, why in (("low", "expected name=points"), ("low=-1", "plain decimal"),
                     ("low=1,low=2", "given twice"), ("=1", "starts with a letter"),
                     ("low=1e2", "plain decimal"), ("low=101", "[0, 100]"), ("a=1,", "empty item")):
        with pytest.raises(ValueError, match=None) as e:
            parse_levels(bad)
        assert why in str(e.value), (bad, str(e.value))


def test_a_cell_that_never_thinks_has_no_budget():
    from tests._sets import build_set
    ms = build_set([("m", "g", "q1", 0, 2, [0], [1]), ("m", "g", "q2", 0, 2, [0, 0], [0, 2]),
                    ("m", "h", "q3", 0, 2, [0, 5], [2, 0])])
    em = effort_map(ms, {"x": 1.0}, replicates=20, seed=0)
    by = {c.group: c for c in em.cells}
    assert by["g"].levels[0].budget is None and by["g"].candidates == 0
    # cutting at 0 keeps the correct answer the thinking later loses: cap 0 is within any delta
    assert by["h"].levels[0].budget == 0 and by["h"].levels[0].at_budget["accuracy"] == 1.0
