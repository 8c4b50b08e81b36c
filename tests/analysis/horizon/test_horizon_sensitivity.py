"""Replicate-specific rows, direct contrasts, the diagonal statistic, the matched sensitivities and
nested-scheme documents against loop twins (issue 31, items 1, 2 and 4).

Twins recompute from the arrays the random run was written from
(`_horizon_helpers`) with loops over items and replicates; estimates
compare to 1e-12, counts exactly.
"""


import math

import numpy as np
import pytest
from _horizon_helpers import random_run, write
from hypothesis import given, settings
from hypothesis import strategies as st
from otbench.analysis.horizon import _inference as inf
from otbench.analysis.horizon import analyze
from test_horizon_analysis import close, ok_and_correct, twin_mean, twin_outcome

REPS = 120


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    s = random_run(21, A=3, I=8, R=4, missing=0.25)
    path = tmp_path_factory.mktemp("hs") / "run"
    write(s, path)
    kw = {"contrasts": ["a1,a0", "a2,a0"], "direct": ["a1,a2"], "diagonal": ["a1:64,a2:128"], "replicates": REPS}
    return s, path, analyze(path, **kw), analyze(path, scheme="nested", **kw)


def pair_diff(s, A, Bz, h, rd):
    def d(i, r):
        oa, va = twin_outcome(s, A, i, r, h, rd)
        ob, vb = twin_outcome(s, Bz, i, r, h, rd)
        return oa and ob, va - vb
    return d


def test_replicate_rows_are_each_replicate_alone(runs):
    s, _, doc, _ = runs
    I, R = s.obs.shape[1:]
    for c in doc["groups"][0]["contrasts"]:
        A, Bz = s.arms.index(c["a"]), s.arms.index(c["b"])
        for h, hr in enumerate(c["horizons"]):
            d = pair_diff(s, A, Bz, h, c["readout"])
            assert [x["replicate"] for x in hr["replicates"]] == list(range(R))
            for x in hr["replicates"]:
                r = x["replicate"]
                vals = [d(i, r)[1] for i in range(I) if d(i, r)[0]]
                assert x["items"] == len(vals)
                assert close(x["delta"]["estimate"], sum(vals) / len(vals) if vals else None)
                if vals and x["delta"]["ci"]:
                    assert x["delta"]["ci"][0] <= x["delta"]["estimate"] + 1e-12


def test_direct_contrasts_share_the_draws_but_not_the_family_band(runs):
    _, path, doc, _ = runs
    rows = doc["groups"][0]["contrasts"]
    direct = [c for c in rows if not c["family"]]
    assert direct and all((c["a"], c["b"]) == ("a1", "a2") for c in direct)
    assert all("family_band_halfwidth" not in c for c in direct)
    fam_only = analyze(path, contrasts=["a1,a0", "a2,a0"], replicates=REPS)
    want = {(c["a"], c["b"], c["readout"]): c["family_band_halfwidth"] for c in fam_only["groups"][0]["contrasts"]}
    for c in rows:
        if c["family"]:
            assert c["family_band_halfwidth"] == want[(c["a"], c["b"], c["readout"])]
    # a direct contrast is the same statistic as a requested one, from the same draws
    as_fam = analyze(path, contrasts=["a1,a2"], replicates=REPS)
    for c in direct:
        (twin,) = [x for x in as_fam["groups"][0]["contrasts"] if x["readout"] == c["readout"]]
        assert [h["delta"] for h in c["horizons"]] == [h["delta"] for h in twin["horizons"]]


