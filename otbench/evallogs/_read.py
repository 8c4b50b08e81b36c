"""Evaluation logs as their frameworks wrote them: one `Reply` per model reply, with the source's verdict.

Four sources, each read where its framework writes it:

* `lm-eval` (lm-evaluation-harness `--log_samples`, `samples_<task>_<date>.jsonl` under
  `<output>/<model>/`): one record per document and filter (`evaluator.py`: `doc_id`, `doc`,
  `target`, `arguments` (`gen_args_i.arg_0`: the prompt sent), `resps`, `filtered_resps`,
  `filter`, `metrics` (the metric names), then each metric's value). The verdict of a reply is
  the record's first metric (or the one asked for) when the document has one reply; the
  source's extracted answer is its `filtered_resps`.
* `lighteval` (details Parquet, `details/<model>/<date>/details_<task>_<date>.parquet`): one
  row per sample: `doc` (`query`, `choices`, `gold_index`, `id`, `task_name`,
  `generation_size`), `metric` (the sample's scores), `model_response` (`text`,
  `text_post_processed`, `reasonings`, `output_tokens`).
* `inspect-ai` (`.eval` logs, read with `inspect_ai.log.read_eval_log`): one reply per sample
  and epoch; the verdict is the first scorer's value (or the one asked for) mapped to a number
  by inspect's own `value_to_float`; `stop_reason == "max_tokens"` is the length limit.
* `eee` (Every Eval Ever instance-level JSONL): `_eee.eee_replies`.
* `chat` (chat-style JSONL/Parquet: `messages` or `conversations`): the label where the row
  has one (`correct`, `is_correct`, `verdict`), `finish_reason` /
  `stop_reason` for the length limit.

The reasoning is split as reasoning models write it (`split_reasoning`): the answer follows
the last closing marker; an opening marker with no closing one is a reply that never closed
its thinking, and so is a reply with no marker after a prompt that opened the thinking
(`split_reply`: templates that end in `<think>`). Every error names the file, the row and the field.
"""

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from ._lengths import _DATE, lm_eval_model_name
from ._reply import EvalLogError, Reply, split_reasoning, split_reply

LOG_FORMATS = ("lm-eval", "lighteval", "inspect-ai", "chat", "eee")
LABEL_FIELDS = ("correct", "is_correct", "verdict")
"""Fields of a chat row read as its verdict (a boolean, or a number in [0, 1])."""
REASONING_FIELDS = ("reasoning_content", "reasoning", "thinking")
QUESTION_TEXT = ("problem", "Problem", "question", "Question")
QUESTION_ID = ("unique_id", "question_id", "id", "ID", "problem_idx", "Record ID")
_LENGTH_STOPS = ("length", "max_tokens", "model_length")
MAX_LINE = 64 << 20     # bytes of one JSONL row, as the set import bounds its lines


def _verdict(v: Any, loc: str, name: str) -> float | None:
    if v is None:
        return None
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, (int, float)) and 0.0 <= float(v) <= 1.0:
        return float(v)
    raise EvalLogError(f"{loc}: field '{name}' must be a verdict (true/false or a number in [0, 1]), "
                       f"got {v!r}; name another of the source's metrics (`metric`)")


def _text_of(v: Any) -> str | None:
    if isinstance(v, str):
        return v
    if isinstance(v, (list, tuple)) and v and all(isinstance(x, str) for x in v):
        return v[0]
    return None


# -- lm-eval ----------------------------------------------------------------------------------



def lm_eval_names(path: str | Path) -> tuple[str, str]:
    """(task, model) of an lm-eval samples file (`<model>/samples_<task>_<date>.jsonl`): the task
    from its name, the model as the run's results file beside it records it, else the folder."""

    p = Path(path)
    task = _DATE.sub("", p.stem.removeprefix("samples_"))
    return task, lm_eval_model_name(p) or p.parent.name or "model"


def _max_gen_toks(args: Any) -> int | None:
    g = args.get("gen_args_0") if isinstance(args, Mapping) else None
    kw = g.get("arg_1") if isinstance(g, Mapping) else None
    v = kw.get("max_gen_toks") if isinstance(kw, Mapping) else None
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None


