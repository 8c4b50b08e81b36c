"""Every script in benchmarks/ runs at its smoke size (`--smoke`), so a change that breaks one fails here.

A benchmark prints a ratio against a baseline measured in the same run and
asserts nothing about speed (the developers' guide); these tests only run
each one at the size its `--smoke` flag sets and check that it finished
and printed its result line. Scripts that start vLLM or the embedded
model are marked slow (they still run in CI); the longest run in their own
files (`SEPARATE`), so the suite's workers run them beside the rest; the two
online-certification scripts share one small probe run of the embedded model.
"""

import shutil

import pytest
from _bench_smoke import BENCH, ROOT
from _bench_smoke import run_smoke as _run

# script -> a fragment its output must hold (its result line, or the line its goal is read from)
LIGHT = {
    "bench_otbench.py": "walk is",
    "bench_simulate.py": "ratio simulate / validate-only",
    "bootstrap.py": "same replicates as the baseline (1e-12): yes",
    "effort_map.py": "each within δ by its interval; ",
    "grading_extraction.py": "grading extraction: worst growth exponent",
    "horizon_nested.py": "speed-up",
    "metrics.py": "macro OR",
    "otbench_field.py": "otbench_field:",
    "plan_precision.py": "",
    "segmentation.py": "realized step length",
    "thinning.py": "ok",
}
SLOW = {
    "bootstrap_frontiers.py": "bootstrap_frontiers: 4 replicates",
    "horizon_readout.py": "speed-up",
    "report_render.py": "",
    "probe_scale.py": "probe_scale: peak RSS",
}
SEPARATE = {
    # script -> the test file that runs it at its smoke size, beside this one
    "probe_throughput.py": "tests/test_benchmarks_probe.py",
    "probe_batch.py": "tests/test_benchmarks_probe_batch.py",
    "horizon_smollm2.py": "tests/test_benchmarks_horizon.py",
    "online_certify.py": "tests/test_benchmarks_online.py",
    "online_side_certify.py": "tests/test_benchmarks_online.py",
}
ELSEWHERE = {
    # run at their smoke size by their own tests
    "frontier.py": "tests/analysis/frontier/test_frontier_benchmarks.py",
    "gpu_frontier_bootstrap.py": "tests/analysis/frontier/test_frontier_benchmarks.py",
    "certify_calibration.py": "tests/probe/online/test_certify_calibration.py",
    "plan_calibration.py": "tests/probe/plan/test_plan_calibration_bench.py",
}


def test_every_benchmark_is_run_here_and_takes_a_smoke_size():
    scripts = sorted(p.name for p in BENCH.glob("*.py") if not p.name.startswith("_"))
    assert scripts == sorted({**LIGHT, **SLOW, **SEPARATE, **ELSEWHERE}), "add the new benchmark to LIGHT or SLOW"
    for script, test in {**SEPARATE, **ELSEWHERE}.items():
        assert script in (ROOT / test).read_text(), (script, test)
    for name in scripts:
        assert '"--smoke"' in (BENCH / name).read_text(), f"{name} takes no --smoke"


@pytest.mark.parametrize("script", sorted(LIGHT))
def test_light_benchmark_runs_at_its_smoke_size(script):
    assert LIGHT[script] in _run(script)


@pytest.mark.slow
@pytest.mark.parametrize("script", ["bootstrap_frontiers.py"])
def test_frontier_bootstrap_benchmark_runs_at_its_smoke_size(script):
    assert SLOW[script] in _run(script)


@pytest.mark.slow
@pytest.mark.parametrize("script", ["horizon_readout.py", "probe_scale.py"])
def test_engine_benchmark_runs_at_its_smoke_size(script):
    pytest.importorskip("torch")
    if script != "horizon_readout.py":
        pytest.importorskip("vllm")
    assert SLOW[script] in _run(script)


@pytest.mark.slow
def test_report_render_runs_at_its_smoke_size(tmp_path):
    if not (shutil.which("chromium") or shutil.which("chromium-browser")):
        pytest.skip("report_render screenshots in Chromium: apt-get install -y chromium")
    _run("report_render.py", "--out", str(tmp_path / "render"))
