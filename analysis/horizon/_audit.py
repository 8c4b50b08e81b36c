"""Censoring in other people's scores: an evaluation log read with the matched-horizon readouts.

An evaluation log scores every reply, also one that never closed its
thinking or stopped at its length limit: such a reply is *censored* (the
run was stopped before its own end, `docs/guides/horizon.md`), and the
score it gets is the source's reading of the text at the cut. Per task and
model, with no probing and the source's own verdicts as they are:

* the censored share (the horizon's survival at the log's length limit):
  replies that never closed their thinking, that hit the length limit, and
  either (`cut`);
* accuracy among finished and among censored replies (the latter is the
  horizon's survivor-only accuracy, read with the source's parse);
* the reported score read as the horizon readouts read a stopped run
  (`_group.terminal_outcome`, the rule the horizon analysis uses):
  terminal-aware (the natural outcome once finished, else the readout at
  the stop: here the source's own verdict of the cut text, so it is the
  reported score), worst case (correct completion by the deadline: every
  censored reply wrong) and best case (every censored reply right). The
  width between the two is what censoring leaves open.

Every rate is a mean of item means (a question's replies averaged first;
with one reply per question, the source's own mean) with a percentile
interval from the item bootstrap (`_inference.bootstrap`; 10,000 draws,
seed 0 by default, recorded). A reply without a per-reply verdict (an
lm-eval document with several replies is scored as a whole) is counted and
left out of the accuracies.
"""

import collections
from collections.abc import Sequence
from typing import Any

import numpy as np

from otbench.evallogs import Reply, groups

from . import _inference as inf
from ._group import stack, summ, terminal_outcome
from ._tables import DASH, Table, pct

SCHEMA = "otbench.audit-log/1"
SHARES = ("cut", "unclosed", "length_limit")
SCORES = ("reported", "finished", "censored", "terminal_aware", "worst_case", "best_case")


def _item(r: Reply) -> Any:
    return r.question_id if r.question_id is not None else r.question_text


def _grid(reps: Sequence[Reply]) -> dict[str, np.ndarray]:
    """[item, reply] arrays of one task and model (items in order of first appearance)."""
    items: dict[Any, list[Reply]] = {}
    for r in reps:
        items.setdefault(_item(r), []).append(r)
    I, R = len(items), max(len(v) for v in items.values())
    g = {k: np.zeros((I, R), dtype=bool) for k in ("obs", "has_v", "unclosed", "length", "length_known")}
    g["y"] = np.zeros((I, R), dtype=np.float64)
    for i, rs in enumerate(items.values()):
        for j, r in enumerate(rs):
            g["obs"][i, j] = True
            g["has_v"][i, j] = r.verdict is not None
            g["y"][i, j] = r.verdict or 0.0
            g["unclosed"][i, j] = r.finished is False
            g["length"][i, j] = bool(r.length_stop)
            g["length_known"][i, j] = r.length_stop is not None
    g["cut"] = g["unclosed"] | g["length"]
    return g


def audit_group(task: str, model: str, reps: Sequence[Reply], *, replicates: int = inf.REPLICATES,
                seed: int = inf.SEED) -> dict[str, Any]:
    """The audit of one task and model's replies (see the module docstring)."""
    g = _grid(reps)
    obs, v, cut, y = g["obs"], g["has_v"], g["cut"], g["y"]
    done = ~cut
    scored = obs & v
    ones = np.ones_like(y)
    parts = [(cut, obs), (g["unclosed"], obs), (g["length"], obs & g["length_known"]),
             (y, scored),                                          # reported: the source's verdicts
             (y, scored & done), (y, scored & cut),
             terminal_outcome(scored, done, y, y, scored),         # readout at the cut: the source's
             terminal_outcome(scored, done, y),                    # censored replies wrong
             terminal_outcome(scored, done, y, ones, scored)]      # censored replies right
    x, a = stack(parts)
    b = inf.bootstrap(x, a, replicates=replicates, seed=seed)
    names = SHARES + SCORES
    row: dict[str, Any] = {"task": task, "model": model, "source": reps[0].source,
                           "metric": next((r.metric for r in reps if r.metric), None),
                           "replies": int(obs.sum()), "items": int(obs.shape[0]),
                           "with_verdict": int(scored.sum()), "unclosed_n": int((obs & g["unclosed"]).sum()),
                           "length_limit_n": int((obs & g["length"]).sum()),
                           "length_recorded": int((obs & g["length_known"]).sum()),
                           "cut_n": int((obs & cut).sum()), "censored_scored": int((scored & cut).sum()),
                           "censored_right": int((scored & cut & (y > 0)).sum())}
    for k, name in enumerate(names):
        row[name] = summ(b.estimate[k], b.draws[:, k])
    return row


