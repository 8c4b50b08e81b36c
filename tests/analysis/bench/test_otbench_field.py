"""The field's methods (issue 27): each stop restated case by case, and net = gross + signal cost exactly.

Dynasor-CoT's and DEER's rules on otbench's STP answer probe are ``dynasor-cot-stp`` / ``deer-stp``;
the methods on their own probes (``dynasor-cot``, ``deer``) are in test_otbench_own_probes.py."""

from fractions import Fraction

import numpy as np
import pytest
from _otbench_helpers import bench_sets
from hypothesis import given, settings
from otbench.analysis import from_ragged, ragged
from otbench.analysis.bench import evaluate, load_method, resolve
from otbench.analysis.methods._features import units_of
from otbench.analysis.bench._walk import dee_positions, fb_positions
from otbench.analysis.measurement import add_field_signals, simulate


def field_set(rows, split="test"):
    """rows: [(L, C, answer, hesitation, conf, answer_tokens)]; one cell, one question per row,
    plus a train and a validation question (copies of the first row)."""
    rows = [rows[0], rows[0]] + list(rows)
    names = ["answer", "hesitation", "answer_conf", "answer_tokens"]
    q = [f"q{i}" for i in range(len(rows))]
    sp = ["train", "validation"] + [split] * (len(rows) - 2)
    return from_ragged(model=["m"] * len(rows), group=["g"] * len(rows), question=q,
                       trajectory=np.zeros(len(rows), dtype=np.int64),
                       probes=np.full(len(rows), 4), L=ragged([r[0] for r in rows], np.int64),
                       C=ragged([r[1] for r in rows], np.int64),
                       y=np.zeros(len(rows), dtype=np.int64), split=sp,
                       signals={nm: ragged([r[2 + i] for r in rows], np.float64)
                                for i, nm in enumerate(names)},
                       synthetic=True)


def stops(ms, name, theta, **kw):
    test = ms.take(np.flatnonzero(ms.split == 2))
    unit, units = units_of(test, None)
    m = load_method(name, **kw)
    m.fit(test, test)
    pos = dee_positions if m.strategy == "dee" else fb_positions
    return pos(test, unit, units, resolve(m), theta).tolist()


# -- plain twins of the sources' rules, position by position ------------------------

def dynasor_twin(ans, hes, n, w):
    """Probe before each chunk; after chunk i (position i+1) stop if the last w probes agree, certain."""
    answers, certain = [], []
    for i in range(n):
        answers.append(ans[i])
        certain.append(hes[i] == 0)
        last = answers[-w:]
        if (len(last) == w and all(a >= 0 for a in last) and len(set(last)) == 1
                and all(certain[-w:]) and i + 1 < n):
            return i + 1
    return n


def deer_twin(conf, n, theta, max_judge=10):
    for k in range(1, n):          # no check before thinking (no_thinking = 0)
        if k > max_judge:
            break
        if conf[k] > theta:        # strictly above the threshold
            return k
    return n


def consistency_twin(ans, n, theta):
    for k in range(1, n):
        lo = k - theta
        if lo >= 1 and all(a >= 0 for a in ans[lo:k + 1]) and len(set(ans[lo:k + 1])) == 1:
            return k
    return n


L6 = [0, 10, 20, 30, 40, 50, 60]
C6 = [0, 1, 2, 3, 3, 3, 4]
Z6 = [0] * 7
T6 = [5] * 7


def test_dynasor_cases():
    rows = [
        (L6, C6, [0, 1, 1, 1, 1, 1, 1], Z6, Z6, T6),          # probes 1, 2 agree -> stop at 3
        (L6, C6, [0, 0, 0, 0, 0, 0, 0], [0, 1, 0, 0, 0, 0, 0], Z6, T6),  # hesitation at 1 -> 4
        (L6, C6, [-1, -1, 2, 2, 2, 2, 2], Z6, Z6, T6),        # no answer at 0, 1 -> 4
        (L6, C6, [0, 1, 0, 1, 0, 1, 0], Z6, Z6, T6),          # never agree -> end
    ]
    ms = field_set(rows)
    assert stops(ms, "dynasor-cot-stp", 2.0) == [3, 4, 4, 6]
    assert stops(ms, "dynasor-cot-stp", 3.0) == [4, 5, 5, 6]
    for w in (1, 2, 3, 5):
        assert stops(ms, "dynasor-cot-stp", float(w)) == [dynasor_twin(r[2], r[3], 6, w) for r in rows]


