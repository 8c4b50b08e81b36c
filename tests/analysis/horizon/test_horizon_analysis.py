"""The matched-horizon analysis on random runs against Python twins; the run format; the CLI (SPEC §8).

The twins recompute every estimate of the analysis document with loops over
items and replicates from the arrays the random run was written from
(`_horizon_helpers`); integer counts compare exactly, means of means to
1e-12. Intervals come from the bootstrap tested in test_horizon_kernels.
"""

import json
import math

import numpy as np
import pytest
from _horizon_helpers import random_run, write
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from otbench.analysis.horizon import _inference as inf
from otbench.analysis.horizon._analysis import HorizonAnalysisError, analyze
from otbench.analysis.measurement._horizon_run import (
    HorizonDataError,
    load_run,
    write_run,
)
from otbench.cli._horizon import horizon_group
from test_horizon_exact import exact_crossed_twin

REPS = 200      # bootstrap draws in these tests: the estimates, not the intervals, are checked


def mean_of_means(pairs_by_item):
    """Mean over items with any value of the mean of their values (the analysis' weighting)."""
    means = [sum(v) / len(v) for v in pairs_by_item if v]
    return sum(means) / len(means) if means else None


def ok_and_correct(s, lp, i):
    """(readout usable, argmax is gold) for per-option log-probabilities of item i."""
    v = list(lp[:s.n_opt[i]])
    if not np.isfinite(max(v)):
        return False, False
    return True, v.index(max(v)) == s.gold[i]


def twin_outcome(s, z, i, r, h, readout):
    """(available, value) of arm z's outcome under a readout (the analysis' definitions)."""
    B = s.horizons[h]
    if not s.obs[z, i, r]:
        return False, 0.0
    done = s.fin[z, i, r] and s.L[z, i, r] <= B
    if readout == "completion":                      # correct completion by the deadline
        return True, float(done) * float(s.y[z, i, r])
    av, lp, cav, cc = s.stop["common" if readout == "common" else "policy"]
    ok, corr = ok_and_correct(s, lp[z, i, r, h], i) if av[z, i, r, h] else (False, False)
    if readout == "common":
        return ok, float(corr)
    if done:
        return True, float(s.y[z, i, r])
    if readout == "policy":
        return ok, float(corr)
    return bool(cav[z, i, r, h]), float(cc[z, i, r, h])


def twin_mean(s, fn):
    A, I, R = s.obs.shape
    return mean_of_means([[v for r in range(R) for ok, v in [fn(i, r)] if ok] for i in range(I)])


def close(a, b):
    if b is None:
        return a is None
    return a is not None and math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-12)


@pytest.fixture(scope="module")
def fixed(tmp_path_factory):
    s = random_run(11, A=3, I=7, R=3)
    path = tmp_path_factory.mktemp("hz") / "run"
    write(s, path)
    doc = analyze(path, contrasts=["a1,a0", ("a2", "a0")], replicates=REPS)
    return s, path, doc


def test_calibration_matches_the_twin(fixed):
    s, _, doc = fixed
    rows = {(r["arm"], r["B"]): r for r in doc["groups"][0]["calibration"]}
    for z, arm in enumerate(s.arms):
        for h, B in enumerate(s.horizons):
            row = rows[(arm, B)]
            obs = lambda i, r: s.obs[z, i, r]  # noqa: E731
            assert close(row["survival"]["estimate"],
                         twin_mean(s, lambda i, r: (obs(i, r), float(s.L[z, i, r] > B))))
            assert close(row["completion"]["estimate"], twin_mean(
                s, lambda i, r: (obs(i, r), float(s.fin[z, i, r] and s.L[z, i, r] <= B) * s.y[z, i, r])))
            assert close(row["natural"]["estimate"], twin_mean(s, lambda i, r: (obs(i, r), float(s.y[z, i, r]))))
            for rd, key in (("policy", "terminal_aware"), ("common", "common"),
                            ("continuation", "continuation")):
                assert close(row[key]["estimate"],
                             twin_mean(s, lambda i, r: twin_outcome(s, z, i, r, h, rd))), (arm, B, key)
            av, lp, _, _ = s.stop["policy"]

            def surv(i, r):
                if not (obs(i, r) and s.L[z, i, r] > B and av[z, i, r, h]):
                    return False, 0.0
                ok, c = ok_and_correct(s, lp[z, i, r, h], i)
                return ok, float(c)
            assert close(row["survivor_only"]["estimate"], twin_mean(s, surv))
            assert row["survivors"] == int((s.obs[z] & (s.L[z] > B)).sum())
            assert row["items"] == int(s.obs[z].any(axis=1).sum())


