"""The report's matched-horizon section (docs/rules.md): figures and tables of an ``otbench.horizon/1`` document.

Input: ``DIR/results/horizon.json`` beside the measurement set, written by
``otbench horizon analyze RUN --arms A,B --json DIR/results/horizon.json``.
The horizon run is its own directory (its own trajectories), so the
document is shown as given, labelled with the run's model and arms; a file
that is not an ``otbench.horizon/1`` document gives a note, never a figure.

Figures: `accuracy_figure` (terminal-aware accuracy and survival vs `B`
per arm, with item-bootstrap intervals), `contrast_figure` (`Δ(B)` with
pointwise intervals and the simultaneous band), `strata_figure` (signed
stratum contributions stacked per `B`). Tables: the calibration, contrast
and stratum layouts of `_horizon_tables` (CSV: one number per cell).
"""

from pathlib import Path
from typing import Any

import numpy as np
from otbench.analysis import horizon as htabs

from . import _figures as figs
from . import _tables as tabs
from ._html import Section
from ._inputs import result_beside

RESULT_FILE = "horizon.json"
SCHEMA = "otbench.horizon/1"
ARM_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")
STRATUM_COLORS = {"both_active": "#1f77b4", "only_a_finished": "#2ca02c",
                  "only_b_finished": "#d62728", "both_finished": "#7f7f7f"}


def _v(s: dict | None, scale: float = 100.0) -> tuple[float, float, float]:
    if not s or s.get("estimate") is None:
        return (np.nan, np.nan, np.nan)
    ci = s.get("ci") or (np.nan, np.nan)
    return (scale * s["estimate"], scale * ci[0], scale * ci[1])


def _xpos(hs: list[int]) -> np.ndarray:
    # Horizons are spread over orders of magnitude and include 0: equal spacing, labelled.
    return np.arange(len(hs), dtype=np.float64)


def accuracy_figure(doc: dict[str, Any]):
    """Terminal-aware accuracy (with survivor-only, dashed) and survival vs horizon, per group and arm."""
    groups = doc["groups"]
    fig = figs.new_figure((figs.TEXT_IN, 3.0 * len(groups) + 0.4))
    axes = fig.subplots(len(groups), 2, squeeze=False)
    for gi, g in enumerate(groups):
        arms = sorted({r["arm"] for r in g["calibration"]}, key=doc["run"]["arms"].index)
        for k, arm in enumerate(arms):
            rows = [r for r in g["calibration"] if r["arm"] == arm]
            hs = [r["B"] for r in rows]
            x = _xpos(hs)
            col = ARM_COLORS[k % len(ARM_COLORS)]
            acc = np.array([_v(r.get("terminal_aware")) for r in rows])
            ax = axes[gi, 0]
            ax.plot(x, acc[:, 0], "o-", color=col, label=f"{arm}: terminal-aware")
            ax.fill_between(x, acc[:, 1], acc[:, 2], color=col, alpha=0.15, lw=0)
            surv_only = np.array([_v(r.get("survivor_only")) for r in rows])
            ax.plot(x, surv_only[:, 0], "s--", color=col, alpha=0.7, ms=3.5, label=f"{arm}: survivor-only")
            nat = _v(rows[0]["natural"])[0]
            ax.axhline(nat, color=col, ls=":", lw=0.9)
            sv = np.array([_v(r["survival"]) for r in rows])
            axes[gi, 1].plot(x, sv[:, 0], "o-", color=col, label=arm)
            axes[gi, 1].fill_between(x, sv[:, 1], sv[:, 2], color=col, alpha=0.15, lw=0)
            for a in axes[gi]:
                a.set_xticks(x, [f"{b:,}" for b in hs])
        axes[gi, 0].set_title(f"{g['group']}: accuracy at horizon B")
        axes[gi, 0].set_ylabel("accuracy (%)")
        axes[gi, 1].set_title(f"{g['group']}: survival P(L > B)")
        axes[gi, 1].set_ylabel("still reasoning (%)")
        for a in axes[gi]:
            a.set_xlabel("horizon B (tokens)")
            a.set_ylim(-2, 102)
            a.legend(loc="center left", bbox_to_anchor=(1.02, 0.5))
    return fig


