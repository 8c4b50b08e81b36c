"""Effort levels on the paper-scale simulated set: the map `otbench effort` writes, and its cap scan
timed against evaluating each candidate cap on its own.

    python benchmarks/effort_map.py [--levels low=2,medium=1,high=0.5] [--replicates 2000]
                                    [--seed 7] [--set DIR]

The set is `simulate("paper", seed)` (SYNTHETIC: 6 models x 963 questions x 16 trajectories), or
a saved set with `--set` (the demo's, say: `otbench demo --out DIR` writes one). Per (model,
benchmark group) cell and level, the smallest thinking-token cap whose paired two-stage bootstrap
interval of accuracy(cap) - accuracy(full thinking) has its lower end at or above -delta
(docs/rules.md, effort levels). Baseline, in the same run: on the cell with the most candidate
caps, a plain evaluation of each of 100 evenly spaced candidate caps (each trajectory's latest
position under the cap, the replicate sums as a matrix product, the percentile); its lower bounds
must equal the scan's at those caps. The last line is the result:

    effort_map: L levels x F families, budgets B, each within δ by its interval; N levels unmet

F counts (model, group) cells; B gives each level's budgets as the range over the cells.
"""

import argparse
import time

import numpy as np


def naive_lower(cell, W, caps, lower_pct, percentile):
    """Lower percentile of the replicate differences at each cap, one cap at a time."""
    C_full, _ = cell.full
    Wi = W.astype(np.int64)
    probes, full = Wi @ cell.P, Wi @ C_full
    out = []
    for c in caps:
        Cc, _ = cell.at_cap(int(c))
        d = np.where(probes > 0, (Wi @ Cc - full) / np.maximum(probes, 1), np.nan)
        out.append(percentile(d[:, None], [lower_pct])[0, 0])
    return np.asarray(out)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--levels", default="low=2,medium=1,high=0.5")
    ap.add_argument("--replicates", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--set", default=None, help="a saved measurement set instead of the simulated one")
    ap.add_argument("--smoke", action="store_true", help="the suite's size: simulate('tiny'), 50 replicates")
    a = ap.parse_args()

    from otbench.analysis import load, simulate
    from otbench.analysis.effort import (CellArrays, delta_fraction, effort_map, format_effort,
                                         parse_levels, scan)
    from otbench.analysis.resampling import percentile, replicate_weights

    levels = parse_levels(a.levels)
    B = 50 if a.smoke else a.replicates
    ms = load(a.set) if a.set else simulate("tiny" if a.smoke else "paper", a.seed)
    what = a.set or f"simulate({'tiny' if a.smoke else 'paper'}, seed {a.seed})"
    print(f"set: {what}: {ms.num_trajectories} trajectories, {ms.num_cells} cells"
          + (" (SYNTHETIC)" if ms.synthetic else ""))
    t0 = time.perf_counter()
    em = effort_map(ms, levels, replicates=B, seed=a.seed)
    t_map = time.perf_counter() - t0
    print(format_effort(em), end="")
    print(f"effort_map: {B} replicates in {t_map:.1f} s (draw, scan of every candidate cap, "
          f"oracle FB frontier at each budget)")

    # baseline: each candidate cap evaluated on its own, on the cell with the most candidates
    W = replicate_weights(ms, B, a.seed)
    c = max(np.unique(ms.cell), key=lambda c: next(x.candidates for x in em.cells
                                                   if (x.model, x.group) == ms.cell_name(int(c))))
    rows = ms.cell_rows(int(c))
    k = int(ms.n[rows].max()) + 1
    cell = CellArrays(L=ms.L[rows, :k].astype(np.int64), C=ms.C[rows, :k].astype(np.int64),
                      n=ms.n[rows].astype(np.int64), P=ms.probes[rows].astype(np.int64))
    lo_pct = em.percentiles[0]
    t0 = time.perf_counter()
    sc = scan(cell, W[:, rows], [delta_fraction(v) for v in levels.values()], lo_pct, percentile)
    t_scan = time.perf_counter() - t0
    pick = np.unique(np.linspace(0, sc.caps.size - 1, min(100, sc.caps.size)).astype(int))
    t0 = time.perf_counter()
    ref = naive_lower(cell, W[:, rows], sc.caps[pick], lo_pct, percentile)
    t_naive = (time.perf_counter() - t0) / max(pick.size, 1) * sc.caps.size
    same = np.array_equal(ref, sc.lower[pick], equal_nan=True)
    print(f"cell {ms.cell_name(int(c))}: {sc.caps.size} candidate caps; scan {t_scan:.2f} s, "
          f"one cap at a time {t_naive:.2f} s (timed on {pick.size} caps, scaled), ratio "
          f"{t_naive / max(t_scan, 1e-9):.1f}x; same lower bounds: {'yes' if same else 'NO'}")

    within = all(x.at_budget["difference_interval"][0] >= -x.delta / 100
                 for cl in em.cells for x in cl.levels if x.budget is not None)
    ranges = []
    for name in levels:
        got = [x.budget for cl in em.cells for x in cl.levels if x.level == name and x.budget is not None]
        ranges.append(f"{name}={min(got)}..{max(got)}" if got else f"{name}=none")
    print(f"effort_map: {len(levels)} levels x {len(em.cells)} families, budgets "
          f"{' '.join(ranges)}, each within δ by its interval{'' if within else ': NO'}; "
          f"{em.unmet()} levels unmet")


if __name__ == "__main__":
    main()
