"""Cases a new user hit: results bound to their set, defaults that fit the set, sweep.json in
the report, inf thetas, spreadsheet-safe CSV. Each pinned by its message or its output."""

import json

import pytest
from _bad_input import cli, refused
from otbench.analysis import content_hash, load, save, simulate
from otbench.analysis.report import ReportInputError
from otbench.analysis.report._inputs import gather


@pytest.fixture(scope="module")
def sets(tmp_path_factory):
    d = tmp_path_factory.mktemp("sets")
    a, b = d / "A", d / "B"
    save(simulate("tiny", 0), a)                      # P = 4: the demo's probe count
    save(simulate("tiny", 1), b)
    return a, b


def test_thinning_defaults_follow_the_set(sets, tmp_path):
    a, _ = sets
    out = tmp_path / "t.json"
    r = cli("thinning", a, "--draws", "20", "--json", out)
    assert r.exit_code == 0, r.output
    doc = json.loads(out.read_text())
    ms = load(a)
    assert sorted(map(int, doc["probes"])) == [4] and int(ms.probes.min()) == 4
    assert sorted(map(int, doc["trajectories"])) == [2, 4]          # R = 4 in this set
    assert doc["content_hash"] == content_hash(ms)


def test_r_beyond_R_is_refused(sets):
    refused(cli("thinning", sets[0], "--probes", "", "--trajectories", "2,16"),
            "Error: `--trajectories` must not exceed the largest trajectory count R of a "
            "(model, question) (4), got 16")


def test_a_result_of_another_set_is_refused_and_a_stale_cached_one_skipped(sets, tmp_path):
    a, b = sets
    other = tmp_path / "thin-b.json"
    assert cli("thinning", b, "--draws", "20", "--json", other).exit_code == 0
    ms = load(a)
    with pytest.raises(ReportInputError, match=r"thin-b\.json: cannot be used for this set: it "
                                                r"was computed on another set \(content hash "):
        gather(ms, results_dir=None, grid=11, thinning=other)
    res = tmp_path / "results"
    res.mkdir()
    (res / "thinning.json").write_bytes(other.read_bytes())
    got = gather(ms, results_dir=res, grid=11)
    assert got.thinning is None
    assert any(n.startswith("thinning: thinning.json skipped (it was computed on another set")
               for n in got.notes)


def test_sweep_json_feeds_the_report(sets, tmp_path):
    a, _ = sets
    out = tmp_path / "sw"
    r = cli("sweep", a, "--out", out, "--replicates", "20", "--draws", "10")
    assert r.exit_code == 0, r.output
    got = gather(load(a), results_dir=None, grid=11, bootstrap=out / "sweep.json",
                 thinning=out / "sweep.json")
    sweep = json.loads((out / "sweep.json").read_text())
    assert got.bootstrap["schema"] == "otbench.bootstrap/1"
    assert got.thinning["probes"] == sweep["thinning"]["probes"]
    assert not any("content hash" in n for n in got.notes)


def test_inf_theta_is_no_cap_for_fb_methods(sets, tmp_path):
    a, _ = sets
    s = tmp_path / "S"
    assert cli("split", a, "--out", s).exit_code == 0
    out = tmp_path / "fb.json"
    r = cli("bench", "run", s, "--method", "predictive-scheduling", "--thetas", "1,inf",
            "--json", out)
    assert r.exit_code == 0, r.output
    doc = json.loads(out.read_text())
    assert doc["config"]["thetas"] == [1.0, None]          # inf has no JSON number: null
    assert doc["points"][-1]["theta"] is None and doc["points"][-1]["rel_cost"] == 1.0
    refused(cli("bench", "run", s, "--method", "thinkbrake-onectx", "--thetas", "0.5,inf"),
            "Error: `--thetas` must be finite, got [0.5, inf]")


def test_report_with_a_mean_an_ulp_outside_its_range(sets, tmp_path):
    import numpy as np
    from otbench.analysis.report import write_report

    a, _ = sets
    out = tmp_path / "t.json"
    assert cli("thinning", a, "--draws", "20", "--json", out).exit_code == 0
    doc = json.loads(out.read_text())
    top = doc["trajectories"]["4"]                          # r = R: every draw is the full pool
    top["mean_or"] = float(np.nextafter(top["or"][1], 1.0))
    out.write_text(json.dumps(doc))
    index = write_report(a, tmp_path / "rep", thinning=out, grid=11)
    assert index.is_file()


def test_memory_is_estimated_before_the_frontier_allocates(sets, monkeypatch):
    import otbench.analysis.frontier as frontier

    # A cell whose DP state is 1 TiB (the grid and the rest fit): refused before allocating.
    monkeypatch.setattr(frontier, "state_bytes", lambda ms: (1 << 40, "m/g"))
    refused(cli("frontier", sets[0]), "frontier: needs about ", "GiB for the frontier state of "
            "cell ", "GiB is available; use a set with fewer probes or trajectories per cell")
    refused(cli("bootstrap", sets[0], "--frontiers", "--replicates", "10", "--batch", "4"),
            "bootstrap --frontiers: needs about", "x 4 replicates in flight (--batch)",
            "or a smaller --batch")
