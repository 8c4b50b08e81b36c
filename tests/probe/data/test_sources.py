"""A job's data sources: every built-in schema on a small file in its real shape, user schemas,
several sources per group, Hugging Face datasets read offline, `--limit`, and errors naming
file, row and column. Fixture files are in `fixtures/` (written for these tests, real layouts)."""

import base64
import json
import pickle
import zlib
from pathlib import Path

import pytest
from otbench.probe.data import DatasetError, load_data, load_sources, release_files
from otbench.probe.data._benchmarks import text_id
from otbench.probe.grading._choice import LETTERS, shuffle_order
from otbench.probe.grading._grade import grade_request
from otbench.probe.grading._types import CodeTest
from otbench.probe.stp._job import JobError, _data_iv

FIX = Path(__file__).parent / "fixtures"


def _load(*sources, seed=0, limit=None, base=FIX):
    d = _data_iv({"sources": [dict(s) for s in sources], "seed": seed,
                  **({"limit": limit} if limit else {})}, base)
    return load_sources(d["sources"], seed=seed, limit=limit)


def test_math500_file():
    qs, rec = _load({"benchmark": "MATH500", "path": "math500.jsonl"})
    assert [(q.group, q.id, q.reference) for q in qs] == [
        ("MATH500", "test/counting_and_probability/1.json", "70"),
        ("MATH500", "test/prealgebra/2.json", "\\frac{5}{6}"), ("MATH500", "test/algebra/3.json", "4")]
    s = rec.sources[0]
    assert s["rows"] == 3 and s["questions"] == 3 and s["ids_from_text"] == 0
    assert s["sha256"] == __import__("hashlib").sha256((FIX / "math500.jsonl").read_bytes()).hexdigest()


def test_aime_three_years_one_group_three_id_conventions():
    qs, rec = _load({"benchmark": "AIME2024", "path": "aime2024.parquet"},
                    {"benchmark": "AIME2025", "path": "aime2025.jsonl"},
                    {"benchmark": "AIME2026", "path": "aime2026.jsonl"})
    assert {q.group for q in qs} == {"AIME"}
    ids = [q.id for q in qs]
    # ID (Maxwell-Jia 2024), problem_idx (MathArena 2025), none (bare file: hash of the text)
    assert ids[:4] == ["AIME2024-2024-I-1", "AIME2024-2024-II-4", "AIME2025-1", "AIME2025-2"]
    assert ids[4] == "AIME2026-" + text_id("What is the largest prime factor of $2026$?")
    assert ids[4].startswith("AIME2026-sha256-") and len(ids[4]) == len("AIME2026-sha256-") + 16
    assert [q.reference for q in qs] == ["24", "12", "70", "15", "1013", "210"]   # int64 answers as text
    assert [s["ids_from_text"] for s in rec.sources] == [0, 0, 2]
    # The text id is stable: whitespace does not change it, the text does.
    assert text_id("a  b\n") == text_id("a b") != text_id("a c")


def test_gpqa_csv_as_distributed():
    qs, rec = _load({"benchmark": "GPQA-Diamond", "path": "gpqa_diamond.csv"}, seed=7)
    assert [q.id for q in qs] == ["recA1b2C3d4E5f6G7h", "recZ9y8X7w6V5u4T3s"]
    q = qs[0]
    assert q.text.startswith("A spin-1/2 particle") and "\n" in q.text     # quoted multi-line cell
    assert q.shuffle_seed == 7 and sorted(q.options) == ["0", "1", "1/2", "1/4"]
    assert q.reference == LETTERS[shuffle_order(4, seed=7, question_id=q.id).index(0)]
    assert q.options[LETTERS.index(q.reference)] == "1/2"
    assert qs[1].options[LETTERS.index(qs[1].reference)] == "benzene"      # cells are stripped
    assert grade_request(q.grade_request(f"Answer: {q.reference}")).correct
    # A different recorded seed gives a (reproducible) different order for some question.
    other, _ = _load({"benchmark": "GPQA-Diamond", "path": "gpqa_diamond.csv"}, seed=8)
    assert other == _load({"benchmark": "GPQA-Diamond", "path": "gpqa_diamond.csv"}, seed=8)[0]
    assert rec.sources[0]["rows"] == 2


