"""Math grading: the final balanced \\boxed{...} checked against the reference by math-verify (SPEC §3.4)."""

import re
import threading

from ._types import Grade, Status

# `\boxed` / `\fbox` not followed by a letter (so `\boxedx` is another macro).
_BOX = re.compile(r"\\(?:boxed|fbox)(?![A-Za-z])")


def _braced(text: str, open_at: int) -> int:
    """Index just past the brace group opening at `text[open_at] == "{"`, or -1 if unbalanced.

    `\\{` and `\\}` are literal braces in LaTeX, not grouping, so escapes are skipped.
    """
    depth = 0
    i = open_at
    while i < len(text):
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return -1


def boxed_candidates(text: str) -> list[str]:
    """Contents of every well-formed `\\boxed`/`\\fbox` in `text`, in order of their start.

    `\\boxed{...}` takes the balanced brace group (nested braces allowed);
    `\\boxed x` (no brace) takes the next run of non-space characters up to a
    `$`, without trailing `.`, `,` or `;`. An unclosed `\\boxed{` (a
    truncated answer) is not a candidate.
    """
    out = []
    for m in _BOX.finditer(text):
        i = m.end()
        while i < len(text) and text[i] in " \t":
            i += 1
        if i < len(text) and text[i] == "{":
            end = _braced(text, i)
            if end >= 0:
                out.append(text[i + 1:end - 1])
        elif m.end() < i:  # `\boxed x` needs the space
            word = re.match(r"[^\s$]+", text[i:])
            if word:
                content = word.group(0).rstrip(".,;")
                if content:
                    out.append(content)
    return out


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
