"""Why a set's own full-thinking accuracy is what it is: one line from its graded original answers.

The original answers' grades (`y`, `y_status` of the tokens table, `docs/rules.md`:
`y` is whether the trajectory's own final answer was correct) say why the
accuracy is low when it is: a model whose answers hold no answer the grader
reads (`no_answer`: no final `\\boxed{}`; `parse_error`: a box that does not
parse) scores 0 whatever it knows, which is a statement about its answer
format, not about its reasoning. Verdicts kept from an imported source
(`y_status` starting with `source`) are counted as the source's.
"""

from collections import Counter
from collections.abc import Sequence
from pathlib import Path

UNREADABLE = ("no_answer", "parse_error")
"""Grader statuses of an answer the grader could not read (`otbench.probe.grading`)."""


def accuracy_reason(y: Sequence[int], status: Sequence[str]) -> str:
    """The line: the accuracy of the original answers and why (the share the grader could not read)."""
    n = len(y)
    if n == 0:
        return "Original full-thinking accuracy: no trajectories"
    right = int(sum(int(v) for v in y))
    acc = f"Original full-thinking accuracy {100 * right / n:.2f} % ({right} of {n} own answers correct)"
    source = sum(str(s).startswith("source") for s in status)
    if source:
        return f"{acc}: {source} of the {n} verdicts are the imported source's own (docs/guides/import-traces.md)"
    counts = Counter(str(s) for s in status)
    unread = sum(counts[s] for s in UNREADABLE)
    if unread == 0:
        return f"{acc}: every answer was read by the grader; the wrong ones are wrong answers"
    parts = ", ".join(f"{counts[s]} {s}" for s in UNREADABLE if counts[s])
    why = (f"{acc}: {unread} of the {n} answers hold no answer the grader reads ({parts}: "
           "no final \\boxed{} or one that does not parse)")
    if unread == n - right and right == 0:
        why += ", so the model's own answers are not parseable and the accuracy says nothing of its reasoning"
    return why + " (docs/rules.md)"


def set_accuracy_reason(set_dir: str | Path) -> str:
    """`accuracy_reason` of a measurement set's tokens table (`otbench probe run` writes it)."""
    from otbench.analysis.measurement import load_table

    t = load_table(Path(set_dir), "tokens").select(["y", "y_status"]).to_pydict()
    return accuracy_reason(t["y"], t["y_status"])
