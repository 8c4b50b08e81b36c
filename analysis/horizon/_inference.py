"""Inference for the matched-horizon analysis: item bootstrap, bands, log2-B summary, McNemar, sign-flip (docs/rules.md).

* `bootstrap`: estimate and replicate distribution of stacked means of item
  means (`_horizon_kernels.item_means`), item scheme (primary: replicates
  averaged within item, items resampled), two-way item x replicate scheme
  (sensitivity: items and global replicates resampled independently) or the
  nested scheme of the eight-replicate designs (items resampled, then the
  paired replicate slots within each selected item; `_kernels`).
* `interval`: percentile interval over the replicates where the statistic is
  defined (`numpy.nanpercentile`, linear interpolation).
* `simultaneous_band`: `estimate +- q`, `q` the 95th percentile of the
  largest absolute deviation of a replicate from the estimate over a family
  (the horizons of one curve, or every contrast and horizon of a family);
  components undefined in a replicate are left out of its maximum.
* `log2_trapezoid`: trapezoidal integral of a curve over `log2 B` divided by
  the span `log2 B_max - log2 B_min`, over the horizons `B > 0` (`log2 0` is
  not finite, so the no-reasoning point is left out; documented choice).
* `mcnemar`: exact two-sided binomial test when the discordant count is
  below 25, else the continuity-corrected chi-square with one degree of
  freedom.
* `crossed_intercepts`: the second paper's model-based sensitivity: paired
  differences `D_ir = μ + a_i + b_r + e_ir` with crossed item and replicate
  random intercepts, fitted by the method of moments (two-way ANOVA without
  replication) on the complete item x replicate matrix; the grand mean's
  variance `σ_a²/I + σ_b²/R + σ_e²/(IR)` (negative component estimates set
  to 0) with a Satterthwaite `t` interval. Closed form, no optimizer, so no
  mixed-model library is needed. The mean squares are exact (integer sums of
  the values scaled by their common power of two, compared as fractions), so
  equal item and residual mean squares give a zero item component and the
  residual-only df, not a rounding residue.
* `sign_flip`: two-sided paired sign-flip randomization test of a mean of
  item-level differences; `p = (1 + #{|mean(s d)| >= |mean(d)|}) / (1 + B)`
  (the observed assignment counts as one draw, so p > 0), with a 1e-12
  tolerance so ties are counted as ties.
"""

import dataclasses
import math
from collections.abc import Sequence
from fractions import Fraction

import jax.numpy as jnp
import numpy as np

from otbench.errors import OtbenchError

from . import _kernels as K

REPLICATES = 10_000
SEED = 0
"""Default resampling seed of the matched-horizon intervals (the second paper's NumPy seed 0; docs/rules.md)."""
BATCH = 1000
LEVEL = 95.0
SCHEMES = ("item", "two-way", "nested")
EXACT_BELOW = 25
"""McNemar: exact binomial test when the discordant count is below this."""


class InferenceError(OtbenchError, ValueError):
    """An argument of the matched-horizon inference is invalid; the message names it."""


@dataclasses.dataclass(frozen=True)
class Boot:
    """Estimate and bootstrap replicates of `k` stacked statistics.

    Attributes:
      estimate: float64[k] (NaN: undefined).
      draws: float64[rep, k] (axis 0: replicates; NaN where undefined).
      seed, scheme: what produced the draws ("item", "two-way" or "nested").
    """

    estimate: np.ndarray
    draws: np.ndarray
    seed: int
    scheme: str


class Resampler:
    """The bootstrap weights of one item set, drawn once and reused by every statistic.

    Attributes:
      n_items, n_reps, replicates, seed, scheme, batch: what was drawn.
      batches: `_horizon_kernels.Weights` per batch of `batch` replicates
        (the last batch is drawn in full and cut when used).
    """

    def __init__(self, n_items: int, n_reps: int, *, replicates: int = REPLICATES, seed: int = SEED,
                 scheme: str = "item", batch: int = BATCH):
        _resampler_iv(replicates, batch, seed, scheme)
        self.n_items, self.n_reps = int(n_items), int(n_reps)
        self.replicates, self.seed, self.scheme, self.batch = replicates, seed, scheme, batch
        if scheme == "nested":
            self.batches = [K.draw_nested(jnp.uint64(seed), jnp.uint64(start), batch, self.n_items,
                                          self.n_reps) for start in range(0, replicates, batch)]
        else:
            self.batches = [K.draw_weights(jnp.uint64(seed), jnp.uint64(start), batch, self.n_items,
                                           self.n_reps, scheme == "two-way")
                            for start in range(0, replicates, batch)]


