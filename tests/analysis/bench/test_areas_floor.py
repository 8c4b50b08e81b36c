"""The area curve floored at A0 (issue 37, item 2): `M(x) = max(A0, best curve point <= x)`.

Twin: the area terms as plain-Python sums over integer tokens with exact
`Fraction`s (every step of both curves sits at an integer cost, so
`∫_a^b y = Σ_{t=a}^{b-1} y(t)`). Property: a net curve -- the same accuracies
at costs never below the gross ones -- never scores a better gap area or
realized share than its gross twin, per cell and through the macro chain.
"""

from fractions import Fraction

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from otbench.analysis.bench._areas import cell_areas, frac, nondominated, share


def _frontier_at(pareto, b):
    pc, pr = pareto
    return max(int(r) for c, r in zip(pc, pr) if int(c) <= b)


def _curve_at(cost, reward, keep, zero, b):
    return max([zero] + [int(r) for c, r, k in zip(cost, reward, keep) if k and int(c) <= b])


def areas_twin(cost, reward, keep, pareto, total, probes, zero):
    """(gap, gap_full, realized, gain, lo, hi) by summing token by token (module docstring)."""
    def M(b):
        return _curve_at(cost, reward, keep, zero, b)

    def F(b):
        return _frontier_at(pareto, b)

    def gap(a, b):
        if a == b:
            return Fraction(F(a) - M(a), probes)
        return Fraction(sum(F(t) - M(t) for t in range(a, b)), (b - a) * probes)

    on = [int(c) for c, k in zip(cost, keep) if k]
    lo, hi = min(on), max(on)
    if total == 0:
        g = gap(0, 0)
        return g, g, Fraction(0), Fraction(0), Fraction(0), Fraction(0)
    den = total * probes
    return (gap(lo, hi), gap(0, total),
            Fraction(sum(M(t) - zero for t in range(total)), den),
            Fraction(sum(F(t) - zero for t in range(total)), den),
            Fraction(lo, total), Fraction(hi, total))


def _keep(cost, reward, total, probes):
    return nondominated([frac(c, total) for c in cost], [frac(r, probes) for r in reward])


@st.composite
def cells(draw):
    """One cell: its exact frontier, a gross sweep feasible under it, and signal costs."""
    total = draw(st.integers(1, 30))
    probes = draw(st.integers(1, 6))
    steps = draw(st.lists(st.integers(1, total), min_size=0, max_size=5, unique=True))
    pc = [0] + sorted(steps)
    zero = draw(st.integers(0, probes))
    gains = draw(st.lists(st.integers(0, 3), min_size=len(pc), max_size=len(pc)))
    pr = list(np.minimum(zero + np.cumsum(gains), 4 * probes))
    n = draw(st.integers(1, 6))
    cost = draw(st.lists(st.integers(0, total), min_size=n, max_size=n))
    # every method action is feasible for its strategy: reward at most the frontier at its cost
    reward = [draw(st.integers(0, _frontier_at((pc, pr), c))) for c in cost]
    extra = draw(st.lists(st.integers(0, total), min_size=n, max_size=n))
    return total, probes, zero, (np.array(pc), np.array(pr)), cost, reward, extra


@settings(max_examples=300, deadline=None)
@given(cells())
def test_cell_areas_equal_the_token_by_token_twin(cell):
    total, probes, zero, pareto, cost, reward, extra = cell
    for c in (cost, [a + b for a, b in zip(cost, extra)]):
        keep = _keep(c, reward, total, probes)
        a = cell_areas(c, reward, keep, pareto, total, probes, zero)
        assert (a.gap, a.gap_full, a.realized, a.gain, a.lo, a.hi) == \
            areas_twin(c, reward, keep, pareto, total, probes, zero)


@settings(max_examples=300, deadline=None)
@given(st.lists(cells(), min_size=1, max_size=4))
def test_a_net_curve_never_scores_better_than_its_gross_twin(cs):
    gross, net = [], []
    for total, probes, zero, pareto, cost, reward, extra in cs:
        nc = [a + b for a, b in zip(cost, extra)]
        g = cell_areas(cost, reward, _keep(cost, reward, total, probes), pareto, total, probes, zero)
        m = cell_areas(nc, reward, _keep(nc, reward, total, probes), pareto, total, probes, zero)
        assert m.gap_full >= g.gap_full and m.realized <= g.realized and m.gain == g.gain
        assert (share(m.realized, m.gain) or 0) <= (share(g.realized, g.gain) or 0)
        gross.append(g)
        net.append(m)
    w = Fraction(1, len(cs))         # one model: the macro chain is the mean over its cells
    gain = sum(w * a.gain for a in gross)
    assert sum(w * a.gap_full for a in net) >= sum(w * a.gap_full for a in gross)
    assert (share(sum(w * a.realized for a in net), gain) or 0) <= \
        (share(sum(w * a.realized for a in gross), gain) or 0)


def test_a_cost_zero_point_below_a0_no_longer_replaces_a0():
    # The case: T = 10 tokens, P = 10 probes, A0 = 5 correct; the gross sweep has a
    # cost-0 point at 2 (below A0) and a point (10, 8). Its net twin pays 4 signal tokens for
    # the cost-0 point. Before the floor the gross curve sat at 2 on [0, 10) and the net
    # one at 5 on [0, 4): net scored the better area.
    pareto = (np.array([0, 10]), np.array([5, 9]))
    gross = cell_areas([0, 10], [2, 8], [True, True], pareto, 10, 10, 5)
    net = cell_areas([4, 10], [2, 8], [True, True], pareto, 10, 10, 5)
    # both sit at A0 below cost 10 (only their ranges differ: [0, 1] and [0.4, 1])
    assert (gross.gap_full, gross.realized, gross.gain) == (net.gap_full, net.realized, net.gain)
    assert gross.realized == 0 and gross.gap_full == Fraction(0)   # M = A0 = F on [0, 10)
