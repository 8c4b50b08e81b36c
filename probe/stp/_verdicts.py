"""Imported verdicts kept: an imported trajectory's `y` is its source's verdict, otbench's beside it.

An evaluation log already judged each reply (lm-eval's metric on its
`filtered_resps`, lighteval's metric, inspect-ai's scorer, a chat row's
label). With `[trajectories] verdicts = "source"` (the default when the
source gives verdicts) that verdict is the trajectory's `y`, so the set's
full-thinking accuracy is the score the source reported. otbench's own
grader judges the same answer text beside it (the job's grader, after the
table's `extract` when set: lm-eval's regex forms, `otbench.evallogs`), and
the two are compared: every disagreement is counted, the first few are
shown in one line per import, and all of them are in the provenance's
`trajectories.verdicts`. The tokens table's `y_status` reads
`source <metric>=<0|1>; otbench <0|1> <status>` for a kept verdict.

`verdicts = "otbench"` grades the imported answers by otbench's rule (the
extraction applied) and keeps the source's verdicts only in the record.
A verdict must be 0 or 1 to be kept as `y` (a partial credit is not a
correct/wrong outcome); a record without one keeps otbench's grade.
"""

from collections.abc import Sequence
from typing import Any

from otbench.probe.data import DatasetError
from otbench.probe.grading import GradeItem, resolve_grader

from otbench.evallogs import ExtractionError, extraction

VERDICT_MODES = ("source", "otbench")
EXAMPLES = 3
"""Disagreements shown in the one-line summary (all are in the record)."""


def options(table) -> tuple[str, Any]:
    """(verdict mode, extraction) of a `[trajectories]` table, checked (one line on a bad value)."""
    mode = table.get("verdicts", "source")
    if mode not in VERDICT_MODES:
        raise DatasetError(f"trajectories.verdicts must be one of {', '.join(VERDICT_MODES)}, got {mode!r}")
    try:
        ext = extraction(table.get("extract"))
    except ExtractionError as e:
        raise DatasetError(f"trajectories.extract: {e}") from None
    return mode, ext


def graded_text(answer: str | None, ext) -> str | None:
    """The text otbench's grader reads for an imported answer: the extraction's answer as a box."""
    if answer is None or ext is None:
        return answer
    got = ext.apply(answer)
    return answer if got == ext.fallback else f"\\boxed{{{got}}}"


def grade_imported(pairs: Sequence[tuple[Any, Any]], grader: str, ext) -> list[tuple[int, str]]:
    """otbench's (correct, status) of each (question, record)'s own answer text."""
    _, batch = resolve_grader(grader)
    items, where = [], []
    out: list[tuple[int, str] | None] = [None] * len(pairs)
    for i, (q, rec) in enumerate(pairs):
        text = graded_text(rec.answer, ext)
        if text is None:
            out[i] = (0, "no_answer")         # the thinking never closed: no answer to read
            continue
        items.append(GradeItem(q.task, q.reference, text, q))
        where.append(i)
    for i, (c, st) in zip(where, batch(items) if items else []):
        out[i] = (int(bool(c)), st)
    return out


def _binary(rec) -> int:
    v = rec.verdict
    if v not in (0.0, 1.0):
        raise DatasetError(f"{rec.loc}: the source's verdict {v!r} ({rec.metric}) is not 0 or 1; "
                           "set trajectories.verdicts = \"otbench\" to grade by otbench's rule")
    return int(v)


def keep(pairs: Sequence[tuple[Any, Any, int]], grader: str, mode: str, ext) -> tuple[list, dict]:
    """(per-pair (y, y_status) or None, record) for (question, record, trajectory) triples.

    None: the trajectory's `y` is the probe loop's own grade (no source verdict,
    or `verdicts = "otbench"` without an extraction).
    """
    with_v = [k for k, (_, rec, _) in enumerate(pairs) if rec.verdict is not None]
    if not with_v and ext is None:
        return [None] * len(pairs), {"source": None, "mode": mode, "extraction": None, "kept": 0}
    todo = with_v if mode == "source" and ext is None else range(len(pairs))
    grades = dict(zip(todo, grade_imported([pairs[k][:2] for k in todo], grader, ext)))
    ys: list = [None] * len(pairs)
    per, metric = [], None
    for k in todo:
        q, rec, r = pairs[k]
        ob, st = grades[k]
        if rec.verdict is not None:
            metric = metric or rec.metric
            sv = _binary(rec) if mode == "source" else rec.verdict
            per.append([q.dataset, q.id, r, sv, ob, st, rec.answer, rec.extracted])
            if mode == "source":
                ys[k] = (sv, f"source {rec.metric}={sv}; otbench {ob} {st}")
                continue
        if ext is not None:
            ys[k] = (ob, st)
    source_c = sum(p[3] == 1 for p in per)
    ours = sum(p[4] for p in per)
    s_only = [p for p in per if p[3] == 1 and p[4] == 0]
    o_only = [p for p in per if p[3] == 0 and p[4] == 1]
    rec = {"source": metric, "mode": mode, "extraction": None if ext is None else ext.name,
           "kept": sum(y is not None and str(y[1]).startswith("source") for y in ys),
           "with_verdict": len(per), "source_correct": source_c, "otbench_correct": ours,
           "disagree": len(s_only) + len(o_only), "source_only": len(s_only), "otbench_only": len(o_only),
           "examples": [_example(p) for p in (s_only + o_only)[:EXAMPLES]],
           "trajectories": [p[:6] for p in per]}
    return ys, rec


def _example(p) -> dict:
    answer = (p[6] or "").strip()
    return {"question": p[1], "trajectory": p[2], "source": p[3], "otbench": p[4], "status": p[5],
            "answer": answer[-60:], "extracted": p[7]}


def summary_line(rec: dict, cut: int = 0, answer_limit: int | None = None) -> str:
    """The one-line account of an import's verdicts (`rec`: the provenance's `trajectories.verdicts`)."""
    parts = []
    if rec.get("with_verdict"):
        n = rec["with_verdict"]
        ext = rec["extraction"] or "none: the final \\boxed{}"
        head = (f"verdicts: {rec['source']} kept as y for {rec['kept']} of {n}" if rec["mode"] == "source"
                else f"verdicts: otbench's grades used as y; the source's {rec['source']} recorded for {n}")
        parts.append(f"{head} trajectories (source {rec['source_correct']} correct, otbench's grader "
                     f"[extract: {ext}] {rec['otbench_correct']}); {rec['disagree']} disagree "
                     f"({rec['source_only']} right only by the source, {rec['otbench_only']} only by otbench)")
        if rec["examples"]:
            parts.append("e.g. " + ", ".join(
                f"{e['question']}#{e['trajectory']} {e['answer']!r} (source {e['source']}, otbench "
                f"{e['otbench']} {e['status']})" for e in rec["examples"]))
    elif rec.get("extraction"):
        parts.append(f"verdicts: the source gives none; otbench grades with extract {rec['extraction']}")
    if cut:
        parts.append(f"{cut} own answers cut at answer_limit = {answer_limit} tokens before grading")
    return "; ".join(parts)