def contrast_figure(doc: dict[str, Any], readout: str = "policy"):
    """Δ(B) per contrast: pointwise 95% intervals (bars) and the simultaneous band (shaded)."""
    groups = [g for g in doc["groups"] if any(c["readout"] == readout for c in g["contrasts"])]
    fig = figs.new_figure((figs.TEXT_IN, 3.0 * len(groups) + 0.4))
    axes = fig.subplots(len(groups), 1, squeeze=False)[:, 0]
    for ax, g in zip(axes, groups):
        cs = [c for c in g["contrasts"] if c["readout"] == readout]
        for k, c in enumerate(cs):
            hs = [h["B"] for h in c["horizons"]]
            x = _xpos(hs) + 0.08 * (k - (len(cs) - 1) / 2)
            d = np.array([_v(h["delta"]) for h in c["horizons"]])
            band = np.array([[np.nan, np.nan] if h["band"] is None else [100 * h["band"][0], 100 * h["band"][1]]
                             for h in c["horizons"]])
            col = ARM_COLORS[k % len(ARM_COLORS)]
            ax.fill_between(x, band[:, 0], band[:, 1], color=col, alpha=0.12, lw=0,
                            label=f"{c['a']} − {c['b']}: simultaneous 95% band")
            ax.errorbar(x, d[:, 0], yerr=[d[:, 0] - d[:, 1], d[:, 2] - d[:, 0]], fmt="o-", color=col,
                        capsize=3, label=f"{c['a']} − {c['b']}: Δ, pointwise 95% CI")
            ax.set_xticks(_xpos(hs), [f"{b:,}" for b in hs])
        ax.axhline(0.0, color="black", lw=0.8)
        ax.set_title(f"{g['group']}: paired contrast ({readout} readout)")
        ax.set_xlabel("horizon B (tokens)")
        ax.set_ylabel("accuracy difference (pp)")
        ax.legend(loc="center left", bbox_to_anchor=(1.02, 0.5))
    return fig


def strata_figure(doc: dict[str, Any], readout: str = "policy"):
    """Signed contributions of the four termination strata, stacked per horizon (they sum to Δ)."""
    panels = []
    for g in doc["groups"]:
        for a, b in sorted({(s["a"], s["b"]) for s in g["strata"] if s["readout"] == readout}):
            panels.append((g, a, b))
    fig = figs.new_figure((figs.TEXT_IN, 2.9 * len(panels) + 0.4))
    axes = fig.subplots(len(panels), 1, squeeze=False)[:, 0]
    for ax, (g, a, b) in zip(axes, panels):
        rows = [s for s in g["strata"] if s["readout"] == readout and (s["a"], s["b"]) == (a, b)]
        hs = sorted({s["B"] for s in rows})
        x = _xpos(hs)
        pos, neg = np.zeros(len(hs)), np.zeros(len(hs))
        for name, col in STRATUM_COLORS.items():
            v = np.array([next((100 * s["contribution"]["estimate"] for s in rows if s["B"] == B
                                and s["stratum"] == name and s["contribution"]["estimate"] is not None), 0.0)
                          for B in hs])
            base = np.where(v >= 0, pos, neg)
            ax.bar(x, v, 0.6, bottom=base, color=col, label=name.replace("_", " ").replace(" a ", f" {a} ")
                   .replace(" b ", f" {b} "))
            pos, neg = pos + np.maximum(v, 0), neg + np.minimum(v, 0)
        tot = [next((100 * s["total"] for s in rows if s["B"] == B and s["total"] is not None), np.nan) for B in hs]
        ax.plot(x, tot, "kD", ms=5, label="total Δ")
        ax.axhline(0.0, color="black", lw=0.8)
        ax.set_xticks(x, [f"{B:,}" for B in hs])
        ax.set_title(f"{g['group']}: {a} − {b}, contributions by termination stratum")
        ax.set_xlabel("horizon B (tokens)")
        ax.set_ylabel("contribution (pp)")
        ax.legend(loc="center left", bbox_to_anchor=(1.02, 0.5), fontsize=6.5)
    return fig


