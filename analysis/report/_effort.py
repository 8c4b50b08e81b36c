"""The effort-levels section: ``results/effort.json`` (`otbench effort`) beside the set, when present.

A document of another set (its `content_hash` differs) or not an
``otbench.effort/1`` map is skipped with a note; none present, no section.
"""

from pathlib import Path

from . import _tables as tabs
from ._html import Section
from ._inputs import binding_misfit, result_beside

RESULT_FILE = "effort.json"
SCHEMA = "otbench.effort/1"
LIMIT = 64 << 20
"""Bytes read of the document at most (a map of thousands of cells is a few MB)."""


def read_effort(set_dir: Path | None, set_hash: str) -> tuple[dict | None, str | None]:
    """(document, note): the effort map beside the set, or why there is none to show."""
    doc, note = result_beside(set_dir, RESULT_FILE, LIMIT)
    if doc is None:
        return None, note
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA or not isinstance(doc.get("cells"), list):
        return None, f"{RESULT_FILE}: not an {SCHEMA} document; skipped."
    why = binding_misfit(doc, set_hash)
    if why is not None:
        return None, f"{RESULT_FILE}: {why}; skipped (run `otbench effort DIR` again)."
    return doc, None


def _cap(v) -> str:
    return "none" if v is None else f"{v:,.0f}"


def effort_sections(ctx, set_dir: Path | None, set_hash: str) -> list[Section]:
    """One section with one table (a row per cell and level) when the map is present."""
    doc, note = read_effort(set_dir, set_hash)
    if doc is None and note is None:
        return []
    sec = Section("effort", "Effort levels",
                  "Per model and group, the smallest thinking-token cap whose paired two-stage "
                  "bootstrap interval of accuracy(cap) − accuracy(full thinking) has its lower end "
                  "at or above −δ (docs/rules.md, effort levels).")
    if doc is None:
        ctx.missing(sec, note)
        return [sec]
    pcts = doc.get("percentiles") or [2.5, 97.5]
    rows = []
    for c in doc["cells"]:
        for x in c["levels"]:
            ab = x.get("at_budget") or {}
            iv = x.get("budget_interval") or [None, None]
            rows.append([
                (f"{c['model']} / {c['group']}", (c["model"], c["group"])),
                (x["level"], x["level"]), (f"{x['delta']:g}", f"{x['delta']:g}"),
                (_cap(x["budget"]), "" if x["budget"] is None else str(x["budget"])),
                (_cap(x.get("point_budget")),
                 "" if x.get("point_budget") is None else str(x["point_budget"])),
                (f"[{_cap(iv[0])}, {_cap(iv[1])}]" + (" *" if x.get("budget_flag") else ""),
                 tuple("" if v is None else f"{v:g}" for v in iv)),
                (tabs.fmt(ab.get("accuracy"), 100.0), tabs.csv_num(ab.get("accuracy"), 100.0)),
                (tabs.fmt(c["full_accuracy"], 100.0), tabs.csv_num(c["full_accuracy"], 100.0)),
                (tabs.fmt(ab.get("relative_cost"), 100.0), tabs.csv_num(ab.get("relative_cost"), 100.0)),
            ])
    sec.table(ctx.table(tabs.simple_table(
        "effort", title="Effort levels: thinking-token budgets",
        caption=f"Budget: the cap certified by its interval, in tokens (none: no cap below full "
                f"thinking is within δ); point: the same rule on the data alone, and its interval, "
                f"the {pcts[0]:g}–{pcts[1]:g} percentiles of the per-replicate smallest cap within δ "
                f"(* the point lies outside it); accuracy and relative cost at the budget; "
                f"{doc.get('replicates', 0):,} replicates, seed {doc.get('seed')}.",
        header=["model / group", "level", "δ (pp)", "budget (tokens)", "point (tokens)",
                "point interval", "accuracy (%)", "full (%)", "cost (%)"],
        csv_header=["model", "group (benchmark)", "level (name)", "delta (pp)", "budget (tokens)",
                    "point (tokens)", "point lo (tokens)", "point hi (tokens)", "accuracy (%)", "full (%)",
                    "cost (%)"], rows=rows, key_columns=2)))
    return [sec]