def test_contrasts_strata_and_mcnemar_match_the_twin(fixed):
    s, _, doc = fixed
    g = doc["groups"][0]
    for c in g["contrasts"]:
        A, Bz = s.arms.index(c["a"]), s.arms.index(c["b"])
        deltas = []
        for h, hr in enumerate(c["horizons"]):
            def d(i, r):
                oa, va = twin_outcome(s, A, i, r, h, c["readout"])
                ob, vb = twin_outcome(s, Bz, i, r, h, c["readout"])
                return oa and ob, va - vb
            want = twin_mean(s, d)
            assert close(hr["delta"]["estimate"], want)
            deltas.append(want)
            assert hr["pairs"] == sum(d(i, r)[0] for i in range(s.obs.shape[1]) for r in range(s.obs.shape[2]))
            if hr["band"] is not None:
                assert hr["band"][0] <= hr["delta"]["estimate"] <= hr["band"][1]
                # the family band covers more contrasts, so it is at least as wide
                assert hr["family_band"][1] - hr["family_band"][0] >= hr["band"][1] - hr["band"][0] - 1e-12
        pos = [(math.log2(B), v) for B, v in zip(s.horizons, deltas) if B > 0]
        xs, ys = zip(*pos)
        assert close(c["auc"]["estimate"], float(np.trapezoid(ys, xs) / (xs[-1] - xs[0])))
    for st_ in g["strata"]:
        A, Bz, h = s.arms.index(st_["a"]), s.arms.index(st_["b"]), s.horizons.index(st_["B"])
        B = st_["B"]
        code = {"both_active": (False, False), "only_a_finished": (True, False),
                "only_b_finished": (False, True), "both_finished": (True, True)}[st_["stratum"]]

        def contrib(i, r):
            oa, va = twin_outcome(s, A, i, r, h, st_["readout"])
            ob, vb = twin_outcome(s, Bz, i, r, h, st_["readout"])
            da = bool(s.fin[A, i, r] and s.L[A, i, r] <= B)
            db = bool(s.fin[Bz, i, r] and s.L[Bz, i, r] <= B)
            return oa and ob, (va - vb) * ((da, db) == code)

        def inside(i, r):       # the paper's within-stratum contrast: only the stratum's pairs
            ok, v = contrib(i, r)
            da = bool(s.fin[A, i, r] and s.L[A, i, r] <= B)
            db = bool(s.fin[Bz, i, r] and s.L[Bz, i, r] <= B)
            return ok and (da, db) == code, v
        assert close(st_["contribution"]["estimate"], twin_mean(s, contrib))
        assert close(st_["within"]["estimate"], twin_mean(s, inside))
        I, R = s.obs.shape[1:]
        assert st_["items"] == sum(any(inside(i, r)[0] for r in range(R)) for i in range(I))
        sh = st_["share_item_mean"]["estimate"]
        assert close(sh, twin_mean(s, lambda i, r: (contrib(i, r)[0], float(inside(i, r)[0]))))
        # Table A18's share: the raw fraction of all pairs (pooled over items)
        all_pairs = [(i, r) for i in range(I) for r in range(R) if contrib(i, r)[0]]
        assert close(st_["share"]["estimate"], sum(inside(i, r)[0] for i, r in all_pairs) / len(all_pairs))
        want = None if not sh else st_["contribution"]["estimate"] / sh
        assert close(st_["contribution_per_share"]["estimate"], want)
    by = {}
    for st_ in g["strata"]:
        by.setdefault((st_["a"], st_["readout"], st_["B"]), []).append(st_)
    for rows in by.values():
        assert len(rows) == 4
        assert sum(r["share"]["estimate"] for r in rows) == pytest.approx(1.0, abs=1e-12)
        assert sum(r["contribution"]["estimate"] for r in rows) == pytest.approx(rows[0]["total"], abs=1e-12)
    for m in g["mcnemar"]:
        A, Bz, h = s.arms.index(m["a"]), s.arms.index(m["b"]), s.horizons.index(m["B"])
        pairs = [(twin_outcome(s, A, i, r, h, "policy"), twin_outcome(s, Bz, i, r, h, "policy"))
                 for i in range(s.obs.shape[1]) for r in range(s.obs.shape[2])]
        pairs = [(a[1], b[1]) for a, b in pairs if a[0] and b[0]]
        assert (m["n10"], m["n01"]) == (sum(a > b for a, b in pairs), sum(a < b for a, b in pairs))
        by_item = {}
        for i in range(s.obs.shape[1]):
            for r in range(s.obs.shape[2]):
                oa, va = twin_outcome(s, A, i, r, h, "policy")
                ob, vb = twin_outcome(s, Bz, i, r, h, "policy")
                if oa and ob:
                    by_item.setdefault(i, []).append(va - vb)
        dm = np.array([sum(v) / len(v) for v in by_item.values()])
        assert m["sign_flip_p"] == inf.sign_flip(dm, draws=REPS, seed=0).p


