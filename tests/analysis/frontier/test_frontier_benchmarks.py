"""The frontier benchmarks at their smoke sizes: they run, and their exactness checks hold.

`benchmarks/gpu_frontier_bootstrap.py` is run as the accelerator machine would
run it: click, matplotlib, jaxtyping, numba and pandas cannot be imported
(that machine has JAX, numpy, pyarrow and orbax), so its path is the JAX one.
"""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

BLOCKED = ("click", "matplotlib", "jaxtyping", "numba", "pandas")
# Runs the script as __main__ with an import hook that refuses BLOCKED.
RUN_BLOCKED = (
    "import importlib.abc, runpy, sys\n"
    "class Block(importlib.abc.MetaPathFinder):\n"
    "    def find_spec(self, name, path=None, target=None):\n"
    f"        if name.split('.')[0] in {BLOCKED!r}:\n"
    "            raise ImportError(f'{name} is not installed here')\n"
    "sys.meta_path.insert(0, Block())\n"
    "script = sys.argv[1]; sys.argv = sys.argv[1:]\n"
    "runpy.run_path(script, run_name='__main__')\n"
)


def run(args, timeout=600):
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONUNBUFFERED": "1"}
    r = subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=timeout,
                       env=env, cwd=ROOT)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout.splitlines()


def test_frontier_benchmark_smoke():
    out = run([str(ROOT / "benchmarks" / "frontier.py"), "--smoke"])
    assert out[0].startswith("SYNTHETIC: simulate('tiny'")
    assert "results identical: plain DP vs library yes, command's JSON vs library yes" in out
    assert out[-1].startswith("frontier: plain NumPy DP / otbench frontier end to end ")
    assert out[-1].endswith("results identical: yes")


def test_gpu_bootstrap_benchmark_smoke_without_click_matplotlib_jaxtyping_numba():
    out = run(["-c", RUN_BLOCKED, str(ROOT / "benchmarks" / "gpu_frontier_bootstrap.py"),
               "--smoke", "--cpu-baseline"])
    text = "\n".join(out)
    assert out[0].startswith("device: ") and "(cpu)" in out[0]
    assert "frontier engine: jax" in text                  # numba blocked: the JAX path
    assert "frontier bootstrap on cpu: 48 replicates in " in text
    assert "CPU baseline: 16 replicates on " in text
    assert "first 16 replicates' frontiers identical on cpu and cpu: yes" in text
    assert out[-1].startswith("gpu_frontier_bootstrap: cpu ")
