"""Every Eval Ever (EEE) instance-level records: a measurement set in the field's per-sample schema.

One record per trajectory, in the instance-level schema 0.2.1 of Every Eval
Ever (github.com/evaleval/every_eval_ever, `instance_level_eval.schema.json`
at tag v0.2.1; the copy the tests validate against is
`tests/fixtures/eee/`). The schema forbids fields of its own objects beyond
those it names, has no finish reason and no place for a probe curve, so
what is otbench's travels in `metadata` (string values only, its one open
map). The mapping, field by field, is in docs/rules.md ("Every Eval Ever
records"):

* `model_id` the model, `evaluation_name` the benchmark group, `sample_id`
  the question id, `input.raw` the question text (the id where the set has no
  text), `input.reference` empty (a set stores verdicts, not references);
* `evaluation.is_correct` / `score` the trajectory's own verdict `y`;
* `answer_attribution`: per cut `k = 0..n` one non-final entry whose
  `extracted_value` is `"C/P"`, the correct forced answers among the `P` at
  that cut (a set stores their count, not their text);
* `metadata`: `otbench_L` (the retained thinking tokens at each cut),
  `otbench_thinking_tokens` (`L(n)`), `otbench_finished`, `otbench_stop`
  (`end_of_thinking` or `thinking_limit`: the reply was cut), `otbench_censored`,
  and the rest of the trajectory's row.

`import_eee` reads these records back into the same set (the verdicts kept
as `y`); a record without otbench's metadata (another tool's) has no probe
curve and is refused in one line.
"""

import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path

from otbench.files import loads_json, write_text_atomic

from ._build import MeasurementSetError
from ._jsonl import _parse_line, build_records, iter_records, parse_lines
from ._types import MeasurementSet

EEE_SCHEMA_VERSION = "0.2.1"
"""The instance-level schema the records follow (the `SCHEMA_VERSION` its converters write)."""
FORCED = "otbench_forced_answers_correct"
"""`extraction_method` of a cut's entry: its `extracted_value` is "C/P"."""
_TOP = ("schema_version", "evaluation_id", "model_id", "evaluation_name", "sample_id",
        "sample_hash", "interaction_type", "input", "output", "messages", "answer_attribution",
        "evaluation", "token_usage", "performance", "error", "metadata")
_REQUIRED = ("schema_version", "evaluation_id", "model_id", "evaluation_name", "sample_id",
             "interaction_type", "input", "answer_attribution", "evaluation")
_META_REQUIRED = ("otbench_trajectory", "otbench_probes", "otbench_L", "otbench_finished",
                  "otbench_censored", "otbench_dataset", "otbench_input")


def _flag(v: bool) -> str:
    return "true" if v else "false"


def _sample_hash(raw: str, reference: list[str]) -> str:
    # As the schema's converters compute it: sha256 of input.raw + the joined references
    # (every_eval_ever v0.2.1, eval_converters/inspect/instance_level_adapter.py, line 209).
    return hashlib.sha256((raw + "".join(reference)).encode("utf-8")).hexdigest()


_TOKEN_KEYS = ("model", "group", "question", "trajectory")
_TOKEN_PARTS = ("prompt", "thinking", "answer")


def _token_info(tokens, decode=None) -> dict[tuple, tuple[dict, tuple[str, str] | None]]:
    """Per trajectory of a probe set's `tokens` table: its `token_usage`, and with `decode`
    (`ids -> text`) its thinking and answer as text; empty without the probe's columns.

    The ids are counted as stored: input the prompt, reasoning the stored thinking, output the
    thinking and the answer (the reply the model generated).
    """
    if tokens is None or not set(_TOKEN_KEYS + _TOKEN_PARTS) <= set(tokens.column_names):
        return {}
    import pyarrow.compute as pc

    n = {c: [x or 0 for x in pc.list_value_length(tokens[c]).to_pylist()] for c in _TOKEN_PARTS}
    keys = list(zip(*(tokens[c].to_pylist() for c in _TOKEN_KEYS)))
    texts: list = [None] * len(keys)
    if decode is not None:
        think, answer = tokens["thinking"].to_pylist(), tokens["answer"].to_pylist()
        texts = [(decode(t or []), decode(a or [])) for t, a in zip(think, answer)]
    return {k: ({"input_tokens": p, "output_tokens": t + a, "total_tokens": p + t + a,
                 "reasoning_tokens": t}, text)
            for k, p, t, a, text in zip(keys, n["prompt"], n["thinking"], n["answer"], texts)}


