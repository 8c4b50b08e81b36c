"""ThinkBrake as its code has it, its one-context reading apart, and the partial-block prefill (issue 58)."""

import dataclasses

import numpy as np
import pytest
from otbench.analysis import from_ragged, ragged, simulate
from otbench.analysis.bench import assign_splits, evaluate, stop_positions
from otbench.analysis.methods import (
    KV_BLOCK,
    METHODS,
    MethodError,
    SignalCost,
    partial_block,
    resolve,
    signal_tokens,
)


@pytest.fixture(scope="module")
def peer_set():
    return assign_splits(simulate("tiny", 2, peer_signals=True))


def _brute_stop(check, margin, n, theta):
    """Walk one trajectory as handler.py does: the first '.\\n\\n' check (k < n) with margin <= θ."""
    for k in range(n):
        if check[k] != 0 and margin[k] <= theta:
            return k
    return n


def test_thinkbrake_stops_where_a_loop_over_its_checks_stops(peer_set):
    ms = peer_set
    checked = np.asarray(ms.signals["thinkbrake_check"])
    assert 0.2 < checked[:, 1:].mean() < 0.6 and not checked[:, 0].any()    # the draw checks some
    for theta in (-2.0, 0.0, 1.0, 3.0):
        rows, k, m = stop_positions(ms, "thinkbrake", theta)
        want = [_brute_stop(ms.signals["thinkbrake_check"][r], ms.signals["thinkbrake_margin"][r],
                            int(ms.n[r]), theta) for r in rows]
        assert k.tolist() == want
        # it never stops at a boundary that is not a '.\n\n' check
        stopped = k < ms.n[rows]
        assert np.all(checked[rows[stopped], k[stopped]] == 1)


def test_thinkbrake_pays_one_token_plus_prefill_per_check_only(peer_set):
    ms = peer_set
    rows, k, m = stop_positions(ms, "thinkbrake", 0.5)
    test = ms.take(rows)
    got = signal_tokens(test, "dee", m.signal_cost, k)
    for i in range(len(rows)):
        last = min(int(k[i]), int(test.n[i]) - 1)
        want = sum(1 + 3 + int(test.L[i, j]) % 16 for j in range(last + 1)
                   if test.signals["thinkbrake_check"][i, j])
        assert got[i] == want
    assert m.signal_cost.decoded == 1 and m.signal_cost.prefill == 3


def test_thinkbrake_refuses_a_set_without_its_signals_in_one_line():
    ms = assign_splits(simulate("tiny", 0))
    with pytest.raises(MethodError) as err:
        evaluate(ms, "thinkbrake")
    assert "\n" not in str(err.value) and "'thinkbrake_check'" in str(err.value)
    from otbench.analysis.methods import ThinkBrake

    with pytest.raises(ValueError) as err:
        ThinkBrake().fit(ms, ms)               # called directly, the method names where they come from
    msg = str(err.value)
    assert "\n" not in msg and "thinkbrake_check, thinkbrake_margin" in msg and "docs/rules.md" in msg
    assert "thinkbrake-onectx" in msg
    ok, why = resolve("thinkbrake").runnable_on(ms)
    assert not ok and "thinkbrake_check" in why


def test_the_one_context_rule_keeps_its_own_name_and_the_online_default():
    from otbench.analysis.methods import DEFAULT_ONLINE

    assert {"thinkbrake", "thinkbrake-onectx"} <= set(METHODS.names())
    one = resolve("thinkbrake-onectx")
    assert DEFAULT_ONLINE == "thinkbrake-onectx" and one.online == "processor"
    assert "not its source's rule" in one.summary
    assert resolve("thinkbrake").online is None


def _tiny(L, prompt=None):
    T = len(L)
    sig = {"margin": ragged([[0.0] * len(x) for x in L], np.float64)}
    if prompt is not None:
        sig["prompt_tokens"] = ragged([[float(p)] * len(x) for p, x in zip(prompt, L)], np.float64)
    return from_ragged(model=["m"] * T, group=["g"] * T, question=[f"q{i}" for i in range(T)],
                       trajectory=np.zeros(T, dtype=np.int64), probes=np.full(T, 1),
                       L=ragged(L, np.int64), C=ragged([[0] * len(x) for x in L], np.int64),
                       y=np.zeros(T, dtype=np.int64), signals=sig, synthetic=True)


