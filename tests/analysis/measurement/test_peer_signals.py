"""The field methods' own-probe signals in the measurement contract (issue 37): synthetic draw, runs, rules."""

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from otbench.analysis.measurement import (
    DEER_SIGNALS,
    DYNASOR_SIGNALS,
    PEER_SIGNAL_DEFINITIONS,
    PEER_SIGNALS,
    add_peer_signals,
    agreement_runs,
    deer_own_stop,
    dynasor_own_stop,
    simulate,
)


def test_the_option_leaves_every_other_draw_bit_identical():
    for field in (False, True):
        a = simulate("tiny", 3, field_signals=field)
        b = simulate("tiny", 3, field_signals=field, peer_signals=True)
        assert set(b.signals) == set(a.signals) | set(PEER_SIGNALS)
        for k, v in a.signals.items():
            assert np.array_equal(v, b.signals[k]), k
        for name in ("L", "C", "y", "n"):
            assert np.array_equal(getattr(a, name), getattr(b, name))
        assert simulate("tiny", 3, field_signals=field).provenance == a.provenance


def test_synthetic_and_labelled_so():
    ms = simulate("tiny", 0, peer_signals=True)
    assert ms.synthetic and "SYNTHETIC" in ms.provenance["peer_signals"]["synthetic"]
    for name in PEER_SIGNALS:
        assert ms.provenance["signals"][name] == PEER_SIGNAL_DEFINITIONS[name]
    assert set(PEER_SIGNALS) == set(DYNASOR_SIGNALS) | set(DEER_SIGNALS)
    again = simulate("tiny", 0, peer_signals=True)
    for name in PEER_SIGNALS:
        assert np.array_equal(ms.signals[name], again.signals[name])
    with pytest.raises(ValueError, match="only for synthetic sets"):
        add_peer_signals(dataclasses.replace(ms, synthetic=False), 0)


def test_the_synthetic_draw_keeps_its_own_definitions():
    ms = simulate("small", 1, peer_signals=True)
    T = ms.num_trajectories
    rows = np.arange(T)
    for t in range(0, T, max(1, T // 50)):
        n = int(ms.n[t])
        ans = ms.signals["dynasor_answer"][t, :n + 1]
        seen = [a for a in ans if a >= 0]
        firsts = list(dict.fromkeys(seen))
        assert firsts == list(range(len(firsts)))            # numbered by first appearance
        run = ms.signals["dynasor_agree"][t, :n + 1]
        for s in range(n + 1):                               # the run, within the trajectory
            want = 0
            if ans[s] >= 0:
                want = 1
                while s + want <= n and ans[s + want] == ans[s]:
                    want += 1
            assert run[s] >= want and (run[s] == want or s + want == n + 1)
    conf = ms.signals["deer_conf"][rows, ms.n]
    assert ((conf > 0) & (conf < 1)).all()
    assert set(np.unique(ms.signals["dynasor_uncertain"])) <= {0.0, 1.0}


def _runs_twin(row):
    out = []
    for s in range(len(row)):
        if row[s] < 0:
            out.append(0)
            continue
        j = s
        while j < len(row) and row[j] == row[s]:
            j += 1
        out.append(j - s)
    return out


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.integers(-1, 2), min_size=5, max_size=5), min_size=1, max_size=6))
def test_agreement_runs_match_a_loop(rows):
    got = agreement_runs(np.array(rows, float))
    assert got.tolist() == [[float(x) for x in _runs_twin(r)] for r in rows]


def test_dynasor_own_stop_reads_the_run_before_the_chunk():
    agree = np.array([[3, 2, 1, 0], [2, 1, 1, 1], [3, 2, 1, 0]], float)
    unc = np.array([[0, 0, 0, 0], [0, 0, 0, 0], [0, 1, 0, 0]], float)
    assert dynasor_own_stop(agree, unc, 3, 3).tolist() == [True, False, False]
    assert dynasor_own_stop(agree, unc, 2, 2).tolist() == [True, True, False]
    assert not dynasor_own_stop(agree, unc, 1, 2).any()          # fewer than w probes
    assert not dynasor_own_stop(agree, unc, 3, 0).any()
    # the probe at k itself is not read (online it may still be in flight)
    unc2 = unc.copy()
    unc2[:, 3] = 1
    assert dynasor_own_stop(agree, unc2, 3, 3).tolist() == [True, False, False]


def test_deer_own_stop_is_strict_and_checks_the_first_steps_only():
    conf = np.array([0.75, 0.7501, 0.9])
    assert deer_own_stop(conf, 1, 0.75, 10).tolist() == [False, True, True]
    assert not deer_own_stop(conf, 0, 0.5, 10).any()
    assert not deer_own_stop(conf, 11, 0.5, 10).any()
    assert deer_own_stop(conf, 10, 0.5, 10).all()


def test_the_simulate_command_draws_them_on_request(tmp_path):
    from click.testing import CliRunner
    from otbench.analysis.measurement import load
    from otbench.cli._simulate import simulate_cmd

    r = CliRunner().invoke(simulate_cmd, ["--out", str(tmp_path / "s"), "--scale", "tiny",
                                          "--peer-signals"])
    assert r.exit_code == 0, r.output
    assert r.output.startswith("SYNTHETIC")
    ms = load(tmp_path / "s")
    assert set(PEER_SIGNALS) <= set(ms.signals) and "answer" not in ms.signals
    assert ms.provenance["peer_signals"]["generator"] == "otbench.peer-signals/1"
    r = CliRunner().invoke(simulate_cmd, ["--out", str(tmp_path / "p"), "--scale", "tiny"])
    assert r.exit_code == 0 and not set(PEER_SIGNALS) & set(load(tmp_path / "p").signals)
