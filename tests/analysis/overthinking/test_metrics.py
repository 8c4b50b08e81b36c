"""Overthinking metrics (SPEC §4): kernels against plain-Python twins, transformations, CLI."""

import itertools
import json
import math
import warnings
from collections import defaultdict
from fractions import Fraction

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from otbench.analysis.measurement._build import from_ragged, ragged
from otbench.analysis.measurement._io import save
from otbench.analysis.overthinking._aggregate import build_layout, spearman
from otbench.analysis.overthinking._metrics import (
    DEFAULT_BIN_EDGES,
    METRICS,
    format_metrics,
    local_change_counts,
    metrics,
    summarize,
    trajectory_metrics,
)
from otbench.cli._metrics import metrics_cmd

# Means of float64 fractions are compared with the exact rational reference
# to 1e-12: each mean adds at most a few dozen correctly rounded terms of
# magnitude <= 1 (or <= ~1e5 tokens, compared relatively), so rounding stays
# many orders of magnitude below this.
TOL = 1e-12


# -- building sets -----------------------------------------------------------

def build(rows, synthetic=False):
    """A MeasurementSet from row dicts (model, group, question, traj, P, L, C, y)."""
    return from_ragged(
        model=[r["model"] for r in rows], group=[r["group"] for r in rows],
        question=[r["question"] for r in rows],
        trajectory=np.array([r["traj"] for r in rows], dtype=np.int64),
        probes=np.array([r["P"] for r in rows], dtype=np.int64),
        L=ragged([r["L"] for r in rows], np.int64), C=ragged([r["C"] for r in rows], np.int64),
        y=np.array([r["y"] for r in rows], dtype=np.int64), synthetic=synthetic)


def row(model, group, question, traj, P, L, C, y):
    return dict(model=model, group=group, question=question, traj=traj, P=P, L=L, C=C, y=y)


# Token increments: zero-length steps, small steps, and jumps that cross the
# default 2048-token bins and the open bin past 32768.
INCREMENTS = [0, 0, 1, 5, 64, 700, 2048, 40000]


@st.composite
def trajectories(draw, P):
    n = draw(st.integers(0, 6))
    L = [0] + list(itertools.accumulate(draw(st.lists(st.sampled_from(INCREMENTS),
                                                      min_size=n, max_size=n))))
    if draw(st.integers(0, 3)) == 0:          # flat curve: k* = 0
        C = [draw(st.integers(0, P))] * (n + 1)
    else:                                      # small P makes ties common
        C = draw(st.lists(st.integers(0, P), min_size=n + 1, max_size=n + 1))
    return L, C, draw(st.integers(0, 1))


@st.composite
def ragged_sets(draw):
    """Row dicts of a random set: 1-3 models and groups, 1-3 questions per group
    (ids reused across groups), unequal R (1-4), models missing questions or whole
    groups, n = 0, zero-length steps, flat curves, shuffled input order."""
    n_models, n_groups = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    rows = []
    for g in range(n_groups):
        for q in range(draw(st.integers(1, 3))):
            for m in range(n_models):
                if draw(st.integers(0, 4)) == 0:
                    continue                   # this model lacks the question
                P = draw(st.sampled_from([1, 2, 4]))
                for s in range(draw(st.integers(1, 4))):
                    L, C, y = draw(trajectories(P))
                    rows.append(row(f"m{m}", f"g{g}", f"q{q}", 3 * s + 1, P, L, C, y))
    if not rows:
        L, C, y = draw(trajectories(2))
        rows.append(row("m0", "g0", "q0", 0, 2, L, C, y))
    perm = draw(st.permutations(range(len(rows))))
    return [rows[i] for i in perm]


# More than 64 edges takes the binary-search branch of `local_change_counts`.
EDGES = st.sampled_from([None, [0], [0, 5], [0, 3, 64, 700], [0, 2048, 4096],
                         list(range(0, 700, 10))])


# -- plain-Python twins --------------------------------------------------------

