"""Benchmark loaders: local schemas (JSONL, Parquet), errors naming file/line/field, the hub path
(with a stand-in `datasets` module, never the network), and the offline default data."""

import base64
import json
import pickle
import sys
import types
import zlib

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from otbench.probe.data._benchmarks import (
    BENCHMARKS,
    GROUPS,
    DatasetError,
    Question,
    champ_questions,
    load_benchmark,
    load_group,
    load_hub,
)
from otbench.probe.data._sums import arithmetic_questions
from otbench.probe.grading._choice import LETTERS, shuffle_order
from otbench.probe.grading._grade import grade_request
from otbench.probe.grading._types import CodeTest


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return str(path)


MATH_ROWS = [{"problem": "1+1?", "answer": "2", "unique_id": "test/a/1.json", "level": 1},
             {"problem": "Half of 1?", "answer": "\\frac{1}{2}", "unique_id": "test/a/2.json"}]
GPQA_ROWS = [{"Question": "Which is a noble gas?", "Correct Answer": "Neon",
              "Incorrect Answer 1": "Iron", "Incorrect Answer 2": "Sodium",
              "Incorrect Answer 3": "Carbon", "Record ID": "rec1"}]


def test_groups_cover_benchmarks():
    assert set(BENCHMARKS.values()) == set(GROUPS)


def test_math500_jsonl_and_parquet_agree(tmp_path):
    a = load_benchmark("MATH500", write_jsonl(tmp_path / "m.jsonl", MATH_ROWS))
    pq.write_table(pa.Table.from_pylist([dict(r, level=None) for r in MATH_ROWS]), tmp_path / "m.parquet")
    b = load_benchmark("MATH500", str(tmp_path / "m.parquet"))
    assert a == b
    assert a[1] == Question("MATH500", "MATH500", "test/a/2.json", "math", "Half of 1?", "\\frac{1}{2}")


def test_aime_years_pool_into_one_group(tmp_path):
    rows24 = [{"ID": "2024-I-1", "Problem": "p", "Answer": 204}]
    rows25 = [{"id": 1, "problem": "q", "answer": "33"}]
    qs = load_group({"AIME2024": write_jsonl(tmp_path / "a24.jsonl", rows24),
                     "AIME2025": write_jsonl(tmp_path / "a25.jsonl", rows25)})
    assert [(q.group, q.dataset, q.id, q.reference) for q in qs] == [
        ("AIME", "AIME2024", "AIME2024-2024-I-1", "204"), ("AIME", "AIME2025", "AIME2025-1", "33")]


def test_gpqa_shuffle_is_recorded_and_reproducible(tmp_path):
    path = write_jsonl(tmp_path / "g.jsonl", GPQA_ROWS)
    q = load_benchmark("GPQA-Diamond", path, seed=11)[0]
    assert q.task == "choice" and q.shuffle_seed == 11
    assert q.options[LETTERS.index(q.reference)] == "Neon"
    # The order is the documented function of (seed, id): the correct option is original index 0.
    order = shuffle_order(4, seed=11, question_id="rec1")
    assert q.reference == LETTERS[order.index(0)]
    assert load_benchmark("GPQA-Diamond", path, seed=11) == [q]
    assert "A) " in q.body() and "Neon" in q.body()
    # Grading a response to it through its request.
    assert grade_request(q.grade_request(f"Answer: {q.reference}")).correct


def test_gpqa_alternative_field_names(tmp_path):
    rows = [{"id": "x", "question": "Q?", "correct_answer": "r", "incorrect_answers": ["a", "b", "c"]}]
    q = load_benchmark("GPQA-Diamond", write_jsonl(tmp_path / "g.jsonl", rows))[0]
    assert sorted(q.options) == ["a", "b", "c", "r"]


def _lcb_pack(tests):
    # LiveCodeBench's private-test packing: base64(zlib(pickle(json text))).
    return base64.b64encode(zlib.compress(pickle.dumps(json.dumps(tests)))).decode()


def test_livecodebench_release_format(tmp_path):
    public = [{"input": "1 2\n", "output": "3\n", "testtype": "stdin"}]
    private = [{"input": "5 5\n", "output": "10\n", "testtype": "stdin"}]
    rows = [{"question_id": "abc301_a", "question_content": "Add.", "starter_code": "",
             "public_test_cases": json.dumps(public), "private_test_cases": _lcb_pack(private),
             "metadata": "{}", "contest_date": "2024-09-01T00:00:00"},
            {"question_id": "lc1", "question_content": "Add two.", "starter_code": "class Solution:\n",
             "public_test_cases": json.dumps([{"input": "1\n2", "output": "3", "testtype": "functional"}]),
             "private_test_cases": "", "metadata": json.dumps({"func_name": "add"}),
             "contest_date": "2023-01-01T00:00:00"}]
    path = write_jsonl(tmp_path / "l.jsonl", rows)
    qs = load_benchmark("LiveCodeBench", path)
    assert qs[0].tests == (CodeTest("1 2\n", "3\n"), CodeTest("5 5\n", "10\n")) and qs[0].fn_name is None
    assert qs[1].fn_name == "add" and qs[1].tests == (CodeTest("1\n2", "3"),)
    assert "```python\nclass Solution:\n```" in qs[1].body()
    # Date window keeps only the 2024 question.
    assert [q.id for q in load_benchmark("LiveCodeBench", path,
                                         contest_dates=("2024-08-01", "2025-05-01"))] == ["abc301_a"]


