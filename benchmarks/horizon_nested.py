"""Nested item / replicate-slot bootstrap (the eight-replicate designs, docs/rules.md) against a NumPy loop.

The shape of the second paper's nine-arm experiment: 500 items x 8 paired
replicate slots, a 32-column stack (the stratum decomposition of one
contrast at two horizons: 26 statistics, padded as the analysis pads them),
10,000 draws at the default batch of 1,000, seed 0 -- the path
`horizon analyze --scheme nested` takes (`_inference.bootstrap`). The
baseline, measured in this run, is the same statistic in NumPy, one draw at
a time (fancy indexing and two einsums per draw), timed on 500 draws and
scaled; the item scheme's time is printed for reference. Prints the largest
difference on the draws both computed and, last, the speed-up.
"""

import time

import numpy as np
from otbench.analysis.horizon import _inference as inf

I, R, KCOLS, DRAWS, BASE_DRAWS = 500, 8, 26, 10_000, 500


def numpy_nested(x, a, res, n):
    """The nested statistic of the first `n` draws, one draw at a time in NumPy."""
    xa, af = np.where(a, x, 0.0), a.astype(np.float64)
    out = np.empty((n, x.shape[2]))
    for j in range(n):
        w = res.batches[j // res.batch]
        idx, e = np.asarray(w.item[j % res.batch]), np.asarray(w.slots[j % res.batch]).astype(np.float64)
        num, den = np.einsum("jr,jrk->jk", e, xa[idx]), np.einsum("jr,jrk->jk", e, af[idx])
        has = den > 0
        m = np.where(has, num / np.where(has, den, 1.0), 0.0)
        bot = has.sum(axis=0)
        out[j] = np.where(bot > 0, m.sum(axis=0) / np.maximum(bot, 1), np.nan)
    return out


def _smoke() -> bool:
    """`--smoke`: the smoke size the test suite runs (100 items, 1,000 draws, a 50-draw baseline)."""
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smoke", action="store_true", help="the smoke size the test suite runs: 100 items, 1,000 draws, a 50-draw baseline")
    return ap.parse_args().smoke


def main() -> None:
    global I, DRAWS, BASE_DRAWS
    if _smoke():
        I, DRAWS, BASE_DRAWS = 100, 1_000, 50
    rng = np.random.default_rng(0)
    x = rng.integers(0, 2, size=(I, R, KCOLS)).astype(np.float64)
    a = rng.random((I, R, KCOLS)) < 0.9
    t = time.perf_counter()
    res = inf.Resampler(I, R, replicates=DRAWS, scheme="nested")
    t_draw = time.perf_counter() - t
    inf.bootstrap(x[:, :, :2], a[:, :, :2], resampler=res)              # compile
    t = time.perf_counter()
    b = inf.bootstrap(x, a, resampler=res)
    t_nested = time.perf_counter() - t
    item = inf.Resampler(I, R, replicates=DRAWS, scheme="item")
    inf.bootstrap(x, a, resampler=item)
    t = time.perf_counter()
    inf.bootstrap(x, a, resampler=item)
    t_item = time.perf_counter() - t
    t = time.perf_counter()
    ref = numpy_nested(x, a, res, BASE_DRAWS)
    t_np = (time.perf_counter() - t) * DRAWS / BASE_DRAWS
    diff = np.nanmax(np.abs(ref - b.draws[:BASE_DRAWS]))
    print(f"{I} items x {R} slots x {KCOLS} statistics, {DRAWS:,} draws: draws {t_draw:.2f} s, nested kernel "
          f"{t_nested:.2f} s, item scheme {t_item:.2f} s, NumPy loop {t_np:.1f} s (scaled from {BASE_DRAWS}); "
          f"max |diff| {diff:.1e}")
    assert diff < 1e-12
    print(f"speed-up {t_np / t_nested:.2f}x")


if __name__ == "__main__":
    main()
