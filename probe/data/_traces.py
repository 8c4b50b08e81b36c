"""Readers of trajectories a researcher already has: one `TraceRecord` per reasoning trace.

A job's `[trajectories]` table names a source (a local `.jsonl` /
`.parquet` / `.csv` file, a saved dataset folder, or a Hugging Face dataset:
the same keys as a `[[data.sources]]` entry, `_sources`) and its `format`:

* `otbench` (default): one record per trajectory with the columns
  `question_id` (the question's id in the job's data; with `group` when
  two groups share an id) or `question` (its text); `trajectory`
  (optional index; default: order within the question); the reasoning as
  `thinking_ids` (token ids, used exactly) or `thinking` (text, tokenized
  once with the model's tokenizer); `finished` (required: whether the
  thinking ended by itself); optionally the trajectory's own final answer
  as `answer` (text) or `answer_ids`.
* `lm-eval`: lm-evaluation-harness `--log_samples` JSONL: `doc` (the
  benchmark row: the question's id or text is read from it), `resps` (the
  completions: one trajectory each), `filter` (lm-eval writes one record
  per doc and filter; the table's `filter`, else the first filter seen for
  a `doc_id`, is read), the record's metric (its verdict, kept) and
  `filtered_resps` (its extracted answer).
* `lighteval`: lighteval details Parquet rows (`doc`, `metric`,
  `model_response`); `inspect-ai`: an inspect-ai `.eval` log (its samples,
  each epoch one trajectory, the scorer's value the verdict).
* `chat`: chat-style trace datasets: `messages` (`role`/`content`) or
  `conversations` (`from`/`value`); the question is the row's `problem` /
  `question` column, else the last user turn; the reasoning is the
  assistant turn's `reasoning_content` / `reasoning` / `thinking` field
  (or the row's), else the part of its content inside `<think>...</think>`
  (or `<|begin_of_thought|>...<|end_of_thought|>`); the row's label
  (`correct`, `is_correct`, `verdict`) is its verdict.
* `eee`: Every Eval Ever instance-level records (`single_turn`): `sample_id`,
  `input.raw` (the question), `output.raw` (one trajectory per response) with
  `output.reasoning_trace` where the source separated the reasoning, else the
  markers in the response; `evaluation.is_correct` is the verdict, kept.

The logs are read by `otbench.evallogs` (the audit reads them there too);
a record keeps its source's verdict (`verdict`, what it is in `metric`),
the source's extracted answer and reference, and the prompt the source sent.

Reasoning in text with markers is split as reasoning models write it: the
final answer is the text after the last closing marker (the thinking ended
by itself); an opening marker with no closing one is a trace cut before its
answer; text with no markers at all is the whole reply (`finished` left
undecided: the job's family decides, see `probe.stp._imported`).

Every error names the file (or dataset), the row and the column.
"""

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from otbench.evallogs import (
    LOG_FORMATS,
    MARKERS,  # noqa: F401  (re-exported by otbench.probe.data)
    QUESTION_ID,
    QUESTION_TEXT,
    REASONING_FIELDS,
    EvalLogError,
    Reply,
    chat_replies,
    eee_replies,
    inspect_replies,
    lighteval_names,
    lighteval_task,
    lighteval_replies,
    lm_eval_names,
    lm_eval_replies,
    split_reasoning,  # noqa: F401  (re-exported by otbench.probe.data)
)

from ._benchmarks import DatasetError, _field
from otbench.errors import ArgumentError

MAX_TRAJECTORY = 65_535
"""Largest trajectory index a record may carry: imported traces keep their own indices, and a
job's units run over `0 .. R - 1` per question (R = the largest index + 1)."""

TRACE_FORMATS = ("otbench", *LOG_FORMATS)

# The readers' field lists (`otbench.evallogs`), under the names the docs' field table reads.
_REASONING_FIELDS, _QUESTION_TEXT, _QUESTION_ID = REASONING_FIELDS, QUESTION_TEXT, QUESTION_ID