def test_matched_bounds_and_controls_match_the_twin(fixed):
    s, _, doc = fixed
    g = doc["groups"][0]
    (m,) = g["matched"]
    lower, upper, av, lp = s.matched
    c, h = s.arms.index(lower), s.arms.index(upper)
    tav, tlp = s.term["common"]
    I, R = av.shape
    rows = []
    for i in range(I):
        for r in range(R):
            base = s.obs[c, i, r] and s.fin[c, i, r] and ok_and_correct(s, tlp[c, i, r], i)[0]
            if not base:
                continue
            yc = float(ok_and_correct(s, tlp[c, i, r], i)[1])
            rep = av[i, r] and ok_and_correct(s, lp[i, r], i)[0]
            yh = float(ok_and_correct(s, lp[i, r], i)[1]) if rep else None
            rows.append((i, rep, yc, yh, float(s.y[c, i, r]), bool(s.L[h, i, r] > s.L[c, i, r])))
    by_item = lambda f: mean_of_means([[f(x) for x in rows if x[0] == i and f(x) is not None]  # noqa: E731
                                       for i in range(I)])
    assert m["pairs"] == len(rows) and m["replayable"] == sum(x[1] for x in rows)
    assert m["missing"] == m["pairs"] - m["replayable"]
    assert close(m["delta"]["estimate"], by_item(lambda x: x[2] - x[3] if x[1] else None))
    # the paper's bounds: pooled over all retained pairs, divided by their number N
    N = len(rows)
    assert close(m["bound_low"]["estimate"],
                 sum(x[2] - x[3] if x[1] else x[4] - 1 for x in rows) / N)
    assert close(m["bound_high"]["estimate"], sum(x[2] - x[3] if x[1] else x[4] for x in rows) / N)
    assert m["bound_low"]["estimate"] <= m["bound_high"]["estimate"]
    lo_ci, hi_ci = m["bound_low"]["ci"], m["bound_high"]["ci"]
    assert lo_ci[0] <= lo_ci[1] and hi_ci[0] <= hi_ci[1]
    # kept beside them: the same bounds averaged within item first
    assert close(m["bound_low_item_mean"]["estimate"],
                 by_item(lambda x: x[2] - x[3] if x[1] else x[4] - 1))
    assert close(m["bound_high_item_mean"]["estimate"], by_item(lambda x: x[2] - x[3] if x[1] else x[4]))
    # the upper-arm-active diagnostic: replayable pairs whose upper run is still reasoning at L^c
    assert close(m["delta_high_active"]["estimate"], by_item(lambda x: x[2] - x[3] if x[1] and x[5] else None))

    ctl = {r["control"]: r for r in g["controls"]}
    assert set(ctl) == {"random", "swap", "shuffle"}
    pav, plp, _, _ = s.stop["policy"]
    hix = [s.horizons.index(b) for b in s.control_h]
    per_item = {v: [[] for _ in range(I)] for v in ctl}
    for i in range(I):
        for r in range(R):
            for k, B in enumerate(s.control_h):
                if not (s.obs[0, i, r] and s.L[0, i, r] > B and pav[0, i, r, hix[k]]):
                    continue
                ok, co = ok_and_correct(s, plp[0, i, r, hix[k]], i)
                cs = {v: ok_and_correct(s, s.control[v][1][0, i, r, k], i) for v in ctl}
                if not ok or not all(s.control[v][0][0, i, r, k] and cs[v][0] for v in ctl):
                    continue         # the common cohort: the original and every control
                for v in ctl:
                    per_item[v][i].append(float(co) - float(cs[v][1]))
    for v, row in ctl.items():
        assert close(row["delta"]["estimate"], mean_of_means(per_item[v]))
        d = np.array([sum(x) / len(x) for x in per_item[v] if x])
        assert row["sign_flip_p"] == inf.sign_flip(d, draws=REPS, seed=0).p


