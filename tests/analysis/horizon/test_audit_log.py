"""`otbench audit-log` (issue 42 item 2): censoring in an evaluation log's scores, no probing.

The estimates are checked against a plain NumPy twin (means of item means, the
worst/best cases written out by hand) on ragged logs drawn by hypothesis; the
CLI on an lm-eval-format log with some replies cut prints the censored share and
the bounds; bad logs are one line, exit 2.
"""

import json
from pathlib import Path

import numpy as np
import pytest
from _evallogs import inspect_log
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from otbench.analysis.horizon import (
    audit_line,
    audit_replies,
    bounds_table,
    censoring_table,
    format_text,
)
from otbench.cli import main

from otbench.evallogs import read_log


def lm_eval_log(path: Path, outcomes) -> Path:
    """An lm-eval `--log_samples` file: one reply per document, `(finished, right)` each."""
    rows = []
    for k, (finished, right) in enumerate(outcomes):
        text = f"<think>\nadding</think>The answer is {k}." if finished else "<think>\nstill adding, then"
        rows.append({"doc_id": k, "doc": {"question_id": f"q{k}", "question": f"What is {k} + 0?"},
                     "target": str(k), "arguments": {"gen_args_0": {"arg_0": "Q", "arg_1": {"max_gen_toks": 32}}},
                     "resps": [[text]], "filtered_resps": [str(k) if finished else "[invalid]"],
                     "filter": "strict-match", "metrics": ["exact_match"], "exact_match": float(right)})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


# 10 documents: 7 finished (5 right), 3 never closed their thinking (scored wrong by the source)
OUTCOMES = [(True, True)] * 5 + [(True, False)] * 2 + [(False, False)] * 3


def test_audit_log_cli_prints_censored_share_and_bounds(tmp_path: Path):
    log = lm_eval_log(tmp_path / "tiny" / "samples_sums_2026-01-01T00-00-00.000000.jsonl", OUTCOMES)
    res = CliRunner().invoke(main, ["audit-log", str(log), "--replicates", "500", "--out", str(tmp_path / "audit")])
    assert res.exit_code == 0, res.output
    assert ("sums [strict-match] / tiny: 3 of 10 replies censored (30.0 %: 3 never closed their thinking, "
            "0 hit the length limit); reported 50.0 %, bounds [50.0 %, 80.0 %]") in res.output
    lines = res.output.splitlines()
    row = next(ln for ln in lines if ln.startswith("sums [strict-match]") and "exact_match" in ln)
    # reported = terminal-aware (the source read the cut text), worst 50 %, best 80 %, 30 pp open
    assert row.split()[-1] == "30.0" and "50.0 [" in row and "80.0 [" in row
    assert "not recorded" in next(ln for ln in lines if ln.startswith("sums [strict-match]") and "tiny" in ln
                                  and "exact_match" not in ln)   # lm-eval logs no reply lengths
    doc = json.loads((tmp_path / "audit" / "audit.json").read_text())
    (g,) = doc["groups"]
    assert (g["replies"], g["cut_n"], g["unclosed_n"], g["with_verdict"]) == (10, 3, 3, 10)
    assert g["finished"]["estimate"] == pytest.approx(5 / 7) and g["censored"]["estimate"] == 0.0
    assert (tmp_path / "audit" / "figures" / "audit_censoring.png").stat().st_size > 0
    assert (tmp_path / "audit" / "bounds.csv").read_text().startswith("# The reported score under censoring")


def _twin(reps):
    """Plain NumPy: per item, the mean of its replies; then the mean over items that have any."""
    items: dict = {}
    for r in reps:
        items.setdefault(r.question_id, []).append(r)

    def mean(f, keep):
        ms = [np.mean([f(r) for r in rs if keep(r)]) for rs in items.values() if any(keep(r) for r in rs)]
        return None if not ms else float(np.mean(ms))

    def v(r):
        return r.verdict is not None
    return {"cut": mean(lambda r: r.cut, lambda r: True),
            "unclosed": mean(lambda r: r.finished is False, lambda r: True),
            "reported": mean(lambda r: r.verdict, v),
            "finished": mean(lambda r: r.verdict, lambda r: v(r) and not r.cut),
            "censored": mean(lambda r: r.verdict, lambda r: v(r) and r.cut),
            "terminal_aware": mean(lambda r: r.verdict, v),
            "worst_case": mean(lambda r: 0.0 if r.cut else r.verdict, v),
            "best_case": mean(lambda r: 1.0 if r.cut else r.verdict, v)}


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.lists(st.tuples(st.sampled_from(["closed", "open", "plain", "length"]), st.booleans(),
                                   st.booleans()), min_size=1, max_size=4), min_size=1, max_size=6))