def test_livecodebench_release_files_and_date_window():
    assert [p.name for p in release_files(FIX / "lcb", "release_v2")] == ["test.jsonl", "test2.jsonl"]
    assert [p.name for p in release_files(FIX / "lcb", "v2")] == ["test2.jsonl"]
    assert [p.name for p in release_files(FIX / "lcb", "release_latest")] == ["test.jsonl", "test2.jsonl"]
    with pytest.raises(DatasetError, match=r"test3\.jsonl: no such file \(release_version 'release_v3'\)$"):
        release_files(FIX / "lcb", "release_v3")
    qs, rec = _load({"benchmark": "LiveCodeBench", "path": "lcb", "release_version": "release_v2"})
    assert [q.id for q in qs] == ["abc301_a", "two-sum-ish", "abc350_b"]
    assert qs[0].tests == (CodeTest("1 2\n", "3\n"), CodeTest("5 5\n", "10\n"), CodeTest("0 0\n", "0\n"))
    assert qs[1].fn_name == "add" and qs[1].starter_code.startswith("class Solution:")
    assert rec.sources[0]["files"] == ["test.jsonl", "test2.jsonl"]
    # Both days of the window are kept (2024-04-20 is the first day, 2024-05-12 the last).
    qs, _ = _load({"benchmark": "LiveCodeBench", "path": "lcb", "release_version": "release_v2",
                   "contest_date": ["2024-04-20", "2024-05-12"]})
    assert [q.id for q in qs] == ["two-sum-ish", "abc350_b"]
    qs, _ = _load({"benchmark": "LiveCodeBench", "path": "lcb", "release_version": "v2",
                   "contest_date": ["2024-04-21", "2024-05-11"]})
    assert qs == []


def test_user_schemas(tmp_path: Path):
    (tmp_path / "m.csv").write_text("qid,prompt,gold\nq1,What is 6*7?,42\nq2,What is 1+1?,2\n")
    qs, rec = _load({"path": "m.csv", "group": "Mine", "task": "math",
                     "columns": {"id": "qid", "problem": "prompt", "answer": "gold"}}, base=tmp_path)
    assert qs[0].id == "q1" and qs[0].group == qs[0].dataset == "Mine" and qs[0].reference == "42"
    assert rec.sources[0]["schema"] == "user" and rec.sources[0]["columns"]["answer"] == "gold"
    # an empty id cell is missing, not empty: the error names the user's column
    (tmp_path / "m.csv").write_text("qid,prompt,gold\nq1,What is 6*7?,\n")
    with pytest.raises(DatasetError, match=r"m\.csv:row 1: missing field 'gold'$"):
        _load({"path": "m.csv", "group": "Mine", "task": "math",
               "columns": {"id": "qid", "problem": "prompt", "answer": "gold"}}, base=tmp_path)
    rows = [{"stem": "Pick the prime.", "good": "7", "bad": ["8", "9", "10"]}]
    (tmp_path / "c.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (q,), _ = _load({"path": "c.jsonl", "group": "MC", "dataset": "mc-v1", "task": "choice",
                     "columns": {"problem": "stem", "correct": "good", "incorrect": "bad"}},
                    base=tmp_path, seed=3)
    assert q.id == text_id("Pick the prime.") and q.dataset == "mc-v1" and q.shuffle_seed == 3
    assert q.options[LETTERS.index(q.reference)] == "7" and len(q.options) == 4
    packed = base64.b64encode(zlib.compress(pickle.dumps(json.dumps(
        [{"input": "2\n", "output": "4\n", "testtype": "stdin"}])))).decode()
    (tmp_path / "k.jsonl").write_text(json.dumps({"name": "dbl", "task": "Print 2N.", "cases": packed}) + "\n")
    (q,), _ = _load({"path": "k.jsonl", "group": "Code", "task": "code",
                     "columns": {"id": "name", "problem": "task", "tests": "cases"}}, base=tmp_path)
    assert (q.group, q.id, q.task, q.tests) == ("Code", "dbl", "code", (CodeTest("2\n", "4\n"),))


