"""Display tables of a matched-horizon analysis document (``otbench.horizon/1``), paper layouts (docs/rules.md).

Each builder returns `(title, header, rows)` with display strings: rates in
percent, contrasts in percentage points, intervals as ``[lo, hi]``, "—" for
an undefined value. `format_text` renders one as aligned plain text (the
CLI); the report turns the same rows into its HTML/CSV/LaTeX tables.

* `calibration_table`: the fixed-stop calibration layout (arm, `B`, `n`,
  survival, survivor-only, terminal-aware and natural full-trace accuracy);
* `contrast_table`: the paired-contrast layout (`B`, items, both arms'
  accuracies, `Δ` with its pointwise interval, the simultaneous band and
  the log2-B trapezoid summary on the first row of each contrast);
* `sensitivity_table`: Table A11's layout: per contrast (every readout) and
  matched estimand, the pooled item-bootstrap `Δ` beside the two-way and
  crossed intervals, then each replicate alone;
* `diagonal_table`: the matching-number statistic (Table A7b);
* `length_table`: median reasoning lengths and the paired `Δ log L` (Table A10a);
* `strata_table`, `scores_table`, `matched_table`, `controls_table`,
  `agreement_table`.
"""

from collections.abc import Mapping, Sequence
from typing import Any

DASH = "—"

Table = tuple[str, tuple[str, ...], list[tuple[str, ...]]]


def pct(s: Mapping | None, digits: int = 1, *, sign: bool = False) -> str:
    """`estimate [lo, hi]` of a summary (fractions) in percent (points when `sign`)."""
    if s is None or s.get("estimate") is None:
        return DASH
    f = f"{{:{'+' if sign else ''}.{digits}f}}"
    text = f.format(_z(100 * s["estimate"], digits))
    ci = s.get("ci")
    if ci:
        text += f" [{f.format(_z(100 * ci[0], digits))}, {f.format(_z(100 * ci[1], digits))}]"
    return text


def _z(v: float, digits: int) -> float:
    """`v`, with values that round to zero shown as +0 (never "-0.0")."""
    return 0.0 if round(v, digits) == 0 else v


def num(s: Mapping | None, digits: int = 3, *, sign: bool = False) -> str:
    """`estimate [lo, hi]` in the value's own unit."""
    if s is None or s.get("estimate") is None:
        return DASH
    f = f"{{:{'+' if sign else ''}.{digits}f}}"
    text = f.format(_z(s["estimate"], digits))
    if s.get("ci"):
        text += f" [{f.format(_z(s['ci'][0], digits))}, {f.format(_z(s['ci'][1], digits))}]"
    return text


def band(b: Sequence[float] | None) -> str:
    """A band `[lo, hi]` (fractions) in signed points, or "—"."""
    return DASH if b is None else f"[{_z(100 * b[0], 1):+.1f}, {_z(100 * b[1], 1):+.1f}]"


def calibration_table(doc: Mapping[str, Any]) -> Table:
    """Fixed-stop calibration (Table A3): per group, arm and `B`, survival and the accuracies."""
    header = ("group", "arm", "B", "n", "survivors", "survival (%)", "survivor-only acc. (%)",
              "terminal-aware acc. (%)", "correct completion (%)", "natural full-trace acc. (%)")
    rows = []
    for g in doc["groups"]:
        for r in g["calibration"]:
            rows.append((g["group"], r["arm"], f"{r['B']:,}", str(r["items"]), str(r["survivors"]),
                         pct(r["survival"]), pct(r.get("survivor_only")), pct(r.get("terminal_aware")),
                         pct(r["completion"]), pct(r["natural"])))
    return ("Fixed-stop calibration: survival, survivor-only and terminal-aware accuracy", header, rows)


def contrast_table(doc: Mapping[str, Any], readout: str = "policy") -> Table:
    """Paired contrasts of one readout (Tables A6, A11): `Δ` with its intervals, bands and sensitivities."""
    header = ("group", "contrast", "B", "items", "pairs", "A acc. (%)", "B acc. (%)", "Δ (pp) [95% CI]",
              "simultaneous 95% band", "family band", "two-way CI", "crossed Δ [95% CI]",
              "AUC over log2 B (pp)")
    rows = []
    for g in doc["groups"]:
        for c in g["contrasts"]:
            if c["readout"] != readout:
                continue
            for j, h in enumerate(c["horizons"]):
                rows.append((g["group"], f"{c['a']} − {c['b']}", f"{h['B']:,}", str(h["items"]),
                             str(h["pairs"]), pct(h["acc_a"]), pct(h["acc_b"]), pct(h["delta"], sign=True),
                             band(h["band"]), band(h.get("family_band")),
                             band(h.get("two_way_ci")), _crossed(h.get("crossed")),
                             pct(c["auc"], sign=True) if j == 0 else ""))
    return (f"Paired contrasts at matched horizons ({readout} readout)", header, rows)


