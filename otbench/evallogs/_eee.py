"""Every Eval Ever instance-level records as replies: another tool's per-sample log.

Every Eval Ever (github.com/evaleval/every_eval_ever) stores one record per
sample in its instance-level schema (`instance_level_eval.schema.json`, 0.2.x):
`model_id`, `evaluation_name` (the task), `sample_id`, `input` (`raw`: the
question; `reference`; `formatted`: the prompt as sent), `output` (`raw`: the
model's responses; `reasoning_trace`: their reasoning, where the source
separated it), `answer_attribution` (the entry with `is_terminal` true holds
the extracted final answer) and `evaluation` (`is_correct`, `score`).
Only `single_turn` records hold a reply in `output`; multi-turn and agentic
ones keep theirs in `messages` and are refused here.

The verdict is `evaluation.is_correct`, kept when the record has one
response. The schema records no finish reason: a reply's length stop is
unknown (None) unless the record says it in `metadata.otbench_stop`, as
`otbench export --format eee` writes it.
"""

from collections.abc import Mapping
from typing import Any

from ._reply import EvalLogError, Reply, split_reasoning


def _strings(v: Any, loc: str, name: str, *, null: bool = False) -> list[str] | None:
    if v is None and null:
        return None
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise EvalLogError(f"{loc}: field '{name}' must be a list of strings"
                           f"{' or null' if null else ''}")
    return v


def _object(row: Mapping, loc: str, name: str) -> Mapping:
    v = row.get(name)
    if not isinstance(v, Mapping):
        raise EvalLogError(f"{loc}: field '{name}' must be an object (an Every Eval Ever record)")
    return v


def _final(row: Mapping, loc: str) -> str | None:
    """The extracted value of the last final `answer_attribution` entry, if any."""
    items = row.get("answer_attribution")
    if not isinstance(items, list):
        raise EvalLogError(f"{loc}: field 'answer_attribution' must be a list")
    final = [a for a in items if isinstance(a, Mapping) and a.get("is_terminal") is True]
    value = final[-1].get("extracted_value") if final else None
    return value if isinstance(value, str) else None


def eee_replies(row: Mapping, loc: str) -> list[Reply]:
    """The replies of one Every Eval Ever instance-level record (one per `output.raw` entry)."""
    kind = row.get("interaction_type")
    if kind != "single_turn":
        raise EvalLogError(f"{loc}: field 'interaction_type' is {kind!r}: only single_turn records "
                           f"hold their reply in 'output' (multi_turn and agentic are not read)")
    names = {}
    for name in ("model_id", "evaluation_name", "sample_id"):
        if not isinstance(row.get(name), str) or not row[name]:
            raise EvalLogError(f"{loc}: field '{name}' must be a non-empty string")
        names[name] = row[name]
    inp, out, ev = _object(row, loc, "input"), _object(row, loc, "output"), _object(row, loc, "evaluation")
    question = inp.get("raw")
    if not isinstance(question, str):
        raise EvalLogError(f"{loc}: field 'input.raw' must be a string")
    texts = _strings(out.get("raw"), loc, "output.raw")
    if not texts:
        raise EvalLogError(f"{loc}: field 'output.raw' holds no response (nothing to read as a reply)")
    # No reasoning is null or [] (the schema's converters write both)
    traces = _strings(out.get("reasoning_trace"), loc, "output.reasoning_trace", null=True) or None
    if traces is not None and len(traces) != len(texts):
        raise EvalLogError(f"{loc}: field 'output.reasoning_trace' has {len(traces)} entries for "
                           f"{len(texts)} responses in 'output.raw'")
    ok = ev.get("is_correct")
    if not isinstance(ok, bool):
        raise EvalLogError(f"{loc}: field 'evaluation.is_correct' must be true or false")
    refs = _strings(inp.get("reference", []), loc, "input.reference")
    meta = row.get("metadata") if isinstance(row.get("metadata"), Mapping) else {}
    stop = meta.get("otbench_stop")
    prompt = inp.get("formatted") if isinstance(inp.get("formatted"), str) else None
    replies = []
    for i, text in enumerate(texts):
        if traces is not None:      # the source separated the reasoning from the answer
            thinking, finished, answer = traces[i], bool(text.strip()), text or None
            text = traces[i] + text
        else:
            thinking, finished, answer = split_reasoning(text)
        replies.append(Reply(
            loc, "eee", names["evaluation_name"], names["model_id"], names["sample_id"], question, i,
            text, thinking, finished, answer,
            None if stop is None else stop == "thinking_limit",
            float(ok) if len(texts) == 1 else None, "is_correct", _final(row, loc),
            refs[0] if len(refs) == 1 else None, prompt))
    return replies
