"""Report figures from the analysis documents: matrices, local changes, frontiers, OTBench, thinning.

The style, sizes and file writer are `_style` (re-exported here). matplotlib
is imported inside the functions: ``import otbench.analysis`` never loads it.

Figures built here (the trajectory-level ones live in `_report_curves`):
`matrix_figure` (Tables 1/3 as heat maps), `local_changes_figure`
(paper Fig. 2), `frontier_figure` (Fig. 3), `bands_figure` (Fig. 5),
`otbench_figure` (Fig. 4), `thinning_figure` (Fig. 6).
"""

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from otbench.analysis.overthinking import ZERO_ACCURACY_MARK, zero_accuracy_places

from ._bench_figure import otbench_figure  # noqa: F401  (re-exported)
from ._style import (  # noqa: F401  (re-exported: the figure modules use one style)
    COLUMN_IN,
    DEFAULT_FORMATS,
    DPI,
    SNAP,
    STRATEGY_COLORS,
    STRATEGY_NAMES,
    TEXT_IN,
    FigureFormatError,
    FigureInfo,
    figure_formats,
    figure_style,
    new_figure,
    png_size,
    save,
    size_px,
    snap,
)



def arr(values: Sequence[float | None], scale: float = 1.0) -> np.ndarray:
    """float64 array from a JSON list; None (undefined) becomes NaN, which plots as a gap."""
    return scale * np.asarray([np.nan if v is None else v for v in values], dtype=np.float64)


def coverage(boot: Mapping[str, Any]) -> str:
    """The coverage label, e.g. "95%", from the document's percentiles (default 2.5 / 97.5)."""
    lo, hi = boot.get("percentiles") or (2.5, 97.5)
    return f"{hi - lo:g}%"


def _pct(x: float | None, digits: int = 1) -> str:
    return "never" if x is None else f"{100 * x:.{digits}f}%"


# -- Tables 1 / 3 as heat maps ----------------------------------------------------------