def test_deer_cases():
    rows = [
        (L6, C6, Z6, Z6, [0.99, 0.5, 0.96, 0.2, 0.2, 0.2, 0.2], T6),   # k = 0 never checked -> 2
        (L6, C6, Z6, Z6, [0.1, 0.95, 0.95, 0.95, 0.95, 0.95, 0.99], T6),  # == θ is no stop; end
        (L6, C6, Z6, Z6, [0.1, 0.1, 0.1, 0.97, 0.1, 0.1, 0.1], T6),       # 3 (beyond 2 checks)
    ]
    ms = field_set(rows)
    assert stops(ms, "deer-stp", 0.95) == [2, 6, 3]
    assert stops(ms, "deer-stp", 0.95, max_judge_steps=2) == [2, 6, 6]
    for th in (0.05, 0.5, 0.95, 0.96, 1.0):
        assert stops(ms, "deer-stp", th) == [deer_twin(r[4], 6, th) for r in rows]


def test_answer_consistency_cases():
    rows = [
        (L6, C6, [0, 5, 5, 5, 1, 1, 1], Z6, Z6, T6),   # θ=2: answers at 1..3 equal -> 3
        (L6, C6, [0, 0, 0, 1, 1, 1, 1], Z6, Z6, T6),   # k=0 is not probed -> 5 for θ=2
        (L6, C6, [2, -1, -1, 3, 3, 3, 3], Z6, Z6, T6),  # no answer at 1, 2 -> 5 for θ=2
    ]
    ms = field_set(rows)
    assert stops(ms, "answer-consistency", 2.0) == [3, 5, 5]
    for th in (1, 2, 3, 4):
        assert stops(ms, "answer-consistency", float(th)) == [consistency_twin(r[2], 6, th) for r in rows]


def test_budget_forcing_cap():
    rows = [(L6, C6, Z6, Z6, Z6, T6), ([0, 0, 7, 25, 25, 90, 100], C6, Z6, Z6, Z6, T6)]
    ms = field_set(rows)
    assert stops(ms, "budget-forcing", 25.0) == [2, 4]
    assert stops(ms, "budget-forcing", 0.0) == [0, 1]
    assert stops(ms, "budget-forcing", np.inf) == [6, 6]


def test_random_sets_follow_the_twins():
    ms = add_field_signals(simulate("tiny", 3), 3)
    ms = ms.take(np.arange(ms.num_trajectories))
    from otbench.analysis.bench import assign_splits
    ms = assign_splits(ms)
    test = ms.take(np.flatnonzero(ms.split == 2))
    s = {nm: test.signals[nm] for nm in ("answer", "hesitation", "answer_conf")}
    n = test.n.tolist()
    for w in (2, 3):
        want = [dynasor_twin(s["answer"][t].tolist(), s["hesitation"][t].tolist(), n[t], w)
                for t in range(len(n))]
        assert stops(ms, "dynasor-cot-stp", float(w)) == want
    for th in (0.6, 0.9):
        assert stops(ms, "deer-stp", th) == [deer_twin(s["answer_conf"][t].tolist(), n[t], th)
                                         for t in range(len(n))]
    for th in (1, 3):
        assert stops(ms, "answer-consistency", float(th)) == [
            consistency_twin(s["answer"][t].tolist(), n[t], th) for t in range(len(n))]


def signal_twin(name, k, n, tok, L):
    """Tokens the source's signal decodes / prefills for a stop at k (declared + recorded), each
    probe also recomputing its prefix's partial 16-token block (`L[j] % 16`: no prompt recorded)."""
    if name == "dynasor-cot-stp":
        return sum(24 + tok[j] + L[j] % 16 for j in range(k))
    if name == "deer-stp":
        return sum(8 + tok[j] + L[j] % 16 for j in range(1, min(k, n - 1) + 1) if j <= 10)
    if name == "answer-consistency":
        return sum(24 + tok[j] + L[j] % 16 for j in range(1, min(k, n - 1) + 1))
    if name == "thinkbrake-onectx":
        return sum(1 + L[j] % 16 for j in range(min(k, n - 1) + 1))
    return 0


