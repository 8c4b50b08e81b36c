"""`otbench grade FILE.jsonl [--json OUT]`: per-line output, the otbench.grade/1 JSON, bad lines exit 2."""

import json
import os
import re

import pytest
from click.testing import CliRunner
from otbench.cli._grade import grade_cmd
from otbench.probe.grading._sandbox import sandbox_status

LINES = [
    {"task": "math", "reference": "\\frac{1}{2}", "response": "<think>\\boxed{3}</think>so \\boxed{0.5}"},
    {"task": "choice", "reference": "B", "response": "Answer: C"},
    {"task": "math", "reference": "7", "response": "seven"},
]
CODE = {"task": "code", "reference": "", "tests": [{"input": "1 2", "output": "3"}],
        "response": "```python\nprint(sum(map(int, input().split())))\n```"}


def write(tmp_path, rows, name="r.jsonl"):
    p = tmp_path / name
    # str rows are written as given (latin-1 keeps deliberately invalid UTF-8 bytes).
    p.write_bytes(b"".join((r.encode("latin-1") if isinstance(r, str) else json.dumps(r).encode())
                           + b"\n" for r in rows))
    return str(p)


def test_grades_lines_and_writes_json(tmp_path):
    path = write(tmp_path, [LINES[0], "", LINES[1], LINES[2]])  # a blank line 2 keeps numbering
    out = tmp_path / "g.json"
    r = CliRunner().invoke(grade_cmd, [path, "--json", str(out), "--workers", "0"])
    assert r.exit_code == 0, r.output
    rows = [line.split() for line in r.output.splitlines()]
    assert rows[0][:3] == ["1", "correct", "ok"]
    assert rows[1][:3] == ["3", "wrong", "wrong_answer"]
    assert rows[2][:3] == ["4", "wrong", "no_answer"]
    assert r.output.splitlines()[-1] == "1 of 3 correct"
    assert json.loads(out.read_text()) == {"schema": "otbench.grade/1", "results": [
        {"line": 1, "correct": True, "status": "ok"},
        {"line": 3, "correct": False, "status": "wrong_answer"},
        {"line": 4, "correct": False, "status": "no_answer"}]}


@pytest.mark.skipif(bool(sandbox_status()) and not os.environ.get("CI"), reason="no sandbox here")
def test_code_lines_through_worker_pool(tmp_path):
    # Default workers: the pool path, reference unused for code.
    path = write(tmp_path, [CODE, dict(CODE, response="```python\nprint(0)\n```")])
    out = tmp_path / "g.json"
    r = CliRunner().invoke(grade_cmd, [path, "--json", str(out)])
    assert r.exit_code == 0, r.output
    assert [x["status"] for x in json.loads(out.read_text())["results"]] == ["ok", "wrong_answer"]


def test_missing_sandbox_is_reported(tmp_path, monkeypatch):
    # No bwrap on PATH: the code line is a sandbox_error, with a warning naming the fix.
    monkeypatch.setenv("PATH", str(tmp_path))
    path = write(tmp_path, [CODE])
    r = CliRunner().invoke(grade_cmd, [path, "--workers", "0"])
    assert r.exit_code == 0
    assert "sandbox_error" in r.output
    assert "apt-get install -y bubblewrap" in r.output


# (line content, expected message after "FILE:2: ")
BAD = [
    ("{oops", r"not valid JSON \(Expecting property name enclosed in double quotes at column 2\)"),
    (b"\xff\xfe".decode("latin-1"), r"not UTF-8 text"),
    ("[1]", r"expected a JSON object, got list"),
    (json.dumps({"task": "math", "reference": "1", "respons": "x"}),
     r"unknown key 'respons' \(allowed: fn_name, n_options, reference, response, task, tests\)"),
    (json.dumps({"reference": "1", "response": "x"}), r"missing key 'task'"),
    (json.dumps({"task": "math", "reference": "1"}), r"missing key 'response'"),
    (json.dumps({"task": "math", "response": "x"}), r"missing key 'reference'"),
    (json.dumps({"task": "code", "response": "x"}), r"missing key 'tests' \(code responses need tests\)"),
    (json.dumps({"task": "essay", "reference": "", "response": ""}),
     r"`task` must be one of 'math', 'choice', 'code', got 'essay'\."),
    (json.dumps({"task": "code", "response": "x", "tests": [{"input": "1"}]}),
     r"`tests\[0\]` must have keys 'input' and 'output'\."),
    (json.dumps({"task": "math", "reference": 1, "response": "x"}), r"`reference` must be a string, got int\."),
]


@pytest.mark.parametrize("line,match", BAD)
def test_bad_line_exits_2_with_file_line_rule(tmp_path, line, match):
    path = write(tmp_path, [LINES[1], line])
    out = tmp_path / "g.json"
    r = CliRunner().invoke(grade_cmd, [path, "--json", str(out), "--workers", "0"])
    assert r.exit_code == 2
    assert re.fullmatch(re.escape(f"{path}:2: ") + match, r.output.strip().splitlines()[-1])
    assert not out.exists()  # nothing graded, nothing written


def test_empty_and_missing_files(tmp_path):
    path = write(tmp_path, ["", "  "])
    r = CliRunner().invoke(grade_cmd, [path])
    assert r.exit_code == 2 and r.output.strip() == f"{path}: no responses to grade"
    r = CliRunner().invoke(grade_cmd, [str(tmp_path / "none.jsonl")])
    assert r.exit_code == 2 and r.output.strip() == f"{tmp_path / 'none.jsonl'}: no such file"