def matrix_figure(metrics_doc: Mapping[str, Any], keys: Sequence[str], labels: Sequence[str],
                  units: Sequence[str], scales: Sequence[float], digits: Sequence[int],
                  cmaps: Sequence[str], boot: Mapping[str, Any] | None = None,
                  ranges: Sequence[tuple[float | None, float | None]] | None = None):
    """Model x group heat maps (one panel per key) with the Avg. row and column.

    Values are annotated; with a bootstrap document, each cell also shows
    its 95 % interval (cells and macro; Avg. row/column entries only when
    the document has ``by_model`` / ``by_group``). `ranges`: per key, the
    colour scale's fixed ends in display units (None: the data's own end),
    so a small difference is not stretched over the whole scale; the
    colour bar's label states the range.
    """
    models, groups = list(metrics_doc["by_model"]), list(metrics_doc["by_group"])
    by_cell = {(c["model"], c["group"]): c for c in metrics_doc["cells"]}
    rows, cols = len(models) + 1, len(groups) + 1
    # Panels are stacked so each keeps a legible size at the page width;
    # the width follows the longest model name and the number of groups.
    label_w = min(2.8, 0.5 + 0.062 * max(len(m) for m in models))
    panel_h = 0.9 + (0.5 if boot else 0.38) * rows
    figsize = (min(TEXT_IN, max(5.0, label_w + 0.72 * cols + 1.1)),
               0.4 + (panel_h + (0.15 if boot else 0.0)) * len(keys))
    fig = new_figure(figsize)
    axes = fig.subplots(len(keys), 1, squeeze=False)[:, 0]
    ranges = ranges or [(None, None)] * len(keys)
    for ax, key, label, unit, scale, dg, cmap, (fix_lo, fix_hi) in zip(
            axes, keys, labels, units, scales, digits, cmaps, ranges):
        M = np.full((rows, cols), np.nan)
        for i, m in enumerate(models):
            for j, g in enumerate(groups):
                v = by_cell.get((m, g), {}).get(key)
                M[i, j] = np.nan if v is None else v * scale
            v = metrics_doc["by_model"][m][key]
            M[i, -1] = np.nan if v is None else v * scale
        for j, g in enumerate(groups):
            v = metrics_doc["by_group"][g][key]
            M[-1, j] = np.nan if v is None else v * scale
        v = metrics_doc["macro"][key]
        M[-1, -1] = np.nan if v is None else v * scale
        iv = _intervals(boot, key, models, groups) if boot else None
        zero = zero_accuracy_places(metrics_doc["cells"]) if key == "or" else set()
        finite = M[np.isfinite(M)]
        vmin, vmax = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
        vmin = vmin if fix_lo is None else min(fix_lo, vmin)
        vmax = vmax if fix_hi is None else max(fix_hi, vmax)
        if vmax <= vmin:
            vmax = vmin + 1.0
        im = ax.imshow(np.ma.masked_invalid(M), cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto")
        ax.set_xticks(range(cols), groups + ["Avg."], rotation=20, ha="right")
        ax.set_yticks(range(rows), models + ["Avg."])
        ax.set_xlabel("benchmark group")
        ax.set_ylabel("model")
        ax.grid(False)
        ax.axhline(rows - 1.5, color="white", lw=2.5)
        ax.axvline(cols - 1.5, color="white", lw=2.5)
        for i in range(rows):
            for j in range(cols):
                x = M[i, j]
                text = "n/a" if not np.isfinite(x) else f"{x:.{dg}f}"
                text += ZERO_ACCURACY_MARK if _place(models, groups, i, j) in zero else ""
                shade = 0.0 if not np.isfinite(x) else (x - vmin) / (vmax - vmin)
                color = "white" if _dark(cmap, shade) else "black"
                ax.text(j, i - (0.12 if iv is not None else 0.0), text, ha="center", va="center",
                        fontsize=7, color=color, fontweight="bold" if i == rows - 1 or j == cols - 1
                        else "normal")
                if iv is not None and iv[i][j] is not None:
                    lo, hi = iv[i][j]
                    # the mark of an interval without its estimate (explained in the caption)
                    mark = " †" if np.isfinite(x) and not lo * scale <= x <= hi * scale else ""
                    ax.text(j, i + 0.22, f"[{lo * scale:.{dg}f}, {hi * scale:.{dg}f}]{mark}",
                            ha="center", va="center", fontsize=6, color=color)
        cb = fig.colorbar(im, ax=ax, shrink=0.9, pad=0.02)
        cb.set_label(f"{unit}, scale {vmin:.{dg}f}–{vmax:.{dg}f}")
        ax.set_title(label + (f"\nwith {coverage(boot)} bootstrap intervals" if iv is not None
                              else ""))
    return fig


def _place(models: Sequence[str], groups: Sequence[str], i: int, j: int) -> tuple:
    """(scope, model, group) of heat-map entry (i, j), the last row and column being Avg."""
    m = models[i] if i < len(models) else None
    g = groups[j] if j < len(groups) else None
    scope = {(True, True): "cell", (True, False): "model", (False, True): "group",
             (False, False): "macro"}[(m is not None, g is not None)]
    return scope, m, g


def _dark(cmap: str, x: float) -> bool:
    import matplotlib

    r, g, b, _ = matplotlib.colormaps[cmap](float(min(1.0, max(0.0, x))))
    return 0.299 * r + 0.587 * g + 0.114 * b < 0.5


def _intervals(boot, key, models, groups):
    cells = {(c["model"], c["group"]): c.get(key) for c in boot.get("cells", [])}
    bm = {m: v.get(key) for m, v in (boot.get("by_model") or {}).items()}
    bg = {g: v.get(key) for g, v in (boot.get("by_group") or {}).items()}
    macro = (boot.get("macro") or {}).get(key)

    def ok(x):
        return None if x is None or x[0] is None or x[1] is None else x

    out = [[ok(cells.get((m, g))) for g in groups] + [ok(bm.get(m))] for m in models]
    out.append([ok(bg.get(g)) for g in groups] + [ok(macro)])
    return out


# -- Fig. 2: local changes ---------------------------------------------------------------

def bin_labels(edges: Sequence[int]) -> list[str]:
    """``lo–hi`` per bin (exact token counts), ``≥lo`` for the open last bin."""
    return [f"{lo}–{edges[i + 1]}" if i + 1 < len(edges) else f"≥{lo}"
            for i, lo in enumerate(edges)]


def local_changes_figure(edges: Sequence[int], pos: np.ndarray, neg: np.ndarray,
                         flat: np.ndarray):
    """Stacked shares of positive / flat / negative ΔP(k) per L(k) bin, and neg/pos ratio.

    Bins without any change are left out (a share of nothing is not 0).
    """
    total = pos + neg + flat
    keep = np.flatnonzero(total > 0)
    labels = [bin_labels(edges)[i] for i in keep]
    x = np.arange(keep.size)
    t = total[keep].astype(np.float64)
    shares = {name: 100.0 * arr[keep] / t for name, arr in
              (("positive", pos), ("flat", flat), ("negative", neg))}
    figsize = (TEXT_IN, 4.6)
    fig = new_figure(figsize)
    top, bottom = fig.subplots(2, 1, sharex=True, height_ratios=(3, 2))
    base = np.zeros(keep.size)
    for name, color in (("positive", "#2ca02c"), ("flat", "#b0b0b0"), ("negative", "#d62728")):
        top.bar(x, shares[name], bottom=base, color=color, width=0.8, label=f"{name} ΔP(k)")
        base = base + shares[name]
    top.set_ylim(0, 100)
    top.set_ylabel("share of changes (%)")
    top.set_title("share of positive, flat and negative local accuracy changes")
    top.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))
    p, n = pos[keep], neg[keep]
    ratio = np.where(p > 0, n / np.where(p > 0, p, 1), np.nan)
    ok = np.isfinite(ratio)
    bottom.plot(x[ok], ratio[ok], "o-", color="#7b3294", ms=4, label="negative / positive")
    bottom.axhline(1.0, color="black", ls="--", lw=0.8, label="ratio = 1")
    bottom.set_ylabel("negative / positive (ratio)")
    bottom.set_xlabel("thinking-token progress L(k) (tokens, bin of the position after the step)")
    bottom.set_title("negative-to-positive ratio (bins without a positive change omitted)")
    bottom.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))
    bottom.set_xticks(x, labels, rotation=45 if keep.size > 8 else 0,
                      ha="right" if keep.size > 8 else "center")
    return fig


