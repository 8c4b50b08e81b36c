"""`otbench bench run|list|compare` (SPEC §6): output, JSON, exit codes, plug-ins from the cwd."""

import json
import os
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from otbench.analysis import load, save, simulate
from otbench.analysis.bench._splits import assign_splits
from otbench.analysis.methods import METHODS as BUILTIN_HELP
from otbench.cli._bench import bench_cmd

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def set_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("otb") / "small"
    save(assign_splits(simulate("small", 0, field_signals=True, peer_signals=True)), d)
    return d


def run(*args):
    return CliRunner().invoke(bench_cmd, [str(a) for a in args])


def test_list_matches_the_registry():
    from otbench.analysis.methods import METHODS, resolve

    r = run("list")
    assert r.exit_code == 0
    lines = r.output.splitlines()
    assert len(lines) == len(METHODS) + 1
    for name, line in zip(METHODS, lines):
        m = resolve(name)
        # the listing is the method's own one-line summary, strategy and online mode
        assert line == m.line() and line.startswith(name) and m.strategy.upper() in line
        assert m.summary and m.summary in line
    # the learned built-ins (those taking --features) are found from their classes
    assert [n for n in METHODS if resolve(n).accepts("features")] == ["thinkswitcher",
                                                                       "predictive-scheduling"]


def test_run_prints_and_writes_json(set_dir, tmp_path):
    out = tmp_path / "tb.json"
    r = run("run", set_dir, "--method", "thinkbrake-onectx", "--thetas", "0,4,8", "--json", out)
    assert r.exit_code == 0, r.output
    assert "SYNTHETIC DATA" in r.output and "method thinkbrake-onectx (DEE)" in r.output
    doc = json.loads(out.read_text())
    assert doc["schema"] == "otbench.bench/1" and [p["theta"] for p in doc["points"]] == [0, 4, 8]
    from otbench.analysis.bench._evaluate import evaluate

    want = evaluate(load(set_dir), "thinkbrake-onectx", thetas=[0.0, 4.0, 8.0]).to_json()
    assert doc.pop("content_hash") == json.loads((set_dir / "manifest.json").read_text())["content_hash"]
    assert doc == json.loads(json.dumps(want))


def test_run_with_theta_grid_and_features(set_dir):
    r = run("run", set_dir, "--method", "thinkswitcher", "--theta-grid", "4", "--features", "hashed")
    assert r.exit_code == 0, r.output
    assert r.output.count("\n") >= 4 + 3


def test_compare_one_table(set_dir, tmp_path):
    out = tmp_path / "cmp.json"
    r = run("compare", set_dir, "--theta-grid", "5", "--json", out)
    assert r.exit_code == 0, r.output
    for name in BUILTIN_HELP:
        assert name in r.output
    doc = json.loads(out.read_text())
    assert doc["schema"] == "otbench.bench-compare/1"
    assert [d["method"] for d in doc["results"]] == list(BUILTIN_HELP)


def test_compare_skips_builtins_whose_signals_the_set_lacks(tmp_path):
    d = tmp_path / "plain"
    save(assign_splits(simulate("tiny", 0)), d)
    r = run("compare", d, "--theta-grid", "3")
    assert r.exit_code == 0, r.output
    for name in ("dynasor-cot", "deer", "answer-consistency"):
        assert f"skipped {name}: the set records no signal" in r.output
    doc = json.loads((d / "results" / "leaderboard.json").read_text())
    assert {row["method"] for row in doc["rows"]} == {
        "thinkswitcher", "predictive-scheduling", "thinkbrake-onectx", "budget-forcing"}
    assert "net_ranked_by" in doc and all("net_realized_share" in row for row in doc["rows"])


