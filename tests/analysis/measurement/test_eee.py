"""Every Eval Ever records: export, validation against the published schema, import back.

The schema is the instance-level schema 0.2.1 as Every Eval Ever published it
(tests/fixtures/eee/README.md names its repository, tag, commit and hash);
every record is validated with `jsonschema` (a test dependency), so a record
other tools would refuse fails here.
"""

import json
from pathlib import Path

import jsonschema
import numpy as np
import pytest
from _bad_input import cli, refused, small_set
from _sets import build_set
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from otbench.analysis import from_ragged, ragged, save
from otbench.analysis.measurement import (
    EEE_SCHEMA_VERSION,
    MeasurementSetError,
    eee_records,
    export_eee,
    export_jsonl,
    import_eee,
    simulate,
)

SCHEMA = Path(__file__).resolve().parents[2] / "fixtures" / "eee" / "instance_level_eval_0.2.1.schema.json"


@pytest.fixture(scope="module")
def validator():
    schema = json.loads(SCHEMA.read_text())
    jsonschema.Draft7Validator.check_schema(schema)
    return jsonschema.Draft7Validator(schema)


def cut_set():
    """Two trajectories of one question; the second cut at the thinking limit (censored)."""
    return from_ragged(model=["m", "m"], group=["g", "g"], question=["q0", "q0"],
                       trajectory=np.array([0, 1]), probes=np.array([4, 4]),
                       L=ragged([[0, 5, 9], [0, 7, 16, 30]], np.int64),
                       C=ragged([[0, 3, 4], [1, 2, 2, 0]], np.int64),
                       y=np.array([1, 0]), finished=np.array([True, False]),
                       question_text=["What is 2 + 2?", "What is 2 + 2?"])


def canonical(ms, path):
    export_jsonl(ms, path)
    return path.read_text()


@pytest.mark.parametrize("make", [small_set, cut_set, lambda: simulate("tiny", seed=3),
                                  lambda: simulate("tiny", seed=5, field_signals=True, peer_signals=True)],
                         ids=["small", "cut", "simulated", "simulated-with-signals"])
def test_round_trip_validates_and_keeps_everything(tmp_path, validator, make):
    ms = make()
    out = tmp_path / "records.jsonl"
    assert export_eee(ms, out) == ms.num_trajectories
    records = [json.loads(line) for line in out.read_text().splitlines()]
    for rec in records:
        errors = [e.message for e in validator.iter_errors(rec)]
        assert errors == [], errors
        assert rec["schema_version"] == EEE_SCHEMA_VERSION
    back = import_eee(out)
    assert sorted(back.signals) == sorted(ms.signals)
    # Every column (L, C, y, finished, ids, texts, signals, split, the synthetic label) survives.
    assert canonical(back, tmp_path / "b.jsonl") == canonical(ms, tmp_path / "a.jsonl")
    assert back.synthetic == ms.synthetic
    np.testing.assert_array_equal(back.y, ms.y)
    for c in range(ms.num_cells):      # the same full-thinking accuracy per cell
        assert back.y[back.cell_rows(c)].mean() == ms.y[ms.cell_rows(c)].mean()


def test_record_fields_and_censoring(tmp_path):
    """The mapping of docs/rules.md, on a record by hand; the cut reply keeps its censoring."""
    ms = cut_set()
    full, cut = list(eee_records(ms))
    assert cut["model_id"] == "m" and cut["evaluation_name"] == "g" and cut["sample_id"] == "q0"
    assert cut["input"] == {"raw": "What is 2 + 2?", "reference": []}
    assert cut["evaluation"] == {"score": 0.0, "is_correct": False}
    assert full["evaluation"] == {"score": 1.0, "is_correct": True}
    assert [a["extracted_value"] for a in cut["answer_attribution"]] == ["1/4", "2/4", "2/4", "0/4"]
    assert not any(a["is_terminal"] for a in cut["answer_attribution"])
    meta = cut["metadata"]
    assert (meta["otbench_L"], meta["otbench_thinking_tokens"], meta["otbench_steps"]) == ("[0,7,16,30]", "30", "3")
    assert (meta["otbench_finished"], meta["otbench_stop"], meta["otbench_censored"]) == \
        ("false", "thinking_limit", "true")
    assert (full["metadata"]["otbench_stop"], full["metadata"]["otbench_censored"]) == ("end_of_thinking", "false")
    export_eee(ms, tmp_path / "r.jsonl")
    assert import_eee(tmp_path / "r.jsonl").finished.tolist() == [True, False]


