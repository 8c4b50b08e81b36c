"""The grading seam of the probe loop: one batch call, `(correct, status)` per response (SPEC §3.4).

A grader is any callable ``grade_batch(items) -> [(correct, status), ...]``
over `GradeItem(task, reference, response, question)`; the probe never looks
inside. Two are provided:

* ``"otbench"``: the full grader (`otbench.probe.grading._pool.grade_many`:
  math-verify for math, letters for choice, the sandbox for code), in
  worker processes;
* ``"minimal"``: a small built-in grader for math questions with integer
  answers (the embedded demo's arithmetic), used when math-verify is not
  installed: the final balanced ``\\boxed{...}`` must hold exactly the
  reference integer.

``"auto"`` picks ``"otbench"`` when `math_verify` is importable, else
``"minimal"``; the run records which one graded it. Statuses use the full
grader's vocabulary (`ok`, `wrong_answer`, `no_answer`, `parse_error`, ...);
anything but `ok` counts as wrong and the denominator never shrinks.
"""

import atexit
import importlib.util
import re
import threading
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from ._math import last_boxed as _math_last_boxed

GRADERS = ("auto", "otbench", "minimal")


class GradeItem(NamedTuple):
    """One response to grade; `question` (a `_datasets.Question`) carries code tests / options."""

    task: str
    reference: str
    response: str
    question: Any = None


GradeBatch = Callable[[Sequence[GradeItem]], list[tuple[bool, str]]]


def last_boxed(text: str) -> str | None:
    """Content of the last `\\boxed{...}` with balanced braces, or None (the math grader's rule, linear time).

    >>> last_boxed("so \\\\boxed{1} then \\\\boxed{{2}}")
    '{2}'
    >>> last_boxed("\\\\boxed{12") is None
    True
    """
    return _math_last_boxed(text)


# Applied with fullmatch to the box's content stripped of spaces and one `$`
# each side; no two adjacent unbounded runs, so matching is linear.
_INT = re.compile(r"([+-]?\d[\d,]*)(?:\.0*)?")


def _strip_dollars(box: str) -> str:
    return box.strip().removeprefix("$").removesuffix("$").strip()


def grade_minimal(task: str, reference: str, response: str) -> tuple[bool, str]:
    """Grade a math response against an integer reference (see module docstring)."""
    if task != "math":
        raise ValueError(f"the minimal grader handles task 'math' only, got {task!r}; "
                         "install the probe extra (math-verify) for the full grader.")
    try:
        ref = int(reference.strip())
    except ValueError:
        raise ValueError(f"the minimal grader needs an integer reference, got {reference!r}; "
                         "install the probe extra (math-verify) for the full grader.") from None
    for marker in ("</think>", "<|channel|>final<|message|>"):
        i = response.rfind(marker)
        if i >= 0:
            response = response[i + len(marker):]
    box = last_boxed(response)
    if box is None:
        return False, "no_answer"
    m = _INT.fullmatch(_strip_dollars(box))
    if not m:
        return False, "parse_error"
    ok = int(m.group(1).replace(",", "")) == ref
    return ok, ("ok" if ok else "wrong_answer")


def _minimal_batch(items: Sequence[GradeItem]) -> list[tuple[bool, str]]:
    return [grade_minimal(it.task, it.reference, it.response) for it in items]


_POOL: dict[str, Any] = {}
_POOL_LOCK = threading.Lock()


def _shared_grader():
    """This process's grading pool, started on first use and kept for the run.

    The probe loop grades one unit at a time; a pool per call would spawn its
    worker processes (and run the sandbox self-test) once per unit. Results do
    not depend on the pool (`Grader.grade_many`), so sharing it changes no grade.
    """
    if "grader" not in _POOL:
        from ._pool import Grader

        _POOL["grader"] = Grader()
        atexit.register(_close_shared_grader)
    return _POOL["grader"]


def _close_shared_grader() -> None:
    g = _POOL.pop("grader", None)
    if g is not None:
        g.close()


def _otbench_batch(items: Sequence[GradeItem]) -> list[tuple[bool, str]]:
    from ._grade import GradeRequest

    reqs = []
    for it in items:
        q = it.question
        if q is not None and hasattr(q, "grade_request"):
            reqs.append(q.grade_request(it.response))
        else:
            reqs.append(GradeRequest(it.task, it.reference, it.response))
    with _POOL_LOCK:        # one batch at a time through the shared pool
        grades = _shared_grader().grade_many(reqs)
    return [(bool(g.correct), g.status.value) for g in grades]


def resolve_grader(name: str = "auto") -> tuple[str, GradeBatch]:
    """(resolved name, batch grader) for `name` in `GRADERS`."""
    if name not in GRADERS:
        raise ValueError(f"`grader` must be one of {', '.join(GRADERS)}, got {name!r}.")
    if name == "auto":
        name = "otbench" if importlib.util.find_spec("math_verify") is not None else "minimal"
    return name, (_otbench_batch if name == "otbench" else _minimal_batch)