def test_run_stops_file(set_dir, tmp_path):
    from otbench.analysis import load

    ms = load(set_dir)
    lines = ["model,group,question,trajectory,stop_token"]
    for t in range(ms.num_trajectories):
        lines.append(f"{ms.models[ms.cell_model[ms.cell[t]]]},{ms.groups[ms.question_group[ms.question[t]]]},"
                     f"{ms.question_id[ms.question[t]]},{int(ms.trajectory[t])},0")
    good = tmp_path / "stops.csv"
    good.write_text("\n".join(lines) + "\n")
    out = tmp_path / "stops.json"
    r = run("run", set_dir, "--stops", good, "--json", out)
    assert r.exit_code == 0, r.output
    doc = json.loads(out.read_text())
    # Stopping at token 0 is the latest position with L = 0: zero thinking, the A0 reference.
    assert doc["points"][0]["cost"] == 0.0
    assert doc["points"][0]["acc"] == doc["reference"]["a_zero"]
    assert doc["net"]["points"][0]["cost"] == 0.0
    bad = tmp_path / "bad.csv"
    bad.write_text("\n".join(lines[:2] + [lines[2].rsplit(",", 1)[0] + ",-3"] + lines[3:]) + "\n")
    r = run("run", set_dir, "--stops", bad)
    assert r.exit_code == 2
    assert "bad.csv, row 3: stop_token must be a non-negative integer" in r.output
    assert "Traceback" not in r.output
    dup = tmp_path / "dup.csv"
    dup.write_text("\n".join(lines + [lines[1]]) + "\n")
    r = run("run", set_dir, "--stops", dup)
    assert r.exit_code == 2 and f"row {len(lines) + 1}: a second stop" in r.output
    missing = tmp_path / "missing.csv"
    missing.write_text("\n".join(lines[:1]) + "\n")
    r = run("run", set_dir, "--stops", missing)
    assert r.exit_code == 2 and "no stop for" in r.output
    r = run("run", set_dir, "--stops", good, "--method", "deer")
    assert r.exit_code == 2
    # huge, superscript and oversized fields; a FIFO and /dev/zero: one line each, never a hang
    last = lines[2].rsplit(",", 1)[0]
    cases = {"huge.csv": (last + "," + "9" * 400, "row 3: stop_token must be a non-negative integer of at "
                          "most 18 digits, got '9999"),
             "sup.csv": (last + ",²", "row 3: stop_token must be a non-negative integer of at most 18 digits, "
                         "got '²'"),
             "wide.csv": (last + "," + "1" * 200_000, "not valid CSV (field larger than field limit")}
    for name, (row, msg) in cases.items():
        f = tmp_path / name
        f.write_text("\n".join(lines[:2] + [row] + lines[3:]) + "\n")
        r = run("run", set_dir, "--stops", f)
        assert r.exit_code == 2 and msg in r.output, (name, r.output[:300])
        assert len(r.output.strip().splitlines()) == 1 and len(r.output) < 400, name
    fifo = tmp_path / "fifo.csv"
    os.mkfifo(fifo)
    for special in (fifo, "/dev/zero"):
        r = run("run", set_dir, "--stops", special)
        assert r.exit_code == 2 and "not a regular file" in r.output, r.output


def test_plugin_from_the_working_directory(set_dir, monkeypatch, tmp_path):
    (tmp_path / "otb_cwd_plugin.py").write_text(
        (ROOT / "artifacts/otbench/patient_brake.py").read_text())
    monkeypatch.chdir(tmp_path)
    r = run("run", set_dir, "--method", "otb_cwd_plugin:PatientBrake", "--theta-grid", "3")
    assert r.exit_code == 0, r.output
    assert "method patient-brake (DEE)" in r.output


@pytest.mark.parametrize("body, why", [
    ("import sys\nsys.exit(0)\n", "SystemExit: 0"),
    ("raise RuntimeError('plug-in broke')\n", "RuntimeError: plug-in broke"),
])
@pytest.mark.parametrize("form", ["module", "file"])
def test_plugin_failing_at_import_is_one_line_exit_2(set_dir, monkeypatch, tmp_path, body, why, form):
    """A plug-in whose import calls `sys.exit(0)` (or fails) must not end the run with exit 0 and no
    result, nor with a traceback: one line naming the plug-in, exit 2."""
    name = f"otb_exit_plugin_{form}_{abs(hash(body)) % 10_000}"
    (tmp_path / f"{name}.py").write_text(body)
    monkeypatch.chdir(tmp_path)
    spec = f"{name}:M" if form == "module" else f"{tmp_path / (name + '.py')}:M"
    r = run("run", set_dir, "--method", spec)
    assert r.exit_code == 2, r.output
    assert why in r.output and "Traceback" not in r.output
    assert len(r.output.strip().splitlines()) == 1, r.output