def test_audit_matches_numpy_twin_on_ragged_chat_logs(tmp_path_factory, items):
    # chat rows: each question a ragged number of replies; a label on some; length stops on some
    rows = []
    for i, replies in enumerate(items):
        for kind, right, labelled in replies:
            content = {"closed": "<think>\nr</think>4", "open": "<think>\nr", "plain": "4",
                       "length": "<think>\nr</think>4"}[kind]
            row = {"question_id": f"q{i}", "messages": [{"role": "user", "content": f"Q{i}"},
                                                        {"role": "assistant", "content": content}]}
            if kind == "length":
                row["finish_reason"] = "length"
            if labelled:
                row["correct"] = right
            rows.append(row)
    path = tmp_path_factory.mktemp("chat") / "log.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    reps = read_log(path)
    doc = audit_replies(reps, source=str(path), replicates=50)
    (g,) = doc["groups"]
    for name, want in _twin(reps).items():
        got = g[name]["estimate"]
        assert (got is None) == (want is None), name
        if want is not None:
            assert got == pytest.approx(want, abs=1e-12), name
            lo, hi = g[name]["ci"]
            assert lo <= got + 1e-12 and got - 1e-12 <= hi, name
    assert g["worst_case"]["estimate"] is None or \
        g["worst_case"]["estimate"] <= g["reported"]["estimate"] <= g["best_case"]["estimate"]
    assert g["cut_n"] == sum(r.cut for r in reps) and g["replies"] == len(reps)


def test_audit_of_an_inspect_mock_log_counts_the_length_limit(tmp_path: Path):
    class Q:
        def __init__(self, i):
            self.id, self.text, self.reference = f"q{i}", f"What is {i} + 1?", str(i + 1)

    qs = [Q(i) for i in range(4)]
    path = inspect_log(tmp_path, qs, ["<think>\na</think>The answer is 1", "<think>\nb</think>The answer is 7", "<think>\nc",
                                     "<think>\nd</think>The answer is 4"],
                       ["stop", "stop", "max_tokens", "max_tokens"])
    doc = audit_replies(read_log(path), source=str(path), replicates=100)
    (g,) = doc["groups"]
    assert (g["cut_n"], g["unclosed_n"], g["length_limit_n"], g["length_recorded"]) == (2, 1, 2, 4)
    # inspect's match scorer: q0 and q3 right; q3 hit max_tokens after its answer: censored, right
    assert g["reported"]["estimate"] == 0.5 and g["censored_right"] == 1
    assert (g["worst_case"]["estimate"], g["best_case"]["estimate"]) == (0.25, 0.75)
    text = format_text(censoring_table(doc)) + format_text(bounds_table(doc))
    assert "mockllm/model" in text and "match" in text
    assert audit_line(g).startswith("sums / mockllm/model: 2 of 4 replies censored (50.0 %")


@pytest.mark.parametrize("rows,message", [
    ([{"x": 1}], "log.jsonl:1: not a row of a known log"),
    ([{"doc_id": 0, "doc": {"question": "Q"}, "resps": [["a"]], "metrics": ["exact_match"], "exact_match": 2.0}],
     "log.jsonl:1: field 'exact_match' must be a verdict (true/false or a number in [0, 1]), got 2.0"),
    ([{"doc_id": 0, "doc": {"x": 1}, "resps": [["a"]]}], "log.jsonl:1: field 'doc' has no question id"),
])
def test_bad_logs_are_one_line(tmp_path: Path, rows, message):
    path = tmp_path / "log.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    res = CliRunner().invoke(main, ["audit-log", str(path), "--replicates", "10"])
    assert res.exit_code == 2 and message in res.output and "Traceback" not in res.output
    assert len([ln for ln in res.output.splitlines() if ln.strip()]) == 1


def test_a_prompt_that_opened_the_thinking_makes_a_bare_reply_unclosed(tmp_path: Path):
    # R1-style templates end the prompt with "<think>\n": the reply holds only the close, or none
    rows = [{"doc_id": k, "doc": {"question_id": f"q{k}", "question": "Q"}, "resps": [[text]],
             "arguments": {"gen_args_0": {"arg_0": "<|user|>Q<|assistant|><think>\n", "arg_1": {}}},
             "filter": "none", "metrics": ["exact_match"], "exact_match": v}
            for k, (text, v) in enumerate([("adding</think>The answer is 4.", 1.0), ("adding and adding", 0.0)])]
    path = tmp_path / "m" / "samples_t_2026-01-01T00-00-00.jsonl"
    path.parent.mkdir()
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    reps = read_log(path)
    assert [(r.thinking, r.finished, r.answer) for r in reps] == [
        ("adding", True, "The answer is 4."), ("adding and adding", False, None)]
    (g,) = audit_replies(reps, source=str(path), replicates=20)["groups"]
    assert (g["cut_n"], g["worst_case"]["estimate"], g["best_case"]["estimate"]) == (1, 0.5, 1.0)