def ref_trajectory(L, C, P):
    """(k*, OR, AD, P(n), P(0)) as exact Fractions, by the definitions of SPEC §4."""
    n = len(L) - 1
    k = C.index(max(C))                       # list.index: the earliest maximizer
    OR = Fraction(L[n] - L[k], L[n]) if L[n] else Fraction(0)
    return k, OR, Fraction(C[k] - C[n], P), Fraction(C[n], P), Fraction(C[0], P)


def ref_mean(xs):
    return sum(xs, Fraction(0)) / len(xs)


def ref_mean_or_none(xs):
    return None if not xs or any(x is None for x in xs) else ref_mean(xs)


def ref_metrics(rows, bin_edges=None):
    """The whole `metrics` result by loops over dicts, in exact arithmetic."""
    edges = list(range(0, 32769, 2048)) if bin_edges is None else list(bin_edges)
    per_q = defaultdict(lambda: defaultdict(list))   # (model, group) -> question -> [values]
    for r in rows:
        k, OR, AD, pn, p0 = ref_trajectory(r["L"], r["C"], r["P"])
        per_q[(r["model"], r["group"])][r["question"]].append(
            {"or": OR, "ad": AD, "full_acc": Fraction(r["y"]), "tokens": Fraction(r["L"][-1]),
             "endpoint_acc": pn, "zero_step_acc": p0})
    cells = {}
    for key, qs in per_q.items():
        c = {"n_questions": len(qs), "n_trajectories": sum(len(v) for v in qs.values())}
        for name in ("or", "ad", "full_acc", "tokens", "endpoint_acc", "zero_step_acc"):
            c[name] = ref_mean([ref_mean([t[name] for t in v]) for v in qs.values()])
        for name, base in (("pairwise_or", "or"), ("pairwise_ad", "ad")):
            pq = [ref_mean([abs(a[base] - b[base]) for a, b in itertools.combinations(v, 2)])
                  for v in qs.values() if len(v) >= 2]
            c[name] = ref_mean(pq) if pq else None
        cells[key] = c
    models = sorted({m for m, _ in cells})
    groups = sorted({g for _, g in cells})
    by_model = {m: {k: ref_mean_or_none([c[k] for (mm, _), c in cells.items() if mm == m])
                    for k in METRICS} for m in models}
    by_group = {g: {k: ref_mean_or_none([c[k] for (_, gg), c in cells.items() if gg == g])
                    for k in METRICS} for g in groups}
    macro = {k: ref_mean_or_none([by_model[m][k] for m in models]) for k in METRICS}
    keys = sorted(cells)
    xs = [float(cells[k]["or"]) for k in keys]
    ys = [float(cells[k]["ad"]) for k in keys]
    if len(keys) < 2 or len(set(xs)) < 2 or len(set(ys)) < 2:
        rho = None
    else:
        rho = float(scipy.stats.spearmanr(xs, ys).statistic)
    counts = [[0, 0, 0] for _ in edges]             # pos, neg, flat
    for r in rows:
        for k in range(1, len(r["L"])):
            b = max(i for i, e in enumerate(edges) if e <= r["L"][k])
            d = r["C"][k] - r["C"][k - 1]
            counts[b][0 if d > 0 else 1 if d < 0 else 2] += 1
    frac = [[None if sum(c) == 0 else Fraction(x, sum(c)) for x in c] for c in counts]
    return {
        "cells": cells, "by_model": by_model, "by_group": by_group, "macro": macro,
        "spearman_or_ad": rho,
        "local_changes": {
            "bin_edges": edges,
            "positive": [f[0] for f in frac], "negative": [f[1] for f in frac],
            "flat": [f[2] for f in frac],
            "neg_pos_ratio": [None if c[0] == 0 else Fraction(c[1], c[0]) for c in counts],
        },
    }


def close(got, want, where):
    if want is None:
        assert got is None, f"{where}: got {got}, expected null"
        return
    assert got is not None, f"{where}: got null, expected {float(want)}"
    w = float(want)
    assert abs(got - w) <= TOL * max(1.0, abs(w)), f"{where}: got {got!r}, expected {w!r}"


