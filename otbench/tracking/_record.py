"""What a command logs: its config, provenance, headline scalars, tables and figures.

Built from the result documents the command wrote (`otbench.metrics/1`,
`otbench.frontier/1`, `otbench.bootstrap/1`, the leaderboard, the report's
tables), so what the tracker shows is what the results files say. Plain
Python: no otbench.analysis, no tracker library.
"""

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# W&B, Trackio and MLflow all accept these characters in a key (MLflow is the strictest).
_KEY = re.compile(r"[^A-Za-z0-9_\-./ ]")


def key(*parts: object) -> str:
    """One tracker key from its parts, joined with `/` (characters a tracker refuses -> `_`)."""
    return "/".join(_KEY.sub("_", str(p)) for p in parts)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


@dataclass
class Record:
    """One tracker run: `tables` are name -> (columns, rows); `figures` name -> image file."""

    command: str
    config: dict[str, Any]
    provenance: dict[str, Any]
    scalars: dict[str, float] = field(default_factory=dict)
    tables: dict[str, tuple[list[str], list[list[Any]]]] = field(default_factory=dict)
    figures: dict[str, Path] = field(default_factory=dict)

    def add_scalars(self, values: Mapping[str, Any]) -> None:
        """Add the finite numbers of `values` (None, NaN and non-numbers are left out)."""
        for k, v in values.items():
            x = _number(v)
            if x is not None:
                self.scalars[k] = x

    def add_rows(self, name: str, rows: Iterable[Mapping[str, Any]]) -> None:
        """A table from rows of dicts; its columns are the rows' keys in first-seen order."""
        rows = list(rows)
        columns: list[str] = []
        for r in rows:
            columns += [c for c in r if c not in columns]
        self.tables[name] = (columns, [[_cell(r.get(c)) for c in columns] for r in rows])


def _cell(value: Any) -> Any:
    """A table cell every tracker stores: numbers, text, None; lists and dicts as text."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    return str(value)


def add_metrics(rec: Record, doc: Mapping[str, Any]) -> None:
    """OR / AD: the macro averages as scalars, the per-cell values as the `or_ad` table."""
    rec.add_scalars({key("metrics", "macro", k): v for k, v in doc.get("macro", {}).items()})
    rec.add_rows("or_ad", ({k: c.get(k) for k in ("model", "group", "or", "ad", "full_acc",
                                                   "n_questions", "n_trajectories")}
                           for c in doc.get("cells", [])))


def add_frontier(rec: Record, doc: Mapping[str, Any]) -> None:
    """β_match, β_sat and the ceiling of each strategy's pooled frontier (`beta_match` table)."""
    rows = []
    for name, s in sorted(doc.get("strategies", {}).items()):
        row = {"strategy": name, **{k: s.get(k) for k in ("beta_match", "beta_sat", "ceiling")}}
        rows.append(row)
        rec.add_scalars({key("frontier", name, k): row[k] for k in ("beta_match", "beta_sat",
                                                                    "ceiling")})
    rec.add_rows("beta_match", rows)


def add_bootstrap(rec: Record, doc: Mapping[str, Any]) -> None:
    """The paired bootstrap intervals: macro OR / AD (and β_match with --frontiers)."""
    est = doc.get("estimate", {}).get("macro", {})
    rows = []
    for stat, (lo, hi) in sorted(doc.get("macro", {}).items()):
        rows.append({"scope": "macro", "statistic": stat, "estimate": est.get(stat),
                     "lo": lo, "hi": hi})
    for name, s in sorted((doc.get("frontiers") or {}).items()):
        if isinstance(s, dict) and "beta_match" in s:
            lo, hi = s["beta_match"]
            rows.append({"scope": "frontier", "statistic": f"{name}/beta_match",
                         "estimate": None, "lo": lo, "hi": hi})
    for r in rows:
        rec.add_scalars({key("bootstrap", r["scope"], r["statistic"], "lo"): r["lo"],
                         key("bootstrap", r["scope"], r["statistic"], "hi"): r["hi"]})
    rec.add_rows("intervals", rows)


def add_leaderboard(rec: Record, doc: Mapping[str, Any]) -> None:
    """The leaderboard's rows as a table and each row's numbers (ranks, gap areas, shares and
    their intervals where the board has them) as scalars `leaderboard/<strategy>/<method>/..`."""
    rows = doc.get("rows", [])
    rec.add_rows("leaderboard", rows)
    for r in rows:
        rec.add_scalars({key("leaderboard", r.get("strategy"), r.get("method"), k): v
                         for k, v in r.items() if k not in ("strategy", "method")})
