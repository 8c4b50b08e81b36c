"""The OTBench leaderboard: built-ins and plug-ins ranked together within each strategy.

Methods of different strategies act on different action spaces (docs/rules.md) and
are scored against different oracle frontiers, so they are ranked only
against methods of the same strategy. The order inside a strategy is defined
in exactly one place, `leaderboard_key`: by the evaluator's area summary
(docs/rules.md) -- the gap area between the oracle frontier and the
method's step curve over relative cost [0, 1] (lower first), then the
realized area share (higher first). Within one strategy every method faces
the same frontier, so the two orders agree cell by cell; the tie-break only
matters through the macro chain.

A ranking on a tiny evaluated split is noise: `small_split_warning` says so
when some cell of a result has fewer than `MIN_RANK_QUESTIONS` questions in
the evaluated split (the leaderboard carries the warning in every format).
Given the set, `leaderboard(results, ms)` adds bootstrap intervals
(`_intervals`): each method's 95 % rank interval within its strategy and its
gap area behind the strategy's best method with a paired interval, and its own
gap area over [0, 1] with an interval (the oracle frontier re-solved on every
replicate, `_frontier_areas`), gross and net, from the two-stage paired draw at
a recorded seed. A gap area outside its own interval is marked `MARK` and its
measured reason printed beside the table (docs/rules.md).
"""

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

from otbench.analysis.measurement import Tidy

from otbench.files import csv_text

from ._evaluate import BenchResult
from ._intervals import REPLICATES, SEED, intervals
from otbench.errors import ArgumentError

SCHEMA = "otbench.leaderboard/1"
MARK = "\u2020"
"""The mark of a gap-area interval that does not contain its own estimate (the report's mark too)."""
MIN_RANK_QUESTIONS = 10
RANKED_BY = ("gap area to the oracle frontier over relative cost [0, 1] (lower first), "
             "then realized area share over no thinking (higher first)")
NET_RANKED_BY = ("net rank: the same rule on the net points (thinking tokens plus the signal's "
                 "cost per decision, docs/rules.md); the oracle frontier is the same for both")

# (JSON key, CSV header with its unit, Markdown header)
COLUMNS = (
    ("strategy", "strategy", "strategy"),
    ("rank", "rank", "rank"),
    ("method", "method", "method"),
    ("gap_area_full", "gap_area_full (fraction)", "gap area [0,1] (pp)"),
    ("gap_area", "gap_area (fraction)", "gap area, own range (pp)"),
    ("realized_share", "realized_share (fraction)", "realized share"),
    ("net_rank", "net_rank (1 = best)", "net rank"),
    ("net_gap_area_full", "net_gap_area_full (fraction)", "net gap area [0,1] (pp)"),
    ("net_realized_share", "net_realized_share (fraction)", "net realized share"),
    ("curve_points", "curve_points (count)", "curve / points"),
    ("a_zero", "a_zero (fraction)", "no thinking"),
    ("a_full", "a_full (fraction)", "full thinking"),
    ("min_questions", "min_questions (count)", "min questions / cell"),
)
INTERVAL_COLUMNS = (
    ("rank_lo", "rank_lo (95%)", "rank 95%"),
    ("rank_hi", "rank_hi (95%)", None),
    ("gap_behind_best", "gap_behind_best (fraction)", "behind best (pp) [95%]"),
    ("gap_behind_best_lo", "gap_behind_best_lo (fraction)", None),
    ("gap_behind_best_hi", "gap_behind_best_hi (fraction)", None),
    ("net_rank_lo", "net_rank_lo (95%)", "net rank 95%"),
    ("net_rank_hi", "net_rank_hi (95%)", None),
    ("net_gap_behind_best", "net_gap_behind_best (fraction)", "net behind best (pp) [95%]"),
    ("net_gap_behind_best_lo", "net_gap_behind_best_lo (fraction)", None),
    ("net_gap_behind_best_hi", "net_gap_behind_best_hi (fraction)", None),
    ("gap_area_full_lo", "gap_area_full_lo (fraction)", "gap area [0,1] 95% (pp)"),
    ("gap_area_full_hi", "gap_area_full_hi (fraction)", None),
    ("gap_area_full_outside", "gap_area_full_outside (text)", None),
    ("net_gap_area_full_lo", "net_gap_area_full_lo (fraction)", "net gap area [0,1] 95% (pp)"),
    ("net_gap_area_full_hi", "net_gap_area_full_hi (fraction)", None),
    ("net_gap_area_full_outside", "net_gap_area_full_outside (text)", None),
)
"""Columns added when the leaderboard has bootstrap intervals (`Leaderboard.intervals`)."""


