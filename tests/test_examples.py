"""The notebook-style examples run end to end (the API reference is checked by tests/test_docs.py)."""

import csv
import os
import re
import subprocess
import sys
from pathlib import Path

import otbench.analysis as oa
import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_walkthrough_example_runs(tmp_path):
    out = tmp_path / "walk"
    env = {**os.environ, "MPLBACKEND": "Agg"}
    r = subprocess.run([sys.executable, str(ROOT / "examples" / "walkthrough.py"), "--out", str(out),
                        "--scale", "tiny", "--replicates", "50", "--theta-grid", "3"],
                       capture_output=True, text=True, env=env, timeout=600, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "SYNTHETIC DATA" in r.stdout and re.search(r"macro OR: [\d.]+ \[[\d.]+, [\d.]+\]", r.stdout)
    for f in ("frontiers.png", "frontiers.csv", "bootstrap.csv", "bench-points.csv",
              "leaderboard.md", "leaderboard.csv"):
        assert (out / f).stat().st_size > 0, f
    header = next(csv.reader((out / "frontiers.csv").open()))
    assert "beta (fraction)" in header and "acc (fraction)" in header
    board = list(csv.DictReader((out / "leaderboard.csv").open()))
    assert {row["method"] for row in board} == {*oa.BUILTINS, "patient-brake"}
    assert all(0.0 <= float(row["gap_area_full (fraction)"]) <= 1.0 for row in board)


@pytest.mark.slow
def test_report_screenshots_in_a_real_browser(tmp_path):
    """The report as a reader sees it: headless Chromium renders it (skipped without a browser)."""
    import shutil

    if not any(shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome")):
        pytest.skip("no headless Chromium on this machine (Debian: apt-get install chromium)")
    out = tmp_path / "shots"
    r = subprocess.run([sys.executable, str(ROOT / "examples" / "report_screenshots.py"), "--out",
                        str(out)], capture_output=True, text=True, timeout=600, cwd=tmp_path,
                       env={**os.environ, "MPLBACKEND": "Agg"})
    assert r.returncode == 0, r.stderr[-2000:]
    assert "each also as PDF" in r.stdout
    for name in ("report-top.png", "report-full.png", "trajectories.png"):
        png = (out / name).read_bytes()
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000, name