def _crossed(c: Mapping[str, Any] | None) -> str:
    """Crossed-intercept estimate [t interval] in points, with the complete items used."""
    if c is None:
        return DASH
    return pct({"estimate": c["estimate"], "ci": c["ci"]}, sign=True) + f" (n={c['items']})"


def strata_table(doc: Mapping[str, Any], readout: str = "policy") -> Table:
    """Termination strata of one readout (Tables A8b, A16, A18): share, within-stratum `Δ`, contribution."""
    header = ("group", "contrast", "B", "stratum", "items", "pairs", "share of pairs (%)",
              "share, item means (%)", "within-stratum Δ (pp)", "contribution (pp)",
              "contribution / share (pp)", "total (pp)")
    rows = []
    for g in doc["groups"]:
        for s in g["strata"]:
            if s["readout"] != readout:
                continue
            rows.append((g["group"], f"{s['a']} − {s['b']}", f"{s['B']:,}", s["stratum"].replace("_", " "),
                         str(s.get("items", "")), str(s["pairs"]), pct(s["share"]),
                         pct(s.get("share_item_mean")), pct(s["within"], sign=True), pct(s["contribution"], sign=True),
                         pct(s.get("contribution_per_share"), sign=True),
                         DASH if s["total"] is None else f"{_z(100 * s['total'], 1):+.1f}"))
    return (f"Termination-stratum decomposition ({readout} readout)", header, rows)


def sensitivity_table(doc: Mapping[str, Any]) -> Table:
    """Table A11: pooled item-bootstrap `Δ`, two-way and crossed intervals, each replicate alone."""
    header = ("group", "comparison", "readout", "B", "replicate", "items", "item-bootstrap Δ (pp)",
              "two-way Δ (pp)", "crossed Δ (pp)")
    rows = []
    for g in doc["groups"]:
        for c in g["contrasts"]:
            for h in c["horizons"]:
                two = {"estimate": h["delta"]["estimate"], "ci": h.get("two_way_ci")} if "two_way_ci" in h else None
                rows += _sensitivity_rows(g["group"], f"{c['a']} − {c['b']}", c["readout"], f"{h['B']:,}",
                                          h["items"], h["delta"], two, h.get("crossed"), h.get("replicates", []))
        for m in g["matched"]:
            for key, rd in (("delta", "matched"), ("delta_continuation", "matched continuation")):
                sens = (m.get("sensitivity") or {}).get(key)
                if sens is None:
                    continue
                rows += _sensitivity_rows(g["group"], f"{m['lower']} − {m['upper']}", rd, "L_lower", m["items"],
                                          m[key], sens.get("two_way"), sens.get("crossed"), sens["replicates"])
    return ("Replicate-specific, two-way and crossed-intercept sensitivities", header, rows)


def _sensitivity_rows(group, name, readout, B, items, pooled, two, crossed, replicates) -> list[tuple[str, ...]]:
    """The pooled row of one estimand, then one row per replicate (item bootstrap only)."""
    out = [(group, name, readout, B, f"pooled ({len(replicates) or 1})", str(items), pct(pooled, sign=True),
            pct(two, sign=True), _crossed(crossed))]
    out += [(group, name, readout, B, f"replicate {r['replicate']}", str(r["items"]), pct(r["delta"], sign=True),
             DASH, DASH) for r in replicates]
    return out


def diagonal_table(doc: Mapping[str, Any]) -> Table:
    """Table A7b: the matching-number statistic, with its two signed differences."""
    header = ("group", "readout", "arms (announced H)", "X − Y at B = H_X (pp)", "Y − X at B = H_Y (pp)",
              "match advantage (pp) [95% CI]")
    rows = []
    for g in doc["groups"]:
        for d in g.get("diagonal", []):
            (x, y), (hx, hy) = d["arms"], d["announced"]
            rows.append((g["group"], d["readout"], f"{x} (H={hx:,}), {y} (H={hy:,})",
                         pct(d["at_h1"], sign=True), pct(d["at_h2"], sign=True),
                         pct(d["match_advantage"], sign=True)))
    return ("Matching the announced and imposed horizons (diagonal statistic)", header, rows)


