"""`dynasor-cot` and `deer` on their own probes (issue 37): OTBench's walk against the sources' loops.

A set is built from recorded probe texts and log-probabilities exactly as the probe stage reads them
(`otbench.probe.grading`: `dynasor_agreement`, `dynasor_uncertain`, `deer_trial`), then each method's
stops are checked against a plain replay of its source's control flow (hao-ai-lab/Dynasor
``dynasor/core/cot.py`` lines 58-135; iie-ycx/DEER ``vllm-deer.py`` lines 396-409, 621-636), and its
net cost against the recorded tokens of the probes it paid for.
"""

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from otbench.analysis import from_ragged, ragged
from otbench.analysis.bench import evaluate, load_method, resolve
from otbench.analysis.bench._walk import dee_positions
from otbench.analysis.measurement import simulate
from otbench.analysis.methods._features import units_of
from otbench.probe.grading import (
    DYNASOR_UNCERTAIN_WORDS,
    deer_confidence,
    dynasor_agreement,
    dynasor_math_equal,
    dynasor_obtain_answer,
    dynasor_uncertain,
)

OWN = ("dynasor_window", "dynasor_uncertain", "dynasor_tokens", "deer_conf", "deer_tokens")


def own_set(rows):
    """rows: [(L, dynasor probe texts, dynasor tokens, deer confidences, deer tokens)], one
    trajectory each (test split), plus a train and a validation copy of the first row."""
    rows = [rows[0], rows[0]] + list(rows)
    sig = {nm: [] for nm in OWN}
    for L, texts, dtok, conf, etok in rows:
        _, windows = dynasor_agreement([dynasor_obtain_answer(t) for t in texts])
        sig["dynasor_window"].append(windows)
        sig["dynasor_uncertain"].append([int(dynasor_uncertain(t)) for t in texts])
        sig["dynasor_tokens"].append(dtok)
        sig["deer_conf"].append(conf)
        sig["deer_tokens"].append(etok)
    n = len(rows)
    return from_ragged(model=["m"] * n, group=["g"] * n, question=[f"q{i}" for i in range(n)],
                       trajectory=np.zeros(n, dtype=np.int64), probes=np.full(n, 4),
                       L=ragged([r[0] for r in rows], np.int64),
                       C=ragged([[min(4, j) for j in range(len(r[0]))] for r in rows], np.int64),
                       y=np.zeros(n, dtype=np.int64), split=["train", "validation"] + ["test"] * (n - 2),
                       signals={nm: ragged(v, np.float64) for nm, v in sig.items()}, synthetic=True)


def stops(ms, name, theta, **kw):
    test = ms.take(np.flatnonzero(ms.split == 2))
    unit, units = units_of(test, None)
    m = load_method(name, **kw)
    m.fit(test, test)
    return dee_positions(test, unit, units, resolve(m), theta).tolist()


# -- the sources' loops, restated plainly --------------------------------------------------------

def _eqaul_group(answers):
    """evaluator.py lines 749-762: classes in order, each answer joining the first class whose
    representative it math_equal's; count_not_empty (lines 745-746) is checked by the caller."""
    reps = []
    for a in answers:
        if a == "":
            continue
        if not any(dynasor_math_equal(a, r) for r in reps):
            reps.append(a)
    return len(reps) == 1


def dynasor_loop(texts, threshold, n):
    """cot.py: probe i on the prompt before chunk i; after chunk i end when the last `threshold`
    answers are one class, all non-empty and all certain. The boundary it stops at (n: never)."""
    answers, responses = [], []
    for i in range(n):
        answers.append(dynasor_obtain_answer(texts[i]))
        responses.append(texts[i])
        window = answers[-threshold:]
        certain = [not any(w in r.lower() for w in DYNASOR_UNCERTAIN_WORDS) for r in responses[-threshold:]]
        if (len(window) == threshold and _eqaul_group(window) and all(a != "" for a in window)
                and all(certain) and i + 1 < n):
            return i + 1
    return n


def deer_loop(conf, threshold, n, max_judge_steps=10):
    """vllm-deer.py: a trial answer after each of the first max_judge_steps transitions; end when
    its confidence is strictly above the threshold. The boundary it stops at (n: never)."""
    for k in range(1, n):
        if k > max_judge_steps:
            break
        if conf[k] > threshold:
            return k
    return n


L7 = [0, 10, 20, 30, 40, 50, 60]
D7 = [24] * 7


def test_dynasor_cases_on_its_own_probe():
    rows = [
        (L7, ["7} \\]"] * 7, D7, [0.1] * 7, [9] * 7),                          # agree from the start
        (L7, ["7} \\]", "7} \\] hmm", "7} \\]", "7} \\]", "7} \\]", "8} \\]", "8} \\]"], D7,
         [0.1] * 7, [9] * 7),                                                  # uncertain at 1
        (L7, ["a polynomial 7} \\]"] + ["7} \\]"] * 6, D7, [0.1] * 7, [9] * 7),   # "no" in polynomial
        (L7, ["\\frac{1}{2}} \\]", "0.5} \\]", "1/2} \\]", "3} \\]", "4} \\]", "5} \\]", "6} \\]"],
         D7, [0.1] * 7, [9] * 7),                                              # math-equal answers
        (L7, ["0.5} \\]", "50} \\]", "5000} \\]", "1} \\]", "2} \\]", "3} \\]", "4} \\]"], D7,
         [0.1] * 7, [9] * 7),                                                  # not transitive
        (L7, ["3 and more"] * 7, D7, [0.1] * 7, [9] * 7),                      # never an answer
    ]
    ms = own_set(rows)
    assert stops(ms, "dynasor-cot", 2.0) == [2, 4, 3, 2, 2, 6]
    assert stops(ms, "dynasor-cot", 3.0) == [3, 5, 4, 3, 6, 6]
    for w in (1, 2, 3, 4, 5, 16):
        assert stops(ms, "dynasor-cot", float(w)) == [dynasor_loop(r[1], w, 6) for r in rows]


