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
  per doc and filter; only the first filter seen for a `doc_id` is read).
* `chat`: chat-style trace datasets: `messages` (`role`/`content`) or
  `conversations` (`from`/`value`); the question is the row's `problem` /
  `question` column, else the last user turn; the reasoning is the
  assistant turn's `reasoning_content` / `reasoning` / `thinking` field
  (or the row's), else the part of its content inside `<think>...</think>`
  (or `<|begin_of_thought|>...<|end_of_thought|>`).

Reasoning in text with markers is split as reasoning models write it: the
final answer is the text after the last closing marker (the thinking ended
by itself); an opening marker with no closing one is a trace cut before its
answer; text with no markers at all is the whole reply (`finished` left
undecided: the job's family decides, see `probe.stp._imported`).

Every error names the file (or dataset), the row and the column.
"""

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from ._benchmarks import DatasetError, _field

MAX_TRAJECTORY = 65_535
"""Largest trajectory index a record may carry: imported traces keep their own indices, and a
job's units run over `0 .. R - 1` per question (R = the largest index + 1)."""

TRACE_FORMATS = ("otbench", "lm-eval", "chat")

MARKERS = (("<think>", "</think>"), ("<|begin_of_thought|>", "<|end_of_thought|>"))
"""(open, close) reasoning markers recognized in text, tried in order."""

_REASONING_FIELDS = ("reasoning_content", "reasoning", "thinking")
_QUESTION_TEXT = ("problem", "Problem", "question", "Question")
_QUESTION_ID = ("unique_id", "question_id", "id", "ID", "problem_idx", "Record ID")


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


def split_reasoning(text: str) -> tuple[str, bool | None, str | None]:
    """(thinking, finished, final answer) of a completion that may hold reasoning markers."""
    for start, end in MARKERS:
        if end in text:
            head, _, tail = text.rpartition(end)
            return _after_open(head, start), True, tail
        if start in text:
            return _after_open(text, start), False, None
    return text, None, None


def _after_open(text: str, start: str) -> str:
    # The thinking begins after the opening marker (and the line feed templates put after it).
    if start in text:
        text = text.split(start, 1)[1]
        return text.removeprefix("\n")
    return text


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


def _lm_eval(row: Mapping, loc: str, seen: dict) -> Iterator[TraceRecord]:
    doc = _field(row, loc, ("doc",), types=(dict,))
    doc_id = _field(row, loc, ("doc_id",), types=(int, str))
    filt = row.get("filter", "none")
    if seen.setdefault(doc_id, filt) != filt:
        return                      # the same completions again under another filter
    resps = _field(row, loc, ("resps",), types=(list,))
    texts = [t for group in resps for t in (group if isinstance(group, list) else [group])]
    if not texts or not all(isinstance(t, str) for t in texts):
        raise DatasetError(f"{loc}: field 'resps' must hold the completions as strings")
    qid = next((str(doc[n]).strip() for n in _QUESTION_ID if doc.get(n) is not None), None)
    text = next((doc[n] for n in _QUESTION_TEXT if isinstance(doc.get(n), str)), None)
    if qid is None and text is None:
        raise DatasetError(f"{loc}: field 'doc' has no question id ({', '.join(_QUESTION_ID)}) "
                           f"or text ({', '.join(_QUESTION_TEXT)})")
    for k, t in enumerate(texts, 1):
        thinking, finished, answer = split_reasoning(t)
        yield TraceRecord(f"{loc} (completion {k})", qid, None, text, None,
                          None, thinking, finished, None, answer)


def _turns(row: Mapping, loc: str) -> tuple[str, list[Mapping]]:
    for name, role, content in (("messages", "role", "content"), ("conversations", "from", "value")):
        if row.get(name) is not None:
            turns = row[name]
            if hasattr(turns, "tolist"):
                turns = turns.tolist()
            if not isinstance(turns, list) or not all(isinstance(t, Mapping) for t in turns):
                raise DatasetError(f"{loc}: field '{name}' must be a list of turns")
            return name, [{"role": t.get(role), **t, "content": t.get(content)} for t in turns]
    raise DatasetError(f"{loc}: missing field 'messages' (also accepted: 'conversations')")


def _chat(row: Mapping, loc: str) -> Iterator[TraceRecord]:
    name, turns = _turns(row, loc)
    said = [i for i, t in enumerate(turns) if t["role"] in ("assistant", "gpt")]
    if not said:
        raise DatasetError(f"{loc}: field '{name}' has no assistant turn")
    a = turns[said[-1]]
    users = [t for t in turns[:said[-1]] if t["role"] in ("user", "human")]
    text = next((row[n] for n in _QUESTION_TEXT if isinstance(row.get(n), str)), None)
    if text is None:
        if not users or not isinstance(users[-1]["content"], str):
            raise DatasetError(f"{loc}: no question: neither a 'problem'/'question' column nor a user turn")
        text = users[-1]["content"]
    qid = next((str(row[n]).strip() for n in ("question_id", "id") if row.get(n) is not None), None)
    content = a["content"] if isinstance(a["content"], str) else ""
    reasoning = next((src[n] for src in (a, row) for n in _REASONING_FIELDS
                      if isinstance(src.get(n), str) and src[n].strip()), None)
    if reasoning is not None:
        thinking, finished, answer = reasoning, bool(content.strip()), content or None
    else:
        thinking, finished, answer = split_reasoning(content)
    if not thinking.strip():
        raise DatasetError(f"{loc}: the assistant turn holds no reasoning")
    yield TraceRecord(loc, qid, None, text, None, None, thinking, finished, None, answer)


def read_traces(rows: Iterator[tuple[str, Any]], fmt: str) -> list[TraceRecord]:
    """`TraceRecord`s of (location, row) pairs in format `fmt` (see the module docstring)."""
    if fmt not in TRACE_FORMATS:
        raise ValueError(f"`fmt` must be one of {', '.join(TRACE_FORMATS)}, got {fmt!r}.")
    seen: dict = {}
    out: list[TraceRecord] = []
    for loc, row in rows:
        if not isinstance(row, Mapping):
            raise DatasetError(f"{loc}: expected a JSON object, got {type(row).__name__}")
        if fmt == "otbench":
            out.extend(_otbench(row, loc))
        elif fmt == "lm-eval":
            out.extend(_lm_eval(row, loc, seen))
        else:
            out.extend(_chat(row, loc))
    return out


def load_traces(source: Mapping[str, Any]) -> tuple[list[TraceRecord], dict[str, Any]]:
    """Records of a validated `[trajectories]` table and what was read (location, hash, rows)."""
    from ._sources import _source_rows

    record: dict[str, Any] = {"format": source.get("format", "otbench")}
    count = [0]

    def counted():
        for item in _source_rows(source, record):
            count[0] += 1
            yield item

    out = read_traces(counted(), record["format"])
    record["rows"] = count[0]
    return out, record