def test_packed_tests_refuse_code(tmp_path):
    # A pickle that would call a function must be refused, not executed.
    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))
    bad = base64.b64encode(zlib.compress(pickle.dumps(Evil()))).decode()
    path = write_jsonl(tmp_path / "l.jsonl", [{"question_id": "x", "question_content": "c",
                                               "public_test_cases": "[]", "private_test_cases": bad}])
    with pytest.raises(DatasetError, match=r"l\.jsonl:1: field 'private_test_cases' is neither JSON nor "
                                           r"LiveCodeBench's packed test format"):
        load_benchmark("LiveCodeBench", path)


def test_packed_tests_that_inflate_past_the_limit_are_refused(tmp_path, monkeypatch):
    """A zlib bomb (a small field that inflates to gigabytes) is refused at the limit, without
    inflating it whole; a field just under the limit still loads."""
    import otbench.probe.data._benchmarks as b

    monkeypatch.setattr(b, "PACKED_LIMIT", 4096)
    tests = json.dumps([{"input": "1\n", "output": "1\n", "testtype": "stdin"}])
    small = base64.b64encode(zlib.compress(pickle.dumps(tests))).decode()
    bomb = base64.b64encode(zlib.compress(pickle.dumps("x" * 10_000_000), 9)).decode()
    assert len(bomb) < 20_000          # 10 MB behind ~13 kB: the shape of the 1.5 GB attack file
    row = {"question_id": "x", "question_content": "c", "public_test_cases": "[]"}
    ok = write_jsonl(tmp_path / "ok.jsonl", [{**row, "private_test_cases": small}])
    assert load_benchmark("LiveCodeBench", ok)[0].tests[0].input == "1\n"
    path = write_jsonl(tmp_path / "l.jsonl", [{**row, "private_test_cases": bomb}])
    with pytest.raises(DatasetError, match=r"l\.jsonl:1: field 'private_test_cases' inflates to more than "
                                           r"4096 bytes; refusing to unpack it"):
        load_benchmark("LiveCodeBench", path)


# (benchmark, rows, expected message after "FILE:")
ERRORS = [
    ("MATH500", [{"answer": "1", "unique_id": "a"}],
     r"1: missing field 'problem' \(also accepted: 'question'\)"),
    ("MATH500", [MATH_ROWS[0], {"problem": "p", "unique_id": "b"}], r"2: missing field 'answer'"),
    ("MATH500", [{"problem": "p", "answer": 2, "unique_id": "a"}], r"1: field 'answer' must be str, got int"),
    ("MATH500", [{"problem": " ", "answer": "1", "unique_id": "a"}], r"1: field 'problem' is empty"),
    ("MATH500", [MATH_ROWS[0], MATH_ROWS[0]],
     r"2: duplicate question id 'test/a/1\.json' \(first at .*m\.jsonl:1\)"),
    ("MATH500", [[1, 2]], r"1: expected a JSON object, got list"),
    ("AIME2025", [{"problem": "p", "answer": "1", "problem_idx": 2.5}],
     r"1: field 'problem_idx' must be str or int, got float"),
    ("GPQA-Diamond", [{k: v for k, v in GPQA_ROWS[0].items() if k != "Incorrect Answer 2"}],
     r"1: missing field 'Incorrect Answer 2'"),
    ("GPQA-Diamond", [dict(GPQA_ROWS[0], **{"Incorrect Answer 1": "Neon"})],
     r"1: options must be distinct \(two options read the same\)"),
    ("GPQA-Diamond", [{"id": "x", "question": "Q", "correct_answer": "r", "incorrect_answers": ["a"]}],
     r"1: field 'incorrect_answers' must hold 3 non-empty strings"),
    ("LiveCodeBench", [{"question_id": "x", "question_content": "c"}],
     r"1: missing field 'tests' \(also accepted: 'public_test_cases' \+ 'private_test_cases'\)"),
    ("LiveCodeBench", [{"question_id": "x", "question_content": "c", "tests": []}], r"1: no tests"),
    ("LiveCodeBench", [{"question_id": "x", "question_content": "c", "tests": [{"input": "1"}]}],
     r"1: test 1 must be an object with string 'input' and 'output'"),
    ("LiveCodeBench", [{"question_id": "x", "question_content": "c",
                        "tests": [{"input": "1", "output": "1", "testtype": "functional"}]}],
     r"1: functional tests need 'fn_name' \(or metadata\.func_name\)"),
    ("LiveCodeBench", [{"question_id": "x", "question_content": "c",
                        "tests": [{"input": "1", "output": "1", "testtype": "functional"},
                                  {"input": "1", "output": "1"}], "fn_name": "f"}],
     r"1: tests must all be 'stdin' or all 'functional', got \['functional', 'stdin'\]"),
]