def leaderboard_key(result: BenchResult) -> tuple:
    """Sort key of a result within its strategy: a smaller key ranks higher.

    The one definition of the ranking (see the module docstring): the gap
    area over [0, 1] (lower first; a result without one last), then the
    realized area share (higher first), then the method name for a stable order.
    """
    s = result.summary
    gap = s.get("gap_area_full")
    share = s.get("realized_share")
    return (gap is None, math.inf if gap is None else gap, -(share or 0.0), result.method)


def net_leaderboard_key(result: BenchResult) -> tuple:
    """`leaderboard_key` on the net summary (a result without net points ranks on its gross one)."""
    s = (result.net or {}).get("summary") or result.summary
    gap = s.get("gap_area_full")
    share = s.get("realized_share")
    return (gap is None, math.inf if gap is None else gap, -(share or 0.0), result.method)


def _tied_ranks(results: Sequence[BenchResult], key) -> dict[int, int]:
    """`id(result)` -> 1 + the results strictly ahead by `key` without its name (1, 1, 3):
    methods tied on the ranking rule share a rank, as they share rank intervals (`_intervals`)."""
    keys = {id(r): key(r)[:-1] for r in results}
    return {i: 1 + sum(other < k for other in keys.values()) for i, k in keys.items()}


def small_split_warning(result: BenchResult, minimum: int = MIN_RANK_QUESTIONS) -> str | None:
    """A warning when some cell of `result` has fewer than `minimum` evaluated questions."""
    small = [c for c in result.cells if c.questions < minimum]
    if not small:
        return None
    worst = min(small, key=lambda c: c.questions)
    return (f"the {result.split} split is too small to rank methods: {len(small)} of "
            f"{len(result.cells)} cells have fewer than {minimum} questions (cell "
            f"{worst.model} / {worst.group}: {worst.questions}); differences between methods "
            f"are mostly noise (assign more questions with `otbench split --ratios`)")


@dataclasses.dataclass(frozen=True)
class Leaderboard(Tidy):
    """Ranked results, one row per method, grouped by strategy (DR, FB, DEE).

    Attributes:
      rows: dicts with the `COLUMNS` keys: `strategy`, `rank` (1 = best within
        the strategy; tied methods share the best rank of their tie), `method`, `gap_area_full`, `gap_area` and
        `realized_share` (fractions; the Markdown table shows gaps in pp), `curve_points` and `points`
        (non-dominated / all operating points), `a_zero`, `a_full` (macro
        accuracies with no thinking / full thinking, fractions),
        `min_questions` (the smallest question count of a cell in the split).
      split: the evaluated split.
      synthetic: True when any result came from a synthetic set.
      warnings: one line per reason to distrust the ranking.

    `to_arrow()` / `to_pandas()` give `rows` as a table; `to_json()`,
    `to_csv()`, `to_markdown()` the three written forms.
    """

    rows: tuple[dict[str, Any], ...]
    split: str
    synthetic: bool
    warnings: tuple[str, ...]
    intervals: dict[str, Any] | None = None     # {"replicates", "seed", "draw"} when computed

    @property
    def _columns(self) -> tuple:
        return COLUMNS + (INTERVAL_COLUMNS if self.intervals else ())

    def _tidy_columns(self) -> dict[str, Any]:
        keys = [k for k, _, _ in self._columns] + ["points"]
        return {k: [r[k] for r in self.rows] for k in keys}

    def to_json(self) -> dict[str, Any]:
        out = {"schema": SCHEMA, "split": self.split, "synthetic": self.synthetic,
               "ranked_by": RANKED_BY, "net_ranked_by": NET_RANKED_BY, "warnings": list(self.warnings),
               "rows": [dict(r) for r in self.rows]}
        if self.intervals:
            out["intervals"] = dict(self.intervals)
        return out

    def to_csv(self) -> str:
        cols = self._columns
        return csv_text([h for _, h, _ in cols] + ["points (count)"],
                        ([r[k] for k, _, _ in cols] + [r["points"]] for r in self.rows))

    def to_markdown(self) -> str:
        lines = ["# OTBench leaderboard", ""]
        if self.synthetic:
            lines += ["**SYNTHETIC DATA** (simulated, not model outputs)", ""]
        lines += [f"Evaluated on the {self.split} split; ranked within each strategy by "
                  f"{RANKED_BY}; {NET_RANKED_BY}. Gross columns count thinking tokens only (the "
                  f"papers' rule), net columns add the signal's cost. Accuracies in %, gaps in "
                  f"percentage points.", ""]
        if self.intervals:
            lines += [_interval_note(self.intervals), ""]
            notes = outside_notes(self.rows)
            lines += notes + ([""] if notes else [])
        lines += [f"> Warning: {w}" for w in self.warnings] + ([""] if self.warnings else [])
        cols = [c for c in self._columns if c[2] is not None]
        lines.append("| " + " | ".join(m for _, _, m in cols) + " |")
        lines.append("|" + "|".join("---" if k in ("strategy", "method") else "---:"
                                    for k, _, _ in cols) + "|")
        for r in self.rows:
            lines.append("| " + " | ".join(_md(k, r) for k, _, _ in cols) + " |")
        return "\n".join(lines) + "\n"

    def format(self) -> str:
        """The console table (percent and pp, like the other commands)."""
        lines = ["SYNTHETIC DATA (simulated, not model outputs)"] if self.synthetic else []
        iv = bool(self.intervals)
        lines.append(f"{'strategy':8s}  {'rank':>4s}  {'method':24s}  {'realized':>8s}  "
                     f"{'gap area':>9s}  {'net rank':>8s}  {'net real.':>9s}  {'net gap':>9s}  "
                     f"{'curve':>7s}" + (f"  {'rank 95%':>8s}  {'behind best pp [95%]':>24s}  "
                                         f"{'gap 95% (pp)':>16s}  {'net gap 95% (pp)':>16s}" if iv else ""))
        for r in self.rows:
            share = "n/a" if r["realized_share"] is None else f"{100 * r['realized_share']:.1f}%"
            gap = "n/a" if r["gap_area_full"] is None else f"{100 * r['gap_area_full']:.2f} pp"
            nshare = "n/a" if r["net_realized_share"] is None else \
                f"{100 * r['net_realized_share']:.1f}%"
            ngap = "n/a" if r["net_gap_area_full"] is None else \
                f"{100 * r['net_gap_area_full']:.2f} pp"
            extra = (f"  {_md('rank_lo', r):>8s}  {_md('gap_behind_best', r):>24s}  "
                     f"{_md('gap_area_full_lo', r):>16s}  {_md('net_gap_area_full_lo', r):>16s}") if iv else ""
            lines.append(f"{r['strategy']:8s}  {r['rank']:4d}  {r['method']:24s}  {share:>8s}  "
                         f"{gap:>9s}  {r['net_rank']:8d}  {nshare:>9s}  {ngap:>9s}  "
                         f"{r['curve_points']:>3d}/{r['points']:<3d}" + extra)
        lines.append(f"ranked within each strategy by {RANKED_BY}; {NET_RANKED_BY}")
        if iv:
            lines.append(_interval_note(self.intervals))
            lines += outside_notes(self.rows)
        lines += [f"warning: {w}" for w in self.warnings]
        return "\n".join(lines) + "\n"