def _tokens_table(ms):
    """A probe-shaped `tokens` table (the probe's column names): ids counted, never decoded."""
    import pyarrow as pa

    ids = pa.list_(pa.int32())
    rows = [(ms.models[ms.cell_model[ms.cell[t]]], ms.groups[ms.cell_group[ms.cell[t]]],
             ms.question_id[ms.question[t]], int(ms.trajectory[t])) for t in range(ms.num_trajectories)]
    return pa.table({"model": [r[0] for r in rows], "group": [r[1] for r in rows],
                     "question": [r[2] for r in rows],
                     "trajectory": pa.array([r[3] for r in rows], pa.int32()),
                     "prompt": pa.array([[1] * (5 + t) for t in range(len(rows))], ids),
                     "thinking": pa.array([[2] * int(ms.L[t, ms.n[t]]) for t in range(len(rows))], ids),
                     "answer": pa.array([[3] * 2 if ms.finished[t] else [] for t in range(len(rows))], ids)})


def test_token_usage_from_a_probe_sets_tokens_table(tmp_path, validator):
    ms = cut_set()
    full, cut = list(eee_records(ms, tokens=_tokens_table(ms)))
    assert full["token_usage"] == {"input_tokens": 5, "output_tokens": 11, "total_tokens": 16,
                                   "reasoning_tokens": 9}
    assert cut["token_usage"] == {"input_tokens": 6, "output_tokens": 30, "total_tokens": 36,
                                  "reasoning_tokens": 30}
    for rec in (full, cut):
        assert [e.message for e in validator.iter_errors(rec)] == []
    # a table of other columns (not the probe's) gives no counts rather than wrong ones
    import pyarrow as pa
    other = pa.table({"row": [0, 1]})
    assert all("token_usage" not in r for r in eee_records(ms, tokens=other))
    save(ms, tmp_path / "set", extra_tables={"tokens": _tokens_table(ms)})
    r = cli("export", tmp_path / "set", "--format", "eee", "--out", tmp_path / "r.jsonl")
    assert r.exit_code == 0, r.output
    got = [json.loads(line)["token_usage"]["reasoning_tokens"] for line in open(tmp_path / "r.jsonl")]
    assert got == [9, 30]
    assert canonical(import_eee(tmp_path / "r.jsonl"), tmp_path / "b.jsonl") == canonical(ms, tmp_path / "a.jsonl")


def test_text_with_a_decoder_and_read_back_as_traces(tmp_path, validator):
    """With the tokenizer's `ids -> text` the records carry the thinking and the answer; another
    reader of EEE (otbench's own log reader) then sees the cut reply as cut."""
    from otbench.evallogs import read_log

    ms = cut_set()
    decode = lambda ids: "t" * len(ids)                           # noqa: E731 (a stand-in tokenizer)
    full, cut = list(eee_records(ms, tokens=_tokens_table(ms), decode=decode))
    assert full["output"] == {"raw": ["tt"], "reasoning_trace": ["t" * 9]}
    assert cut["output"] == {"raw": [""], "reasoning_trace": ["t" * 30]}
    for rec in (full, cut):
        assert [e.message for e in validator.iter_errors(rec)] == []
    export_eee(ms, tmp_path / "r.jsonl", tokens=_tokens_table(ms), decode=decode)
    assert canonical(import_eee(tmp_path / "r.jsonl"), tmp_path / "b.jsonl") == canonical(ms, tmp_path / "a.jsonl")
    reps = read_log(tmp_path / "r.jsonl", "eee")
    assert [(r.finished, r.length_stop, r.cut, r.verdict) for r in reps] == [
        (True, False, False, 1.0), (False, True, True, 0.0)]