def test_limit_takes_the_first_questions_of_each_group():
    qs, rec = _load({"benchmark": "MATH500", "path": "math500.jsonl"},
                    {"benchmark": "AIME2025", "path": "aime2025.jsonl"},
                    {"benchmark": "AIME2026", "path": "aime2026.jsonl"}, limit=1)
    assert [q.id for q in qs] == ["test/counting_and_probability/1.json", "AIME2025-1"]
    assert rec.limit == 1
    # The one-source form and the embedded sources take the limit too.
    assert [q.group for q in load_data({"source": "sums", "n": 5, "limit": 2})[0]] == ["SUMS"] * 2
    qs, rec = load_data(_data_iv({"sources": [{"embedded": "sums", "n": 3},
                                              {"embedded": "champ", "n": 2}]}, None))
    assert [q.group for q in qs] == ["SUMS"] * 3 + ["CHAMP"] * 2
    assert rec.sources[1] == {"embedded": "champ", "questions": 2}


def test_duplicate_ids_across_sources_of_a_group(tmp_path: Path):
    for name in ("I", "II"):
        (tmp_path / f"{name}.jsonl").write_text(json.dumps({"problem_idx": 1, "problem": name,
                                                            "answer": 1}) + "\n")
    with pytest.raises(DatasetError, match=r"II\.jsonl: question id 'AIME2025-1' of group AIME also in "
                                           r".*I\.jsonl$"):
        _load({"benchmark": "AIME2025", "path": "I.jsonl"}, {"benchmark": "AIME2025", "path": "II.jsonl"},
              base=tmp_path)


def test_loader_errors_name_file_row_and_column(tmp_path: Path):
    (tmp_path / "g.csv").write_text((FIX / "gpqa_diamond.csv").read_text().replace("1/4", ""))
    with pytest.raises(DatasetError, match=r"g\.csv:row 1: missing field 'Incorrect Answer 3'$"):
        _load({"benchmark": "GPQA-Diamond", "path": "g.csv"}, base=tmp_path)
    (tmp_path / "short.csv").write_text("Question,Correct Answer\nq\n")
    with pytest.raises(DatasetError, match=r"short\.csv:row 1: 1 cells, the header has 2$"):
        _load({"benchmark": "GPQA-Diamond", "path": "short.csv"}, base=tmp_path)
    (tmp_path / "a.jsonl").write_text(json.dumps({"problem_idx": 1.5, "problem": "p", "answer": 1}) + "\n")
    with pytest.raises(DatasetError, match=r"a\.jsonl:1: field 'problem_idx' must be str or int, got float$"):
        _load({"benchmark": "AIME2025", "path": "a.jsonl"}, base=tmp_path)
    with pytest.raises(DatasetError, match=r"nope\.jsonl: no such file$"):
        _load({"benchmark": "MATH500", "path": "nope.jsonl"}, base=tmp_path)