def test_dense_auc_and_agreement_match_the_twin(fixed):
    s, _, doc = fixed
    g = doc["groups"][0]
    dense = g["dense"]
    assert dense["checkpoints"] == [b for b in s.horizons if b <= 512]
    T = len(dense["checkpoints"])
    av, lp, _, _ = s.stop["common"]
    t = np.array(dense["checkpoints"], dtype=float)
    A, I, R = s.obs.shape

    def curve(z, i, r):
        lo, corr = [], []
        for h in range(T):
            if not (s.obs[z, i, r] and av[z, i, r, h]):
                return None
            v = list(lp[z, i, r, h][:s.n_opt[i]])
            ok, c = ok_and_correct(s, v, i)
            gold = v[s.gold[i]]
            rest = [x for k, x in enumerate(v) if k != s.gold[i]]
            if not ok or not np.isfinite(gold) or not np.isfinite(max(rest)):
                return None
            m = max(rest)
            lo.append(gold - (m + math.log(sum(math.exp(x - m) for x in rest))))
            corr.append(c)
        stable = [float(all(corr[k:])) for k in range(T)]
        return np.trapezoid(lo, t) / t[-1], np.trapezoid(stable, t) / t[-1]
    for d in dense["contrasts"]:
        a, b = s.arms.index(d["a"]), s.arms.index(d["b"])
        per = [[] for _ in range(I)]
        per_s = [[] for _ in range(I)]
        for i in range(I):
            for r in range(R):
                ca, cb = curve(a, i, r), curve(b, i, r)
                if ca is not None and cb is not None:
                    per[i].append(ca[0] - cb[0])
                    per_s[i].append(ca[1] - cb[1])
        assert d["auc_log_odds"]["estimate"] == pytest.approx(mean_of_means(per), rel=1e-9, abs=1e-12)
        assert d["auc_stable"]["estimate"] == pytest.approx(mean_of_means(per_s), rel=1e-9, abs=1e-12)
    tav, tlp = s.term["policy"]
    for row in g["agreement"]:
        z = s.arms.index(row["arm"])
        comp = [(i, r) for i in range(I) for r in range(R)
                if s.obs[z, i, r] and s.fin[z, i, r] and s.letter[z, i, r] >= 0
                and ok_and_correct(s, tlp[z, i, r], i)[0]]
        agree = sum(int(np.argmax(tlp[z, i, r][:s.n_opt[i]])) == s.letter[z, i, r] for i, r in comp)
        assert (row["compared"], row["agree"]) == (len(comp), agree)


