"""Probing trajectories the user already has: `[trajectories]` instead of sampling.

A job with a `[trajectories]` table (readers: `otbench.probe.data._traces`)
probes imported traces through the same code as sampled ones. The only
difference is where a trajectory comes from: each imported unit enters the
probe loop with its think phase already done (`think_results`, the loop's
`given`: the imported thinking and, when the record has one, the
trajectory's own final answer), so no thinking request is sent for it. Every
other request (probes, signals, forced answers of traces without an answer)
goes to the real engine, so segmentation, probes, signals, grading, journal,
resume and Ray are the same code as for sampled trajectories.

Matching: a record's `question_id` is looked up among the job's questions
(with `group` when ids repeat across groups), else its question text
(whitespace-normalized: equal to the question's text, or containing it, as
in prompts with an instruction around the problem). Records of questions
not in the job's data are counted and left out. A question's trajectories
keep the records' own `trajectory` indices (at most `MAX_TRAJECTORY`; records
without one are numbered in order); `per_question` keeps the first N. The
job's `R` becomes the largest index plus one, and only the imported units run.

Tokens: `thinking_ids` / `answer_ids` are used exactly; text is tokenized
once, on the driver, with the model's own tokenizer (its hash is recorded
and must equal the engine's), and records whose ids do not decode back to
the same text are counted (`not_round_trip`). A trace longer than
`thinking_limit` is cut there and counts as not finished, as a sampled one
would be. Records with undecided `finished` (plain text with no reasoning
markers) are the whole reply for the generic family (finished) and a trace
cut before its end marker for native thinking families.

Own answers: a finished trace's own final answer (`answer_ids`, or the
`answer` text, e.g. what follows `</think>`) gives `y` whatever the family;
present but empty, it is graded as the empty answer (as a sampled trajectory
that closes its thinking and stops is), not replaced by a forced one. The
answer of a trace that is cut or unfinished is not used: such a trace gets
the forced answer of position n, as a sampled one does.

Source verdicts (`_verdicts`): where the source judged a trajectory (lm-eval's
metric, lighteval's metric, inspect-ai's scorer, a chat row's label) that
verdict is its `y` (`verdicts = "source"`, the default), otbench's grade of
the same answer text (after the table's `extract`) recorded beside it and
the disagreements summarized in one line. Own answers longer than
`answer_limit` are cut there (as a sampled one is) and counted
(`answer_cut`), never silently.

Prompt: probes and forced answers run under otbench's prompt for the
question (the family's template and instruction), not the one that
produced the trace, unless `prompt = "trace"`: then the prompt the source
recorded (lm-eval's `arguments`, lighteval's `input`) is the question's
prompt, as is.

The provenance's `trajectories` entry records the import: source (path or
dataset, sha256 or fingerprint), format, counts, tokenizer hash and a digest
of every resolved trajectory, which is also part of every unit's key.
"""

import dataclasses
import hashlib
import itertools
import json
from collections.abc import Sequence
from typing import Any

from otbench.probe.config import derive_seed
from otbench.probe.data import DatasetError, load_traces

from . import _verdicts
from ._loop import ThinkResult
from ._setup import resolve_engine_config

PROMPTS = ("otbench", "trace")


@dataclasses.dataclass(frozen=True)
class ImportedTrajectory:
    """One imported trajectory, resolved to token ids for one tokenizer."""

    dataset: str
    question: str
    trajectory: int
    thinking: tuple[int, ...]
    finished: bool
    answer: tuple[int, ...] | None
    verdict: tuple[int, str] | None = None     # (y, y_status) kept from the source (`_verdicts`)


