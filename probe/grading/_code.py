"""Code grading (LiveCodeBench-style): the final fenced Python block run on tests in the sandbox (docs/rules.md)."""

import json
import re
from decimal import Decimal, InvalidOperation
from typing import Sequence

from ._sandbox import SandboxLimits, TestOutcome, run_tests
from ._types import CodeTest, Grade, Status

_FENCE = re.compile(r"^[ \t]*```[ \t]*([A-Za-z0-9_+#.-]*)[^\n]*$")
PYTHON_TAGS = ("", "python", "py", "python3")
# Exit codes set by the in-sandbox harness (probe/_sandbox_harness.py).
_EXIT_EXCEPTION, _EXIT_MEMORY, _EXIT_NO_FUNCTION = 101, 102, 103


def fenced_blocks(text: str) -> list[tuple[str, str]]:
    """Every closed fenced block in `text` as (language tag lowercased, code), in order.

    A fence is a line starting with three backticks (optionally indented);
    an unclosed last block (a truncated answer) is not a block.
    """
    blocks = []
    lang = None
    body: list[str] = []
    for line in text.split("\n"):
        m = _FENCE.match(line)
        if lang is None:
            if m:
                lang, body = m.group(1).lower(), []
        elif m and not m.group(1) and line.strip() == "```":
            blocks.append((lang, "\n".join(body) + "\n"))
            lang = None
        else:
            body.append(line)
    return blocks


def extract_code(answer: str) -> str | None:
    """The final fenced block tagged Python (or untagged) in the answer part, or None.

    Blocks tagged with another language (a shown `text` output, a `bash`
    command) are skipped, so the last *Python* block is the solution.
    """
    py = [code for lang, code in fenced_blocks(answer) if lang in PYTHON_TAGS]
    return py[-1] if py else None


def normalize_output(text: str) -> list[str]:
    """The lines LiveCodeBench compares: the whole text stripped, split at line feeds, each line stripped.

    Blank lines at either end vanish; blank lines inside are kept (they count).

    >>> normalize_output("\\n 3 \\r\\n\\n4\\n\\n")
    ['3', '', '4']
    """
    return [line.strip() for line in text.strip().split("\n")]


def _decimals(line: str) -> list[Decimal] | None:
    try:
        return [Decimal(tok) for tok in line.split()]
    except (InvalidOperation, ValueError):
        return None


def lines_match(got: str, expected: str) -> bool:
    """LiveCodeBench's stdout rule: same number of `normalize_output` lines, and each pair
    either equal as text or, split at whitespace, equal element by element as decimal numbers.

    Decimal equality is exact (no tolerance): "1.0 2" equals "1 2" and "1e3"
    equals "1000", but "0.3333" does not equal "0.33333".
    """
    a, b = normalize_output(got), normalize_output(expected)
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if x == y:
            continue
        dx, dy = _decimals(x), _decimals(y)
        if dx is None or dy is None:
            return False
        try:
            if dx != dy:
                return False
        except InvalidOperation:  # a signalling NaN refuses comparison: not equal
            return False
    return True


def _matches(outcome: TestOutcome, expected: str, functional: bool) -> bool:
    got = outcome.output.decode("utf-8", "replace")
    if functional:
        # The harness wrote the return value as JSON; LiveCodeBench compares
        # the value (a top-level tuple taken as a list) with the decoded
        # expected JSON by Python equality.
        try:
            return json.loads(got) == json.loads(expected)
        except ValueError:
            return False
    return lines_match(got, expected)


def _failure(i: int, n: int, o: TestOutcome) -> Grade:
    where = f"test {i + 1} of {n}"
    if o.kind == "timeout":
        return Grade.wrong(Status.TIMEOUT, f"{where}: time limit")
    if o.kind == "memory":
        return Grade.wrong(Status.MEMORY_ERROR, f"{where}: memory limit")
    if o.kind == "output_limit":
        return Grade.wrong(Status.OUTPUT_LIMIT, f"{where}: output limit")
    if o.kind == "signal":
        return Grade.wrong(Status.RUNTIME_ERROR, f"{where}: killed by signal {-o.code}")
    if o.code == _EXIT_NO_FUNCTION:
        return Grade.wrong(Status.RUNTIME_ERROR, f"{where}: the function to call is not defined")
    if o.code != 0:
        return Grade.wrong(Status.RUNTIME_ERROR, f"{where}: the program raised or exited non-zero")
    return Grade.wrong(Status.WRONG_ANSWER, f"{where}: wrong output")


def grade_code(answer: str, tests: Sequence[CodeTest], *, fn_name: str | None = None,
               limits: SandboxLimits = SandboxLimits(), bwrap: str | None = None,
               python: str | None = None) -> Grade:
    """Grade the answer part of a code response by running its final Python block on `tests`.

    Args:
        answer: the text after the thinking.
        tests: stdin/stdout pairs, or (with `fn_name`) functional tests whose
            input holds one JSON value per line per argument and whose output
            is the JSON of the expected return value.
        fn_name: the function, or method of a `Solution` class, to call for
            functional tests; None for stdin/stdout tests.
        limits, bwrap, python: sandbox settings (see `run_tests`).

    Returns:
        `ok` only if every test passes. Tests run in order and grading stops at
        the first failure, whose kind sets the status.
    """
    if not tests:
        return Grade.wrong(Status.REFERENCE_ERROR, "no tests to run")
    functional = fn_name is not None
    if functional:
        for i, t in enumerate(tests):
            try:
                json.loads(t.output)
                [json.loads(line) for line in t.input.split("\n") if line.strip()]
            except ValueError:
                return Grade.wrong(Status.REFERENCE_ERROR,
                                   f"test {i + 1}: functional input lines and output must be JSON")
    code = extract_code(answer)
    if code is None:
        return Grade.wrong(Status.NO_ANSWER, "no Python code block after the thinking")
    try:
        # Compiling runs none of the program; a syntax error needs no sandbox.
        compile(code, "solution.py", "exec")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as e:
        return Grade.wrong(Status.PARSE_ERROR, f"the code does not compile: {type(e).__name__}")
    n = len(tests)
    verdicts: list[bool] = []

    def accept(i: int, o: TestOutcome) -> bool:
        verdicts.append(_matches(o, tests[i].output, functional))
        return verdicts[-1]

    run = run_tests(code, [t.input for t in tests], mode="functional" if functional else "stdin",
                    fn_name=fn_name, limits=limits, bwrap=bwrap, python=python, accept=accept)
    if run.error:
        return Grade.wrong(Status.SANDBOX_ERROR, run.error)
    for i, o in enumerate(run.outcomes):
        if o.kind != "exit" or o.code != 0:
            return _failure(i, n, o)
        if not verdicts[i]:
            return _failure(i, n, o)
    if run.timed_out:
        return Grade.wrong(Status.TIMEOUT, f"run time limit after {len(run.outcomes)} of {n} tests")
    if run.output_limit:
        return Grade.wrong(Status.OUTPUT_LIMIT, "output limit")
    if len(run.outcomes) < n:
        return Grade.wrong(Status.RUNTIME_ERROR,
                           f"the program stopped the test harness after {len(run.outcomes)} of {n} tests")
    return Grade.ok(f"{n} test{'' if n == 1 else 's'} passed")
