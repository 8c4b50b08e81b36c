"""The nested item / replicate-slot bootstrap of the eight-replicate designs (§A.8; issue 31, item 2).

Twins: the draws from Python-integer SplitMix64 (the rule in `_kernels`),
the statistic by loops over draws and slots. Properties: with one slot per
item the nested bootstrap is the item bootstrap (same draws); a replicate
never depends on its batch; slot counts sum to `R`.
"""

import math

import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from otbench.analysis.horizon import _inference as inf
from otbench.analysis.horizon import _kernels as K

MASK64 = (1 << 64) - 1
GAMMA = 0x9E3779B97F4A7C15
TAG = int.from_bytes(b"nested-r", "big")


def mix(z: int) -> int:
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def nums(seed: int, first: int, n_words: int, count: int) -> list[int]:
    w = [mix((seed + (first + j) * GAMMA) & MASK64) for j in range(n_words)]
    return ([x & 0xFFFFFFFF for x in w] + [x >> 32 for x in w])[:count]


def twin_nested_draw(seed, b, I, R):
    """(items drawn, slot counts per draw) of nested replicate `b`."""
    hi = max((I + 1) // 2, 1)
    hv = max((I * R + 1) // 2, 1)
    items = [(u * I) >> 32 for u in nums(seed, b * hi + 1, hi, I)]
    s2 = mix(seed ^ TAG)
    u = nums(s2, b * hv + 1, hv, I * R)
    slots = []
    for j in range(I):
        c = [0] * R
        for v in u[j * R:(j + 1) * R]:
            c[(v * R) >> 32] += 1
        slots.append(c)
    return items, slots


def twin_nested_stat(x, a, items, slots):
    """Mean over draws with a pair of the slot-weighted mean of the drawn item, per column."""
    out = []
    for k in range(x.shape[2]):
        ms = []
        for i, c in zip(items, slots):
            den = sum(c[r] for r in range(x.shape[1]) if a[i, r, k])
            if den:
                ms.append(sum(c[r] * x[i, r, k] for r in range(x.shape[1]) if a[i, r, k]) / den)
        out.append(sum(ms) / len(ms) if ms else math.nan)
    return np.array(out)


@st.composite
def grids(draw, max_items=6, max_reps=4, max_k=3, reps=None):
    I = draw(st.integers(1, max_items))
    R = reps or draw(st.integers(1, max_reps))
    k = draw(st.integers(1, max_k))
    n = I * R * k
    x = np.array(draw(st.lists(st.sampled_from([0.0, 1.0, -1.0, 0.5]), min_size=n, max_size=n))).reshape(I, R, k)
    a = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n))).reshape(I, R, k)
    return x, a


TAG_IN_KERNELS = K.NESTED_TAG


def test_the_stream_tag_is_the_documented_ascii():
    assert TAG_IN_KERNELS == TAG


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**64 - 1), I=st.integers(1, 9), R=st.integers(1, 5), first=st.integers(0, 40))
def test_nested_draws_match_the_splitmix_twin(seed, I, R, first):
    w = K.draw_nested(jnp.uint64(seed), jnp.uint64(first), 3, I, R)
    for j in range(3):
        items, slots = twin_nested_draw(seed, first + j, I, R)
        assert np.asarray(w.item[j]).tolist() == items
        assert np.asarray(w.slots[j]).tolist() == slots
        assert all(sum(c) == R for c in slots)


@settings(max_examples=15, deadline=None)
@given(grids(), st.integers(0, 2**32), st.sampled_from([1, 4, 7]))
def test_nested_bootstrap_matches_the_loop_twin_at_any_batch(g, seed, batch):
    x, a = g
    I, R, _ = x.shape
    b = inf.bootstrap(x, a, replicates=7, seed=seed, scheme="nested", batch=batch)
    for j in range(7):
        items, slots = twin_nested_draw(seed, j, I, R)
        np.testing.assert_allclose(b.draws[j], twin_nested_stat(x, a, items, slots), rtol=1e-12, atol=1e-12,
                                   equal_nan=True)
    point = inf.bootstrap(x, a, replicates=1, seed=seed, scheme="item")
    np.testing.assert_array_equal(b.estimate, point.estimate)      # the estimate is the item one


@settings(max_examples=15, deadline=None)
@given(grids(reps=1, max_items=8), st.integers(0, 2**64 - 1))
def test_one_replicate_per_item_nested_equals_item_bootstrap(g, seed):
    x, a = g
    nested = inf.bootstrap(x, a, replicates=40, seed=seed, scheme="nested", batch=16)
    item = inf.bootstrap(x, a, replicates=40, seed=seed, scheme="item", batch=16)
    np.testing.assert_allclose(nested.draws, item.draws, rtol=1e-13, atol=1e-15, equal_nan=True)
    assert np.array_equal(np.isnan(nested.draws), np.isnan(item.draws))


def test_all_equal_outcomes_give_a_degenerate_nested_interval():
    x = np.full((6, 8, 2), 1.0)
    a = np.ones_like(x, dtype=bool)
    b = inf.bootstrap(x, a, replicates=50, seed=3, scheme="nested")
    assert np.all(b.draws == 1.0) and inf.interval(b.draws[:, 0]) == [1.0, 1.0]


def test_nested_needs_the_slot_count_it_was_drawn_for():
    res = inf.Resampler(4, 3, replicates=5, scheme="nested")

    with pytest.raises(inf.InferenceError, match="resampler"):
        inf.bootstrap(np.zeros((4, 2, 1)), np.ones((4, 2, 1), bool), resampler=res)
