"""Exact probe thinning: expected OR, AD and earliest-maximizer retention under hypergeometric thinning (SPEC §7).

Thinning a trajectory's `P` probes to `m` keeps, at every position `k`
independently, a uniformly random `m`-subset of the `P` recorded answers, so
the thinned correct count `X_k` is hypergeometric (population `P`, `C(k)`
successes, `m` draws). The thinned curve's earliest maximizer `k~` is
`j` with `X_j = x` exactly when every earlier position has `X_i < x` and
every later one `X_i <= x` (the earliest-maximum tie rule, SPEC §4), so

    Pr(k~ = j, X_j = x) = f_j(x) * prod_{i<j} F_i(x - 1) * prod_{i>j} F_i(x)

with `f_i` / `F_i` the pmf / cdf of `X_i`. Exclusive prefix products of
`F_i(x - 1)` and suffix products of `F_i(x)` over positions give all of them
in `O(positions * m)` per trajectory. Then, exactly as expectations (no Monte
Carlo):

* `E[OR] = sum_j Pr(k~ = j) * (L(n) - L(j)) / L(n)` (0 when `L(n) = 0`);
* `E[AD] = E[X_k~] / m - C(n) / P` (linearity: `E[X_n] = m C(n) / P`),
  the AD of the thinned curve in its own probe units;
* retention `= Pr(k~ = k*)`, `k*` the earliest maximizer of the full curve.

Numerics. The pmf and cdf tables are exact rationals (`math.comb`), each
entry correctly rounded to float64 once, so no cdf is a sum of rounded
terms. The products multiply numbers in [0, 1] (no cancellation): each
result carries a relative error of at most ~(2 K + m) ulp for `K`
positions, ~1e-13 at K = 129; tests compare with `Fraction` arithmetic to
1e-12. A product that underflows to 0 stands for a probability below
1e-300. With `m = P` every table is a point mass and the results equal the
unthinned metrics exactly (tested with `==`).

Positions past `n` are padding and are excluded (their factors are 1).
Rows are processed grouped by `n` in power-of-two widths, so the padded
width follows each row's own length (mean 25 of 129 positions at paper
scale) with a handful of compiled shapes.
"""

import math
from collections.abc import Sequence
from fractions import Fraction
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

try:    # shapes in annotations (STYLE.md); checked when tests run with jaxtyping
    from jaxtyping import Array, Float64, Int32
except ImportError:     # jaxtyping is a test extra: annotations degrade to jax.Array
    class _Shaped:
        def __class_getitem__(cls, item):
            return jax.Array

    Array = jax.Array
    Float64 = Int32 = _Shaped

# Probabilities are float64 (1e-12 agreement with exact fractions); needs x64.
jax.config.update("jax_enable_x64", True)

CHUNK = 2048
"""Rows per kernel call (fixed, so a width compiles once)."""


