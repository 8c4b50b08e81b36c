"""Benchmark: all exact frontiers of a simulated set, `otbench frontier` end to end vs a plain NumPy DP.

    python benchmarks/frontier.py [--scale paper] [--seed 0] [--grid 1001] [--repeat 1] [--smoke]
    python benchmarks/frontier.py --plain-dp DIR [--grid 1001]

On the SYNTHETIC set `simulate(scale, seed)` (saved to a temporary folder),
every cell x DR, FB, DEE on the 1,001-point grid, three ways, in this one run:

* `otbench frontier DIR` as a user runs it: a fresh process (`--repeat`
  times), so its time includes the interpreter's start, the imports, loading
  and validating the set, the DP and writing the JSON;
* `otbench.analysis.frontier.frontiers(ms)` in this process (the library
  call alone: units, the NumPy DP of `_host_dp` on the cells' worker
  processes or threads, budget queries, summaries; its CPU time counts the
  workers');
* the plain NumPy DP: the same pruned actions (built by the same `_units`
  code, timed as part of it), a state of all `P * traj + 1` absolute reward
  levels in int64, one vectorized shift-and-min per action
  (`np.minimum(new[r:], f[:-r] + c, out=new[r:])`), then the same budget
  queries.

It prints the times, process CPU time beside wall time (the machine may be
shared; the command's CPU is its child-process time), the ratios of the
plain DP to the command (median over the repeats) and to the library call,
the element operations of both DPs, and checks that every frontier value
agrees exactly: the plain DP's rewards with the library's, and the command's
JSON with the library's document. `--smoke` (or OTBENCH_BENCH_SMOKE=1) runs
the tiny set once, for the test suite.

`--plain-dp DIR` is the plain DP as a command of its own, to time beside
`otbench frontier DIR` from outside (both load the set in DIR; it prints a
digest of every frontier value).
"""

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from otbench.analysis.frontier import _frontiers as _frontier
from otbench.analysis.frontier import _units
from otbench.analysis.measurement import content_hash, save, simulate


def cpu(who=resource.RUSAGE_SELF) -> float:
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime


def cpu_all() -> float:
    """This process's CPU time plus that of its finished children (`frontiers` may fork workers)."""
    return cpu() + cpu(resource.RUSAGE_CHILDREN)


def numpy_dp(acts: _units.Actions, levels: int) -> np.ndarray:
    """Plain DP: f[r] = least cost of total reward exactly r (absolute), all levels."""
    INF = np.iinfo(np.int64).max // 4
    f = np.full(levels, INF, dtype=np.int64)
    f[0] = 0
    new = np.empty_like(f)
    for u in range(acts.num_units):
        new.fill(INF)
        base = int(acts.base[u])
        for a in range(int(acts.offsets[u]), int(acts.offsets[u + 1])):
            r, c = base + int(acts.reward[a]), int(acts.cost[a])
            np.minimum(new[r:], f[:levels - r] + c, out=new[r:])
        f, new = new, f
    return f


def numpy_frontiers(ms, grid, strategies):
    """The same frontier values as `frontiers`, by the plain DP; int64[strategy][cell, grid]."""
    out = {s: [] for s in strategies}
    ops = 0
    for c, rows in _frontier._cells_of(ms):
        d = _frontier._cell_data(ms, rows)
        T = int(d.L[:, -1].sum())
        levels = int(d.probes.sum()) + 1
        B = _frontier.budgets(grid, np.asarray([T]))[0]
        for s in strategies:
            a = _units.actions(s, d, d.point())
            f = numpy_dp(a, levels)
            ops += int(a.count.sum()) * levels
            # Largest reward whose least cost is within the budget: a suffix
            # minimum makes the cost non-decreasing in the reward.
            g = np.minimum.accumulate(f[::-1])[::-1]
            out[s].append(np.searchsorted(g, B, side="right") - 1)
    return {s: np.asarray(v) for s, v in out.items()}, ops


def host_ops(ms, strategies) -> int:
    """Element operations (one add and one min each) of the NumPy DP `_host_dp` runs."""
    total = 0
    for c, rows in _frontier._cells_of(ms):
        d = _frontier._cell_data(ms, rows)
        for s in strategies:
            a = _units.actions(s, d, d.point())
            k = a.count - 1
            use = k > 0
            top, k = a.top[use], k[use]
            order = np.argsort(top / k, kind="stable")         # the kernel's Smith order
            total += int((k[order] * (np.cumsum(top[order]) + 1)).sum())
    return total