def test_partial_block_by_hand():
    # prefix lengths 10 + (0, 5, 20, 37) = 10, 15, 30, 47 -> partial blocks 10, 15, 14, 15 (of 16)
    ms = _tiny([[0, 5, 20, 37]], prompt=[10])
    assert KV_BLOCK == 16
    assert partial_block(ms).tolist() == [[10, 15, 14, 15]]
    cost = SignalCost(prefill=2, decoded=1, paid="asked")
    # a stop at k = 2 paid positions 0, 1, 2: (3 + 10) + (3 + 15) + (3 + 14) = 48
    assert signal_tokens(ms, "dee", cost, np.array([2])).tolist() == [48]
    assert signal_tokens(ms, "dee", cost, np.array([2]), block=1).tolist() == [9]
    # block 8: 10, 15, 30 mod 8 = 2, 7, 6 -> 9 + 15 = 24
    assert signal_tokens(ms, "dee", cost, np.array([2]), block=8).tolist() == [24]
    # a DR/FB decision is one fork before thinking: 3 + prompt mod 16 = 13
    assert signal_tokens(ms, "dr", cost, np.array([0])).tolist() == [13]
    # no prompt length recorded: the thinking alone, 0, 5, 4 -> 9 + 9 = 18
    bare = _tiny([[0, 5, 20, 37]])
    assert signal_tokens(bare, "dee", cost, np.array([2])).tolist() == [18]
    # a cost with no probe request (a confidence read from the trajectory's own tokens) forks nothing
    assert signal_tokens(ms, "dee", SignalCost(note="own tokens"), np.array([2])).tolist() == [0]
    with pytest.raises(ValueError, match="block must be a positive number of tokens"):
        signal_tokens(ms, "dee", cost, np.array([2]), block=0)


def test_net_block_charges_the_partial_block(peer_set):
    ms = peer_set
    res = evaluate(ms, "deer", thetas=[0.9]).to_json()
    rows, k, m = stop_positions(ms, "deer", 0.9)
    test = ms.take(rows)
    bare = dataclasses.replace(m.signal_cost)
    full = signal_tokens(test, "dee", bare, k)
    none = signal_tokens(test, "dee", bare, k, block=1)
    assert np.all(full >= none) and full.sum() > none.sum()
    assert sum(sum(c["signal_tokens"]) for c in res["net"]["cells"]) == int(full.sum())
    assert res["net"]["signal_cost"]["kv_block"] == KV_BLOCK


def test_deepconf_warmup_is_the_sources_value_where_the_set_has_it(peer_set):
    from otbench.analysis.methods import DeepConfExit

    ms = peer_set
    train = ms.take(np.flatnonzero(ms.split == 0))
    m = DeepConfExit()
    m.fit(train, train)
    assert m.warmup == "deepconf_warmup_conf" and "the source's" in m.config()["warmup"]
    model = np.asarray(train.cell_model)[train.cell]
    for i, name in enumerate(train.models):
        warm = train.signals["deepconf_warmup_conf"][np.flatnonzero(model == i), train.n[model == i]]
        for theta in (10.0, 90.0):
            assert m.threshold(name, theta) == float(np.percentile(warm, 100.0 - theta))
    # a set without it (a probe set): the thinking-only value, named as otbench's departure
    bare = dataclasses.replace(train, signals={k: v for k, v in train.signals.items()
                                               if k != "deepconf_warmup_conf"})
    m.fit(bare, bare)
    assert m.warmup == "deepconf_min_conf" and "departure" in m.config()["warmup"]
    name = bare.models[0]
    sel = np.flatnonzero(model == 0)
    want = np.percentile(bare.signals["deepconf_min_conf"][sel, bare.n[sel]], 10.0)
    assert m.threshold(name, 90.0) == float(want)