def audit_replies(replies: Sequence[Reply], *, source: str, replicates: int = inf.REPLICATES,
                  seed: int = inf.SEED) -> dict[str, Any]:
    """The audit document (`otbench.audit-log/1`) of a log's replies, one row per task and model."""
    if not replies:
        raise inf.InferenceError(f"{source}: the log holds no replies")
    by = sorted(groups(replies).items())
    # The budget of the largest group's bootstrap, before any group is drawn: an impossible
    # --replicates is one line now, not an allocation failure deep inside the first group.
    counts = [collections.Counter(_item(r) for r in rs) for _, rs in by]
    items = max(len(c) for c in counts)
    reps = max(max(c.values()) for c in counts)
    inf.check_replicates(items, reps, len(SHARES + SCORES), replicates,
                         what=f"{source}: the audit's bootstrap of {items:,} items x {reps:,} "
                              "replies")
    rows = [audit_group(t, m, rs, replicates=replicates, seed=seed) for (t, m), rs in by]
    return {"schema": SCHEMA, "log": source, "format": replies[0].source, "replicates": replicates,
            "seed": seed, "groups": rows}


def _est(s) -> str:
    return pct({"estimate": None if s is None else s.get("estimate")})


def censoring_table(doc: dict[str, Any]) -> Table:
    """Per task and model: replies, the censored shares and the accuracies of finished and censored replies."""
    header = ("task", "model", "replies", "items", "never closed (%)", "length limit (%)",
              "censored (%) [95% CI]", "acc. finished (%)", "acc. censored (%)")
    rows = [(r["task"], r["model"], str(r["replies"]), str(r["items"]), _est(r["unclosed"]),
             _est(r["length_limit"]) if r["length_recorded"] else "not recorded",
             pct(r["cut"]), pct(r["finished"]), pct(r["censored"])) for r in doc["groups"]]
    title = (f"Censoring in {doc['log']} ({doc['format']}): replies that never closed their thinking "
             "or hit the length limit")
    return (title, header, rows)


def bounds_table(doc: dict[str, Any]) -> Table:
    """Per task and model: the reported score, its terminal-aware reading and the worst/best cases."""
    header = ("task", "model", "verdict", "reported (%) [95% CI]", "terminal-aware (%)", "worst case (%)",
              "best case (%)", "width (pp)")
    rows = []
    for r in doc["groups"]:
        lo, hi = r["worst_case"]["estimate"], r["best_case"]["estimate"]
        width = DASH if lo is None or hi is None else f"{100 * (hi - lo):.1f}"
        rows.append((r["task"], r["model"], r["metric"] or DASH, pct(r["reported"]),
                     _est(r["terminal_aware"]), pct(r["worst_case"]), pct(r["best_case"]), width))
    title = ("The reported score under censoring: terminal-aware reading and worst/best-case bounds "
             "(docs/guides/horizon.md)")
    return (title, header, rows)


def audit_line(row: dict[str, Any]) -> str:
    """One line per task and model: the censored share and the bounds of the reported score."""
    def p(s):
        return DASH if s is None or s.get("estimate") is None else f"{100 * s['estimate']:.1f} %"
    return (f"{row['task']} / {row['model']}: {row['cut_n']} of {row['replies']} replies censored "
            f"({p(row['cut'])}: {row['unclosed_n']} never closed their thinking, {row['length_limit_n']} "
            f"hit the length limit); reported {p(row['reported'])}, bounds [{p(row['worst_case'])}, "
            f"{p(row['best_case'])}]")
