"""Report figures from the analysis documents: matrices, local changes, frontiers, OTBench, thinning.

Every figure is drawn on a bare `matplotlib.figure.Figure` with an Agg
canvas -- never through pyplot, so no global backend is switched and a
user's interactive session is untouched -- inside `figure_style()`, which
starts from matplotlib's built-in defaults (not the user's matplotlibrc) and
fixes the font to the DejaVu Sans that ships with matplotlib. PNGs are saved
at a fixed size (`size_px`: inches x `DPI`, no tight bounding box) without
the "Software" metadata entry, so the same inputs give byte-identical files.
matplotlib is imported inside the functions: ``import otbench.analysis``
never loads it.

Figures built here (the trajectory-level ones live in `_report_curves`):
`matrix_figure` (Tables 1/3 as heat maps), `local_changes_figure`
(paper Fig. 2), `frontier_figure` (Fig. 3), `bands_figure` (Fig. 5),
`otbench_figure` (Fig. 4), `thinning_figure` (Fig. 6).
"""

import contextlib
import dataclasses
import math
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

DPI = 144
SNAP = 8
"""Figure sizes are snapped to 1/8 inch: with `DPI` 144, inches x DPI is then an
exact integer in binary floating point, so the PNG size is exactly `size_px`
(Agg truncates a fractional pixel size, which would make it off by one)."""
RC = {
    "font.family": "DejaVu Sans", "mathtext.fontset": "dejavusans",
    "font.size": 9.0, "axes.titlesize": 9.5, "axes.labelsize": 9.0, "legend.fontsize": 7.5,
    "xtick.labelsize": 8.0, "ytick.labelsize": 8.0, "figure.titlesize": 11.0,
    "axes.grid": True, "grid.alpha": 0.3, "grid.linewidth": 0.6,
    "axes.spines.top": False, "axes.spines.right": False,
    "legend.frameon": True, "legend.framealpha": 0.9,
    "savefig.dpi": DPI, "figure.dpi": DPI,
    "figure.constrained_layout.use": True,
    "svg.hashsalt": "otbench", "path.simplify": False,
}
STRATEGY_COLORS = {"dr": "#1f77b4", "fb": "#ff7f0e", "dee": "#2ca02c"}
STRATEGY_NAMES = {"dr": "DR (dynamic routing)", "fb": "FB (fixed budget)",
                  "dee": "DEE (dynamic early exit)"}
SYNTHETIC_MARK = "SYNTHETIC DATA"


@contextlib.contextmanager
def figure_style():
    """matplotlib's built-in defaults plus `RC`, restored on exit."""
    import matplotlib
    import matplotlib.style

    with matplotlib.style.context("default"), matplotlib.rc_context(RC):
        yield


@dataclasses.dataclass(frozen=True)
class FigureInfo:
    """One written figure (recorded in ``report.json`` and shown in the HTML)."""

    name: str            # file stem: figures/<name>.png
    title: str
    caption: str         # one line: what it shows, from how many trajectories
    trajectories: int
    width: int           # pixels
    height: int

    @property
    def file(self) -> str:
        return f"figures/{self.name}.png"


def snap(figsize: tuple[float, float]) -> tuple[float, float]:
    """`figsize` rounded to 1/`SNAP` inch (at least one step)."""
    return tuple(max(1, round(x * SNAP)) / SNAP for x in figsize)


def size_px(figsize: tuple[float, float]) -> tuple[int, int]:
    """PNG size in pixels of a figure of `figsize` inches (snapped) at `DPI`."""
    w, h = snap(figsize)
    return int(w * DPI), int(h * DPI)


def png_size(path: Path) -> tuple[int, int]:
    """(width, height) from a PNG file's IHDR chunk."""
    import struct

    head = Path(path).read_bytes()[:24]
    if head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        raise ValueError(f"{path}: not a PNG file")
    return struct.unpack(">II", head[16:24])


