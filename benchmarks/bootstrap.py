"""Benchmark: the 10,000-replicate OR / AD / accuracy bootstrap at paper scale, against a NumPy baseline.

    python benchmarks/bootstrap.py [--replicates 10000] [--baseline 200] [--seed 0]

Target (issue 4): <= 10 s on this 2-core CPU for 10,000 replicates of the
simulated paper-scale set (`simulate("paper")`: 24 cells, 92,448
trajectories). Times `bootstrap(ms, replicates=N)` in this fresh process --
the first call includes JAX compilation ("cold"), the second is "warm" --
and a plain NumPy implementation of the same two-stage draw (the documented
SplitMix64 streams in uint64 NumPy arithmetic, fancy-index gathers, float
means; one replicate at a time, vectorized over occurrences) on the first
`--baseline` replicates, extrapolated per replicate. The baseline computes
the very same replicates, so the script also checks that every cell value
agrees (1e-12 relative).
"""

import argparse
import os
import resource
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import numpy as np  # noqa: E402
from otbench.analysis import build_layout, simulate  # noqa: E402
from otbench.analysis.core._random import GAMMA  # noqa: E402
from otbench.analysis.overthinking._metrics import trajectory_metrics  # noqa: E402
from otbench.analysis.resampling._bootstrap import bootstrap  # noqa: E402
from otbench.analysis.resampling._replicates import BOOT_METRICS, KERNEL_METRICS  # noqa: E402
from otbench.analysis.resampling._draws import resampling  # noqa: E402

_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def mix64(z: np.ndarray) -> np.ndarray:
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


def numpy_baseline(ms, reps: int, seed: int) -> np.ndarray:
    """float64[rep, metric, cell] by NumPy, replicate after replicate."""
    layout, names = build_layout(ms)
    res = resampling(ms, layout, names)
    import jax.numpy as jnp

    tm = trajectory_metrics(jnp.asarray(ms.L), jnp.asarray(ms.C), jnp.asarray(ms.n),
                            jnp.asarray(ms.probes))
    vals = np.stack([np.asarray(tm.ratio), np.asarray(tm.degradation), ms.y.astype(np.float64),
                     np.asarray(tm.tokens, dtype=np.float64), np.asarray(tm.endpoint)], axis=1)
    t = res.tables
    pool, slot_lo, slot_n = (np.asarray(a) for a in (t.pool, t.slot_lo, t.slot_n))
    seg_of, size, rows = np.asarray(t.seg_of), np.asarray(t.size), np.asarray(t.rows)
    S, M, Rm, W = res.slots, res.models, res.rmax, res.words_per_replicate
    hs, hr = -(-S // 2), -(-Rm // 2)
    mask = np.uint64(0xFFFFFFFF)
    out = np.zeros((reps, len(KERNEL_METRICS), res.num_cells))
    with np.errstate(over="ignore"):
        for i in range(reps):
            p = np.uint64(i * W + 1) + np.arange(W, dtype=np.uint64)
            w = mix64(np.uint64(seed) + p * np.uint64(GAMMA))
            us = np.concatenate([w[:hs] & mask, w[:hs] >> np.uint64(32)])[:S]
            q = pool[slot_lo + ((us * slot_n) >> np.uint64(32)).astype(np.int64)]
            seg = seg_of[:, q]
            has = seg >= 0
            R = np.where(has, size[np.maximum(seg, 0)], 0)
            wr = w[hs:].reshape(M, S, hr)
            u = np.concatenate([wr & mask, wr >> np.uint64(32)], axis=-1)[..., :Rm]
            draw = ((u * R[..., None].astype(np.uint64)) >> np.uint64(32)).astype(np.int64)
            ok = np.arange(Rm)[None, None, :] < R[..., None]
            row = rows[np.where(ok, seg[..., None] * Rm + draw, res.zero_item)]
            v = np.where(ok[..., None], vals[np.maximum(row, 0)], 0.0).sum(axis=2)
            occ = np.where(has[..., None], v / np.maximum(R, 1)[..., None], 0.0)   # [M, S, metric]
            for c in range(res.num_cells):
                f, n = res.group_slots[res.cell_group[c]]
                m = res.cell_model[c]
                out[i, :, c] = occ[m, f:f + n].sum(axis=0) / has[m, f:f + n].sum()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replicates", type=int, default=10_000)
    ap.add_argument("--baseline", type=int, default=200, help="replicates timed for the baseline")
    ap.add_argument("--seed", type=int, default=0, help="simulator seed")
    ap.add_argument("--smoke", action="store_true", help="the smoke size the test suite runs: simulate('tiny'), 200 replicates, a 20-replicate baseline")
    args = ap.parse_args()
    scale = "tiny" if args.smoke else "paper"
    if args.smoke:
        args.replicates, args.baseline = 200, 20

    ms = simulate(scale, seed=args.seed)
    s = ms.summary()
    print(f"SYNTHETIC: simulate({scale!r}, seed={args.seed}): {s['cells']} cells, "
          f"{s['trajectories']:,} trajectories, {os.cpu_count()} CPUs")
    times = []
    for label in ("cold (incl. JAX start-up and compile)", "warm"):
        c0, t0 = cpu(), time.perf_counter()
        r = bootstrap(ms, replicates=args.replicates)
        times.append((time.perf_counter() - t0, cpu() - c0))
        print(f"JAX bootstrap {args.replicates:,} replicates, {label:38s} wall {times[-1][0]:6.2f} s  "
              f"cpu {times[-1][1]:6.2f} s")
    c0, t0 = cpu(), time.perf_counter()
    base = numpy_baseline(ms, args.baseline, 20260721)
    tb = (time.perf_counter() - t0, cpu() - c0)
    per = tb[0] / args.baseline
    print(f"NumPy baseline {args.baseline} replicates: wall {tb[0]:.2f} s ({1e3 * per:.1f} ms per "
          f"replicate; {per * args.replicates:.1f} s projected for {args.replicates:,})")
    got = r.cell[:args.baseline, :len(KERNEL_METRICS)]         # the kernel metrics lead the metric axis
    same = np.allclose(got, base, rtol=1e-12, atol=1e-13, equal_nan=True)
    print(f"same replicates as the baseline (1e-12): {'yes' if same else 'NO'}")
    print(f"ratio baseline / JAX per replicate: cold {per * args.replicates / times[0][0]:.1f}x, "
          f"warm {per * args.replicates / times[1][0]:.1f}x")
    print(f"JAX replicates per second (warm): {args.replicates / times[1][0]:,.0f}")
    print(f"target <= 10 s: {'met' if times[0][0] <= 10 else 'MISSED'} cold, "
          f"{'met' if times[1][0] <= 10 else 'MISSED'} warm")
    lo, hi = np.percentile(r.macro, (2.5, 97.5), axis=0)
    for j, k in enumerate(BOOT_METRICS):
        print(f"  macro {k:13s} estimate {r.estimate_macro[j]:.4f}  [{lo[j]:.4f}, {hi[j]:.4f}]")
    if not same:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