@settings(max_examples=4, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 3), st.sampled_from([1, 4]))
def test_random_runs_keep_the_identities(tmp_path_factory, seed, R, I):
    s = random_run(seed, A=2, I=I, R=R, groups=("G1", "G2"), missing=0.3)
    path = tmp_path_factory.mktemp("hzr") / "run"
    write(s, path)
    doc = analyze(path, contrasts=["a1,a0"], replicates=50, two_way=(seed % 2 == 0))
    assert [g["group"] for g in doc["groups"]] == sorted({g for g, _ in s.items})
    for g in doc["groups"]:
        for row in g["calibration"]:
            for k in ("survival", "completion", "natural", "terminal_aware"):
                e = row[k]["estimate"]
                assert e is None or 0.0 <= e <= 1.0
        by = {}
        for st_ in g["strata"]:
            by.setdefault((st_["readout"], st_["B"]), []).append(st_["contribution"]["estimate"])
        totals = {(c["readout"], h["B"]): h["delta"]["estimate"] for c in g["contrasts"] for h in c["horizons"]}
        for key, cs in by.items():
            if totals[key] is None:          # no pair at this horizon: nothing is defined
                assert cs == [None] * 4
            else:
                assert sum(cs) == pytest.approx(totals[key], abs=1e-12)
        for m in g["matched"]:
            lo, hi = m["bound_low"]["estimate"], m["bound_high"]["estimate"]
            if m["pairs"] == 0:                  # no matched pair in the group: no bound is defined
                assert lo is None and hi is None
            else:
                assert lo <= hi + 1e-12
    json.dumps(doc, allow_nan=False)     # the document is plain JSON


def test_the_document_is_deterministic_and_seeded(fixed):
    s, path, doc = fixed
    again = analyze(path, contrasts=["a1,a0", "a2,a0"], replicates=REPS)
    assert again == doc
    other = analyze(path, contrasts=["a1,a0", "a2,a0"], replicates=REPS, seed=5)
    c0, c5 = doc["groups"][0]["contrasts"][0], other["groups"][0]["contrasts"][0]
    assert c0["horizons"][1]["delta"]["estimate"] == c5["horizons"][1]["delta"]["estimate"]
    assert other["settings"]["seed"] == 5


@pytest.mark.parametrize("kw, match", [
    (dict(contrasts=["a0,a0"]), "a contrast must name two different arms"),
    (dict(contrasts=["a0,zz"]), "arm 'zz' is not in the run"),
    (dict(horizons=[3]), r"horizons \[3\] were not read out in this run"),
    (dict(replicates=0), "`replicates` must be a positive integer"),
    (dict(tail=2.0), r"`tail` must be in \(0, 1\)"),
])
def test_analyze_validates_its_arguments(fixed, kw, match):
    _, path, _ = fixed
    with pytest.raises((HorizonAnalysisError, HorizonDataError), match=match):
        analyze(path, **kw)


