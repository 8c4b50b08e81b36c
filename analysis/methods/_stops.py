"""Imported stop positions: another tool's stops on the same trajectories, scored like a method.

A CSV file with a header and one row per trajectory:
``question,trajectory,stop_token`` plus optional ``model`` and ``group``
columns (needed only when the set has several models / a question id
occurs in several groups). ``stop_token`` is the number of thinking tokens
the tool retained (a non-negative integer). A stop maps to the latest step
boundary at or before it -- the largest position `k` with `L(k) <=
stop_token` -- so the scored cost never exceeds what the tool retained (a
stop past the end maps to the end). Every trajectory of the evaluated
split needs exactly one row; rows of other splits are allowed and unused.

The result is scored as a DEE method (a per-trajectory stop is a DEE
action) with one operating point; it declares no signal cost (the tool's
own is unknown; its net point equals its gross one and says so).
"""

from pathlib import Path
from typing import Any

import numpy as np
from otbench.analysis.measurement import SPLITS, MeasurementSet

from otbench.errors import MeasurementSetError

from ._cost import SignalCost

REQUIRED = ("question", "trajectory", "stop_token")
OPTIONAL = ("model", "group")


STOPS_LIMIT = 256 << 20
"""Bytes a stops file may hold (a paper-scale set's stops are a few MB)."""
MAX_DIGITS = 18
"""Digits of a count (every value below 10**18 fits the int64 arrays it lands in)."""


def _shown(text: str, width: int = 40) -> str:
    return repr(text) if len(text) <= width else f"{text[:width]!r}... ({len(text)} characters)"


def _int(text: str, where: str, col: str) -> int:
    t = text.strip()
    # ASCII digits only (`str.isdigit` accepts "²", which int() refuses), and few enough for int64
    if not (t.isascii() and t.isdigit()) or len(t) > MAX_DIGITS:
        raise MeasurementSetError(where, f"{col} must be a non-negative integer of at most {MAX_DIGITS} "
                                         f"digits, got {_shown(text)}")
    return int(t)


def read_stops(path: str | Path, ms: MeasurementSet, split: str = "test") -> "ImportedStops":
    """The stops of `path` as a DEE method over the `split` of `ms` (module docstring).

    Raises:
      MeasurementSetError: one line naming the file, row and rule.
    """
    path = Path(path)
    from otbench.files import csv_records, read_regular_text

    text = read_regular_text(path, STOPS_LIMIT, what="a stops file (one short row per trajectory)",
                             fail=lambda why: MeasurementSetError(str(path), why))
    records = csv_records(text, lambda line, why: MeasurementSetError(f"{path}, line {line}", why))
    header = next(records, None)
    if header is None:
        raise MeasurementSetError(str(path), "empty file; expected a header "
                                             "question,trajectory,stop_token")
    header = [h.strip() for h in header]
    missing = [c for c in REQUIRED if c not in header]
    unknown = [c for c in header if c not in REQUIRED + OPTIONAL]
    if missing or unknown or len(set(header)) != len(header):
        raise MeasurementSetError(f"{path}, row 1", f"header must name {', '.join(REQUIRED)} "
                                  f"(optional: {', '.join(OPTIONAL)}) once each, got {header}")
    col = {c: header.index(c) for c in header}
    # (model, group, question id, trajectory) -> row of the set
    model = [ms.models[ms.cell_model[c]] for c in ms.cell]
    group = [ms.groups[ms.question_group[q]] for q in ms.question]
    qid = [ms.question_id[q] for q in ms.question]
    keys: dict[tuple, list[int]] = {}
    for t in range(ms.num_trajectories):
        full = (model[t], group[t], qid[t], int(ms.trajectory[t]))
        for mask in range(4):   # every subset of (model, group) may be omitted
            k = (full[0] if mask & 1 else None, full[1] if mask & 2 else None, full[2], full[3])
            keys.setdefault(k, []).append(t)
    stop = np.full(ms.num_trajectories, -1, dtype=np.int64)
    for i, row in enumerate(records, start=2):
        where = f"{path}, row {i}"
        if not row or all(not c.strip() for c in row):
            continue
        if len(row) != len(header):
            raise MeasurementSetError(where, f"{len(row)} fields, the header has {len(header)}")
        k = (row[col["model"]].strip() if "model" in col else None,
             row[col["group"]].strip() if "group" in col else None,
             row[col["question"]].strip(), _int(row[col["trajectory"]], where, "trajectory"))
        rows = keys.get(k)
        if not rows:
            raise MeasurementSetError(where, f"no trajectory {k[3]} of question {k[2]!r} in the set")
        if len(rows) > 1:
            raise MeasurementSetError(where, f"question {k[2]!r}, trajectory {k[3]} matches "
                                             f"{len(rows)} trajectories; add the model / group column")
        t = rows[0]
        if stop[t] >= 0:
            raise MeasurementSetError(where, f"a second stop for question {k[2]!r}, trajectory {k[3]}")
        stop[t] = _int(row[col["stop_token"]], where, "stop_token")
    s = SPLITS.index(split)
    test = np.flatnonzero(ms.split == s)
    absent = test[stop[test] < 0]
    if absent.size:
        t = int(absent[0])
        raise MeasurementSetError(str(path), f"no stop for {absent.size} trajectories of the {split} "
                                             f"split (first: question {qid[t]!r}, trajectory "
                                             f"{int(ms.trajectory[t])})")
    # The latest boundary with L(k) <= stop (L is non-decreasing; padding repeats L(n)).
    pos = (ms.L[test] <= stop[test][:, None]).sum(axis=1) - 1
    pos = np.minimum(pos, ms.n[test].astype(np.int64))
    return ImportedStops(pos.astype(np.int64), path.name)


class ImportedStops:
    """A DEE "method" that stops each trajectory of the evaluated split at its imported position."""

    strategy = "dee"
    thetas = (0.0,)
    signal_cost = SignalCost(note="imported stops: the tool's signal cost is unknown (not counted)")

    def __init__(self, positions: np.ndarray, source: str):
        self._pos = np.asarray(positions, dtype=np.int64)
        self.name = f"stops:{source}"

    def stop(self, view, theta: float) -> Any:
        return self._pos[view.rows] <= view.k

    def config(self) -> dict[str, Any]:
        return {"source": self.name, "rule": "latest boundary with L(k) <= stop_token"}
