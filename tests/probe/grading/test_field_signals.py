"""The field signals of one probe (`otbench.probe.grading.probe_signals`), case by case.

A hand-made decoder (each id is a fixed string) makes every character's
token known, so the answer span, its confidence and the tokens through the
answer's close are checked by hand; the byte-level case uses the tiny
model's tokenizer, whose partial characters decode to U+FFFD.
"""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from otbench.analysis.measurement import HESITATION_WORDS, SIGNAL_DEFINITIONS
from otbench.probe.grading import (
    answer_key,
    answer_location,
    hesitates,
    hesitation_pattern,
    number_answers,
    probe_signals,
)

PIECES = {1: "So", 2: " the", 3: " answer", 4: " is", 5: " \\boxed{", 6: "1", 7: "2", 8: "}", 9: " wait",
          10: ".", 11: " No", 12: " $\\boxed{", 13: "$", 14: " 3", 15: " ", 16: "Answer: ", 17: "C",
          18: "```python\n", 19: "print(1)\n", 20: "```\n", 21: " hmmm", 22: " button", 23: "\n\n"}


def dec(ids):
    return "".join(PIECES[int(i)] for i in ids)


def lp(*ps):
    return [math.log(p) for p in ps]


# -- hesitation words --------------------------------------------------------------------------

@pytest.mark.parametrize("text, want", [
    ("No, wait.", True), ("WAIT", True), ("Okay so", True), ("hmm", True), ("on hold-up", True),
    ("But then", True), ("the answer is no.", True),
    ("nothing", False), ("button", False), ("hmmm", False), ("okayish", False), ("waiting", False),
    ("", False), ("no_way", False),      # "_" is a word character: no boundary inside no_way
])
def test_hesitation_words_whole_word_case_insensitive(text, want):
    assert hesitates(text) is want


def test_default_list_is_dynasors_and_a_custom_list_replaces_it():
    assert HESITATION_WORDS == ("wait", "hold", "but", "okay", "no", "hmm")
    assert hesitates("let me verify", ["verify"]) and not hesitates("wait", ["verify"])
    assert hesitates("Let me VERIFY.", hesitation_pattern(["verify"]))
    for bad in ([], [""], ["two words"], ["a|b"]):
        with pytest.raises(ValueError, match="hesitation words"):
            hesitation_pattern(bad)


# -- the answer and its key --------------------------------------------------------------------

@pytest.mark.parametrize("text, key", [
    ("so \\boxed{ 3 4 } done", "34"),
    ("\\boxed{\\frac{1}{2}}", "\\frac{1}{2}"),
    ("\\boxed{1} then \\boxed{2}", "2"),            # the last box, as the grader reads
    ("\\boxed{$5$}", "5"),                           # one pair of $ removed
    ("\\boxed 7.", "7"),
    ("\\boxed{12", None),                            # unclosed: no answer (the grader's rule)
    ("no box here", None),
])
def test_math_key(text, key):
    assert answer_key("math", text) == key


def test_locations_point_at_the_answer():
    text = "so \\boxed{ 3 4 } done"
    s, e, close, key = answer_location("math", text)
    assert text[s:e] == " 3 4 " and text[close - 1] == "}" and key == "34"
    text = "Thus **Answer: C** since"
    s, e, close, key = answer_location("choice", text)
    assert text[s:e] == "C" and key == "C" and close == e
    assert answer_location("choice", "Answer: E", n_options=4) is None
    text = "Here:\n```python\nx = 1   \n\nprint(x)\n```\n"
    s, e, close, key = answer_location("code", text)
    assert text[s:e] == "x = 1   \n\nprint(x)" and key == "x = 1\nprint(x)"
    with pytest.raises(ValueError, match="unknown task"):
        answer_location("essay", "x")


# -- answer ids per trajectory -----------------------------------------------------------------

def test_number_answers_by_hand():
    assert number_answers(["7", None, "3", "7", "5", "3"], [False, False, False, False, True, False]) == \
        [1, -1, 2, 1, 0, 2]
    assert number_answers([], []) == []
    assert number_answers([None], [True]) == [0]          # graded correct wins over extraction
    with pytest.raises(ValueError):
        number_answers(["1"], [])


@given(st.lists(st.tuples(st.sampled_from([None, "a", "b", "c", "d"]), st.booleans()), max_size=30))
def test_number_answers_properties(items):
    keys = [k for k, _ in items]
    ok = [c for _, c in items]
    ids = number_answers(keys, ok)
    for i, (k, c) in enumerate(items):
        assert ids[i] == (0 if c else -1 if k is None else ids[i])
        if not c and k is not None:
            assert ids[i] >= 1
    # equal ids <=> equal keys among the wrong, extracted ones; ids appear in order 1, 2, ...
    wrong = [(k, x) for k, x, c in zip(keys, ids, ok) if not c and k is not None]
    for k1, x1 in wrong:
        for k2, x2 in wrong:
            assert (k1 == k2) == (x1 == x2)
    seen = []
    for _, x in wrong:
        if x not in seen:
            seen.append(x)
    assert seen == list(range(1, len(seen) + 1))


