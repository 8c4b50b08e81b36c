"""Hostile answers through every grader: nothing a model wrote runs, and each finishes in its limit.

The corpus is code in every syntax the parsers accept (Python, sympy's names, LaTeX around
Python), power towers, huge exponents and factorials, deep nesting and a 1 MB answer. Each code
answer would create a canary file if any grader evaluated it; the canary must never appear.
Graders: Dynasor's `math_equal` (the probe's agreement thread and the online controller call it),
`dynasor_agreement` over a trajectory holding the attacks, otbench's math and choice grading in
the worker pool (`grade_many`), and `parse_arith` itself. `parse_arith` is also held against
sympy's own ``parse_expr`` on random benign arithmetic (hypothesis): where either accepts, both
give the same tree.
"""

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from otbench.probe.grading import dynasor_agreement, grade_many, make_request
from otbench.probe.grading._arith import ArithError, parse_arith
from otbench.probe.grading._deadline import failures
from otbench.probe.grading._dynasor_equal import math_equal, symbolic_equal

DEADLINE_S = 2.0
# One comparison may restart the comparison process (a fresh interpreter importing sympy, slow
# on a loaded two-core machine) before its deadline starts.
RESTART_S = 45.0


def code_answers(canary: str) -> list[str]:
    touch = f"__import__('pathlib').Path({canary!r}).touch()"
    return [
        touch,
        f"({touch})",
        f"1+{touch}",
        f"[{touch}]",
        f"(lambda: {touch})()",
        f"eval({touch!r})",
        f"exec({touch!r})",
        f"S({touch!r})",
        f"sympify({touch!r})",
        f"N({touch!r})",
        f"Symbol('x').__class__.__init__.__globals__['__builtins__']['exec']({touch!r})",
        f"().__class__.__bases__[0].__subclasses__() or {touch}",
        f"\\boxed{{{touch}}}",
        f"\\frac{{{touch}}}{{2}}",
        f"x = {touch}",
        f"({touch}, 1)",
        f"\\begin{{pmatrix}}{touch} & 1\\end{{pmatrix}}",
        f"open({canary!r}, 'w')",
        f"__import__('os').system('touch {canary}')",
    ]


COSTLY = [
    "2^2^2^9", "2**2**2**9", "9**9**9**9", "10**10**10", "(10**40)**(10**40)",
    "9^{9^{9^{9}}}", "9^{9^{9}}", "\\boxed{9^{9^{9}}}", "2^{2^{2^{2^{2}}}}", "10^{10^{10}}",
    "100000!", "999999!!", "binomial(10**30, 10**15)", "factorial(10**6)",
    "\\binom{1000000}{500000}", "(x+1)**100000", "(x+y+1)^{200}",
    "(" * 5000 + "1" + ")" * 5000, "{" * 5000 + "1" + "}" * 5000, "-" * 100000 + "1",
    "1" * 1_000_000, "x+" * 300_000 + "x",
]


def test_no_grader_runs_model_text(tmp_path):
    canary = tmp_path / "canary"
    answers = code_answers(str(canary))
    for a in answers:
        for ref in ("1", a, "x"):
            t = time.monotonic()
            math_equal(a, ref)
            assert time.monotonic() - t < 6 * DEADLINE_S + RESTART_S
        with pytest.raises(ArithError):
            parse_arith(a)
    dynasor_agreement(answers + ["1", "1"])
    reqs = [make_request("math", "31337", f"The answer is \\boxed{{{a}}}") for a in answers]
    reqs += [make_request("choice", "A", f"Answer: {a}", n_options=4) for a in answers]
    grades = grade_many(reqs, workers=1)
    assert not any(g.correct for g in grades)
    assert not canary.exists(), "a grader evaluated a model's text"


@pytest.mark.parametrize("answer", COSTLY, ids=lambda a: a[:24])
def test_costly_answers_finish_within_the_deadline(answer):
    t = time.monotonic()
    assert symbolic_equal(answer, "1", deadline_s=DEADLINE_S) is False
    assert time.monotonic() - t < DEADLINE_S + RESTART_S
    t = time.monotonic()
    math_equal(answer, "7")
    # the string steps are bounded, and each symbolic call is cut at its deadline
    assert time.monotonic() - t < 6 * 5.0 + RESTART_S


def test_a_costly_answer_costs_one_deadline():
    """A text whose parse overran is compared only as a string from then on; the reason is counted."""
    symbolic_equal("0", "1")                         # the comparison process is up
    before = failures().get("over the 0.001 s deadline", 0)
    assert symbolic_equal("z^{2}+3", "3+z^2", deadline_s=0.001) is False
    assert failures()["over the 0.001 s deadline"] == before + 1
    t = time.monotonic()
    assert symbolic_equal("z^{2}+3", "3+z^2") is False   # not parsed again: no process, no wait
    assert time.monotonic() - t < 0.5
    assert symbolic_equal("w^{2}+3", "3+w^2") is True    # another text is compared as before


def test_graded_pool_answers_finish_within_their_deadline():
    reqs = [make_request("math", "1", f"\\boxed{{{a}}}") for a in COSTLY[:12]]
    t = time.monotonic()
    grades = grade_many(reqs, workers=2)
    assert not any(g.correct for g in grades)
    # math-verify's own limits (5 s per parse and per comparison) and the pool's deadline
    assert time.monotonic() - t < len(reqs) * 30 + RESTART_S


def test_dynasor_readings_are_kept():
    assert math_equal("2^2^2^2", "0") is True          # Python's XOR, as Dynasor's parse_expr reads ^
    assert math_equal("2^2^2^2", "65536") is False
    assert math_equal("\\frac{1}{2}", "0.5") is True
    assert math_equal("2*x+1", "1+2*x") is True
    assert math_equal("\\sqrt{2}/2", "1/\\sqrt{2}") is True
    assert math_equal("x^{2}+1", "1+x^2") is True


# -- parse_arith against sympy's parse_expr on benign arithmetic (our own strings, never a model's)

_atoms = st.sampled_from(["0", "1", "2", "3", "7", "12", "0.5", "2.50", ".25", "1e-3", "x", "y", "pi"])


def _expr(children):
    return st.one_of(
        st.tuples(children, st.sampled_from(["+", "-", "*", "/", "^", " < "]), children).map(
            lambda t: f"{t[0]}{t[1]}{t[2]}"),
        children.map(lambda c: f"({c})"),
        children.map(lambda c: f"-{c}"),
        st.tuples(children, st.sampled_from(["1", "2", "-1", "3"])).map(lambda t: f"{t[0]}**{t[1]}"),
        children.map(lambda c: f"sqrt({c})"),
        st.sampled_from(["3!", "4!!", "(2, x)", "[1, y]"]),
    )


benign = st.recursive(_atoms, _expr, max_leaves=8)


@settings(max_examples=300, deadline=None)
@given(benign)
def test_parse_arith_reads_as_parse_expr_does(text):
    from sympy.parsing.sympy_parser import parse_expr

    try:
        want = parse_expr(text)
    except Exception:
        want = None
    try:
        got = parse_arith(text)
    except ArithError:
        got = None
    if want is None or got is None:
        assert want is None and got is None, (text, want, got)
    else:
        assert type(got) is type(want) and got == want, (text, want, got)
