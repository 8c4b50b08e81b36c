"""Math grading: the final balanced \\boxed{...} checked against the reference by math-verify (docs/rules.md)."""

import re
import threading

from ._types import Grade, Status

# `\boxed` / `\fbox` not followed by a letter (so `\boxedx` is another macro).
_BOX = re.compile(r"\\(?:boxed|fbox)(?![A-Za-z])")
MAX_BOXED_CHARS = 1000
"""Longest boxed answer handed to math-verify (MATH-500's longest reference is far shorter)."""


def brace_matches(text: str) -> dict[int, int]:
    """Index of each `{` that has a matching `}` -> index just past that `}` (one pass, a stack).

    `\\{` and `\\}` are literal braces in LaTeX, not grouping, so escapes are
    skipped. Linear in `len(text)`: every box's extent comes from this one
    table, so `\\boxed{` repeated n times costs O(n), not O(n^2) rescans.
    """
    ends: dict[int, int] = {}
    stack: list[int] = []
    i, n = 0, len(text)
    while i < n:
        # jump to the next character that matters (C speed, no per-char Python loop)
        m = _SPECIAL.search(text, i)
        if m is None:
            break
        i = m.start()
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == "{":
            stack.append(i)
        elif stack:
            ends[stack.pop()] = i + 1
        i += 1
    return ends


_SPECIAL = re.compile(r"[\\{}]")
_WORD = re.compile(r"[^\s$]+")


def boxed_spans(text: str) -> list[tuple[int, int, int]]:
    """(content start, content end, close end) of every well-formed box in `text`, in order.

    The one scanner of the boxed rule (`boxed_candidates` takes the contents,
    the field signals' answer span the positions): `\\boxed{...}` takes the
    balanced brace group (nested braces allowed; the close end is after its
    closing brace); `\\boxed x` (no brace) takes the next run of non-space
    characters up to a `$`, without trailing `.`, `,` or `;` (the close end is
    the content end). An unclosed `\\boxed{` (a truncated answer) is not a
    box. Linear time (see `brace_matches`).
    """
    out = []
    ends = None
    for m in _BOX.finditer(text):
        i = m.end()
        while i < len(text) and text[i] in " \t":
            i += 1
        if i < len(text) and text[i] == "{":
            if ends is None:
                ends = brace_matches(text)
            end = ends.get(i, -1)
            if end >= 0:
                out.append((i + 1, end - 1, end))
        elif m.end() < i:  # `\\boxed x` needs the space
            word = _WORD.match(text, i)
            if word:
                content = word.group(0).rstrip(".,;")
                if content:
                    out.append((i, i + len(content), i + len(content)))
    return out


def boxed_candidates(text: str) -> list[str]:
    """Contents of every well-formed `\\boxed`/`\\fbox` in `text`, in order of their start (`boxed_spans`)."""
    return [text[s:e] for s, e, _ in boxed_spans(text)]


def last_boxed(text: str) -> str | None:
    """The final well-formed boxed answer in `text` (see `boxed_candidates`), or None.

    >>> last_boxed(r"so \\boxed{\\frac{1}{2}} or \\boxed{\\{1, 2\\}}")
    '\\\\{1, 2\\\\}'
    """
    found = boxed_candidates(text)
    return found[-1] if found else None


def _require_main_thread() -> None:
    # math-verify enforces its timeouts with SIGALRM, which Python delivers only
    # to the main thread; a grader in a thread would run without any timeout.
    if threading.current_thread() is not threading.main_thread():
        raise RuntimeError("math grading must run in the main thread of its process "
                           "(math-verify's timeouts use SIGALRM); use Grader / grade_many, "
                           "which grade in worker processes.")


def _parse(latex: str, timeout_s: int):
    """math-verify parse of one boxed expression: (parsed list, timed_out)."""
    from math_verify import parse
    from math_verify.errors import TimeoutException

    try:
        return parse(latex, parsing_timeout=timeout_s, raise_on_error=True), False
    except TimeoutException:
        return [], True
    except Exception:
        return [], False


def grade_math(answer: str, reference: str, *, timeout_s: int = 5) -> Grade:
    """Grade the answer part of a math response against a LaTeX reference.

    Args:
        answer: the text after the thinking (see `answer_part`).
        reference: the reference answer, bare LaTeX (`\\frac{14}{3}`, `204`)
            or already boxed.
        timeout_s: math-verify timeout for each parse and each comparison (s).

    Returns:
        `ok` when math-verify finds the last boxed answer equivalent to the
        reference; else `no_answer` (no boxed answer), `parse_error` (boxed but
        unparsable), `timeout`, `wrong_answer`, or `reference_error`.
    """
    _require_main_thread()
    from math_verify import verify
    from math_verify.errors import TimeoutException

    content = last_boxed(answer)
    if content is None:
        return Grade.wrong(Status.NO_ANSWER, "no \\boxed{} answer after the thinking")
    if len(content) > MAX_BOXED_CHARS:
        # No benchmark answer is this long; math-verify's work grows with the
        # input, so a flood is refused before it reaches the verifier.
        return Grade.wrong(Status.PARSE_ERROR, f"boxed answer longer than {MAX_BOXED_CHARS} characters")
    ref = reference if _BOX.search(reference) else "\\boxed{" + reference + "}"
    gold, gold_timeout = _parse(ref, timeout_s)
    if not gold:
        return Grade.wrong(Status.TIMEOUT if gold_timeout else Status.REFERENCE_ERROR,
                           f"math-verify could not parse the reference {reference!r}")
    pred, pred_timeout = _parse("\\boxed{" + content + "}", timeout_s)
    if not pred:
        if pred_timeout:
            return Grade.wrong(Status.TIMEOUT, "parsing the answer timed out")
        return Grade.wrong(Status.PARSE_ERROR, f"could not parse the boxed answer {content[:80]!r}")
    timed_out = False
    for g in gold:
        for p in pred:
            try:
                if verify(g, p, timeout_seconds=timeout_s, raise_on_error=True):
                    return Grade.ok()
            except TimeoutException:
                timed_out = True
            except Exception:
                # A comparison math-verify cannot make is not a verified match.
                continue
    if timed_out:
        return Grade.wrong(Status.TIMEOUT, "comparison with the reference timed out")
    return Grade.wrong(Status.WRONG_ANSWER, f"boxed answer {content[:80]!r} differs from the reference")
