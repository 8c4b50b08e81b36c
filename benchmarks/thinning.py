"""Benchmark: exact probe thinning for m = 4, 8, 12, 16 at paper scale, against a NumPy baseline.

    python benchmarks/thinning.py [--probes 4,8,12,16] [--seed 0]

Target (issue 4): <= 10 s on this 2-core CPU for all four `m` on the
simulated paper-scale set. Times `probe_thinning(ms, probes)` (per-trajectory
exact expectations plus the equal-weight aggregation) in this fresh process,
cold (incl. JAX compilation) and warm, and a plain NumPy implementation of
the same product formula -- rows in chunks of 2,048 at the full padded width,
`np.cumprod` for the prefix / suffix products, the same exact tables -- and
checks that both agree to 1e-12 on every trajectory. The trajectory
thinning (2,000 draws per r) is timed as well, for the record.
"""

import argparse
import os
import resource
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import numpy as np  # noqa: E402
from otbench.analysis import simulate  # noqa: E402
from otbench.analysis.resampling._probe_thinning import hypergeom_tables  # noqa: E402
from otbench.analysis.resampling._thinning import probe_thinning, trajectory_thinning  # noqa: E402


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def numpy_expected(ms, m: int, chunk: int = 2048) -> np.ndarray:
    """float64[metric(or, ad, retention), traj] by the product formula in NumPy."""
    values = sorted(set(ms.probes.tolist()))
    pmf, cdf = hypergeom_tables(values, m, m + 1)
    below = np.concatenate([np.zeros_like(cdf[..., :1]), cdf[..., :-1]], axis=-1)
    pidx = np.searchsorted(values, ms.probes)
    T, K = ms.C.shape
    out = np.zeros((3, T))
    k = np.arange(K)
    x = np.arange(m + 1)
    for s in range(0, T, chunk):
        sl = slice(s, s + chunk)
        C, L, n, p = ms.C[sl], ms.L[sl].astype(np.float64), ms.n[sl], pidx[sl]
        valid = (k[None, :] <= n[:, None])[..., None]
        f = np.where(valid, pmf[p[:, None], C], 0.0)
        F = np.where(valid, cdf[p[:, None], C], 1.0)
        B = np.where(valid, below[p[:, None], C], 1.0)
        pre = np.concatenate([np.ones_like(B[:, :1]), np.cumprod(B, axis=1)[:, :-1]], axis=1)
        suf = np.concatenate([np.cumprod(F[:, ::-1], axis=1)[:, ::-1][:, 1:], np.ones_like(F[:, :1])],
                             axis=1)
        joint = f * pre * suf
        pk = joint.sum(axis=2)
        ex = (joint * x).sum(axis=(1, 2))
        r = np.arange(C.shape[0])
        ln = L[r, n]
        lstar = (pk * L).sum(axis=1)
        out[0, sl] = np.where(ln > 0, (ln - lstar) / np.where(ln > 0, ln, 1.0), 0.0)
        P = ms.probes[sl].astype(np.float64)
        out[1, sl] = (ex * (P / m) - C[r, n]) / P
        kstar = np.argmax(np.where(valid[..., 0], C, -1), axis=1)
        out[2, sl] = pk[r, kstar]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--probes", default="4,8,12,16")
    ap.add_argument("--seed", type=int, default=0, help="simulator seed")
    ap.add_argument("--smoke", action="store_true", help="the smoke size the test suite runs: simulate('tiny'), probes 2,4")
    args = ap.parse_args()

    scale = "tiny" if args.smoke else "paper"
    if args.smoke:
        args.probes = "2,4"                       # the tiny set has P = 4
    probes = [int(x) for x in args.probes.split(",")]
    ms = simulate(scale, seed=args.seed)
    print(f"SYNTHETIC: simulate({scale!r}, seed={args.seed}): {ms.num_trajectories:,} trajectories, "
          f"{float((ms.n + 1).mean()):.1f} positions each (max {ms.num_positions}), "
          f"{os.cpu_count()} CPUs")
    times = []
    for label in ("cold (incl. JAX start-up and compile)", "warm"):
        c0, t0 = cpu(), time.perf_counter()
        pt = probe_thinning(ms, probes)
        times.append((time.perf_counter() - t0, cpu() - c0))
        print(f"JAX exact thinning m = {args.probes}, {label:38s} wall {times[-1][0]:6.2f} s  "
              f"cpu {times[-1][1]:6.2f} s")
    c0, t0 = cpu(), time.perf_counter()
    base = np.stack([numpy_expected(ms, m) for m in probes])
    tb = (time.perf_counter() - t0, cpu() - c0)
    print(f"NumPy baseline (full width, cumprod)                    wall {tb[0]:6.2f} s  "
          f"cpu {tb[1]:6.2f} s")
    err = float(np.max(np.abs(base - pt.trajectory)))
    print(f"max |JAX - NumPy| over trajectories and metrics: {err:.2e} "
          f"({'ok' if err <= 1e-12 else 'MISMATCH'})")
    print(f"ratio NumPy / JAX: cold {tb[0] / times[0][0]:.1f}x, warm {tb[0] / times[1][0]:.1f}x")
    print(f"target <= 10 s: {'met' if times[0][0] <= 10 else 'MISSED'} cold, "
          f"{'met' if times[1][0] <= 10 else 'MISSED'} warm")
    for i, m in enumerate(probes):
        print(f"  m = {m:2d}: E[OR] {100 * pt.macro[i, 0]:.2f} %  E[AD] {100 * pt.macro[i, 1]:.2f} pp  "
              f"retention {100 * pt.macro[i, 2]:.2f} %")
    t0 = time.perf_counter()
    tt = trajectory_thinning(ms)
    print(f"trajectory thinning r = 2,4,8,16 x 2,000 draws: wall {time.perf_counter() - t0:.2f} s")
    for i, r in enumerate(tt.trajectories):
        lo, hi = np.percentile(tt.macro[i], (2.5, 97.5), axis=0)
        print(f"  r = {r:2d}: OR [{100 * lo[0]:.2f}, {100 * hi[0]:.2f}] %  "
              f"AD [{100 * lo[1]:.2f}, {100 * hi[1]:.2f}] pp")
    if err > 1e-12:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