@pytest.mark.parametrize("args, msg", [
    (["--method", "nope"], "Error: method must be a built-in name"),
    (["--method", "otb_missing_mod:X"], "Error: method 'otb_missing_mod:X': cannot import module"),
    (["--method", "thinkbrake-onectx", "--thetas", "1,1"], "Error: `--thetas` must not repeat a value"),
    (["--method", "thinkbrake-onectx", "--thetas", "a"], "expected comma-separated numbers"),
    (["--method", "thinkbrake-onectx", "--thetas", "1", "--theta-grid", "3"],
     "pass at most one of --thetas and --theta-grid"),
    (["--method", "thinkswitcher", "--features", "tfidf"], "Error: `--features` must be 'hashed'"),
    (["--method", "thinkbrake-onectx", "--features", "hashed"], "cannot construct it"),
])
def test_run_errors_exit_2(set_dir, args, msg):
    r = run("run", set_dir, *args)
    assert r.exit_code == 2 and msg in r.output, r.output


def test_unsplit_and_missing_sets_exit_2(tmp_path):
    save(simulate("tiny", 0), tmp_path / "raw")
    r = run("run", tmp_path / "raw", "--method", "thinkbrake-onectx")
    assert r.exit_code == 2 and "no split assignment" in r.output
    r = run("compare", tmp_path / "none")
    assert r.exit_code == 2 and "not a directory" in r.output


def test_stored_question_features_table_is_used(tmp_path):
    import pyarrow as pa

    ms = assign_splits(simulate("tiny", 0))
    rng = np.random.default_rng(0)
    table = pa.table({"group": [ms.groups[g] for g in ms.question_group.tolist()],
                      "question": list(ms.question_id),
                      "emb": [rng.standard_normal(3).tolist() for _ in range(ms.num_questions)]})
    save(ms, tmp_path / "s", extra_tables={"question_features": table})
    r = run("run", tmp_path / "s", "--method", "predictive-scheduling", "--features",
            "hashed+stored:emb", "--theta-grid", "3", "--json", tmp_path / "o.json")
    assert r.exit_code == 0, r.output
    cfg = json.loads((tmp_path / "o.json").read_text())["config"]["method_config"]["features"]
    assert cfg["parts"][1] == {"featurizer": "stored/1", "name": "emb"}


# -- the leaderboard: built-ins and plug-ins ranked together, three formats ----------------