def local_change_edges(max_tokens: int) -> tuple[int, ...]:
    """Bin edges for Fig. 3: the metrics' 2,048-token bins, halved for short thinking.

    With at least 16,384 thinking tokens in the longest trajectory the
    metrics' `DEFAULT_BIN_EDGES` are used (0, 2048, ..., 32768, last bin
    open). Shorter sets would fall into one or two such bins, so the width
    is the smallest 2048 / 2^j (j >= 0, at least 1 token) giving at most 12
    bins that reach the longest trajectory. Such a width divides 2,048, so
    every bin lies inside one bin of ``metrics.json``'s local changes and
    their counts add up to it (the report and the metrics never disagree on
    what a bin holds).
    """
    from otbench.analysis.overthinking import DEFAULT_BIN_EDGES

    if max_tokens >= 16384:
        return tuple(DEFAULT_BIN_EDGES)
    width = int(DEFAULT_BIN_EDGES[1])
    while width > 1 and math.ceil((max_tokens + 1) / (width // 2)) <= 12:
        width //= 2
    return tuple(range(0, max(1, math.ceil((max_tokens + 1) / width)) * width, width))


# -- Fig. 3: oracle frontiers --------------------------------------------------------------

def frontier_figure(frontier_doc: Mapping[str, Any]):
    """Macro frontiers F_C(β) of every strategy, A_full, β_match markers, ceilings and β_sat."""
    beta = 100.0 * np.asarray(frontier_doc["grid"], dtype=np.float64)
    a_full = 100.0 * frontier_doc["a_full"]
    fig = new_figure((TEXT_IN, 4.6))
    ax = fig.subplots()
    ax.axhline(a_full, color="black", ls="--", lw=0.9, label=f"A_full (STP endpoint) {a_full:.2f}%")
    for s in ("dr", "fb", "dee"):
        f = frontier_doc["strategies"].get(s)
        if f is None:
            continue
        y = 100.0 * np.asarray(f["macro"], dtype=np.float64)
        c = STRATEGY_COLORS[s]
        lab = (f"{s.upper()}: β_match {_pct(f['beta_match'])}, ceiling {100 * f['ceiling']:.1f}%, "
               f"β_sat {_pct(f['beta_sat'])}")
        ax.plot(beta, y, color=c, lw=1.6, drawstyle="steps-post", label=lab)
        if f["beta_match"] is not None:
            bm = 100.0 * f["beta_match"]
            ax.plot([bm], [a_full], marker="o", ms=7, color=c, mec="black", mew=0.6, zorder=5,
                    clip_on=False)
            ax.axvline(bm, color=c, ls=":", lw=0.9)
        if f["beta_sat"] is not None:
            ax.plot([100.0 * f["beta_sat"]], [100.0 * f["ceiling"]], marker="s", ms=6, color=c,
                    mec="black", mew=0.6, zorder=5, clip_on=False)
    ax.plot([], [], "o", color="gray", mec="black", label="β_match (F_C(β) ≥ A_full)")
    ax.plot([], [], "s", color="gray", mec="black", label="β_sat (F_C(β) = ceiling F_C(1))")
    ax.set_xlim(0, 100)
    ax.set_xlabel("relative token budget β (% of the cell's full-thinking tokens)")
    ax.set_ylabel("macro oracle accuracy F_C(β) (%)")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncols=2, borderaxespad=0.0)
    return fig


# -- Fig. 5: bootstrap bands ----------------------------------------------------------------

def bands_figure(frontier_doc: Mapping[str, Any], boot: Mapping[str, Any]):
    """Per strategy: point frontier, bootstrap median and 2.5-97.5 % pointwise band."""
    fr = boot["frontiers"]
    cov = coverage(boot)
    strategies = [s for s in ("dr", "fb", "dee") if s in fr]
    gb = arr(fr["grid"], 100.0)
    beta = 100.0 * np.asarray(frontier_doc["grid"], dtype=np.float64)
    a_full = 100.0 * frontier_doc["a_full"]
    fig = new_figure((TEXT_IN if len(strategies) > 1 else 4.5, 4.2))
    axes = fig.subplots(1, len(strategies), sharey=True, squeeze=False)[0]
    for ax, s in zip(axes, strategies):
        c = STRATEGY_COLORS[s]
        b = fr[s]
        ax.fill_between(gb, arr(b["lo"], 100.0), arr(b["hi"], 100.0), color=c, alpha=0.25,
                        lw=0, step="post", label=f"{cov} pointwise band")
        ax.plot(gb, arr(b["median"], 100.0), color=c, lw=1.0, ls="--",
                drawstyle="steps-post", label="bootstrap median")
        pf = frontier_doc["strategies"].get(s)
        if pf is not None:
            ax.plot(beta, 100.0 * np.asarray(pf["macro"], dtype=np.float64), color=c, lw=1.6,
                    drawstyle="steps-post", label="point frontier")
        ax.axhline(a_full, color="black", ls="--", lw=0.8, label="A_full")
        bm = b.get("beta_match")
        if bm is not None and bm[0] is not None and bm[1] is not None:
            ax.errorbar([100.0 * (bm[0] + bm[1]) / 2], [a_full],
                        xerr=[[100.0 * (bm[1] - bm[0]) / 2]], fmt="none", ecolor="black",
                        capsize=4, lw=1.4,
                        label=f"β_match {cov}: [{100 * bm[0]:.1f}, {100 * bm[1]:.1f}]%")
        ax.set_xlim(0, 100)
        ax.set_title(STRATEGY_NAMES[s])
        ax.set_xlabel("relative token budget β (%)")
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), fontsize=6.0, borderaxespad=0.0)
    axes[0].set_ylabel("macro oracle accuracy F_C(β) (%)")
    return fig


