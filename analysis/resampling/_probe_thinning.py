"""Exact probe thinning: expected OR, AD and earliest-maximizer retention, hypergeometric (docs/rules.md).

Thinning a trajectory's `P` probes to `m` keeps, at every position `k`
independently, a uniformly random `m`-subset of the `P` recorded answers, so
the thinned correct count `X_k` is hypergeometric (population `P`, `C(k)`
successes, `m` draws). The thinned curve's earliest maximizer `k~` is
`j` with `X_j = x` exactly when every earlier position has `X_i < x` and
every later one `X_i <= x` (the earliest-maximum tie rule, docs/rules.md), so

    Pr(k~ = j, X_j = x) = f_j(x) * prod_{i<j} F_i(x - 1) * prod_{i>j} F_i(x)

with `f_i` / `F_i` the pmf / cdf of `X_i`. Exclusive prefix products of
`F_i(x - 1)` and suffix products of `F_i(x)` over positions give all of them
in `O(positions * m)` per trajectory. Then, exactly as expectations (no Monte
Carlo):

* `E[OR] = (L(n) - E[L(k~)]) / L(n)`, `E[L(k~)] = sum_j Pr(k~ = j) L(j)`
  (0 when `L(n) = 0`);
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
Rows are processed grouped by length in a few padded widths (16, 32, 64,
all), so the padded work follows each row's own length (mean 25 of 129
positions at paper scale) with at most four compiled shapes, in blocks of
128 rows whose `[pos, rows, x]` slabs stay in cache (a scan over 92,448 rows
at once was memory-bound: 4x slower on this CPU).
"""

import functools
import math
from collections.abc import Sequence
from fractions import Fraction
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from otbench.analysis.core import (  # shapes in annotations (STYLE.md)
    Array,
    Float64,
    Int32,
)


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
    """Per-trajectory expectations under thinning (`[traj]` each)."""

    ratio: Float64[Array, " traj"]        # E[OR], fraction
    degradation: Float64[Array, " traj"]  # E[AD], fraction
    retention: Float64[Array, " traj"]    # Pr(thinned k* == full k*)


class Tables(NamedTuple):
    """Flat kernel tables: row `p * (Pmax + 2) + c` for population index `p`, count `c`.

    The last row of each population block (`c = Pmax + 1`) is the padding
    sentinel: pmf 0 and both cdfs 1, so positions past `n` drop out of every
    product and sum without masks.
    """

    pmf: Float64[Array, "row x"]     # Pr(X = x)
    cdf: Float64[Array, "row x"]     # Pr(X <= x)
    below: Float64[Array, "row x"]   # Pr(X < x) = Pr(X <= x - 1)


def kernel_tables(pmf: np.ndarray, cdf: np.ndarray) -> Tables:
    """`Tables` from `hypergeom_tables` output (adds the sentinel row and `below`)."""
    nP, _, X = pmf.shape
    pmf = np.concatenate([pmf, np.zeros((nP, 1, X))], axis=1)
    cdf = np.concatenate([cdf, np.ones((nP, 1, X))], axis=1)
    below = np.concatenate([np.zeros_like(cdf[..., :1]), cdf[..., :-1]], axis=-1)
    below[:, -1] = 1.0
    return Tables(*(jnp.asarray(a.reshape(-1, X), dtype=jnp.float64) for a in (pmf, cdf, below)))


def _exclusive_products(a: Float64[Array, "pos rows x"], reverse: bool) -> Float64[Array, "pos rows x"]:
    """`prod_{i<j} a[i]` (`prod_{i>j}` when `reverse`) along positions.

    A `lax.scan` over positions: every step multiplies one materialized
    `[rows, x]` slab. An unrolled chain let XLA fuse each position's product
    into its consumers (quadratic recomputation), and cumprod /
    associative_scan measured 2-6x slower on CPU.
    """
    def step(c, x):
        return c * x, c

    return jax.lax.scan(step, jnp.ones_like(a[0]), a, reverse=reverse)[1]