def assert_matches_reference(result, ref):
    got_cells = {(c["model"], c["group"]): c for c in result["cells"]}
    assert set(got_cells) == set(ref["cells"])
    assert [(c["model"], c["group"]) for c in result["cells"]] == sorted(got_cells)
    for key, want in ref["cells"].items():
        got = got_cells[key]
        assert got["n_questions"] == want["n_questions"]
        assert got["n_trajectories"] == want["n_trajectories"]
        for k in METRICS:
            close(got[k], want[k], f"cell {key} {k}")
    for level in ("by_model", "by_group"):
        assert list(result[level]) == list(ref[level])
        for name, vals in ref[level].items():
            for k in METRICS:
                close(result[level][name][k], vals[k], f"{level} {name} {k}")
    for k in METRICS:
        close(result["macro"][k], ref["macro"][k], f"macro {k}")
    close(result["spearman_or_ad"], ref["spearman_or_ad"], "spearman")
    lc, rlc = result["local_changes"], ref["local_changes"]
    assert lc["bin_edges"] == rlc["bin_edges"]
    for k in ("positive", "negative", "flat", "neg_pos_ratio"):
        assert len(lc[k]) == len(rlc[k])
        for i, (g, w) in enumerate(zip(lc[k], rlc[k])):
            close(g, w, f"local_changes {k}[{i}]")


# -- the hand-calculated example ------------------------------------------------

def tiny_rows():
    """Seven trajectories, P = 4; every expected number below is worked by hand."""
    return [
        # m1/A a1 t0: max C=3 first at k=1 (tie with k=2): OR=(40-10)/40=3/4, AD=(3-2)/4=1/4
        row("m1", "A", "a1", 0, 4, [0, 10, 20, 40], [1, 3, 3, 2], 1),
        # m1/A a1 t1: flat -> k*=0: OR=50/50=1, AD=0
        row("m1", "A", "a1", 1, 4, [0, 50], [2, 2], 0),
        # m1/A a2 t0: n=0, L(n)=0 -> OR=0 by definition, AD=0; R=1 (no pairs)
        row("m1", "A", "a2", 0, 4, [0], [4], 1),
        # m1/B b1 t0: zero-length first step; max at k=n=2 -> OR=0, AD=0
        row("m1", "B", "b1", 0, 4, [0, 0, 30], [0, 1, 4], 1),
        # m1/B b1 t1: k*=1 -> OR=(30-20)/30=1/3, AD=(4-0)/4=1
        row("m1", "B", "b1", 1, 4, [0, 20, 30], [0, 4, 0], 0),
        # m1/B b1 t2: max 2 first at k=0 -> OR=1, AD=0
        row("m1", "B", "b1", 2, 4, [0, 10, 20, 30], [2, 1, 2, 2], 1),
        # m2/A a1 t0: k*=n=2 -> OR=0, AD=0; m2 has no group B and no a2
        row("m2", "A", "a1", 0, 4, [0, 100, 200], [1, 1, 2], 0),
    ]