def hypergeom_tables(probes: Sequence[int], m: int, width: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact pmf and cdf of the thinned count, correctly rounded to float64.

    Args:
      probes: the distinct population sizes `P` (each `>= m`).
      m: probes kept.
      width: length of the count axis (`>= m + 1`; entries past `m` are
        pmf 0, cdf 1).

    Returns:
      (pmf, cdf) float64[len(probes), max(P) + 1, width]: entry `[p, c, x]`
      is `Pr(X = x)` / `Pr(X <= x)` for population `probes[p]` with `c`
      successes (rows `c > P` are unused and hold a point mass at 0).
    """
    cmax = max(probes) + 1
    pmf = np.zeros((len(probes), cmax, width))
    cdf = np.ones((len(probes), cmax, width))
    for i, P in enumerate(probes):
        total = math.comb(P, m)
        for c in range(cmax):
            if c > P:
                pmf[i, c, 0] = 1.0
                continue
            acc = Fraction(0)
            for x in range(m + 1):
                f = Fraction(math.comb(c, x) * math.comb(P - c, m - x), total)
                acc += f
                pmf[i, c, x] = float(f)          # Fraction -> float is correctly rounded
                cdf[i, c, x] = float(acc)
    return pmf, cdf


class Expected(NamedTuple):
    """Per-trajectory expectations under thinning (one row; vmapped: `[traj]`)."""

    ratio: Float64[Array, ""]        # E[OR], fraction
    degradation: Float64[Array, ""]  # E[AD], fraction
    retention: Float64[Array, ""]    # Pr(thinned k* == full k*)


def _exclusive_cumprod(a: jax.Array, reverse: bool) -> jax.Array:
    """Exclusive cumulative product along axis 0 (from the end when `reverse`)."""
    # associative_scan, not cumprod: measured 6x faster on CPU (cumprod
    # lowers to a windowed reduction).
    one = jnp.ones_like(a[:1])
    if reverse:
        return jnp.concatenate([jax.lax.associative_scan(jnp.multiply, a[1:], reverse=True, axis=0),
                                one], axis=0)
    return jnp.concatenate([one, jax.lax.associative_scan(jnp.multiply, a[:-1], axis=0)], axis=0)


def expected_row(L: Int32[Array, " pos"], C: Int32[Array, " pos"], n: Int32[Array, ""],
                 pidx: Int32[Array, ""], probes: Int32[Array, ""], m: Float64[Array, ""],
                 pmf: Float64[Array, "p c x"], cdf: Float64[Array, "p c x"]) -> Expected:
    """Exact expectations of one padded row (see the module docstring)."""
    K = C.shape[0]
    k = jnp.arange(K, dtype=jnp.int32)
    valid = k <= n
    f = pmf[pidx, C]                                         # [pos, x]  Pr(X_k = x)
    F = cdf[pidx, C]                                         # [pos, x]  Pr(X_k <= x)
    below = jnp.concatenate([jnp.zeros_like(F[:, :1]), F[:, :-1]], axis=1)   # Pr(X_k < x)
    F = jnp.where(valid[:, None], F, 1.0)
    below = jnp.where(valid[:, None], below, 1.0)
    joint = (f * _exclusive_cumprod(below, False) * _exclusive_cumprod(F, True)
             * valid[:, None].astype(jnp.float64))           # Pr(k~ = j, X_j = x)
    p = jnp.sum(joint, axis=1)                               # Pr(k~ = j)
    x = jnp.arange(f.shape[1], dtype=jnp.float64)
    ex = jnp.sum(joint * x[None, :])                         # E[X_k~]
    l_n = L[n]
    has = l_n > 0
    ratio = jnp.where(has, (l_n - L).astype(jnp.float64)
                      / jnp.where(has, l_n, 1).astype(jnp.float64), 0.0)
    k_star = jnp.argmax(jnp.where(valid, C, -1))             # full curve, earliest maximum
    P = probes.astype(jnp.float64)
    # (E[X] * P / m - C(n)) / P: with m = P this is (C(k*) - C(n)) / P, the
    # unthinned AD to the last bit.
    return Expected(ratio=jnp.sum(p * ratio), degradation=(ex * (P / m) - C[n]) / P,
                    retention=p[k_star])


_kernel = jax.jit(jax.vmap(expected_row, in_axes=(0, 0, 0, 0, 0, None, None, None)))


def expected(L: np.ndarray, C: np.ndarray, n: np.ndarray, probes: np.ndarray, m: int) -> Expected:
    """Exact thinning expectations of every row (host arrays in, float64[traj] out).

    Args:
      L, C: int[traj, pos] padded rows (SPEC §2); n, probes: int[traj].
      m: probes kept, `1 <= m <= min(probes)`.
    """
    T = int(n.shape[0])
    values = sorted(set(np.asarray(probes).tolist()))
    pidx_all = np.searchsorted(values, probes).astype(np.int32)
    width = max(values) + 1                      # one count axis for every m: one compile per width
    pmf, cdf = (jnp.asarray(a) for a in hypergeom_tables(values, m, width))
    out = np.zeros((3, T))
    order = np.argsort(n, kind="stable")
    bucket = np.maximum(1, 1 << np.ceil(np.log2(np.asarray(n, dtype=np.float64)[order] + 1)).astype(np.int64))
    bucket = np.minimum(bucket, C.shape[1])
    for w in np.unique(bucket):
        rows = order[bucket == w]
        for s in range(0, rows.shape[0], CHUNK):
            r = rows[s:s + CHUNK]
            pad = np.r_[r, np.full(CHUNK - r.shape[0], r[0])]      # fixed shape; padding dropped
            res = _kernel(jnp.asarray(L[pad, :w], dtype=jnp.int32), jnp.asarray(C[pad, :w], dtype=jnp.int32),
                          jnp.asarray(n[pad], dtype=jnp.int32), jnp.asarray(pidx_all[pad]),
                          jnp.asarray(probes[pad], dtype=jnp.int32), jnp.float64(m), pmf, cdf)
            out[:, r] = np.stack([np.asarray(a) for a in res])[:, :r.shape[0]]
    return Expected(ratio=out[0], degradation=out[1], retention=out[2])
