"""`_libm`: the simulator's transcendental functions by the C library, value for value, with
NumPy's edge cases (overflow to inf, log(0) = -inf, a domain error = nan)."""

import math

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from otbench.analysis.measurement import _libm

FLOATS = st.lists(st.floats(allow_nan=True, allow_infinity=True, width=64), min_size=0, max_size=20)


def _want(f, xs, edge):
    out = []
    for v in xs:
        try:
            out.append(f(v))
        except OverflowError:
            out.append(math.inf)
        except ValueError:
            out.append(edge(v))
    return np.array(out, dtype=np.float64)


def _same(a, b):
    return a.shape == b.shape and np.array_equal(a, b, equal_nan=True)


@given(FLOATS)
def test_each_function_is_the_c_librarys_value_for_value(xs):
    x = np.array(xs, dtype=np.float64)
    nan = lambda v: math.nan  # noqa: E731
    assert _same(_libm.exp(x), _want(math.exp, xs, nan))
    assert _same(_libm.expm1(x), _want(math.expm1, xs, nan))
    assert _same(_libm.tanh(x), _want(math.tanh, xs, nan))
    assert _same(_libm.log(x), _want(math.log, xs, lambda v: -math.inf if v == 0 else math.nan))
    assert _same(_libm.log1p(x), _want(math.log1p, xs, lambda v: -math.inf if v == -1 else math.nan))


def test_edges_are_numpys():
    with np.errstate(all="ignore"):
        x = np.array([0.0, -0.0, -1.0, -2.0, 1e308, 800.0, -800.0, np.inf, -np.inf, np.nan])
        for ours, theirs in ((_libm.exp, np.exp), (_libm.log, np.log), (_libm.expm1, np.expm1),
                             (_libm.log1p, np.log1p), (_libm.tanh, np.tanh)):
            assert _same(ours(x), theirs(x)), ours.__name__
        a = np.array([0.0, 0.0, 2.0, -2.0, 1e300, 0.5])
        b = np.array([-1.0, 2.0, 0.5, 0.5, 3.0, 3.0])
        assert _same(_libm.power(a, b), np.power(a, b))


@given(st.lists(st.floats(0, 1), min_size=1, max_size=10), st.floats(0.1, 4))
def test_power_broadcasts_and_is_pow(us, e):
    u = np.array(us).reshape(-1, 1)
    got = _libm.power(u, np.array([e, 3.0]))
    assert got.shape == (len(us), 2)
    assert _same(got, np.array([[math.pow(v, e), math.pow(v, 3.0)] for v in us]))
    assert _libm.exp(np.zeros((2, 3))).shape == (2, 3)