@pytest.mark.parametrize("benchmark,rows,match", ERRORS)
def test_errors_name_file_line_and_rule(tmp_path, benchmark, rows, match):
    path = write_jsonl(tmp_path / "m.jsonl", rows)
    with pytest.raises(DatasetError, match=r".*m\.jsonl:" + match + "$"):
        load_benchmark(benchmark, path)


def test_file_level_errors(tmp_path):
    with pytest.raises(DatasetError, match=r"nope\.jsonl: no such file$"):
        load_benchmark("MATH500", str(tmp_path / "nope.jsonl"))
    (tmp_path / "m.txt").write_text("a,b\n")
    with pytest.raises(DatasetError, match=r"m\.txt: expected a \.jsonl, \.parquet or \.csv file$"):
        load_benchmark("MATH500", str(tmp_path / "m.txt"))
    (tmp_path / "bad.jsonl").write_text(json.dumps(MATH_ROWS[0]) + "\n\n{oops\n")
    with pytest.raises(DatasetError, match=r"bad\.jsonl:3: not valid JSON \(Expecting property name "
                                           r"enclosed in double quotes at column 2\)$"):
        load_benchmark("MATH500", str(tmp_path / "bad.jsonl"))
    (tmp_path / "bad.parquet").write_bytes(b"not parquet")
    with pytest.raises(DatasetError, match=r"bad\.parquet: not a readable Parquet file"):
        load_benchmark("MATH500", str(tmp_path / "bad.parquet"))
    pq.write_table(pa.Table.from_pylist([{"problem": "p", "unique_id": "a"}]), tmp_path / "m.parquet")
    with pytest.raises(DatasetError, match=r"m\.parquet:row 1: missing field 'answer'$"):
        load_benchmark("MATH500", str(tmp_path / "m.parquet"))
    with pytest.raises(ValueError, match=r"`benchmark` must be one of 'MATH500', .*got 'MATH'\."):
        load_benchmark("MATH", write_jsonl(tmp_path / "ok.jsonl", MATH_ROWS))


def test_group_duplicates_across_files(tmp_path):
    # AIME 2025 in two files (I and II) sharing an id: the pooled group must refuse it.
    a = write_jsonl(tmp_path / "I.jsonl", [{"id": 1, "problem": "p", "answer": "1"}])
    b = write_jsonl(tmp_path / "II.jsonl", [{"id": 1, "problem": "q", "answer": "2"}])
    with pytest.raises(DatasetError, match=r"II\.jsonl: question id 'AIME2025-1' of group AIME also in "
                                           r".*I\.jsonl$"):
        load_group([("AIME2025", a), ("AIME2025", b)])


def test_hub_path_with_stand_in_datasets(monkeypatch):
    # A stand-in `datasets` module: records the call, returns rows like the hub's.
    calls = []
    fake = types.ModuleType("datasets")

    def load_dataset(name, config, split=None, revision=None, **kw):
        calls.append((name, config, split, revision))
        return iter(MATH_ROWS)

    fake.load_dataset = load_dataset
    monkeypatch.setitem(sys.modules, "datasets", fake)
    qs = load_hub("MATH500", revision="abc123")
    assert calls == [("HuggingFaceH4/MATH-500", None, "test", "abc123")]
    assert [q.id for q in qs] == ["test/a/1.json", "test/a/2.json"]
    fake.load_dataset = lambda *a, **k: iter([{"problem": "p", "unique_id": "z"}])
    with pytest.raises(DatasetError, match=r"HuggingFaceH4/MATH-500\[test\]:row 1: missing field 'answer'"):
        load_hub("MATH500")
    with pytest.raises(ValueError, match=r"no default hub location for 'AIME2026'; pass `name`\."):
        load_hub("AIME2026")


def test_champ_offline_default():
    qs = champ_questions()
    # champ-dataset 1.0.0's v0.json has 79 answers that are plain integers
    # (counted with `re.fullmatch(r"-?\d+", answer)` over its 270 problems)
    # plus a few plain fractions.
    assert sum(q.reference.lstrip("-").isdigit() for q in qs) == 79
    assert all(q.reference.lstrip("-").isdigit() or q.reference.startswith("\\frac{") for q in qs)
    assert len({q.id for q in qs}) == len(qs)
    assert all(q.task == "math" and "@@" not in q.text and q.reference for q in qs)
    q = next(q for q in qs if q.id == "P_Combinatorics_1")
    assert q.reference == "239" and q.text.startswith("Let a string consist of digit 1, 2, 3.")
    assert grade_request(q.grade_request("\\boxed{239}")).correct


def test_arithmetic_generator_is_exact_and_seeded():
    qs = arithmetic_questions(50, seed=3)
    assert qs == arithmetic_questions(50, seed=3)
    assert qs != arithmetic_questions(50, seed=4)
    assert len({q.id for q in qs}) == 50
    for q in qs:
        expr = q.text.removeprefix("What is ").removesuffix("?").replace("×", "*").replace("−", "-")
        assert q.reference == str(eval(expr))  # Python's own precedence is the twin
    with pytest.raises(ValueError, match=r"`n` must be a non-negative integer, got -1\."):
        arithmetic_questions(-1)