def test_hand_calculated_example():
    result = metrics(build(tiny_rows(), synthetic=True), bin_edges=[0, 25, 1000])
    F = Fraction
    # Cells: question means first, then the mean over questions.
    #   m1/A: a1 -> OR (3/4+1)/2=7/8, AD 1/8, y 1/2, tokens 45, P(n) 1/2, P(0) 3/8,
    #         pairwise |3/4-1| = 1/4 (OR), |1/4-0| = 1/4 (AD); a2 -> 0, 0, 1, 0, 1, 1.
    #   m1/B: one question of three trajectories; pairwise OR over (0,1/3,1) = (1/3+1+2/3)/3.
    #   m2/A: one trajectory: pairwise undefined -> null.
    want_cells = {
        ("m1", "A"): dict(n_questions=2, n_trajectories=3, **{
            "or": F(7, 16), "ad": F(1, 16), "full_acc": F(3, 4), "tokens": F(45, 2),
            "endpoint_acc": F(3, 4), "zero_step_acc": F(11, 16),
            "pairwise_or": F(1, 4), "pairwise_ad": F(1, 4)}),
        ("m1", "B"): dict(n_questions=1, n_trajectories=3, **{
            "or": F(4, 9), "ad": F(1, 3), "full_acc": F(2, 3), "tokens": F(30),
            "endpoint_acc": F(1, 2), "zero_step_acc": F(1, 6),
            "pairwise_or": F(2, 3), "pairwise_ad": F(2, 3)}),
        ("m2", "A"): dict(n_questions=1, n_trajectories=1, **{
            "or": F(0), "ad": F(0), "full_acc": F(0), "tokens": F(200),
            "endpoint_acc": F(1, 2), "zero_step_acc": F(1, 4),
            "pairwise_or": None, "pairwise_ad": None}),
    }
    got = {(c["model"], c["group"]): c for c in result["cells"]}
    for key, want in want_cells.items():
        for k, v in want.items():
            if isinstance(v, int) and not isinstance(v, Fraction):
                assert got[key][k] == v
            else:
                close(got[key][k], v, f"{key} {k}")
    # m1 = mean of its two cells; m2 = its one cell; macro = (m1 + m2) / 2;
    # the pairwise averages over m2's null cell are null (equal weights undefined).
    m1 = {"or": F(127, 288), "ad": F(19, 96), "full_acc": F(17, 24), "tokens": F(105, 4),
          "endpoint_acc": F(5, 8), "zero_step_acc": F(41, 96),
          "pairwise_or": F(11, 24), "pairwise_ad": F(11, 24)}
    macro = {"or": F(127, 576), "ad": F(19, 192), "full_acc": F(17, 48), "tokens": F(905, 8),
             "endpoint_acc": F(9, 16), "zero_step_acc": F(65, 192),
             "pairwise_or": None, "pairwise_ad": None}
    group_a = {"or": F(7, 32), "ad": F(1, 32), "full_acc": F(3, 8), "tokens": F(445, 4),
               "endpoint_acc": F(5, 8), "zero_step_acc": F(15, 32),
               "pairwise_or": None, "pairwise_ad": None}
    for k in METRICS:
        close(result["by_model"]["m1"][k], m1[k], f"m1 {k}")
        close(result["by_model"]["m2"][k], want_cells[("m2", "A")][k], f"m2 {k}")
        close(result["macro"][k], macro[k], f"macro {k}")
        close(result["by_group"]["A"][k], group_a[k], f"A {k}")
        close(result["by_group"]["B"][k], want_cells[("m1", "B")][k], f"B {k}")
    # Cell OR (7/16, 4/9, 0) and AD (1/16, 1/3, 0) have the same ranking.
    assert result["spearman_or_ad"] == pytest.approx(1.0, abs=TOL)
    # Changes by L(k): [0,25): +,0,- (m1/A t0 k=1,2; m1/B t2 k=1), + (t0 k=1 at L=0),
    # + (t1 k=1), + (t2 k=2) -> 4 pos, 1 neg, 1 flat.  [25,1000): - (m1/A t0 k=3),
    # 0 (t1), + (m1/B t0 k=2), - (t1 k=2), 0 (t2 k=3), 0, + (m2) -> 2, 2, 3.  >=1000: none.
    lc = result["local_changes"]
    assert lc["bin_edges"] == [0, 25, 1000]
    for k, want in (("positive", [F(4, 6), F(2, 7), None]), ("negative", [F(1, 6), F(2, 7), None]),
                    ("flat", [F(1, 6), F(3, 7), None]), ("neg_pos_ratio", [F(1, 4), F(1), None])):
        for i, w in enumerate(want):
            close(lc[k][i], w, f"{k}[{i}]")
    assert result["synthetic"] is True and result["schema"] == "otbench.metrics/1"
    assert_matches_reference(result, ref_metrics(tiny_rows(), [0, 25, 1000]))


def test_subset_reports_only_present_cells():
    ms = build(tiny_rows())
    sub = ms.take(np.flatnonzero(ms.cell_model[ms.cell] == ms.models.index("m1")))
    result = metrics(sub)
    assert list(result["by_model"]) == ["m1"]
    assert result["macro"] == result["by_model"]["m1"]
    assert_matches_reference(result, ref_metrics([r for r in tiny_rows() if r["model"] == "m1"]))


# -- property tests against the twins ---------------------------------------------

