"""Every script in benchmarks/ runs at its smoke size (`--smoke`), so a change that breaks one fails here.

A benchmark prints a ratio against a baseline measured in the same run and
asserts nothing about speed (the developers' guide); these tests only run
each one at the size its `--smoke` flag sets and check that it finished
and printed its result line. Scripts that start vLLM or the embedded
model are marked slow (they still run in CI); the two online-certification
scripts share one small probe run of the embedded model.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"

# script -> a fragment its output must hold (its result line, or the line its goal is read from)
LIGHT = {
    "bench_otbench.py": "walk is",
    "bench_simulate.py": "ratio simulate / validate-only",
    "bootstrap.py": "same replicates as the baseline (1e-12): yes",
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
    "probe_throughput.py": "probe_throughput: busy",
    "horizon_smollm2.py": "4. analysis at paper scale",
    "online_certify.py": "",
    "online_side_certify.py": "",
}
ELSEWHERE = {
    # run at their smoke size by their own tests
    "frontier.py": "tests/analysis/frontier/test_frontier_benchmarks.py",
    "gpu_frontier_bootstrap.py": "tests/analysis/frontier/test_frontier_benchmarks.py",
    "certify_calibration.py": "tests/probe/online/test_certify_calibration.py",
    "plan_calibration.py": "tests/probe/plan/test_plan_calibration_bench.py",
}


def _run(script: str, *args: str, timeout: float = 900) -> str:
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    r = subprocess.run([sys.executable, str(BENCH / script), "--smoke", *args], capture_output=True, text=True,
                       env=env, timeout=timeout, cwd=ROOT)
    assert r.returncode == 0, f"{script} --smoke exited {r.returncode}:\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}"
    lines = [x for x in r.stdout.splitlines() if x.strip()]
    assert lines, f"{script} --smoke printed nothing"
    return r.stdout


def test_every_benchmark_is_run_here_and_takes_a_smoke_size():
    scripts = sorted(p.name for p in BENCH.glob("*.py") if not p.name.startswith("_"))
    assert scripts == sorted({**LIGHT, **SLOW, **ELSEWHERE}), "add the new benchmark to LIGHT or SLOW"
    for test in ELSEWHERE.values():
        assert (ROOT / test).is_file(), test
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
@pytest.mark.parametrize("script", ["horizon_readout.py", "probe_scale.py", "probe_throughput.py",
                                    "horizon_smollm2.py"])
def test_engine_benchmark_runs_at_its_smoke_size(script, tmp_path):
    pytest.importorskip("torch")
    if script != "horizon_readout.py":
        pytest.importorskip("vllm")
    if script in ("probe_throughput.py", "horizon_smollm2.py"):
        from _models import embedded_smollm2
        embedded_smollm2()
    args = ("--work", str(tmp_path)) if script == "horizon_smollm2.py" else ()
    assert SLOW[script] in _run(script, *args)


@pytest.mark.slow
def test_report_render_runs_at_its_smoke_size(tmp_path):
    if not (shutil.which("chromium") or shutil.which("chromium-browser")):
        pytest.skip("report_render screenshots in Chromium: apt-get install -y chromium")
    _run("report_render.py", "--out", str(tmp_path / "render"))


SMALL_JOB = """
[model]
name = "smollm2-135m-instruct"
[engine]
kind = "vllm"
dtype = "float32"
max_model_len = 1024
block_size = 32
kv_cache_gib = 1
[data]
seed = 0
[[data.sources]]
embedded = "sums"
n = 8
[probe]
R = 1
P = 2
b = 32
thinking_limit = 96
answer_limit = 8
[grader]
kind = "minimal"
"""


@pytest.fixture(scope="module")
def embedded_set(tmp_path_factory):
    """A small probe run of the embedded model (token tables included), for the online scripts."""
    pytest.importorskip("vllm")
    from _models import embedded_smollm2
    embedded_smollm2()
    work = tmp_path_factory.mktemp("online-bench")
    (work / "job.toml").write_text(SMALL_JOB)
    otbench = Path(sys.executable).parent / "otbench"
    r = subprocess.run([str(otbench), "probe", "run", "--config", str(work / "job.toml"),
                        "--out", str(work / "set"), "--no-progress"], capture_output=True, text=True,
                       timeout=900, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    return work / "set"


@pytest.mark.slow
@pytest.mark.parametrize("script", ["online_certify.py", "online_side_certify.py"])
def test_online_benchmark_runs_at_its_smoke_size(script, embedded_set):
    out = _run(script, "--set", str(embedded_set))
    assert "certif" in out.lower()
