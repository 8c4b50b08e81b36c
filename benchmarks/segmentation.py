"""Segmentation throughput in tokens/s (goal >= 20 M tokens/s on CPU; docs/rules.md).

Workload: synthetic thinking streams shaped like the paper's (2,000-16,000
tokens per trajectory, a boundary id about every 60 tokens, a 150k-id
vocabulary with 565 boundary ids), b = 256. Measured in the same run:

* `numba` and `python` backends of `otbench.analysis.measurement._segment.segment_flat`
  (identical results, checked here);
* baseline: the bare vectorised membership scan `mask[ids]` (a lower bound
  on any id-level segmenter: it reads every token once and does nothing else),
  and the slow rescan twin of the tests on a 1 % subset, per token.
"""

import sys
import time

import numpy as np


def _twin(ids, mask, b):
    ends = [i + 1 for i, t in enumerate(ids) if mask[t]]
    if ids and (not ends or ends[-1] != len(ids)):
        ends.append(len(ids))
    blocks = [e - s for s, e in zip([0] + ends[:-1], ends)]
    target = min(max(1, (2 * len(ids) + b) // (2 * b)), len(blocks))
    while len(blocks) > target:
        sums = [blocks[i] + blocks[i + 1] for i in range(len(blocks) - 1)]
        i = sums.index(min(sums))
        blocks[i:i + 2] = [sums[i]]
    return blocks


def best_of(fn, repeat=3):
    best = float("inf")
    out = None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def _smoke() -> bool:
    """`--smoke`: the smoke size the test suite runs (300 trajectories)."""
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smoke", action="store_true", help="the smoke size the test suite runs: 300 trajectories")
    return ap.parse_args().smoke


def main() -> int:
    from otbench.analysis.measurement._segment import (
        _numba_kernel,
        boundary_mask,
        segment_flat,
    )

    rng = np.random.default_rng(0)
    V, T, b = 150_000, 300 if _smoke() else 3_000, 256
    B = rng.choice(V, 565, replace=False)
    mask = boundary_mask(V, B)
    lens = rng.integers(2_000, 16_000, T)
    off = np.zeros(T + 1, dtype=np.int64)
    np.cumsum(lens, out=off[1:])
    ids = rng.integers(0, V, int(off[-1]))
    ids[mask[ids]] = 0 if not mask[0] else 1
    hit = rng.random(ids.size) < 1 / 60
    ids[hit] = rng.choice(B, int(hit.sum()))
    n = ids.size
    print(f"workload: {T} trajectories, {n / 1e6:.1f} M tokens, {int(hit.sum())} boundary tokens, b = {b}")

    t_scan, _ = best_of(lambda: mask[ids])
    print(f"baseline membership scan mask[ids]: {t_scan:.3f} s  {n / t_scan / 1e6:8.1f} M tokens/s")

    t_py, (L_py, o_py) = best_of(lambda: segment_flat(ids, off, mask, b, backend="python"), repeat=2)
    print(f"segment_flat python heap:         {t_py:.3f} s  {n / t_py / 1e6:8.1f} M tokens/s  "
          f"({t_py / t_scan:.1f}x the scan)")
    if _numba_kernel() is not None:
        t = time.perf_counter()
        segment_flat(ids[: off[1]], off[:2], mask, b, backend="numba")   # compile / load the cache
        print(f"numba first call (compile or cache load): {time.perf_counter() - t:.2f} s")
        t_nb, (L_nb, o_nb) = best_of(lambda: segment_flat(ids, off, mask, b, backend="numba"))
        assert np.array_equal(L_nb, L_py) and np.array_equal(o_nb, o_py)
        print(f"segment_flat numba heap:          {t_nb:.3f} s  {n / t_nb / 1e6:8.1f} M tokens/s  "
              f"({t_nb / t_scan:.1f}x the scan); goal >= 20 M tokens/s: "
              f"{'met' if n / t_nb >= 20e6 else 'NOT met'}")
    else:
        print("numba not installed: the python heap is the segmenter; goal >= 20 M tokens/s: "
              f"{'met' if n / t_py >= 20e6 else 'NOT met'}")

    sub = range(0, T, 100)
    m = [bool(x) for x in mask]
    t = time.perf_counter()
    ntok = 0
    for i in sub:
        row = ids[off[i]:off[i + 1]].tolist()
        ntok += len(row)
        _twin(row, m, b)
    t_twin = time.perf_counter() - t
    print(f"slow rescan twin (1 % subset):    {ntok / t_twin / 1e6:8.3f} M tokens/s  "
          f"(the python heap is {(n / t_py) / (ntok / t_twin):.0f}x faster)")
    steps = np.diff(L_py)[np.diff(L_py) > 0]
    print(f"realized step length at b = {b}: mean {steps.mean():.1f} tokens over {steps.size} steps")
    return 0


if __name__ == "__main__":
    sys.exit(main())
