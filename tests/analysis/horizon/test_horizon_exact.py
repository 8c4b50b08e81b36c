"""Exact ties in the crossed intercepts, strata shares as pair fractions (issue 31, items 3 and 4).

The twins here use `fractions.Fraction` and plain loops over the deviation
form of the two-way ANOVA (`(r_i - mu)^2` sums), a different algebra from
the analysis' total-based integer sums, so a tie is checked by exact
rational arithmetic, not by another float rounding.
"""

from fractions import Fraction

import numpy as np
import pytest
import scipy.stats
from hypothesis import given, settings
from hypothesis import strategies as st
from otbench.analysis.horizon import _inference as inf


def exact_crossed_twin(d, level=95.0):
    """Crossed intercepts with every moment a Fraction (loops, deviation form); floats at the end."""
    I, R = len(d), len(d[0])
    f = [[Fraction(v) for v in row] for row in d]
    mu = sum(sum(row) for row in f) / (I * R)
    ri = [sum(row) / R for row in f]
    cr = [sum(f[i][r] for i in range(I)) / I for r in range(R)]
    ms_i = R * sum((x - mu) ** 2 for x in ri) / (I - 1)
    ms_r = I * sum((x - mu) ** 2 for x in cr) / (R - 1)
    ms_e = sum((f[i][r] - ri[i] - cr[r] + mu) ** 2 for i in range(I) for r in range(R)) / ((I - 1) * (R - 1))
    ka, kb = ms_i > ms_e, ms_r > ms_e
    va = (ms_i - ms_e) / R if ka else Fraction(0)
    vb = (ms_r - ms_e) / I if kb else Fraction(0)
    V = va / I + vb / R + ms_e / (I * R)
    if V == 0:
        return float(mu), 0.0, None, None, float(va), float(vb), float(ms_e)
    terms = [(ms_i / (I * R), I - 1)] if ka else []
    terms += [(ms_r / (I * R), R - 1)] if kb else []
    terms.append(((1 - ka - kb) * ms_e / (I * R), (I - 1) * (R - 1)))
    df = float(V ** 2 / sum(t ** 2 / k for t, k in terms))
    q = scipy.stats.t.ppf(0.5 + level / 200, df)
    se = float(V) ** 0.5
    return float(mu), se, df, [float(mu) - q * se, float(mu) + q * se], float(va), float(vb), float(ms_e)


def test_the_issue_tie_is_a_tie():
    """Item and residual mean squares equal: df 12 (residual only), not 6, and the narrower interval."""
    d = np.array([[0, 1, 1], [0, -1, 0], [0, -1, 1], [1, 0, 0], [-1, 0, 0], [0, 1, 0], [0, 0, 0]], float)
    got = inf.crossed_intercepts(d)
    mu, se, df, ci, va, _, _ = exact_crossed_twin(d.tolist())
    assert va == 0.0 and got.var_item == 0.0 and got.var_replicate == 0.0
    assert got.df == df == 12.0
    assert got.ci == pytest.approx([-0.2102, 0.4007], abs=1e-4)
    assert got.ci == pytest.approx(ci, rel=1e-9)
    assert (got.estimate, got.se) == pytest.approx((mu, se), rel=1e-12)


def test_a_replicate_tie_and_a_constant_table():
    # columns shifted so that MS_rep == MS_err exactly: 2 x 2 with d = [[a, b], [c, d]]
    d = np.array([[1, 0], [0, 0]], float)        # MS_item = MS_rep = MS_err = 1/4
    got = inf.crossed_intercepts(d)
    assert got.var_item == got.var_replicate == 0.0 and got.df == 1.0
    flat = inf.crossed_intercepts(np.full((4, 3), 0.375))
    assert flat.se == 0.0 and flat.df is None and flat.ci is None and flat.estimate == 0.375


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 7), st.integers(2, 4), st.data())
def test_crossed_intercepts_are_exact_on_paired_binary_differences(I, R, data):
    """Differences of 0/1 outcomes (many ties): components, df and interval equal the Fraction twin."""
    d = np.array(data.draw(st.lists(st.lists(st.sampled_from([-1, 0, 1]), min_size=R, max_size=R),
                                    min_size=I, max_size=I)), float)
    got = inf.crossed_intercepts(d)
    mu, se, df, ci, va, vb, ve = exact_crossed_twin(d.tolist())
    assert (got.var_item, got.var_replicate, got.var_residual) == (va, vb, ve)
    assert got.df == df                                   # exact: the same rational, rounded once
    assert got.estimate == mu
    if ci is None:
        assert got.ci is None and got.se == 0.0
    else:
        assert got.se == pytest.approx(se, rel=1e-15) and got.ci == pytest.approx(ci, rel=1e-9, abs=1e-12)


@settings(max_examples=30, deadline=None)
@given(st.integers(2, 6), st.integers(2, 4), st.integers(0, 2**32 - 1))
def test_crossed_intercepts_are_exact_on_floats(I, R, seed):
    """Arbitrary floats are binary rationals: the integer moments agree with the Fraction twin."""
    d = np.random.default_rng(seed).normal(size=(I, R)).round(3)
    got = inf.crossed_intercepts(d)
    *_, df, _, va, vb, ve = exact_crossed_twin(d.tolist())
    assert (got.var_item, got.var_replicate, got.var_residual, got.df) == (va, vb, ve, df)
