"""Benchmark: the 10,000-replicate frontier bootstrap at paper scale on an accelerator (runs on CPU too).

    python benchmarks/gpu_frontier_bootstrap.py [--replicates 10000] [--batch N] [--workers N]
        [--budget 420] [--cpu-baseline [N]] [--smoke]

Goal (issues 4, 17, 41): 10,000 replicates of all 72 exact frontiers (24 cells
x DR, FB, DEE, 101-point grid) of the SYNTHETIC paper-scale set
(`simulate("paper")`), metrics included, in minutes on one H200. It simulates
the set, runs `otbench.analysis.resampling._bootstrap.bootstrap(...,
frontiers=True)` on the default device batch by batch, stops early when the
projected time exceeds `--budget` seconds (reporting the replicates done and
the projection for 10,000), and prints

* the device, JAX version and host; the frontier engine;
* wall time, the steady rate (replicates per second, first batch with its
  compilation left out) and the projected time for 10,000;
* per vmapped DP pass the logical memory traffic (`lanes` shifted windows
  read, the tile read and written: `(lanes + 2) * tile * itemsize` bytes per
  replicate and pass; part of it hits the L2 cache), for the whole run;
* with `--cpu-baseline [N]` (default N = 48): the same bootstrap of N
  replicates on the host CPU (`jax.devices("cpu")`, with whatever engine the
  CPU has: numba's kernels where installed, else JAX's), timed in this run,
  the ratio of the steady rates, and whether the first N replicates' frontiers
  are the same on both (they must be, bit for bit).

It needs only JAX (with the accelerator's plugin), numpy, pyarrow and orbax:
a bare checkout works without installing otbench (the package layout of
pyproject.toml is mapped onto the repository root, here and in spawned worker
processes, which run this file's top level first), and the annotation-only
shape types are stubbed where jaxtyping is missing. Nothing on the path
imports click or matplotlib. `--smoke` (or OTBENCH_BENCH_SMOKE=1) runs the
tiny set (48 replicates, batch 16, CPU baseline 16) for the test suite.
Record the printed lines with any result.
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

try:
    import jaxtyping  # noqa: F401
except ImportError:
    # Only annotations use them (analysis/core/_typing.py); `Int[Array, "n"]` must evaluate.
    class _Shape:
        def __class_getitem__(cls, item):
            return cls

    _jt = types.ModuleType("jaxtyping")
    for _name in ("Array", "Bool", "Float", "Float64", "Int", "Int32", "Int64", "UInt64"):
        setattr(_jt, _name, type(_name, (_Shape,), {}))
    sys.modules["jaxtyping"] = _jt


class _Stop(Exception):
    pass


def copy_bandwidth(jax, jnp, smoke: bool) -> float:
    """Measured device bandwidth: read + write of a 1 GiB int32 array (bytes/s)."""
    n = (1 << 30) // 4
    if smoke or jax.devices()[0].platform == "cpu":
        n //= 64                                          # keep a CPU run short
    x = jnp.ones(n, dtype=jnp.int32)
    f = jax.jit(lambda a: a + 1)
    jax.block_until_ready(f(x))
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        jax.block_until_ready(f(x))
        best = min(best, time.perf_counter() - t0)
    return 2 * 4 * n / best


def timed_bootstrap(bootstrap, ms, *, replicates, batch, workers, budget, devices=None):
    """Run the frontier bootstrap; (result or None when stopped, marks [(done, seconds)], wall)."""
    marks = []
    t_start = time.perf_counter()

    def progress(done: int) -> None:
        now = time.perf_counter() - t_start
        marks.append((done, now))
        print(f"  {done:6,d} replicates  {now:7.1f} s", flush=True)
        if len(marks) >= 3 and done < replicates:
            if now + (replicates - done) / steady_rate(marks) > budget:
                raise _Stop

    try:
        res = bootstrap(ms, replicates=replicates, frontiers=True, batch=batch, workers=workers,
                        progress=progress, devices=devices)
    except _Stop:
        res = None
    return res, marks, time.perf_counter() - t_start


def steady_rate(marks) -> float:
    """Replicates per second between the first mark (compilation included) and the
    second-to-last (the last only drains the pipeline); overall with fewer than three."""
    if len(marks) >= 3:
        (d0, s0), (d1, s1) = marks[0], marks[-2]
        return (d1 - d0) / max(s1 - s0, 1e-9)
    return marks[-1][0] / marks[-1][1] if marks else 0.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replicates", type=int, default=10_000)
    ap.add_argument("--batch", type=int, default=None, help="default: bootstrap's (1024 on GPU)")
    ap.add_argument("--workers", type=int, default=None, help="default: bootstrap's")
    ap.add_argument("--budget", type=float, default=420.0, help="stop when projected beyond (s)")
    ap.add_argument("--cpu-baseline", type=int, nargs="?", const=48, default=0, metavar="N",
                    help="also time N replicates on the host CPU (default N: 48)")
    ap.add_argument("--seed", type=int, default=0, help="simulator seed")
    ap.add_argument("--smoke", action="store_true", help="the tiny set (the test suite's size)")
    args = ap.parse_args()
    smoke = args.smoke or os.environ.get("OTBENCH_BENCH_SMOKE") == "1"
    scale = "tiny" if smoke else "paper"
    if smoke:
        args.replicates, args.batch = min(args.replicates, 48), args.batch or 16
        args.cpu_baseline = min(args.cpu_baseline, 16)

    import jax
    import jax.numpy as jnp
    from otbench.analysis.frontier import _pipeline as bf
    from otbench.analysis.measurement._simulate import simulate
    from otbench.analysis.resampling._bootstrap import bootstrap

    dev = jax.devices()[0]
    kind = getattr(dev, "device_kind", dev.platform)
    print(f"device: {len(jax.devices())} x {kind} ({dev.platform}); jax {jax.__version__}; "
          f"host {platform.machine()} {os.cpu_count()} CPUs; python {platform.python_version()}")
    t0 = time.perf_counter()
    ms = simulate(scale, seed=args.seed)
    print(f"SYNTHETIC: simulate({scale!r}, seed={args.seed}): {ms.num_trajectories:,} trajectories, "
          f"{ms.num_cells} cells ({time.perf_counter() - t0:.1f} s)")
    bw = copy_bandwidth(jax, jnp, smoke)
    print(f"measured copy bandwidth {bw / 1e9:,.0f} GB/s")
    print(f"frontier engine: {bf._engine('auto', jax.devices())}")

    # -- count the DP's vmapped passes and their logical bytes (JAX engine only) --------------
    stats = {"passes": 0, "bytes": 0.0}
    run = bf.Runner.run

    def counting_run(self, p, budget):
        passes = sum(int((p.tiles[s:e].astype(np.int64) * p.chunks[:, s:e].max(axis=0)).sum())
                     for s, e in p.blocks)
        stats["passes"] += passes
        stats["bytes"] += (passes * p.chunks.shape[0] * p.tile * np.dtype(p.dtype).itemsize
                           * (p.cost.shape[-1] + 2))
        return run(self, p, budget)

    bf.Runner.run = counting_run
    try:
        res, marks, wall = timed_bootstrap(bootstrap, ms, replicates=args.replicates,
                                           batch=args.batch, workers=args.workers,
                                           budget=args.budget)
    finally:
        bf.Runner.run = run
    done = marks[-1][0] if marks else 0
    rate = steady_rate(marks)
    print(f"frontier bootstrap on {kind}: {done:,} replicates in {wall:.1f} s wall"
          f"{' (stopped: projected beyond the budget)' if res is None else ''}")
    print(f"steady rate {rate:.2f} replicates/s -> projected {10_000 / max(rate, 1e-9) / 60:.1f} min "
          f"for 10,000 (first batch incl. compile: {marks[0][1] if marks else wall:.1f} s)")
    if stats["passes"]:
        print(f"DP: {stats['passes']:,} vmapped passes, {stats['bytes'] / 1e12:.2f} TB logical "
              f"traffic -> {stats['bytes'] / wall / 1e9:,.0f} GB/s over the run "
              f"({100 * stats['bytes'] / wall / bw:.0f}% of the measured copy bandwidth)")

    # -- the same bootstrap on the host CPU, timed in this run ---------------------------------
    if args.cpu_baseline > 0:
        cpus = jax.devices("cpu")
        print(f"CPU baseline: {args.cpu_baseline} replicates on {len(cpus)} x cpu "
              f"(engine {bf._engine('auto', cpus)}, {os.cpu_count()} cores)")
        cres, cmarks, cwall = timed_bootstrap(bootstrap, ms, replicates=args.cpu_baseline,
                                              batch=None, workers=None, budget=float("inf"),
                                              devices=cpus)
        crate = steady_rate(cmarks)
        print(f"CPU baseline: {args.cpu_baseline} replicates in {cwall:.1f} s wall, steady rate "
              f"{crate:.2f} replicates/s")
        if res is not None:
            n = args.cpu_baseline
            same = all(np.array_equal(getattr(res.frontiers, f)[:n], getattr(cres.frontiers, f))
                       for f in ("reward", "reward_one", "tokens"))
            print(f"first {n} replicates' frontiers identical on {kind} and cpu: "
                  f"{'yes' if same else 'NO'}")
            if not same:
                raise SystemExit(1)
        else:
            print("replicates not compared (the accelerator run stopped early)")
        print(f"gpu_frontier_bootstrap: {kind} {rate:.2f} replicates/s vs cpu {crate:.2f}: "
              f"{rate / max(crate, 1e-9):.1f}x; 10,000 replicates in "
              f"{10_000 / max(rate, 1e-9) / 60:.1f} min (wall {wall:.1f} s for {done:,})")


if __name__ == "__main__":
    main()
