"""Math grading: boxed-answer extraction (table) and math-verify equivalence (table), SPEC §3.4."""

import threading

import pytest
from otbench.probe.grading._answer import answer_part
from otbench.probe.grading._grade import grade
from otbench.probe.grading._math import boxed_candidates, last_boxed
from otbench.probe.grading._types import Status

# (text, expected last boxed content); expectations written by hand from the rule.
BOXED = [
    (r"\boxed{5}", "5"),                                         # plain
    (r"so \boxed{\frac{1}{2}}.", r"\frac{1}{2}"),                # nested braces
    (r"\boxed{\left\{1,2\right\}}", r"\left\{1,2\right\}"),      # escaped braces are not grouping
    (r"\boxed{\{1, 2\}}", r"\{1, 2\}"),                          # \{ \} inside
    (r"\boxed{a} then \boxed{b}", "b"),                          # the final one wins
    (r"\fbox{7}", "7"),                                          # \fbox is a box too
    (r"answer: \boxed 42$", "42"),                               # \boxed x form stops at $
    (r"answer: \boxed 42.", "42"),                               # trailing period dropped
    (r"\boxed {x^2}", "x^2"),                                    # space before the brace
    (r"\boxed{3} then \boxed{\frac{1}{", "3"),                   # truncated last box ignored
    (r"\boxed{}", ""),                                           # empty box is a candidate
    (r"\boxedx{3}", None),                                       # another macro, not \boxed
    (r"no box here", None),                                      # nothing
    (r"\boxed{\text{(B)}}", r"\text{(B)}"),                      # text inside
    (r"\boxed{\boxed{9}}", "9"),                                 # nested box: the inner starts last
    ("\\boxed{2\n+3}", "2\n+3"),                                 # newlines inside braces kept
]


@pytest.mark.parametrize("text,expected", BOXED)
def test_last_boxed(text, expected):
    assert last_boxed(text) == expected


def test_boxed_candidates_in_order():
    # Every well-formed box, in order of start; the unclosed one is skipped.
    assert boxed_candidates(r"\boxed{1} \fbox{2} \boxed 3 \boxed{4") == ["1", "2", "3"]


# (reference, response, expected status); equivalences decided by math-verify,
# each chosen so a human agrees on the verdict.
MATH = [
    (r"\frac{14}{3}", r"\boxed{\frac{14}{3}}", Status.OK),              # identical
    (r"\frac{14}{3}", r"\boxed{\dfrac{14}{3}}", Status.OK),             # \dfrac = \frac
    (r"\frac{3}{4}", r"\boxed{0.75}", Status.OK),                       # exact decimal
    (r"\frac{14}{3}", r"\boxed{4.6667}", Status.WRONG_ANSWER),          # rounded is not equal
    ("204", r"\boxed{204}", Status.OK),                                 # AIME integer
    ("204", r"\boxed{0204}", Status.OK),                                # leading zero, same number
    ("204", r"\boxed{205}", Status.WRONG_ANSWER),                       # off by one
    (r"x^2+2x", r"\boxed{2x + x^2}", Status.OK),                        # commuted sum
    (r"\frac{\sqrt{2}}{2}", r"\boxed{\frac{1}{\sqrt{2}}}", Status.OK),  # symbolic equality
    (r"(3, \frac{\pi}{2})", r"\boxed{\left(3, \frac{\pi}{2}\right)}", Status.OK),  # tuple
    (r"(3, \frac{\pi}{2})", r"\boxed{(\frac{\pi}{2}, 3)}", Status.WRONG_ANSWER),   # order matters
    (r"\text{Evelyn}", r"\boxed{\text{Evelyn}}", Status.OK),            # text answer
    ("5", "the answer is 5", Status.NO_ANSWER),                         # no box: not graded
    ("5", r"\boxed{}", Status.PARSE_ERROR),                             # empty box
    ("5", r"<think>\boxed{5}</think>I am not sure.", Status.NO_ANSWER),  # box only in thinking
    ("5", r"<think>\boxed{4}</think>\boxed{5}", Status.OK),             # thinking ignored
    ("5", r"<think>\boxed{5} hmm", Status.NO_ANSWER),                   # thinking never ended
    ("5", r"\boxed{5} wait, \boxed{6}", Status.WRONG_ANSWER),           # final box counts
    ("5", r"\boxed{5} wait, \boxed{6", Status.OK),                      # truncated last box ignored
    ("5", r"\fbox{5}", Status.OK),                                      # \fbox
    ("5", r"so \boxed 5", Status.OK),                                   # \boxed x
    (r"\boxed{12}", r"\boxed{12}", Status.OK),                          # reference already boxed
    ("5", "<|channel|>analysis<|message|>\\boxed{4}<|end|><|start|>assistant"
          "<|channel|>final<|message|>\\boxed{5}<|return|>", Status.OK),  # GPT-OSS channels
    ("5", "<|channel|>analysis<|message|>\\boxed{5}", Status.NO_ANSWER),   # GPT-OSS: analysis only
    # per family: DeepSeek-R1's prompt already opened <think>, so the reply has only the end
    ("5", "We add 2 and 3.\n</think>\n\nSo \\boxed{5}.", Status.OK),
    # the generic family's answer-forcing suffix opens the box the answer closes
    ("5", "Therefore, the final answer is $\\boxed{5}$.", Status.OK),
    ("5", "Therefore, the final answer is $\\boxed{5", Status.NO_ANSWER),   # cut before the brace
    ("5", "\\boxed{" + "1" * 1001 + "}", Status.PARSE_ERROR),              # over 1,000 characters
    ("5", "the answer is $5$", Status.NO_ANSWER),                          # no box: no bare numbers
]


@pytest.mark.parametrize("reference,response,status", MATH)
def test_grade_math(reference, response, status):
    g = grade("math", reference, response)
    assert g.status is status, g
    assert g.correct is (status is Status.OK)


def test_reference_error_when_reference_unparsable():
    # An empty reference can verify nothing: the data are at fault, not the model.
    g = grade("math", "", r"\boxed{1}")
    assert (g.correct, g.status) == (False, Status.REFERENCE_ERROR)


def test_answer_part_rules():
    assert answer_part("a</think>b</think>c") == "c"        # last end marker
    assert answer_part("<think>x") is None                  # never ended
    assert answer_part("plain") == "plain"                  # no markers: all of it
    assert answer_part("x</think>ans<|return|>tail") == "ans"  # harmony end token cut


def test_math_outside_main_thread_is_refused():
    # math-verify's SIGALRM timeouts only work in the main thread: refuse
    # rather than grade without a timeout.
    box = {}

    def run():
        try:
            grade("math", "1", r"\boxed{1}")
        except RuntimeError as e:
            box["e"] = str(e)

    t = threading.Thread(target=run)
    t.start()
    t.join()
    assert "main thread" in box["e"]