@dataclasses.dataclass(frozen=True)
class TraceRecord:
    """One imported trajectory as read (before matching to questions and tokenizing).

    Attributes:
      loc: where it was read (`FILE:LINE`, `FILE:row N`, `DATASET[split]:row N`).
      question_id, group: the question's id (and group) in the job's data, if given.
      question_text: the question's text, if given (matched when no id is).
      trajectory: the record's own trajectory index, if given.
      thinking_ids / thinking: the reasoning as token ids or as text (one is set).
      finished: whether the thinking ended by itself (None: undecided, see module docstring).
      answer_ids / answer: the trajectory's own final answer, if any.
      verdict, metric: the source's own verdict of that answer and what it is
        (None: the source gives none for this trajectory).
      extracted, reference: the answer the source extracted and its reference.
      prompt: the prompt the source sent (its template around the question).
    """

    loc: str
    question_id: str | None
    group: str | None
    question_text: str | None
    trajectory: int | None
    thinking_ids: tuple[int, ...] | None
    thinking: str | None
    finished: bool | None
    answer_ids: tuple[int, ...] | None = None
    answer: str | None = None
    verdict: float | None = None
    metric: str | None = None
    extracted: str | None = None
    reference: str | None = None
    prompt: str | None = None


def _ids(row: Mapping, loc: str, name: str) -> tuple[int, ...]:
    v = row[name]
    if hasattr(v, "tolist"):
        v = v.tolist()
    if not isinstance(v, (list, tuple)) or not all(isinstance(t, int) and not isinstance(t, bool)
                                                   and t >= 0 for t in v):
        raise DatasetError(f"{loc}: field '{name}' must be a list of non-negative token ids")
    return tuple(int(t) for t in v)


def _opt_str(row: Mapping, loc: str, names: Sequence[str]) -> str | None:
    return _field(row, loc, names, required=False)


def _question(row: Mapping, loc: str, id_names, text_names) -> tuple[str | None, str | None]:
    qid = _field(row, loc, id_names, types=(str, int), required=False)
    text = _field(row, loc, text_names, required=False)
    if qid is None and text is None:
        raise DatasetError(f"{loc}: missing field '{id_names[0]}' (or '{text_names[0]}': the question's text)")
    return (None if qid is None else str(qid).strip()), text


def _otbench(row: Mapping, loc: str) -> Iterator[TraceRecord]:
    qid, text = _question(row, loc, ("question_id",), ("question",))
    group = _opt_str(row, loc, ("group",))
    r = _field(row, loc, ("trajectory",), types=(int,), required=False)
    if r is not None and not 0 <= r <= MAX_TRAJECTORY:
        raise DatasetError(f"{loc}: field 'trajectory' must be in 0..{MAX_TRAJECTORY}, got {r}")
    has_ids, has_text = row.get("thinking_ids") is not None, row.get("thinking") is not None
    if has_ids == has_text:
        raise DatasetError(f"{loc}: give exactly one of 'thinking_ids' (token ids) or 'thinking' (text)")
    finished = row.get("finished")
    if not isinstance(finished, bool):
        raise DatasetError(f"{loc}: field 'finished' must be true or false (did the thinking end by itself?)")
    yield TraceRecord(
        loc, qid, group, text, r,
        _ids(row, loc, "thinking_ids") if has_ids else None,
        None if has_ids else _field(row, loc, ("thinking",)), finished,
        _ids(row, loc, "answer_ids") if row.get("answer_ids") is not None else None,
        _opt_str(row, loc, ("answer",)))


def _record(rep: Reply) -> TraceRecord:
    return TraceRecord(rep.loc, rep.question_id, None, rep.question_text, None, None, rep.thinking,
                       rep.finished, None, rep.answer, rep.verdict, rep.metric, rep.extracted,
                       rep.reference, rep.prompt)


