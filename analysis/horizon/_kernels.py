"""JAX kernels of the matched-horizon analysis: resampling weights, weighted item means, scores (docs/rules.md).

Every interval of the matched-horizon analysis is a percentile of a statistic
that is a *mean of item means*: outcomes `x[item, rep, k]` (for `k` a stack
of horizons and quantities) with an availability mask `a`, first averaged
over the available replicates of an item, then over the items that have any.
A bootstrap replicate only changes the weights: item `i` enters `c[b, i]`
times (multinomial counts of an item draw) and, in the two-way item x
replicate scheme, global replicate `r` enters `d[b, r]` times. So

    m[b, i, k] = sum_r d[b, r] a[i, r, k] x[i, r, k] / sum_r d[b, r] a[i, r, k]
    stat[b, k] = sum_i c[b, i] m[b, i, k] / sum_i c[b, i] 1{item i defined}

which is linear in `x` given the weights: sums of statistics over a partition
of the pairs (the four termination strata) add up to the total in every
replicate, exactly up to float rounding. A statistic with no defined item in
a replicate is NaN there.

Draws. Replicate `b` of seed `s` is a pure function of `(s, b)`: it uses the
SplitMix64 words `b * W + 1 .. b * W + W` of stream `s` (the counter-based
generator of `_bootstrap_draws`, shared with the docs/rules.md bootstrap), `W =
ceil(I / 2)` (+ `ceil(R / 2)` for the two-way scheme), each 32-bit half
mapped to an index by `floor(u * n / 2**32)`. Replicates never depend on the
batch they are computed in.

Nested scheme (the second paper's eight-replicate designs, §A.8): replicate
`b` draws its `I` items exactly as the item scheme does (the same words, so
its item counts equal the item scheme's), then, for its `j`-th item draw,
`R` replicate slots of that item with replacement: numbers `j R .. j R + R -
1` of words `b * V + 1 .. b * V + V` of stream `mix64(s ^ NESTED_TAG)`, `V =
ceil(I R / 2)`, each mapped to a slot by `floor(u * R / 2**32)`. A draw's
item mean is over its drawn slots where the pair exists; a draw with none is
left out of that statistic's mean (as an undefined item is), so

    m[b, j, k] = sum_r e[b, j, r] a[i_j, r, k] x[i_j, r, k] / sum_r e[b, j, r] a[i_j, r, k]
    stat[b, k] = sum_j m[b, j, k] / #{j : draw j defined for k}

with `i_j` the `j`-th drawn item and `e` the slot counts. With one slot per
item the slot draws are all 0 and the nested replicate is the item one.
"""

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from otbench.analysis.core import (  # shapes in annotations (STYLE.md)
    Array,
    Bool,
    Float64,
    Int32,
    Int64,
    mix64,
    numbers,
    pick,
    words,
)


class Weights(NamedTuple):
    """Resampling weights of a batch of bootstrap replicates.

    Attributes:
      item: int64[rep, item] times each item is drawn (sums to the item count).
      replicate: int64[rep, replicate] times each global replicate is drawn
        (two-way scheme), or all ones (item scheme).
    """

    item: Int64[Array, "boot item"]
    replicate: Int64[Array, "boot replicate"]


def _counts(idx: jax.Array, n: int) -> jax.Array:
    """int64[boot, n] multiplicities of the int32[boot, draws] indices."""
    return jax.vmap(lambda row: jnp.zeros(n, jnp.int64).at[row].add(1))(idx)


@functools.partial(jax.jit, static_argnames=("count", "n_items", "n_reps", "two_way"))
def draw_weights(seed: jax.Array, first: jax.Array, count: int, n_items: int, n_reps: int,
                 two_way: bool) -> Weights:
    """Weights of bootstrap replicates `first .. first + count - 1` (see module docstring).

    Item draws come first in a replicate's block of words, then (two-way)
    the replicate draws; with `two_way=False` replicate weights are ones.
    """
    hi = (n_items + 1) // 2
    hr = (n_reps + 1) // 2 if two_way else 0
    W = max(hi + hr, 1)
    b = jnp.asarray(first, jnp.uint64) + jnp.arange(count, dtype=jnp.uint64)
    s = jnp.asarray(seed, jnp.uint64)
    w = jax.vmap(lambda i: words(s, i * jnp.uint64(W) + jnp.uint64(1), W))(b)
    items = pick(numbers(w[:, :hi], n_items), jnp.uint64(max(n_items, 1)))
    ci = _counts(items, n_items)
    if two_way:
        reps = pick(numbers(w[:, hi:hi + hr], n_reps), jnp.uint64(max(n_reps, 1)))
        cr = _counts(reps, n_reps)
    else:
        cr = jnp.ones((count, n_reps), jnp.int64)
    return Weights(ci, cr)


