"""The report's OTBench section: methods against their strategies' oracle frontiers (docs/rules.md).

The figure is `_bench_figure.otbench_figure`; the table ranks the methods
within each strategy by the leaderboard's one key
(`otbench.analysis.bench.leaderboard_key`), as every other ranking does.
"""

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from . import _figures as figs
from . import _numbering as num
from . import _tables as tabs
from ._bench_intervals import (
    CSV_HEADER,
    IV_HEADER,
    interval_caption,
    interval_cells,
    panel_line,
    warnings_of,
)
from ._html import Section


def _n(x: int) -> str:
    return f"{x:,}"


# -- 4. OTBench (Fig. 4) ------------------------------------------------------------------------------

def _cells_of(test) -> dict[tuple[str, str], tuple[int, int]]:
    end = test.L[np.arange(test.num_trajectories), test.n].astype(np.int64)
    out = {}
    for c in np.unique(test.cell).tolist():
        rows = test.cell_rows(c)
        out[test.cell_name(c)] = (int(rows.size), int(end[rows].sum()))
    return out


def evaluated_split_frontiers(ms, bench: Sequence[Mapping[str, Any]]
                         ) -> tuple[dict[str, dict | None], dict[str, int], list[str]]:
    """Per strategy: the oracle frontier document on the methods' evaluated split.

    The split is the set's stored one, or else the seeded one the OTBench
    result records (``config.splits``: seed and ratios). It is used only
    when its cells have exactly the trajectory counts and full-thinking
    tokens the OTBench result reports, so the curve is the one the gaps were
    measured against; otherwise the curve is left out (with a note).
    """
    from otbench.analysis.bench import assign_splits
    from otbench.analysis.frontier import frontiers
    from otbench.analysis.measurement import SPLITS

    out: dict[str, dict | None] = {}
    ntraj: dict[str, int] = {}
    notes: list[str] = []
    for d in bench:
        s = d["strategy"]
        if out.get(s) is not None:
            continue
        split = d.get("split", "test")
        si = SPLITS.index(split) if split in SPLITS else SPLITS.index("test")
        want = {(c["model"], c["group"]): (int(c["trajectories"]), int(c["total_tokens"]))
                for c in d.get("cells", []) if "trajectories" in c and "total_tokens" in c}
        cands = []
        if np.all(ms.split >= 0):
            cands.append(lambda: ms)
        info = (d.get("config") or {}).get("splits") or {}
        if "seed" in info and "ratios" in info:
            cands.append(lambda info=info: assign_splits(ms, seed=int(info["seed"]),
                                                         ratios=info["ratios"]))
        found = None
        for make in cands:
            cm = make()
            test = cm.take(np.flatnonzero(cm.split == si))
            if test.num_trajectories and (not want or _cells_of(test) == want):
                found = test
                break
        if found is None:
            out.setdefault(s, None)
            notes.append(f"OTBench {s.upper()}: the {split} split of method {d['method']!r} could not "
                         "be reconstructed from the set, so its oracle frontier curve is not drawn "
                         "(the per-point oracle values are).")
            continue
        out[s] = frontiers(found, strategies=[s], grid=1001).to_json()
        ntraj[s] = found.num_trajectories
    return out, ntraj, notes