# -- one probe, token by token -----------------------------------------------------------------

def test_span_conf_and_tokens_by_hand():
    ids = [1, 2, 3, 4, 5, 6, 7, 8, 9]                       # So the answer is \boxed{12} wait
    got = probe_signals("math", ids, lp(.9, .9, .9, .9, .8, .5, .25, .7, .1), prefix=[23], decode=dec,
                        stopped=True)
    assert got.key == "12"
    assert got.conf == pytest.approx((.5 + .25) / 2)        # tokens "1" and "2"
    assert got.tokens == 8                                   # through the closing brace
    assert got.hesitation is False                           # " wait" comes after the answer's close


def test_hesitation_before_the_answer_counts():
    ids = [11, 10, 5, 6, 8]                                 # No. \boxed{1}
    got = probe_signals("math", ids, lp(.5, .5, .5, .3, .5), prefix=[], decode=dec, stopped=False)
    assert got.hesitation is True and got.key == "1" and got.conf == pytest.approx(.3) and got.tokens == 5
    assert probe_signals("math", [21, 22, 5, 6, 8], lp(.5, .5, .5, .3, .5), prefix=[], decode=dec,
                         stopped=False).hesitation is False


def test_answer_opened_in_the_prefix():
    # The generic family's prefix ends in "$\boxed{": the span starts at the first decoded token.
    got = probe_signals("math", [6, 7, 8, 13, 9], lp(.6, .4, .9, .9, .9), prefix=[12], decode=dec,
                        stopped=True)
    assert got.key == "12" and got.conf == pytest.approx(.5) and got.tokens == 3 and not got.hesitation


def test_no_answer_reads_everything():
    got = probe_signals("math", [1, 2, 9], lp(.2, .4, .6), prefix=[], decode=dec, stopped=True)
    assert got.key is None and got.conf == pytest.approx(.4) and got.tokens == 4 and got.hesitation
    assert probe_signals("math", [1, 2, 9], lp(.2, .4, .6), prefix=[], decode=dec, stopped=False).tokens == 3
    empty = probe_signals("math", [], [], prefix=[], decode=dec, stopped=True)
    assert empty == (None, 0.0, False, 1)


def test_choice_and_code_spans():
    got = probe_signals("choice", [16, 17, 10], lp(.9, .35, .9), prefix=[], decode=dec, stopped=False)
    assert got.key == "C" and got.conf == pytest.approx(.35) and got.tokens == 2
    got = probe_signals("code", [18, 19, 20, 9], lp(.9, .45, .9, .9), prefix=[], decode=dec, stopped=False)
    assert got.key == "print(1)" and got.conf == pytest.approx(.45) and got.tokens == 2


def test_logprobs_must_match_the_tokens_and_none_gives_nan():
    with pytest.raises(ValueError, match="log-probabilities"):
        probe_signals("math", [1, 2], lp(.5), prefix=[], decode=dec, stopped=False)
    assert math.isnan(probe_signals("math", [1, 2], None, prefix=[], decode=dec, stopped=False).conf)


def test_byte_level_characters_split_across_tokens():
    from otbench.probe.engines._tiny import build_tokenizer

    tok = build_tokenizer(0)
    decode = lambda ids: tok.decode(ids, skip_special_tokens=True)   # noqa: E731
    ids = tok.encode("the sum is \\boxed{é7} then", add_special_tokens=False)
    pieces = [decode([i]) for i in ids]
    assert "\ufffd" in pieces                                # é is split into byte tokens here
    lps = [-0.01 * (i + 1) for i in range(len(ids))]
    got = probe_signals("math", ids, lps, prefix=[], decode=decode, stopped=False)
    assert got.key == "é7"
    # by hand: the span is the tokens from the first byte of é to the 7, through to the brace
    starts = [len(decode(ids[:i])) for i in range(len(ids) + 1)]
    text = decode(ids)
    s, e = text.index("é"), text.index("7") + 1
    first = next(i for i in range(len(ids)) if starts[i + 1] > s)
    last = next(i for i in range(len(ids) + 1) if starts[i] >= e)
    want = sum(math.exp(x) for x in lps[first:last]) / (last - first)
    assert got.conf == pytest.approx(want)
    assert got.tokens == next(i for i in range(len(ids) + 1) if starts[i] >= text.index("}") + 1)


def test_definitions_name_the_pinned_rules():
    d = SIGNAL_DEFINITIONS
    assert set(d) == {"answer", "answer_conf", "hesitation", "answer_tokens"}
    assert "0 = the graded-correct answer" in d["answer"] and "-1" in d["answer"]
    assert "raw" in d["answer_conf"] and "boxed content" in d["answer_conf"]
    assert "whole word" in d["hesitation"] and "case-insensitive" in d["hesitation"]
    assert "closes its answer" in d["answer_tokens"]
