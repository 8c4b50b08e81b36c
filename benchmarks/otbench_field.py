"""The field's termination methods on the paper-scale SYNTHETIC set, ranked gross and net (issue 27).

Runs every built-in (the three baselines of docs/rules.md; dynasor-cot and
deer on their own probes; dynasor-cot-stp and deer-stp, the same rules on
otbench's STP probe; budget-forcing, answer-consistency) through `evaluate`
at its default sweep on ``simulate("paper", seed, field_signals=True,
peer_signals=True)`` (otbench's and the methods' own probe signals drawn) with the default
split, prints the leaderboard (gross = thinking tokens only, the papers'
rule; net = plus each method's signal cost per decision), and times each
evaluation against the baseline measured in the same run: the exact oracle
frontiers of the test split that every evaluation reads. Last line:

    otbench_field: M methods ranked; best net realized share S% (METHOD), largest gross-to-net drop D pp (METHOD)

    python benchmarks/otbench_field.py [--seed 0]
"""

import argparse
import time

import numpy as np
from otbench.analysis import simulate
from otbench.analysis.bench import BUILTINS, assign_splits, evaluate, leaderboard
from otbench.analysis.frontier import frontiers


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--smoke", action="store_true", help="the smoke size the test suite runs: simulate('tiny'), 101 budgets")
    a = ap.parse_args()
    t = time.perf_counter()
    scale, grid = ("tiny", 101) if a.smoke else ("paper", 1001)
    ms = assign_splits(simulate(scale, a.seed, field_signals=True, peer_signals=True))
    t_sim = time.perf_counter() - t
    test = ms.take(np.flatnonzero(ms.split == 2))
    frontiers(test, grid=grid)                      # compile outside the timing
    t = time.perf_counter()
    frontiers(test, grid=grid)
    t_front = time.perf_counter() - t
    print(f"SYNTHETIC {scale}-scale set (seed {a.seed}, field and own-probe signals drawn): "
          f"{ms.num_trajectories} trajectories, test split {test.num_trajectories}; "
          f"simulate + split {t_sim:.1f} s")
    print(f"baseline: frontiers(test, 3 strategies)  {t_front:8.3f} s")
    results = []
    for name in BUILTINS:
        t = time.perf_counter()
        r = evaluate(ms, name)
        dt = time.perf_counter() - t
        results.append(r)
        print(f"evaluate {name:24s}  {dt:8.3f} s  ({len(r.points)} θ; {dt / t_front:5.1f} x the "
              f"frontier solve; declared signal: {r.net['signal_cost'].get('note', '')})")
    board = leaderboard(results)
    print(board.format(), end="")
    net = [(r.net["summary"]["realized_share"], r.method) for r in results
           if r.net["summary"]["realized_share"] is not None]
    drops = [(100 * (r.summary["realized_share"] - r.net["summary"]["realized_share"]), r.method)
             for r in results if r.summary["realized_share"] is not None
             and r.net["summary"]["realized_share"] is not None]
    best_share, best = max(net)
    drop, dropper = max(drops)
    print(f"otbench_field: {len(board.rows)} methods ranked; best net realized share "
          f"{100 * best_share:.1f}% ({best}), largest gross-to-net drop {drop:.1f} pp ({dropper})")


if __name__ == "__main__":
    main()
