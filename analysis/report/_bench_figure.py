"""The OTBench figure: methods against their strategies' oracle frontiers, drawn as the areas are scored.

The summary of an OTBench result integrates step curves (`otbench.analysis.bench`,
module docstring, 6.): per cell, the method's curve `M_g(x)` is the best
accuracy of its curve points with relative cost `<= x` (the cell's
zero-thinking accuracy `A0_g` below its cheapest point); the gap area is
`∫ (F - M) dx` and the realized share `∫ (M - A0) / ∫ (F - A0)` over the
equal-weight chain of the cells. Because the chain is linear, these are
exactly the integrals of the chained curves `M_C(x) = chain_g M_g(x)`
and `F_C(x)`, so the figure draws `M_C` (a step curve, `macro_step_curve`)
and shades its gap to the frontier: the shaded area is the gap area, and a
method whose cells each jump only at full cost (realized share near 0) shows
a flat curve even when its macro points -- averages of cells that switch at
different costs -- sit on the frontier.
"""

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ._style import COLUMN_IN, STRATEGY_COLORS, new_figure
from ._bench_intervals import panel_line


def _cell_zero(frontier: Mapping[str, Any] | None, strategy: str) -> dict[tuple[str, str], float]:
    """Per cell, the frontier at budget 0 (the zero-thinking accuracy A0_g)."""
    if frontier is None:
        return {}
    cells = (frontier.get("strategies", {}).get(strategy) or {}).get("cells") or []
    return {(c["model"], c["group"]): float(c["acc"][0]) for c in cells if c.get("acc")}


def macro_step_curve(doc: Mapping[str, Any], frontier: Mapping[str, Any] | None = None
                     ) -> tuple[np.ndarray, np.ndarray] | None:
    """(x, y) of the chained per-cell step curves `M_C` (fractions; draw with steps-post).

    `x` ascends from 0 and ends at 1; `y[i]` holds on `[x[i], x[i+1])`. A
    cell's value below its cheapest curve point is its zero-thinking
    accuracy: its own cost-0 point, else the evaluated-split frontier's
    value at budget 0 (`frontier`, an ``otbench.frontier/1`` document).
    None when some cell has neither (the curve cannot be drawn exactly).
    """
    zero = _cell_zero(frontier, doc["strategy"])
    curves, models = [], []
    for c in doc.get("cells", []):
        on = sorted((float(p["rel_cost"]), float(p["acc"])) for p in c["points"]
                    if p["nondominated"])
        if not on:
            return None
        xs = np.asarray([x for x, _ in on])
        ys = np.maximum.accumulate(np.asarray([y for _, y in on]))   # best at or below x
        if xs[0] > 0.0:
            a0 = zero.get((c["model"], c["group"]))
            if a0 is None:
                return None
            xs, ys = np.append(0.0, xs), np.append(a0, ys)
        curves.append((xs, ys))
        models.append(c["model"])
    if not curves:
        return None
    x = np.unique(np.concatenate([xs for xs, _ in curves] + [np.asarray([0.0, 1.0])]))
    x = x[(x >= 0.0) & (x <= 1.0)]
    per_cell = np.stack([ys[np.searchsorted(xs, x, side="right") - 1] for xs, ys in curves])
    # The project's chain: the mean over a model's cells, then over models.
    names = sorted(set(models))
    by_model = np.stack([per_cell[[i for i, m in enumerate(models) if m == name]].mean(axis=0)
                         for name in names])
    return x, by_model.mean(axis=0)


def _frontier_at(grid: np.ndarray, macro: np.ndarray, x: np.ndarray) -> np.ndarray:
    """The frontier's step function (right-continuous on its grid) at `x`."""
    return macro[np.clip(np.searchsorted(grid, x, side="right") - 1, 0, grid.size - 1)]


METHOD_COLOR = "#222222"
"""Every method's curve, points and gap (one method per panel, so one colour; the frontier and
its oracle crosses take the strategy's colour)."""
PANEL_IN = 1.4
"""Height of one row of panels (inches)."""