@dataclasses.dataclass(frozen=True)
class Imported:
    """What the runner needs: the questions with traces, the job (R, replay set), units, record, digest."""

    questions: list
    job: Any
    units: frozenset
    record: dict[str, Any]
    digest: str
    tokenizer_hash: str | None

    def check_tokenizer(self, engine_hash: str) -> None:
        """Refuse a run whose engine tokenizes differently from the one the text traces were tokenized with."""
        if self.tokenizer_hash is not None and self.tokenizer_hash != engine_hash:
            raise DatasetError(f"the engine's tokenizer ({engine_hash[:12]}) differs from the one the "
                               f"imported text was tokenized with ({self.tokenizer_hash[:12]})")


    def check_ids(self, vocab_size: int) -> None:
        """Refuse imported token ids the model cannot read (outside `0 .. vocab_size - 1`)."""
        if vocab_size <= 0:
            return
        for t in self.job.replay:
            for part, ids in (("thinking", t.thinking), ("answer", t.answer or ())):
                if not ids or (min(ids) >= 0 and max(ids) < vocab_size):
                    continue            # min/max run in C: tens of millions of ids in seconds
                bad = next(i for i in ids if not 0 <= i < vocab_size)
                raise DatasetError(f"question {t.question!r}, trajectory {t.trajectory}: "
                                   f"{part} token id {bad} is outside the model's vocabulary "
                                   f"(0..{vocab_size - 1})")


def _norm(text: str) -> str:
    return " ".join(text.split())


def _matcher(questions: Sequence):
    by_id: dict[str, list[int]] = {}
    by_text: dict[str, int] = {}
    for i, q in enumerate(questions):
        by_id.setdefault(q.id, []).append(i)
        by_text.setdefault(_norm(q.text), i)
    texts = list(by_text.items())

    def match(rec) -> int | None:
        if rec.question_id is not None:
            hits = [i for i in by_id.get(rec.question_id, []) if rec.group in (None, questions[i].group)]
            if len(hits) > 1:
                raise DatasetError(f"{rec.loc}: question id {rec.question_id!r} is in several groups "
                                   f"({', '.join(questions[i].group for i in hits)}); add 'group'")
            if hits:
                return hits[0]
            if rec.question_text is None:
                return None
        t = _norm(rec.question_text)
        if t in by_text:
            return by_text[t]
        inside = [i for qt, i in texts if qt and qt in t]
        return max(inside, key=lambda i: len(questions[i].text)) if inside else None
    return match


def _load_tokenizer(model_dir: str):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(model_dir, local_files_only=True)


def _strip_prefix(text: str, prefix: str) -> str:
    return text[len(prefix):] if prefix and text.startswith(prefix) else text.lstrip()


def _resolve(rec, q, r: int, job, tok, counts: dict) -> ImportedTrajectory:
    if rec.thinking_ids is not None:
        ids = rec.thinking_ids
        counts["from_ids"] += 1
    else:
        ids = tuple(int(t) for t in tok.encode(rec.thinking, add_special_tokens=False))
        counts["from_text"] += 1
        counts["not_round_trip"] += tok.decode(list(ids)) != rec.thinking
    finished = rec.finished if rec.finished is not None else not job.family.native_thinking
    # As a sampled trace is cut (`split_trajectory`): the marker must start within the
    # limit, so a finished trace of exactly `thinking_limit` tokens did not end in time.
    if len(ids) > job.thinking_limit or (finished and len(ids) == job.thinking_limit):
        ids, finished = ids[:job.thinking_limit], False
        counts["cut_at_limit"] += 1
    # The trajectory's own answer counts only for a finished trace (a cut or
    # unfinished one gets the forced answer, as a sampled one does). An answer
    # that is present but empty (`<think>...</think>` and nothing after it) is
    # the trajectory's answer, graded as the empty answer a sampled run grades,
    # never replaced by a freshly sampled one.
    answer = None
    if finished:
        answer = rec.answer_ids
        if answer is None and rec.answer is not None:
            text = _strip_prefix(rec.answer, job.family.answer_prefix)
            answer = tuple(int(t) for t in tok.encode(text, add_special_tokens=False)) if text else ()
    counts["finished"] += finished
    counts["own_answers"] += answer is not None
    limit = getattr(job, "answer_limit", None)
    if answer is not None and limit is not None and len(answer) > limit:
        counts["answer_cut"] = counts.get("answer_cut", 0) + 1     # cut at the limit when probed
    return ImportedTrajectory(q.dataset, q.id, r, tuple(ids), bool(finished), answer)


