"""Benchmark: all exact frontiers of a simulated set, JAX DP vs a plain NumPy DP, in one run.

    python benchmarks/frontier.py [--scale paper] [--seed 0] [--grid 1001]

Times `otbench.analysis.frontier._frontiers.frontiers` (every cell x DR, FB, DEE, on the
1,001-point grid) in this fresh process -- the first call includes JAX
start-up and compilation ("cold"), the second is "warm" -- and a plain NumPy
DP on the same data: the same pruned actions (built by the same `_units`
code, timed as part of it), a state of all `P * traj + 1` absolute reward
levels in int64, one vectorized shift-and-min per action
(`np.minimum(new[r:], f[:-r] + c, out=new[r:])`), then the same budget
queries. It prints both times, their ratio, process CPU time beside wall
time (the machine may be shared), the element-operation counts of both DPs,
and checks that every frontier value agrees exactly.

The cost model behind the numbers is in `analysis/_dp.py`.
"""

import argparse
import os
import resource
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import numpy as np  # noqa: E402
from otbench.analysis.frontier import (
    _dp,  # noqa: E402
    _units,
)
from otbench.analysis.frontier import _frontiers as _frontier
from otbench.analysis.measurement._simulate import simulate  # noqa: E402


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


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


def planned_ops(ms, strategies) -> int:
    """Element operations (add + min pairs, padding lanes included) of the JAX plans."""
    total = 0
    for c, rows in _frontier._cells_of(ms):
        d = _frontier._cell_data(ms, rows)
        for s in strategies:
            p = _dp.plan(_units.actions(s, d, d.point()))
            total += int((p.chunks[0].astype(np.int64) * p.tiles).sum()) * p.tile * p.cost.shape[-1]
    return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", default="paper", choices=["tiny", "small", "paper"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--grid", type=int, default=1001)
    ap.add_argument("--smoke", action="store_true", help="the smoke size the test suite runs: scale tiny, 101 budgets")
    args = ap.parse_args()
    if args.smoke:
        args.scale, args.grid = "tiny", 101
    strategies = _units.STRATEGIES

    ms = simulate(args.scale, seed=args.seed)
    s = ms.summary()
    print(f"SYNTHETIC: simulate({args.scale!r}, seed={args.seed}): {s['cells']} cells, "
          f"{s['trajectories']:,} trajectories, {float((ms.n + 1).mean()):.1f} positions each "
          f"(max {s['max_steps'] + 1}), probes {sorted(set(ms.probes.tolist()))}, "
          f"{os.cpu_count()} CPUs")

    times = []
    for label in ("cold (incl. start-up and compile)", "warm"):
        c0, t0 = cpu(), time.perf_counter()
        res = _frontier.frontiers(ms, strategies=strategies, grid=args.grid)
        times.append((time.perf_counter() - t0, cpu() - c0))
        print(f"JAX   {label:36s} wall {times[-1][0]:7.2f} s   cpu {times[-1][1]:7.2f} s")

    grid = res.grid
    c0, t0 = cpu(), time.perf_counter()
    ref, plain_ops = numpy_frontiers(ms, grid, strategies)
    t_np = (time.perf_counter() - t0, cpu() - c0)
    print(f"NumPy plain DP (same actions and queries)  wall {t_np[0]:7.2f} s   cpu {t_np[1]:7.2f} s")
    same = all(np.array_equal(ref[st], res.strategies[st].reward) for st in strategies)
    print(f"results identical: {'yes' if same else 'NO'}")
    print(f"ratio NumPy / JAX: cold {t_np[0] / times[0][0]:.1f}x, warm {t_np[0] / times[1][0]:.1f}x "
          f"(cpu time: cold {t_np[1] / times[0][1]:.1f}x, warm {t_np[1] / times[1][1]:.1f}x)")
    jo = planned_ops(ms, strategies)
    print(f"element operations: plain {plain_ops:.3g}, JAX plan {jo:.3g} ({plain_ops / jo:.1f}x fewer)")
    for st in strategies:
        f = res.strategies[st]
        bm = "none" if f.beta_match is None else f"{f.beta_match:.3f}"
        print(f"  {st.upper():3s} beta_match {bm}  ceiling {f.ceiling:.4f}  beta_sat {f.beta_sat:.3f}")
    if not same:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