def expected_block(L: Int32[Array, "rows pos"], C: Int32[Array, "rows pos"], n: Int32[Array, " rows"],
                   base: Int32[Array, " rows"], probes: Int32[Array, " rows"], m: Float64[Array, ""],
                   t: Tables, cext: int) -> Expected:
    """Exact expectations of a block of padded rows (see the module docstring).

    Args:
      base: int32[rows] first table row of each row's population (`p * cext`).
      cext: rows per population block of `t` (`Pmax + 2`, static).
    """
    rows, K = C.shape
    k = jnp.arange(K, dtype=jnp.int32)
    valid = k[None, :] <= n[:, None]                          # [rows, pos]
    idx = (base[:, None] + jnp.where(valid, C, cext - 1)).T   # [pos, rows]: positions major
    f = jnp.take(t.pmf, idx, axis=0)                          # [pos, rows, x] Pr(X_k = x)
    F = jnp.take(t.cdf, idx, axis=0)                          # Pr(X_k <= x)
    below = jnp.take(t.below, idx, axis=0)                    # Pr(X_k < x)
    joint = f * _exclusive_products(below, False) * _exclusive_products(F, True)
    p = jnp.sum(joint, axis=2).T                              # [rows, pos] Pr(k~ = j)
    x = jnp.arange(f.shape[2], dtype=jnp.float64)
    ex = jnp.sum(jnp.sum(joint * x[None, None, :], axis=2), axis=0)   # [rows] E[X_k~]
    r = jnp.arange(rows)
    l_n = L[r, n].astype(jnp.float64)
    has = l_n > 0
    # E[OR] = (L(n) - E[L(k~)]) / L(n), and (E[X] P / m - C(n)) / P for AD:
    # with m = P the expectations are the point values and these are the
    # unthinned formulas of `_metrics`, to the last bit.
    l_star = jnp.sum(p * L.astype(jnp.float64), axis=1)      # E[L(k~)]
    ratio = jnp.where(has, (l_n - l_star) / jnp.where(has, l_n, 1.0), 0.0)
    k_star = jnp.argmax(jnp.where(valid, C, -1), axis=1)      # full curve, earliest maximum
    P = probes.astype(jnp.float64)
    return Expected(ratio=ratio, degradation=(ex * (P / m) - C[r, n].astype(jnp.float64)) / P,
                    retention=p[r, k_star])


BLOCK = 128
"""Rows per scan block: a block's `[pos, rows, x]` slabs stay in cache."""
WIDTHS = (16, 32, 64)
"""Padded widths (positions); longer rows use the full width. Few widths, few compiles."""


@functools.partial(jax.jit, static_argnums=7)
def _blocks(L, C, n, base, probes, m, t, cext):
    """`expected_block` over `[block, rows, ...]` inputs, one block at a time (`lax.map`)."""
    return jax.lax.map(lambda a: expected_block(*a, m, t, cext), (L, C, n, base, probes))


def expected(L: np.ndarray, C: np.ndarray, n: np.ndarray, probes: np.ndarray, m: int) -> Expected:
    """Exact thinning expectations of every row (host arrays in, float64[traj] out).

    Args:
      L, C: int[traj, pos] padded rows (docs/rules.md); n, probes: int[traj].
      m: probes kept, `1 <= m <= min(probes)`.
    """
    T = int(n.shape[0])
    values = sorted(set(np.asarray(probes).tolist()))
    cext = max(values) + 2
    base = (np.searchsorted(values, probes) * cext).astype(np.int32)   # table row of count 0
    t = kernel_tables(*hypergeom_tables(values, m, max(values) + 1))
    out = np.zeros((3, T))
    K = C.shape[1]
    widths = sorted({min(w, K) for w in WIDTHS} | {K})
    width = np.asarray(widths)[np.searchsorted(widths, np.asarray(n) + 1)]
    for w in widths:
        rows = np.flatnonzero(width == w)
        if rows.size == 0:
            continue
        nb = -(-rows.size // BLOCK)
        pad = np.r_[rows, np.full(nb * BLOCK - rows.size, rows[0])]     # padding rows dropped
        res = _blocks(*(jnp.asarray(a, dtype=jnp.int32).reshape((nb, BLOCK) + a.shape[1:])
                        for a in (L[pad, :w], C[pad, :w], n[pad], base[pad], probes[pad])),
                      jnp.float64(m), t, cext)
        out[:, rows] = np.stack([np.asarray(a).reshape(-1) for a in res])[:, :rows.size]
    return Expected(ratio=out[0], degradation=out[1], retention=out[2])
