"""`deepconf-exit` on DeepConf's own signal (issue 42): OTBench's walk against the source's loop.

Sets are built from per-token confidences exactly as the probe stage reads them
(`otbench.probe.grading.deepconf_min_confs`); each trajectory's stop is checked against a plain replay
of DeepConf's online mode (facebookresearch/deepconf ``wrapper.py`` lines 186-235: warm-up traces set
``conf_bar = np.percentile(min_confs, 100 - confidence_percentile)``; ``processors.py`` lines 36-55:
the running window ends the trace at the first full window below it), mapped to the first boundary
at or after the processor's token.
"""

from collections import deque

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from otbench.analysis import from_ragged, ragged
from otbench.analysis.bench import evaluate, load_method, resolve
from otbench.analysis.bench._walk import dee_positions
from otbench.analysis.measurement import simulate
from otbench.analysis.methods._features import units_of
from otbench.errors import ArgumentError
from otbench.probe.grading import deepconf_min_confs

W = 3


def _processor_stop(confs, threshold, group):
    q, s = deque(maxlen=group), 0.0
    for t, c in enumerate(confs, start=1):
        if len(q) < group:
            q.append(c)
            s += c
        else:
            s -= q.popleft()
            q.append(c)
            s += c
        if len(q) >= group and s / len(q) < threshold:
            return t
    return None


def _min_conf(confs, group):          # utils.py compute_least_grouped + min, unrounded
    if len(confs) < group:
        return sum(confs) / len(confs) if confs else 0.0
    return min(sum(confs[i:i + group]) / group for i in range(len(confs) - group + 1))


def conf_set(train, test, window=W, models=None):
    """train / test: [(per-token confidences, position grid L)], one trajectory each."""
    rows = list(train) + list(test)
    n = len(rows)
    models = models or ["m"] * n
    sig = [deepconf_min_confs(c, L, window) for c, L in rows]
    return from_ragged(model=models, group=["g"] * n, question=[f"q{i}" for i in range(n)],
                       trajectory=np.zeros(n, dtype=np.int64), probes=np.full(n, 4),
                       L=ragged([r[1] for r in rows], np.int64),
                       C=ragged([[min(4, j) for j in range(len(r[1]))] for r in rows], np.int64),
                       y=np.zeros(n, dtype=np.int64),
                       split=["train"] * len(train) + ["test"] * len(test),
                       signals={"deepconf_min_conf": ragged(sig, np.float64)}, synthetic=True,
                       provenance={"deepconf": {"window": window, "top_k": 20}})


def stops(ms, theta):
    train = ms.take(np.flatnonzero(ms.split == 0))
    test = ms.take(np.flatnonzero(ms.split == 2))
    unit, units = units_of(test, None)
    m = load_method("deepconf-exit")
    m.fit(train, train)
    return m, dee_positions(test, unit, units, resolve(m), theta).tolist()


def _source(train, test, theta, window=W):
    """DeepConf online: the warm-up threshold, then each trace's processor stop as a boundary."""
    bar = float(np.percentile([_min_conf(c, window) for c, _ in train], 100 - theta))
    out = []
    for c, L in test:
        t = _processor_stop(c, bar, window)
        n = len(L) - 1
        out.append(n if t is None else next(k for k in range(len(L)) if L[k] >= t))
    return bar, out


traj_st = st.lists(st.floats(0.0, 20.0, allow_nan=False, width=32), min_size=0, max_size=24).flatmap(
    lambda c: st.tuples(st.just(c), st.lists(st.integers(0, len(c)), max_size=5).map(
        lambda cuts: sorted({0, len(c), *cuts}))))


@settings(max_examples=60, deadline=None)
@given(st.lists(traj_st, min_size=1, max_size=5), st.lists(traj_st, min_size=1, max_size=4),
       st.sampled_from([10.0, 50.0, 90.0, 99.0]))