def leaderboard_block(board: Leaderboard, method: str) -> dict[str, Any]:
    """What `method`'s own result carries of the leaderboard it was ranked on.

    `bench compare` writes it into each ``bench-<method>.json`` as
    ``leaderboard``, so that the report shows the rank, its interval, the
    paired gap behind the best and the small-split warning the terminal
    showed, from the same draws (a report cannot redraw them: the stops are
    not in the result). Keys: `rank`, `net_rank`, `methods` (ranked in the
    strategy), `warnings`, `intervals` (the draw, or None) and, with
    intervals, the `INTERVAL_COLUMNS` keys (fractions and ranks).
    """
    row = next(r for r in board.rows if r["method"] == method)
    out = {"rank": row["rank"], "net_rank": row["net_rank"],
           "methods": sum(1 for r in board.rows if r["strategy"] == row["strategy"]),
           "warnings": list(board.warnings),
           "intervals": dict(board.intervals) if board.intervals else None}
    out.update({k: row[k] for k, _, _ in INTERVAL_COLUMNS if k in row})
    return out


def _interval_note(iv: dict[str, Any]) -> str:
    return (f"95% intervals: two-stage paired bootstrap of the evaluated split ({iv['replicates']:,} "
            f"replicates, seed {iv['seed']}): rank within the strategy, the gap area over [0, 1] "
            f"behind the strategy's best method (0 inside: the data do not separate the two), and "
            f"the method's own gap area over [0, 1] against its strategy's oracle frontier re-solved "
            f"on each replicate, gross and net")


def outside_notes(rows: Sequence[dict[str, Any]]) -> list[str]:
    """One line per gap-area estimate outside its own interval (marked `MARK`), with the reason
    measured on the replicates (docs/rules.md: such an estimate is flagged where it is printed)."""
    return [f"{MARK} {r['method']} ({'net' if pre else 'gross'} gap area): {r[f'{pre}gap_area_full_outside']}"
            for r in rows for pre in ("", "net_") if r.get(f"{pre}gap_area_full_outside")]


