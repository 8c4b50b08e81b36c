"""The report's cost table (issue 26): the probe run's accounting beside the set, shown as recorded."""

import csv
import json
from pathlib import Path

import pytest
from otbench.analysis.measurement import save, simulate
from otbench.analysis.report import write_report
from otbench.analysis.report._cost import read_cost


def _entry(requests, prompt, cached, decoded, seconds):
    return {"requests": requests, "prompt_tokens": prompt, "cached_prompt_tokens": cached,
            "decoded_tokens": decoded, "engine_seconds": seconds}


def _cost():
    per = {"think": _entry(4, 400, 0, 8000, 3600.0), "probe": _entry(40, 90000, 80000, 2000, 1800.0),
           "signal": _entry(20, 40000, 39000, 20, 36.0)}
    total = _entry(64, 130400, 119000, 10020, 5436.0)
    return {"engine": "vllm", "device": "cuda (NVIDIA H200)", "workers": 1, "phases": per,
            "benchmarks": {"MATH500": {**per, "total": total}}, "total": total}


def test_the_cost_table_shows_the_recorded_numbers(tmp_path: Path):
    d = tmp_path / "set"
    save(simulate("tiny", 0), d)
    (d / "run.json").write_text(json.dumps({"total_s": 1.0, "cost": _cost()}))
    index = write_report(d, tmp_path / "r", grid=11)
    man = json.loads((tmp_path / "r" / "report.json").read_text())
    name = next(t["name"] for t in man["tables"] if t["name"].endswith("_cost"))
    rows = list(csv.reader(ln for ln in (tmp_path / "r" / "tables" / f"{name}.csv").open()
                           if not ln.startswith("#")))
    assert rows[0][:3] == ["group", "phase", "requests (count)"]
    assert all("(" in h for h in rows[0][2:])              # every number names its unit
    body = {(r[0], r[1]): r[2:] for r in rows[1:]}
    assert body["MATH500", "probe"] == ["40", "90000", "80000", "2000", "1800.0"]
    assert body["all", "total"] == ["64", "130400", "119000", "10020", "5436.0"]
    assert len(body) == 4 + 4
    page = index.read_text()
    assert "NVIDIA H200" in page and "1.510" in page          # 5436 s = 1.510 engine hours


@pytest.mark.parametrize("text, note", [
    ("{not json", "cost skipped"),
    (json.dumps({"cost": {"phases": {}, "benchmarks": {}, "total": {"requests": -1}}}), "not the probe's layout"),
    (json.dumps({"cost": {"phases": {"think": {"requests": "many"}}, "benchmarks": {},
                          "total": _entry(0, 0, 0, 0, 0)}}), "not the probe's layout"),
])
def test_a_bad_run_file_is_a_note_not_a_table(tmp_path: Path, text, note):
    (tmp_path / "run.json").write_text(text)
    cost, why = read_cost(tmp_path)
    assert cost is None and note in why


def test_no_run_file_or_no_cost_block_is_no_section(tmp_path: Path):
    assert read_cost(tmp_path) == (None, None)
    (tmp_path / "run.json").write_text(json.dumps({"total_s": 1.0}))
    assert read_cost(tmp_path) == (None, None)
    good = tmp_path / "g"
    good.mkdir()
    (good / "run.json").write_text(json.dumps({"cost": _cost()}))
    assert read_cost(good)[0] == _cost()
