"""Runs in the tracker, by the real libraries, offline: `bench compare --log wandb|trackio|mlflow`
(W&B offline mode, a local Trackio project, an MLflow file store), then `bootstrap` and `report`
logged to MLflow; every logged value is read back from the tracker's own store and compared
with the results files the command wrote.

Each command runs in its own process: the trackers read their folders from the environment
when they are imported.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from _bad_input import cli, refused
from otbench.tracking import parse_log_args

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def the_set(tmp_path_factory):
    d = tmp_path_factory.mktemp("tracked") / "set"
    r = cli("simulate", "--scale", "tiny", "--seed", "1", "--out", d)   # SYNTHETIC, split
    assert r.exit_code == 0, r.output
    return d


def _env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WANDB_", "MLFLOW_"))}
    (tmp / "wandb").mkdir(parents=True, exist_ok=True)
    env.update(JAX_PLATFORMS="cpu", WANDB_MODE="offline", WANDB_DIR=str(tmp / "wandb"),
               WANDB_SILENT="true", TRACKIO_DIR=str(tmp / "trackio"),
               MLFLOW_ALLOW_FILE_STORE="true", HF_HUB_OFFLINE="1")
    return env


def _otbench(env, *args) -> subprocess.CompletedProcess:
    r = subprocess.run([str(Path(sys.executable).parent / "otbench"), *map(str, args)], env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    assert "logged " in r.stderr, r.stderr[-2000:]
    return r


def _expected_board(the_set) -> tuple[dict[str, float], list[dict]]:
    rows = json.loads((the_set / "results" / "leaderboard.json").read_text())["rows"]
    want = {}
    for r in rows:
        for k, v in r.items():
            if k not in ("strategy", "method") and isinstance(v, (int, float)) \
                    and not isinstance(v, bool):
                want[f"leaderboard/{r['strategy']}/{r['method']}/{k}"] = float(v)
    return want, rows


def _manifest_provenance(the_set) -> dict:
    return json.loads((the_set / "manifest.json").read_text())["provenance"]


def test_bench_compare_to_wandb_offline(the_set, tmp_path):
    pytest.importorskip("wandb", reason="wandb (test extra) logs the run")
    from _wandb_log import run_contents

    env = _env(tmp_path)
    r = _otbench(env, "bench", "compare", the_set, "--theta-grid", "5", "--log", "wandb",
                 "--log-args", "project=otb-test,name=compare-1,tags=a;b")
    assert "wandb" not in r.stdout                # the tracker's chatter stays off stdout
    want, rows = _expected_board(the_set)
    [log] = list((tmp_path / "wandb").glob("wandb/offline-run-*/run-*.wandb"))
    got = run_contents(log)
    assert got["name"] == "compare-1" and got["project"] == "otb-test"
    assert {k: got["summary"][k] for k in want} == pytest.approx(want, rel=1e-12)
    assert got["config"]["command"] == "bench compare"
    assert got["config"]["args"]["theta_grid"] == 5 and got["config"]["args"]["synthetic"]
    assert got["config"]["provenance"]["set"] == _manifest_provenance(the_set)
    [table] = list(log.parent.glob("files/media/table/tables/leaderboard_*.table.json"))
    doc = json.loads(table.read_text())
    logged = [dict(zip(doc["columns"], row)) for row in doc["data"]]
    assert [(x["strategy"], x["method"], x["gap_area_full"]) for x in logged] == \
        [(x["strategy"], x["method"], x["gap_area_full"]) for x in rows]


def _trackio_read(env, project: str, run: str) -> dict:
    code = ("import json, sys; from trackio.sqlite_storage import SQLiteStorage as S; "
            f"print(json.dumps({{'runs': S.get_runs({project!r}), "
            f"'logs': S.get_logs({project!r}, {run!r}), "
            f"'config': S.get_run_config({project!r}, {run!r})}}, default=str))")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout.strip().splitlines()[-1])




def test_bench_compare_to_a_local_trackio_project(the_set, tmp_path):
    pytest.importorskip("trackio", reason="trackio (test extra) logs the run")
    env = _env(tmp_path)
    r = _otbench(env, "bench", "compare", the_set, "--theta-grid", "5", "--log", "trackio",
                 "--log-args", "project=otb-test,name=compare-1")
    assert "Trackio" not in r.stdout
    want, rows = _expected_board(the_set)
    got = _trackio_read(env, "otb-test", "compare-1")
    assert got["runs"] == ["compare-1"]
    [step] = got["logs"]
    assert {k: step[k] for k in want} == pytest.approx(want, rel=1e-12)
    table = step["tables/leaderboard"]["_value"]
    assert [(x["strategy"], x["method"], x["gap_area_full"]) for x in table] == \
        [(x["strategy"], x["method"], x["gap_area_full"]) for x in rows]
    assert got["config"]["command"] == "bench compare"
    assert got["config"]["provenance"]["set"] == _manifest_provenance(the_set)


def _mlflow_run(tmp_path, experiment: str, name: str):
    import mlflow

    client = mlflow.tracking.MlflowClient(tracking_uri=f"file:{tmp_path / 'mlruns'}")
    exp = client.get_experiment_by_name(experiment)
    [run] = client.search_runs([exp.experiment_id], filter_string=f"attributes.run_name = '{name}'")
    return client, run


def _mlflow_json(client, run, path: str, tmp_path) -> dict:
    local = client.download_artifacts(run.info.run_id, path, str(tmp_path))
    return json.loads(Path(local).read_text())


def test_bench_compare_bootstrap_and_report_to_an_mlflow_file_store(the_set, tmp_path,
                                                                    monkeypatch):
    pytest.importorskip("mlflow", reason="mlflow-skinny (test extra) logs the run")
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    env = _env(tmp_path)
    uri = f"tracking_uri=file:{tmp_path / 'mlruns'}"
    _otbench(env, "bench", "compare", the_set, "--theta-grid", "5", "--log", "mlflow",
             "--log-args", f"project=otb-test,name=compare-1,{uri}")
    want, rows = _expected_board(the_set)
    client, run = _mlflow_run(tmp_path, "otb-test", "compare-1")
    assert {k: run.data.metrics[k] for k in want} == pytest.approx(want, rel=1e-12)
    assert run.data.params["command"] == "bench compare" and run.data.params["args.theta_grid"] == "5"
    assert _mlflow_json(client, run, "provenance.json", tmp_path / "a")["set"] == \
        _manifest_provenance(the_set)
    board = _mlflow_json(client, run, "tables/leaderboard.json", tmp_path / "b")
    got = [dict(zip(board["columns"], r)) for r in board["data"]]
    assert [(x["strategy"], x["method"]) for x in got] == [(x["strategy"], x["method"]) for x in rows]

    _otbench(env, "bootstrap", the_set, "--replicates", "40", "--frontiers", "--grid", "11",
             "--log", "mlflow", "--log-args", f"project=otb-test,name=boot-1,{uri}")
    boot = json.loads((the_set / "results" / "bootstrap.json").read_text())
    _, run = _mlflow_run(tmp_path, "otb-test", "boot-1")
    lo, hi = boot["macro"]["or"]
    assert run.data.metrics["bootstrap/macro/or/lo"] == pytest.approx(lo, rel=1e-12)
    assert run.data.metrics["bootstrap/macro/ad/hi"] == pytest.approx(boot["macro"]["ad"][1],
                                                                      rel=1e-12)
    assert run.data.metrics["bootstrap/frontier/dee/beta_match/hi"] == \
        pytest.approx(boot["frontiers"]["dee"]["beta_match"][1], rel=1e-12)

    out = tmp_path / "report"
    _otbench(env, "report", the_set, "--out", out, "--grid", "101", "--format", "png",
             "--log", "mlflow", "--log-args", f"project=otb-test,name=report-1,{uri}")
    client, run = _mlflow_run(tmp_path, "otb-test", "report-1")
    metrics = json.loads((out / "data" / "metrics.json").read_text())
    frontier = json.loads((out / "data" / "frontier.json").read_text())
    assert run.data.metrics["metrics/macro/or"] == pytest.approx(metrics["macro"]["or"], rel=1e-12)
    assert run.data.metrics["metrics/macro/ad"] == pytest.approx(metrics["macro"]["ad"], rel=1e-12)
    for s, f in frontier["strategies"].items():
        assert run.data.metrics[f"frontier/{s}/beta_match"] == pytest.approx(f["beta_match"])
    figures = sorted(a.path for a in client.list_artifacts(run.info.run_id, "figures"))
    report = json.loads((out / "report.json").read_text())
    assert figures == sorted(f"figures/{Path(f['file']).name}" for f in report["figures"])
    tables = {Path(a.path).stem for a in client.list_artifacts(run.info.run_id, "tables")}
    assert {"or_ad", "beta_match", "table1_or", "table18_frontiers", "table19_otbench"} <= tables


def test_bad_log_arguments_are_one_line_errors(the_set):
    refused(cli("bench", "compare", the_set, "--log", "wandb", "--log-args", "project"),
            "Error: `--log-args` piece 'project' is not key=value")
    refused(cli("bench", "compare", the_set, "--log", "mlflow", "--log-args", "entity=x"),
            "Error: `--log-args` key 'entity' is not one mlflow takes")
    refused(cli("report", the_set, "--out", "r", "--log-args", "project=x"),
            "--log-args needs --log TRACKER")
    r = cli("bootstrap", the_set, "--log", "comet")
    assert r.exit_code == 2 and "Invalid value for '--log'" in r.output


def test_log_args_follow_lm_evals_parsing():
    # lm_eval/utils.py simple_parse_args_string / handle_arg_string: empty pieces dropped,
    # true/false -> bool, digits -> int, other numbers -> float, the rest text.
    assert parse_log_args("wandb", "project=p,,name=run-1,resume=true,id=0123,notes=1e-3") == \
        {"project": "p", "name": "run-1", "resume": True, "id": 123, "notes": 0.001}
    assert parse_log_args("mlflow", "tracking_uri=file:/x=y") == {"tracking_uri": "file:/x=y"}
    assert parse_log_args("trackio", None) == {} == parse_log_args("trackio", " ")
    from otbench.tracking import TrackingError
    with pytest.raises(TrackingError, match="gives 'name' twice"):
        parse_log_args("wandb", "name=a,name=b")


def test_bootstrap_and_report_to_wandb_offline(the_set, tmp_path):
    pytest.importorskip("wandb", reason="wandb (test extra) logs the run")
    from _wandb_log import run_contents

    _otbench(_env(tmp_path / "boot"), "bootstrap", the_set, "--replicates", "40", "--frontiers",
             "--grid", "11", "--log", "wandb", "--log-args", "project=otb-test,name=boot-1")
    boot = json.loads((the_set / "results" / "bootstrap.json").read_text())
    [log] = list((tmp_path / "boot" / "wandb").glob("wandb/offline-run-*/run-*.wandb"))
    got = run_contents(log)["summary"]
    for stat in ("or", "ad"):
        assert [got[f"bootstrap/macro/{stat}/lo"], got[f"bootstrap/macro/{stat}/hi"]] == \
            pytest.approx(boot["macro"][stat], rel=1e-12)
    assert got["bootstrap/frontier/fb/beta_match/lo"] == \
        pytest.approx(boot["frontiers"]["fb"]["beta_match"][0], rel=1e-12)

    out = tmp_path / "report"
    _otbench(_env(tmp_path / "rep"), "report", the_set, "--out", out, "--grid", "101",
             "--format", "png", "--log", "wandb", "--log-args", "project=otb-test,name=rep-1")
    [log] = list((tmp_path / "rep" / "wandb").glob("wandb/offline-run-*/run-*.wandb"))
    got = run_contents(log)
    metrics = json.loads((out / "data" / "metrics.json").read_text())
    frontier = json.loads((out / "data" / "frontier.json").read_text())
    assert got["summary"]["metrics/macro/or"] == pytest.approx(metrics["macro"]["or"], rel=1e-12)
    for s, f in frontier["strategies"].items():
        assert got["summary"][f"frontier/{s}/beta_match"] == pytest.approx(f["beta_match"])
    report = json.loads((out / "report.json").read_text())
    images = sorted(p.name.split("_")[0:2] == ["fig4", "frontiers"] for p in
                    log.parent.glob("files/media/images/figures/*.png"))
    assert len(images) == len(report["figures"]) and images.count(True) == 1
    tables = {p.name.rsplit("_", 2)[0] for p in
              log.parent.glob("files/media/table/tables/*.table.json")}
    assert tables == {"or_ad", "beta_match"} | {t["name"] for t in report["tables"]}
    assert {"table1_or", "table2_ad", "table18_frontiers"} <= tables
    [or_table] = list(log.parent.glob("files/media/table/tables/table1_or_*.table.json"))
    doc = json.loads(or_table.read_text())
    avg = {row[0]: row[-1] for row in doc["data"]}
    csv_lines = [ln for ln in (out / "tables" / "table1_or.csv").read_text().splitlines()
                 if not ln.startswith("#")][1:]
    assert avg == {ln.split(",")[0]: float(ln.split(",")[-1]) for ln in csv_lines}