def length_table(doc: Mapping[str, Any]) -> Table:
    """Table A10a: median reasoning length per arm and the paired mean `Δ log L` of each contrast."""
    header = ("group", "contrast", "items", "pairs", "median L, A (tokens)", "median L, B (tokens)",
              "mean Δ log L [95% CI]")
    rows = []
    for g in doc["groups"]:
        for r in g.get("lengths", []):
            rows.append((g["group"], f"{r['a']} − {r['b']}", str(r["items"]), str(r["pairs"]),
                         f"{r['median_a']:,.1f}", f"{r['median_b']:,.1f}", num(r["delta_log_L"], sign=True)))
    return ("Reasoning length: medians and the paired log-length difference", header, rows)


def scores_table(doc: Mapping[str, Any]) -> Table:
    """Proper scores of the candidate-logit readout per arm, context and `B` (Tables A13, A15)."""
    header = ("group", "arm", "context", "B", "readouts", "log loss (nats)", "Brier", "valid mass (%)",
              "q_true < tail (%)", "argmax acc. (%)")
    rows = []
    for g in doc["groups"]:
        for s in g["scores"]:
            rows.append((g["group"], s["arm"], s["context"], f"{s['B']:,}", str(s["readouts"]),
                         num(s["log_loss"]), num(s["brier"]), pct(s["mass"]), pct(s["tail_share"]),
                         pct(s["accuracy"])))
    return ("Proper scores of the candidate-logit readout", header, rows)


def matched_table(doc: Mapping[str, Any]) -> Table:
    """Matched horizon chosen by the lower arm (Tables A14, A20): `Δ`, bounds, diagnostics."""
    header = ("group", "lower − upper", "pairs", "replayable", "missing", "lower acc. (%)",
              "upper acc. (%)", "Δ (pp)", "worst-case bounds (pp)", "bounds, item means (pp)",
              "upper-active Δ (pp)",
              "continuation Δ (pp)", "log-loss diff.", "Brier diff.")
    rows = []
    for g in doc["groups"]:
        for m in g["matched"]:
            lo, hi = m["bound_low"]["estimate"], m["bound_high"]["estimate"]
            ilo = (m.get("bound_low_item_mean") or {}).get("estimate")
            ihi = (m.get("bound_high_item_mean") or {}).get("estimate")
            rows.append((g["group"], f"{m['lower']} − {m['upper']}", str(m["pairs"]), str(m["replayable"]),
                         str(m["missing"]), pct(m["acc_lower"]), pct(m["acc_upper"]),
                         pct(m["delta"], sign=True),
                         band(None if lo is None else [lo, hi]),
                         band(None if ilo is None else [ilo, ihi]),
                         pct(m["delta_high_active"], sign=True), pct(m.get("delta_continuation"), sign=True),
                         num(m["log_loss_diff"], sign=True), num(m["brier_diff"], sign=True)))
    return ("Matched horizon chosen by the lower arm (its terminal length)", header, rows)


def controls_table(doc: Mapping[str, Any]) -> Table:
    """Length-matched prefix controls (Figure 2d): original minus control accuracy, sign-flip p."""
    header = ("group", "arm", "control", "items", "readouts", "original acc. (%)", "control acc. (%)",
              "original − control (pp)", "sign-flip p")
    rows = []
    for g in doc["groups"]:
        for c in g["controls"]:
            if "error" in c:
                rows.append((g["group"], DASH, c["error"], "", "", "", "", "", ""))
                continue
            rows.append((g["group"], c["arm"], c["control"], str(c["items"]), str(c["readouts"]),
                         pct(c["acc_original"]), pct(c["acc_control"]), pct(c["delta"], sign=True),
                         DASH if c["sign_flip_p"] is None else f"{c['sign_flip_p']:.4f}"))
    return ("Length-matched prefix controls (budgets pooled within item)", header, rows)


def agreement_table(doc: Mapping[str, Any]) -> Table:
    """Terminal replay agreement (Table A4): candidate-logit answer vs the parsed natural answer."""
    header = ("group", "arm", "finished", "compared", "agree", "agreement (%)")
    rows = []
    for g in doc["groups"]:
        for a in g["agreement"]:
            rows.append((g["group"], a["arm"], str(a["finished"]), str(a["compared"]), str(a["agree"]),
                         DASH if a["agreement"] is None else f"{100 * a['agreement']:.1f}"))
    return ("Terminal replay: candidate-logit answer vs the parsed natural answer", header, rows)


def format_text(table: Table) -> str:
    """Aligned plain text of a table (title line, header, rows)."""
    title, header, rows = table
    if not rows:
        return f"{title}: no rows\n"
    w = [max(len(str(r[j])) for r in [header, *rows]) for j in range(len(header))]
    line = lambda r: "  ".join(str(c).rjust(w[j]) if j > 1 else str(c).ljust(w[j])
                               for j, c in enumerate(r)).rstrip()
    return "\n".join([title, line(header), *[line(r) for r in rows]]) + "\n"
