"""Every Eval Ever instance-level records as another tool's log: the replies, their verdicts kept.

The records are written in the shapes Every Eval Ever's own converters give
them at schema 0.2.1 (HELM: `reasoning_trace` an empty list, the extracted
letter in a final `answer_attribution` entry; inspect-ai: the reasoning in
its own list), and each is checked against the published schema
(tests/fixtures/eee/) before it is read, so the reader is tested on records
the schema accepts.
"""

import json
from pathlib import Path

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from _bad_input import cli, refused
from otbench.evallogs import EvalLogError, detect_format, read_log
from otbench.probe.data import load_traces
from otbench.probe.stp._job import job_from_dict

SCHEMA = json.loads((Path(__file__).parent / "fixtures" / "eee" /
                     "instance_level_eval_0.2.1.schema.json").read_text())


def record(sample_id, raw, reasoning, correct, *, final=None, meta=None, kind="single_turn"):
    rec = {"schema_version": "0.2.1", "evaluation_id": "run-1", "model_id": "org/model",
           "evaluation_name": "sums", "sample_id": sample_id, "sample_hash": None,
           "interaction_type": kind,
           "input": {"raw": f"What is {sample_id}?", "reference": ["4"], "formatted": None},
           "output": {"raw": raw, "reasoning_trace": reasoning},
           "answer_attribution": [] if final is None else [
               {"turn_idx": 0, "source": "output.raw", "extracted_value": final,
                "extraction_method": "regex", "is_terminal": True}],
           "evaluation": {"score": float(correct), "is_correct": correct, "num_turns": None,
                          "tool_calls_count": None},
           "metadata": meta}
    return rec


def write(path, recs, *, valid=True):
    if valid:
        v = jsonschema.Draft7Validator(SCHEMA)
        for r in recs:
            assert [e.message for e in v.iter_errors(r)] == []
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return path


RECORDS = [
    record("a", [" 4"], [], True, final="4"),                                  # HELM: no reasoning
    record("b", ["The answer is 5."], ["2 + 3 is 5."], False, final="5"),        # inspect: separated
    record("c", ["<think>\n2 + 2 is", ], None, False),                           # markers, never closed
    record("d", ["<think>x</think>4", "<think>y</think>5"], None, True),        # two responses
    record("e", ["<think>long</think>"], None, False, meta={"otbench_stop": "thinking_limit"}),
]


def test_replies_keep_the_source_verdicts(tmp_path):
    p = write(tmp_path / "s.jsonl", RECORDS)
    assert detect_format(p) == "eee"
    reps = read_log(p)
    got = [(r.question_id, r.sample, r.thinking, r.finished, r.answer, r.verdict, r.extracted,
            r.reference, r.length_stop) for r in reps]
    assert got == [
        ("a", 0, " 4", None, None, 1.0, "4", "4", None),
        ("b", 0, "2 + 3 is 5.", True, "The answer is 5.", 0.0, "5", "4", None),
        ("c", 0, "2 + 2 is", False, None, 0.0, None, "4", None),
        # one verdict for two responses is no response's own verdict
        ("d", 0, "x", True, "4", None, None, "4", None), ("d", 1, "y", True, "5", None, None, "4", None),
        ("e", 0, "long", True, "", 0.0, None, "4", True),
    ]
    assert {(r.task, r.model, r.source, r.metric) for r in reps} == {("sums", "org/model", "eee", "is_correct")}
    assert reps[1].text == "2 + 3 is 5.The answer is 5."


def test_traces_for_the_probe_keep_the_verdicts(tmp_path):
    p = write(tmp_path / "s.jsonl", RECORDS[:3])
    recs, info = load_traces({"path": str(p), "format": "eee"})
    assert [(r.question_id, r.question_text, r.thinking, r.finished, r.verdict, r.metric) for r in recs] == [
        ("a", "What is a?", " 4", None, 1.0, "is_correct"),
        ("b", "What is b?", "2 + 3 is 5.", True, 0.0, "is_correct"),
        ("c", "What is c?", "2 + 2 is", False, 0.0, "is_correct")]
    assert info["format"] == "eee" and info["rows"] == 3
    job = job_from_dict({"model": {"name": "smollm2-135m-instruct"}, "data": {"source": "sums", "n": 2},
                         "trajectories": {"path": str(p), "format": "eee"}})
    assert job.trajectories["format"] == "eee"


