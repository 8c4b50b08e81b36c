"""Benchmark: precision planning from small pilots against the full bootstrap at the planned design (issue 26).

    python benchmarks/plan_precision.py [--pilots 5] [--replicates 150] [--full-replicates 200]
        [--seed 0] [--strategy dee] [--grid 1001]

The SYNTHETIC paper-scale set (`simulate("paper", seed)`: 6 models x 963 questions x R = 16
trajectories x P = 16 probes) is the "full run". Its bootstrap interval widths (the project's
two-stage bootstrap with every frontier re-solved, `--full-replicates` replicates, seed 20260721)
are the actual widths at R = 16, P = 16, all questions.

Each of K pilots is a subsample of that set, drawn from its own seed: 20 % of every group's
questions (shared by every model, as a pilot run would), 2 of each (model, question)'s 16
trajectories, and 4 of each cut's 16 probes (exact hypergeometric thinning of the stored counts:
what a P = 4 run of the same trajectories would have measured). `predict_precision` (with
frontiers, `--replicates` paired replicates per probe level) then predicts the widths at every
group's full question count, R' = 16, P' = 16.

Printed per pilot: predicted / actual width of the macro OR, AD, P(0), and `β_match` and the
frontier area of every strategy, and the prediction's run time. The last line is exactly

    plan_precision: predicted/actual interval width OR A, AD B, beta_match C (median over K pilots)

with C the strategy of `--strategy` (default DEE, the early-exit frontier OTBench's methods face).
Goal: each ratio within [0.8, 1.25].

Grid. On the bootstrap's 101-point grid `β_match` moves in steps of 0.01, and at paper scale DEE's
95 % interval is one step wide or none (a width of 0 or 1 pp, whatever the design): a width
cannot be predicted to 20 % there. Both sides therefore use the 1,001-point grid of the point
frontiers (docs/rules.md) by default; `--grid 101` shows the quantized case.
"""

import argparse
import time

import numpy as np


def pilot_of(ms, seed: int, share: float = 0.2, R: int = 2, P: int = 4):
    """A pilot subsample of `ms`: `share` of each group's questions, `R` trajectories, `P` probes."""
    from otbench.analysis.resampling import thin_probes

    rng = np.random.default_rng([seed, 2026])
    keep_q = []
    for g in range(len(ms.groups)):
        qs = np.flatnonzero(ms.question_group == g)
        qs = qs[np.isin(qs, ms.question)]
        keep_q.append(rng.choice(qs, size=max(2, int(round(share * qs.size))), replace=False))
    keep_q = np.concatenate(keep_q)
    rows = []
    sel = np.flatnonzero(np.isin(ms.question, keep_q))
    key = ms.cell[sel].astype(np.int64) * ms.num_questions + ms.question[sel]
    for k in np.unique(key):
        r = sel[key == k]
        rows.append(rng.choice(r, size=min(R, r.size), replace=False))
    pilot = ms.take(np.concatenate(rows))
    return thin_probes(pilot, P, rng)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pilots", type=int, default=5)
    ap.add_argument("--replicates", type=int, default=150, help="paired replicates per probe level")
    ap.add_argument("--full-replicates", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--strategy", default="dee", choices=("dr", "fb", "dee"))
    ap.add_argument("--grid", type=int, default=1001, help="frontier budget grid points (both sides)")
    ap.add_argument("--smoke", action="store_true", help="the smoke size the test suite runs: simulate('tiny'), one pilot, 20 replicates, 101 budgets")
    a = ap.parse_args()
    scale = "tiny" if a.smoke else "paper"
    if a.smoke:
        a.pilots, a.replicates, a.full_replicates, a.grid = 1, 20, 20, 101
    t_all = time.perf_counter()
    from otbench.analysis.frontier import STRATEGIES
    from otbench.analysis.measurement import simulate
    from otbench.analysis.resampling import BOOT_METRICS, bootstrap, frontier_area, predict_precision

    ms = simulate(scale, a.seed)
    print(f"SYNTHETIC {scale}-scale set (simulate({scale!r}, {a.seed})): {ms.num_trajectories:,} trajectories, "
          f"R = 16, P = {int(ms.probes[0])}")
    t = time.perf_counter()
    full = bootstrap(ms, replicates=a.full_replicates, frontiers=True, grid=a.grid)
    t_full = time.perf_counter() - t
    actual = {}
    for s in ("or", "ad", "zero_step_acc"):
        lo, hi = np.percentile(full.macro[:, BOOT_METRICS.index(s)], (2.5, 97.5))
        actual[s] = hi - lo
    fb = full.frontiers
    for i, s in enumerate(STRATEGIES):
        bm = fb.beta_match[:, i]
        lo, hi = np.percentile(bm[np.isfinite(bm)], (2.5, 97.5))
        actual[f"beta_match_{s}"] = hi - lo
        lo, hi = np.percentile(frontier_area(fb.macro[:, i], fb.grid), (2.5, 97.5))
        actual[f"area_{s}"] = hi - lo
    print(f"full bootstrap ({a.full_replicates} replicates, frontiers on {a.grid} budgets): {t_full:.0f} s; widths "
          + ", ".join(f"{k} {v * 100:.3f}pp" for k, v in actual.items()))
    counts = {g: int(np.isin(np.flatnonzero(ms.question_group == i), ms.question).sum())
              for i, g in enumerate(ms.groups)}
    ratios = []
    for k in range(a.pilots):
        pilot = pilot_of(ms, a.seed * 1000 + k + 1)
        t = time.perf_counter()
        pred = predict_precision(pilot, questions=counts, trajectories=16, probes=16,
                                 replicates=a.replicates, seed=20260721 + k, frontiers=True,
                                 grid=a.grid)
        dt = time.perf_counter() - t
        w = pred.widths(16, 16)
        r = {s: w[s] / actual[s] for s in actual}
        ratios.append(r)
        print(f"pilot {k + 1}: {pilot.num_trajectories} trajectories, {sum(pred.pilot_questions.values())} "
              f"questions, R = {pred.pilot_R:g}, P = {pred.pilot_P}; predicted in {dt:.0f} s; predicted/actual "
              + ", ".join(f"{s} {v:.2f}" for s, v in r.items()), flush=True)
    med = {s: float(np.median([r[s] for r in ratios])) for s in actual}
    print(f"total run time {time.perf_counter() - t_all:.0f} s")
    print(f"plan_precision: predicted/actual interval width OR {med['or']:.2f}, AD {med['ad']:.2f}, "
          f"beta_match {med['beta_match_' + a.strategy]:.2f} (median over {a.pilots} pilots)")


if __name__ == "__main__":
    main()