@settings(max_examples=30)
@given(ragged_sets())
def test_trajectory_kernel_matches_twin(rows):
    ms = build(rows)
    tm = trajectory_metrics(jnp.asarray(ms.L), jnp.asarray(ms.C), jnp.asarray(ms.n),
                            jnp.asarray(ms.probes))
    key = {(r["model"], r["group"], r["question"], r["traj"]): r for r in rows}
    for t in range(ms.num_trajectories):
        m, g = ms.cell_name(ms.cell[t])
        r = key[(m, g, ms.question_id[ms.question[t]], int(ms.trajectory[t]))]
        k, OR, AD, pn, p0 = ref_trajectory(r["L"], r["C"], r["P"])
        assert int(tm.k_star[t]) == k
        assert int(tm.tokens[t]) == r["L"][-1] and int(tm.tokens_star[t]) == r["L"][k]
        # Each is one correctly rounded float64 division of the same integers,
        # so it equals the exact fraction rounded once: compare exactly.
        assert float(tm.ratio[t]) == float(OR)
        assert float(tm.degradation[t]) == float(AD)
        assert float(tm.endpoint[t]) == float(pn) and float(tm.zero_step[t]) == float(p0)


@settings(max_examples=25)
@given(ragged_sets(), EDGES)
def test_metrics_match_reference(rows, edges):
    result = metrics(build(rows), bin_edges=edges)
    assert_matches_reference(result, ref_metrics(rows, edges))
    json.dumps(result, allow_nan=False)       # JSON-able, no NaN


@settings(max_examples=20)
@given(ragged_sets(), st.data())
def test_weights_equal_explicitly_repeated_rows(rows, data):
    """Multiplicity weights (bootstrap form) == metrics of the set with rows and
    questions repeated: row weight w -> w copies of the trajectory, question weight
    u -> u copies of the question under new ids (SPEC §7 two-stage draw)."""
    ms = build(rows)
    layout, names = build_layout(ms)
    T, S = ms.num_trajectories, layout.num_segments
    w = np.array(data.draw(st.lists(st.integers(0, 3), min_size=T, max_size=T)))
    u = np.array(data.draw(st.lists(st.integers(0, 3), min_size=S, max_size=S)))
    seg = np.asarray(layout.seg)
    seg_cell = np.asarray(layout.seg_cell)
    # Keep every cell present in the repeated set (its first segment and that
    # segment's first row drawn at least once), so the two results align.
    for c in range(layout.num_cells):
        s0 = int(np.flatnonzero(seg_cell == c)[0])
        u[s0] = max(u[s0], 1)
        t0 = int(np.flatnonzero(seg == s0)[0])
        w[t0] = max(w[t0], 1)
    rep = []
    for t in range(T):
        m, g = ms.cell_name(ms.cell[t])
        for copy in range(u[seg[t]]):
            for j in range(w[t]):
                rep.append(row(m, g, f"{ms.question_id[ms.question[t]]}#{copy}",
                               10 * int(ms.trajectory[t]) + j, int(ms.probes[t]),
                               ms.L[t, :ms.n[t] + 1].tolist(), ms.C[t, :ms.n[t] + 1].tolist(),
                               int(ms.y[t])))
    # The repeated set through the plain-Python twin (exact, and no compile
    # for its shapes); `test_metrics_match_reference` ties the twin to `metrics`.
    want = ref_metrics(rep)
    tm = trajectory_metrics(jnp.asarray(ms.L), jnp.asarray(ms.C), jnp.asarray(ms.n),
                            jnp.asarray(ms.probes))
    s = summarize(tm, jnp.asarray(ms.y), jnp.asarray(w, dtype=jnp.float64),
                  jnp.asarray(u, dtype=jnp.float64), layout)

    def num(x):
        return None if math.isnan(float(x)) else float(x)

    assert sorted(want["cells"]) == list(names.cells)
    for c, key in enumerate(names.cells):
        for i, k in enumerate(METRICS):
            close(num(s.cell[i, c]), want["cells"][key][k], f"cell {key} {k}")
    for i, k in enumerate(METRICS):
        for j, m in enumerate(names.models):
            close(num(s.model[i, j]), want["by_model"][m][k], f"model {m} {k}")
        for j, g in enumerate(names.groups):
            close(num(s.group[i, j]), want["by_group"][g][k], f"group {g} {k}")
        close(num(s.macro[i]), want["macro"][k], f"macro {k}")
    close(num(s.spearman_or_ad), want["spearman_or_ad"], "spearman")