def test_the_walk_is_deepconfs_online_loop(train, test, theta):
    ms = conf_set(train, test)
    m, got = stops(ms, theta)
    bar, want = _source(train, test, theta)
    assert m.threshold("m", theta) == pytest.approx(bar, rel=1e-9, abs=1e-9)
    # The walker never asks at a trajectory's last position: a stop there is its own end.
    assert got == want


def test_pinned_case_and_the_percentile_direction():
    # train min_confs (window 3): 1.0, 2.0, 3.0 ; theta = 90 -> percentile 10 -> 1.2
    train = [([1.0] * 4, [0, 4]), ([2.0] * 4, [0, 4]), ([3.0] * 4, [0, 4])]
    test = [([5.0, 5.0, 5.0, 0.5, 0.5, 0.5, 0.5], [0, 2, 4, 5, 6, 7]),
            ([5.0] * 7, [0, 2, 4, 5, 6, 7])]                            # never falls
    ms = conf_set(train, test)
    m, got = stops(ms, 90.0)
    assert m.threshold("m", 90.0) == pytest.approx(1.2)
    # window means from token 3: 5, 3.5, 2.0 (token 5), 0.5 (token 6): below 1.2 first at token 6
    assert got == [4, 5]           # boundary 4 (L = 6); the other runs to its end (n = 5)
    _, got10 = stops(ms, 10.0)     # percentile 90 -> 2.8: below it first at token 5, boundary 3
    assert got10 == [3, 5]
    # a larger confidence_percentile keeps more traces: never a later stop for a smaller theta
    for a, b in zip(got10, got):
        assert a <= b


def test_per_model_thresholds_and_refusals():
    train = [([1.0] * 4, [0, 4]), ([9.0] * 4, [0, 4])]
    test = [([1.5] * 6, [0, 3, 6]), ([1.5] * 6, [0, 3, 6])]
    ms = conf_set(train, test, models=["a", "b", "a", "b"])
    m, got = stops(ms, 50.0)
    assert m.threshold("a", 50.0) == 1.0 and m.threshold("b", 50.0) == 9.0
    assert got == [2, 1]           # model a's 1.5 never falls below 1.0; model b's is below 9 at L = 3
    import dataclasses
    bare = dataclasses.replace(ms, provenance={})
    with pytest.raises(ArgumentError, match=r"deepconf-exit needs the window its signal was read with"):
        stops(bare, 50.0)
    nosig = dataclasses.replace(ms, signals={})
    with pytest.raises(ArgumentError, match=r"deepconf_min_conf \(its own probe, recorded when the probe "
                                            r"job lists \"deepconf\" in probe.field_probes\)"):
        stops(nosig, 50.0)


def test_a_rule_reading_the_wrong_signal_fails_the_twin():
    """Mutation check: the twin above tells a rule that ignores the window's fill apart."""
    from otbench.analysis.measurement import deepconf_stop

    low, tokens = np.array([0.5]), np.array([2])
    assert not deepconf_stop(low, tokens, 1.0, 3)[0]           # the window is not full yet
    assert deepconf_stop(low, np.array([3]), 1.0, 3)[0]
    assert not deepconf_stop(np.array([1.0]), np.array([3]), 1.0, 3)[0]    # strict <


def test_on_a_simulated_set_it_ranks_with_no_signal_cost():
    from otbench.analysis.bench import assign_splits

    ms = assign_splits(simulate("tiny", 0, field_signals=True, peer_signals=True))
    assert ms.provenance["deepconf"]["window"] == 2048
    m = resolve("deepconf-exit")
    assert m.signals == ("deepconf_min_conf",) and m.strategy == "dee"
    assert "DeepConf discards" in m.summary
    r = evaluate(ms, "deepconf-exit", theta_grid=4, audit=0)
    assert r.method == "deepconf-exit" and len(r.points) >= 1
    for p, q in zip(r.points, r.net["points"]):
        assert q["signal_cost"] == 0.0 and q["cost"] == p.cost
