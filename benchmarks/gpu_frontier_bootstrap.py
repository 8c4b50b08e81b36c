"""Benchmark: the 10,000-replicate frontier bootstrap at paper scale on an accelerator (runs on CPU too).

    python benchmarks/gpu_frontier_bootstrap.py [--replicates 10000] [--batch 1024]
        [--workers N] [--budget 480] [--baseline 4]

Goal (issue 4; issue 17: <= 5 minutes): <= 10 minutes on one H200 for 10,000 replicates of all 72
exact frontiers (24 cells x DR, FB, DEE, 101-point grid) of the simulated
paper-scale set (`simulate("paper")`), metrics included. Self-contained: it
simulates the set, runs `otbench.analysis.resampling._bootstrap.bootstrap(...,
frontiers=True)` batch by batch and stops early when the projected time
exceeds `--budget` seconds (reporting the replicates done and the projection
for 10,000), then prints

* wall time, replicates per second and the projected time for 10,000;
* the host side (units, actions, plans) and the device DP separately: the
  last batch's plans are replayed on the device alone, synchronously;
* the DP's memory traffic: per vmapped pass the kernel reads `lanes` shifted
  windows and the tile being rewritten and writes it back, i.e.
  `(lanes + 2) * tile * itemsize` bytes per replicate and pass (logical bytes;
  part of it hits the L2 cache), divided by the replayed DP time, against the
  device peak (nominal HBM figure for known devices, and a measured
  device-to-device copy bandwidth);
* a baseline measured in the same run: the existing per-cell entry point
  `frontier_replicates` (unpipelined, one (cell, strategy) at a time, on one
  device) on `--baseline` replicates, and the ratio.

Record device, JAX version and the printed figures with any result.
"""

import argparse
import os
import platform
import sys
import time
import types
from pathlib import Path

import numpy as np

try:
    import otbench  # noqa: F401
except ImportError:
    # A bare checkout (the device machine has no editable install): map the
    # package layout of pyproject.toml (otbench.analysis = analysis/, ...)
    # onto the repository root, so the script runs from the working tree.
    _root = Path(__file__).resolve().parents[1]
    _pkg = types.ModuleType("otbench")
    _pkg.__path__ = [str(_root / "otbench"), str(_root)]
    sys.modules["otbench"] = _pkg

PEAK = {  # nominal DRAM bandwidth, bytes/s (vendor data sheets)
    "NVIDIA H200": 4.8e12, "NVIDIA H100 80GB HBM3": 3.35e12, "NVIDIA H100 PCIe": 2.0e12,
    "NVIDIA A100-SXM4-80GB": 2.04e12, "NVIDIA A100-SXM4-40GB": 1.56e12,
}


class _Stop(Exception):
    pass