def lm_eval_replies(row: Mapping, loc: str, *, task: str = "task", model: str = "model",
                    metric: str | None = None, count_tokens=None) -> list[Reply]:
    """The replies of one `--log_samples` record (see the module docstring).

    lm-eval records no finish reason. With `count_tokens` (`token_counter`), a reply whose
    re-encoded text holds at least the record's `max_gen_toks` tokens hit the length limit;
    re-encoding a decoded reply can differ from the generated ids by a token (measured on the
    embedded SmolLM2: 24 or 25 tokens for 24 generated), so a reply that stopped on its own one
    token short of the limit can be read as cut. Without it, the limit is not recorded (None).
    """
    doc = row.get("doc")
    if not isinstance(doc, Mapping):
        raise EvalLogError(f"{loc}: missing field 'doc' (the benchmark row)")
    resps = row.get("resps")
    if not isinstance(resps, list):
        raise EvalLogError(f"{loc}: missing field 'resps' (the completions)")
    texts = [t for group in resps for t in (group if isinstance(group, list) else [group])]
    if not texts or not all(isinstance(t, str) for t in texts):
        raise EvalLogError(f"{loc}: field 'resps' must hold the completions as strings")
    qid = next((str(doc[n]).strip() for n in QUESTION_ID if doc.get(n) is not None), None)
    text = next((doc[n] for n in QUESTION_TEXT if isinstance(doc.get(n), str)), None)
    if qid is None and text is None:
        raise EvalLogError(f"{loc}: field 'doc' has no question id ({', '.join(QUESTION_ID)}) "
                           f"or text ({', '.join(QUESTION_TEXT)})")
    names = row.get("metrics")
    names = [n for n in names if isinstance(n, str)] if isinstance(names, list) else []
    if metric is not None and metric not in row:
        raise EvalLogError(f"{loc}: the record has no metric '{metric}' (it has: "
                           f"{', '.join(names) or 'none'})")
    name = metric or next((n for n in names if n in row), None)
    filt = row.get("filter") if isinstance(row.get("filter"), str) else None
    # One document, one reply: the document's metric is that reply's verdict. With several
    # replies (repeats) lm-eval scores the document, not each reply.
    verdict = _verdict(row.get(name), loc, name) if name and len(texts) == 1 else None
    filtered = row.get("filtered_resps")
    extracted: list[str | None] = [None] * len(texts)
    if isinstance(filtered, list) and filtered:
        first = filtered[0]
        if isinstance(first, list) and len(first) == len(texts):
            extracted = [x if isinstance(x, str) else None for x in first]
        elif len(texts) == 1:
            extracted = [_text_of(first)]
    args = row.get("arguments")
    prompt = None
    if isinstance(args, Mapping):
        g = args.get("gen_args_0")
        prompt = g.get("arg_0") if isinstance(g, Mapping) and isinstance(g.get("arg_0"), str) else None
    elif isinstance(args, list) and args and isinstance(args[0], list) and args[0]:
        prompt = args[0][0] if isinstance(args[0][0], str) else None
    ref = row.get("target")
    limit = _max_gen_toks(args) if count_tokens is not None else None
    out = []
    for k, t in enumerate(texts):
        thinking, finished, answer = split_reply(t, prompt)
        length = None if limit is None else count_tokens(t) >= limit
        out.append(Reply(f"{loc}" + (f" (completion {k + 1})" if len(texts) > 1 else ""), "lm-eval",
                         task, model, qid, text, k, t, thinking, finished, answer, length, verdict,
                         None if name is None else (f"{name} ({filt})" if filt else name),
                         extracted[k], None if ref is None else str(ref), prompt, filt))
    return out


# -- lighteval --------------------------------------------------------------------------------

def lighteval_names(path: str | Path) -> str:
    """The model of a lighteval details file from its folder (`details/<model>/<date>/...`)."""
    p = Path(path).resolve()
    parts = p.parent.parent.parts              # the date folder is the file's own
    if "details" in parts:                     # an org/name model spans two folders
        k = len(parts) - 1 - parts[::-1].index("details")
        if parts[k + 1:]:
            return "/".join(parts[k + 1:])
    return p.parent.parent.name or "model"


def lighteval_task(path: str | Path) -> str:
    """The task of a lighteval details file from its name (`details_<task>_<date>.parquet`)."""
    return _DATE.sub("", Path(path).stem.removeprefix("details_")) or "task"