def _lm_eval(row: Mapping, loc: str, seen: dict, opts: Mapping) -> Iterator[TraceRecord]:
    _field(row, loc, ("doc",), types=(dict,))
    doc_id = _field(row, loc, ("doc_id",), types=(int, str))
    filt = row.get("filter", "none")
    want = opts.get("filter")
    if want is not None:
        if filt != want:
            return                  # another filter's record of the same completions
    elif seen.setdefault(doc_id, filt) != filt:
        return                      # the same completions again under another filter
    _field(row, loc, ("resps",), types=(list,))
    task, model = opts.get("names", ("task", "model"))
    yield from map(_record, lm_eval_replies(row, loc, task=task, model=model, metric=opts.get("metric")))


def _chat(row: Mapping, loc: str) -> Iterator[TraceRecord]:
    (rep,) = chat_replies(row, loc)
    if not rep.thinking.strip():
        raise DatasetError(f"{loc}: the assistant turn holds no reasoning")
    yield _record(rep)


def read_traces(rows: Iterator[tuple[str, Any]], fmt: str, *, filter: str | None = None,
                metric: str | None = None, names: tuple[str, str] = ("task", "model")) -> list[TraceRecord]:
    """`TraceRecord`s of (location, row) pairs in format `fmt` (see the module docstring).

    `filter`: the lm-eval filter whose records are read; `metric`: the source
    verdict kept (lm-eval's metric, lighteval's metric key); `names`: the
    source's (task, model).
    """
    if fmt not in TRACE_FORMATS or fmt == "inspect-ai":
        raise ArgumentError(f"`fmt` must be one of {', '.join(f for f in TRACE_FORMATS if f != 'inspect-ai')}, "
                            f"got {fmt!r} (inspect-ai logs are files: `load_traces`).")
    seen: dict = {}
    opts = {"filter": filter, "metric": metric, "names": names}
    out: list[TraceRecord] = []
    try:
        for loc, row in rows:
            if not isinstance(row, Mapping):
                raise DatasetError(f"{loc}: expected a JSON object, got {type(row).__name__}")
            if fmt == "otbench":
                out.extend(_otbench(row, loc))
            elif fmt == "lm-eval":
                out.extend(_lm_eval(row, loc, seen, opts))
            elif fmt == "lighteval":
                out.extend(map(_record, lighteval_replies(row, loc, model=names[1], metric=metric,
                                                                 task=names[0])))
            elif fmt == "eee":
                out.extend(map(_record, eee_replies(row, loc)))
            else:
                out.extend(_chat(row, loc))
    except EvalLogError as e:       # the log readers' one line, as the job's data error
        raise DatasetError(str(e)) from None
    return out


def load_traces(source: Mapping[str, Any]) -> tuple[list[TraceRecord], dict[str, Any]]:
    """Records of a validated `[trajectories]` table and what was read (location, hash, rows)."""
    from ._sources import _sha256, _source_rows

    fmt = source.get("format", "otbench")
    record: dict[str, Any] = {"format": fmt}
    if fmt == "inspect-ai":
        if "path" not in source:
            raise DatasetError("[trajectories]: an inspect-ai log is a local `.eval` file (`path`)")
        path = Path(source["path"])
        try:
            notes: list[str] = []
            reps = inspect_replies(path, scorer=source.get("metric"), notes=notes)
        except EvalLogError as e:
            raise DatasetError(str(e)) from None
        record.update(path=str(path), sha256=_sha256([path]), rows=len(reps), **({"notes": notes} if notes else {}))
        return [_record(r) for r in reps], record
    count = [0]

    def counted():
        for item in _source_rows(source, record):
            count[0] += 1
            yield item

    names = ("task", "model")
    if "path" in source and fmt == "lm-eval":
        names = lm_eval_names(source["path"])
    elif "path" in source and fmt == "lighteval":
        names = (lighteval_task(source["path"]), lighteval_names(source["path"]))
    out = read_traces(counted(), fmt, filter=source.get("filter"), metric=source.get("metric"), names=names)
    record["rows"] = count[0]
    return out, record