def test_synthetic_says_so_in_every_record():
    for rec in eee_records(simulate("tiny", seed=1)):
        assert rec["evaluation_id"].startswith("otbench-synthetic/")
        assert rec["metadata"]["otbench_synthetic"] == "true"
    assert all(r["evaluation_id"].startswith("otbench/") for r in eee_records(small_set()))


def test_the_schema_check_can_fail(validator):
    """The validation is not vacuous: a finish reason, the field the schema lacks, is refused."""
    rec = next(eee_records(cut_set()))
    rec["finish_reason"] = "length"
    assert any("Additional properties" in e.message for e in validator.iter_errors(rec))
    rec = next(eee_records(cut_set()))
    rec["metadata"]["otbench_probes"] = 4
    assert any("is not of type 'string'" in e.message for e in validator.iter_errors(rec))


def _one(tmp_path, edit):
    rec = next(eee_records(cut_set()))
    edit(rec)
    p = tmp_path / "bad.jsonl"
    p.write_text(json.dumps(rec) + "\n")
    return p


def _deep(rec):
    rec["metadata"]["otbench_L"] = "[" * 100 + "]" * 100


BAD = [
    (lambda r: r.update(finish_reason="length"),
     "unknown field 'finish_reason' (the schema 0.2.1 allows no other)"),
    (lambda r: r.update(schema_version="0.3.0"), "schema_version must be '0.2.1', got \"0.3.0\""),
    (lambda r: r.update(interaction_type="agentic"), "interaction_type must be \"single_turn\""),
    (lambda r: r.pop("evaluation"), "missing 'evaluation' (required by the schema)"),
    (lambda r: r["evaluation"].update(score=0.5),
     "evaluation.score 0.5 disagrees with is_correct true (a kept verdict is 0 or 1)"),
    (lambda r: r.update(metadata={"subject": "math"}), "metadata has no otbench_L: not an otbench export"),
    (lambda r: r["metadata"].update(otbench_probes="four"),
     "metadata.otbench_probes must be an integer >= 1 as text, got \"four\""),
    (lambda r: r["metadata"].update(otbench_censored="true"),
     "metadata.otbench_censored must be the opposite of otbench_finished"),
    (lambda r: r["answer_attribution"][1].update(extracted_value="2 of 4"),
     "answer_attribution[1]: extracted_value must be \"C/P\""),
    (lambda r: r["answer_attribution"][1].update(extracted_value="2/8"),
     "answer_attribution[1]: extracted_value '2/8' counts of 8 answers but metadata.otbench_probes is 4"),
    (lambda r: r["answer_attribution"].pop(),
     "metadata.otbench_L has 3 positions but answer_attribution 2 cuts"),
    (_deep, "metadata.otbench_L: not accepted JSON (nested deeper than 64 levels)"),
    (lambda r: r["answer_attribution"][2].update(extracted_value="5/4"), "C[2]=5 is outside 0..4 (probes)"),
]


@pytest.mark.parametrize("edit,rule", BAD, ids=[str(i) for i in range(len(BAD))])
def test_bad_record_one_line_naming_file_record_and_rule(tmp_path, edit, rule):
    p = _one(tmp_path, edit)
    with pytest.raises(MeasurementSetError) as e:
        import_eee(p)
    assert str(e.value).startswith(f"{p}:1: "), str(e.value)
    assert rule in str(e.value), str(e.value)
    refused(cli("import", "--format", "eee", p, "--out", tmp_path / "set"), f"{p}:1: ", rule)
    assert not (tmp_path / "set").exists()      # nothing written


