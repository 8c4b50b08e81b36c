"""Re-segment stored thinking ids at other target step lengths (docs/rules.md, paper App. D.1).

Reads a probe measurement set's `tokens` table and the boundary ids its
manifest recorded, so no tokenizer, model or regeneration is needed. With
the run's own `b` it must reproduce the stored positions exactly (reported
as a check).
"""

import os
from collections.abc import Sequence
from typing import Any

import numpy as np
from otbench.analysis.measurement import segment_flat, stored_thinking
from otbench.probe.tokens import count_events


def resegment(path: str | os.PathLike, bs: Sequence[int]) -> dict[str, Any]:
    """Step-length distributions (tokens per realized step) of every stored trajectory for each `b`.

    Uses the set's recorded boundary rule. Returns a JSON-ready dict: counts,
    `audit` (boundary events and LF-LF pairs spanning tokens, `count_events`),
    `check` (None when the set records no `b`), and per `b` the number of steps and the mean / p10 / p50 / p90 /
    min / max step length (percentiles by the "lower" rule, so they are
    observed lengths). Empty trajectories contribute no steps.
    """
    from otbench.analysis.measurement import (
        MeasurementSetError,
        load_table,
        read_manifest,
    )

    manifest = read_manifest(path)
    prov = manifest.get("provenance", {})
    if "boundary_ids" not in prov:
        raise MeasurementSetError(f"{path}/manifest.json",
                                  "no 'boundary_ids' in the provenance (not written by otbench probe)")
    table = load_table(path, "tokens")
    for col in ("thinking", "L"):
        if col not in table.column_names:
            raise MeasurementSetError(f"{path}/tokens", f"missing column {col!r}")
    st = stored_thinking(table, prov)
    ids, off, boundary, mask, rule, span = st.ids, st.off, st.boundary, st.mask, st.rule, st.span
    if rule == "vocab+span" and not ("newline_end_ids" in prov and "newline_start_ids" in prov):
        raise MeasurementSetError(f"{path}/manifest.json", "boundary rule 'vocab+span' needs "
                                  "'newline_end_ids' and 'newline_start_ids' in the provenance")
    audit = (count_events(ids, off, mask, st.ends_nl, st.starts_nl)
             if prov.get("newline_end_ids") else None)
    stored_b = (prov.get("probe") or {}).get("b")
    check = None
    if stored_b is not None:
        flat, o = segment_flat(ids, off, mask, int(stored_b), span=span)
        stored = table.column("L").to_pylist()
        matches = sum(flat[o[t]:o[t + 1]].tolist() == stored[t] for t in range(len(stored)))
        check = {"trajectories": len(stored), "matches": int(matches)}
    rows = []
    for b in bs:
        flat, o = segment_flat(ids, off, mask, int(b), span=span)
        steps = np.concatenate([np.diff(flat[o[t]:o[t + 1]]) for t in range(len(o) - 1)]) \
            if len(o) > 1 else np.zeros(0, dtype=np.int64)
        if steps.size:
            q = np.percentile(steps, [10, 50, 90], method="lower")
            rows.append({"b": int(b), "steps": int(steps.size), "mean": float(steps.mean()),
                         "p10": int(q[0]), "p50": int(q[1]), "p90": int(q[2]),
                         "min": int(steps.min()), "max": int(steps.max())})
        else:
            rows.append({"b": int(b), "steps": 0, "mean": 0.0, "p10": 0, "p50": 0, "p90": 0,
                         "min": 0, "max": 0})
    return {"trajectories": int(table.num_rows), "tokens": int(ids.size),
            "boundary_ids": int(boundary.size), "boundary_rule": rule, "audit": audit,
            "stored_b": stored_b, "check": check,
            "distributions": rows}
