"""`otbench frontier`: table, otbench.frontier/1 JSON, Pareto Parquet, errors; simulated and imported sets."""

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from otbench.analysis import save
from otbench.analysis.frontier._frontiers import frontiers
from otbench.cli import main
from test_frontier import build, random_trajs


@pytest.fixture(scope="module")
def saved_set(tmp_path_factory):
    ms = build(random_trajs(np.random.default_rng(8), models=2, groups=(3, 2)), synthetic=True)
    path = tmp_path_factory.mktemp("sets") / "set"
    save(ms, path)
    return ms, path


def test_table_json_and_parquet(saved_set, tmp_path):
    ms, path = saved_set
    js, pq_out = tmp_path / "out" / "f.json", tmp_path / "p.parquet"
    r = CliRunner().invoke(main, ["frontier", str(path), "--grid", "11", "--json", str(js),
                                  "--pareto", str(pq_out)])
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert lines[0] == "SYNTHETIC DATA (simulated, not model outputs)"
    assert lines[1].startswith("oracle frontiers: 4 cells, 11 budgets (beta 0..1), A_full = ")
    assert [ln.split()[0] for ln in lines[3:6]] == ["DR", "FB", "DEE"]
    assert lines[6] == "hierarchy DR <= FB <= DEE: holds in every cell at all 11 budgets and beta = 1"

    doc = json.loads(js.read_text())
    ref = frontiers(ms, grid=11, pareto=True)
    assert doc["schema"] == "otbench.frontier/1" and doc["synthetic"] is True
    assert doc["grid"] == [i / 10 for i in range(11)]
    assert doc["a_full"] == ref.a_full
    assert set(doc["strategies"]) == {"dr", "fb", "dee"}
    for s, d in doc["strategies"].items():
        f = ref.strategies[s]
        assert set(d) == {"macro", "beta_match", "ceiling", "beta_sat", "cells"}
        assert d["macro"] == f.macro.tolist() and d["ceiling"] == f.ceiling
        assert d["beta_match"] == f.beta_match and d["beta_sat"] == f.beta_sat
        for i, cell in enumerate(d["cells"]):
            assert set(cell) == {"model", "group", "total_tokens", "total_probes", "acc"}
            assert (cell["model"], cell["group"]) == (ref.cells[i].model, ref.cells[i].group)
            assert cell["total_probes"] == ref.cells[i].total_probes
            assert cell["acc"] == (f.reward[i] / ref.cells[i].total_probes).tolist()
            assert all(0.0 <= a <= 1.0 for a in cell["acc"])   # fractions, not %

    t = pq.read_table(pq_out)
    assert t.schema == pa.schema([("strategy", pa.string()), ("model", pa.string()),
                                  ("group", pa.string()), ("cost", pa.int64()), ("reward", pa.int64())])
    rows = t.to_pylist()
    for s, f in ref.strategies.items():
        for i, cell in enumerate(ref.cells):
            got = [(x["cost"], x["reward"]) for x in rows
                   if (x["strategy"], x["model"], x["group"]) == (s, cell.model, cell.group)]
            cost, reward = f.pareto[i]
            assert got == list(zip(cost.tolist(), reward.tolist()))
    assert not list(tmp_path.glob(".*tmp*")) and not list((tmp_path / "out").glob(".*tmp*"))


def test_strategy_subset_and_explicit_grid(saved_set):
    _, path = saved_set
    r = CliRunner().invoke(main, ["frontier", str(path), "--strategies", "dee", "--grid", "0,0.25,0.5,1"])
    assert r.exit_code == 0, r.output
    assert "4 budgets" in r.stdout and r.stdout.splitlines()[3].startswith("DEE")
    assert r.stdout.splitlines()[-2] == "hierarchy: needs at least two strategies"
    assert r.stdout.splitlines()[-1] == f"wrote {path / 'results' / 'frontier.json'}"


@pytest.mark.parametrize("args, msg", [
    (["--grid", "1"], "`grid` must be at least 2 points, got 1"),
    (["--grid", "0.5,x"], "expected a number of points or comma-separated budgets"),
    (["--grid", "0,2"], "`grid` values must lie in [0, 1]"),
    (["--strategies", "dr,zz"], "`strategies` must be among dr, fb, dee, got 'zz'"),
])
def test_bad_options_exit_2(saved_set, args, msg):
    _, path = saved_set
    r = CliRunner().invoke(main, ["frontier", str(path), *args])
    assert r.exit_code == 2
    assert msg in r.stderr


def test_bad_set_is_one_error_line(tmp_path, saved_set):
    _, path = saved_set
    r = CliRunner().invoke(main, ["frontier", str(tmp_path / "missing")])
    assert r.exit_code == 2
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and not err[0].startswith("Traceback") and "missing" in err[0]


def test_imported_jsonl_set(tmp_path):
    # The real-data path: JSONL -> `otbench import` -> `otbench frontier`, not synthetic.
    lines = [{"model": "m", "group": "g", "question": "q1", "trajectory": s, "probes": 2,
              "L": [0, 3 + s, 8], "C": [0, 2, 1], "y": 1} for s in range(2)]
    lines.append({"model": "m", "group": "g", "question": "q2", "trajectory": 0, "probes": 4,
                  "L": [0], "C": [3], "y": 0})
    src = tmp_path / "runs.jsonl"
    src.write_text("".join(json.dumps(x) + "\n" for x in lines))
    out = tmp_path / "set"
    assert CliRunner().invoke(main, ["import", str(src), "--out", str(out)]).exit_code == 0
    js = tmp_path / "f.json"
    r = CliRunner().invoke(main, ["frontier", str(out), "--grid", "3", "--json", str(js)])
    assert r.exit_code == 0, r.output
    assert not r.stdout.startswith("SYNTHETIC")
    doc = json.loads(js.read_text())
    assert doc["synthetic"] is False
    # By hand: T = 8 + 8 = 16, probes 2 + 2 + 4 = 8, endpoint C = 1 + 1 + 3 = 5.
    # DEE at beta = 0.5 (budget 8): both q1 trajectories stop at k = 1 (costs 3 + 4 = 7,
    # reward 2 + 2) plus q2's 3 -> 7 / 8.
    assert doc["strategies"]["dee"]["cells"][0]["acc"] == [3 / 8, 7 / 8, 7 / 8]
    assert doc["a_full"] == 5 / 8


def test_simulated_set(tmp_path):
    from otbench.analysis.measurement._simulate import simulate

    ms = simulate("tiny", seed=0)
    save(ms, tmp_path / "sim")
    js = tmp_path / "f.json"
    r = CliRunner().invoke(main, ["frontier", str(tmp_path / "sim"), "--grid", "101", "--json", str(js)])
    assert r.exit_code == 0, r.output
    assert r.stdout.startswith("SYNTHETIC DATA")
    doc = json.loads(js.read_text())
    assert doc["synthetic"] is True and len(doc["grid"]) == 101
    assert len(doc["strategies"]["dee"]["cells"]) == ms.summary()["cells"]