def otbench_figure(bench: Sequence[Mapping[str, Any]],
                   test_frontiers: Mapping[str, Mapping[str, Any] | None]):
    """Small multiples, one column wide: a panel per method against its strategy's frontier.

    Panels run in the order given (the section passes the leaderboard's
    order), two to a row, with shared axes. In each, the step curve (solid)
    is the one the gap area and realized share integrate, and the one shaded
    band between it and the frontier is the gap area; the panel's title
    names the method, its strategy and those two numbers. Operating points
    are the macro averages (filled: non-dominated, hollow: dominated), each
    with the oracle at its own per-cell costs (a cross in the frontier's
    colour); a method whose signal costs tokens also gets its non-dominated
    net points (dashed, hollow), whose cost adds that signal cost. One
    legend, below the panels and outside the data, explains the marks: its
    length does not grow with the number of methods.
    """
    order = {"dr": 0, "fb": 1, "dee": 2}
    docs = [d for d in bench if d["strategy"] in order]
    ncols = 1 if len(docs) == 1 else 2
    nrows = -(-len(docs) // ncols)
    # Three more title lines per panel with the leaderboard's intervals: the rows grow by them,
    # so the plots keep their height.
    extra = 0.45 if any(panel_line(d) for d in docs) else 0.0
    fig = new_figure((COLUMN_IN, 1.0 + (PANEL_IN + extra) * nrows))
    grid = fig.subplots(nrows, ncols, sharex=True, sharey=True, squeeze=False)
    axes = [ax for row in grid for ax in row]
    for ax in axes[len(docs):]:     # an odd count: the panel above the gap shows its x ticks
        ax.remove()
    for i, ax in enumerate(axes[:len(docs)]):
        if i + ncols >= len(docs):  # the lowest panel of its column
            ax.xaxis.set_tick_params(labelbottom=True)
            ax.set_xlabel("relative cost (%)")
    has_net = False
    for ax, d in zip(axes, docs):
        has_net |= _panel(ax, d, test_frontiers.get(d["strategy"]))
    fig.supylabel("macro probe accuracy (%)", fontsize=8.0)
    strategies = sorted({d["strategy"] for d in docs}, key=order.get)
    fig.legend(handles=_legend_handles(strategies, has_net), loc="outside lower center", ncols=2,
               fontsize=6.0, borderaxespad=0.3)
    return fig


def _panel(ax, d: Mapping[str, Any], f: Mapping[str, Any] | None) -> bool:
    """Draw one method's panel; True when it drew net points."""
    s, c = d["strategy"], METHOD_COLOR
    fc = STRATEGY_COLORS[s]
    grid = macro = None
    if f is not None:
        grid = np.asarray(f["grid"], dtype=np.float64)
        macro = np.asarray(f["strategies"][s]["macro"], dtype=np.float64)
        ax.plot(100.0 * grid, 100.0 * macro, color=fc, lw=1.8, drawstyle="steps-post",
                label="oracle frontier", zorder=3)
    step = macro_step_curve(d, f)
    if step is not None:
        x, y = step
        ax.plot(100.0 * x, 100.0 * y, color=c, lw=0.9, drawstyle="steps-post", zorder=4,
                label=f"{d['method']} step curve")
        if grid is not None:        # the one band of this panel: nothing overlaps it
            xx = np.unique(np.concatenate([x, grid]))
            top = _frontier_at(grid, macro, xx)
            low = y[np.searchsorted(x, xx, side="right") - 1]
            ax.fill_between(100.0 * xx, 100.0 * low, 100.0 * np.maximum(top, low), step="post",
                            color=c, alpha=0.18, lw=0, zorder=1, label="gap area")
    pts = sorted(d["points"], key=lambda p: (p["rel_cost"], p["acc"]))
    px = np.asarray([100.0 * p["rel_cost"] for p in pts])
    py = np.asarray([100.0 * p["acc"] for p in pts])
    nd = np.asarray([bool(p["nondominated"]) for p in pts], dtype=bool)
    ax.plot(px[nd], py[nd], marker="o", ls="none", color=c, ms=2.8, zorder=5,
            label=f"{d['method']} points (macro)")
    if (~nd).any():
        ax.plot(px[~nd], py[~nd], marker="o", ls="none", mfc="none", color=c, ms=2.8, mew=0.7,
                zorder=5)
    ax.plot(px, [100.0 * p["frontier_acc"] for p in pts], "x", color=fc, ms=2.5, mew=0.7,
            zorder=5)
    # Net points (thinking plus the signal's cost, docs/rules.md) beside the gross ones,
    # drawn only when the signal costs something; same frontier.
    net = (d.get("net") or {}).get("points") or []
    drew_net = any(float(q.get("signal_cost", 0.0)) > 0 for q in net)
    summ = d.get("summary", {})
    title = f"{d['method']} ({s.upper()})\ngap {_pp(summ.get('gap_area_full'))}, " \
            f"realized {_share(summ)}"
    line = panel_line(d)           # the leaderboard's intervals, as `bench compare` printed them
    if line is not None:
        title += f"\n{line}"
    if drew_net:
        on = sorted((100.0 * q["rel_cost"], 100.0 * q["acc"]) for q in net if q["nondominated"])
        ax.plot([a for a, _ in on], [b for _, b in on], ls="--", marker="o", mfc="none",
                color=c, lw=0.8, ms=2.5, mew=0.7, zorder=4, label=f"{d['method']} net points")
        title += f"\nnet: realized {_share(d['net'].get('summary', {}))}"
    ax.set_xlim(0, 100)
    ax.set_title(title, fontsize=6.5, linespacing=1.15)
    return drew_net


def _legend_handles(strategies: Sequence[str], net: bool) -> list:
    """Proxy artists for the one legend (what each mark means, not which method it is)."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    c = METHOD_COLOR
    out = [Line2D([], [], color=STRATEGY_COLORS[s], lw=1.8,
                  label=f"{s.upper()} oracle frontier") for s in strategies]
    out += [Line2D([], [], color=c, lw=0.9, label="step curve (as scored)"),
            Patch(color=c, alpha=0.18, lw=0, label="gap area (shaded)"),
            Line2D([], [], color=c, marker="o", ls="none", ms=2.8, label="point (macro)"),
            Line2D([], [], color=c, marker="o", mfc="none", ls="none", ms=2.8, mew=0.7,
                   label="dominated point"),
            Line2D([], [], color="gray", marker="x", ls="none", ms=2.5, mew=0.7,
                   label="oracle at the point's per-cell costs")]
    if net:
        out.append(Line2D([], [], color=c, ls="--", marker="o", mfc="none", lw=0.8, ms=2.5,
                          mew=0.7, label="net points (with signal cost)"))
    return out


def _pp(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.2f} pp"


def _share(summary: Mapping[str, Any]) -> str:
    x = summary.get("realized_share")
    return "n/a" if x is None else f"{100 * x:.1f}%"
