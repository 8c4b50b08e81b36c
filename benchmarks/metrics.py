"""Time `simulate --scale paper` and `metrics` on it, against a plain NumPy baseline.

Baseline, measured in the same run: per-trajectory k*, OR, AD, endpoint and
zero-step accuracy with vectorised NumPy plus question -> cell means with
`np.bincount` -- the core of `metrics()` without pairwise spreads, local
changes or Spearman, so the ratio *understates* the JAX path's advantage.
Both paths are checked to agree on the cell OR/AD before timing is printed.

    python benchmarks/metrics.py [--repeats 3] [--seed 0]
"""

import argparse
import time

import jax
import numpy as np
from otbench.analysis import metrics, simulate, trajectory_metrics


def numpy_baseline(ms):
    T, K = ms.L.shape
    p = ms.C / ms.probes[:, None]
    valid = np.arange(K)[None, :] <= ms.n[:, None]
    masked = np.where(valid, p, -1.0)
    kstar = np.argmax(masked, axis=1)  # argmax returns the earliest maximiser
    rows = np.arange(T)
    Ln = ms.L[rows, ms.n].astype(np.float64)
    Lk = ms.L[rows, kstar].astype(np.float64)
    or_ = np.where(Ln > 0, (Ln - Lk) / np.where(Ln > 0, Ln, 1), 0.0)
    ad = p[rows, kstar] - p[rows, ms.n]
    # mean over trajectories within (cell, question), then over questions within a cell
    seg = ms.cell.astype(np.int64) * (ms.num_questions + 1) + ms.question
    _, seg_id = np.unique(seg, return_inverse=True)
    cnt = np.bincount(seg_id)
    seg_cell = np.zeros(cnt.size, dtype=np.int64)
    seg_cell[seg_id] = ms.cell
    out = {}
    for name, v in (("or", or_), ("ad", ad)):
        qmean = np.bincount(seg_id, weights=v) / cnt
        out[name] = np.bincount(seg_cell, weights=qmean) / np.bincount(seg_cell)
    return out


def numpy_trajectory(ms):
    T, K = ms.L.shape
    valid = np.arange(K)[None, :] <= ms.n[:, None]
    kstar = np.argmax(np.where(valid, ms.C, -1), axis=1)
    rows = np.arange(T)
    Ln = ms.L[rows, ms.n].astype(np.float64)
    Lk = ms.L[rows, kstar].astype(np.float64)
    or_ = np.where(Ln > 0, (Ln - Lk) / np.where(Ln > 0, Ln, 1), 0.0)
    ad = (ms.C[rows, kstar] - ms.C[rows, ms.n]) / ms.probes
    return kstar, or_, ad


def best_of(fn, repeats):
    times, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--smoke", action="store_true", help="the smoke size the test suite runs: simulate('tiny'), one repeat")
    args = ap.parse_args()

    t0 = time.perf_counter()
    scale = "tiny" if args.smoke else "paper"
    if args.smoke:
        args.repeats = 1
    ms = simulate(scale, args.seed)
    t_sim = time.perf_counter() - t0
    print(f"simulate {scale}: {ms.num_trajectories} trajectories x {ms.num_positions} padded positions "
          f"(SYNTHETIC) in {t_sim:.2f} s")

    t0 = time.perf_counter()
    result = metrics(ms)
    t_first = time.perf_counter() - t0
    t_warm, result = best_of(lambda: metrics(ms), args.repeats)
    t_np, base = best_of(lambda: numpy_baseline(ms), args.repeats)

    got_or = np.array([c["or"] for c in result["cells"]])
    got_ad = np.array([c["ad"] for c in result["cells"]])
    np.testing.assert_allclose(got_or, base["or"], rtol=0, atol=1e-9)
    np.testing.assert_allclose(got_ad, base["ad"], rtol=0, atol=1e-9)

    print(f"metrics (JAX, all quantities): first call incl. compile {t_first:.2f} s, "
          f"warm {t_warm:.3f} s (best of {args.repeats})")
    print(f"baseline NumPy (k*, OR, AD, cell means only): {t_np:.3f} s")
    print(f"ratio NumPy-core / JAX-full (warm): {t_np / t_warm:.2f}x "
          "(JAX also computes pairwise spreads, local changes, Spearman)")

    # Like for like: the per-trajectory kernel alone against NumPy's k*/OR/AD.
    args_ = (ms.L, ms.C, ms.n, ms.probes)
    jax.block_until_ready(trajectory_metrics(*args_))
    t_k, _ = best_of(lambda: jax.block_until_ready(trajectory_metrics(*args_)), args.repeats)
    t_kn, _ = best_of(lambda: numpy_trajectory(ms), args.repeats)
    print(f"per-trajectory kernel: JAX {t_k * 1e3:.1f} ms, NumPy {t_kn * 1e3:.1f} ms, "
          f"ratio NumPy/JAX {t_kn / t_k:.2f}x")
    print(f"macro OR {result['macro']['or']:.4f}  macro AD {result['macro']['ad']:.4f} (synthetic)")


if __name__ == "__main__":
    main()
