"""Benchmark: `bootstrap --frontiers` at paper scale, against a baseline commit measured in the same run.

    python benchmarks/bootstrap_frontiers.py [--replicates 64] [--baseline-replicates 16]
        [--baseline-ref 1901c5b] [--batch B] [--seed 7]

Goal (issue 17): 10,000 replicates of the two-stage bootstrap with all 72
exact frontiers (24 cells x DR, FB, DEE, 101-point grid) of the simulated
paper-scale set (`simulate --scale paper --seed 7`) in <= 30 minutes on this
2-core CPU (>= 5.6 replicates/s), bit-identical to the code before the
speed work.

What runs: the set is simulated once here (SYNTHETIC data). Both the
baseline and the current code get one untimed warm-up call (a batch of 16
replicates: compilation, caches), then a timed
`bootstrap(ms, replicates=R, frontiers=True)` (set-up of layout and tables
included, simulation not). The baseline is the package as of
`--baseline-ref` (default: the commit before issue 17), exported with
`git archive` and run in a child process one after the other with the
current code, never at the same time, so both see the same machine. The
child also writes its replicates, and the script checks that the current
code's first replicates equal them bit for bit.

The machine's cores may be shared: the load average is printed at the start
and at the end; compare the ratio, not the absolute figures, across runs.
The last line is exactly

    bootstrap_frontiers: R replicates in S s, X replicates/s, 10000 in M min
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
BASELINE_REF = "1901c5b"
FIELDS = ("reward", "reward_one", "tokens", "probes", "endpoint")

try:
    import otbench  # noqa: F401
except ImportError:
    # A bare checkout: map the package layout of pyproject.toml onto the root.
    _pkg = types.ModuleType("otbench")
    _pkg.__path__ = [str(ROOT / "otbench"), str(ROOT)]
    sys.modules["otbench"] = _pkg

CHILD = rf"""
import json, sys, time, types
import numpy as np
root = sys.argv[1]
pkg = types.ModuleType("otbench"); pkg.__path__ = [root + "/otbench", root]; sys.modules["otbench"] = pkg
from otbench.analysis import simulate
from otbench.analysis.resampling._bootstrap import bootstrap
ms = simulate(sys.argv[6], seed=int(sys.argv[2]))
R, batch = int(sys.argv[3]), (None if sys.argv[4] == "none" else int(sys.argv[4]))
bootstrap(ms, replicates=16, frontiers=True)                      # warm-up: compile, caches
t0, c0 = time.perf_counter(), time.process_time()
f = bootstrap(ms, replicates=R, frontiers=True, batch=batch).frontiers
wall, cpu = time.perf_counter() - t0, time.process_time() - c0
np.savez(sys.argv[5], **{{k: getattr(f, k) for k in {FIELDS!r}}})
import otbench.analysis as a
print(json.dumps({{"wall": wall, "cpu": cpu, "code": a.__file__}}))
"""


def export(ref: str, into: Path) -> Path:
    """The package tree of commit `ref` (its otbench/ and analysis/ folders) under `into`."""
    tar = subprocess.run(["git", "-C", str(ROOT), "archive", ref, "otbench", "analysis"],
                         check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=tar, check=True)
    return into


def baseline(ref: str, seed: int, reps: int, batch: int | None, tmp: Path) -> tuple[float, float, dict]:
    """(wall s, CPU s of the process, replicates) of the timed baseline run."""
    src = export(ref, tmp)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.setdefault("JAX_PLATFORMS", "cpu")
    out = tmp / "baseline.npz"
    p = subprocess.run([sys.executable, "-P", "-c", CHILD, str(src), str(seed), str(reps),
                        "none" if batch is None else str(batch), str(out), "paper"],
                       check=True, capture_output=True, text=True, env=env, cwd=tmp)
    doc = json.loads(p.stdout.strip().splitlines()[-1])
    assert doc["code"].startswith(str(src)), doc            # the exported tree, not an install
    with np.load(out) as z:
        return doc["wall"], doc["cpu"], {k: z[k] for k in FIELDS}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replicates", type=int, default=64)
    ap.add_argument("--baseline-replicates", type=int, default=16, help="0: skip the baseline")
    ap.add_argument("--baseline-ref", default=BASELINE_REF)
    ap.add_argument("--batch", type=int, default=None, help="default: bootstrap's")
    ap.add_argument("--seed", type=int, default=7, help="simulator seed")
    ap.add_argument("--smoke", action="store_true", help="the smoke size the test suite runs: simulate('tiny'), 4 replicates, no baseline export")
    args = ap.parse_args()
    scale = "tiny" if args.smoke else "paper"
    if args.smoke:
        args.replicates, args.baseline_replicates = 4, 0

    import jax
    from otbench.analysis import simulate
    from otbench.analysis.resampling._bootstrap import bootstrap

    print(f"host: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at start; "
          f"jax {jax.__version__} on {jax.devices()[0].platform}")
    t0 = time.perf_counter()
    ms = simulate(scale, seed=args.seed)
    print(f"SYNTHETIC: simulate({scale!r}, seed={args.seed}): {ms.num_trajectories:,} trajectories "
          f"({time.perf_counter() - t0:.1f} s)")

    base = None
    if args.baseline_replicates > 0:
        with tempfile.TemporaryDirectory() as d:
            wall, cpu, ref = baseline(args.baseline_ref, args.seed, args.baseline_replicates,
                                      args.batch, Path(d))
        base = (args.baseline_replicates / wall, ref, cpu / args.baseline_replicates)
        print(f"baseline {args.baseline_ref}: {args.baseline_replicates} replicates in {wall:.1f} s, "
              f"{base[0]:.3f} replicates/s, {base[2]:.3f} CPU s per replicate")

    bootstrap(ms, replicates=min(16, args.replicates), frontiers=True)   # warm-up: compile, caches
    t0, c0 = time.perf_counter(), time.process_time()
    r = bootstrap(ms, replicates=args.replicates, frontiers=True, batch=args.batch)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    rate = args.replicates / wall
    per_cpu = cpu / args.replicates
    # CPU seconds (all threads) are less sensitive to other processes than wall time.
    print(f"current: {args.replicates} replicates in {wall:.1f} s, {per_cpu:.3f} CPU s per replicate "
          f"(10000 on {os.cpu_count()} idle cores, perfectly parallel: "
          f">= {10_000 * per_cpu / os.cpu_count() / 60:.1f} min)")
    if base is not None:
        k = min(args.replicates, args.baseline_replicates)
        same = all(np.array_equal(getattr(r.frontiers, f)[:k], base[1][f][:k]) for f in FIELDS)
        print(f"first {k} replicates bit-identical to the baseline: {same}")
        print(f"ratio current / baseline (replicates per second): {rate / base[0]:.1f}x; "
              f"CPU seconds per replicate: {base[2] / per_cpu:.1f}x fewer")
        if not same:
            sys.exit("bootstrap_frontiers: replicates differ from the baseline")
    print(f"load average {os.getloadavg()[0]:.2f} at the end (2 cores shared: absolute figures are noisy)")
    print(f"bootstrap_frontiers: {args.replicates} replicates in {wall:.1f} s, {rate:.2f} replicates/s, "
          f"10000 in {10_000 / rate / 60:.1f} min")


if __name__ == "__main__":
    main()