def test_unweighted_segment_is_excluded_not_zero():
    """A question with total weight 0 is dropped (not averaged in as 0); a cell
    with every weight 0 is NaN, and so are the averages over it."""
    ms = build(tiny_rows())
    layout, names = build_layout(ms)
    tm = trajectory_metrics(jnp.asarray(ms.L), jnp.asarray(ms.C), jnp.asarray(ms.n),
                            jnp.asarray(ms.probes))
    w = np.ones(ms.num_trajectories)
    w[np.asarray(layout.seg) == 1] = 0.0       # segment 1 = m1/A question a2
    w[ms.cell == 2] = 0.0                       # cell 2 = m2/A: no data at all
    s = summarize(tm, jnp.asarray(ms.y), jnp.asarray(w),
                  jnp.ones(layout.num_segments), layout)
    assert names.cells[2] == ("m2", "A")
    # m1/A is now question a1 alone: OR 7/8 (not (7/8 + 0) / 2).
    assert float(s.cell[METRICS.index("or"), 0]) == pytest.approx(7 / 8, abs=TOL)
    assert np.all(np.isnan(np.asarray(s.cell[:, 2])))
    assert np.all(np.isnan(np.asarray(s.model[:, 1])))   # m2
    assert np.all(np.isnan(np.asarray(s.group[:, 0])))   # A
    assert np.all(np.isnan(np.asarray(s.macro)))
    assert not np.any(np.isnan(np.asarray(s.model[:6, 0])))  # m1 still defined


# -- Spearman ------------------------------------------------------------------------

_spearman_jit = jax.jit(spearman)


@settings(max_examples=60)
@given(st.integers(0, 12).flatmap(lambda m: st.tuples(
    st.lists(st.sampled_from([0.0, 0.25, 0.5, 1.0, -3.0, 7.5]), min_size=m, max_size=m),
    st.lists(st.sampled_from([0.0, 0.1, 0.1, 2.0, -1.0]), min_size=m, max_size=m))))
def test_spearman_matches_scipy(xy):
    x, y = xy
    got = float(_spearman_jit(jnp.asarray(x, dtype=jnp.float64), jnp.asarray(y, dtype=jnp.float64)))
    if len(x) < 2 or len(set(x)) < 2 or len(set(y)) < 2:
        assert math.isnan(got)                 # documented: undefined -> NaN
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = float(scipy.stats.spearmanr(x, y).statistic)   # scipy 1.17, average ranks
    assert got == pytest.approx(want, abs=TOL)


def test_spearman_nan_input_is_nan():
    x = jnp.asarray([0.0, 1.0, jnp.nan])
    assert math.isnan(float(spearman(x, jnp.asarray([0.0, 1.0, 2.0]))))


# -- transformations --------------------------------------------------------------

# Each example compiles the kernels for its own shapes (and eager mode every
# primitive), so the slow transformation tests use few examples; the twins
# above cover the values.
@settings(max_examples=2)
@given(ragged_sets())
def test_jit_and_eager_identical(rows):
    """Integer results (k*, L, change counts) and per-trajectory fractions (one
    division each) are identical; aggregated means may differ in the last bit,
    because XLA fuses the jitted graph (e.g. a division by a count becomes a
    multiplication by its reciprocal), so they are compared to 4 ulp."""
    ms = build(rows)
    layout, _ = build_layout(ms)
    args = (jnp.asarray(ms.L), jnp.asarray(ms.C), jnp.asarray(ms.n), jnp.asarray(ms.probes))
    edges = jnp.asarray([0, 5, 700], dtype=jnp.int64)
    w = jnp.ones(ms.num_trajectories, dtype=jnp.float64)
    u = jnp.ones(layout.num_segments, dtype=jnp.float64)
    tm = trajectory_metrics(*args)
    s = summarize(tm, jnp.asarray(ms.y), w, u, layout)
    lc = local_change_counts(*args[:3], edges)
    with jax.disable_jit():
        tm_e = trajectory_metrics(*args)
        s_e = summarize(tm_e, jnp.asarray(ms.y), w, u, layout)
        lc_e = local_change_counts(*args[:3], edges)
    for x, y in zip(jax.tree.leaves((tm, lc)), jax.tree.leaves((tm_e, lc_e))):
        assert x.dtype == y.dtype
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    for x, y in zip(s, s_e):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=4 * np.finfo(np.float64).eps,
                                   atol=0, equal_nan=True)