def test_bad_later_record_names_its_line(tmp_path):
    p = tmp_path / "r.jsonl"
    export_eee(cut_set(), p)
    p.write_text(p.read_text() + "\n{not json\n")
    with pytest.raises(MeasurementSetError, match=r"r\.jsonl:4: malformed JSON"):
        import_eee(p)


def test_cli_round_trip_and_output_rules(tmp_path):
    ms = build_set([("m", "g", "q0", 0, 2, [0, 5, 9], [0, 1, 2], 1),
                    ("m", "g", "q1", 0, 2, [0, 4], [0, 0], 0)])
    save(ms, tmp_path / "set")
    r = cli("export", tmp_path / "set", "--format", "eee", "--out", tmp_path / "r.jsonl")
    assert r.exit_code == 0, r.output
    assert "exported 2 Every Eval Ever records (schema 0.2.1)" in r.output
    r = cli("import", "--format", "eee", tmp_path / "r.jsonl", "--out", tmp_path / "back")
    assert r.exit_code == 0, r.output
    r = cli("export", tmp_path / "back", "--out", tmp_path / "back.jsonl")
    assert r.exit_code == 0, r.output
    assert (tmp_path / "back.jsonl").read_text() == canonical(ms, tmp_path / "a.jsonl")
    # outputs never land on inputs; --format eee names the output it shapes
    refused(cli("export", tmp_path / "set", "--format", "eee", "--out", tmp_path / "set" / "manifest.json"),
            "refusing to write onto an input")
    refused(cli("import", "--format", "eee", tmp_path / "r.jsonl", "--out", tmp_path),
            "is the input", "refusing to write onto an input")
    refused(cli("export", tmp_path / "set", "--format", "eee", "--hub-dir", tmp_path / "hub"),
            "--format eee is the format of --out FILE; give --out")


_json = st.recursive(st.none() | st.booleans() | st.integers(-10**12, 10**12) | st.floats(allow_nan=False, allow_infinity=False)
                     | st.text(max_size=8), lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=5), c, max_size=3),
                     max_leaves=6)
_paths = st.sampled_from([
    (), ("input",), ("output",), ("evaluation",), ("metadata",), ("answer_attribution", 0),
    ("answer_attribution", 1)])
_keys = st.sampled_from(["schema_version", "model_id", "sample_id", "interaction_type", "raw", "score",
                         "is_correct", "extracted_value", "is_terminal", "extraction_method",
                         "otbench_L", "otbench_probes", "otbench_finished", "otbench_censored",
                         "otbench_signals", "otbench_split", "otbench_input", "otbench_trajectory", "x",
                         "input", "output", "evaluation", "metadata", "answer_attribution"])
_text_values = st.sampled_from(["", "1", "-1", "true", "[0,1]", "[[0]]", "{}", '{"s":[1,2]}', "1/4", "4/4",
                                "train", "question_text", "0.2.1", "9999999999"])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(_paths, _keys, _json | _text_values), min_size=1, max_size=3))
def test_any_edited_record_imports_or_is_one_line(tmp_path_factory, edits):
    rec = next(eee_records(cut_set()))
    for path, key, value in edits:
        target = rec
        for step in path:
            if isinstance(target, dict) and isinstance(step, str):
                target = target.get(step)
            elif isinstance(target, list) and isinstance(step, int) and step < len(target):
                target = target[step]
            else:
                target = None
        if isinstance(target, dict):
            target[key] = value
    p = tmp_path_factory.mktemp("e") / "r.jsonl"
    p.write_text(json.dumps(rec) + "\n")
    try:
        ms = import_eee(p)
    except MeasurementSetError as e:
        assert str(e).startswith(f"{p}:1") and "\n" not in str(e), str(e)
    else:
        assert ms.num_trajectories == 1
