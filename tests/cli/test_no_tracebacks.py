"""Every JSON reader and the importers: any input is a valid result or one line (exit 2).

Pinned cases from the issue, then hypothesis properties: arbitrary JSONL lines,
arbitrary manifests and arbitrary JSON documents handed to every reader give a
result or one line, never a traceback, and nothing is written outside --out.
"""

import json
import os

import pytest
from _bad_input import cli, refused, small_set, write_jsonl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from otbench.analysis.measurement import save

DEEP = "[" * 100_000 + "]" * 100_000
HOSTILE = {
    "deep": (DEEP, "nested deeper than 64 levels"),
    "digits": ("9" * 5000, "integer with 5000 digits is beyond int64"),
    "surrogate": ('{"a": "\\ud800"}', "holds a lone surrogate"),
    "duplicate": ('{"a": 1, "a": 2}', "duplicate key 'a' in one object"),
}


@pytest.fixture(scope="module")
def set_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("s") / "S"
    save(small_set(), d)
    return d


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_json_in_every_reader(case, set_dir, tmp_path):
    text, rule = HOSTILE[case]
    f = tmp_path / "x.json"
    f.write_text(text + "\n")
    refused(cli("import", f, "--out", tmp_path / "o"), "x.json:1: not accepted JSON", rule)
    refused(cli("grade", f), "x.json:1: not accepted JSON", rule)
    refused(cli("split", set_dir, "--from-file", f, "--out", tmp_path / "sp"), rule)
    refused(cli("report", set_dir, "--out", tmp_path / "r", "--thinning", f, "--grid", "11"), rule)
    bad = tmp_path / "B"
    save(small_set(), bad)
    (bad / "manifest.json").write_text(text)
    refused(cli("validate", bad), "manifest.json: not accepted JSON", rule)
    assert not (tmp_path / "o").exists() and not (tmp_path / "sp").exists()


def test_signal_of_1e400_and_huge_integers_in_import(tmp_path):
    rec = {"model": "m", "group": "g", "question": "q", "trajectory": 0, "probes": 2,
           "L": [0, 5], "C": [0, 1], "y": 1}
    line = json.dumps({**rec, "signals": {"s": [0.5, 1]}}).replace("[0.5, 1]", "[0.5, 1e400]")
    (tmp_path / "a.jsonl").write_text(line + "\n")
    refused(cli("import", tmp_path / "a.jsonl", "--out", tmp_path / "o"),
            "a.jsonl:1: not accepted JSON (number 1e400 is beyond float64)")
    write_jsonl(tmp_path / "b.jsonl", [{**rec, "probes": -10**30}])
    refused(cli("import", tmp_path / "b.jsonl", "--out", tmp_path / "o"),
            "b.jsonl:1: not accepted JSON (integer with 31 digits is beyond int64)")


def test_horizon_analyze_on_a_file(tmp_path):
    f = write_jsonl(tmp_path / "good.jsonl", small_set())
    refused(cli("horizon", "analyze", f), "good.jsonl/horizon.json: no such file (not a horizon "
                                          "run directory)")


def _listing(root):
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**40, 2**40) | st.floats() | st.text(max_size=6),
    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=6), c, max_size=4),
    max_leaves=12)
_keys = st.sampled_from(["model", "group", "question", "trajectory", "probes", "L", "C", "y",
                         "split", "finished", "signals", "synthetic", "dataset", "question_text"])
_good = {"model": "m", "group": "g", "question": "q", "trajectory": 0, "probes": 2,
         "L": [0, 5], "C": [0, 1], "y": 1}
_lines = st.lists(st.one_of(
    st.dictionaries(_keys, _values, max_size=9).map(lambda d: {**_good, **d}).map(json.dumps),
    st.dictionaries(_keys, _values, max_size=9).map(json.dumps),
    st.text(max_size=30)), min_size=1, max_size=4)

_slow = settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])


@_slow
@given(_lines)
def test_any_jsonl_imports_or_is_one_line(tmp_path_factory, lines):
    root = tmp_path_factory.mktemp("imp")
    src = root / "in.jsonl"
    src.write_text("\n".join(lines) + "\n", encoding="utf-8", errors="surrogatepass")
    before = _listing(root)
    r = cli("import", src, "--out", root / "out")
    if r.exit_code == 0:
        assert cli("validate", root / "out").exit_code == 0
        after = [p for p in _listing(root) if p not in before]
        assert all(p == "out" or p.startswith("out" + os.sep) for p in after), after
    else:
        refused(r)
        assert _listing(root) == before                    # nothing written on refusal


@_slow
@given(st.dictionaries(st.sampled_from(["schema", "files", "synthetic", "content_hash",
                                        "counts", "tables", "provenance"]), _values, max_size=7),
       st.booleans())
def test_any_manifest_loads_or_is_one_line(tmp_path_factory, edits, keep_schema):
    d = tmp_path_factory.mktemp("man") / "S"
    save(small_set(), d)
    m = json.loads((d / "manifest.json").read_text())
    m.update(edits)
    if keep_schema:
        m["schema"] = "otbench.measurement_set/1"
    (d / "manifest.json").write_text(json.dumps(m))
    r = cli("validate", d)
    if r.exit_code != 0:
        refused(r)


@_slow
@given(_values)
def test_any_json_document_in_every_reader(tmp_path_factory, doc):
    root = tmp_path_factory.mktemp("doc")
    save(small_set(), root / "S")
    f = root / "d.json"
    f.write_text(json.dumps(doc))
    for args in (("split", root / "S", "--from-file", f, "--out", root / "sp"),
                 ("grade", f)):
        r = cli(*args)
        if r.exit_code != 0:
            refused(r)