@pytest.mark.parametrize("name,theta", [("dynasor-cot-stp", 2.0), ("deer-stp", 0.9),
                                        ("answer-consistency", 2.0), ("budget-forcing", 25.0),
                                        ("thinkbrake-onectx", 0.0)])
def test_net_is_gross_plus_declared_signal_cost(name, theta):
    tok = [3, 7, 20, 1, 4, 9, 2]
    rows = [
        (L6, C6, [0, 1, 1, 1, 1, 1, 1], Z6, [0.1, 0.2, 0.95, 0.1, 0.1, 0.1, 0.1], tok),
        ([0, 5, 5, 40, 41, 90, 100], C6, [0, 0, 0, 0, 0, 0, 0], [0, 1, 0, 0, 0, 0, 0],
         [0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1], tok),
    ]
    ms = field_set(rows)
    ms = type(ms)(**{**ms.__dict__, "signals": {**ms.signals,
                                                 "margin": np.where(np.arange(7) == 3, -1.0, 1.0)
                                                 * np.ones_like(ms.signals["answer"])}})
    k = stops(ms, name, theta)
    r = evaluate(ms, name, thetas=[theta], audit=0)
    test = ms.take(np.flatnonzero(ms.split == 2))
    gross = sum(int(test.L[t, k[t]]) for t in range(2))
    sig = sum(signal_twin(name, k[t], int(test.n[t]), tok, test.L[t].tolist()) for t in range(2))
    assert r.points[0].cost == float(Fraction(gross, 2))
    assert r.net["points"][0]["cost"] == float(Fraction(gross + sig, 2))
    assert r.net["points"][0]["signal_cost"] == float(Fraction(sig, 2))
    assert r.net["points"][0]["acc"] == r.points[0].acc
    if sig:
        assert r.net["points"][0]["frontier_acc"] >= r.points[0].frontier_acc


# -- the synthetic field signals -----------------------------------------------------

def test_field_signals_leave_the_simulation_alone_and_are_seeded(tmp_path):
    from otbench.analysis import load, save
    from otbench.analysis.measurement import SIGNAL_DEFINITIONS

    plain = simulate("tiny", 1)
    ms = simulate("tiny", 1, field_signals=True)
    for name in ("L", "C", "n", "probes", "y", "finished", "trajectory", "cell", "question"):
        assert np.array_equal(getattr(plain, name), getattr(ms, name))
    assert np.array_equal(plain.signals["margin"], ms.signals["margin"])
    again = simulate("tiny", 1, field_signals=True)
    other = simulate("tiny", 2, field_signals=True)
    for nm in SIGNAL_DEFINITIONS:
        assert np.array_equal(ms.signals[nm], again.signals[nm])
    assert not np.array_equal(ms.signals["answer_conf"][:5], other.signals["answer_conf"][:5])
    assert ms.provenance["signals"] == SIGNAL_DEFINITIONS
    assert "SYNTHETIC" in ms.provenance["field_signals"]["synthetic"]
    a, L = ms.signals["answer"], ms.L
    assert set(np.unique(a).tolist()) <= {-1.0, 0.0, 1.0, 2.0, 3.0}
    assert np.all((ms.signals["answer_conf"] >= 0) & (ms.signals["answer_conf"] <= 1))
    rep = L[:, 1:] == L[:, :-1]           # an empty step and the padding repeat the prefix
    for nm in SIGNAL_DEFINITIONS:
        s = ms.signals[nm]
        assert np.array_equal(s[:, 1:][rep], s[:, :-1][rep])
    save(ms, tmp_path / "s")
    back = load(tmp_path / "s")
    assert back.provenance["signals"] == SIGNAL_DEFINITIONS
    for nm in SIGNAL_DEFINITIONS:
        assert np.array_equal(back.signals[nm], ms.signals[nm])


