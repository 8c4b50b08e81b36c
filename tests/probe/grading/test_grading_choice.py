"""Multiple-choice grading: letter extraction (table), seeded shuffling, statuses (SPEC §3.4)."""

import hashlib
import itertools
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from otbench.probe.grading._choice import (
    ANSWER_FORMS,
    LETTERS,
    answer_letters,
    extract_choice,
    shuffle_options,
    shuffle_order,
)
from otbench.probe.grading._grade import grade
from otbench.probe.grading._types import Status

# The grading corpus of the choice task: every accepted answer form and the
# rejected look-alikes, as (answer part, expected letter or None = unparsed);
# n_options = 4 (A-D). The letter comes only from an answer field (SPEC §3.4).
ACCEPTED = [
    # an answer field
    ("Answer: C", "C"),                                        # the instructed form
    ("ANSWER: B", "B"),                                        # field name in capitals
    ("answer:B", "B"),                                         # no space
    ("**Answer:** D", "D"),                                    # bold field name
    ("**Answer: C**", "C"),                                    # bold field with the letter
    ("**Final Answer**: C", "C"),                              # bold name, colon outside
    ("Final Answer: **A**", "A"),                              # bold letter
    ("Answer: (A) because it is inert", "A"),                  # explanation after the letter
    ("Answer: $C$", "C"),                                      # simple-evals' optional dollars
    (r"Answer: $\boxed{C}$", "C"),                            # boxed in the field
    ("Answer: Option C", "C"),                                 # "option" word
    ("Answer - C.", "C"),                                      # dash instead of a colon
    ("Answer:\n\nC", "C"),                                     # letter on a following line
    ("The answer is (B).", "B"),                               # "answer is" phrasing
    ("The correct answer is: **(B)**", "B"),                   # "is:" and bold parentheses
    ("I first thought B.\nAnswer: C", "C"),                    # other letters before the field
    ("Answer: A\nOn reflection, Answer: D", "D"),              # the last field wins
    ("assistantfinalAnswer: C", "C"),                          # harmony final message, tokens skipped
    # a boxed letter
    (r"\boxed{B}", "B"),
    (r"so $\boxed{(D)}$.", "D"),
    (r"\boxed{\text{C}}", "C"),
    (r"\boxed{\textbf{(C)}}", "C"),
    (r"\boxed{A} no wait, \boxed{B}", "B"),                     # the last form wins
    (r"Answer: A" + "\n" + r"\boxed{B}", "B"),                   # across forms too
    # the letter alone
    ("C", "C"),
    ("(C)", "C"),
    ("**C**", "C"),
    ("C.", "C"),
    ("  **(C)**\n", "C"),
]

REJECTED = [
    # the examples: letters in reasoning text are never read
    ("The C=O stretch is weak here, so", None),
    ("the data in D) we can see", None),
    ("…the correct one is C, but wait, maybe A is", None),
    # other look-alikes
    ("It must be (D), not (A) as one might think... so (B)", None),  # marked letters, no field
    ("I think B is right.", None),                                  # a letter in a sentence
    ("Option C seems right", None),                                 # no answer field
    ("B) 42 moles", None),                                          # an echoed option is no field
    ("To answer this, C matters", None),                            # "answer" without ":" / "is"
    ("I answered C", None),                                         # a longer word
    ("answer: c", None),                                            # lowercase (simple-evals scores it 0)
    ("The answer is a bit unclear", None),                          # the article "a"
    ("Answer: I think so", None),                                   # "I" is no option of four
    ("The answer is C=O", None),                                    # a formula, not a letter
    ("The answer is E", None),                                      # E is not an option of four
    (r"\boxed{C. 42 moles}", None),                                 # a box holding more than a letter
    ("Answer: \n\n\n\nC", None),                                   # more than two line breaks
    ("None of them", None),
    ("", None),
]


@pytest.mark.parametrize("text,expected", ACCEPTED + REJECTED)
def test_extract_choice(text, expected):
    assert extract_choice(text, 4) == expected


def test_forms_are_documented():
    assert [name for name, _ in ANSWER_FORMS] == ["field", "boxed", "alone"]
    assert {form for text, _ in ACCEPTED for _, _, form in answer_letters(text)} == {"field", "boxed", "alone"}


