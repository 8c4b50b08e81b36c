"""Hostile benchmark and trace files give one `DatasetError` line (issue 24, items 4 and 5).

Every record goes through the one guarded JSON reader, so a duplicate key
(last wins), deep nesting (a RecursionError), a lone surrogate or a
5,000-digit number is refused with its file and line; NUL and a byte-order
mark inside the text are refused in every format; a file without records is
refused instead of giving zero questions; a functional test's `fn_name` may
not be a dunder.
"""

import base64
import json
import pickle
import zlib

import pytest
from otbench.probe.data import load_benchmark
from otbench.probe.data._benchmarks import DatasetError

GPQA_HEAD = "Question,Correct Answer,Incorrect Answer 1,Incorrect Answer 2,Incorrect Answer 3,Record ID\n"
ROW = {"problem": "p", "answer": "1", "unique_id": "a"}

CASES = {
    "empty.jsonl": (b"", "empty.jsonl: no records (an empty benchmark file)"),
    "blank.jsonl": (b"\n \n", "blank.jsonl: no records (an empty benchmark file)"),
    "deep.jsonl": (b'{"problem": ' + b"[" * 100_000 + b"]" * 100_000 + b"}\n",
                   "deep.jsonl:1: not accepted JSON (nested deeper than 64 levels)"),
    "dup.jsonl": (b'{"problem": "p", "answer": "1", "answer": "2", "unique_id": "a"}\n',
                  "dup.jsonl:1: not accepted JSON (duplicate key 'answer' in one object)"),
    "surrogate.jsonl": (b'{"problem": "p\\ud800", "answer": "1", "unique_id": "a"}\n',
                        "surrogate.jsonl:1: not accepted JSON (string 'p\\ud800' holds a lone "
                        "surrogate"),
    "digits.jsonl": (b'{"problem": "p", "answer": "1", "unique_id": ' + b"9" * 5000 + b"}\n",
                     "digits.jsonl:1: not accepted JSON (integer with 5000 digits is beyond int64)"),
    "nul.jsonl": (json.dumps({**ROW, "problem": "p\x00q"}).encode() + b"\n",
                  "nul.jsonl:1: text holds NUL (U+0000); not a clean text file"),
    "bom.jsonl": (b"\xef\xbb\xbf" + json.dumps(ROW).encode() + b"\n", "bom.jsonl:1: "),
    "empty.parquet": (b"", "empty.parquet: not a readable Parquet file"),
    "empty.csv": (b"", "empty.csv: empty CSV file (no header row)"),
    "header.csv": (GPQA_HEAD.encode(), "header.csv: no records (an empty benchmark file)"),
    "nul.csv": ((GPQA_HEAD + "q\x00x,a,b,c,d,r1\n").encode(),
                "nul.csv:row 1: text holds NUL (U+0000); not a clean text file"),
    # the one CSV reader (otbench.files.csv_records): the record's line, the parser's rule
    "wide.csv": ((GPQA_HEAD + "q,a,b,c,d,r1\n" + "x" * 200_000 + ",a,b,c,d,r2\n").encode(),
                 "wide.csv, line 3: not valid CSV (field larger than field limit"),
    "bom.csv": ((GPQA_HEAD + "\ufeffq,a,b,c,d,r1\n").encode(),
                "bom.csv:row 1: text holds a byte-order mark (U+FEFF); not a clean text file"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_hostile_benchmark_files(name, tmp_path):
    data, needle = CASES[name]
    p = tmp_path / name
    p.write_bytes(data)
    bench = "GPQA-Diamond" if name.endswith(".csv") else "MATH500"
    with pytest.raises(DatasetError) as e:
        load_benchmark(bench, str(p))
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_a_line_past_the_bound_is_refused_before_it_is_read_whole(tmp_path, monkeypatch):
    # A stream without line breaks (here a 4 KiB line against a bound lowered to 1 KiB) is refused at
    # its line; the rows before it and a line at exactly the bound are read.
    from otbench.probe.data import _rows

    monkeypatch.setattr(_rows, "MAX_LINE", 1024)
    first = json.dumps(ROW).encode() + b"\n"
    base = len(json.dumps({**ROW, "unique_id": "b", "problem": ""}).encode()) + 1
    at_bound = json.dumps({**ROW, "unique_id": "b", "problem": "x" * (1024 - base)}).encode() + b"\n"
    assert len(at_bound) == 1024
    ok = tmp_path / "ok.jsonl"
    ok.write_bytes(first + at_bound)
    assert len(load_benchmark("MATH500", str(ok))) == 2
    p = tmp_path / "long.jsonl"
    p.write_bytes(first + b'{"problem": "' + b"x" * 4096 + b'"}\n')
    with pytest.raises(DatasetError) as e:
        load_benchmark("MATH500", str(p))
    assert str(e.value) == f"{p}:2: line longer than 0 MiB (not a JSONL row)"


def test_a_bom_at_the_start_of_a_csv_is_the_usual_excel_mark_and_accepted(tmp_path):
    p = tmp_path / "g.csv"
    p.write_bytes(b"\xef\xbb\xbf" + (GPQA_HEAD + "q,a,b,c,d,r1\n").encode())
    assert [q.id for q in load_benchmark("GPQA-Diamond", str(p))] == ["r1"]


def _lcb(**kw):
    row = {"question_id": "x1", "question_content": "Add.", "contest_date": "2025-01-01",
           "tests": json.dumps([{"input": "1", "output": "1", "testtype": "functional"}]),
           "fn_name": "add"}
    return {**row, **kw}


@pytest.mark.parametrize("row,needle", [
    (_lcb(fn_name="__init__"), "fn_name '__init__' must be a plain name"),
    (_lcb(fn_name="__import__"), "fn_name '__import__' must be a plain name"),
    (_lcb(fn_name=None, metadata='{"func_name": "f", "func_name": "g"}'),
     "field 'metadata': not accepted JSON (duplicate key 'func_name' in one object)"),
    (_lcb(tests="[" * 5000 + "]" * 5000), "field 'tests': not accepted JSON (nested deeper"),
    (_lcb(tests=base64.b64encode(zlib.compress(pickle.dumps('[{"input": "\\ud800"}]'))).decode()),
     "field 'tests' (packed): not accepted JSON (string '\\ud800' holds a lone surrogate"),
    (_lcb(tests=base64.b64encode(zlib.compress(pickle.dumps(5))).decode()),
     "field 'tests' is neither JSON nor LiveCodeBench's packed test format"),
])
def test_hostile_livecodebench_rows(row, needle, tmp_path):
    p = tmp_path / "lcb.jsonl"
    p.write_text(json.dumps(row) + "\n")
    with pytest.raises(DatasetError) as e:
        load_benchmark("LiveCodeBench", str(p))
    assert needle in str(e.value)