def test_load_run_rejects_broken_runs(tmp_path):
    s = random_run(3, A=2, I=2, R=1, controls=False, matched=False)
    write(s, tmp_path / "ok")
    run = load_run(tmp_path / "ok")
    assert run.arms == ("a0", "a1") and run.R == 1
    with pytest.raises(HorizonDataError, match="no such file"):
        load_run(tmp_path / "nothing")
    # a table edited after the run no longer matches the manifest's sha256
    (tmp_path / "ok" / "readouts.parquet").write_bytes(
        (tmp_path / "ok" / "readouts.parquet").read_bytes() + b"x")
    with pytest.raises(HorizonDataError, match="sha256 differs from the manifest"):
        load_run(tmp_path / "ok")
    man = {"arms": [{"name": "a0"}]}
    row = dict(model="m", arm="a0", group="g", dataset="d", question="q", replicate=0, seed=0, gold="E",
               n_options=4, scripted=False, prompt=[1], thinking=[2], L=1, finished=True, stop_id=None,
               answer=[], answer_letter=None, y=0, y_status="no_answer")
    write_run(tmp_path / "bad", man, [row], [])
    with pytest.raises(HorizonDataError, match=r"row 1: gold must be one of 'ABCD'"):
        load_run(tmp_path / "bad")
    write_run(tmp_path / "dup", man, [row | {"gold": "A"}, row | {"gold": "A"}], [])
    with pytest.raises(HorizonDataError, match="duplicate"):
        load_run(tmp_path / "dup")
    write_run(tmp_path / "y", man, [row | {"gold": "A", "answer_letter": "A", "y": 0}], [])
    with pytest.raises(HorizonDataError, match="y must be 1 exactly when answer_letter is the gold"):
        load_run(tmp_path / "y")
    with pytest.raises(HorizonDataError, match="unknown columns"):
        write_run(tmp_path / "cols", man, [row | {"extra": 1}], [])
    with pytest.raises(FileExistsError):
        write_run(tmp_path / "y", man, [row], [])


def test_cli_analyze_prints_the_paper_tables_and_writes_json(fixed, tmp_path):
    _, path, _ = fixed
    out = tmp_path / "h.json"
    r = CliRunner().invoke(horizon_group, ["analyze", str(path), "--arms", "a1,a0", "--horizons", "0,64,512",
                                           "--replicates", "100", "--json", str(out)])
    assert r.exit_code == 0, r.output
    assert "Fixed-stop calibration" in r.output and "Paired contrasts at matched horizons" in r.output
    assert "Termination-stratum decomposition" in r.output and "sign-flip p" in r.output
    doc = json.loads(out.read_text())
    assert doc["schema"] == "otbench.horizon/1" and doc["settings"]["horizons"] == [0, 64, 512]
    bad = CliRunner().invoke(horizon_group, ["analyze", str(path), "--arms", "a1,zz"])
    assert bad.exit_code == 2 and "arm 'zz' is not in the run" in bad.output
    bad = CliRunner().invoke(horizon_group, ["analyze", str(tmp_path / "none")])
    assert bad.exit_code == 2 and "not a horizon run directory" in bad.output
    bad = CliRunner().invoke(horizon_group, ["analyze", str(path), "--horizons", "x"])
    assert bad.exit_code == 2 and "expected comma-separated integers" in bad.output


def test_report_shows_the_horizon_document_beside_a_set(fixed, tmp_path):
    from otbench.analysis import simulate
    from otbench.analysis.measurement._io import save
    from otbench.analysis.report._figures import png_size
    from otbench.analysis.report._write import write_report

    _, _, doc = fixed
    set_dir = tmp_path / "set"
    save(simulate("tiny", 0), set_dir)
    (set_dir / "results").mkdir()
    (set_dir / "results" / "horizon.json").write_text(json.dumps(doc))
    index = write_report(set_dir, tmp_path / "rep")
    man = json.loads((tmp_path / "rep" / "report.json").read_text())
    names = {f["name"] for f in man["figures"]}
    assert {"fig11_horizon_accuracy", "fig12_horizon_contrast", "fig13_horizon_strata"} <= names
    for f in man["figures"]:
        if f["name"].startswith("fig1") and "horizon" in f["name"]:
            assert png_size(tmp_path / "rep" / f["file"]) == (f["width"], f["height"])
    tables = {t["name"] for t in man["tables"]}
    assert {"table23_horizon_calibration", "table24_horizon_contrasts", "table25_horizon_strata"} <= tables
    csv_text = (tmp_path / "rep" / "tables" / "table24_horizon_contrasts.csv").read_text()
    header = [ln for ln in csv_text.splitlines() if not ln.startswith("#")][0]
    assert "Δ (pp),Δ lo (pp),Δ hi (pp)" in header and "B (tokens)" in header   # units in headers
    assert "table26_horizon_sensitivity" in tables and "table27_horizon_diagonal" not in tables
    assert "table28_horizon_lengths" in tables
    import csv
    sens = list(csv.reader(ln for ln in (tmp_path / "rep" / "tables" / "table26_horizon_sensitivity.csv")
                           .read_text().splitlines() if not ln.startswith("#")))
    col = sens[0].index("crossed Δ hi (pp)")
    assert any(r[col] for r in sens[1:]) and all(r[col] == "" or float(r[col]) == float(r[col]) for r in sens[1:])
    assert {r[sens[0].index("replicate")] for r in sens[1:]} >= {"pooled (3)", "replicate 0", "replicate 2"}
    assert "Matched-horizon readouts" in index.read_text()
    # a file that is not a horizon document gives a note, not a figure
    (set_dir / "results" / "horizon.json").write_text('{"schema": "other"}')
    write_report(set_dir, tmp_path / "rep2")
    man2 = json.loads((tmp_path / "rep2" / "report.json").read_text())
    assert not any("horizon" in f["name"] for f in man2["figures"])
    assert any("not an otbench.horizon/1 document" in n for n in man2["notes"])
    # and without a document there is no section at all
    (set_dir / "results" / "horizon.json").unlink()
    write_report(set_dir, tmp_path / "rep3")
    assert "Matched-horizon" not in (tmp_path / "rep3" / "index.html").read_text()