def test_the_diagonal_statistic_matches_its_twin(runs):
    s, _, doc, nested = runs
    assert doc["settings"]["diagonal"] == [[["a1", 64], ["a2", 128]]]
    X, Y = s.arms.index("a1"), s.arms.index("a2")
    h1, h2 = s.horizons.index(64), s.horizons.index(128)
    for dg in doc["groups"][0]["diagonal"]:
        d1 = twin_mean(s, pair_diff(s, X, Y, h1, dg["readout"]))
        d2 = twin_mean(s, pair_diff(s, X, Y, h2, dg["readout"]))
        assert close(dg["at_h1"]["estimate"], d1) and close(dg["at_h2"]["estimate"], -d2)
        assert close(dg["match_advantage"]["estimate"], 0.5 * (d1 - d2))
        lo, hi = dg["match_advantage"]["ci"]
        assert lo <= hi
    assert [d["match_advantage"]["estimate"] for d in doc["groups"][0]["diagonal"]] == \
        [d["match_advantage"]["estimate"] for d in nested["groups"][0]["diagonal"]]


def matched_pairs(s):
    lower, _, av, lp = s.matched
    c = s.arms.index(lower)
    tlp = s.term["common"][1]
    I, R = av.shape
    D = np.zeros((I, R))
    P = np.zeros((I, R), bool)
    for i in range(I):
        for r in range(R):
            if s.obs[c, i, r] and s.fin[c, i, r] and ok_and_correct(s, tlp[c, i, r], i)[0] and av[i, r] \
                    and ok_and_correct(s, lp[i, r], i)[0]:
                P[i, r] = True
                D[i, r] = float(ok_and_correct(s, tlp[c, i, r], i)[1]) - float(ok_and_correct(s, lp[i, r], i)[1])
    return D, P


def test_the_matched_estimand_gets_the_table_a11_sensitivities(runs):
    s, _, doc, _ = runs
    (m,) = doc["groups"][0]["matched"]
    D, P = matched_pairs(s)
    sens = m["sensitivity"]["delta"]
    assert close(sens["two_way"]["estimate"], m["delta"]["estimate"])     # same estimate, other draws
    full = P.all(axis=1)
    fit = inf.crossed_intercepts(D[full]) if full.sum() >= 2 else None
    assert (sens["crossed"] is None) == (fit is None)
    if fit is not None:
        assert sens["crossed"]["items"] == int(full.sum()) and close(sens["crossed"]["estimate"], fit.estimate)
    for x in sens["replicates"]:
        r = x["replicate"]
        vals = [D[i, r] for i in range(D.shape[0]) if P[i, r]]
        assert x["items"] == len(vals) and close(x["delta"]["estimate"], sum(vals) / len(vals) if vals else None)


def test_nested_scheme_keeps_every_estimate_and_records_itself(runs):
    _, _, doc, nested = runs
    assert doc["settings"]["scheme"] == "item" and nested["settings"]["scheme"] == "nested"
    a, b = doc["groups"][0], nested["groups"][0]
    for ca, cb in zip(a["contrasts"], b["contrasts"], strict=True):
        for ha, hb in zip(ca["horizons"], cb["horizons"], strict=True):
            assert ha["delta"]["estimate"] == hb["delta"]["estimate"]
            assert ha["replicates"] == hb["replicates"]               # item bootstrap either way
    for sa, sb in zip(a["strata"], b["strata"], strict=True):
        for key in ("share", "share_item_mean", "contribution", "within"):
            assert close(sb[key]["estimate"], sa[key]["estimate"])
    for ma, mb in zip(a["matched"], b["matched"], strict=True):
        assert close(mb["bound_low"]["estimate"], ma["bound_low"]["estimate"])
        assert mb["bound_low"]["ci"] != ma["bound_low"]["ci"]          # other draws


def test_pooled_shares_and_item_mean_shares_differ_on_unequal_pair_sets(runs):
    doc = runs[2]
    rows = [r for r in doc["groups"][0]["strata"] if r["share"]["estimate"] is not None]
    assert any(abs(r["share"]["estimate"] - r["share_item_mean"]["estimate"]) > 1e-3 for r in rows)


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 10_000), R=st.integers(1, 3), scheme=st.sampled_from(["item", "nested"]),
       missing=st.sampled_from([0.0, 0.3]))
