"""Every extraction is linear-time and every grade is bounded in time, in process and in the pool.

The bounds are generous (a loaded two-core machine); the inputs are the
attacks that used to take minutes: a backtracking bait for the choice field
("answer" + 100 spaces + "!") and an unclosed `\\boxed{` repeated 20,000
times (140 KB).
"""

import time

import pytest
from otbench.probe.grading._batch import grade_minimal
from otbench.probe.grading._choice import extract_choice
from otbench.probe.grading._code import extract_code
from otbench.probe.grading._grade import GradeConfig, grade
from otbench.probe.grading._math import boxed_candidates, last_boxed
from otbench.probe.grading._pool import Grader
from otbench.probe.grading._types import Status

BAIT = "answer" + " " * 100 + "!"
BOXES = "\\boxed{" * 20_000
BOUND_S = 10.0  # seconds; each case below takes milliseconds when linear

ATTACKS = {
    "choice-bait": ("choice", "A", BAIT),
    "choice-bait-x1000": ("choice", "A", BAIT * 1000),
    "choice-boxes": ("choice", "A", BOXES),
    "choice-fields": ("choice", "A", "Answer:" * 20_000 + " " * 5_000),
    "math-boxes": ("math", "5", BOXES),
    "math-boxes-closed": ("math", "5", BOXES + "}" * 20_000),
    "math-spaces": ("math", "5", "\\boxed " * 20_000),
    "math-long-box": ("math", "5", "\\boxed{" + "1+" * 50_000 + "1}"),
}


def _timed(fn, *args):
    t = time.perf_counter()
    out = fn(*args)
    return out, time.perf_counter() - t


@pytest.mark.parametrize("text", [BAIT, BAIT * 1000, BOXES, "Answer:" * 20_000, "\\boxed{(" * 20_000])
def test_extractors_are_linear(text):
    for fn in (extract_choice, last_boxed, boxed_candidates, extract_code):
        _, dt = _timed(fn, text)
        assert dt < BOUND_S, (fn.__name__, dt)
    # eight times the input stays within the bound (the quadratic extractors
    # this replaces took minutes on the single input)
    for fn in (extract_choice, last_boxed):
        _, dt = _timed(fn, text * 8)
        assert dt < BOUND_S, (fn.__name__, dt)


def test_minimal_grader_is_linear():
    for response in (BOXES, "\\boxed{" + " " * 100_000 + "x}", "\\boxed{" + "$" * 50_000 + "}"):
        _, dt = _timed(grade_minimal, "math", "5", response)
        assert dt < BOUND_S


@pytest.mark.parametrize("name", list(ATTACKS))
def test_grade_in_process_is_bounded(name):
    task, ref, response = ATTACKS[name]
    g, dt = _timed(grade, task, ref, response)
    assert not g.correct and dt < BOUND_S, (g, dt)


def test_long_box_is_refused_before_the_verifier():
    g = grade("math", "5", ATTACKS["math-long-box"][2])
    assert g.status is Status.PARSE_ERROR and "longer than" in g.detail


@pytest.mark.parametrize("box", [r"\boxed{9^{9^{9^{9}}}}", r"\boxed{2^{2^{40}}}"])
def test_huge_numbers_stop_at_the_verifier_timeout(box):
    # math-verify's alarm interrupts sympy here: 1 s per call, at most 6 calls
    config = GradeConfig(math_timeout_s=1)
    g, dt = _timed(lambda: grade("math", "5", box, config=config))
    assert g.status is Status.TIMEOUT and dt < 6 * 1 + BOUND_S, (g, dt)


@pytest.mark.parametrize("workers", [0, 1])
def test_grade_many_is_bounded_in_every_mode(workers):
    reqs = [{"task": t, "reference": r, "response": x} for t, r, x in ATTACKS.values()]
    with Grader(workers) as g:
        grades, dt = _timed(g.grade_many, reqs)
    assert [x.correct for x in grades] == [False] * len(reqs)
    assert dt < BOUND_S * 3, dt