def test_deer_cases_on_its_own_trial_answer():
    # the trial answer: { .9, 4 .8, 2 .6, } .99 -> DEER 0.7967 (otbench's STP probe: 0.7000)
    c = deer_confidence([math.log(p) for p in (0.9, 0.8, 0.6, 0.99)])
    assert round(c, 4) == 0.7967
    rows = [(L7, ["x"] * 7, D7, [0.1, c, 0.1, 0.1, 0.1, 0.1, 0.1], [12] * 7),
            (L7, ["x"] * 7, D7, [0.99, 0.5, 0.7, 0.1, 0.1, 0.1, 0.1], [12] * 7)]
    ms = own_set(rows)
    assert stops(ms, "deer", 0.75) == [1, 6]           # k = 0 is never checked
    assert stops(ms, "deer", 0.65) == [1, 2]
    for th in (0.05, 0.5, 0.75, 0.7967, 1.0):
        assert stops(ms, "deer", th) == [deer_loop(r[3], th, 6) for r in rows]
        assert stops(ms, "deer", th, max_judge_steps=1) == [deer_loop(r[3], th, 6, 1) for r in rows]


_POOL = ["42} \\]", "42.0} \\]", "\\frac{1}{2}} \\]", "0.5} \\]", "7} \\] hmm", "7} \\]", "no box",
         "3} \\]", "polynomial 3} \\]", "50} \\]", "5000} \\]", "} \\]"]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(st.sampled_from(_POOL), min_size=1, max_size=9), min_size=1, max_size=4),
       st.integers(1, 5))
def test_dynasor_walk_is_its_sources_loop(trajs, w):
    rows = [(list(range(0, 10 * len(t), 10)), t, [24] * len(t), [0.5] * len(t), [9] * len(t))
            for t in trajs]
    ms = own_set(rows)
    assert stops(ms, "dynasor-cot", float(w)) == [dynasor_loop(t, w, len(t) - 1) for t in trajs]


@pytest.mark.parametrize("name,theta", [("dynasor-cot", 2.0), ("deer", 0.5)])
def test_net_pays_the_recorded_tokens_of_its_own_probes(name, theta):
    dtok, etok = [21, 25, 30, 22, 44, 23, 20], [9, 11, 28, 10, 9, 8, 12]
    rows = [(L7, ["1} \\]", "2} \\]", "3} \\]", "3} \\]", "4} \\]", "4} \\]", "4} \\]"], dtok,
             [0.1, 0.2, 0.3, 0.9, 0.1, 0.1, 0.1], etok),
            (L7, ["9} \\]"] * 7, dtok, [0.1] * 7, etok)]
    ms = own_set(rows)
    k = stops(ms, name, theta)
    r = evaluate(ms, name, thetas=[theta], audit=0)
    test = ms.take(np.flatnonzero(ms.split == 2))
    Lt = test.L.tolist()                 # each probe also recomputes its prefix's partial 16-token block
    if name == "dynasor-cot":            # the probes before the stop
        sig = sum(dtok[j] + Lt[t][j] % 16 for t, kt in enumerate(k) for j in range(kt))
    else:                                # the trial answers asked at 1..min(k, n - 1), at most 10
        sig = sum(etok[j] + Lt[t][j] % 16 for t, kt in enumerate(k) for j in range(1, min(kt, 5) + 1))
    gross = sum(int(test.L[t, k[t]]) for t in range(2))
    assert r.points[0].cost == float(Fraction(gross, 2))
    assert r.net["points"][0]["signal_cost"] == float(Fraction(sig, 2))
    assert r.net["points"][0]["cost"] == float(Fraction(gross + sig, 2))


def test_the_synthetic_own_signals_run_and_the_stp_twins_are_named_apart():
    from otbench.analysis.bench import assign_splits

    ms = assign_splits(simulate("tiny", 0, field_signals=True, peer_signals=True))
    for name, reads in (("dynasor-cot", {"dynasor_window", "dynasor_uncertain"}),
                        ("deer", {"deer_conf"}), ("dynasor-cot-stp", {"answer", "hesitation"}),
                        ("deer-stp", {"answer_conf"})):
        m = resolve(name)
        assert set(m.signals) == reads and m.online == "side"
        assert ("STP" in m.summary) == name.endswith("-stp")
        r = evaluate(ms, name, theta_grid=3, audit=0)
        assert r.method == name and len(r.points) >= 1
    assert resolve("dynasor-cot").signal_cost.recorded == "dynasor_tokens"
    assert resolve("deer").signal_cost.recorded == "deer_tokens"
    assert resolve("dynasor-cot").signal_cost.prefill == resolve("deer").signal_cost.prefill == 0