def command() -> list[str]:
    """`otbench` as installed beside this interpreter (the console script), else its entry point."""
    exe = shutil.which("otbench", path=str(Path(sys.executable).parent))
    return [exe] if exe else [sys.executable, "-c", "import sys; from otbench.cli import main; "
                                                    "sys.argv[0] = 'otbench'; main()"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", default="paper", choices=["tiny", "small", "paper"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--grid", type=int, default=1001)
    ap.add_argument("--repeat", type=int, default=1, help="runs of the command (median reported)")
    ap.add_argument("--smoke", action="store_true", help="the tiny set, once (the test suite's size)")
    ap.add_argument("--plain-dp", metavar="DIR", default=None,
                    help="only the plain DP on the set in DIR (a command to time from outside)")
    args = ap.parse_args()
    if args.plain_dp is not None:
        import hashlib

        from otbench.analysis.frontier import budget_grid
        from otbench.analysis.measurement import load

        ref, _ = numpy_frontiers(load(args.plain_dp), budget_grid(args.grid), _units.STRATEGIES)
        digest = hashlib.sha256(b"".join(ref[s].astype("<i8").tobytes() for s in _units.STRATEGIES))
        print(f"plain NumPy DP: frontier rewards sha256 {digest.hexdigest()}")
        return
    if args.smoke or os.environ.get("OTBENCH_BENCH_SMOKE") == "1":
        args.scale, args.repeat = "tiny", 1
    strategies = _units.STRATEGIES

    ms = simulate(args.scale, seed=args.seed)
    s = ms.summary()
    print(f"SYNTHETIC: simulate({args.scale!r}, seed={args.seed}): {s['cells']} cells, "
          f"{s['trajectories']:,} trajectories, {float((ms.n + 1).mean()):.1f} positions each "
          f"(max {s['max_steps'] + 1}), probes {sorted(set(ms.probes.tolist()))}, "
          f"{os.cpu_count()} CPUs")

    with tempfile.TemporaryDirectory(prefix="otbench-frontier-bench-") as tmp:
        folder = Path(tmp) / "set"
        save(ms, folder)
        env = {**os.environ, "JAX_PLATFORMS": os.environ.get("JAX_PLATFORMS", "cpu")}
        walls, cpus, doc = [], [], None
        for i in range(args.repeat):
            out = Path(tmp) / f"frontier-{i}.json"
            c0, t0 = cpu(resource.RUSAGE_CHILDREN), time.perf_counter()
            r = subprocess.run(command() + ["frontier", str(folder), "--grid", str(args.grid),
                                            "--json", str(out)],
                               env=env, capture_output=True, text=True)
            walls.append(time.perf_counter() - t0)
            cpus.append(cpu(resource.RUSAGE_CHILDREN) - c0)
            if r.returncode != 0:
                raise SystemExit(f"otbench frontier failed ({r.returncode}):\n{r.stdout}{r.stderr}")
            doc = json.loads(out.read_text())
            print(f"otbench frontier (end to end, run {i + 1})      wall {walls[-1]:7.2f} s   "
                  f"cpu {cpus[-1]:7.2f} s")

    c0, t0 = cpu_all(), time.perf_counter()
    res = _frontier.frontiers(ms, strategies=strategies, grid=args.grid)
    t_lib = (time.perf_counter() - t0, cpu_all() - c0)
    print(f"frontiers() in this process (library call)   wall {t_lib[0]:7.2f} s   cpu {t_lib[1]:7.2f} s")

    c0, t0 = cpu(), time.perf_counter()
    ref, plain_ops = numpy_frontiers(ms, res.grid, strategies)
    t_np = (time.perf_counter() - t0, cpu() - c0)
    print(f"NumPy plain DP (same actions and queries)    wall {t_np[0]:7.2f} s   cpu {t_np[1]:7.2f} s")

    same_lib = all(np.array_equal(ref[st], res.strategies[st].reward) for st in strategies)
    # The command's document is the library's plus the hash of the set it read.
    same_cli = doc.pop("content_hash", None) == content_hash(ms) and \
        doc == json.loads(json.dumps(res.to_json()))
    print(f"results identical: plain DP vs library {'yes' if same_lib else 'NO'}, "
          f"command's JSON vs library {'yes' if same_cli else 'NO'}")
    ho = host_ops(ms, strategies)
    print(f"element operations: plain {plain_ops:.3g}, NumPy DP {ho:.3g} ({plain_ops / ho:.1f}x fewer)")
    for st in strategies:
        f = res.strategies[st]
        bm, bs = ("none" if x is None else f"{x:.3f}" for x in (f.beta_match, f.beta_sat))
        print(f"  {st.upper():3s} beta_match {bm}  ceiling {f.ceiling:.4f}  beta_sat {bs}")
    wall, cpu_ = statistics.median(walls), statistics.median(cpus)
    print(f"frontier: plain NumPy DP / otbench frontier end to end {t_np[0] / wall:.1f}x wall "
          f"({t_np[1] / cpu_:.1f}x cpu; {t_np[0]:.1f} s vs {wall:.2f} s), / library call "
          f"{t_np[0] / t_lib[0]:.1f}x wall ({t_np[1] / t_lib[1]:.1f}x cpu); "
          f"results identical: {'yes' if same_lib and same_cli else 'NO'}")
    if not (same_lib and same_cli):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