def copy_bandwidth(jax, jnp) -> float:
    """Measured device bandwidth: read + write of a 1 GiB int32 array (bytes/s)."""
    n = (1 << 30) // 4
    if jax.devices()[0].platform == "cpu":
        n //= 8                                           # keep the CPU run short
    x = jnp.ones(n, dtype=jnp.int32)
    f = jax.jit(lambda a: a + 1)
    jax.block_until_ready(f(x))
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        jax.block_until_ready(f(x))
        best = min(best, time.perf_counter() - t0)
    return 2 * 4 * n / best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replicates", type=int, default=10_000)
    ap.add_argument("--batch", type=int, default=None, help="default: bootstrap's (1024 on GPU)")
    ap.add_argument("--workers", type=int, default=None, help="default: bootstrap's")
    ap.add_argument("--budget", type=float, default=480.0, help="stop when projected beyond (s)")
    ap.add_argument("--baseline", type=int, default=4, help="replicates for the baseline")
    ap.add_argument("--seed", type=int, default=0, help="simulator seed")
    ap.add_argument("--smoke", action="store_true", help="the smoke size the test suite runs: simulate('tiny'), 8 replicates, a 1-replicate baseline")
    args = ap.parse_args()
    scale = "tiny" if args.smoke else "paper"
    if args.smoke:
        args.replicates, args.baseline = 8, 1

    import jax
    import jax.numpy as jnp
    from otbench.analysis.frontier import _pipeline as bf
    from otbench.analysis.frontier._replicates import frontier_replicates
    from otbench.analysis.frontier._units import STRATEGIES
    from otbench.analysis.measurement._simulate import simulate
    from otbench.analysis.resampling._bootstrap import bootstrap

    dev = jax.devices()[0]
    kind = getattr(dev, "device_kind", dev.platform)
    print(f"device: {len(jax.devices())} x {kind} ({dev.platform}); jax {jax.__version__}; "
          f"host {platform.machine()} {os.cpu_count()} CPUs")
    t0 = time.perf_counter()
    ms = simulate(scale, seed=args.seed)
    print(f"SYNTHETIC: simulate({scale!r}, seed={args.seed}): {ms.num_trajectories:,} trajectories "
          f"({time.perf_counter() - t0:.1f} s)")
    bw = copy_bandwidth(jax, jnp)
    peak = PEAK.get(kind)
    print(f"measured copy bandwidth {bw / 1e9:,.0f} GB/s; nominal peak "
          f"{'unknown' if peak is None else f'{peak / 1e9:,.0f} GB/s'}")

    # -- instrument the DP runner: passes, logical bytes, the last batch's plans --------------
    stats = {"passes": 0, "bytes": 0.0, "jobs": []}
    run = bf.Runner.run
    per_batch = len(STRATEGIES) * len(np.unique(ms.cell))     # DP jobs per batch

    def counting_run(self, p, budget):
        B = p.chunks.shape[0]
        if len(stats["jobs"]) == per_batch:
            stats["jobs"] = []                            # keep only the latest batch
        passes = 0
        for s, e in p.blocks:
            passes += int((p.tiles[s:e].astype(np.int64) * p.chunks[:, s:e].max(axis=0)).sum())
        stats["passes"] += passes
        stats["bytes"] += passes * B * p.tile * np.dtype(p.dtype).itemsize * (p.cost.shape[-1] + 2)
        stats["jobs"].append((p, budget, passes))
        return run(self, p, budget)

    bf.Runner.run = counting_run
    # On a CPU-only host with numba the bootstrap uses the CPU kernels (`_cpu`), not the
    # JAX runner instrumented here; the device sections below then have nothing to replay.
    print(f"frontier engine: {bf._engine('auto', jax.devices())}")

    # -- the run ------------------------------------------------------------------------------
    t_start = time.perf_counter()
    marks = []

    def steady_rate() -> float:
        # Batches finish pipelined: the first mark includes compilation and the
        # last one only drains the pipeline, so the steady rate is measured
        # between the first and the second-to-last marks when there are three.
        if len(marks) >= 3:
            (d0, s0), (d1, s1) = marks[0], marks[-2]
            return (d1 - d0) / max(s1 - s0, 1e-9)
        return marks[-1][0] / marks[-1][1]                 # too few batches: overall, compile included

    def progress(done: int) -> None:
        now = time.perf_counter() - t_start
        marks.append((done, now))
        print(f"  {done:6,d} replicates  {now:7.1f} s", flush=True)
        if len(marks) >= 3 and done < args.replicates:
            if now + (args.replicates - done) / steady_rate() > args.budget:
                raise _Stop

    stopped = False
    try:
        bootstrap(ms, replicates=args.replicates, frontiers=True, batch=args.batch,
                  workers=args.workers, progress=progress)
    except _Stop:
        stopped = True
    wall = time.perf_counter() - t_start
    done = marks[-1][0] if marks else 0
    rate = steady_rate() if marks else 0.0
    print(f"frontier bootstrap: {done:,} replicates in {wall:.1f} s"
          f"{' (stopped: projected beyond the budget)' if stopped else ''}")
    print(f"steady rate {rate:.2f} replicates/s -> projected {10_000 / rate / 60:.1f} min "
          f"for 10,000 (first batch incl. compile: {marks[0][1] if marks else wall:.1f} s)")

    # -- device-only replay of the last batch ---------------------------------------------------
    jobs = stats["jobs"]
    runner = bf.Runner()
    if jobs:
        B = jobs[0][0].chunks.shape[0]
        jax.block_until_ready([run(runner, p, b) for p, b, _ in jobs])     # warm
        t0 = time.perf_counter()
        jax.block_until_ready([run(runner, p, b) for p, b, _ in jobs])
        t_dp = time.perf_counter() - t0
        passes = sum(x for _, _, x in jobs)
        logical = sum(x * p.chunks.shape[0] * p.tile * np.dtype(p.dtype).itemsize * (p.cost.shape[-1] + 2)
                      for p, _, x in jobs)
        print(f"device DP only, one batch of {B} replicates x {len(jobs)} frontiers: {t_dp:.2f} s "
              f"({B / t_dp:.1f} replicates/s; {10_000 / B * t_dp / 60:.1f} min for 10,000), "
              f"{passes:,} vmapped passes ({1e6 * t_dp / max(passes, 1):.1f} us each)")
        eff = logical / t_dp
        print(f"DP logical memory traffic {logical / 1e9:,.1f} GB per batch -> {eff / 1e9:,.0f} GB/s "
              f"= {100 * eff / bw:.0f}% of measured copy bandwidth"
              + ("" if peak is None else f", {100 * eff / peak:.0f}% of nominal peak"))
    print(f"whole run: {stats['passes']:,} passes, {stats['bytes'] / 1e12:.2f} TB logical traffic")
    bf.Runner.run = run

    # -- baseline: the per-cell entry point, sequential ---------------------------------------
    if args.baseline > 0:
        from otbench.analysis import build_layout
        from otbench.analysis.resampling._draws import (
            fixed_point,
            replicate_kernel,
            resampling,
        )

        layout, names = build_layout(ms)
        res = resampling(ms, layout, names)
        mesh = jax.sharding.Mesh(np.asarray(jax.devices()[:1]), ("rep",))
        sh = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("rep"))
        rep = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
        table, _ = fixed_point(np.zeros((5, ms.num_trajectories)), res, np.asarray(layout.seg))
        rows = np.asarray(replicate_kernel(res, sh, rep, rows=True)(
            jnp.arange(args.baseline, dtype=jnp.uint64), jnp.uint64(20260721), res.tables,
            jnp.asarray(table)).rows)
        for label in ("cold", "warm"):
            t0 = time.perf_counter()
            for s in STRATEGIES:
                for c in range(res.num_cells):
                    f, n = res.group_slots[res.cell_group[c]]
                    frontier_replicates(ms, int(names.cell_index[c]), s,
                                        draws=rows[:, res.cell_model[c], f:f + n], grid=101)
            tb = time.perf_counter() - t0
            print(f"baseline frontier_replicates ({label}), {args.baseline} replicates: {tb:.1f} s "
                  f"({args.baseline / tb:.2f} replicates/s)")
        print(f"ratio pipelined bootstrap / baseline (replicates per second): "
              f"{rate / (args.baseline / tb):.1f}x")


if __name__ == "__main__":
    main()