def otbench_section(ctx) -> Section:
    from otbench.analysis.bench import RANKED_BY

    bench = ctx.inputs.bench
    sec = Section("otbench", "OTBench: practical termination methods",
                  "Each method's operating points over its θ sweep against its strategy's exact "
                  "oracle frontier on the same evaluated questions (docs/rules.md); token cost counts "
                  "retained thinking tokens only.")
    if not bench:
        ctx.missing(sec, f"No OTBench results ({num.figure_label('otbench')}): run `otbench bench "
                         "compare DIR` (it writes DIR/results/bench-<method>.json) and rebuild "
                         "the report.")
        return sec
    ctx.say("OTBench: test-split oracle frontiers")
    fronts, ntraj, notes = evaluated_split_frontiers(ctx.ms, bench)
    for n in notes:
        ctx.missing(sec, n)
    T = max([sum(int(c.get("trajectories", 0)) for c in d.get("cells", [])) for d in bench] + [0])
    splits = sorted({d.get("split", "test") for d in bench})
    sec.figure(ctx.fig(
        "otbench", lambda: figs.otbench_figure([d for _, d in _ranked(bench)], fronts),
        title="OTBench methods against their strategies' oracle frontiers",
        caption=f"{len(bench)} method(s) on the {'/'.join(splits)} split, one panel each in the "
                f"leaderboard's order (Table {num.table_number('otbench')}), titled with its gap "
                f"area over [0, 1] and realized share; relative cost in % of full thinking's "
                f"tokens. Black steps: the method's curve as the summary scores it (per cell, the "
                f"best accuracy of its curve points at or below each relative cost, no thinking "
                f"below the cheapest; cells chained with equal weights), so the grey band up to "
                f"the frontier (in its strategy's colour) is the gap area over [0, 1] and the "
                f"realized share is the curve's area over no thinking relative to the frontier's; "
                f"a method whose cells each switch only near full cost realizes little even when "
                f"its macro points (markers, averages of cells switching at different costs; "
                f"hollow: dominated) lie on the frontier. Crosses: the oracle at each point's own "
                f"per-cell costs, against which its gap is measured; from {_n(T)} trajectories."
                + (" Below each panel's gap and realized share: its 95% rank interval within "
                   "the strategy, the 95% interval of its own gap area over [0, 1] (pp; † the "
                   "estimate lies outside it, reason in the table's caption), and its gap area "
                   "behind the strategy's best method with the paired 95% interval (pp), as in "
                   "the table." if any(panel_line(d) for d in bench) else "")
                + "".join(f" Warning: {w}." for w in warnings_of(bench)),
        trajectories=T))
    ranked = _ranked(bench)
    rows = [_bench_row(rank, d) for rank, d in ranked]
    sec.table(ctx.table(tabs.simple_table(
        "otbench", title="OTBench summary",
        caption=f"Ranked within each strategy by {RANKED_BY}, the leaderboard's one rule "
                "(tied methods share a rank). " + interval_caption(bench) + 
                "Curve points / all points; gap area: the mean gap between the oracle frontier "
                "and the method's step curve over relative cost (pp), over the method's own cost "
                "range and over [0, 1] (cells chained with equal weights); realized: the share of "
                "the frontier's area over no thinking that the method's curve reaches on [0, 1] "
                "(%); net: the same over the net points, whose cost adds the method's signal cost "
                "per decision to the thinking tokens, against the same frontier (n/a: a result "
                "without net points); macro accuracy with no thinking and with full thinking on "
                "the evaluated split (%).",
        header=["rank", "method", "strategy", "split", "curve/points (count)", "gap area (pp)",
                "gap area [0,1] (pp)", "realized (%)", "net gap area [0,1] (pp)",
                "net realized (%)", "no thinking (%)", "full thinking (%)"] + IV_HEADER,
        csv_header=CSV_HEADER, rows=rows, key_columns=2)))
    return sec


def _ranked(bench: Sequence[Mapping[str, Any]]) -> list[tuple[int, Mapping[str, Any]]]:
    """(rank within its strategy, result) in strategy order, by the leaderboard's one key;
    tied methods share the best rank of their tie, as on the leaderboard."""
    from types import SimpleNamespace

    from otbench.analysis.bench import leaderboard_key

    def key(d):
        return leaderboard_key(SimpleNamespace(summary=d.get("summary", {}), method=str(d["method"])))

    out = []
    for s in sorted({d["strategy"] for d in bench}, key=("dr", "fb", "dee", *sorted(
            {d["strategy"] for d in bench})).index):
        mine = sorted((d for d in bench if d["strategy"] == s), key=key)
        out += [(1 + sum(key(o)[:-1] < key(d)[:-1] for o in mine), d) for d in mine]
    return out


def _bench_row(rank: int, d: Mapping[str, Any]) -> list[tuple[str, str]]:
    s = d.get("summary", {})
    ns = (d.get("net") or {}).get("summary") or {}
    ref = d.get("reference", {})
    pts = f"{s.get('curve_points', '')}/{s.get('points', len(d['points']))}"
    row = [(str(rank), str(rank)), (str(d["method"]), str(d["method"])),
           (d["strategy"].upper(), d["strategy"]),
           (str(d.get("split", "")), str(d.get("split", ""))), (pts, pts)]
    for v, digits in ((s.get("gap_area"), 2), (s.get("gap_area_full"), 2),
                      (s.get("realized_share"), 1), (ns.get("gap_area_full"), 2),
                      (ns.get("realized_share"), 1), (ref.get("a_zero"), 1),
                      (ref.get("a_full"), 1)):
        row.append((tabs.fmt(v, 100.0, digits), tabs.csv_num(v, 100.0)))
    return row + interval_cells(d)