NESTED_TAG = 0x6E65737465642D72
"""Stream tag of the within-item slot draws of the nested scheme (ASCII "nested-r")."""


class NestedWeights(NamedTuple):
    """Draws of a batch of nested bootstrap replicates.

    Attributes:
      item: int32[boot, draw] the item of each of the `I` item draws.
      slots: int64[boot, draw, replicate] times each replicate slot of that
        draw's item is drawn (each row sums to `R`).
    """

    item: Int32[Array, "boot draw"]
    slots: Int64[Array, "boot draw replicate"]


@functools.partial(jax.jit, static_argnames=("count", "n_items", "n_reps"))
def draw_nested(seed: jax.Array, first: jax.Array, count: int, n_items: int, n_reps: int) -> NestedWeights:
    """Nested draws of replicates `first .. first + count - 1` (module docstring)."""
    hi = max((n_items + 1) // 2, 1)
    hv = max((n_items * n_reps + 1) // 2, 1)
    b = jnp.asarray(first, jnp.uint64) + jnp.arange(count, dtype=jnp.uint64)
    s = jnp.asarray(seed, jnp.uint64)
    w = jax.vmap(lambda i: words(s, i * jnp.uint64(hi) + jnp.uint64(1), hi))(b)
    items = pick(numbers(w, n_items), jnp.uint64(max(n_items, 1)))
    s2 = mix64(s ^ jnp.uint64(NESTED_TAG))
    v = jax.vmap(lambda i: words(s2, i * jnp.uint64(hv) + jnp.uint64(1), hv))(b)
    slots = pick(numbers(v, n_items * n_reps), jnp.uint64(max(n_reps, 1))).reshape(count, n_items, n_reps)
    counts = jax.vmap(lambda row: _counts(row, n_reps))(slots)
    return NestedWeights(items, counts)


@functools.partial(jax.jit, static_argnames=("chunk",))
def nested_means(x: Float64[Array, "item rep k"], a: Bool[Array, "item rep k"], w: NestedWeights,
                 chunk: int = 1) -> Float64[Array, "boot k"]:
    """Means over draws of the draws' slot-weighted item means (module docstring); NaN where none.

    Replicates are mapped `chunk` at a time (memory `chunk x I x R x k`; one
    at a time measured fastest on CPU, `benchmarks/horizon_nested.py`);
    `chunk` never changes a value.
    """
    xa = jnp.where(a, x, 0.0)
    af = a.astype(jnp.float64)

    def one(args):
        idx, e = args
        ef = e.astype(jnp.float64)
        num = jnp.einsum("jr,jrk->jk", ef, xa[idx])
        den = jnp.einsum("jr,jrk->jk", ef, af[idx])
        has = den > 0
        m = jnp.where(has, num / jnp.where(has, den, 1.0), 0.0)
        top, bot = m.sum(axis=0), has.sum(axis=0).astype(jnp.float64)
        return jnp.where(bot > 0, top / jnp.where(bot > 0, bot, 1.0), jnp.nan)

    return jax.lax.map(one, (w.item, w.slots), batch_size=chunk)


def point_weights(n_items: int, n_reps: int) -> Weights:
    """The weights of the estimate itself: every item and replicate once."""
    return Weights(jnp.ones((1, n_items), jnp.int64), jnp.ones((1, n_reps), jnp.int64))


@jax.jit
def item_means(x: Float64[Array, "item rep k"], a: Bool[Array, "item rep k"],
               w: Weights) -> Float64[Array, "boot k"]:
    """Weighted mean of item means per replicate (module docstring); NaN where no item is defined."""
    xa = jnp.where(a, x, 0.0)
    af = a.astype(jnp.float64)
    cr = w.replicate.astype(jnp.float64)
    num = jnp.einsum("br,irk->bik", cr, xa)
    den = jnp.einsum("br,irk->bik", cr, af)
    has = den > 0
    m = jnp.where(has, num / jnp.where(has, den, 1.0), 0.0)
    ci = w.item.astype(jnp.float64)
    top = jnp.einsum("bi,bik->bk", ci, m)
    bot = jnp.einsum("bi,bik->bk", ci, has.astype(jnp.float64))
    return jnp.where(bot > 0, top / jnp.where(bot > 0, bot, 1.0), jnp.nan)


@jax.jit
def item_means_fixed(m: Float64[Array, "item k"], has: Bool[Array, "item k"],
                     ci: Int64[Array, "boot item"]) -> Float64[Array, "boot k"]:
    """`item_means` for the item scheme, with the item means `m` computed once (a matmul)."""
    c = ci.astype(jnp.float64)
    top = c @ jnp.where(has, m, 0.0)
    bot = c @ has.astype(jnp.float64)
    return jnp.where(bot > 0, top / jnp.where(bot > 0, bot, 1.0), jnp.nan)


# -- candidate-logit readout scores (SPEC §8) ---------------------------------------------

class Scores(NamedTuple):
    """Readout scores of option distributions (one per row).

    Attributes:
      mass: valid-option mass `M = sum_y p_y` (fraction of the full vocabulary).
      q_true: `q_{y*} = p_{y*} / M`.
      log_loss: conditional log loss `-log q_{y*}` (nats).
      brier: multiclass Brier score `sum_y (q_y - 1{y = y*})^2`.
      argmax: the option with the largest `q` (lowest index on ties).
      log_odds: gold log-odds `log p_{y*} - log sum_{y != y*} p_y`.
    """

    mass: Float64[Array, " row"]
    q_true: Float64[Array, " row"]
    log_loss: Float64[Array, " row"]
    brier: Float64[Array, " row"]
    argmax: Int64[Array, " row"]
    log_odds: Float64[Array, " row"]


@jax.jit
def readout_scores(logp: Float64[Array, "row option"], gold: Int64[Array, " row"],
                   valid: Bool[Array, "row option"]) -> Scores:
    """Scores from per-option log-probabilities `logp` (log of the summed spelling probabilities).

    Options beyond an item's count are masked out by `valid`; an option
    without any one-token spelling has `logp = -inf` (probability 0). All
    arithmetic is in log space (log-sum-exp), so tiny masses do not underflow.
    """
    lp = jnp.where(valid, logp, -jnp.inf)
    log_m = jax.scipy.special.logsumexp(lp, axis=-1)
    logq = lp - log_m[:, None]
    q = jnp.exp(logq)
    onehot = jnp.arange(lp.shape[-1])[None, :] == gold[:, None]
    lq_true = jnp.take_along_axis(logq, gold[:, None], axis=-1)[:, 0]
    brier = jnp.sum(jnp.where(valid, (q - onehot.astype(jnp.float64)) ** 2, 0.0), axis=-1)
    others = jnp.where(onehot, -jnp.inf, lp)
    lp_true = jnp.take_along_axis(lp, gold[:, None], axis=-1)[:, 0]
    log_odds = lp_true - jax.scipy.special.logsumexp(others, axis=-1)
    return Scores(jnp.exp(log_m), jnp.exp(lq_true), -lq_true, brier,
                  jnp.argmax(lp, axis=-1).astype(jnp.int64), log_odds)


# -- dense readouts: answer availability (SPEC §8; paper A.4) ------------------------------

@jax.jit
def stable_correct(correct: Bool[Array, "row check"]) -> Bool[Array, "row check"]:
    """Retrospective stable correctness: correct at `t` and at every later checkpoint."""
    rev = jax.lax.cummin(correct[:, ::-1].astype(jnp.int32), axis=1)
    return rev[:, ::-1].astype(bool)


def trapezoid_mean(values: Float64[Array, "row check"], t: np.ndarray) -> Float64[Array, " row"]:
    """Trapezoidal average of `values` over the points `t` (area / span); one point: its value."""
    t = jnp.asarray(np.asarray(t, dtype=np.float64))
    if t.shape[0] == 1:
        return values[:, 0]
    dt = jnp.diff(t)
    area = jnp.sum(0.5 * (values[:, 1:] + values[:, :-1]) * dt[None, :], axis=1)
    return area / (t[-1] - t[0])


# -- tests of paired outcomes -------------------------------------------------------------

@jax.jit
def sign_flip_extreme(d: Float64[Array, " item"], seed: jax.Array, first: jax.Array,
                      tol: jax.Array) -> Bool[Array, " 1024"]:
    """Whether each of the sign-flip draws `first .. first + 1023` is at least as extreme as the data.

    Draw `j` flips item `i` when bit `i % 64` of SplitMix64 word
    `j * ceil(I / 64) + i // 64 + 1` of stream `seed` is set; it is extreme
    when `|sum(s d)| >= |sum(d)| - tol` (sums: the mean's common divisor
    cancels, so `d` may be padded with zeros to a fixed length).
    """
    n = d.shape[0]
    per = (n + 63) // 64
    j = first.astype(jnp.uint64) + jnp.arange(1024, dtype=jnp.uint64)
    w = jax.vmap(lambda k: words(seed.astype(jnp.uint64), k * jnp.uint64(per) + jnp.uint64(1), per))(j)
    i = jnp.arange(n)
    bits = (w[:, i // 64] >> (i % 64).astype(jnp.uint64)[None, :]) & jnp.uint64(1)
    s = 1.0 - 2.0 * bits.astype(jnp.float64)
    obs = jnp.abs(jnp.sum(d))
    stat = jnp.abs(jnp.sum(s * d[None, :], axis=1))
    return stat >= obs - tol