def _digest(trajs: Sequence[ImportedTrajectory]) -> str:
    # A kept verdict is part of the trajectory (its `y`); without one the digest reads as before.
    body = [[t.dataset, t.question, t.trajectory, list(t.thinking), t.finished,
             None if t.answer is None else list(t.answer)] + ([] if t.verdict is None else [list(t.verdict)])
            for t in trajs]
    return hashlib.sha256(json.dumps(["otbench.imported/1", body], separators=(",", ":")).encode()).hexdigest()


def import_trajectories(job, questions: Sequence, log) -> Imported:
    """Read, match and tokenize the job's `[trajectories]`; the job to run and what to record."""
    table = job.trajectories
    mode, ext = _verdicts.options(table)
    if table.get("prompt", "otbench") not in PROMPTS:
        raise DatasetError(f"trajectories.prompt must be one of {', '.join(PROMPTS)}, got {table['prompt']!r}")
    recs, source = load_traces(table)
    match = _matcher(questions)
    per_q: dict[int, list] = {}
    unmatched = 0
    for rec in recs:
        i = match(rec)
        if i is None:
            unmatched += 1
        else:
            per_q.setdefault(i, []).append(rec)
    if not per_q:
        raise DatasetError(f"{table.get('path') or table.get('hub')}: none of its {len(recs)} trajectories "
                           "belongs to a question of the job's [data]")
    needs_text = any(r.thinking_ids is None or (r.answer_ids is None and r.answer
                                                 and _strip_prefix(r.answer, job.family.answer_prefix))
                     for rs in per_q.values() for r in rs)
    tok = tok_hash = None
    if needs_text:
        from otbench.probe.tokens import tokenizer_hash

        tok = _load_tokenizer(resolve_engine_config(job, log).model)
        tok_hash = tokenizer_hash(tok)
    counts = dict.fromkeys(("from_ids", "from_text", "not_round_trip", "cut_at_limit", "finished",
                            "own_answers", "answer_cut"), 0)
    trajs, units, pairs = [], set(), []
    keep = sorted(per_q)
    for p, i in enumerate(keep):
        for r, rec in _number(per_q[i], table.get("per_question")):
            trajs.append(_resolve(rec, questions[i], r, job, tok, counts))
            pairs.append((questions[i], rec, r))
            units.add((p, r))
    ys, verdicts = _verdicts.keep(pairs, job.grader, mode, ext)
    trajs = [t if y is None else dataclasses.replace(t, verdict=y) for t, y in zip(trajs, ys)]
    R = max(t.trajectory for t in trajs) + 1
    kept = [questions[i] for i in keep]
    if table.get("prompt") == "trace":
        kept = [_trace_prompt(questions[i], per_q[i]) for i in keep]
    digest = _digest(trajs)
    record = {"source": source, "records": len(recs), "unmatched": unmatched,
              "questions": len(kept), "trajectories": len(trajs), **counts,
              "prompt": table.get("prompt", "otbench"), "verdicts": verdicts,
              "tokenizer_hash": tok_hash, "digest": digest}
    log(f"imported {len(trajs)} trajectories of {len(kept)} questions from {len(recs)} records"
        + (f" ({unmatched} for questions not in [data], left out)" if unmatched else "")
        + (f"; {counts['not_round_trip']} text records do not round-trip through the tokenizer"
           if counts["not_round_trip"] else ""))
    line = _verdicts.summary_line(verdicts, counts["answer_cut"], job.answer_limit)
    if line:
        log(line)
    run_job = dataclasses.replace(job, R=R, replay=tuple(trajs))
    return Imported(kept, run_job, frozenset(units), record, digest, tok_hash)


