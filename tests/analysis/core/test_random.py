"""The counter-based streams every draw of the analysis comes from (`analysis/core/_random.py`)."""

import jax.numpy as jnp
import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from otbench.analysis import core

MASK64 = (1 << 64) - 1


def mix64_twin(z: int) -> int:
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def test_splitmix64_reference_vectors():
    # Published SplitMix64 outputs (Vigna's reference splitmix64.c): seed 0 and seed 1234567.
    got0 = np.asarray(core.words(jnp.uint64(0), jnp.uint64(1), 3)).tolist()
    assert got0 == [0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4, 0x06C45D188009454F]
    got = np.asarray(core.words(jnp.uint64(1234567), jnp.uint64(1), 5)).tolist()
    assert got == [6457827717110365317, 3203168211198807973, 9817491932198370423,
                   4593380528125082431, 16408922859458223821]


@given(st.lists(st.integers(0, MASK64), min_size=1, max_size=20))
def test_mix64_equals_the_python_twin(zs):
    got = np.asarray(core.mix64(jnp.asarray(np.asarray(zs, dtype=np.uint64)))).tolist()
    assert got == [mix64_twin(z) for z in zs]


@given(st.integers(0, MASK64), st.integers(0, 2 ** 40), st.integers(1, 8))
def test_words_are_the_stream_at_first_onwards(seed, first, count):
    got = np.asarray(core.words(jnp.uint64(seed), jnp.uint64(first), count)).tolist()
    assert got == [mix64_twin((seed + (first + j) * core.GAMMA) & MASK64) for j in range(count)]


def test_pick_is_exact_multiply_shift():
    u = np.asarray([0, 1, 2 ** 31, 2 ** 32 - 1, 123456789, 2 ** 32 - 2], dtype=np.uint64)
    for n in (1, 3, 16, 90, 2 ** 31 - 1):
        got = np.asarray(core.pick(jnp.asarray(u), jnp.asarray(n, dtype=jnp.int32))).tolist()
        assert got == [(int(x) * n) >> 32 for x in u.tolist()]
        assert max(got) < n


@given(st.lists(st.integers(0, MASK64), min_size=1, max_size=6), st.data())
def test_numbers_are_low_halves_then_high_halves(ws, data):
    count = data.draw(st.integers(0, 2 * len(ws)))
    got = np.asarray(core.numbers(jnp.asarray(np.asarray(ws, dtype=np.uint64)), count)).tolist()
    halves = [w & 0xFFFFFFFF for w in ws] + [w >> 32 for w in ws]
    assert got == halves[:count]
