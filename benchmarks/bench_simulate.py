"""Time `simulate("paper")` (target: < 60 s, aim < 15 s) against validating the same set alone.

Baseline, measured in the same run: rebuilding the finished set through
`from_dense` (the validation every reader pays), so the ratio says how much
the generator adds on top of validation.

    python benchmarks/bench_simulate.py [--scale paper] [--repeats 3]
"""

import argparse
import time

import numpy as np
from otbench.analysis import content_hash, from_dense
from otbench.analysis.measurement._simulate import simulate


def rebuild(ms):
    return from_dense(
        models=ms.models, groups=ms.groups, cell_model=ms.cell_model, cell_group=ms.cell_group,
        question_group=ms.question_group, question_id=ms.question_id, L=ms.L, C=ms.C, n=ms.n,
        probes=ms.probes, y=ms.y, cell=ms.cell, question=ms.question, trajectory=ms.trajectory,
        finished=ms.finished, question_dataset=ms.question_dataset,
        question_text=ms.question_text, signals=ms.signals, synthetic=ms.synthetic,
        provenance=ms.provenance)


def best_of(fn, repeats):
    times, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scale", default="paper", choices=("tiny", "small", "paper"))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--smoke", action="store_true", help="the smoke size the test suite runs: scale tiny, one repeat")
    args = ap.parse_args()
    if args.smoke:
        args.scale, args.repeats = "tiny", 1
    t_sim, ms = best_of(lambda: simulate(args.scale, 0), args.repeats)
    t_val, again = best_of(lambda: rebuild(ms), args.repeats)
    assert content_hash(again) == content_hash(ms)
    print(f"scale {args.scale}: {ms.num_trajectories} trajectories, "
          f"{int(np.sum(ms.n + 1))} positions, K = {ms.num_positions}")
    print(f"simulate (generate + validate): {t_sim:.2f} s (best of {args.repeats})")
    print(f"baseline from_dense rebuild (validate only): {t_val:.2f} s")
    print(f"ratio simulate / validate-only: {t_sim / t_val:.2f}")


if __name__ == "__main__":
    main()