# (reference, full response, status): the answer part each family produces
GRADE = [
    # Qwen3-Thinking / DeepSeek-R1-Distill: the text after the last </think>
    ("C", "<think>Clearly (A).</think>\n\nAnswer: C", Status.OK),        # thinking never read
    ("A", "<think>Answer: A</think>I cannot decide.", Status.NO_ANSWER),  # letter only in thinking
    ("A", "<think>Answer: A", Status.NO_ANSWER),                         # thinking never ended
    ("C", "We add.\n</think>\n\nThe C=O stretch … so", Status.NO_ANSWER),  # unparsed: wrong
    ("D", "</think>\n\nthe data in D) we", Status.NO_ANSWER),
    ("C", "</think>\n\n…correct one is C, but wait, maybe A is", Status.NO_ANSWER),
    # GPT-OSS: the final channel
    ("B", "<|channel|>analysis<|message|>Answer: A<|end|><|start|>assistant<|channel|>final"
          "<|message|>**B**<|return|>", Status.OK),
    ("B", "<|channel|>analysis<|message|>Answer: B", Status.NO_ANSWER),   # never reached the final channel
    # generic chat: the answer-forcing suffix opens a box
    ("D", "Therefore, the final answer is $\\boxed{D}$.", Status.OK),
    # statuses
    ("B", "Answer: C", Status.WRONG_ANSWER),                            # wrong letter
    ("b", "Answer: B", Status.OK),                                      # reference case-insensitive
    ("E", "Answer: E", Status.REFERENCE_ERROR),                         # reference outside A-D
    ("AB", "Answer: A", Status.REFERENCE_ERROR),                        # reference not one letter
]


@pytest.mark.parametrize("reference,response,status", GRADE)
def test_grade_choice(reference, response, status):
    g = grade("choice", reference, response)
    assert (g.correct, g.status) == (status is Status.OK, status)
    if status is Status.NO_ANSWER and "</think>" in response:
        assert g.detail.startswith("unparsed")


def test_more_options_extend_letters():
    # Ten options: J becomes a valid answer.
    assert grade("choice", "J", "Answer: J", n_options=10).correct
    assert extract_choice("Answer: J", 4) is None


def _order_twin(n, seed, qid):
    # Independent re-derivation of the documented key.
    def key(i):
        parts = [b"otbench/choice-shuffle/v1", str(seed).encode(), qid.encode(), str(i).encode()]
        return hashlib.sha256(b"".join(len(p).to_bytes(4, "big") + p for p in parts)).digest()
    return tuple(sorted(range(n), key=key))


@settings(max_examples=40)
@given(n=st.integers(2, 10), seed=st.integers(0, 2**40), qid=st.text(max_size=12),
       correct=st.data())
def test_shuffle_matches_documented_derivation(n, seed, qid, correct):
    order = shuffle_order(n, seed=seed, question_id=qid)
    assert order == _order_twin(n, seed, qid)
    assert sorted(order) == list(range(n))
    c = correct.draw(st.integers(0, n - 1))
    opts = [f"opt{i}" for i in range(n)]
    s = shuffle_options(opts, c, seed=seed, question_id=qid)
    assert s.options[LETTERS.index(s.reference)] == opts[c]   # the letter points at the right text
    assert s.options == tuple(opts[i] for i in order)
    assert s.seed == seed


def test_shuffle_depends_on_seed_and_question():
    # A pinned value (computed once from the documented derivation, sha256 in
    # hashlib) guards against silent changes of the derivation.
    assert shuffle_order(4, seed=0, question_id="q1") == (2, 3, 0, 1)
    orders = {shuffle_order(4, seed=s, question_id="q1") for s in range(50)}
    assert len(orders) > 10
    assert len({shuffle_order(4, seed=0, question_id=f"q{i}") for i in range(50)}) > 10


def test_shuffle_is_close_to_uniform():
    # 2400 questions, 4 options: the correct option's letter should be spread
    # evenly; a chi-square statistic on 3 dof above 16.3 has p < 0.001.
    counts = Counter(shuffle_options(["r", "a", "b", "c"], 0, seed=7, question_id=f"q{i}").reference
                     for i in range(2400))
    chi2 = sum((counts[x] - 600) ** 2 / 600 for x in "ABCD")
    assert chi2 < 16.3, counts
    perms = Counter(shuffle_order(3, seed=1, question_id=f"q{i}") for i in range(1200))
    assert set(perms) == set(itertools.permutations(range(3)))


@pytest.mark.parametrize("options,correct,match", [
    (["only"], 0, r"`options` must hold 2\.\.10 options, got 1\."),
    (["a", "b"], 2, r"`correct` must index `options` \(0\.\.1\), got 2\."),
])
def test_shuffle_iv(options, correct, match):
    with pytest.raises(ValueError, match=match):
        shuffle_options(options, correct, seed=0, question_id="q")