def new_figure(figsize: tuple[float, float]):
    """A pyplot-free Figure with an Agg canvas, size snapped (call inside `figure_style`)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=snap(figsize), dpi=DPI)
    FigureCanvasAgg(fig)
    return fig


def save(fig, out_dir: Path, name: str, *, title: str, caption: str, trajectories: int,
         synthetic: bool) -> FigureInfo:
    """Title, synthetic watermark, fixed-size deterministic PNG; returns its record."""
    if synthetic:
        title = f"{title} [{SYNTHETIC_MARK}]"
        # Across the canvas, faint, outside the layout: visible on every crop.
        fig.text(0.5, 0.5, f"{SYNTHETIC_MARK}\nsimulated, not model outputs", ha="center",
                 va="center", rotation=20, fontsize=26, color="#c0392b", alpha=0.12,
                 zorder=100, in_layout=False)
    # Wrapped to the figure's width (about 9 bold 11-pt characters per inch), so a
    # long title on a narrow figure is never cut at the edge.
    fig.suptitle(textwrap.fill(title, width=max(20, int(fig.get_size_inches()[0] * 9))),
                 fontweight="bold")
    path = Path(out_dir) / "figures" / f"{name}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    w, h = size_px(tuple(fig.get_size_inches()))
    # No "Software" entry (it names the matplotlib version) and Agg writes no
    # timestamp: the bytes depend only on the drawing.
    fig.savefig(path, format="png", dpi=DPI, metadata={"Software": None})
    if png_size(path) != (w, h):    # a bug in the sizing, never a data problem
        raise AssertionError(f"{path}: PNG is {png_size(path)}, expected {(w, h)}")
    return FigureInfo(name=name, title=title, caption=caption, trajectories=int(trajectories),
                      width=w, height=h)


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
                  cmaps: Sequence[str], boot: Mapping[str, Any] | None = None):
    """Model x group heat maps (one panel per key) with the Avg. row and column.

    Values are annotated; with a bootstrap document, each cell also shows
    its 95 % interval (cells and macro; Avg. row/column entries only when
    the document has ``by_model`` / ``by_group``).
    """
    models, groups = list(metrics_doc["by_model"]), list(metrics_doc["by_group"])
    by_cell = {(c["model"], c["group"]): c for c in metrics_doc["cells"]}
    rows, cols = len(models) + 1, len(groups) + 1
    # Panels are stacked so each keeps a legible size at the page width;
    # the width follows the longest model name and the number of groups.
    label_w = min(2.8, 0.5 + 0.062 * max(len(m) for m in models))
    panel_h = 0.9 + (0.5 if boot else 0.38) * rows
    figsize = (max(6.0, label_w + 0.78 * cols + 1.1), 0.5 + (panel_h + (0.2 if boot else 0.0)) * len(keys))
    fig = new_figure(figsize)
    axes = fig.subplots(len(keys), 1, squeeze=False)[:, 0]
    for ax, key, label, unit, scale, dg, cmap in zip(axes, keys, labels, units, scales, digits,
                                                     cmaps):
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
        finite = M[np.isfinite(M)]
        vmin, vmax = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
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
                shade = 0.0 if not np.isfinite(x) else (x - vmin) / (vmax - vmin)
                color = "white" if _dark(cmap, shade) else "black"
                ax.text(j, i - (0.12 if iv is not None else 0.0), text, ha="center", va="center",
                        fontsize=8, color=color, fontweight="bold" if i == rows - 1 or j == cols - 1
                        else "normal")
                if iv is not None and iv[i][j] is not None:
                    lo, hi = iv[i][j]
                    ax.text(j, i + 0.22, f"[{lo * scale:.{dg}f}, {hi * scale:.{dg}f}]",
                            ha="center", va="center", fontsize=6, color=color)
        cb = fig.colorbar(im, ax=ax, shrink=0.9, pad=0.02)
        cb.set_label(unit)
        ax.set_title(label + (f"\nwith {coverage(boot)} bootstrap intervals" if iv is not None
                              else ""))
    return fig


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
    figsize = (max(6.5, 2.0 + 0.42 * keep.size), 5.6)
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
    """Bin edges for Fig. 2: the paper's 2,048-token bins, finer for short thinking.

    With at least 16,384 thinking tokens in the longest trajectory the
    metrics' `DEFAULT_BIN_EDGES` are used (0, 2048, ..., 32768, last bin
    open). Shorter sets would fall into one or two such bins, so the width
    is the smallest 1-2-5 x 10^k number giving at most 12 bins that reach
    the longest trajectory.
    """
    from otbench.analysis.overthinking import DEFAULT_BIN_EDGES

    if max_tokens >= 16384:
        return tuple(DEFAULT_BIN_EDGES)
    width = 1
    for e in range(0, 6):
        for m in (1, 2, 5):
            width = m * 10 ** e
            if math.ceil((max_tokens + 1) / width) <= 12:
                return tuple(range(0, max(1, math.ceil((max_tokens + 1) / width)) * width, width))
    return tuple(DEFAULT_BIN_EDGES)


# -- Fig. 3: oracle frontiers --------------------------------------------------------------

def frontier_figure(frontier_doc: Mapping[str, Any]):
    """Macro frontiers F_C(β) of every strategy, A_full, β_match markers, ceilings and β_sat."""
    beta = 100.0 * np.asarray(frontier_doc["grid"], dtype=np.float64)
    a_full = 100.0 * frontier_doc["a_full"]
    fig = new_figure((7.5, 4.8))
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
    ax.legend(loc="lower right")
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
    fig = new_figure((max(6.5, 3.6 * len(strategies) + 0.6), 4.2))
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
        ax.legend(loc="lower right")
    axes[0].set_ylabel("macro oracle accuracy F_C(β) (%)")
    return fig


# -- Fig. 4: OTBench -------------------------------------------------------------------------

def otbench_figure(bench: Sequence[Mapping[str, Any]],
                   test_frontiers: Mapping[str, Mapping[str, Any] | None]):
    """One panel per strategy: test-split oracle frontier and each method's operating points.

    Non-dominated points are joined (the method's curve), dominated ones are
    hollow. The oracle value at each point (the frontier read per cell at the
    point's own per-cell costs, macro-averaged; the gap is measured to it) is
    a small cross joined to the point by a thin line.
    """
    strategies = [s for s in ("dr", "fb", "dee") if any(d["strategy"] == s for d in bench)]
    fig = new_figure((max(6.5, 3.9 * len(strategies) + 0.6), 4.4))
    axes = fig.subplots(1, len(strategies), sharey=True, squeeze=False)[0]
    markers = ("o", "^", "D", "v", "P", "X")
    for ax, s in zip(axes, strategies):
        f = test_frontiers.get(s)
        if f is not None:
            ax.plot(100.0 * np.asarray(f["grid"], dtype=np.float64),
                    100.0 * np.asarray(f["strategies"][s]["macro"], dtype=np.float64),
                    color=STRATEGY_COLORS[s], lw=1.6, drawstyle="steps-post",
                    label=f"{s.upper()} oracle frontier (test split)")
        for i, d in enumerate(d for d in bench if d["strategy"] == s):
            pts = sorted(d["points"], key=lambda p: (p["rel_cost"], p["acc"]))
            x = np.asarray([100.0 * p["rel_cost"] for p in pts])
            y = np.asarray([100.0 * p["acc"] for p in pts])
            yf = np.asarray([100.0 * p["frontier_acc"] for p in pts])
            nd = np.asarray([bool(p["nondominated"]) for p in pts])
            color = f"C{(i + 3) % 10}"
            mk = markers[i % len(markers)]
            summ = d.get("summary", {})
            share = summ.get("realized_share")
            lab = (f"{d['method']}: gap area {100 * summ.get('gap_area', float('nan')):.2f} pp, "
                   f"realized {_pct(share)}")
            ax.vlines(x, y, yf, color=color, lw=0.6, alpha=0.6)
            ax.plot(x[nd], y[nd], marker=mk, ls="-", color=color, ms=5, label=lab)
            if (~nd).any():
                ax.plot(x[~nd], y[~nd], marker=mk, ls="none", mfc="none", color=color, ms=5)
            ax.plot(x, yf, "x", color=color, ms=4)
        ax.plot([], [], "x", color="gray", label="oracle at the point's per-cell costs")
        ax.plot([], [], "o", mfc="none", color="gray", ls="none", label="dominated point")
        ax.set_xlim(0, 100)
        ax.set_title(STRATEGY_NAMES[s])
        ax.set_xlabel("relative cost (% of full-thinking tokens)")
        ax.legend(loc="lower right")
    axes[0].set_ylabel("macro probe accuracy (%)")
    return fig


# -- Fig. 6: thinning ---------------------------------------------------------------------------

def thinning_figure(thin: Mapping[str, Any], metrics_doc: Mapping[str, Any]):
    """Probe-count (exact expectations) and trajectory-count (percentile ranges) sensitivity."""
    probes = thin.get("probes") or {}
    trajs = thin.get("trajectories") or {}
    rows = (["probes"] if probes else []) + (["trajectories"] if trajs else [])
    fig = new_figure((11.0, 3.4 * len(rows) + 0.5))
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
                a.set_xlabel("answer probes per position m (count)")
                a.set_ylabel(lab)
                a.legend(loc="best")
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
                a.errorbar(rr, mid, yerr=[mid - lo, hi - mid], fmt="o", color="#ff7f0e",
                           capsize=4, label="mean over draws, 2.5–97.5% range")
                if macro.get(key) is not None:
                    a.axhline(100.0 * macro[key], color="black", ls="--", lw=0.8,
                              label="full trajectory pool")
                a.set_xscale("log", base=2)
                a.set_xticks(rr, [str(v) for v in rr])
                a.minorticks_off()
                a.set_xlabel("trajectories per question r (count)")
                a.set_ylabel(lab)
                a.legend(loc="best")
            ax[0].set_title("trajectory thinning: OR")
            ax[1].set_title("trajectory thinning: AD")
            w = np.asarray([100.0 * (trajs[k]["or"][1] - trajs[k]["or"][0]) for k in rs])
            ax[2].plot(rr, w, "o-", color="#ff7f0e", label="OR range width")
            w2 = np.asarray([100.0 * (trajs[k]["ad"][1] - trajs[k]["ad"][0]) for k in rs])
            ax[2].plot(rr, w2, "s--", color="#7f7f7f", label="AD range width")
            ax[2].set_xscale("log", base=2)
            ax[2].set_xticks(rr, [str(v) for v in rr])
            ax[2].minorticks_off()
            ax[2].set_xlabel("trajectories per question r (count)")
            ax[2].set_ylabel("2.5–97.5% range width (pp)")
            ax[2].set_title("trajectory thinning: range width")
            ax[2].legend(loc="best")
    return fig
