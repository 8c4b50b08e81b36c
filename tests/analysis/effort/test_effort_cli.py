"""`otbench effort`: the map, the vLLM budget table and the CSV, written atomically; one-line errors."""

import json

import pytest
from otbench.analysis import load
from otbench.analysis.effort import effort_map
from otbench.files import csv_records

from tests._bad_input import refused


@pytest.fixture(scope="module")
def tiny_map(tiny_set_dir):
    return effort_map(load(tiny_set_dir), "low=4,high=1", replicates=40, seed=3)


def test_json_map_and_vllm_table_agree(cli, tiny_set_dir, tiny_map, tmp_path):
    out, table = tmp_path / "map.json", tmp_path / "vllm.json"
    args = ("effort", tiny_set_dir, "--levels", "low=4,high=1", "--replicates", "40", "--seed", "3")
    r = cli(*args, "--out", out)
    assert r.exit_code == 0, r.output
    assert r.stdout.splitlines()[0] == "SYNTHETIC DATA (simulated, not model outputs)"
    assert r.stdout.splitlines()[-1] == f"wrote {out}"
    doc = json.loads(out.read_text())
    assert doc["schema"] == "otbench.effort/1" and doc["synthetic"] is True
    assert (doc["seed"], doc["replicates"], doc["percentiles"]) == (3, 40, [2.5, 97.5])
    assert doc["content_hash"] == tiny_map.content_hash
    assert doc == json.loads(json.dumps(tiny_map.to_json()))          # one library call
    r = cli(*args, "--format", "vllm-budgets", "--out", table)
    assert r.exit_code == 0, r.output
    t = json.loads(table.read_text())
    assert t["field"] == "thinking_token_budget" and "sampling_params.py line 424" in t["source"]
    for cell in doc["cells"]:
        for lv in cell["levels"]:
            got = t["requests"][cell["model"]][cell["group"]][lv["level"]]["thinking_token_budget"]
            assert got == (-1 if lv["budget"] is None else lv["budget"])
            assert doc["map"][lv["level"]][f"{cell['model']}/{cell['group']}"] == lv["budget"]


def test_csv_rows(cli, tiny_set_dir, tiny_map, tmp_path):
    out = tmp_path / "e.csv"
    r = cli("effort", tiny_set_dir, "--levels", "low=4,high=1", "--replicates", "40", "--seed", "3",
            "--format", "csv", "--out", out)
    assert r.exit_code == 0, r.output
    text = out.read_text()
    assert text.startswith("# SYNTHETIC DATA")
    head, *rows = list(csv_records("\n".join(text.splitlines()[1:]), lambda i, why: ValueError(why)))
    rows = [dict(zip(head, r)) for r in rows]
    assert len(rows) == 2 * len(tiny_map.cells)
    want = {(c.model, c.group, x.level): x.budget for c in tiny_map.cells for x in c.levels}
    for row in rows:
        b = want[(row["model"], row["group"], row["level"])]
        assert (row["budget"] == "") if b is None else int(row["budget"]) == b


@pytest.mark.parametrize("levels, message", [
    ("low=2,medium", "Error: Invalid value for '--levels': item 'medium': expected name=points "
                     "(e.g. low=2)"),
    ("low=two", "Error: Invalid value for '--levels': item 'low=two': points must be a plain "
                "decimal >= 0"),
    ("low=1,low=2", "Error: Invalid value for '--levels': item 'low=2': level 'low' is given twice"),
    ("low=150", "Error: Invalid value for '--levels': level 'low' needs points in [0, 100], got 150.0"),
])
def test_bad_levels_one_line_exit_2(cli, tiny_set_dir, tmp_path, levels, message):
    out = tmp_path / "never.json"
    err = refused(cli("effort", tiny_set_dir, "--levels", levels, "--out", out))
    assert err.startswith(message), err
    assert not out.exists()


def test_other_errors_are_one_line(cli, tiny_set_dir, tmp_path):
    refused(cli("effort", tmp_path / "nope", "--out", tmp_path / "x.json"), str(tmp_path / "nope"))
    refused(cli("effort", tiny_set_dir, "--confidence", "1", "--out", tmp_path / "x.json"),
            "--confidence")
    refused(cli("effort", tiny_set_dir, "--format", "yaml", "--out", tmp_path / "x.json"), "--format")
    user = tmp_path / "mine.json"
    user.write_text("{}")
    refused(cli("effort", tiny_set_dir, "--replicates", "5", "--out", user), "otbench did not write it")
    assert user.read_text() == "{}"
