"""The certificate's arithmetic (plain-Python twins), without an engine."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from otbench.probe.online import (
    OnlineResult,
    Trajectory,
    certificate_line,
    compare,
    first_at_or_below,
    question_bootstrap,
)


def _boot_loop(values, groups, reps, seed, level=0.95):
    uniq = sorted(set(groups), key=lambda g: np.unique(np.asarray(groups)).tolist().index(g))
    by = {g: [v for v, h in zip(values, groups) if h == g] for g in uniq}
    rng = np.random.default_rng(seed)
    draw = rng.integers(0, len(uniq), size=(reps, len(uniq)))
    means = []
    for row in draw:
        vals = [v for j in row for v in by[uniq[j]]]
        means.append(sum(vals) / len(vals))
    a = (1 - level) / 2
    return float(np.quantile(means, a)), float(np.quantile(means, 1 - a))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4), st.sampled_from([0.0, 0.25, 0.5, 1.0])), min_size=1, max_size=15),
       st.integers(0, 1000))
def test_question_bootstrap_matches_a_loop(pairs, seed):
    groups = [f"q{g}" for g, _ in pairs]
    values = [v for _, v in pairs]
    got = question_bootstrap(np.array(values), np.array(groups), reps=200, seed=seed)
    want = _boot_loop(values, groups, 200, seed)
    assert np.allclose(got, want)


def test_compare_counts_and_costs():
    t = [Trajectory("a", 0, (1,), (5, 6, 7, 8), (0, 2, 4), 1, 2),
         Trajectory("b", 0, (1,), (5, 6, 7, 8, 9, 9), (0, 3, 6), 3, 4)]
    on = [OnlineResult(2, 1, (5, 6), (), True), OnlineResult(None, 2, (5, 6, 7, 8, 9, 9), (), True)]
    cert = compare(t, on, np.array([1, 1]), np.array([0.5, 1.0]), np.array([1, 0]),
                   online_signal_k=np.array([1, 2]))
    assert cert["equal"] == 1 and cert["equal_online_context"] == 2 and cert["faithful"] == 2
    assert cert["online_rel_cost"] == (2 + 6) / 10 and cert["offline_rel_cost"] == (2 + 3) / 10
    assert np.isclose(cert["cost_gap_pp"], 30.0) and np.isclose(cert["acc_gap_pp"], 50 - 75)
    line = certificate_line(cert, 2.5)
    assert line.startswith("online_certify: stop position equal in 1 of 2 trajectories, accuracy gap -25.0 pp")
    assert line.endswith("cost gap 30.0 pp, overhead 2.5% tokens/s vs plain generate")


@given(st.lists(st.sampled_from([-1.0, 0.0, 0.5, 2.0]), max_size=8), st.sampled_from([-2.0, 0.0, 0.5, 1.0]))
def test_first_at_or_below_is_thinkbrakes_walk(margins, theta):
    want = next((k for k, m in enumerate(margins) if m <= theta), len(margins))
    assert first_at_or_below(np.array(margins), theta) == want