def test_field_signals_only_for_synthetic_sets_and_methods_name_what_is_missing():
    from otbench.analysis.bench import MethodError, assign_splits

    real = field_set([(L6, C6, Z6, Z6, Z6, T6)])
    real = type(real)(**{**real.__dict__, "synthetic": False})
    with pytest.raises(ValueError, match="only for synthetic sets"):
        add_field_signals(real, 0)
    plain = assign_splits(simulate("tiny", 0))
    for name, sig in (("dynasor-cot-stp", "answer"), ("deer-stp", "answer_conf"),
                      ("dynasor-cot", "dynasor_window"), ("deer", "deer_conf"),
                      ("answer-consistency", "answer")):
        with pytest.raises(MethodError, match=f"needs the per-position signal '{sig}'"):
            evaluate(plain, name)
    r = evaluate(plain, "budget-forcing")      # no signal: net = gross, point by point
    assert [p["cost"] for p in r.net["points"]] == [p.cost for p in r.points]
    assert r.net["summary"]["realized_share"] == r.summary["realized_share"]


# -- net vs gross on ragged random sets (ties, flat curves, empty steps, n = 0) -------


class _Probe:
    """A DEE method paying a probe of 3 prefill + 5 decoded tokens per decision."""

    name = "probe-brake"
    strategy = "dee"
    thetas = (-2.0, 0.0, 0.5, 3.0)

    def __init__(self, paid):
        from otbench.analysis.bench import SignalCost

        self.signal_cost = SignalCost(prefill=3, decoded=5, paid=paid, first=0)

    def stop(self, view, theta):
        return view.signal("margin") <= theta


@settings(max_examples=40, deadline=None)
@given(bench_sets())
def test_net_is_gross_plus_the_probes_exactly(ms):
    from otbench.analysis.measurement import SPLITS

    test = ms.take(np.flatnonzero(ms.split == SPLITS.index("test")))
    for paid in ("asked", "before_stop"):
        m = _Probe(paid)
        r = evaluate(ms, m, audit=0)
        unit, units = units_of(test, None)
        for i, th in enumerate(m.thetas):
            k = dee_positions(test, unit, units, resolve(m), th).tolist()
            n = test.n.tolist()
            # asked at 0..min(k, n-1); before_stop: the probes at 0..k-1
            paid_pos = [min(k[t], n[t] - 1) + 1 if paid == "asked" else k[t]
                        for t in range(len(k))]
            sig = sum(8 * max(p, 0) + sum(int(test.L[t, j]) % 16 for j in range(max(p, 0)))
                      for t, p in enumerate(paid_pos))     # + each probe's partial 16-token block
            gross = sum(int(test.L[t, k[t]]) for t in range(len(k)))
            # one cell per (model, group): compare the chained totals through the cells
            tot_g = sum(Fraction(c.points[i].cost) * c.trajectories for c in r.cells)
            assert abs(float(tot_g) - gross) < 1e-6
            tot_n = sum(Fraction(cn["signal_tokens"][i]) for cn in r.net["cells"])
            assert tot_n == sig
            p_g, p_n = r.points[i], r.net["points"][i]
            assert p_n["acc"] == p_g.acc
            assert p_n["cost"] >= p_g.cost and p_n["frontier_acc"] >= p_g.frontier_acc
        # (No area inequality: a gross point at cost 0 below the no-thinking accuracy
        # replaces A0 in the step curve, and its net twin, moved right, does not.)


def test_compare_defaults_to_the_builtins_a_set_can_run():
    from otbench.analysis.bench import BUILTINS, assign_splits, compare

    plain = assign_splits(simulate("tiny", 0))
    assert [r.method for r in compare(plain, theta_grid=3)] == [
        "thinkswitcher", "predictive-scheduling", "thinkbrake-onectx", "budget-forcing"]
    stp = assign_splits(simulate("tiny", 0, field_signals=True))
    assert [r.method for r in compare(stp, theta_grid=3)] == [
        m for m in BUILTINS if m not in ("thinkbrake", "dynasor-cot", "deer", "deepconf-exit")]   # their own probes are not recorded
    full = assign_splits(simulate("tiny", 0, field_signals=True, peer_signals=True))
    assert [r.method for r in compare(full, theta_grid=3)] == list(BUILTINS)
