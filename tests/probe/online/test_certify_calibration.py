"""`benchmarks/certify_calibration.py` at its smoke size: the real certificate path on SYNTHETIC runs,
every shape and kind, and the last line exactly in its promised form."""

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_calibration_benchmark_smoke():
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "OTBENCH_BENCH_SMOKE": "1"}
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "certify_calibration.py")],
                       capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert lines[0].startswith("SYNTHETIC answers from one accuracy online and offline; 6 runs")
    body = lines[1:-1]
    assert [ln.split(":")[0] for ln in body] == [
        "demo shape, homogeneous", "demo shape, heterogeneous",
        "paper shape, homogeneous", "paper shape, heterogeneous"]
    # every smoke run is big enough to certify (the shapes sit at or above the evidence floor)
    assert all("of 6 certified-size runs" in ln and "; 0 not certified)" in ln for ln in body)
    m = re.fullmatch(r"certify_calibration: rejection rate (\d+\.\d)% homogeneous, (\d+\.\d)% heterogeneous "
                     r"\(nominal 5%\)", lines[-1])
    assert m and all(0.0 <= float(x) <= 100.0 for x in m.groups())
