"""The grading seam of the probe loop: one batch call, `(correct, status)` per response (docs/rules.md).

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

import importlib.util
import re
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from otbench.errors import OtbenchError
from otbench.registry import Registry, RegistryError

from ._math import last_boxed as _math_last_boxed
from ._sandbox import sandbox_status
from ._types import TASKS
from otbench.errors import ArgumentError

GRADERS = Registry("grader", {
    "auto": "otbench.probe.grading._batch:_auto_batch",
    "otbench": "otbench.probe.grading._batch:_otbench_batch",
    "minimal": "otbench.probe.grading._batch:_minimal_batch",
}, plugins=False, unknown=lambda reg, name: f"`grader` must be one of {', '.join(reg)}, got {name!r}.",
   group="otbench.graders")
"""The grader registry (`otbench.registry.Registry`): name -> its batch grader
``(items) -> [(correct, status)]``; an installed distribution adds one by an entry point in the
group ``otbench.graders``. ``auto`` is the full grader when Math-Verify is installed,
else the minimal one (`resolve_grader` says which ran)."""


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
        raise ArgumentError(f"the minimal grader handles task 'math' only, got {task!r}; "
                            "install the probe extra (math-verify) for the full grader.")
    try:
        ref = int(reference.strip())
    except ValueError:
        raise ArgumentError(f"the minimal grader needs an integer reference, got {reference!r}; "
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


def _requests(items: Sequence[GradeItem]) -> list:
    """Grade requests of the probe loop's items (a question object may build its own)."""
    from ._grade import GradeRequest

    return [it.question.grade_request(it.response)
            if it.question is not None and hasattr(it.question, "grade_request")
            else GradeRequest(it.task, it.reference, it.response) for it in items]


def _otbench_batch(items: Sequence[GradeItem]) -> list[tuple[bool, str]]:
    from ._pool import grade_many

    return [(bool(g.correct), g.status.value) for g in grade_many(_requests(items))]


def open_grader(name: str = "auto") -> tuple[str, GradeBatch, Callable[[], None]]:
    """(resolved name, batch grader, close): like `resolve_grader`, the full grader's pool kept open.

    The probe loop grades one unit per call; `_otbench_batch` would start
    (and stop) a pool of worker processes each time. Here one `Grader` serves
    every call until `close()`. Same grades: only the pool's lifetime differs.
    """
    name, batch = resolve_grader(name)
    if name != "otbench":
        return name, batch, lambda: None
    from ._pool import Grader

    pool = Grader()

    def run(items: Sequence[GradeItem]) -> list[tuple[bool, str]]:
        return [(bool(g.correct), g.status.value) for g in pool.grade_many(_requests(items))]

    return name, run, pool.close


def _auto_name() -> str:
    return "otbench" if importlib.util.find_spec("math_verify") is not None else "minimal"


def _auto_batch(items: Sequence[GradeItem]) -> list[tuple[bool, str]]:
    return GRADERS.resolve(_auto_name())(items)


def resolve_grader(name: str = "auto") -> tuple[str, GradeBatch]:
    """(resolved name, batch grader) for `name` in `GRADERS`."""
    if not isinstance(name, str) or name not in GRADERS:
        raise RegistryError(f"`grader` must be one of {', '.join(GRADERS)}, got {name!r}.")
    if name == "auto":
        name = _auto_name()
    return name, GRADERS.resolve(name)


class GraderError(OtbenchError, ValueError):
    """The job's grader cannot grade one of its questions (refused before any engine starts)."""


def check_gradable(name: str, questions: Sequence) -> None:
    """Refuse, in one line naming the first question, a job whose grader `name` (resolved) cannot
    grade every question: the minimal grader takes math questions with integer references only;
    the full grader needs math-verify and a task it knows. Checked at job start, so a run never
    fails mid-way after GPU time is spent."""
    full = name == "otbench"
    if full and importlib.util.find_spec("math_verify") is None:
        raise GraderError("grader 'otbench' needs math-verify: install the probe extra "
                          "(pip install 'otbench[probe]')")
    sandbox_checked = False
    for q in questions:
        where = f"{getattr(q, 'dataset', '?')}/{getattr(q, 'id', '?')}"
        task = getattr(q, "task", None)
        if task not in TASKS:
            raise GraderError(f"question {where}: task {task!r} is not one of {', '.join(TASKS)}")
        if full and task == "code" and not sandbox_checked:
            # Code is graded only in the sandbox: prove it on one known program before any
            # engine starts, rather than grade every answer `sandbox_error` after the GPU time.
            sandbox_checked = True
            why = sandbox_status()
            if why:
                raise GraderError(f"question {where} is graded by running code in the sandbox, "
                                  f"which does not work here: {why}")
        if full:
            continue
        if task != "math":
            raise GraderError(f"question {where}: grader {name!r} grades math questions with integer answers "
                              f"only, not task {task!r}; install the probe extra (math-verify) for the full "
                              "grader, or set [grader] kind = \"otbench\"")
        try:
            int(str(q.reference).strip())
        except ValueError:
            raise GraderError(f"question {where}: grader {name!r} needs an integer reference, got "
                              f"{str(q.reference)[:40]!r}; install the probe extra (math-verify) for the "
                              "full grader") from None
