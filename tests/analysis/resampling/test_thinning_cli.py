"""`otbench thinning` and `otbench sweep`: tables, JSON documents, CSV files, errors."""

import csv
import json

import pytest
from click.testing import CliRunner
from otbench.analysis import save, simulate
from otbench.analysis.resampling._thinning import thinning
from otbench.cli._thinning import sweep_cmd, thinning_cmd


@pytest.fixture(scope="module")
def saved_set(tmp_path_factory):
    ms = simulate("tiny", seed=0)
    path = tmp_path_factory.mktemp("sets") / "set"
    save(ms, path)
    return ms, path


def test_thinning_table_and_json(saved_set, tmp_path):
    ms, path = saved_set
    js = tmp_path / "t.json"
    r = CliRunner().invoke(thinning_cmd, [str(path), "--probes", "1,2,4", "--trajectories", "2,3",
                                          "--draws", "50", "--seed", "7", "--json", str(js)])
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert lines[0] == "SYNTHETIC DATA (simulated, not model outputs)"
    assert lines[1] == "Probe thinning (exact hypergeometric expectation, macro average)"
    assert [ln.split()[0] for ln in lines[3:6]] == ["1", "2", "4"]
    assert lines[6 + 1].startswith("Trajectory thinning (50 draws, seed 7, 2.5-97.5 percentile range")
    doc = json.loads(js.read_text())
    want = thinning(ms, probes=[1, 2, 4], trajectories=[2, 3], draws=50, seed=7)
    assert doc.pop("content_hash") == json.loads((path / "manifest.json").read_text())["content_hash"]
    assert doc == json.loads(json.dumps(want))
    assert doc["schema"] == "otbench.thinning/1" and doc["probes"]["4"]["retention"] == 1.0
    assert set(doc["trajectories"]["2"]) == {"or", "ad", "mean_or", "mean_ad"}


def test_thinning_skip_parts_and_errors(saved_set):
    _, path = saved_set
    r = CliRunner().invoke(thinning_cmd, [str(path), "--probes", "2", "--trajectories", ""])
    assert r.exit_code == 0 and "Trajectory thinning" not in r.stdout
    r = CliRunner().invoke(thinning_cmd, [str(path), "--probes", "9"])
    assert r.exit_code == 2
    assert r.stderr.strip() == ("Error: `--probes` must not exceed the smallest probe count P of the "
                                "set (4), got 9")
    r = CliRunner().invoke(thinning_cmd, [str(path), "--probes", "a,b"])
    assert r.exit_code == 2 and "expected comma-separated integers, got 'a,b'" in r.stderr


def test_sweep_writes_json_and_one_csv_per_table(saved_set, tmp_path):
    _, path = saved_set
    out = tmp_path / "sweep"
    r = CliRunner().invoke(sweep_cmd, [str(path), "--out", str(out), "--probes", "2,4",
                                       "--trajectories", "2", "--draws", "20", "--replicates", "6",
                                       "--grid", "11", "--batch", "3"])
    assert r.exit_code == 0, r.output
    doc = json.loads((out / "sweep.json").read_text())
    assert doc["schema"] == "otbench.sweep/1"
    assert doc["bootstrap"]["schema"] == "otbench.bootstrap/1"
    assert doc["thinning"]["schema"] == "otbench.thinning/1"
    assert len(doc["bootstrap"]["frontiers"]["grid"]) == 11          # --grid implies --frontiers
    names = {p.stem for p in out.glob("*.csv")}
    assert names == {"bootstrap_or", "bootstrap_ad", "bootstrap_full_acc", "bootstrap_tokens",
                     "bootstrap_endpoint_acc", "bootstrap_zero_step_acc", "bootstrap_pairwise_or",
                     "bootstrap_pairwise_ad", "bootstrap_frontiers", "bootstrap_frontier_summary",
                     "probe_thinning", "trajectory_thinning"}
    with open(out / "bootstrap_or.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert rows[-1]["model"] == "Avg." and rows[-1]["group"] == "Avg."
    assert float(rows[-1]["lo (fraction)"]) == doc["bootstrap"]["macro"]["or"][0]
    assert float(rows[-1]["estimate (fraction)"]) == doc["bootstrap"]["estimate"]["macro"]["or"]
    assert rows[0]["model"] != "Avg." and rows[-2]["estimate (fraction)"] != ""   # Avg. rows too
    with open(out / "bootstrap_tokens.csv", newline="") as f:
        assert "lo (tokens)" in next(csv.reader(f))
    with open(out / "bootstrap_frontiers.csv", newline="") as f:
        assert len(list(csv.DictReader(f))) == 3 * 11
    with open(out / "probe_thinning.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert {r["probes (count)"] for r in rows} == {"2", "4"}
    assert "probe_thinning\n" in r.stdout and "trajectory_thinning\n" in r.stdout  # tables printed
    assert f"wrote {out / 'sweep.json'} and 12 tables" in r.stdout


def test_sweep_refuses_a_user_folder_but_reuses_its_own(saved_set, tmp_path):
    """`--out` naming a folder that holds a user's files is refused before the bootstrap runs (no
    sweep file lands among them); a folder of otbench's own earlier sweep is written again."""
    _, path = saved_set
    args = ["--probes", "2", "--trajectories", "", "--replicates", "4", "--batch", "2"]
    user = tmp_path / "thesis"
    user.mkdir()
    (user / "chapter1.tex").write_text("my chapter\n")
    r = CliRunner().invoke(sweep_cmd, [str(path), "--out", str(user), *args])
    assert r.exit_code == 2, r.output
    assert r.stderr.strip() == (f"{user}: exists and holds files otbench did not write ('chapter1.tex'); "
                                "give --out a new or empty folder")
    assert sorted(p.name for p in user.iterdir()) == ["chapter1.tex"]
    assert (user / "chapter1.tex").read_text() == "my chapter\n"
    own = tmp_path / "own"
    for _ in range(2):
        r = CliRunner().invoke(sweep_cmd, [str(path), "--out", str(own), *args])
        assert r.exit_code == 0, r.output
    assert (own / "sweep.json").is_file()
