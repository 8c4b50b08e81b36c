"""What a report table marks beside a number, and why (docs/rules.md, docs/guides/reports.md).

* `zero_or_places`: the OR entries at 0 % accuracy (`‡`), whose 100 % says
  nothing about overthinking (`otbench.analysis.overthinking._edge`);
* `outside_reasons`: the reasons the bootstrap measured for estimates outside
  their own interval (`†`), so a caption gives them rather than a general note.
"""

from collections.abc import Mapping
from typing import Any

from otbench.analysis.overthinking import zero_accuracy_places


def outside_reasons(boot: Mapping[str, Any] | None, key: str) -> str:
    """The bootstrap's measured reasons for `key`'s estimates outside their intervals
    (``outside_intervals`` of ``otbench.bootstrap/1``), as caption text; empty without any."""
    found = [f for f in (boot or {}).get("outside_intervals") or []
             if isinstance(f, Mapping) and f.get("metric") == key]
    if not found:
        return ""
    # Named as the tables name them: a cell by model / group, an average by its Avg. row or column.
    where = [" / ".join(x or "Avg." for x in (f.get("model"), f.get("group"))) for f in found]
    return " (measured: " + "; ".join(f"{w}: {f.get('reason')}" for w, f in zip(where, found)) + ")"


def zero_or_places(metrics_doc: Mapping[str, Any], key: str) -> set:
    """(scope, model, group) of the OR entries at 0 % accuracy (none for other metrics)."""
    return zero_accuracy_places(metrics_doc["cells"]) if key == "or" else set()