JOB_ERRORS = [
    ({"sources": []}, r"data\.sources must be a non-empty list"),
    ({"sources": [{"benchmark": "MATH500"}]}, r"data\.sources\[0\] needs exactly one of `path`"),
    ({"sources": [{"benchmark": "MATH", "path": "x"}]}, r"data\.sources\[0\]\.benchmark must be one of"),
    ({"sources": [{"path": "x", "group": "G", "task": "math", "columns": {"problem": "p"}}]},
     r"data\.sources\[0\]\.columns\.answer is required for task 'math'"),
    ({"sources": [{"path": "x", "group": "G", "task": "math",
                   "columns": {"problem": "p", "answer": "a", "gold": "g"}}]},
     r"data\.sources\[0\]\.unknown key columns\.gold"),
    ({"sources": [{"benchmark": "MATH500", "path": "x", "release_version": "v1"}]},
     r"release_version applies to benchmark = 'LiveCodeBench' only"),
    ({"sources": [{"benchmark": "LiveCodeBench", "hub": "x", "contest_date": ["2025-05-01", "2025-01-01"]}]},
     r"the first day 2025-05-01 is after the last 2025-01-01"),
    ({"sources": [{"benchmark": "MATH500", "path": "x", "revision": "abc"}]},
     r"data\.sources\[0\]\.revision applies to `hub` sources only"),
    ({"sources": [{"embedded": "sums", "path": "x"}]}, r"data\.sources\[0\]\.path does not apply"),
    ({"sources": [{"benchmark": "MATH500", "path": "x"}], "n": 3}, r"data\.n cannot be combined"),
    ({"source": "sums", "limit": 0}, r"data\.limit must be a positive integer"),
]


@pytest.mark.parametrize("data,match", JOB_ERRORS)
def test_data_table_errors(data, match):
    with pytest.raises(JobError, match=match):
        _data_iv(data, None)


def test_hub_source_offline_and_saved_datasets(tmp_path: Path, monkeypatch):
    datasets = pytest.importorskip("datasets", reason="the `hub` extra (datasets) is not installed")
    rows = [json.loads(line) for line in (FIX / "math500.jsonl").read_text().splitlines()]
    # A dataset repository laid out as on the Hub (data files in a folder), read by `datasets`
    # with the network off: the same code path as a cached hub id.
    repo = tmp_path / "MATH-500"
    (repo / "data").mkdir(parents=True)
    datasets.Dataset.from_list(rows).to_parquet(str(repo / "data" / "test-00000-of-00001.parquet"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "cache"))
    qs, rec = _load({"benchmark": "MATH500", "hub": str(repo), "split": "test"})
    assert [q.id for q in qs] == [r["unique_id"] for r in rows]
    assert rec.sources[0]["split"] == "test" and rec.sources[0]["fingerprint"]
    with pytest.raises(DatasetError, match=r"\[test\]: cannot load .*\(HF_HUB_OFFLINE=1: only the local "
                                           r"cache is read\)$"):
        _load({"benchmark": "MATH500", "hub": "nobody/not-cached-anywhere", "split": "test"})
    # `save_to_disk` folders (a DatasetDict: the split is chosen)
    datasets.DatasetDict({"test": datasets.Dataset.from_list(rows)}).save_to_disk(str(tmp_path / "saved"))
    qs2, _ = _load({"benchmark": "MATH500", "path": str(tmp_path / "saved"), "split": "test"})
    assert qs2 == qs
    with pytest.raises(DatasetError, match=r"saved: split None not in the saved dataset \(splits: test\)"):
        _load({"benchmark": "MATH500", "path": str(tmp_path / "saved")})
    bad = [dict(r) for r in rows]
    del bad[1]["answer"]
    datasets.Dataset.from_list(bad[1:2]).save_to_disk(str(tmp_path / "bad"))
    with pytest.raises(DatasetError, match=r"bad:row 1: missing field 'answer'$"):
        _load({"benchmark": "MATH500", "path": str(tmp_path / "bad")})