def _record(rec: dict, evaluation: str) -> dict:
    L, C, P = rec["L"], rec["C"], rec["probes"]
    text = rec["question_text"]
    raw = text if text is not None else rec["question"]
    meta = {
        "otbench_trajectory": str(rec["trajectory"]), "otbench_probes": str(P),
        "otbench_L": json.dumps(L, separators=(",", ":")),
        "otbench_thinking_tokens": str(L[-1]), "otbench_steps": str(len(L) - 1),
        "otbench_finished": _flag(rec["finished"]),
        "otbench_stop": "end_of_thinking" if rec["finished"] else "thinking_limit",
        "otbench_censored": _flag(not rec["finished"]),
        "otbench_dataset": rec["dataset"],
        "otbench_input": "question_text" if text is not None else "question_id",
        "otbench_synthetic": _flag(rec.get("synthetic", False)),
    }
    if rec["split"] is not None:
        meta["otbench_split"] = rec["split"]
    if "signals" in rec:
        meta["otbench_signals"] = json.dumps(rec["signals"], separators=(",", ":"))
    cuts = [{"turn_idx": 0, "source": f"otbench forced answers at cut k={k} (the first {L[k]} "
                                      f"thinking tokens)",
             "extracted_value": f"{C[k]}/{P}", "extraction_method": FORCED, "is_terminal": False}
            for k in range(len(L))]
    return {
        "schema_version": EEE_SCHEMA_VERSION, "evaluation_id": evaluation,
        "model_id": rec["model"], "evaluation_name": rec["group"], "sample_id": rec["question"],
        "sample_hash": _sample_hash(raw, []), "interaction_type": "single_turn",
        "input": {"raw": raw, "reference": []},
        "output": {"raw": [], "reasoning_trace": None},
        "answer_attribution": cuts,
        "evaluation": {"score": float(rec["y"]), "is_correct": bool(rec["y"])},
        "error": None, "metadata": meta,
    }


def eee_records(ms: MeasurementSet, *, tokens=None, decode=None) -> Iterator[dict]:
    """The set's trajectories as EEE instance-level records, in row order.

    `tokens`: the set's `tokens` table (a probe set's, `load_table(SET, "tokens")`);
    with it each record's `token_usage` counts the trajectory's prompt, thinking and
    answer ids. Without it (or for a trajectory it lacks) `token_usage` is absent.
    `decode` (`ids -> text`, the model's tokenizer): with `tokens`, each record's
    `output` holds the answer (`raw`, "" where there is none) and the thinking
    (`reasoning_trace`) as text.

    `evaluation_id` (the schema's key to an aggregate record) is
    `otbench/<first 16 hex of the set's content hash>/<model>/<group>`
    (`otbench-synthetic/...` for a synthetic set).
    """
    from ._io import content_hash

    # A synthetic set says so in the one key every reader of the records sees.
    head = f"otbench{'-synthetic' if ms.synthetic else ''}/{content_hash(ms)[:16]}"
    info = _token_info(tokens, decode)
    for rec in iter_records(ms):
        out = _record(rec, f"{head}/{rec['model']}/{rec['group']}")
        usage, text = info.get(tuple(rec[k] for k in _TOKEN_KEYS), (None, None))
        if usage is not None:
            out["token_usage"] = usage
        if text is not None:
            out["output"] = {"raw": [text[1]], "reasoning_trace": [text[0]]}
        yield out


