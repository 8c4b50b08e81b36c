"""The field methods' own probes, replayed against their sources' control flow, case by case (issue 37).

Each source's loop is transcribed here from its code (the twin), then run on
recorded probe texts / log-probabilities; otbench's reading of the same
probes (`otbench.probe.grading` `dynasor_*` / `deer_*`) and its stop rules
(`otbench.analysis.measurement.dynasor_own_stop` / `deer_own_stop`) must stop
exactly where the source does.

* Dynasor-CoT: hao-ai-lab/Dynasor 0d2f1b9, ``dynasor/core/cot.py`` lines
  58-150 (the probe of chunk i is on the prompt before the chunk; after it,
  the test of lines 121-135), ``dynasor/core/evaluator.py`` lines 745-762.
* DEER: iie-ycx/DEER c9dd19f, ``vllm-deer.py`` lines 100-149 (``avg1``), 396
  and 621 (``max_judge_steps``), 636 (``pred_prob > threshold``).
"""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from otbench.analysis.measurement import deer_own_stop, deer_stop, dynasor_own_stop, dynasor_stop
from otbench.probe.grading import (
    DEER_PROMPT,
    DEER_STOPS,
    DYNASOR_SUFFIX,
    deer_confidence,
    deer_cut,
    deer_trial,
    dynasor_agreement,
    dynasor_math_equal,
    dynasor_obtain_answer,
    dynasor_probe,
    dynasor_uncertain,
    hesitates,
)

UNCERTAIN = ["wait", "hold", "but", "okay", "no", "hmm"]     # cot.py line 5


# -- the twins: the sources' control flow, transcribed ---------------------------------------

def _obtain_answer(s):                       # cot.py lines 23-33
    stack = []
    for i, c in enumerate(s):
        if c == "{":
            stack.append(c)
        elif c == "}":
            if not stack:
                return s[:i]
            stack.pop()
    return ""


def _eqaul_group(answers):                   # evaluator.py lines 749-762
    classes = []
    for a in answers:
        if any(dynasor_math_equal(a, rep) for rep in classes):
            continue
        classes.append(a)
    return len(classes) == 1


def replay_dynasor(probe_texts, threshold):
    """cot.py's loop over chunks on recorded probe texts (text i: the probe before chunk i): the chunk
    after which thinking ends (adaptive_end), or None."""
    answers, responses = [], []
    for i, text in enumerate(probe_texts):
        answers.append(_obtain_answer(text))
        responses.append(text)
        certain = [not any(w in r.lower() for w in UNCERTAIN) for r in responses[-threshold:]]
        window = answers[-threshold:]
        if _eqaul_group(window) and sum(1 for a in window if a != "") == threshold \
                and sum(certain) == threshold:
            return i
    return None


def _avg1(logprobs):                         # vllm-deer.py lines 100-149, policy avg1
    total, count = 0.0, 0
    for i in range(1, len(logprobs)):
        total += math.exp(logprobs[i])
        count += 1
    if len(logprobs) < 1:
        return 0.0
    return total / count                     # ZeroDivisionError for one token, as in the source


def replay_deer(trials, threshold, max_judge_steps):
    """vllm-deer.py's checks: trial answer j (1-based) decoded after chunk j while j <= max_judge_steps
    (lines 396, 621); the first j with pred_prob > threshold, or None."""
    for j, lps in enumerate(trials, start=1):
        if j > max_judge_steps:
            return None
        try:
            prob = _avg1(lps)
        except ZeroDivisionError:            # the source's question ends in error: never an early exit
            prob = 0.0
        if prob > threshold:
            return j
    return None


# -- otbench's reading, walked as OTBench walks a trajectory's boundaries ----------------------

def otbench_dynasor(probe_texts, window):
    ids, windows = dynasor_agreement([dynasor_obtain_answer(t) for t in probe_texts])
    unc = [int(dynasor_uncertain(t)) for t in probe_texts]
    agree, hes = np.array([windows], float), np.array([unc], float)
    for k in range(len(probe_texts) + 1):
        if dynasor_own_stop(agree, hes, k, window)[0]:
            return k - 1                      # boundary k decides after the chunk of probe k - 1
    return None


def otbench_deer(trials, theta, max_judge_steps):
    confs = [deer_confidence(lps) for lps in trials]
    for k in range(1, len(trials) + 1):
        if deer_own_stop(np.array([confs[k - 1]]), k, theta, max_judge_steps)[0]:
            return k
    return None


# -- Dynasor-CoT -------------------------------------------------------------------------------

