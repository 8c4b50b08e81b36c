"""The cap scan (`effort.scan`) against a brute force over every integer cap, on ragged hypothesis cells."""

from fractions import Fraction

import numpy as np
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from otbench.analysis.effort import CellArrays, scan
from otbench.analysis.resampling import percentile


@st.composite
def cells(draw):
    T = draw(st.integers(1, 6))
    P = draw(st.lists(st.integers(1, 4), min_size=T, max_size=T))
    rows = []
    for t in range(T):
        n = draw(st.integers(0, 5))
        steps = draw(st.lists(st.sampled_from([0, 1, 2, 5, 9]), min_size=n, max_size=n))
        C = draw(st.lists(st.integers(0, P[t]), min_size=n + 1, max_size=n + 1))
        rows.append((np.r_[0, np.cumsum(steps)].astype(np.int64), np.asarray(C, dtype=np.int64)))
    K = max(len(L) for L, _ in rows)
    pad = lambda v: np.r_[v, np.repeat(v[-1], K - len(v))]      # noqa: E731  (padding repeats the end)
    cell = CellArrays(L=np.stack([pad(L) for L, _ in rows]), C=np.stack([pad(C) for _, C in rows]),
                      n=np.asarray([len(L) - 1 for L, _ in rows], dtype=np.int64),
                      P=np.asarray(P, dtype=np.int64))
    B = draw(st.integers(1, 12))
    W = np.asarray(draw(st.lists(st.lists(st.integers(0, 3), min_size=T, max_size=T),
                                 min_size=B, max_size=B)), dtype=np.int64)
    return cell, W


def brute(cell, W, cap, lo):
    """Lower percentile and per-replicate differences at one integer cap, by loops."""
    T = cell.n.size
    k = [max(j for j in range(cell.n[t] + 1) if cell.L[t, j] <= cap) for t in range(T)]
    Cc = np.array([cell.C[t, k[t]] for t in range(T)])
    Cf = np.array([cell.C[t, cell.n[t]] for t in range(T)])
    probes = W @ cell.P
    d = np.array([(W[b] @ Cc - W[b] @ Cf) / probes[b] if probes[b] else np.nan
                  for b in range(W.shape[0])])
    ok = d[~np.isnan(d)]
    return (np.percentile(ok, lo) if ok.size else np.nan), d, Fraction(int(Cc.sum() - Cf.sum()),
                                                                        int(cell.P.sum()))


@settings(max_examples=150, deadline=None)
@given(cells(), st.sampled_from([0.0, 1.3, 7.7, 25.0]))
def test_scan_equals_brute_force(data, points):
    cell, W = data
    d = Fraction(str(points)) / 100
    sc = scan(cell, W, [d], 10.0, percentile)
    top = int(max(cell.L[t, cell.n[t]] for t in range(cell.n.size)))
    got = {int(c): j for j, c in enumerate(sc.caps)}
    first_lb = first_pt = None
    first_rep = np.full(W.shape[0], -1.0)
    for cap in range(top):
        lb, diffs, pt = brute(cell, W, cap, 10.0)
        if cap in got:                                   # every candidate: the same lower bound
            j = got[cap]
            assert (np.isnan(lb) and np.isnan(sc.lower[j])) or abs(lb - sc.lower[j]) < 1e-12
        # no near-tie at the threshold (an exact 0 is exact on both sides)
        assume(np.isnan(lb) or lb == 0.0 or abs(lb + float(d)) > 1e-9)
        if first_lb is None and lb >= -float(d):
            first_lb = cap
        if first_pt is None and pt >= -d:
            first_pt = cap
        hit = (first_rep == -1) & (diffs >= -float(d))
        first_rep[hit] = cap
    meets = np.flatnonzero(sc.lower >= -float(d))
    assert (int(sc.caps[meets[0]]) if meets.size else None) == first_lb
    pm = np.flatnonzero(sc.point_meets[0])
    assert (int(sc.caps[pm[0]]) if pm.size else None) == first_pt
    defined = (W @ cell.P) > 0
    caps = np.append(sc.caps, -1)
    f = sc.first[0]
    assert np.all((f == -2) == ~defined)
    np.testing.assert_array_equal(np.where(f >= 0, caps[np.maximum(f, 0)], -1)[defined],
                                  first_rep[defined])
