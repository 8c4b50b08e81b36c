"""The online control's state machine and request arguments, without vLLM (a plain-Python reference)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _toy_tables import BOUNDARY, END, NL_END, NL_START, PREFIX, SEP, STOP, toy_tables

from otbench.probe.online import (
    ControlSpec,
    OnlineControlError,
    RequestControl,
    check_engine,
    load_rule,
    parse_args,
    request_args,
)


def _reference(script, margins, theta, tables, lengths=None):
    """(stop length or None) by the offline rule: the first decision point whose margin is <= θ."""
    end = next((i for i, t in enumerate(script) if t == STOP), len(script))
    if lengths is None:
        points = [0] + [i + 1 for i in range(end) if tables.ends_block(script, i)]
    else:
        points = sorted(set(lengths))
    for L in points:
        if L > end:
            break
        if margins[L] <= theta:
            return L
    return None


def _simulate(script, margins, theta, tables, lengths=None, drops=()):
    """Drive a control as vLLM would: step, then append the sampled (or forced) token."""
    spec = ControlSpec("thinkbrake-onectx", theta, "f", {}, "vocab", None if lengths is None else tuple(lengths))
    out: list[int] = []
    ctl = RequestControl(spec, tables, load_rule(spec), [1], out)
    drops = list(drops)
    src = iter(script)
    while len(out) < len(script) + 4:
        kind, v = ctl.step()
        tok = None
        if kind == "decide":
            tok = ctl.decide(v, {"margin": margins[v], "logp_end": 0.0, "logp_other": margins[v]})
        elif kind == "force":
            tok = v
        if drops and drops[0] == len(out):
            drops.pop(0)              # this step's sample is dropped (a prefill chunk)
            continue
        if tok is None:
            tok = next(src, 0)
        else:
            next(src, None)
        out.append(tok)
    ctl.step()
    return ctl, out


tokens = st.lists(st.sampled_from([0, 1, 2, BOUNDARY, NL_END, NL_START, STOP]), min_size=0, max_size=30)


@settings(max_examples=200, deadline=None)
@given(script=tokens, seed=st.integers(0, 2**31 - 1), span=st.booleans(), use_lengths=st.booleans(),
       drop=st.booleans())
def test_control_stops_where_the_offline_rule_does(script, seed, span, use_lengths, drop):
    rng = np.random.default_rng(seed)
    margins = rng.choice([-1.0, 0.0, 0.5, 2.0], size=len(script) + 8)    # ties with θ included
    theta = float(rng.choice([-2.0, 0.0, 0.5, 1.0]))
    tables = toy_tables(span)
    lengths = sorted(set(rng.integers(0, len(script) + 1, size=3).tolist())) if use_lengths else None
    want = _reference(script, margins, theta, tables, lengths)
    ctl, out = _simulate(script, margins, theta, tables, lengths, drops=(0,) if drop else ())
    assert ctl.stop_length == want
    if want is None:
        assert out[:len(script)] == script
    else:
        force = tables.forced(script[want - 1] if want else 1)
        assert out[:want] == script[:want]
        assert tuple(out[want:want + len(force)]) == force
        assert ctl.broken is None
        # One committed decision per point passed, each with the signal it saw.
        assert [d[0] for d in ctl.decisions][-1] == want


def test_forced_end_follows_the_separator_rule():
    t = toy_tables(False)
    assert t.forced(BOUNDARY) == (END, PREFIX)        # ends with a line feed: no separator
    assert t.forced(0) == (SEP, END, PREFIX)
    assert toy_tables(False, separator=()).forced(0) == (END, PREFIX)


def test_diverged_forcing_is_reported():
    t = toy_tables(False)
    out: list[int] = []
    spec = ControlSpec("thinkbrake-onectx", 5.0, "f")
    ctl = RequestControl(spec, t, load_rule(spec), [1], out)
    kind, L = ctl.step()
    assert (kind, L) == ("decide", 0)
    assert ctl.decide(0, {"margin": 0.0}) == SEP
    out.append(2)                                     # something else was sampled
    ctl.step()
    assert ctl.done and "diverged" in ctl.broken


def test_cap_forces_at_the_cap():
    t = toy_tables(False)
    out = [0, 0, 0]
    ctl = RequestControl(ControlSpec("cap", 3.0, "f"), t, None, [1], out)
    assert ctl.step() == ("force", SEP)
    out.append(SEP)
    assert ctl.step() == ("force", END)


def test_request_args_round_trip_and_refusals():
    a = request_args("thinkbrake-onectx", 1.5, "qwen3-thinking", lengths=[3, 0, 3])
    s = parse_args(a)
    assert s == ControlSpec("thinkbrake-onectx", 1.5, "qwen3-thinking", {}, "vocab", (0, 3))
    p = request_args("deepconf-exit", 90.0, "f", params={"window": 8, "threshold": 0.1})
    assert p["otbench_params"] == '{"threshold": 0.1, "window": 8}'       # a string: vllm_xargs
    assert parse_args(p).params == {"threshold": 0.1, "window": 8}
    assert parse_args({"other": 1}) is None and parse_args(None) is None
    for bad in ({"otbench_theta": 1}, {"otbench_method": "x", "otbench_theta": 1, "otbench_family": "f"},
                {"otbench_method": "thinkbrake-onectx", "otbench_theta": "1", "otbench_family": "f"},
                {"otbench_method": "thinkbrake-onectx", "otbench_theta": float("nan"), "otbench_family": "f"},
                {"otbench_method": "cap", "otbench_theta": -1, "otbench_family": "f"},
                {"otbench_method": "thinkbrake-onectx", "otbench_theta": 1, "otbench_family": "f",
                 "otbench_lengths": [1, -1]},
                {"otbench_method": "thinkbrake-onectx", "otbench_theta": 1, "otbench_family": "f", "otbench_x": 1},
                {"otbench_method": "thinkbrake-onectx", "otbench_theta": 1, "otbench_family": "f",
                 "otbench_params": {"signal": "margin"}},            # an object, not its JSON
                {"otbench_method": "thinkbrake-onectx", "otbench_theta": 1, "otbench_family": "f",
                 "otbench_params": "[1]"},
                {"otbench_method": "cap", "otbench_theta": 1, "otbench_family": "f",
                 "otbench_params": '{"a": 1}'},
                {"otbench_method": "deepconf", "otbench_theta": 1, "otbench_family": "f"}):  # no aliases
        with pytest.raises(OnlineControlError) as e:
            parse_args(bad)
        assert "\n" not in str(e.value)


def test_plugins_need_the_operators_list():
    spec = ControlSpec("os.path:join", 0.0, "f")
    with pytest.raises(OnlineControlError, match="not allowed"):
        load_rule(spec, allowed="")
    with pytest.raises(OnlineControlError, match="cannot run in the logits processor"):
        load_rule(spec, allowed="os.path:join")
    with pytest.raises(OnlineControlError, match="installed modules only"):
        load_rule(ControlSpec("x.py:M", 0.0, "f"), allowed="x.py:M")


def test_only_processor_methods_run_in_the_processor():
    # a side-request method and an FB method are registered, but not processor methods
    for name in ("dynasor-cot", "budget-forcing"):
        with pytest.raises(OnlineControlError, match="does not run in the logits processor") as e:
            load_rule(ControlSpec(name, 1.0, "f"))
        assert "\n" not in str(e.value)
    with pytest.raises(OnlineControlError, match="reads the group confidence alone"):
        load_rule(ControlSpec("_toy_tables:ConfidenceAndMargin", 0.0, "f"),
                  allowed="_toy_tables:ConfidenceAndMargin")
    with pytest.raises(OnlineControlError, match="no from_online"):
        load_rule(ControlSpec("_toy_tables:SecondDecision", 0.0, "f", {"x": 1}),
                  allowed="_toy_tables:SecondDecision")


def test_a_processor_method_decides_by_its_own_stop():
    """The rule is the method's `stop(view, theta)` on the request's decided boundaries: here
    `SecondDecision`, which reads the whole margin history."""
    rule = load_rule(ControlSpec("_toy_tables:SecondDecision", 0.0, "f"), allowed="_toy_tables:SecondDecision")
    assert (rule.name, rule.window, rule.device_signal) == ("SecondDecision", None, None)
    assert rule.stop({"margin": [-1.0]}, [0], 0.0) is False
    assert rule.stop({"margin": [-1.0, 2.0]}, [0, 4], 0.0) is False
    assert rule.stop({"margin": [-1.0, 2.0, 0.0]}, [0, 4, 9], 0.0) is True
    tb = load_rule(ControlSpec("thinkbrake-onectx", 0.5, "f", {"signal": "margin_own"}))
    assert tb.device_signal == "margin"           # the processor's margin is the recorded margin_own
    assert tb.stop({"margin": [0.5], "logp_end": [0.0], "logp_other": [0.5]}, [0], 0.5) is True
    assert tb.stop({"margin": [0.6], "logp_end": [0.0], "logp_other": [0.6]}, [0], 0.5) is False


def test_deepconf_exit_crosses_as_its_fitted_threshold_and_window():
    from otbench.analysis.bench import assign_splits
    from otbench.analysis.measurement import deepconf_stop, simulate
    from otbench.analysis.methods import resolve
    from otbench.probe.online import rule_args

    ms = assign_splits(simulate("tiny", 0, peer_signals=True))
    m = resolve("deepconf-exit")
    m.prepare(ms, [90.0], None, None, 1)
    model = ms.models[0]
    args = rule_args(m, model, 90.0)
    thr = m.impl.threshold(model, 90.0)
    assert args == {"method": "deepconf-exit", "params": {"threshold": thr, "window": m.impl.window}}
    rule = load_rule(ControlSpec(args["method"], 90.0, "f", args["params"]))
    assert rule.window == m.impl.window and rule.device_signal is None
    for low, L in [(thr - 1.0, 4096), (thr - 1.0, 16), (thr + 1.0, 4096)]:
        want = bool(deepconf_stop([low], [L], thr, m.impl.window)[0])
        assert rule.stop({"deepconf_min_conf": [low]}, [L], 90.0) is want
    assert any(rule.stop({"deepconf_min_conf": [x]}, [4096], 90.0) for x in (thr - 1.0,))


def test_speculative_decoding_is_refused_in_one_line():
    with pytest.raises(OnlineControlError) as e:
        check_engine({"speculative_config": {"method": "ngram"}})
    assert "speculative" in str(e.value) and "\n" not in str(e.value)
    check_engine({"speculative_config": None})


def test_the_vllm_engine_passes_the_processor_to_llm():
    from otbench.probe.engines import EngineConfig
    from otbench.probe.engines._vllm import engine_kwargs
    from otbench.probe.online import PROCESSOR

    kw = engine_kwargs(EngineConfig(model="m", logits_processors=(PROCESSOR,)), "cpu")
    assert kw["logits_processors"] == [PROCESSOR]
    assert "logits_processors" not in engine_kwargs(EngineConfig(model="m"), "cpu")