def export_eee(ms: MeasurementSet, path: str | os.PathLike, *, tokens=None, decode=None) -> int:
    """Write the set as EEE instance-level JSONL atomically; returns the number of records.

    `tokens`, `decode`: the set's `tokens` table and the tokenizer's `ids -> text`, for each
    record's `token_usage` and text (`eee_records`).
    """
    lines = [json.dumps(r, ensure_ascii=False) + "\n"
             for r in eee_records(ms, tokens=tokens, decode=decode)]
    write_text_atomic(path, "".join(lines))
    return len(lines)


def _want(where: str, obj: dict, key: str, kind: type | tuple, what: str):
    if key not in obj:
        raise MeasurementSetError(where, f"missing {key!r}")
    v = obj[key]
    if not isinstance(v, kind) or (kind is not bool and isinstance(v, bool)):
        raise MeasurementSetError(where, f"{key} must be {what}, got {json.dumps(v)[:60]}")
    return v


def _int_text(where: str, key: str, text: str, lo: int) -> int:
    if not (text.isascii() and text.isdigit()) or len(text) > 10 or int(text) < lo:
        raise MeasurementSetError(where, f"metadata.{key} must be an integer >= {lo} as text, "
                                         f"got {json.dumps(text)[:60]}")
    return int(text)


def _bool_text(where: str, key: str, text: str) -> bool:
    if text not in ("true", "false"):
        raise MeasurementSetError(where, f"metadata.{key} must be \"true\" or \"false\", "
                                         f"got {json.dumps(text)[:60]}")
    return text == "true"


def _cuts(where: str, items: list, P: int) -> list[int]:
    """C(k) from the cut entries, in order, each "C/P" with the record's P."""
    C = []
    for i, item in enumerate(items):
        at = f"{where}: answer_attribution[{i}]"
        if not isinstance(item, dict):
            raise MeasurementSetError(at, "must be an object")
        if item.get("extraction_method") != FORCED:
            continue            # another tool's entry (a final answer, say): not a cut
        if item.get("is_terminal") is not False:
            raise MeasurementSetError(at, f"a cut's forced answers are not final (is_terminal "
                                          f"must be false, got {json.dumps(item.get('is_terminal'))})")
        value = item.get("extracted_value")
        parts = value.split("/") if isinstance(value, str) else []
        if len(parts) != 2 or not all(p.isascii() and p.isdigit() and len(p) <= 10 for p in parts):
            raise MeasurementSetError(at, f"extracted_value must be \"C/P\" (correct forced answers "
                                          f"of P), got {json.dumps(value)[:60]}")
        if int(parts[1]) != P:
            raise MeasurementSetError(at, f"extracted_value {value!r} counts of {parts[1]} answers "
                                          f"but metadata.otbench_probes is {P}")
        C.append(int(parts[0]))
    return C


def _meta(where: str, obj: dict) -> dict[str, str]:
    meta = obj.get("metadata")
    if not isinstance(meta, dict) or "otbench_L" not in meta:
        raise MeasurementSetError(where, "metadata has no otbench_L: not an otbench export (a "
                                         "measurement set needs the forced answers at each cut; "
                                         "docs/guides/eee.md)")
    for key in _META_REQUIRED:
        if key not in meta:
            raise MeasurementSetError(where, f"metadata.{key} is missing")
    for key, v in meta.items():
        if not isinstance(v, str):
            raise MeasurementSetError(where, f"metadata.{key} must be a string (the schema's "
                                             f"metadata holds strings), got {json.dumps(v)[:60]}")
    return meta


def _top(where: str, obj) -> None:
    """The record's own shape: an object of the schema's fields, a single-turn 0.2.1 record."""
    if not isinstance(obj, dict):
        raise MeasurementSetError(where, "expected a JSON object (one EEE record per line)")
    for key in obj:
        if key not in _TOP:
            raise MeasurementSetError(where, f"unknown field {key!r} (the schema {EEE_SCHEMA_VERSION} "
                                             f"allows no other)")
    for key in _REQUIRED:
        if key not in obj:
            raise MeasurementSetError(where, f"missing {key!r} (required by the schema)")
    for key in ("model_id", "evaluation_name", "sample_id"):
        if not isinstance(obj[key], str) or not obj[key]:
            raise MeasurementSetError(where, f"{key} must be a non-empty string, got "
                                             f"{json.dumps(obj[key])[:60]}")
    if obj["schema_version"] != EEE_SCHEMA_VERSION:
        raise MeasurementSetError(where, f"schema_version must be {EEE_SCHEMA_VERSION!r}, got "
                                         f"{json.dumps(obj['schema_version'])[:60]}")
    if obj["interaction_type"] != "single_turn":
        raise MeasurementSetError(where, f"interaction_type must be \"single_turn\" (one reply "
                                         f"per trajectory), got {json.dumps(obj['interaction_type'])[:60]}")


