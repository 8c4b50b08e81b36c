"""Sharding (SPEC §7): four forced host devices give the same replicates as one device."""

import os
import subprocess
import sys

import numpy as np
from otbench.analysis import simulate
from otbench.analysis.resampling._bootstrap import bootstrap

SCRIPT = """
import sys
import jax
import numpy as np
assert len(jax.devices()) == 4, jax.devices()
from otbench.analysis import simulate
from otbench.analysis.resampling._bootstrap import bootstrap
ms = simulate("tiny", seed=2)
# batch 6 is rounded up to 8, a multiple of the device count.
r = bootstrap(ms, replicates=10, seed=9, frontiers=True, grid=11, batch=6)
np.savez(sys.argv[1], cell=r.cell, macro=r.macro, reward=r.frontiers.reward,
         reward_one=r.frontiers.reward_one, fmacro=r.frontiers.macro)
"""


def test_four_devices_equal_one(tmp_path):
    out = tmp_path / "four.npz"
    env = dict(os.environ, JAX_PLATFORMS="cpu",
               XLA_FLAGS="--xla_force_host_platform_device_count=4")
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(out)], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    four = np.load(out)
    one = bootstrap(simulate("tiny", seed=2), replicates=10, seed=9, frontiers=True, grid=11,
                    batch=5)
    assert np.array_equal(four["cell"], one.cell, equal_nan=True)
    assert np.array_equal(four["macro"], one.macro, equal_nan=True)
    assert np.array_equal(four["reward"], one.frontiers.reward)
    assert np.array_equal(four["reward_one"], one.frontiers.reward_one)
    assert np.array_equal(four["fmacro"], one.frontiers.macro, equal_nan=True)
