"""`otbench probe run --log wandb`: the run's counts, throughput and OR / AD reach a W&B
offline run, read back from its own log and compared with the set the probe wrote.

The tiny random Qwen3 model on the transformers engine (seconds, not an engine start).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_probe_resume import write_job

pytestmark = pytest.mark.slow


def test_probe_run_logged_to_wandb_offline(tmp_path, tiny_model, otbench_cache):
    pytest.importorskip("wandb", reason="wandb (test extra) logs the run")
    from _wandb_log import run_contents
    from otbench.analysis import load, metrics

    cfg = write_job(tmp_path / "job.toml", tiny_model, n=2, R=2)
    (tmp_path / "wandb").mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}
    env |= {"OTBENCH_CACHE": str(otbench_cache), "WANDB_MODE": "offline", "JAX_PLATFORMS": "cpu",
            "WANDB_DIR": str(tmp_path / "wandb"), "WANDB_SILENT": "true"}
    out = tmp_path / "set"
    r = subprocess.run([str(Path(sys.executable).parent / "otbench"), "probe", "run", "--config",
                        str(cfg), "--out", str(out), "--no-progress", "--log", "wandb",
                        "--log-args", "project=otb-probe,name=tiny"], env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    [log] = list((tmp_path / "wandb").glob("wandb/offline-run-*/run-*.wandb"))
    got = run_contents(log)
    manifest = json.loads((out / "manifest.json").read_text())
    run = json.loads((out / "run.json").read_text())
    assert got["name"] == "tiny" and got["config"]["command"] == "probe run"
    assert got["config"]["provenance"]["set"] == manifest["provenance"]
    assert got["config"]["args"]["content_hash"] == manifest["content_hash"]
    s = got["summary"]
    for k, v in manifest["counts"].items():
        if isinstance(v, (int, float)):
            assert s[f"counts/{k}"] == v, k
    assert s["run/think/generated"] == run["think"]["generated"]
    doc = metrics(load(out))
    assert s["metrics/macro/or"] == pytest.approx(doc["macro"]["or"], rel=1e-12)
    assert s["metrics/macro/ad"] == pytest.approx(doc["macro"]["ad"], rel=1e-12)