def test_contributions_sum_to_the_pooled_difference_and_shares_to_one(tmp_path_factory, seed, R, scheme, missing):
    """Complete and incomplete pair sets, one or more replicates, both schemes."""
    s = random_run(seed, A=2, I=5, R=R, missing=missing, horizons=(0, 64, 512), controls=False)
    path = tmp_path_factory.mktemp("hp") / "run"
    write(s, path)
    doc = analyze(path, contrasts=["a1,a0"], replicates=30, scheme=scheme, two_way=False)
    g = doc["groups"][0]
    by = {}
    for r in g["strata"]:
        by.setdefault((r["readout"], r["B"]), []).append(r)
    deltas = {(c["readout"], h["B"]): h["delta"]["estimate"] for c in g["contrasts"] for h in c["horizons"]}
    for key, rows in by.items():
        if deltas[key] is None:
            continue
        assert sum(r["contribution"]["estimate"] for r in rows) == pytest.approx(deltas[key], abs=1e-12)
        assert sum(r["share"]["estimate"] for r in rows) == pytest.approx(1.0, abs=1e-12)
        assert sum(r["pairs"] for r in rows) == sum(1 for i in range(5) for rr in range(R)
                                                    if pair_diff(s, 1, 0, s.horizons.index(key[1]), key[0])(i, rr)[0])
    for c in g["contrasts"]:
        for h in c["horizons"]:
            assert (h["replicates"] == []) == (R == 1)
    assert g["diagonal"] == []


def test_cli_nested_direct_and_diagonal(runs, tmp_path):
    from click.testing import CliRunner
    from otbench.cli._horizon import horizon_group

    _, path, _, nested = runs
    out = tmp_path / "h.json"
    args = ["analyze", str(path), "--arms", "a1,a0", "--arms", "a2,a0", "--direct", "a1,a2",
            "--diagonal", "a1:64,a2:128", "--scheme", "nested", "--replicates", str(REPS), "--json", str(out)]
    r = CliRunner().invoke(horizon_group, args)
    assert r.exit_code == 0, r.output
    assert "nested-bootstrap draws" in r.output and "diagonal statistic" in r.output
    assert "Replicate-specific, two-way and crossed-intercept sensitivities" in r.output
    import json
    doc = json.loads(out.read_text())
    assert doc["settings"]["scheme"] == "nested" and doc["settings"]["direct"] == [["a1", "a2"]]
    assert doc["groups"][0]["diagonal"] == nested["groups"][0]["diagonal"]       # the API's document
    for bad, msg in ((["--diagonal", "a1:64"], "a diagonal names two arms"),
                     (["--diagonal", "a1:64,a2:x"], "a diagonal must read 'ARM:H,ARM:H'"),
                     (["--diagonal", "a1:64,a2:100"], "diagonal horizon 100 is not among"),
                     (["--direct", "a1,zz"], "arm 'zz' is not in the run"),
                     (["--scheme", "two-way"], "Invalid value for '--scheme'")):
        r = CliRunner().invoke(horizon_group, ["analyze", str(path), "--arms", "a1,a0", "--replicates", "5", *bad])
        assert r.exit_code == 2 and msg in r.output, (bad, r.output)
        assert "Traceback" not in r.output


def test_lengths_match_the_twin(runs):
    s, _, doc, _ = runs
    I, R = s.obs.shape[1:]
    rows = {(r["a"], r["b"]): r for r in doc["groups"][0]["lengths"]}
    assert set(rows) == {("a1", "a0"), ("a2", "a0"), ("a1", "a2")}
    for (an, bn), row in rows.items():
        A, Bz = s.arms.index(an), s.arms.index(bn)
        assert row["median_a"] == float(np.median([s.L[A, i, r] for i in range(I) for r in range(R) if s.obs[A, i, r]]))
        per_item = [[math.log(s.L[A, i, r] / s.L[Bz, i, r]) for r in range(R)
                     if s.obs[A, i, r] and s.obs[Bz, i, r] and s.L[A, i, r] > 0 and s.L[Bz, i, r] > 0]
                    for i in range(I)]
        means = [sum(v) / len(v) for v in per_item if v]
        assert row["pairs"] == sum(map(len, per_item)) and row["items"] == len(means)
        assert close(row["delta_log_L"]["estimate"], sum(means) / len(means))
