"""Running a benchmark script at its smoke size (`--smoke`), for the suite's benchmark tests.

The slow scripts' tests live in their own files (tests/test_benchmarks_*.py) so that the
suite's workers, which take a file at a time, run them side by side with the rest.
"""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"


def run_smoke(script: str, *args: str, timeout: float = 900, env: dict[str, str] | None = None) -> str:
    """The stdout of `benchmarks/SCRIPT --smoke ARGS` (the test fails on a non-zero exit or no output);
    `env` adds to (or overrides) the suite's environment."""
    env = {**os.environ, "JAX_PLATFORMS": "cpu", **(env or {})}
    r = subprocess.run([sys.executable, str(BENCH / script), "--smoke", *args], capture_output=True, text=True,
                       env=env, timeout=timeout, cwd=ROOT)
    assert r.returncode == 0, f"{script} --smoke exited {r.returncode}:\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}"
    lines = [x for x in r.stdout.splitlines() if x.strip()]
    assert lines, f"{script} --smoke printed nothing"
    return r.stdout