def test_obtain_answer_is_the_sources():
    for s in ["42} \\]", "\\frac{1}{2}} \\] done", "no brace", "}", "{a}}b}", "x^{2}+1}"]:
        assert dynasor_obtain_answer(s) == _obtain_answer(s)


@pytest.mark.parametrize("text, uncertain, whole_word", [
    ("x^2 + 1, a polynomial} \\]", True, False),     # "no" inside "polynomial"
    ("42} \\] Wait, let me check", True, True),      # after the box: Dynasor reads all of it
    ("42} \\]", False, False),
    ("5} \\]\n\nButter", True, False),               # "but" in "Butter"
    ("4} \\] Okay.", True, True),
])
def test_uncertainty_is_a_substring_of_the_whole_probe(text, uncertain, whole_word):
    assert dynasor_uncertain(text) is uncertain
    assert hesitates(text) is whole_word            # otbench's own hesitation: whole words only


def test_a_polynomial_stops_nothing_there():
    texts = ["x+1} \\]", "x+1} \\] a polynomial", "x+1} \\]", "x+1} \\]"]
    assert replay_dynasor(texts, 2) == 3 and otbench_dynasor(texts, 2) == 3
    # otbench's whole-word reading would have stopped a chunk earlier, after probes 0 and 1
    hes = np.array([[int(hesitates(t)) for t in texts]], float)
    ids = np.array([[0, 0, 0, 0]], float)
    assert dynasor_stop(ids, hes, 2, 2)[0]


def test_a_wait_after_the_box_stops_nothing_there():
    texts = ["7} \\]", "7} \\]\nWait", "7} \\]", "7} \\]"]
    assert replay_dynasor(texts, 2) == otbench_dynasor(texts, 2) == 3


def test_answers_agree_by_math_equivalence():
    texts = ["\\frac{1}{2}} \\]", "0.5} \\]", "1/2} \\]"]
    assert replay_dynasor(texts, 3) == otbench_dynasor(texts, 3) == 2
    ids, windows = dynasor_agreement([dynasor_obtain_answer(t) for t in texts])
    assert ids == [0, 0, 0] and windows == [0b1, 0b11, 0b111]


def test_an_empty_answer_breaks_the_window():
    texts = ["3} \\]", "3 and more", "3} \\]", "3} \\]"]       # the second has no closing brace
    assert replay_dynasor(texts, 2) == otbench_dynasor(texts, 2) == 3


def test_agreement_is_exact_where_math_equal_is_not_transitive():
    # the percentage rule: 5000 ~ 50 (x 100), 50 ~ 0.5 (x 100), but 5000 !~ 0.5
    assert dynasor_math_equal("5000", "50") and dynasor_math_equal("0.5", "50")
    assert not dynasor_math_equal("5000", "0.5")
    texts = ["0.5} \\]", "50} \\]", "5000} \\]"]
    ids, windows = dynasor_agreement([dynasor_obtain_answer(t) for t in texts])
    # the windows ending at 2: {5000} and {50, 5000} agree (50 is the window's first), but
    # {0.5, 50, 5000} does not (5000 !~ 0.5, the first)
    assert windows == [0b1, 0b11, 0b11]
    # class ids over the trajectory put 5000 apart from 50 (its representative is 0.5), though
    # Dynasor's window 1..2 is one class (its first answer is 50): the mask, not the id, is exact
    assert ids == [0, 0, 1]
    assert replay_dynasor(texts, 3) is None and otbench_dynasor(texts, 3) is None
    assert replay_dynasor(texts[1:], 2) == otbench_dynasor(texts[1:], 2) == 1


_POOL = ["42} \\]", "42.0} \\]", "\\frac{1}{2}} \\]", "0.5} \\]", "7} \\] hmm", "7} \\]", "no box",
         "x=3} \\]", "3} \\]", "polynomial 3} \\]", "(1,2)} \\]", "[1, 2]} \\]"]


@settings(max_examples=30, deadline=None)
@given(st.lists(st.sampled_from(_POOL), min_size=1, max_size=8), st.integers(1, 4))
def test_dynasor_stops_where_its_source_does(texts, window):
    assert otbench_dynasor(texts, window) == replay_dynasor(texts, window)


def test_dynasor_probe_reads_the_text_after_the_suffix():
    toks = {1: " \\boxed{", 2: " 4", 3: "2", 4: "}", 5: " Wait"}
    dec = lambda seq: "".join(toks[t] for t in seq).lstrip()       # noqa: E731  (a leading space is lost alone)
    p = dynasor_probe([2, 3, 4, 5], True, decode=dec, context=[1])
    assert p.text == " 42} Wait" and p.answer == " 42" and p.uncertain and p.decoded == 5
    assert DYNASOR_SUFFIX.endswith("**Final Answer**\n\n\\[ \\boxed{")