def _md(key: str, r: dict[str, Any]) -> str:
    v = r[key]
    if key in ("rank_lo", "net_rank_lo"):
        pre = key[:-2]
        lo, hi = r[f"{pre}lo"], r[f"{pre}hi"]
        return "n/a" if lo is None else (f"{lo}" if lo == hi else f"{lo}–{hi}")
    if key in ("gap_area_full_lo", "net_gap_area_full_lo"):
        pre = key[:-len("gap_area_full_lo")]
        lo, hi = v, r[f"{pre}gap_area_full_hi"]
        if lo is None:
            return "n/a"
        return f"[{100 * lo:.2f}, {100 * hi:.2f}]" + (f" {MARK}" if r[f"{pre}gap_area_full_outside"] else "")
    if key in ("gap_behind_best", "net_gap_behind_best"):
        lo, hi = r[f"{key}_lo"], r[f"{key}_hi"]
        if v is None:
            return "n/a"
        if lo is None:
            return f"{100 * v:.2f}"
        return f"{100 * v:.2f} [{100 * lo:.2f}, {100 * hi:.2f}]"
    if v is None:
        return "n/a"
    if key in ("realized_share", "net_realized_share", "a_zero", "a_full"):
        return f"{100 * v:.1f}%"
    if key in ("gap_area", "gap_area_full", "net_gap_area_full"):
        return f"{100 * v:.2f}"
    if key == "curve_points":
        return f"{v}/{r['points']}"
    if key == "method":
        return str(v).replace("|", "\\|")
    return str(v)


def leaderboard(results: Sequence[BenchResult], ms: Any = None, *, replicates: int = REPLICATES,
                seed: int = SEED) -> Leaderboard:
    """Rank `results` (built-ins and plug-ins alike) within each strategy by `leaderboard_key`.

    With `ms`, the set the results were evaluated on, each row also gets bootstrap intervals
    (`_intervals.intervals`: `replicates` draws at `seed`; module docstring).
    """
    if not results:
        raise ArgumentError("a leaderboard needs at least one result")
    splits = sorted({r.split for r in results})
    if len(splits) > 1:
        raise ArgumentError(f"results come from different splits ({', '.join(splits)}); "
                            f"rank results of one split")
    iv = intervals(ms, results, replicates=replicates, seed=seed) if ms is not None else None
    rows, warnings = [], []
    for strategy in ("dr", "fb", "dee"):
        ranked = sorted((r for r in results if r.strategy == strategy), key=leaderboard_key)
        net_rank = _tied_ranks(ranked, net_leaderboard_key)
        gross_rank = _tied_ranks(ranked, leaderboard_key)
        for r in ranked:
            rank = gross_rank[id(r)]
            s = r.summary
            ns = (r.net or {}).get("summary") or s
            rows.append({
                "strategy": strategy.upper(), "rank": rank, "method": r.method,
                "gap_area_full": s.get("gap_area_full"),
                "gap_area": s.get("gap_area"),
                "realized_share": s.get("realized_share"),
                "net_rank": net_rank[id(r)],
                "net_gap_area_full": ns.get("gap_area_full"),
                "net_realized_share": ns.get("realized_share"),
                "curve_points": int(s["curve_points"]),
                "points": int(s["points"]),
                "a_zero": r.reference["a_zero"], "a_full": r.reference["a_full"],
                "min_questions": min((c.questions for c in r.cells), default=0),
            })
            if iv is not None:
                d = iv[r.method]
                for pre in ("", "net_"):
                    (lo, hi), (glo, ghi) = d[f"{pre}rank_interval"], d[f"{pre}gap_behind_best_interval"]
                    (alo, ahi) = d[f"{pre}gap_area_full_interval"]
                    rows[-1].update({f"{pre}rank_lo": lo, f"{pre}rank_hi": hi,
                                     f"{pre}gap_behind_best": d[f"{pre}gap_behind_best"],
                                     f"{pre}gap_behind_best_lo": glo, f"{pre}gap_behind_best_hi": ghi,
                                     f"{pre}gap_area_full_lo": alo, f"{pre}gap_area_full_hi": ahi,
                                     f"{pre}gap_area_full_outside": d[f"{pre}gap_area_full_outside"]})
    for r in results:
        w = small_split_warning(r)
        if w is not None and w not in warnings:
            warnings.append(w)
    meta = None if iv is None else {
        "replicates": int(replicates), "seed": int(seed),
        "draw": "two-stage paired bootstrap of the evaluated split (questions per group, then "
                "trajectories per model and question), shared by every method; NumPy PCG64",
        "percentiles": [2.5, 97.5]}
    return Leaderboard(rows=tuple(rows), split=splits[0],
                       synthetic=any(r.synthetic for r in results), warnings=tuple(warnings),
                       intervals=meta)