@settings(max_examples=4)
@given(ragged_sets(), st.data())
def test_vmap_over_replicates_equals_loop(rows, data):
    ms = build(rows)
    layout, _ = build_layout(ms)
    tm = trajectory_metrics(jnp.asarray(ms.L), jnp.asarray(ms.C), jnp.asarray(ms.n),
                            jnp.asarray(ms.probes))
    T, S, reps = ms.num_trajectories, layout.num_segments, 3
    w = np.array(data.draw(st.lists(st.integers(0, 4), min_size=reps * T, max_size=reps * T)),
                 dtype=np.float64).reshape(reps, T)
    u = np.array(data.draw(st.lists(st.integers(0, 4), min_size=reps * S, max_size=reps * S)),
                 dtype=np.float64).reshape(reps, S)
    y = jnp.asarray(ms.y)
    batched = jax.vmap(summarize, in_axes=(None, None, 0, 0, None))(
        tm, y, jnp.asarray(w), jnp.asarray(u), layout)
    for r in range(reps):
        one = summarize(tm, y, jnp.asarray(w[r]), jnp.asarray(u[r]), layout)
        for got, want in zip(batched, one):
            np.testing.assert_allclose(np.asarray(got[r]), np.asarray(want), rtol=0, atol=TOL,
                                       equal_nan=True)


def test_second_call_does_not_recompile():
    ms = build(tiny_rows())
    metrics(ms)
    sizes = [f._cache_size() for f in (trajectory_metrics, summarize, local_change_counts)]
    metrics(ms)
    assert [f._cache_size() for f in (trajectory_metrics, summarize, local_change_counts)] == sizes


def test_default_bins_put_long_progress_in_the_open_bin():
    rows = [row("m", "g", "q", 0, 2, [0, 100, 32767, 32768, 50000], [0, 1, 1, 0, 2], 1)]
    lc = metrics(build(rows))["local_changes"]
    assert lc["bin_edges"] == list(DEFAULT_BIN_EDGES) and lc["bin_edges"][-1] == 32768
    # L=100 -> bin 0 (+); 32767 -> bin 15 (flat); 32768 and 50000 -> open bin 16 (-, +).
    assert lc["positive"][0] == 1.0 and lc["flat"][15] == 1.0
    assert lc["positive"][16] == 0.5 and lc["negative"][16] == 0.5
    assert lc["neg_pos_ratio"][16] == 1.0 and lc["neg_pos_ratio"][15] is None
    assert lc["positive"][1] is None


def test_many_bins_match_reference():
    """Over 64 edges `local_change_counts` switches to a binary search; same tallies."""
    edges = list(range(0, 1000, 5))
    rows = tiny_rows()
    assert_matches_reference(metrics(build(rows), bin_edges=edges), ref_metrics(rows, edges))


# -- argument validation -------------------------------------------------------------

@pytest.mark.parametrize("edges, match", [
    ([], r"`bin_edges` must be a non-empty 1-D sequence of integers"),
    ([0.0, 2048.0], r"`bin_edges` must be a non-empty 1-D sequence of integers"),
    ([[0, 1]], r"`bin_edges` must be a non-empty 1-D sequence of integers"),
    ([1, 2048], r"`bin_edges` must start at 0, got 1\."),
    ([0, 2048, 2048], r"`bin_edges` must be strictly increasing\."),
])
def test_bin_edges_validation(edges, match):
    with pytest.raises(ValueError, match=match):
        metrics(build(tiny_rows()), bin_edges=edges)


