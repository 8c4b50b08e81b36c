"""Checkpoints (SPEC §7): a run killed with SIGKILL and resumed equals an uninterrupted run."""

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from otbench.analysis import simulate
from otbench.analysis.resampling._bootstrap import bootstrap
from otbench.analysis.resampling._checkpoint import CheckpointError

SETTINGS = dict(replicates=40, seed=9, frontiers=True, grid=11)

SCRIPT = """
import pathlib, sys, time
from otbench.analysis import simulate
from otbench.analysis.resampling._bootstrap import bootstrap
marker = pathlib.Path(sys.argv[2])

def progress(done):
    # Slow the run down so the test can kill it mid-way, after a checkpoint.
    if done >= 12:
        marker.write_text(str(done))
    time.sleep(0.3)

bootstrap(simulate("tiny", seed=2), replicates=40, seed=9, frontiers=True, grid=11, batch=4,
          checkpoint_dir=sys.argv[1], checkpoint_every=1, progress=progress)
"""


def assert_same(a, b):
    for name in ("cell", "model", "group", "macro"):
        assert np.array_equal(getattr(a, name), getattr(b, name), equal_nan=True), name
    for name in ("reward", "reward_one", "tokens", "probes", "endpoint", "macro", "beta_match"):
        assert np.array_equal(getattr(a.frontiers, name), getattr(b.frontiers, name),
                              equal_nan=True), name


def test_killed_run_resumes_to_identical_numbers(tmp_path):
    ckpt, marker = tmp_path / "ckpt", tmp_path / "marker"
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT, str(ckpt), str(marker)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while not marker.exists():
            assert proc.poll() is None, proc.stderr.read().decode()[-3000:]
            assert time.monotonic() < deadline, "the run never reached replicate 12"
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL
    seen = []
    resumed = bootstrap(simulate("tiny", seed=2), batch=8, checkpoint_dir=ckpt, resume=True,
                        progress=seen.append, **SETTINGS)
    assert 8 <= seen[0] < 40, seen          # it continued from a checkpoint, not from 0
    assert seen[-1] == 40
    fresh = bootstrap(simulate("tiny", seed=2), batch=5, **SETTINGS)
    assert_same(resumed, fresh)
    # Resuming a finished run recomputes nothing and gives the same numbers again.
    again = bootstrap(simulate("tiny", seed=2), checkpoint_dir=ckpt, resume=True, **SETTINGS)
    assert_same(again, fresh)


def test_checkpoint_directory_rules(tmp_path):
    ms = simulate("tiny", seed=0)
    bootstrap(ms, replicates=6, batch=2, checkpoint_dir=tmp_path, checkpoint_every=1)
    with pytest.raises(CheckpointError, match=r"already holds a checkpoint; pass resume=True"):
        bootstrap(ms, replicates=6, batch=2, checkpoint_dir=tmp_path)
    with pytest.raises(CheckpointError, match=r"was made with different settings \(replicates, seed\)"):
        bootstrap(ms, replicates=7, seed=1, checkpoint_dir=tmp_path, resume=True)
    with pytest.raises(CheckpointError, match=r"different settings \(content\)"):
        bootstrap(simulate("tiny", seed=1), replicates=6, checkpoint_dir=tmp_path, resume=True)
    # Resume with nothing to resume starts from scratch.
    r = bootstrap(ms, replicates=6, checkpoint_dir=tmp_path / "empty", resume=True)
    assert np.array_equal(r.cell, bootstrap(ms, replicates=6).cell, equal_nan=True)
