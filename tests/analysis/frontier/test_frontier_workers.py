"""`frontiers` on forked workers, on threads and in-process: the same exact values.

The test process imports JAX elsewhere (which makes `_map` use threads), so the
forked path runs in a fresh interpreter here, as `otbench frontier` runs it.
"""

import json
import os
import subprocess
import sys

import pytest

SCRIPT = r"""
import json, sys
import numpy as np
from otbench.analysis.frontier import _frontiers as F
from otbench.analysis.measurement import simulate
assert "jax" not in sys.modules
ms = simulate("tiny", seed=int(sys.argv[1]))
out = {}
for mode in ("fork", "one", "threads"):
    if mode == "one":
        F._THREADS = 1
    if mode == "threads":
        F._THREADS = 8
        sys.modules["jax"] = None              # as if JAX were loaded: threads, not forks
    res = F.frontiers(ms)
    out[mode] = {s: f.reward.tolist() for s, f in res.strategies.items()}
print(json.dumps(out))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="workers fork on Linux only")
@pytest.mark.parametrize("seed", [0, 3])
def test_forked_threaded_and_serial_frontiers_agree(seed):
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    r = subprocess.run([sys.executable, "-c", SCRIPT, str(seed)], capture_output=True, text=True,
                       env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["fork"] == out["one"] == out["threads"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="workers fork on Linux only")
@pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning")   # JAX, loaded by other tests, warns
def test_a_killed_worker_falls_back_to_running_here(tmp_path):
    from otbench.analysis.frontier import _frontiers as F

    parent = os.getpid()
    marker = tmp_path / "forked"

    def task(x):
        if os.getpid() != parent:
            marker.write_text("a worker ran")
            os._exit(9)                        # a worker dies (as the OOM killer would)
        return x * x

    jax = sys.modules.pop("jax", None)         # let `_map` fork in this process
    try:
        assert F._map(task, [1, 2, 3, 4]) == [1, 4, 9, 16]
    finally:
        if jax is not None:
            sys.modules["jax"] = jax
    assert marker.exists()                     # the forked path ran, and was replaced