def test_ms_validation():
    with pytest.raises(TypeError, match=r"`ms` must be a MeasurementSet, got dict\."):
        metrics({})
    empty = build(tiny_rows()).take(np.zeros(0, dtype=np.int64))
    with pytest.raises(ValueError, match=r"`ms` has no trajectories; metrics need at least one\."):
        metrics(empty)


# -- formatting and CLI -------------------------------------------------------------

def test_format_metrics_tables():
    text = format_metrics(metrics(build(tiny_rows(), synthetic=True), bin_edges=[0, 25, 1000]))
    lines = text.splitlines()
    assert "SYNTHETIC DATA" in lines[0]
    i = lines.index("Overthinking Ratio OR (%)")
    assert lines[i + 1].split() == ["model", "A", "B", "Avg."]
    assert lines[i + 2].split() == ["m1", "43.8", "44.4", "44.1"]     # 7/16, 4/9, 127/288
    assert lines[i + 3].split() == ["m2", "0.0", "-", "0.0"]          # no m2/B cell
    assert lines[i + 4].split() == ["Avg.", "21.9", "44.4", "22.0"]   # 7/32, 4/9, 127/576
    j = lines.index("Accuracy Degradation AD (pp)")
    assert lines[j + 2].split() == ["m1", "6.25", "33.33", "19.79"]
    assert "Original full-thinking accuracy (%)" in lines
    assert "Mean full thinking tokens L(n)" in lines
    assert "SYNTHETIC" not in format_metrics(metrics(build(tiny_rows())))


def test_cli_prints_tables_and_writes_json(tmp_path):
    save(build(tiny_rows(), synthetic=True), tmp_path / "set")
    out = tmp_path / "m.json"
    res = CliRunner().invoke(metrics_cmd, [str(tmp_path / "set"), "--json", str(out)])
    assert res.exit_code == 0, res.output
    assert "Overthinking Ratio OR (%)" in res.stdout and "SYNTHETIC DATA" in res.stdout
    data = json.loads(out.read_text())
    assert set(data) == {"schema", "synthetic", "cells", "by_model", "by_group", "macro",
                         "spearman_or_ad", "local_changes", "content_hash"}
    assert data["content_hash"] == json.loads((tmp_path / "set" / "manifest.json").read_text())[
        "content_hash"]
    assert data["schema"] == "otbench.metrics/1" and data["synthetic"] is True
    assert set(data["cells"][0]) == {"model", "group", "n_questions", "n_trajectories", *METRICS}
    assert set(data["macro"]) == set(METRICS)
    assert set(data["local_changes"]) == {"bin_edges", "positive", "negative", "flat",
                                          "neg_pos_ratio"}
    assert data["macro"]["or"] == pytest.approx(127 / 576, abs=TOL)


def test_cli_writes_to_the_sets_results_folder_by_default(tmp_path):
    """Without --json the document lands where `otbench report DIR` looks for it."""
    save(build(tiny_rows(), synthetic=True), tmp_path / "set")
    res = CliRunner().invoke(metrics_cmd, [str(tmp_path / "set")])
    assert res.exit_code == 0, res.output
    path = tmp_path / "set" / "results" / "metrics.json"
    assert res.stdout.splitlines()[-1] == f"wrote {path}"
    assert json.loads(path.read_text())["schema"] == "otbench.metrics/1"


def test_cli_corrupted_set_exits_2_with_one_line(tmp_path):
    save(build(tiny_rows()), tmp_path / "set")
    part = next((tmp_path / "set").rglob("*.parquet"))
    part.write_bytes(part.read_bytes()[:-7] + b"garbage")
    res = CliRunner().invoke(metrics_cmd, [str(tmp_path / "set")])
    assert res.exit_code == 2
    err = res.stderr.strip().splitlines()
    assert len(err) == 1 and not err[0].startswith("Traceback") and "sha256" in err[0]
    assert "Traceback" not in res.output


def test_cli_missing_directory_exits_2(tmp_path):
    res = CliRunner().invoke(metrics_cmd, [str(tmp_path / "nope")])
    assert res.exit_code == 2
    assert len(res.stderr.strip().splitlines()) == 1 and "not a directory" in res.stderr