# -- DEER ---------------------------------------------------------------------------------------

def test_deer_averages_tokens_one_to_n_minus_one():
    # `{` .9, `4` .8, `2` .6, `}` .99 (issue 37): DEER 0.7967; otbench's span inside the braces 0.7000
    lps = [math.log(p) for p in (0.9, 0.8, 0.6, 0.99)]
    assert deer_confidence(lps) == pytest.approx((0.8 + 0.6 + 0.99) / 3) == pytest.approx(0.7967, abs=5e-5)
    assert deer_confidence(lps) == pytest.approx(_avg1(lps))
    ours = np.array([(0.8 + 0.6) / 2])
    assert deer_own_stop(np.array([deer_confidence(lps)]), 1, 0.75, 10)[0]
    assert not deer_stop(ours, 1, 0.75, 10)[0]
    assert replay_deer([lps], 0.75, 10) == otbench_deer([lps], 0.75, 10) == 1


def test_deer_too_few_tokens_never_stop():
    assert deer_confidence([]) == 0.0 == _avg1([])
    with pytest.raises(ZeroDivisionError):
        _avg1([math.log(0.99)])                      # the source's question errors out
    assert deer_confidence([math.log(0.99)]) == 0.0
    assert replay_deer([[math.log(0.99)]], 0.5, 10) is None is otbench_deer([[math.log(0.99)]], 0.5, 10)


_LP = st.floats(min_value=-8.0, max_value=0.0, allow_nan=False)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.lists(_LP, min_size=0, max_size=6), min_size=1, max_size=12),
       st.floats(0.3, 0.99), st.integers(1, 10))
def test_deer_stops_where_its_source_does(trials, theta, max_judge):
    assert otbench_deer(trials, theta, max_judge) == replay_deer(trials, theta, max_judge)


def _vllm_stop_strings(pieces, stops, eos_at=None):
    """vLLM's stop-string check per decoded token (the text so far holds a stop string), and its
    end-of-sequence stop: how many tokens the request decodes."""
    text = ""
    for i, piece in enumerate(pieces):
        if i == eos_at:
            return i + 1
        text += piece
        if any(s in text for s in stops):
            return i + 1
    return len(pieces)


@pytest.mark.parametrize("pieces, eos_at, want", [
    (["{", "4", "2", "}", "\n", "x"], None, 5),          # "}\n" completes at the newline
    (["{", "4", "2", "}\n\n", "x"], None, 4),           # one token holds the stop
    (["{", "4", "2", "}", "$", "x", "}."], None, 7),    # "}$" is no stop; "}." is
    (["{", "\\frac", "{1}{2", "}}", "x"], None, 4),     # "}}"
    (["{", "(1,2", ")}", "x"], None, 3),                # ")}"
    (["{", "4", "2"], 2, 3),                            # end-of-sequence, counted
    (["{"] + ["1"] * 25, None, 20),                     # at most 20
])
def test_deer_cut_is_vllms_stop(pieces, eos_at, want):
    vocab = {i + 10: p for i, p in enumerate(pieces)}
    ids = list(vocab)
    if eos_at is not None:
        ids[eos_at] = 2
    dec = lambda seq: "".join(vocab.get(t, "") for t in seq)       # noqa: E731
    assert deer_cut(ids, decode=dec, eos=[2]) == want
    assert min(_vllm_stop_strings(pieces, DEER_STOPS, eos_at), 20) == want
    lps = [math.log(0.5 + 0.01 * i) for i in range(len(ids))]
    trial = deer_trial(ids, lps, decode=dec, eos=[2])
    assert trial.decoded == want and trial.conf == pytest.approx(_avg1(lps[:want]))
    assert DEER_PROMPT == "\n**Final Answer**\n\\boxed"


def test_math_equal_cases():
    assert dynasor_math_equal("\\frac{1}{2}", "0.5") and dynasor_math_equal("1,000", "1000")
    assert dynasor_math_equal("x=3", "3") and dynasor_math_equal("(1,2)", "[1, 2]")    # part by part
    assert dynasor_math_equal("(1, 2)", "(1,2)") and dynasor_math_equal("B", "B")
    assert not dynasor_math_equal("7", "8") and not dynasor_math_equal("", "7")
    # a tower of powers is compared as text, not evaluated (sympy would never finish)
    assert dynasor_math_equal("2^{2^{2^{2^{9}}}}", "2^{2^{2^{2^{9}}}}")
    assert not dynasor_math_equal("2^{2^{2^{2^{9}}}}", "2^{2^{2^{2^{8}}}}")