def test_a_policy_only_run_reads_dense_curves_in_the_policy_context(tmp_path):
    s = random_run(5, A=2, I=4, R=2, controls=False, matched=False)
    s.stop.pop("common")
    s.term.pop("common")
    write(s, tmp_path / "run")
    doc = analyze(tmp_path / "run", contrasts=["a1,a0"], replicates=50)
    g = doc["groups"][0]
    assert g["dense"]["context"] == "policy" and g["dense"]["curves"]
    assert {c["readout"] for c in g["contrasts"]} == {"policy", "continuation", "completion"}
    assert {r["context"] for r in g["scores"]} == {"policy"}


def test_pooled_bounds_follow_the_paper_on_unequal_items():
    """16 pairs, 6 missing, items of unequal size: the pooled and item-mean bounds differ."""
    from types import SimpleNamespace

    from otbench.analysis.horizon._group import Group
    from otbench.analysis.horizon._matched import pooled_bounds as _pooled_bounds

    class G:
        st = SimpleNamespace(scheme="item")
        pooled_ratio = Group.pooled_ratio

        def boot(self, x, a):
            return inf.bootstrap(x, a, replicates=300, seed=1)

    # item 0: 10 pairs (6 missing: all in item 0), items 1-3: 2 pairs each
    base = np.zeros((4, 10), dtype=bool)
    base[0] = True
    base[1:, :2] = True
    rep = base.copy()
    rep[0, :6] = False
    d = np.zeros((4, 10))
    d[0, 6:] = [1, 1, 0, 0]
    d[1:, :2] = [[1, 0], [0, -1], [1, 1]]
    ync = np.zeros((4, 10))
    ync[0, :6] = [1, 1, 1, 0, 0, 0]
    lo, hi = _pooled_bounds(G(), base, rep, d, ync)
    obs = 2 + 2                            # observed D: item 0 gives 2, items 1-3 give 1 - 1 + 2
    assert lo["estimate"] == pytest.approx((obs + (3 * 0 + 3 * -1)) / 16, abs=1e-15)
    assert hi["estimate"] == pytest.approx((obs + 3) / 16, abs=1e-15)
    item_lo = np.mean([(2 - 3) / 10, 1 / 2, -1 / 2, 2 / 2])
    assert abs(lo["estimate"] - item_lo) > 0.05          # not the within-item-first mean
    assert lo["ci"][0] <= lo["estimate"] <= lo["ci"][1]