def _verdict(where: str, obj: dict) -> int:
    """The record's own verdict, kept as `y`: is_correct, with a score that agrees."""
    ev = _want(where, obj, "evaluation", dict, "an object")
    ok = _want(where, ev, "is_correct", bool, "true or false")
    score = _want(where, ev, "score", (int, float), "a number")
    if score != float(ok):
        raise MeasurementSetError(where, f"evaluation.score {score} disagrees with is_correct "
                                         f"{json.dumps(ok)} (a kept verdict is 0 or 1)")
    return int(ok)


def _parse_eee(where: str, obj) -> dict:
    """One record -> the canonical trajectory dict (`_jsonl._parse_line` checks it then)."""
    _top(where, obj)
    y = _verdict(where, obj)
    meta = _meta(where, obj)
    P = _int_text(where, "otbench_probes", meta["otbench_probes"], 1)
    L = loads_json(meta["otbench_L"], f"{where}: metadata.otbench_L")
    items = _want(where, obj, "answer_attribution", list, "a list")
    C = _cuts(where, items, P)
    if not isinstance(L, list) or len(C) != len(L):
        n = len(L) if isinstance(L, list) else "not a list of"
        raise MeasurementSetError(where, f"metadata.otbench_L has {n} positions but "
                                         f"answer_attribution {len(C)} cuts ({FORCED})")
    finished = _bool_text(where, "otbench_finished", meta["otbench_finished"])
    if _bool_text(where, "otbench_censored", meta["otbench_censored"]) == finished:
        raise MeasurementSetError(where, "metadata.otbench_censored must be the opposite of "
                                         "otbench_finished (a reply cut at the limit is censored)")
    inp = _want(where, obj, "input", dict, "an object")
    raw = _want(where, inp, "raw", str, "a string")
    if meta["otbench_input"] not in ("question_text", "question_id"):
        raise MeasurementSetError(where, "metadata.otbench_input must be \"question_text\" or "
                                         f"\"question_id\", got {json.dumps(meta['otbench_input'])[:60]}")
    rec = {"model": obj["model_id"], "group": obj["evaluation_name"], "question": obj["sample_id"],
           "trajectory": _int_text(where, "otbench_trajectory", meta["otbench_trajectory"], 0),
           "probes": P, "L": L, "C": C, "y": y, "finished": finished,
           "dataset": meta["otbench_dataset"], "split": meta.get("otbench_split"),
           "question_text": raw if meta["otbench_input"] == "question_text" else None,
           "synthetic": _bool_text(where, "otbench_synthetic", meta.get("otbench_synthetic", "false"))}
    if "otbench_signals" in meta:
        rec["signals"] = loads_json(meta["otbench_signals"], f"{where}: metadata.otbench_signals")
    return _parse_line(where, rec)


def import_eee(path: str | os.PathLike, *, synthetic: bool = False) -> MeasurementSet:
    """Read EEE instance-level JSONL written by `export_eee` back into a `MeasurementSet`.

    Each record's `evaluation.is_correct` is kept as the trajectory's `y`.
    Raises `MeasurementSetError` (``FILE:LINE: rule``) at the first bad record;
    lines are bounded as in `import_jsonl`, JSON through the guarded reader.
    """
    path = Path(path)
    recs, lines = parse_lines(path, _parse_eee)
    return build_records(recs, lines, str(path), synthetic=synthetic,
                         provenance={"source": {"eee": path.name, "schema_version": EEE_SCHEMA_VERSION}})