BAD = [
    (lambda r: r.update(interaction_type="agentic", output=None, messages=[]),
     "field 'interaction_type' is 'agentic': only single_turn records hold their reply in 'output'"),
    (lambda r: r["output"].update(reasoning_trace=["a", "b"]),
     "field 'output.reasoning_trace' has 2 entries for 1 responses in 'output.raw'"),
    (lambda r: r["output"].update(raw=[]), "field 'output.raw' holds no response"),
    (lambda r: r["output"].update(raw=" 4"), "field 'output.raw' must be a list of strings"),
    (lambda r: r["evaluation"].pop("is_correct"), "field 'evaluation.is_correct' must be true or false"),
    (lambda r: r.update(sample_id=7), "field 'sample_id' must be a non-empty string"),
]


@pytest.mark.parametrize("edit,rule", BAD, ids=[str(i) for i in range(len(BAD))])
def test_bad_records_one_line(tmp_path, edit, rule):
    rec = record("a", [" 4"], [], True, final="4")
    edit(rec)
    p = write(tmp_path / "s.jsonl", [RECORDS[1], rec], valid=False)
    with pytest.raises(EvalLogError) as e:
        read_log(p, "eee")
    assert str(e.value) == f"{p}:2: {rule}" or str(e.value).startswith(f"{p}:2: {rule}"), str(e.value)
    refused(cli("audit-log", p, "--format", "eee"), f"{p}:2: {rule}")


def test_audit_log_reads_records_and_their_cuts(tmp_path):
    p = write(tmp_path / "s.jsonl", RECORDS)
    r = cli("audit-log", p)
    assert r.exit_code == 0, r.output
    # c never closed its thinking; e hit the limit by its metadata: 2 of 6 replies censored
    assert "sums / org/model: 2 of 6 replies censored" in r.output, r.output
    assert "1 never closed their thinking, 1 hit the length limit" in r.output, r.output


_json = st.recursive(st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=6),
                     lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=4), c, max_size=3),
                     max_leaves=5)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from([None, "input", "output", "evaluation", "metadata"]),
       st.sampled_from(["interaction_type", "model_id", "sample_id", "raw", "reasoning_trace", "reference",
                        "formatted", "is_correct", "otbench_stop", "answer_attribution", "input",
                        "output", "evaluation", "metadata"]), _json)
def test_any_edited_record_reads_or_is_one_line(where, key, value):
    import tempfile

    rec = record("b", ["The answer is 5."], ["2 + 3 is 5."], False, final="5", meta={})
    target = rec if where is None else rec[where]
    if isinstance(target, dict):
        target[key] = value
    with tempfile.TemporaryDirectory() as d:
        p = write(Path(d) / "s.jsonl", [rec], valid=False)
        try:
            reps = read_log(p, "eee")
        except EvalLogError as e:
            assert str(e).startswith(f"{p}:1: ") and "\n" not in str(e), str(e)
        else:
            assert len(reps) >= 1 and all(isinstance(r.thinking, str) for r in reps)


def test_a_line_past_the_bound_is_one_line(tmp_path, monkeypatch):
    """Every log row is read with a bound (a file without line breaks is not a log)."""
    import otbench.evallogs._read as rd

    p = write(tmp_path / "s.jsonl", RECORDS[:2])
    monkeypatch.setattr(rd, "MAX_LINE", len(p.read_bytes().splitlines()[0]) + 1)   # row 1 fits
    p.write_bytes(p.read_bytes().splitlines()[0] + b"\n" + b"x" * 5000 + b"\n")
    with pytest.raises(EvalLogError, match=r"s\.jsonl:2: line longer than 0 MiB \(not a JSONL record\)$"):
        read_log(p, "eee")
