"""Hostile inputs of the second attack corpus give one line and exit 2 (issue 24, items 4, 5, 7).

Each case is one class of the corpus with its own variants: tampered manifests,
out-of-range Parquet integers, method specs that are paths, dunders or built-ins,
plug-ins that raise or exit in any of their calls.
"""

import hashlib
import json
import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from _bad_input import cli, refused


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    d = tmp_path_factory.mktemp("host") / "S"
    assert cli("simulate", "--out", d, "--scale", "tiny").exit_code == 0
    return d


def _copy(tiny, tmp_path):
    d = tmp_path / "T"
    shutil.copytree(tiny, d)
    return d


@pytest.mark.parametrize("key", ["provenance", "counts", "writer"])
@pytest.mark.parametrize("value,shown", [([1, 2], "list [1, 2]"), ("str", 'str "str"'),
                                         (5, "int 5"), (None, "NoneType null")])
def test_manifest_objects_of_the_wrong_type(key, value, shown, tiny, tmp_path):
    d = _copy(tiny, tmp_path)
    m = json.loads((d / "manifest.json").read_text())
    m[key] = value
    (d / "manifest.json").write_text(json.dumps(m))
    for cmd in ("validate", "metrics", "frontier"):
        refused(cli(cmd, d), "manifest.json: ", f"'{key}' must be an object, got {shown}")


@pytest.mark.parametrize("column,value", [("trajectory", 2 ** 63), ("probes", 2 ** 64 - 1),
                                          ("L", 2 ** 63)])
def test_parquet_uint64_beyond_int64(column, value, tiny, tmp_path):
    d = _copy(tiny, tmp_path)
    m = json.loads((d / "manifest.json").read_text())
    entry = m["files"][0]
    f = d / entry["path"]
    t = pq.read_table(f)
    old = t.column(column).to_pylist()
    if isinstance(old[0], list):
        new = pa.array([[value] + old[0][1:]] + old[1:], type=pa.list_(pa.uint64()))
    else:
        new = pa.array([value] + old[1:], type=pa.uint64())
    pq.write_table(t.set_column(t.column_names.index(column), column, new), f)
    entry["sha256"] = hashlib.sha256(f.read_bytes()).hexdigest()
    (d / "manifest.json").write_text(json.dumps(m))
    refused(cli("validate", d), "part-0.parquet: row 0: ",
            f"{column} value {value} is beyond int64 (at most 2**63 - 1)")


PLUGIN = '''
import sys
import numpy as np

class FitRaises:
    strategy = "dr"
    thetas = [0.5]
    def fit(self, train, val):
        raise RuntimeError("boom")
    def route(self, units, theta):
        return np.zeros(len(units), bool)

class RouteRaises:
    strategy = "dr"
    thetas = [0.5]
    def route(self, units, theta):
        raise KeyError("x")

class RouteExits:
    strategy = "dr"
    thetas = [0.5]
    def route(self, units, theta):
        sys.exit(0)

class GridRaises:
    strategy = "dr"
    def theta_grid(self, n):
        raise ZeroDivisionError("grid")
    def route(self, units, theta):
        return np.zeros(len(units), bool)

class BadRange:
    strategy = "dr"
    theta_range = "ab"
    def route(self, units, theta):
        return np.zeros(len(units), bool)

class ConfigRaises:
    strategy = "dr"
    thetas = [0.5]
    def route(self, units, theta):
        return np.zeros(len(units), bool)
    def config(self):
        raise ValueError("cfg")

def factory_exits():
    sys.exit(3)
'''


@pytest.mark.parametrize("obj,needle", [
    ("FitRaises", "fit(train, val) raised RuntimeError: boom"),
    ("RouteRaises", "route(units, theta) raised KeyError: 'x'"),
    ("RouteExits", "route(units, theta) raised SystemExit: 0"),
    ("GridRaises", "theta_grid(21) raised ZeroDivisionError: grid"),
    ("BadRange", "`theta_range` must be two numbers (lo, hi), got 'ab'"),
    ("ConfigRaises", "config() raised ValueError: cfg"),
    ("factory_exits", "constructing it raised SystemExit: 3"),
])
def test_a_plugin_that_raises_or_exits_anywhere(obj, needle, tiny, tmp_path):
    f = tmp_path / "plug.py"
    f.write_text(PLUGIN)
    refused(cli("bench", "run", tiny, "--method", f"{f}:{obj}", "--json", tmp_path / "b.json"),
            f"Error: method '{f}:{obj}': {needle}")
    assert not (tmp_path / "b.json").exists()