def lighteval_replies(row: Mapping, loc: str, *, model: str = "model",
                      metric: str | None = None, task: str = "task") -> list[Reply]:
    """The replies of one lighteval details row (see the module docstring)."""
    doc, scores, resp = row.get("doc"), row.get("metric"), row.get("model_response")
    for name, v in (("doc", doc), ("metric", scores), ("model_response", resp)):
        if not isinstance(v, Mapping):
            raise EvalLogError(f"{loc}: missing field '{name}' (a lighteval details row)")
    texts = resp.get("text")
    if hasattr(texts, "tolist"):
        texts = texts.tolist()
    if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
        raise EvalLogError(f"{loc}: field 'model_response.text' must hold the replies as strings")
    names = [k for k, v in scores.items() if v is not None]
    if metric is not None and metric not in names:
        raise EvalLogError(f"{loc}: the row has no metric '{metric}' (it has: {', '.join(names) or 'none'})")
    name = metric or (names[0] if names else None)
    verdict = _verdict(scores.get(name), loc, f"metric.{name}") if name and len(texts) == 1 else None
    post = resp.get("text_post_processed") or [None] * len(texts)
    reasonings = resp.get("reasonings") or [None] * len(texts)
    tokens = resp.get("output_tokens") or []
    size = doc.get("generation_size")
    choices, gold = doc.get("choices") or [], doc.get("gold_index")
    ref = choices[gold] if isinstance(gold, int) and 0 <= gold < len(choices) else None
    qid = doc.get("id") if isinstance(doc.get("id"), str) and doc.get("id") else None
    text = next((doc[n] for n in ("original_query", "query") if isinstance(doc.get(n), str)), None)
    # the row's own task name (lighteval writes it in `doc`), else the file's
    task = doc.get("task_name") if isinstance(doc.get("task_name"), str) and doc.get("task_name") else task
    out = []
    for k, t in enumerate(texts):
        r = reasonings[k] if k < len(reasonings) else None
        if isinstance(r, str) and r.strip():
            thinking, finished, answer = r, True, t
        else:
            thinking, finished, answer = split_reply(t, resp.get("input") if isinstance(resp.get("input"), str)
                                                     else None)
        ids = tokens[k] if k < len(tokens) else None
        length = (len(ids) >= size) if isinstance(size, int) and size > 0 and ids is not None and len(ids) else None
        out.append(Reply(loc + (f" (reply {k + 1})" if len(texts) > 1 else ""), "lighteval", task, model,
                         qid, text, k, t, thinking, finished, answer, length, verdict, name,
                         post[k] if k < len(post) and isinstance(post[k], str) else None, ref,
                         resp.get("input") if isinstance(resp.get("input"), str) else None))
    return out


# -- chat -------------------------------------------------------------------------------------

def _turns(row: Mapping, loc: str) -> tuple[str, list[Mapping]]:
    for name, role, content in (("messages", "role", "content"), ("conversations", "from", "value")):
        if row.get(name) is not None:
            turns = row[name]
            if hasattr(turns, "tolist"):
                turns = turns.tolist()
            if not isinstance(turns, list) or not all(isinstance(t, Mapping) for t in turns):
                raise EvalLogError(f"{loc}: field '{name}' must be a list of turns")
            return name, [{"role": t.get(role), **t, "content": t.get(content)} for t in turns]
    raise EvalLogError(f"{loc}: missing field 'messages' (also accepted: 'conversations')")


def chat_replies(row: Mapping, loc: str, *, task: str = "task", model: str = "model") -> list[Reply]:
    """The reply of one chat row: the last assistant turn, with the row's label where it has one."""
    name, turns = _turns(row, loc)
    said = [i for i, t in enumerate(turns) if t["role"] in ("assistant", "gpt")]
    if not said:
        raise EvalLogError(f"{loc}: field '{name}' has no assistant turn")
    a = turns[said[-1]]
    users = [t for t in turns[:said[-1]] if t["role"] in ("user", "human")]
    text = next((row[n] for n in QUESTION_TEXT if isinstance(row.get(n), str)), None)
    if text is None:
        if not users or not isinstance(users[-1]["content"], str):
            raise EvalLogError(f"{loc}: no question: neither a 'problem'/'question' column nor a user turn")
        text = users[-1]["content"]
    qid = next((str(row[n]).strip() for n in ("question_id", "id") if row.get(n) is not None), None)
    content = a["content"] if isinstance(a["content"], str) else ""
    reasoning = next((src[n] for src in (a, row) for n in REASONING_FIELDS
                      if isinstance(src.get(n), str) and src[n].strip()), None)
    if reasoning is not None:
        thinking, finished, answer = reasoning, bool(content.strip()), content or None
    else:
        thinking, finished, answer = split_reasoning(content)
    label = next((n for n in LABEL_FIELDS if row.get(n) is not None), None)
    stop = next((src.get(n) for src in (a, row) for n in ("finish_reason", "stop_reason")
                 if isinstance(src.get(n), str)), None)
    return [Reply(loc, "chat", str(row.get("task") or task), str(row.get("model") or model), qid, text, 0,
                  content if reasoning is None else reasoning + content, thinking, finished, answer,
                  None if stop is None else stop in _LENGTH_STOPS,
                  None if label is None else _verdict(row[label], loc, label), label,
                  None, None if row.get("answer") is None else str(row["answer"]))]


