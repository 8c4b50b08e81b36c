"""One grading entry point for math, multiple-choice and code responses (docs/rules.md)."""

import dataclasses
from typing import Any, Mapping, NamedTuple, Sequence

from ._answer import THINKING_END, THINKING_START, answer_part
from ._choice import LETTERS, grade_choice
from ._code import grade_code
from ._math import grade_math
from ._sandbox import SandboxLimits
from ._types import TASKS, CodeTest, Grade, Status
from otbench.errors import ArgumentError


@dataclasses.dataclass(frozen=True)
class GradeConfig:
    """Grader settings shared by every response of a run (record them with the run).

    Attributes:
        math_timeout_s: math-verify timeout per parse and per comparison (whole seconds).
        limits: sandbox limits for code.
        bwrap: bwrap binary (None: `bwrap` on PATH).
        python: interpreter run inside the sandbox (None: see `sandbox_python`).
        thinking_end / thinking_start: markers that delimit the thinking; the
            grader reads only the text after the last end marker.
    """

    math_timeout_s: int = 5
    limits: SandboxLimits = SandboxLimits()
    bwrap: str | None = None
    python: str | None = None
    thinking_end: tuple[str, ...] = THINKING_END
    thinking_start: tuple[str, ...] = THINKING_START

    def __post_init__(self):
        t = self.math_timeout_s
        if isinstance(t, bool) or not isinstance(t, int) or t < 1:
            # whole seconds: math-verify's timeout is signal.alarm(int)
            raise ArgumentError(f"`math_timeout_s` must be an integer >= 1, got {t!r}.")
        if not isinstance(self.limits, SandboxLimits):
            raise ArgumentError(f"`limits` must be a SandboxLimits, got {type(self.limits).__name__}.")
        for name in ("thinking_end", "thinking_start"):
            v = getattr(self, name)
            if not isinstance(v, tuple) or not all(isinstance(m, str) and m for m in v):
                raise ArgumentError(f"`{name}` must be a tuple of non-empty strings, got {v!r}.")


class GradeRequest(NamedTuple):
    """One response to grade (the batch form of `grade`'s arguments).

    Attributes:
        task: "math" | "choice" | "code".
        reference: math: the LaTeX answer; choice: the correct letter (after
            shuffling); code: unused.
        response: the model's text (thinking and answer, or the answer alone).
        tests: code only: `CodeTest`s (stdin/stdout, or functional with `fn_name`).
        fn_name: code only: the function to call for functional tests.
        n_options: choice only: number of options (letters A.. onwards).
    """

    task: str
    reference: str
    response: str
    tests: tuple[CodeTest, ...] = ()
    fn_name: str | None = None
    n_options: int = 4


def _tests_iv(tests: Any) -> tuple[CodeTest, ...]:
    if isinstance(tests, (str, bytes, Mapping)) or not isinstance(tests, Sequence):
        raise ArgumentError(f"`tests` must be a sequence of {{'input': str, 'output': str}}, "
                            f"got {type(tests).__name__}.")
    out = []
    for i, t in enumerate(tests):
        if isinstance(t, Mapping):
            if "input" not in t or "output" not in t:
                raise ArgumentError(f"`tests[{i}]` must have keys 'input' and 'output'.")
            t = CodeTest(t["input"], t["output"])
        elif not isinstance(t, CodeTest):
            raise ArgumentError(f"`tests[{i}]` must be a CodeTest or a mapping, got {type(t).__name__}.")
        if not isinstance(t.input, str) or not isinstance(t.output, str):
            raise ArgumentError(f"`tests[{i}]` input and output must be strings.")
        out.append(t)
    if not out:
        raise ArgumentError("`tests` must hold at least one test for a code task.")
    return tuple(out)


def make_request(task: str, reference: str, response: str, *, tests=None, fn_name: str | None = None,
                 n_options: int = 4) -> GradeRequest:
    """Validate and normalise `grade`'s arguments into a `GradeRequest`."""
    if task not in TASKS:
        raise ArgumentError(f"`task` must be one of {', '.join(map(repr, TASKS))}, got {task!r}.")
    if not isinstance(reference, str):
        raise ArgumentError(f"`reference` must be a string, got {type(reference).__name__}.")
    if not isinstance(response, str):
        raise ArgumentError(f"`response` must be a string, got {type(response).__name__}.")
    if task == "code":
        tests = _tests_iv(tests)
        if fn_name is not None and (not isinstance(fn_name, str) or not fn_name.isidentifier()):
            raise ArgumentError(f"`fn_name` must be a Python identifier, got {fn_name!r}.")
        if fn_name is not None and fn_name.startswith("__"):
            raise ArgumentError(f"`fn_name` must be a plain name (no leading double underscore: "
                                f"that reaches the interpreter's own attributes), got {fn_name!r}.")
    else:
        if tests:
            raise ArgumentError(f"`tests` is only for code tasks, got tests for a {task} task.")
        if fn_name is not None:
            raise ArgumentError(f"`fn_name` is only for code tasks, got one for a {task} task.")
        tests = ()
    if isinstance(n_options, bool) or not isinstance(n_options, int) or not 2 <= n_options <= len(LETTERS):
        raise ArgumentError(f"`n_options` must be an integer in 2..{len(LETTERS)}, got {n_options!r}.")
    return GradeRequest(task, reference, response, tests, fn_name, n_options)


def grade_request(req: GradeRequest, config: GradeConfig = GradeConfig()) -> Grade:
    """Grade one validated request in this process (math must be in the main thread)."""
    answer = answer_part(req.response, thinking_end=config.thinking_end,
                         thinking_start=config.thinking_start)
    if answer is None:
        return Grade.wrong(Status.NO_ANSWER, "the thinking never ended")
    if req.task == "math":
        return grade_math(answer, req.reference, timeout_s=config.math_timeout_s)
    if req.task == "choice":
        return grade_choice(answer, req.reference, n_options=req.n_options)
    return grade_code(answer, req.tests, fn_name=req.fn_name, limits=config.limits,
                      bwrap=config.bwrap, python=config.python)


def grade(task: str, reference: str, response: str, *, tests=None, fn_name: str | None = None,
          n_options: int = 4, config: GradeConfig = GradeConfig()) -> Grade:
    """Grade one response; anything but a verified correct answer is wrong, with its status.

    Args:
        task: "math" (final `\\boxed{}` vs `reference` by math-verify),
            "choice" (option letter vs the `reference` letter) or "code"
            (final Python block run on `tests` in the sandbox; `reference` unused).
        reference: see `GradeRequest`.
        response: the model's text; only the part after the thinking is read.
        tests: code only: `[{"input": str, "output": str}, ...]` or `CodeTest`s.
        fn_name: code only: function/`Solution` method for functional tests.
        n_options: choice only: number of options.
        config: grader settings.

    Returns:
        A `Grade(correct, status, detail)`.

    Raises:
        ValueError: malformed arguments (messages name the argument).
        RuntimeError: a math task graded outside the main thread; use
            `Grader` / `grade_many`, which grade in worker processes.

    >>> grade("choice", "B", "<think>A?</think>Answer: B").status.value
    'ok'
    """
    req = make_request(task, reference, response, tests=tests, fn_name=fn_name, n_options=n_options)
    return grade_request(req, config)
