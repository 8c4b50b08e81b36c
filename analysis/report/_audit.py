"""The log audit's outputs (`otbench audit-log`): one figure, the two tables as CSV, the document.

Input: an ``otbench.audit-log/1`` document (`otbench.analysis.horizon.audit_replies`).
The figure shows, per task and model, the censored share of the replies
(left) and the reported score with its interval beside the worst/best-case
range that censoring leaves open (right). The tables are the audit's
censoring and bounds layouts (`otbench.analysis.horizon`), written with the
one CSV encoder.
"""

import json
from pathlib import Path
from typing import Any

import numpy as np
from otbench.analysis import horizon as htabs

from otbench.files import atomic_dir, csv_text, write_text_atomic

from . import _style

FIGURE = "audit_censoring"


def _v(s: dict | None) -> tuple[float, float, float]:
    if not s or s.get("estimate") is None:
        return (np.nan, np.nan, np.nan)
    ci = s.get("ci") or (np.nan, np.nan)
    return (100 * s["estimate"], 100 * ci[0], 100 * ci[1])


def audit_figure(doc: dict[str, Any]):
    """Censored share and the reported score's bounds per task and model (one row each)."""
    rows = doc["groups"]
    labels = [f"{r['task']}\n{r['model']}" for r in rows]
    fig = _style.new_figure((_style.TEXT_IN, 0.55 * len(rows) + 1.4))
    ax_c, ax_s = fig.subplots(1, 2, sharey=True)
    yy = np.arange(len(rows))[::-1].astype(np.float64)
    for y, r in zip(yy, rows):
        c = _v(r["cut"])
        u = _v(r["unclosed"])[0]
        ax_c.barh(y, c[0], color="#d62728", alpha=0.8, height=0.6)
        ax_c.barh(y, u, color="#7f7f7f", alpha=0.9, height=0.3)
        if np.isfinite(c[1]):
            ax_c.plot([c[1], c[2]], [y, y], color="black", lw=1)
        lo, hi = _v(r["worst_case"])[0], _v(r["best_case"])[0]
        ax_s.plot([lo, hi], [y, y], color="#ff7f0e", lw=6, alpha=0.45, solid_capstyle="butt")
        rep = _v(r["reported"])
        ax_s.errorbar(rep[0], y, xerr=[[rep[0] - rep[1]], [rep[2] - rep[0]]] if np.isfinite(rep[1]) else None,
                      fmt="o", color="#1f77b4", capsize=3, ms=5)
    ax_c.set_yticks(yy, labels)
    ax_c.set_xlim(0, 100)
    ax_c.set_xlabel("replies censored (%)")
    ax_c.set_title("censored (red), never closed (grey)", fontsize="medium")
    ax_s.set_xlim(-2, 102)
    ax_s.set_xlabel("accuracy (%)")
    ax_s.set_title("reported, 95% CI (blue); worst–best (orange)", fontsize="medium")
    return fig


def write_audit(doc: dict[str, Any], out_dir: str | Path) -> list[Path]:
    """`audit.json`, `censoring.csv`, `bounds.csv` and the figure under `out_dir`; the paths written.

    The folder is written as one output under the one folder rule (`otbench.files.atomic_dir`):
    built in a temporary sibling and moved into place, a non-empty folder otbench did not write
    refused unless `overwrite` (then written into, its files kept), an earlier audit's files
    replaced only where otbench's record proves they are its own."""
    out = Path(out_dir)
    with atomic_dir(out) as tmp:
        write_text_atomic(tmp / "audit.json", json.dumps(doc, indent=2) + "\n")
        for name, table in (("censoring", htabs.censoring_table(doc)), ("bounds", htabs.bounds_table(doc))):
            title, header, rows = table
            write_text_atomic(tmp / f"{name}.csv", csv_text(header, rows, comment=title))
        with _style.figure_style():
            fig = audit_figure(doc)
            info = _style.save(fig, tmp, FIGURE, title=f"Censoring in {Path(doc['log']).name}",
                               caption="Per task and model: the share of replies that never closed their "
                                       "thinking or hit the length limit, and the reported score beside "
                                       "the worst/best-case range censoring leaves open.",
                               trajectories=sum(r["replies"] for r in doc["groups"]), synthetic=False)
    return [out / "audit.json", out / "censoring.csv", out / "bounds.csv", out / "figures" / f"{info.name}.png"]