# -- Fig. 6: thinning ---------------------------------------------------------------------------

def thinning_figure(thin: Mapping[str, Any], metrics_doc: Mapping[str, Any]):
    """Probe-count (exact expectations) and trajectory-count (percentile ranges) sensitivity."""
    probes = thin.get("probes") or {}
    trajs = thin.get("trajectories") or {}
    rows = (["probes"] if probes else []) + (["trajectories"] if trajs else [])
    fig = new_figure((TEXT_IN, 3.1 * len(rows) + 0.5))
    axes = fig.subplots(len(rows), 3, squeeze=False)
    macro = metrics_doc["macro"]
    for r, what in enumerate(rows):
        ax = axes[r]
        if what == "probes":
            ms_ = sorted(probes, key=int)
            m = np.asarray([int(k) for k in ms_])
            for a, key, lab, scale in ((ax[0], "or", "expected OR (%)", 100.0),
                                       (ax[1], "ad", "expected AD (pp)", 100.0),
                                       (ax[2], "retention", "P(thinned k* = full k*) (%)", 100.0)):
                a.plot(m, [scale * probes[k][key] for k in ms_], "o-", color="#1f77b4",
                       label="exact expectation")
                if key in ("or", "ad") and macro.get(key) is not None:
                    a.axhline(scale * macro[key], color="black", ls="--", lw=0.8,
                              label="all probes (Tables 1–2)")
                a.set_xticks(m)
                a.set_xlabel("m (answer probes per position)")
                a.set_ylabel(lab)
                a.legend(loc="upper center", bbox_to_anchor=(0.5, -0.22), fontsize=6.0,
                         borderaxespad=0.0)
            ax[0].set_title("probe thinning: OR")
            ax[1].set_title("probe thinning: AD")
            ax[2].set_title("probe thinning: k* retention")
        else:
            rs = sorted(trajs, key=int)
            rr = np.asarray([int(k) for k in rs])
            for a, key, lab in ((ax[0], "or", "macro OR (%)"), (ax[1], "ad", "macro AD (pp)")):
                lo = np.asarray([100.0 * trajs[k][key][0] for k in rs])
                hi = np.asarray([100.0 * trajs[k][key][1] for k in rs])
                mean = [trajs[k].get(f"mean_{key}") for k in rs]
                # The mean over draws when recorded, else the range's midpoint.
                mid = np.asarray([100.0 * v if v is not None else (lo_ + hi_) / 2.0
                                  for v, lo_, hi_ in zip(mean, lo, hi)])
                # Float summation can put the mean an ulp outside its range (r = R).
                mid = np.clip(mid, lo, hi)
                a.errorbar(rr, mid, yerr=np.vstack([mid - lo, hi - mid]), fmt="o", color="#ff7f0e",
                           capsize=4, label="mean over draws, 2.5–97.5% range")
                if macro.get(key) is not None:
                    a.axhline(100.0 * macro[key], color="black", ls="--", lw=0.8,
                              label="full trajectory pool")
                a.set_xscale("log", base=2)
                a.set_xticks(rr, [str(v) for v in rr])
                a.minorticks_off()
                a.set_xlabel("r (trajectories per question)")
                a.set_ylabel(lab)
                a.legend(loc="upper center", bbox_to_anchor=(0.5, -0.22), fontsize=6.0,
                         borderaxespad=0.0)
            ax[0].set_title("trajectory thinning: OR")
            ax[1].set_title("trajectory thinning: AD")
            w = np.asarray([100.0 * (trajs[k]["or"][1] - trajs[k]["or"][0]) for k in rs])
            ax[2].plot(rr, w, "o-", color="#ff7f0e", label="OR range width")
            w2 = np.asarray([100.0 * (trajs[k]["ad"][1] - trajs[k]["ad"][0]) for k in rs])
            ax[2].plot(rr, w2, "s--", color="#7f7f7f", label="AD range width")
            ax[2].set_xscale("log", base=2)
            ax[2].set_xticks(rr, [str(v) for v in rr])
            ax[2].minorticks_off()
            ax[2].set_xlabel("r (trajectories per question)")
            ax[2].set_ylabel("2.5–97.5% range width (pp)")
            ax[2].set_title("trajectory thinning: range width")
            ax[2].legend(loc="upper center", bbox_to_anchor=(0.5, -0.22), fontsize=6.0,
                         borderaxespad=0.0)
    return fig