def test_job_with_four_groups_and_limit(tmp_path: Path):
    from otbench.probe.stp import load_job

    job_toml = f"""
[model]
name = "smollm2-135m-instruct"
[data]
seed = 1
[[data.sources]]
benchmark = "AIME2024"
path = "{FIX}/aime2024.parquet"
[[data.sources]]
benchmark = "AIME2025"
path = "{FIX}/aime2025.jsonl"
[[data.sources]]
benchmark = "AIME2026"
path = "{FIX}/aime2026.jsonl"
[[data.sources]]
benchmark = "MATH500"
path = "{FIX}/math500.jsonl"
[[data.sources]]
benchmark = "GPQA-Diamond"
path = "{FIX}/gpqa_diamond.csv"
[[data.sources]]
benchmark = "LiveCodeBench"
path = "{FIX}/lcb"
release_version = "release_v2"
contest_date = ["2024-04-01", "2024-06-30"]
"""
    (tmp_path / "job.toml").write_text(job_toml)
    job = load_job(tmp_path / "job.toml", limit=1)
    assert job.data["limit"] == 1
    qs, rec = load_data(job.data)
    assert [q.group for q in qs] == ["AIME", "MATH500", "GPQA-Diamond", "LiveCodeBench"]
    assert qs[2].shuffle_seed == 1 and len(rec.sources) == 6
    assert [q.id for q in load_data(load_job(tmp_path / "job.toml").data)[0]
            if q.group == "AIME"][-1].startswith("AIME2026-sha256-")


def test_cli_bad_row_is_one_line_exit_2(tmp_path: Path):
    from click.testing import CliRunner
    from otbench.cli import main

    (tmp_path / "bad.csv").write_text("Record ID,Question,Correct Answer,Incorrect Answer 1,"
                                      "Incorrect Answer 2\nrec1,Q?,a,b,c\n")
    (tmp_path / "job.toml").write_text('[model]\nname = "smollm2-135m-instruct"\n[data]\n'
                                       '[[data.sources]]\nbenchmark = "GPQA-Diamond"\npath = "bad.csv"\n')
    r = CliRunner().invoke(main, ["probe", "run", "--config", str(tmp_path / "job.toml"),
                                  "--out", str(tmp_path / "out"), "--limit", "1", "--no-progress"])
    assert r.exit_code == 2, r.output
    assert r.output.strip().splitlines()[-1] == f"{tmp_path}/bad.csv:row 1: missing field 'Incorrect Answer 3'"
    r = CliRunner().invoke(main, ["probe", "run", "--config", str(tmp_path / "job.toml"),
                                  "--out", str(tmp_path / "out"), "--limit", "0"])
    assert r.exit_code == 2 and "--limit" in r.output


def test_livecodebench_release_files_from_a_cached_hub_copy(tmp_path: Path, monkeypatch):
    """`datasets` >= 4 refuses LiveCodeBench's script dataset: its release files are read from the
    Hugging Face cache (huggingface_hub, offline), at the pinned commit, and the commit is recorded."""
    import shutil

    constants = pytest.importorskip("huggingface_hub.constants")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    commit = "5ee1f6c" * 5 + "b1e3d"
    repo = tmp_path / "hub" / "datasets--livecodebench--code_generation_lite"
    snap = repo / "snapshots" / commit
    snap.mkdir(parents=True)
    for name in ("test.jsonl", "test2.jsonl"):
        shutil.copy(FIX / "lcb" / name, snap / name)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    src = {"benchmark": "LiveCodeBench", "hub": "livecodebench/code_generation_lite"}
    for rev in (commit, None):                                      # pinned, and main through the refs
        qs, rec = _load({**src, "release_version": "release_v2", **({"revision": rev} if rev else {})})
        assert [q.id for q in qs] == ["abc301_a", "two-sum-ish", "abc350_b"]
        s = rec.sources[0]
        assert s["commit"] == commit and s["files"] == ["test.jsonl", "test2.jsonl"] and s["revision"] == rev
    qs, _ = _load({**src, "release_version": "v2", "revision": commit})
    assert [q.id for q in qs] == ["two-sum-ish", "abc350_b"]           # test2.jsonl only
    with pytest.raises(DatasetError, match=r"release 'release_v3' is not in the Hugging Face cache "
                                           r"\(HF_HUB_OFFLINE=1; download it first: hf download "
                                           r"livecodebench/code_generation_lite --repo-type dataset"):
        _load({**src, "release_version": "release_v3", "revision": commit})
    with pytest.raises(DatasetError, match=r"code_generation_lite@abc123: release 'v1' is not in the"):
        _load({**src, "release_version": "v1", "revision": "abc123"})