@pytest.mark.parametrize("spec,needle", [
    ("../../x:Y", "'../../x' is neither a dotted module name (package.module) nor a path to a "
                  ".py file"),
    ("/abs/x:Y", "'/abs/x' is neither a dotted module name"),
    ("a..b:Y", "'a..b' is neither a dotted module name"),
    ("builtins:exit", "constructing it raised SystemExit: None"),
    ("builtins:quit", "constructing it raised SystemExit: None"),
    ("os:_exit", "a built-in function is not a method class or factory"),
    ("os:abort", "a built-in function is not a method class or factory"),
    ("json:__builtins__", "the object '__builtins__' must be dotted names without dunders"),
    ("json:JSONDecoder.__init__", "the object 'JSONDecoder.__init__' must be dotted names "
                                  "without dunders"),
])
def test_method_specs_that_are_paths_dunders_or_builtins(spec, needle, tiny):
    refused(cli("bench", "run", tiny, "--method", spec), f"Error: method {spec!r}: {needle}")


@pytest.fixture(scope="module")
def horizon_run(tmp_path_factory):
    from _horizon_helpers import random_run, write

    d = tmp_path_factory.mktemp("hz") / "run"
    write(random_run(3, A=2, I=4, R=2), d)
    return d


@pytest.mark.parametrize("key,value,needle", [
    ("arms", 3, "'arms' must be a list of objects with a non-empty string 'name', got 3"),
    ("arms", [{"name": 1}], "'arms' must be a list of objects with a non-empty string 'name'"),
    ("arms", [{"name": "a0"}, {"name": "a0"}], "'arms' names an arm twice"),
    ("replicates", "2", "'replicates' must be an integer >= 1, got \"2\""),
    ("replicates", 0, "'replicates' must be an integer >= 1, got 0"),
    ("replicates", True, "'replicates' must be an integer >= 1, got true"),
    ("replicates", 1, "row "),                 # the data hold replicate 1 (of 0, 1)
    ("horizons", "64", "'horizons' must be a list of integers >= 0"),
    ("matched", [{"lower": "zz", "upper": "a0"}], "'matched' must be a list of {lower, upper} "
                                                  "naming arms of the run"),
    ("common_arm", "zz", "'common_arm' \"zz\" is not an arm of the run"),
    ("counts", [1], "'counts' must be {trajectories: int >= 0, readouts: int >= 0}"),
    ("counts", {"trajectories": 1, "readouts": 1}, "counts.trajectories is 1 but "),
    ("synthetic", "yes", "'synthetic' must be true or false"),
])
def test_tampered_horizon_manifests(key, value, needle, horizon_run, tmp_path):
    d = tmp_path / "run"
    shutil.copytree(horizon_run, d)
    m = json.loads((d / "horizon.json").read_text())
    m[key] = value
    (d / "horizon.json").write_text(json.dumps(m))
    err = refused(cli("horizon", "analyze", d, "--json", tmp_path / "h.json"), needle)
    if needle == "row ":
        assert ": replicate 1 is beyond the manifest's 1 replicates" in err
    assert not (tmp_path / "h.json").exists()


def test_split_from_the_frozen_default_file_equals_the_default_split(tiny, tmp_path):
    """Item 7: the README's frozen default (`otbench.split-config/1`) is accepted by
    --from-file and gives the default split, with the file recorded."""
    from pathlib import Path

    from otbench.analysis import load

    default = Path(__file__).resolve().parents[2] / "artifacts/otbench/split-default.json"
    r = cli("split", tiny, "--from-file", default, "--out", tmp_path / "a")
    assert r.exit_code == 0, r.output
    assert cli("split", tiny, "--out", tmp_path / "b").exit_code == 0
    a, b = load(tmp_path / "a"), load(tmp_path / "b")
    assert (a.split == b.split).all()
    info = a.provenance["split"]
    assert info["file"] == "split-default.json" and info["seed"] == 20260721
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**json.loads(default.read_text()), "ratios": [1, -1, 0]}))
    refused(cli("split", tiny, "--from-file", bad, "--out", tmp_path / "c"), "bad.json: ")
    bad.write_text(json.dumps({"schema": "otbench.split-config/1", "scheme": "other"}))
    refused(cli("split", tiny, "--from-file", bad, "--out", tmp_path / "c"),
            "bad.json: scheme must be 'otbench.split/1', got 'other'")
    bad.write_text(json.dumps({"schema": "x"}))
    refused(cli("split", tiny, "--from-file", bad, "--out", tmp_path / "c"),
            "schema must be 'otbench.splits/1' (an assignment) or 'otbench.split-config/1' "
            "(a seeded split), got 'x'")
    assert not (tmp_path / "c").exists()


