"""Time OTBench (split + every built-in method) at paper scale against the frontier solve it needs.

Target: evaluating a method costs a small multiple of solving its oracle
frontier. Baseline, measured in the same run: `frontiers` of DR, FB and DEE
on the test split (1,001-point grid) -- the exact DP every evaluation reads
its reference from. Also timed: the online DEE walk (thinkbrake-onectx, 21 θ)
against a plain Python loop over trajectories and boundaries doing the same
decisions, after checking that both give the same stopping positions.

    python benchmarks/bench_otbench.py [--repeats 3] [--seed 0]
"""

import argparse
import time

import numpy as np
from otbench.analysis import simulate
from otbench.analysis.bench import assign_splits, evaluate
from otbench.analysis.bench._walk import dee_positions
from otbench.analysis.methods import ThinkBrakeOneContext, resolve, units_of
from otbench.analysis.frontier._frontiers import frontiers


def best_of(fn, repeats):
    times, out = [], None
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return min(times), out


def python_walk(margin, n, theta):
    out = []
    for t in range(len(n)):
        k = next((k for k in range(int(n[t])) if margin[t][k] <= theta), int(n[t]))
        out.append(k)
    return np.asarray(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--smoke", action="store_true", help="the smoke size the test suite runs: simulate('tiny'), one repeat, 101 budgets")
    a = ap.parse_args()
    scale, grid = ("tiny", 101) if a.smoke else ("paper", 1001)
    if a.smoke:
        a.repeats = 1
    ms = simulate(scale, a.seed)
    t_split, ms = best_of(lambda: assign_splits(ms), a.repeats)
    test = ms.take(np.flatnonzero(ms.split == 2))
    frontiers(test, grid=grid)                       # compile outside the timings
    t_front, _ = best_of(lambda: frontiers(test, grid=grid), a.repeats)
    print(f"SYNTHETIC {scale}-scale set (seed {a.seed}): {ms.num_trajectories} trajectories, "
          f"test split {test.num_trajectories}")
    print(f"assign_splits                         {t_split:8.3f} s")
    print(f"baseline: frontiers(test, 3 strategies) {t_front:8.3f} s")
    for name in ("thinkswitcher", "predictive-scheduling", "thinkbrake-onectx"):
        t, res = best_of(lambda: evaluate(ms, name), a.repeats)
        print(f"evaluate {name:24s}     {t:8.3f} s  ({len(res.points)} θ; "
              f"{t / t_front:5.1f} x the frontier solve)")
    m = ThinkBrakeOneContext()
    m.fit(ms.take(np.flatnonzero(ms.split == 0)), None)
    thetas = m.theta_grid(21)
    unit, units = units_of(test)
    rm = resolve(m)                                  # the Method the evaluator's walk takes
    t_walk, pos = best_of(lambda: [dee_positions(test, unit, units, rm, th) for th in thetas],
                          a.repeats)
    margin = [test.signals["margin"][t, :test.n[t] + 1].tolist() for t in range(test.num_trajectories)]
    t_py, ref = best_of(lambda: [python_walk(margin, test.n, th) for th in thetas], 1)
    assert all(np.array_equal(p, r) for p, r in zip(pos, ref)), "walker and loop disagree"
    print(f"DEE online walk, 21 θ                 {t_walk:8.3f} s")
    print(f"baseline: Python loop, 21 θ           {t_py:8.3f} s  (walk is {t_py / t_walk:5.1f} x faster)")


if __name__ == "__main__":
    main()
