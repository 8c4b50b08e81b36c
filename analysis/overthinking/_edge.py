"""Edge cases that a printed summary must name where it is printed (docs/rules.md).

* OR at 0 % accuracy. When no probe of a cell is ever correct, every curve
  is flat at 0, the earliest maximizer is step 0 and OR is 100 % (all
  thinking "after the best step"), which says nothing about overthinking.
  The cell's own printed numbers show it exactly: AD = P(k*) - P(n) and
  P(n) are means of non-negative per-trajectory values, so both are 0 only
  when every trajectory has P(k*) = P(n) = 0, i.e. its best step is correct
  on no probe. An average over such a cell carries the flag too.
* Spearman's correlation over fewer than `MIN_SPEARMAN_CELLS` cells: with
  2 cells it is +-1 whatever the data, and with 3 or 4 it takes a handful of
  values; it is printed with its cell count and the warning.
"""

from collections.abc import Iterable, Mapping
from typing import Any

MIN_SPEARMAN_CELLS = 5
"""Fewest cells over which a printed Spearman correlation goes unflagged."""

ZERO_ACCURACY_MARK = "\u2021"
"""The mark of an OR entry whose cell (or a cell of its average) is at 0 % accuracy."""

ZERO_ACCURACY_NOTE = (f"{ZERO_ACCURACY_MARK} OR at 0 % accuracy: no probe of the cell was ever "
                      "correct (P(n) and AD both 0), so its earliest best step is step 0 and OR "
                      "counts all thinking; not a sign of overthinking (an average marked so "
                      "includes such a cell; docs/rules.md)")


def spearman_note(cells: int) -> str:
    """`" (N cells)"`, with the warning when `cells < MIN_SPEARMAN_CELLS`."""
    if cells >= MIN_SPEARMAN_CELLS:
        return f" ({cells} cells)"
    return (f" ({cells} cells: fewer than {MIN_SPEARMAN_CELLS}, a rank correlation over so few "
            f"cells is not informative; docs/rules.md)")


def zero_accuracy(endpoint_acc: float | None, ad: float | None) -> bool:
    """Whether a cell's OR is the 0 %-accuracy 100 % (module docstring)."""
    return endpoint_acc is not None and ad is not None and endpoint_acc == 0 and ad == 0


def zero_accuracy_places(cells: Iterable[Mapping[str, Any]]) -> set[tuple[str, str | None, str | None]]:
    """(scope, model, group) of every OR to flag, from cells with `model`, `group`,
    `endpoint_acc`, `ad`: the cells at 0 % accuracy and every average over one."""
    out: set[tuple[str, str | None, str | None]] = set()
    for c in cells:
        if zero_accuracy(c.get("endpoint_acc"), c.get("ad")):
            out |= {("cell", c["model"], c["group"]), ("model", c["model"], None),
                    ("group", None, c["group"]), ("macro", None, None)}
    return out