def test_compare_ranks_builtins_and_plugins_together(set_dir, monkeypatch, tmp_path):
    """`--method` repeats; a plug-in loads from the working directory or from a file path."""
    import csv

    from otbench.analysis.bench import leaderboard_key

    (tmp_path / "otb_cwd_brake.py").write_text(
        (ROOT / "artifacts/otbench/patient_brake.py").read_text().replace(
            '"patient-brake"', '"cwd-brake"'))
    monkeypatch.chdir(tmp_path)
    board = tmp_path / "board"
    r = run("compare", set_dir, "--theta-grid", "5", "--method", "thinkbrake-onectx",
            "--method", ROOT / "artifacts/otbench/patient_brake.py:PatientBrake",
            "--method", "otb_cwd_brake:PatientBrake", "--method", "thinkswitcher",
            "--leaderboard", board)
    assert r.exit_code == 0, r.output
    doc = json.loads((board / "leaderboard.json").read_text())
    assert doc["schema"] == "otbench.leaderboard/1" and doc["content_hash"]
    rows = doc["rows"]
    # patient-brake and cwd-brake are one rule under two names: tied, they share rank 2.
    assert [(x["strategy"], x["rank"]) for x in rows] == [("DR", 1), ("DEE", 1), ("DEE", 2),
                                                          ("DEE", 2)]
    assert rows[2]["rank_lo"] == rows[3]["rank_lo"] and rows[2]["rank_hi"] == rows[3]["rank_hi"]
    # Each method's own result carries its leaderboard row, for the report.
    own = json.loads((set_dir / "results" / "bench-thinkbrake-onectx.json").read_text())["leaderboard"]
    mine = next(x for x in rows if x["method"] == "thinkbrake-onectx")
    assert {k: own[k] for k in ("rank", "rank_lo", "rank_hi", "gap_behind_best_lo")} == \
        {k: mine[k] for k in ("rank", "rank_lo", "rank_hi", "gap_behind_best_lo")}
    assert own["warnings"] == doc["warnings"] and own["intervals"]["seed"] == 20260721
    # The order is the one `leaderboard_key` gives to the per-method results.
    from otbench.analysis.bench import evaluate

    ms = load(set_dir)
    dee = [evaluate(ms, m, theta_grid=5) for m in
           ("thinkbrake-onectx", str(ROOT / "artifacts/otbench/patient_brake.py:PatientBrake"),
            "otb_cwd_brake:PatientBrake")]
    assert [x["method"] for x in rows[1:]] == [d.method for d in sorted(dee, key=leaderboard_key)]
    for x, d in zip(rows[1:], sorted(dee, key=leaderboard_key)):
        assert x["realized_share"] == d.summary["realized_share"]
        assert x["gap_area_full"] == d.summary["gap_area_full"]           # a fraction, as in JSON
    table = list(csv.reader((board / "leaderboard.csv").open()))
    assert all("(" in h for h in table[0] if h not in ("strategy", "rank", "method"))
    assert [t[2] for t in table[1:]] == [x["method"] for x in rows]
    md = (board / "leaderboard.md").read_text()
    assert "| DEE | 1 |" in md and "SYNTHETIC DATA" in md
    # Each method's result lands where `otbench report` finds it, with the set's hash.
    for name in ("thinkbrake-onectx", "patient-brake", "cwd-brake", "thinkswitcher"):
        res = json.loads((set_dir / "results" / f"bench-{name}.json").read_text())
        assert res["method"] == name and res["content_hash"] == doc["content_hash"]


def test_leaderboard_key_orders_gap_area_then_share():
    import dataclasses

    from otbench.analysis.bench import BenchResult, leaderboard, leaderboard_key

    def res(name, share, gap, strategy="dee"):
        return BenchResult(method=name, strategy=strategy, split="test", points=(),
                           summary={"realized_share": share, "gap_area_full": gap,
                                    "gap_area": gap, "points": 3, "curve_points": 2},
                           cells=(), reference={"a_zero": 0.1, "a_full": 0.5}, config={},
                           synthetic=False)

    rs = [res("c", 0.2, None), res("b", 0.5, 0.03), res("a", 0.6, 0.02), res("d", 0.9, 0.02),
          res("r", 0.1, 0.01, "dr")]
    # gap area first (a and d tie at 0.02: the higher share wins), no summary last
    assert [r.method for r in sorted(rs, key=leaderboard_key)] == ["r", "d", "a", "b", "c"]
    board = leaderboard(rs)
    assert [(x["strategy"], x["rank"], x["method"]) for x in board.rows] == [
        ("DR", 1, "r"), ("DEE", 1, "d"), ("DEE", 2, "a"), ("DEE", 3, "b"), ("DEE", 4, "c")]
    assert board.to_pandas()["method"].tolist() == ["r", "d", "a", "b", "c"]
    with pytest.raises(ValueError, match="different splits"):
        leaderboard([rs[0], dataclasses.replace(rs[1], split="validation")])


def test_small_split_warns_that_ranking_is_noise(tmp_path):
    save(assign_splits(simulate("tiny", 0)), tmp_path / "tiny")
    r = run("run", tmp_path / "tiny", "--method", "thinkbrake-onectx", "--theta-grid", "3")
    assert r.exit_code == 0, r.output
    assert "warning: the test split is too small to rank methods" in r.output
    assert (tmp_path / "tiny" / "results" / "bench-thinkbrake-onectx.json").is_file()
    r = run("compare", tmp_path / "tiny", "--theta-grid", "3")
    assert r.output.count("too small to rank") == 1
    assert "too small to rank" in (tmp_path / "tiny" / "results" / "leaderboard.md").read_text()