def test_overwrite_wording_is_the_api_s_or_the_cli_s_never_both(tiny, tmp_path):
    """Item 7: the library names its keyword, the CLI its option (no "overwrite=True / --overwrite")."""
    from _bad_input import small_set, write_jsonl
    from otbench.analysis.measurement import save

    d = tmp_path / "S"
    save(small_set(), d)
    with pytest.raises(FileExistsError) as e:
        save(small_set(), d)
    assert str(e.value) == f"{d}: already exists (pass `overwrite` to replace it)"
    f = write_jsonl(tmp_path / "a.jsonl", small_set())
    err = refused(cli("import", f, "--out", d), "already exists (pass `--overwrite` to replace it)")
    assert "overwrite=True" not in err


_REC = {"model": "m", "group": "g", "question": "q", "trajectory": 0, "probes": 2,
        "L": [0, 5], "C": [0, 1], "y": 1}


@pytest.mark.parametrize("field,value,needle", [
    ("model", "", "model must be a non-empty string"),        # the JSONL reader's rule
    ("model", "  ", "model name is empty"),
    ("group", " \t", "group name is empty"),
    ("model", "m\x1b[2J\x1b[31mOWNED", "model 'm\\x1b[2J\\x1b[31mOWNED' holds the control "
                                       "character U+001B"),
    ("question", "q\x00", "holds the control character U+0000"),
    ("group", "g\nnext", "holds the control character U+000A"),
    ("model", "m\x9b31m", "holds the control character U+009B"),
    ("question", "../../etc/passwd", "question id '../../etc/passwd' is a path out of its folder"),
    ("question", "/etc/passwd", "question id '/etc/passwd' is a path out of its folder"),
    ("question", "a\\..\\b", "is a path out of its folder"),
])
def test_names_that_are_empty_control_characters_or_escaping_paths(field, value, needle, tmp_path):
    from _bad_input import write_jsonl

    f = write_jsonl(tmp_path / "a.jsonl", [{**_REC, field: value}])
    err = refused(cli("import", f, "--out", tmp_path / "o"), "a.jsonl:1: ", needle)
    assert "\x1b" not in err and "\x00" not in err
    assert not (tmp_path / "o").exists()


def test_ids_that_are_relative_paths_inside_their_folder_stay_valid(tmp_path):
    from _bad_input import write_jsonl

    f = write_jsonl(tmp_path / "a.jsonl", [{**_REC, "question": "test/algebra/1.json"}])
    assert cli("import", f, "--out", tmp_path / "o").exit_code == 0


def test_a_legacy_layout_set_with_an_empty_model_name_is_refused(tiny, tmp_path):
    """Item 5: the model column of a file holds ''; validate refuses it (split in place would
    have written trajectories//AIME/...)."""
    d = _copy(tiny, tmp_path)
    m = json.loads((d / "manifest.json").read_text())
    entry = m["files"][0]
    f = d / entry["path"]
    t = pq.read_table(f)
    t = t.set_column(t.column_names.index("model"), "model", pa.array([""] * t.num_rows))
    f.unlink()
    entry["path"] = "trajectories/model=/group=" + entry["path"].split("/")[2] + "/part-0.parquet"
    f = d / entry["path"]
    f.parent.mkdir(parents=True)
    pq.write_table(t, f)
    entry["sha256"] = hashlib.sha256(f.read_bytes()).hexdigest()
    (d / "manifest.json").write_text(json.dumps(m))
    before = sorted(p.relative_to(d) for p in d.rglob("*"))
    refused(cli("validate", d), "part-0.parquet: row 0: model name is empty")
    refused(cli("split", d), "model name is empty")
    assert sorted(p.relative_to(d) for p in d.rglob("*")) == before


def test_import_of_an_endless_file_without_line_breaks_stops_at_the_line_bound(tmp_path):
    """Item 4: `import /dev/zero` under a memory limit; here an 8 GiB sparse file (zeros, no
    disk used) read under a 2 GiB address-space limit: one line, in seconds."""
    import subprocess
    import sys

    f = tmp_path / "zeros.jsonl"
    with open(f, "wb") as fh:
        fh.truncate(8 << 30)
    code = ("import resource, sys; resource.setrlimit(resource.RLIMIT_AS, (2 << 30, "
            "resource.RLIM_INFINITY)); from otbench.cli import main; sys.exit(main(sys.argv[1:]))")
    r = subprocess.run([sys.executable, "-c", code, "import", str(f), "--out",
                        str(tmp_path / "o")], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stderr[-2000:]
    assert r.stderr.strip().splitlines()[-1] == f"{f}:1: line longer than 64 MiB (not a JSONL record)"
    assert not (tmp_path / "o").exists()


def test_import_from_an_endless_fifo_stops(tmp_path):
    import os
    import threading

    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)

    def writer():
        try:
            with open(fifo, "wb") as w:
                while True:
                    w.write(b"\0" * (1 << 20))
        except (BrokenPipeError, OSError):
            pass

    t = threading.Thread(target=writer, daemon=True)
    t.start()
    refused(cli("import", fifo, "--out", tmp_path / "o"),
            "pipe.jsonl:1: line longer than 64 MiB (not a JSONL record)")
    t.join(10)
    assert not t.is_alive() and not (tmp_path / "o").exists()