def crossed_twin(d, level=95.0):
    """Method-of-moments crossed intercepts by loops, Satterthwaite t from scipy."""
    import scipy.stats

    I, R = len(d), len(d[0])
    mu = sum(sum(row) for row in d) / (I * R)
    ri = [sum(row) / R for row in d]
    cr = [sum(d[i][r] for i in range(I)) / I for r in range(R)]
    ms_i = R * sum((x - mu) ** 2 for x in ri) / (I - 1)
    ms_r = I * sum((x - mu) ** 2 for x in cr) / (R - 1)
    ms_e = sum((d[i][r] - ri[i] - cr[r] + mu) ** 2 for i in range(I) for r in range(R)) / ((I - 1) * (R - 1))
    va, vb = max(0.0, (ms_i - ms_e) / R), max(0.0, (ms_r - ms_e) / I)
    V = va / I + vb / R + ms_e / (I * R)
    # Satterthwaite: V written in mean squares, each term's variance 2 (c MS)^2 / df
    terms = []
    if va > 0:
        terms.append(((ms_i - 0) / (I * R), I - 1))
    if vb > 0:
        terms.append((ms_r / (I * R), R - 1))
    terms.append(((1 - (va > 0) - (vb > 0)) * ms_e / (I * R), (I - 1) * (R - 1)))
    df = V ** 2 / sum(t ** 2 / f for t, f in terms)
    q = scipy.stats.t.ppf(0.5 + level / 200, df)
    return mu, V ** 0.5, df, [mu - q * V ** 0.5, mu + q * V ** 0.5], va, vb, ms_e


@pytest.mark.parametrize("seed, I, R, item_sd, rep_sd", [
    (0, 12, 3, 0.3, 0.2), (1, 30, 4, 0.0, 0.0), (2, 8, 2, 1.0, 0.0), (3, 5, 6, 0.0, 0.5)])
def test_crossed_intercepts_match_a_plain_anova(seed, I, R, item_sd, rep_sd):
    rng = np.random.default_rng(seed)
    d = (0.1 + item_sd * rng.normal(size=(I, 1)) + rep_sd * rng.normal(size=(1, R))
         + 0.4 * rng.normal(size=(I, R)))
    got = inf.crossed_intercepts(d)
    mu, se, df, ci, va, vb, ve = crossed_twin(d.tolist())
    assert got.estimate == pytest.approx(mu, abs=1e-14) and got.se == pytest.approx(se, rel=1e-12)
    assert got.df == pytest.approx(df, rel=1e-12)
    assert got.ci == pytest.approx(ci, rel=1e-9, abs=1e-12)
    assert (got.var_item, got.var_replicate, got.var_residual) == pytest.approx((va, vb, ve), rel=1e-12, abs=1e-15)
    assert (got.items, got.replicates) == (I, R)
    assert inf.crossed_intercepts(d[:1]) is None and inf.crossed_intercepts(d[:, :1]) is None
    assert inf.crossed_intercepts(np.zeros((3, 3))).ci is None      # no variance, no interval


def test_contrasts_carry_the_crossed_sensitivity_beside_the_bootstrap(fixed):
    s, _, doc = fixed
    g = doc["groups"][0]
    I, R = s.obs.shape[1:]
    for c in g["contrasts"]:
        A, Bz = s.arms.index(c["a"]), s.arms.index(c["b"])
        for h, hr in enumerate(c["horizons"]):
            rows = []
            for i in range(I):
                out = [(twin_outcome(s, A, i, r, h, c["readout"]), twin_outcome(s, Bz, i, r, h, c["readout"]))
                       for r in range(R)]
                if all(a[0] and b[0] for a, b in out):
                    rows.append([a[1] - b[1] for a, b in out])
            if len(rows) < 2:
                assert hr["crossed"] is None
                continue
            mu, se, df, ci, *_ = exact_crossed_twin(rows)     # binary differences: ties are exact
            assert hr["crossed"]["items"] == len(rows) and hr["crossed"]["df"] == df
            assert close(hr["crossed"]["estimate"], mu)
            if se > 0:
                assert hr["crossed"]["ci"] == pytest.approx(ci, rel=1e-9, abs=1e-12)