def _trace_prompt(q, recs: Sequence):
    """The question with the prompt its source sent (`prompt = "trace"`): one per question."""
    got = {r.prompt for r in recs}
    if None in got:
        bad = next(r for r in recs if r.prompt is None)
        raise DatasetError(f"{bad.loc}: the record holds no prompt (the source did not log the prompt "
                           "it sent); use trajectories.prompt = \"otbench\"")
    if len(got) > 1:
        raise DatasetError(f"{recs[-1].loc}: the question's records hold different prompts; "
                           "prompt = \"trace\" needs one prompt per question")
    return dataclasses.replace(q, prompt=got.pop())


def _number(recs: Sequence, cap: int | None) -> list[tuple[int, Any]]:
    """(trajectory index, record) of a question: the records' own indices, else their order."""
    own = [r.trajectory for r in recs]
    if all(t is None for t in own):
        pairs = list(enumerate(recs))
    elif any(t is None for t in own):
        bad = next(r for r in recs if r.trajectory is None)
        raise DatasetError(f"{bad.loc}: field 'trajectory' is missing while other records of the "
                           "question have one")
    else:
        pairs = sorted(zip(own, recs), key=lambda p: p[0])
        for (a, _), (b, rb) in itertools.pairwise(pairs):
            if a == b:
                raise DatasetError(f"{rb.loc}: trajectory {b} of this question appears twice")
    # The records' own indices are kept (trajectory 7 stays 7: it names the record's sample
    # in its source); `per_question` keeps the first N in index order.
    return pairs[:cap] if cap else pairs


def think_results(job, questions: Sequence, fmt) -> dict[tuple[int, int], Any]:
    """The think phase of every imported unit: the probe loop's `given` (`_loop.ThinkResult`).

    The imported thinking takes the place of the unit's thinking + answer
    request, cut exactly as `_loop.split_trajectory` cuts a sampled one: at
    `thinking_limit` (then unfinished, the answer forced at position n), and
    the own answer at `answer_limit`. A finished trace's own answer (possibly
    empty) is graded for `y`, for native-thinking and generic families alike;
    a finished native-thinking trace without one gets the forced answer of
    position n (docs/rules.md), like a cut one; a finished generic-family trace
    without one is graded as its reply, as a sampled one is. The seed is the
    one the unit would have been sampled with, so journal keys and
    provenance read the same as for a sampled run.
    """
    index = {(q.dataset, q.id): i for i, q in enumerate(questions)}
    native = fmt.family.native_thinking
    limit, answer_limit = job.thinking_limit, job.answer_limit
    out = {}
    for t in getattr(job, "replay", ()):
        q = index[(t.dataset, t.question)]
        seed = derive_seed(job.model, t.dataset, t.question, t.trajectory, "think")
        if len(t.thinking) >= limit:      # the marker must start within the limit (split_trajectory)
            think = ThinkResult(seed, tuple(t.thinking[:limit]), False, None, None, t.verdict)
        elif native and t.finished:
            answer = None if t.answer is None else tuple(t.answer[:answer_limit])
            think = ThinkResult(seed, tuple(t.thinking), True, int(fmt.end_ids[0]), answer, t.verdict)
        elif t.finished:
            # The generic family: the reply is the trajectory, and it is what is graded,
            # unless the record carries the trajectory's own final answer (the text after
            # `</think>` of a reasoning model's trace): then that answer gives `y`.
            stops = tuple(fmt.think_stop_ids)
            answer = None if t.answer is None else tuple(t.answer[:answer_limit])
            think = ThinkResult(seed, tuple(t.thinking), True, int(stops[0]) if stops else None, answer,
                                t.verdict)
        else:
            think = ThinkResult(seed, tuple(t.thinking), False, None, None, t.verdict)
        out[(q, t.trajectory)] = think
    return out