def _resampler_iv(replicates, batch, seed, scheme) -> None:
    if isinstance(replicates, bool) or not isinstance(replicates, int) or replicates < 0:
        raise InferenceError(f"`replicates` must be a non-negative integer, got {replicates!r}")
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise InferenceError(f"`batch` must be a positive integer, got {batch!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**64:
        raise InferenceError(f"`seed` must be an integer in [0, 2**64), got {seed!r}")
    if scheme not in SCHEMES:
        raise InferenceError(f"`scheme` must be one of {', '.join(SCHEMES)}, got {scheme!r}")


def check_replicates(n_items: int, n_reps: int, k: int, replicates: int, *, batch: int = BATCH,
                     scheme: str = "item", what: str = "") -> None:
    """The resource budget of `bootstrap`, before anything is drawn (`ResourceLimitError`).

    Kept for every replicate: its item and replicate weights (`Resampler`, 8 bytes each) and
    its `k` statistics (padded, float64); per batch, the kernel's temporaries (~4 copies of a
    batch's weights and statistics). Time: each replicate reweights every item's `k` means
    (every item and replicate's in the two-way and nested schemes).
    """
    from otbench.resources import check_budget

    kp = _pad_k(k)
    per_rep = 8.0 * (n_items + n_reps + 2 * kp)
    per_batch = 4 * per_rep
    ops = float(max(n_items, 1)) * (1 if scheme == "item" else max(n_reps, 1)) * kp
    what = what or f"a bootstrap of {n_items:,} items x {n_reps:,} replicates, {k} statistics"
    check_budget(what, "`replicates`", replicates, per_unit=per_rep, per_unit_ops=ops,
                 fixed=per_batch * min(batch, max(replicates, 1)), minimum=0, unit="replicate",
                 advice="use fewer --replicates")


def _pad_k(k: int) -> int:
    # Statistic stacks are padded to a power of two (at least 8) so that the
    # jitted kernels compile for a handful of shapes, not one per stack.
    return max(8, 1 << (max(k, 1) - 1).bit_length())


def bootstrap(x: np.ndarray, a: np.ndarray, *, replicates: int = REPLICATES, seed: int = SEED,
              scheme: str = "item", batch: int = BATCH, resampler: Resampler | None = None) -> Boot:
    """Estimate and replicates of the means of item means of `x[item, rep, k]` where `a` (module docstring).

    `batch` bounds memory (replicates per kernel call) and never changes a
    replicate: replicate `b` is a pure function of `(seed, b)`. A
    `resampler` (drawn once for the item set) replaces `replicates`, `seed`,
    `scheme` and `batch`.
    """
    x = np.asarray(x, dtype=np.float64)
    a = np.asarray(a, dtype=bool)
    if x.ndim != 3 or a.shape != x.shape:
        raise InferenceError(f"`x` and `a` must be [item, rep, k] arrays of one shape, got "
                             f"{x.shape} and {a.shape}")
    if np.any(a & ~np.isfinite(x)):
        raise InferenceError("`x` must be finite where `a` is True")
    I, R, k = x.shape
    if resampler is None:
        _resampler_iv(replicates, batch, seed, scheme)
        check_replicates(I, R, k, replicates, batch=batch, scheme=scheme)
        resampler = Resampler(I, R, replicates=replicates, seed=seed, scheme=scheme, batch=batch)
    elif resampler.n_items != I or (resampler.scheme != "item" and resampler.n_reps != R):
        # (the item scheme never resamples replicates, so any rep axis fits it)
        raise InferenceError(f"the resampler is for {resampler.n_items} items x {resampler.n_reps} "
                             f"replicates, got data of {I} x {R}")
    kp = _pad_k(k)
    xp = np.zeros((I, R, kp), dtype=np.float64)
    ap = np.zeros((I, R, kp), dtype=bool)
    xp[..., :k] = np.where(a, x, 0.0)
    ap[..., :k] = a
    xj, aj = jnp.asarray(xp), jnp.asarray(ap)
    est = np.asarray(K.item_means(xj, aj, K.point_weights(I, R)))[0, :k]
    n = resampler.replicates
    out = np.empty((n, k), dtype=np.float64)
    if resampler.scheme == "item":
        num = jnp.sum(jnp.where(aj, xj, 0.0), axis=1)
        den = jnp.sum(aj, axis=1).astype(jnp.float64)     # counts, exact in float64
        has = den > 0
        m = jnp.where(has, num / jnp.where(has, den, 1), 0.0)
    for j, w in enumerate(resampler.batches):
        start = j * resampler.batch
        if resampler.scheme == "item":
            got = K.item_means_fixed(m, has, w.item)
        elif resampler.scheme == "nested":
            got = K.nested_means(xj, aj, w)
        else:
            got = K.item_means(xj, aj, w)
        stop = min(start + resampler.batch, n)
        out[start:stop] = np.asarray(got)[: stop - start, :k]
    return Boot(est, out, resampler.seed, resampler.scheme)


def interval(draws: np.ndarray, percentiles: Sequence[float] = (2.5, 97.5)) -> list:
    """Percentile interval(s) over the defined replicates (axis 0); None where none is defined."""
    d = np.asarray(draws, dtype=np.float64)
    flat = d.reshape(d.shape[0], -1)
    res = []
    for j in range(flat.shape[1]):
        col = flat[:, j]
        col = col[np.isfinite(col)]
        res.append(None if col.size == 0 else [float(v) for v in np.percentile(col, percentiles)])
    return res if d.ndim > 1 else res[0]


def simultaneous_band(estimate: np.ndarray, draws: np.ndarray, level: float = LEVEL) -> float | None:
    """Half-width `q` of the simultaneous band `estimate +- q` over all components of `estimate`.

    `q` is the `level` percentile of `max_k |draws[b, k] - estimate[k]|`
    over replicates `b`, the maximum taken over the components defined both
    in the estimate and in replicate `b`; None when no replicate has one.
    """
    est = np.asarray(estimate, dtype=np.float64).reshape(-1)
    d = np.asarray(draws, dtype=np.float64).reshape(np.shape(draws)[0], -1)
    dev = np.abs(d - est[None, :])
    dev = np.where(np.isfinite(dev), dev, -np.inf)
    mx = dev.max(axis=1) if dev.shape[1] else np.full(d.shape[0], -np.inf)
    mx = mx[np.isfinite(mx)]
    return None if mx.size == 0 else float(np.percentile(mx, level))


def log2_trapezoid(values: np.ndarray, horizons: Sequence[int]) -> np.ndarray:
    """Trapezoid over `log2 B` / span, over the horizons `B > 0` (last axis); NaN when fewer than two.

    A NaN value at any used horizon makes the summary NaN (a curve with a gap
    has no area).

    >>> float(log2_trapezoid(np.array([9.0, 1.0, 3.0]), [0, 2, 8]))
    2.0
    """
    v = np.asarray(values, dtype=np.float64)
    hz = np.asarray(horizons, dtype=np.float64)
    keep = hz > 0
    if keep.sum() < 2:
        return np.full(v.shape[:-1], np.nan)
    x = np.log2(hz[keep])
    y = v[..., keep]
    area = np.sum(0.5 * (y[..., 1:] + y[..., :-1]) * np.diff(x), axis=-1)
    return area / (x[-1] - x[0])


@dataclasses.dataclass(frozen=True)
class McNemar:
    """McNemar's test of paired binary outcomes.

    Attributes:
      n10: pairs where the first outcome is 1 and the second 0.
      n01: pairs where the first is 0 and the second 1.
      statistic: the continuity-corrected chi-square (None for the exact test).
      p: two-sided p-value.
      method: "exact" (binomial, discordant count < 25) or "chi2-cc".
    """

    n10: int
    n01: int
    statistic: float | None
    p: float
    method: str


def mcnemar(first: np.ndarray, second: np.ndarray) -> McNemar:
    """McNemar's test of paired 0/1 outcomes `first[pair]`, `second[pair]` (module docstring)."""
    f = np.asarray(first)
    s = np.asarray(second)
    if f.shape != s.shape or f.ndim != 1:
        raise InferenceError(f"`first` and `second` must be 1-d arrays of one shape, got "
                             f"{f.shape} and {s.shape}")
    if not (np.isin(f, (0, 1)).all() and np.isin(s, (0, 1)).all()):
        raise InferenceError("`first` and `second` must hold 0/1 outcomes")
    b = int(np.sum((f == 1) & (s == 0)))
    c = int(np.sum((f == 0) & (s == 1)))
    return mcnemar_counts(b, c)


def mcnemar_counts(b: int, c: int) -> McNemar:
    """McNemar's test from the discordant counts `b`, `c`."""
    for name, v in (("b", b), ("c", c)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
            raise InferenceError(f"`{name}` must be a non-negative integer, got {v!r}")
    b, c = int(b), int(c)
    n = b + c
    if n < EXACT_BELOW:
        if n == 0:
            return McNemar(b, c, None, 1.0, "exact")
        k = min(b, c)
        # Two-sided exact binomial at p = 1/2: twice the smaller tail, capped at 1
        # (the distribution is symmetric, so this is scipy's "two-sided" rule).
        tail = sum(math.comb(n, j) for j in range(k + 1)) / 2.0 ** n
        return McNemar(b, c, None, min(1.0, 2.0 * tail), "exact")
    stat = (abs(b - c) - 1.0) ** 2 / n
    # chi-square(1) survival function: erfc(sqrt(x / 2)).
    return McNemar(b, c, stat, math.erfc(math.sqrt(stat / 2.0)), "chi2-cc")


@dataclasses.dataclass(frozen=True)
class Crossed:
    """Crossed random-intercept fit of a complete `[item, replicate]` matrix of differences.

    Attributes:
      estimate: grand mean `μ`; se: its standard error; df: Satterthwaite
        degrees of freedom (None when the variance is 0); ci: the `t`
        interval at `level` (None without a positive variance).
      var_item, var_replicate, var_residual: method-of-moments components
        (negative estimates set to 0).
      items, replicates: the matrix' shape.
    """

    estimate: float
    se: float
    df: float | None
    ci: list[float] | None
    var_item: float
    var_replicate: float
    var_residual: float
    items: int
    replicates: int


def crossed_intercepts(d: np.ndarray, level: float = LEVEL) -> Crossed | None:
    """Method-of-moments crossed item x replicate intercepts (module docstring); None if < 2 x 2.

    The moments are exact: every float is a binary rational, so the sums of
    squares are computed in integers (values scaled by their common power of
    two) and the mean squares compared and combined as fractions; a tie
    between two mean squares (a zero component) is a tie, not a rounding
    residue, and the Satterthwaite df does not jump with it.
    """
    d = np.asarray(d, dtype=np.float64)
    if d.ndim != 2 or not np.isfinite(d).all():
        raise InferenceError("`d` must be a complete 2-d [item, replicate] array of finite values")
    I, R = d.shape
    if I < 2 or R < 2:
        return None
    ms, df_ = _exact_mean_squares(d)
    mu = float(Fraction(sum(Fraction(v) for v in d.reshape(-1).tolist()), I * R))
    keep = (ms[0] > ms[2], ms[1] > ms[2])                   # component estimate > 0
    var_a = (ms[0] - ms[2]) / R if keep[0] else Fraction(0)
    var_b = (ms[1] - ms[2]) / I if keep[1] else Fraction(0)
    # Var(μ) as a combination of mean squares: c_item MS_item + c_rep MS_rep + c_err MS_err.
    c = (Fraction(int(keep[0]), I * R), Fraction(int(keep[1]), I * R),
         Fraction(1 - int(keep[0]) - int(keep[1]), I * R))
    V = sum(ck * mk for ck, mk in zip(c, ms, strict=True))
    if not V > 0:
        return Crossed(mu, 0.0, None, None, float(var_a), float(var_b), float(ms[2]), I, R)
    df = float(V * V / sum((ck * mk) ** 2 / f for ck, mk, f in zip(c, ms, df_, strict=True) if ck))
    q = t_quantile(0.5 + level / 200.0, df)
    se = math.sqrt(V)
    return Crossed(mu, se, df, [mu - q * se, mu + q * se], float(var_a), float(var_b),
                   float(ms[2]), I, R)


def _exact_mean_squares(d: np.ndarray) -> tuple[tuple[Fraction, ...], tuple[int, ...]]:
    """(MS_item, MS_rep, MS_err) of a two-way table without replication, exactly, and their df.

    `SS_item = Σ_i T_i²/R - T²/(IR)`, `SS_rep = Σ_r C_r²/I - T²/(IR)`,
    `SS_err = Σ d² - Σ_i T_i²/R - Σ_r C_r²/I + T²/(IR)` (row, column and
    grand totals), in integers of the values times their common scale.
    """
    I, R = d.shape
    fr = [Fraction(v) for v in d.reshape(-1).tolist()]
    scale = max(f.denominator for f in fr)             # powers of two: the largest is their lcm
    n = np.array([f.numerator * (scale // f.denominator) for f in fr], dtype=object).reshape(I, R)
    rows = [sum(n[i, :]) for i in range(I)]
    cols = [sum(n[:, r]) for r in range(R)]
    T = sum(rows)
    sq = sum(v * v for v in n.reshape(-1))
    s_rows, s_cols, grand = Fraction(sum(v * v for v in rows), R), Fraction(sum(v * v for v in cols), I), \
        Fraction(T * T, I * R)
    s2 = scale * scale
    df_ = (I - 1, R - 1, (I - 1) * (R - 1))
    ss = ((s_rows - grand) / s2, (s_cols - grand) / s2, (sq - s_rows - s_cols + grand) / s2)
    return tuple(s / f for s, f in zip(ss, df_, strict=True)), df_


def t_quantile(p: float, df: float) -> float:
    """Student-t quantile for `0.5 <= p < 1` by bisection on the regularized incomplete beta.

    `P(T <= t) = 1 - I_{df/(df+t²)}(df/2, 1/2) / 2` for `t >= 0`; 200 halvings
    of `[0, hi]` pin the root to float precision.
    """
    from jax.scipy.special import betainc

    def cdf(t: float) -> float:
        return 1.0 - 0.5 * float(betainc(df / 2.0, 0.5, df / (df + t * t)))

    lo, hi = 0.0, 1.0
    while cdf(hi) < p:
        hi *= 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if cdf(mid) < p:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-15 * hi:
            break
    return 0.5 * (lo + hi)


@dataclasses.dataclass(frozen=True)
class SignFlip:
    """Paired sign-flip randomization test of a mean difference.

    Attributes:
      mean: observed mean of the item-level differences.
      p: two-sided p-value `(1 + extreme) / (1 + draws)`.
      extreme: draws at least as extreme as the observation.
      draws, seed: the randomization draws and their seed.
      items: number of item-level differences.
    """

    mean: float
    p: float
    extreme: int
    draws: int
    seed: int
    items: int


def sign_flip(d: np.ndarray, *, draws: int = REPLICATES, seed: int = SEED) -> SignFlip | None:
    """Two-sided sign-flip test of `mean(d)` over item-level differences `d[item]`; None without items."""
    v = np.asarray(d, dtype=np.float64)
    if v.ndim != 1 or not np.isfinite(v).all():
        raise InferenceError("`d` must be a 1-d array of finite differences")
    if isinstance(draws, bool) or not isinstance(draws, int) or draws < 1:
        raise InferenceError(f"`draws` must be a positive integer, got {draws!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**64:
        raise InferenceError(f"`seed` must be an integer in [0, 2**64), got {seed!r}")
    if v.size == 0:
        return None
    # Zero padding to a multiple of 64 (the draws' word width) keeps every
    # item's sign bit where it is and lets the kernel compile for few lengths;
    # the comparison is of sums, so the tolerance scales with the item count.
    n_pad = max(64, -(-v.size // 64) * 64)
    dj = jnp.asarray(np.pad(v, (0, n_pad - v.size)))
    tol = jnp.float64(1e-12 * v.size)
    total = 0
    for first in range(0, draws, 1024):
        n = min(1024, draws - first)
        ext = np.asarray(K.sign_flip_extreme(dj, jnp.uint64(seed), jnp.uint64(first), tol))
        total += int(ext[:n].sum())
    return SignFlip(float(v.mean()), (1 + total) / (1 + draws), total, draws, seed, int(v.size))