# inspect-ai's `.eval` logs: `_inspect.inspect_replies` (imported where read).

# -- files ------------------------------------------------------------------------------------

def _open(p: Path):
    """The log at `p` for reading; a FIFO or device is one line, never a hang or endless read."""
    from otbench.files import open_regular

    return open_regular(p, what="an evaluation log", fail=lambda why: EvalLogError(f"{p}: {why}"))


def rows(path: str | Path) -> Iterator[tuple[str, Any]]:
    """(location, row) of a JSONL or Parquet file."""
    p = Path(path)
    if p.suffix == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        from otbench.files import arrow_file

        with _open(p) as f:                 # pyarrow reads the descriptor that was checked
            try:
                with arrow_file(f) as src:
                    records = pq.read_table(src).to_pylist()
            except (pa.ArrowException, OSError, ValueError) as e:
                # a corrupt or truncated file (pyarrow's ArrowInvalid): one line, not a traceback
                raise EvalLogError(f"{p}: not a readable Parquet table "
                                   f"({' '.join(str(e).split())[:200]})") from None
        for i, r in enumerate(records, 1):
            yield f"{p}:row {i}", r
        return
    from otbench.files import bounded_lines, loads_json  # the one guarded JSON reader (depth, sizes, keys)

    with _open(p) as f:     # each line bounded: a file without line breaks is not a log
        too_long = lambda i: EvalLogError(f"{p}:{i}: line longer than {MAX_LINE >> 20} MiB "  # noqa: E731
                                          f"(not a JSONL record)")
        for i, line in bounded_lines(f, MAX_LINE, too_long):
            if not line.strip():
                continue
            yield f"{p}:{i}", loads_json(line, f"{p}:{i}")


def row_format(row: Any) -> str | None:
    """The log format one JSON row belongs to by its fields (lighteval: doc + model_response;
    lm-eval: doc + resps; eee: schema_version + answer_attribution; chat: messages or conversations),
    or None."""
    if isinstance(row, Mapping):
        if "model_response" in row and "doc" in row:
            return "lighteval"
        if "resps" in row and "doc" in row:
            return "lm-eval"
        if "schema_version" in row and "answer_attribution" in row:
            return "eee"        # an Every Eval Ever instance-level record (`_eee`)
        if "messages" in row or "conversations" in row:
            return "chat"
    return None


def detect_format(path: str | Path) -> str:
    """The format of a log file: `.eval` is inspect-ai; else the first row's fields decide."""
    p = Path(path)
    if p.suffix == ".eval":
        return "inspect-ai"
    for loc, row in rows(p):
        kind = row_format(row)
        if kind is not None:
            return kind
        raise EvalLogError(f"{loc}: not a row of a known log (lm-eval: doc + resps; lighteval: doc + "
                           "model_response; chat: messages or conversations; eee: schema_version + "
                           "answer_attribution; inspect-ai: a .eval file)")
    raise EvalLogError(f"{p}: the log is empty")


def groups(replies: Sequence[Reply]) -> dict[tuple[str, str], list[Reply]]:
    """Replies by (task, model); lm-eval's filters are separate tasks (`task [filter]`)."""
    out: dict[tuple[str, str], list[Reply]] = {}
    for r in replies:
        task = f"{r.task} [{r.filter}]" if r.filter and r.filter != "none" else r.task
        out.setdefault((task, r.model), []).append(r)
    return out