def test_import_stops_when_memory_runs_out(tmp_path, monkeypatch):
    from _bad_input import small_set, write_jsonl
    from otbench import resources
    from otbench.analysis.measurement import _jsonl

    monkeypatch.setattr(_jsonl, "CHECK_EVERY", 2)
    monkeypatch.setattr(resources, "available_memory", lambda: 1 << 20)
    f = write_jsonl(tmp_path / "a.jsonl", small_set())
    refused(cli("import", f, "--out", tmp_path / "o"),
            "a.jsonl:2: less than 256 MiB of memory left; the file is too large to import here")


@pytest.mark.parametrize("opt,doc,needle", [
    ("--thinning", {"schema": "otbench.thinning/1", "probes": [1]},
     "'probes' must be an object, got list"),
    ("--thinning", {"schema": "otbench.thinning/1", "probes": {"2": 5}},
     "'probes['2']' must be an object, got int"),
    ("--thinning", {"schema": "otbench.thinning/1", "trajectories": {"2": {"or": [1, 2, 3],
                                                                          "ad": None}}},
     "'trajectories['2'].or' must be null or a [lo, hi] pair, got list"),
    ("--bootstrap", {"schema": "otbench.bootstrap/1", "frontiers": [1, 2, 3]}, "'cells' is missing"),
    ("--bootstrap", {"schema": "otbench.bootstrap/1", "cells": [], "macro": {}, "by_model": {},
                     "by_group": {"AIME": 1}}, "'by_group['AIME']' must be an object, got int"),
    ("--bootstrap", {"schema": "otbench.bootstrap/1", "cells": [], "macro": {}, "by_model": {},
                     "by_group": {}, "frontiers": [1, 2, 3]},
     "'frontiers' must be an object, got list"),
    ("--otbench", {"schema": "otbench.bench/1"}, "'method' is missing"),
    ("--otbench", {"schema": "otbench.bench/1", "method": "m", "strategy": "dr", "points": 3,
                   "summary": {}, "reference": {}}, "'points' must be a list, got int"),
    ("--otbench", {"schema": "otbench.bench/1", "method": "m", "strategy": "dr",
                   "points": [{"rel_cost": "x"}], "summary": {}, "reference": {}},
     "'points[0].rel_cost' must be a number, got str"),
])
def test_report_inputs_of_the_right_schema_but_the_wrong_shape(opt, doc, needle, tiny, tmp_path):
    f = tmp_path / "in.json"
    f.write_text(json.dumps(doc))
    r = cli("report", tiny, "--out", tmp_path / "r", opt, f, "--grid", "11")
    assert r.exit_code == 2 and "Traceback" not in r.output, (r.output, r.exception)
    last = r.stderr.strip().splitlines()[-1]          # after the banner and progress lines
    assert last.startswith(("in.json: cannot be used", "in.json: method")), last
    assert needle in last, last
    assert not (tmp_path / "r").exists()


def test_a_cached_metrics_document_holding_only_cells_is_recomputed(tiny, tmp_path):
    d = _copy(tiny, tmp_path)
    (d / "results").mkdir(exist_ok=True)
    m = json.loads((d / "manifest.json").read_text())
    (d / "results" / "metrics.json").write_text(json.dumps(
        {"schema": "otbench.metrics/1", "cells": [], "content_hash": m["content_hash"]}))
    r = cli("report", d, "--out", tmp_path / "r", "--grid", "11")
    assert r.exit_code == 0, r.output
    assert (tmp_path / "r" / "index.html").is_file()


@pytest.mark.parametrize("kind,cmd", [("metrics", ("metrics",)),
                                      ("frontier", ("frontier", "--grid", "11"))])
def test_a_cached_result_without_its_content_hash_is_recomputed_with_a_note(kind, cmd, tiny,
                                                                             tmp_path):
    """Item 5: a cached metrics.json / frontier.json whose content_hash was removed is not
    used silently: the report recomputes it and its notes say why."""
    d = _copy(tiny, tmp_path)
    assert cli(cmd[0], d, *cmd[1:]).exit_code == 0
    f = d / "results" / f"{kind}.json"
    doc = json.loads(f.read_text())
    del doc["content_hash"]
    f.write_text(json.dumps(doc))
    r = cli("report", d, "--out", tmp_path / "r", "--grid", "11")
    assert r.exit_code == 0, r.output
    notes = json.loads((tmp_path / "r" / "report.json").read_text())["notes"]
    assert f"{kind}: {kind}.json not used (it records no content hash); recomputed" in notes