# Horizon-table columns without a unit in their display heading.
_CSV_UNITS = {"B": "B (tokens)", "n": "n (runs)", "survivors": "survivors (runs)",
              "items": "items (count)", "pairs": "pairs (count)", "readouts": "readouts (count)",
              "replayable": "replayable (count)", "missing": "missing (count)",
              "finished": "finished (count)", "compared": "compared (count)",
              "agree": "agree (count)", "Brier": "Brier (score)",
              "log-loss diff.": "log-loss diff. (nats)", "Brier diff.": "Brier diff. (score)",
              "sign-flip p": "sign-flip p (probability)",
              "simultaneous 95% band": "simultaneous 95% band (pp)",
              "family band": "family band (pp)", "two-way CI": "two-way CI (pp)",
              "mean Δ log L": "mean Δ log L (log tokens)"}
_LABELS = ("group", "arm", "contrast", "stratum", "context", "control", "lower − upper", "comparison",
           "readout", "replicate", "arms (announced H)")


def _csv_unit(h: str) -> str:
    """A CSV heading with its unit: "Δ (pp) [95% CI]" -> "Δ (pp)", "B" -> "B (tokens)"."""
    h = h.replace(" [95% CI]", "")
    return h if h in _LABELS or "(" in h else _CSV_UNITS.get(h, h)


def _table(name: str, t: htabs.Table, caption: str) -> tabs.Table:
    title, header, rows = t
    cells = tuple(tuple(tabs.Cell(c) for c in r) for r in rows)
    # CSV: each "estimate [lo, hi]" cell becomes three numeric columns; every
    # numeric column names its unit.
    csv_header: list[str] = []
    split = []
    for j, h in enumerate(header):
        h = _csv_unit(h)
        if any("[" in r[j] for r in rows):
            base, unit = h.rsplit(" (", 1) if " (" in h else (h, "")
            unit = f" ({unit.rstrip(')')})" if unit else ""
            csv_header += [h, f"{base} lo{unit}", f"{base} hi{unit}"]
            split.append(True)
        else:
            csv_header.append(h)
            split.append(False)
    csv_rows = []
    for r in rows:
        out = []
        for c, sp in zip(r, split):
            if not sp:
                out.append("" if c == htabs.DASH else c.replace(",", ""))
                continue
            est, _, ci = c.partition(" [")
            lo, _, hi = ci.partition("]")[0].partition(", ")     # "(n=...)" after a crossed interval
            if c.startswith("["):       # a band: only lo and hi
                est, (lo, _, hi) = "", c.strip("[]").partition(", ")
            out += ["" if v in ("", htabs.DASH) else v.lstrip("+") for v in (est, lo, hi)]
        csv_rows.append(tuple(out))
    # The leading label columns (and the horizon B) identify a row: every printed part keeps them.
    keys = next((j for j, h in enumerate(header) if h not in _LABELS and h != "B"), len(header))
    return tabs.Table(name=name, title=title, caption=caption, header=header, rows=cells,
                      csv_header=tuple(csv_header), csv_rows=tuple(csv_rows),
                      key_columns=max(1, keys))


def read_document(set_dir: Path | None) -> tuple[dict | None, str | None]:
    """(document, note): the horizon document beside the set, or why there is none to show."""
    doc, note = result_beside(set_dir, RESULT_FILE)
    if doc is None:
        return None, note
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA or not doc.get("groups"):
        return None, f"{RESULT_FILE}: not an {SCHEMA} document with results; skipped."
    return doc, None


