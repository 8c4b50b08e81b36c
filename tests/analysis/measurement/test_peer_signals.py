"""The field methods' own-probe signals in the measurement contract (issue 37): synthetic draw, windows, rules."""

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from otbench.analysis.measurement import (
    DEER_SIGNALS,
    DYNASOR_SIGNALS,
    DEEPCONF_SIGNALS,
    DEEPCONF_WARMUP_SIGNALS,
    PEER_SIGNAL_DEFINITIONS,
    PEER_SIGNALS,
    THINKBRAKE_SIGNALS,
    WINDOW_BITS,
    add_peer_signals,
    deer_own_stop,
    dynasor_own_stop,
    simulate,
    window_masks,
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
    assert set(PEER_SIGNALS) == set(DYNASOR_SIGNALS) | set(DEER_SIGNALS) | set(DEEPCONF_SIGNALS) \
        | set(THINKBRAKE_SIGNALS) | set(DEEPCONF_WARMUP_SIGNALS)
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
        win = ms.signals["dynasor_window"][t, :n + 1]
        for j in range(n + 1):                               # each window ending at j
            for w in range(1, min(j + 1, WINDOW_BITS) + 1):
                seg = ans[j - w + 1:j + 1]
                agree = bool((seg >= 0).all() and (seg == seg[0]).all())
                assert bool((int(win[j]) >> (w - 1)) & 1) == agree, (t, j, w)
    conf = ms.signals["deer_conf"][rows, ms.n]
    assert ((conf > 0) & (conf < 1)).all()
    assert set(np.unique(ms.signals["dynasor_uncertain"])) <= {0.0, 1.0}


def _masks_twin(row, bits=WINDOW_BITS):
    """Per position j: Dynasor's check of every window ending there, as its source runs it
    (eqaul_group classes over the window, count_not_empty), on class ids."""
    out = []
    for j in range(len(row)):
        m = 0
        for w in range(1, min(j + 1, bits) + 1):
            win = row[j - w + 1:j + 1]
            classes = []                                   # eqaul_group: first matching class
            for a in win:
                if a >= 0 and a not in classes:
                    classes.append(a)
            not_empty = sum(a >= 0 for a in win)
            if len(classes) == 1 and not_empty == w:
                m |= 1 << (w - 1)
        out.append(m)
    return out


@settings(max_examples=80, deadline=None)
@given(st.lists(st.lists(st.integers(-1, 2), min_size=0, max_size=20), min_size=1, max_size=6)
       .flatmap(lambda rows: st.just([r + [-1] * (20 - len(r)) for r in rows])))
def test_window_masks_match_dynasors_check(rows):
    got = window_masks(np.array(rows, float).reshape(len(rows), -1))
    assert got.tolist() == [[float(x) for x in _masks_twin(r)] for r in rows]


def test_window_masks_of_no_positions():
    assert window_masks(np.zeros((3, 0))).shape == (3, 0)


def _bits(*ws):
    return float(sum(1 << (w - 1) for w in ws))


def test_dynasor_own_stop_reads_the_window_before_the_chunk():
    # column k-1 holds the windows ending there: row 0 agrees over 3, row 1 over 1, row 2 over 3
    win = np.array([[1, _bits(1, 2), _bits(1, 2, 3), 1],
                    [1, 1, _bits(1, 2), _bits(1)],
                    [1, _bits(1, 2), _bits(1, 2, 3), 1]], float)
    unc = np.array([[0, 0, 0, 0], [0, 0, 0, 0], [0, 1, 0, 0]], float)
    assert dynasor_own_stop(win, unc, 3, 3).tolist() == [True, False, False]
    assert dynasor_own_stop(win, unc, 3, 2).tolist() == [True, True, False]   # row 2: uncertain at 1
    assert dynasor_own_stop(win, unc, 2, 2).tolist() == [True, False, False]
    assert not dynasor_own_stop(win, unc, 1, 2).any()          # fewer than w probes
    assert not dynasor_own_stop(win, unc, 3, 0).any()
    # the probe at k itself is not read (online it may still be in flight)
    win2, unc2 = win.copy(), unc.copy()
    win2[:, 3], unc2[:, 3] = 0, 1
    assert dynasor_own_stop(win2, unc2, 3, 3).tolist() == [True, False, False]
    with pytest.raises(ValueError, match="longer than the recorded masks"):
        dynasor_own_stop(win, unc, 3, WINDOW_BITS + 1)


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