def horizon_sections(ctx, set_dir: Path | None) -> list[Section]:
    """The matched-horizon section when ``results/horizon.json`` is present; no section otherwise."""
    doc, note = read_document(set_dir)
    if doc is None and note is None:
        return []
    sec = Section("horizon", "Matched-horizon readouts",
                  "Stopped reasoning read at imposed token horizons B (docs/rules.md): survival, "
                  "terminal-aware and survivor-only accuracy, paired contrasts between arms with "
                  "item-bootstrap intervals and simultaneous bands, and the termination-stratum "
                  "decomposition. From a separate horizon run (its own trajectories).")
    if doc is None:
        ctx.missing(sec, note)
        return [sec]
    run, st = doc["run"], doc["settings"]
    if run.get("synthetic"):
        sec.note("The horizon run has scripted (synthetic) arms: a validation, not model behaviour.")
    n = sum(r["pairs"] for g in doc["groups"] for r in g["calibration"]
            if r["B"] == st["horizons"][0])
    src = (f"model {run.get('model')}, arms {', '.join(run['arms'])}"
           + (" (scripted arms: synthetic)" if run.get("synthetic") else "")
           + f"; {st['replicates']:,} {st.get('scheme', 'item')}-bootstrap draws (seed {st['seed']}), "
             f"2.5/97.5 percentiles")
    if any(g["calibration"] for g in doc["groups"]):
        sec.figure(ctx.fig(
            "horizon_accuracy", lambda: accuracy_figure(doc),
            title="Accuracy and survival at imposed horizons",
            caption=f"Terminal-aware accuracy (natural answer once finished, else the candidate-logit "
                    f"readout of the prefix cut at B; solid, 95% band), survivor-only accuracy (dashed), "
                    f"natural full-trace accuracy (dotted) and survival P(L > B); {src}; {n:,} runs.",
            trajectories=n))
        sec.table(ctx.table(_table("horizon_calibration", htabs.calibration_table(doc),
                                   f"Rates in %, 95% item-bootstrap intervals; {src}.")))
    if any(c["readout"] == "policy" for g in doc["groups"] for c in g["contrasts"]):
        sec.figure(ctx.fig(
            "horizon_contrast", lambda: contrast_figure(doc),
            title="Paired contrasts at matched horizons",
            caption=f"Terminal-aware accuracy difference A − B (pp), replicates averaged within item; "
                    f"bars: pointwise 95% intervals; shaded: simultaneous 95% band (max-abs deviation "
                    f"over horizons); {src}.", trajectories=n))
        sec.table(ctx.table(_table("horizon_contrasts", htabs.contrast_table(doc, "policy"),
                                   f"Paired contrasts (policy readout); AUC: trapezoid over log2 B "
                                   f"divided by the span; {src}.")))
    if any(s["readout"] == "policy" for g in doc["groups"] for s in g["strata"]):
        sec.figure(ctx.fig(
            "horizon_strata", lambda: strata_figure(doc),
            title="Termination-stratum contributions",
            caption=f"Each pair's stratum by which arm has finished by B; contributions (mean of "
                    f"item means of Δ·1{{stratum}} over all pairs, pp) add up to the total Δ "
                    f"(diamonds); {src}.", trajectories=n))
        sec.table(ctx.table(_table("horizon_strata", htabs.strata_table(doc, "policy"),
                                   f"Four-stratum decomposition (policy readout); within-stratum "
                                   f"Δ: the item-averaged difference inside the stratum (the "
                                   f"second paper's); contribution / share: the ratio that "
                                   f"multiplies back to the contribution; share of pairs: the "
                                   f"fraction of all paired item-replicates (Table A18's); {src}.")))
    if any(h.get("replicates") for g in doc["groups"] for c in g["contrasts"] for h in c["horizons"]) \
            or any(m.get("sensitivity") for g in doc["groups"] for m in g["matched"]):
        sec.table(ctx.table(_table("horizon_sensitivity", htabs.sensitivity_table(doc),
                                   f"Pooled item-bootstrap Δ beside the two-way item x replicate "
                                   f"bootstrap and crossed item and replicate intercepts (method of "
                                   f"moments, Satterthwaite t; n: items complete in every replicate), "
                                   f"then each replicate alone with its own item bootstrap; {src}.")))
    if any(g.get("diagonal") for g in doc["groups"]):
        sec.table(ctx.table(_table("horizon_diagonal", htabs.diagonal_table(doc),
                                   f"Matching statistic: the mean of X − Y at X's announced horizon and "
                                   f"Y − X at Y's; positive when matching the announced and imposed "
                                   f"horizons helps; {src}.")))
    if any(g.get("lengths") for g in doc["groups"]):
        sec.table(ctx.table(_table("horizon_lengths", htabs.length_table(doc),
                                   f"Median terminal reasoning length per arm (runs) and the paired "
                                   f"mean log-length difference over pairs with L > 0; {src}.")))
    return [sec]
