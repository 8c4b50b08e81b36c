"""Job TOML: every key typed and known, no path opened but a family name or a .toml file."""

import json
import math
import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from otbench.probe.stp import JobError, job_from_dict, load_job

BASE = {"model": {"path": "m", "family": "qwen3-thinking", "id": "m"},
        "data": {"source": "sums", "n": 2},
        "probe": {"R": 2, "P": 3, "b": 16, "thinking_limit": 64, "answer_limit": 8}}


def _with(section, key, value):
    cfg = json.loads(json.dumps(BASE))
    cfg.setdefault(section, {})[key] = value
    return cfg


@pytest.mark.parametrize("section,key,value,msg", [
    ("sampling", "temperature", math.nan, r"sampling\.temperature must be a non-negative number "
                                          r"\(a finite number\), got nan"),
    ("probe", "b", 99999999999999999, r"probe\.b must be at most 2147483647, got 99999999999999999"),
    ("probe", "P", 70000, r"probe\.P must be at most 65535, got 70000"),
    ("engine", "max_model_len", 4096.5, r"engine\.max_model_len must be a positive integer, got 4096\.5"),
    ("engine", "kv_cache_gib", "lots", r"engine\.kv_cache_gib must be a positive integer, got 'lots'"),
    ("engine", "enforce_eager", "yes", r"engine\.enforce_eager must be true or false, got 'yes'"),
    ("model", "weights", "x", r"unknown key model\.weights \(expected one of family, id, name, path, revision\)"),
    ("model", "name", "../../etc/passwd", r"model\.name must be a frozen name"),
    ("engine", "batch_invariant", "yes", r"engine\.batch_invariant must be true or false, got 'yes'"),
    ("probe", "units_in_flight", 0, r"probe\.units_in_flight must be"),
    ("data", "split", "test", r"unknown key data\.split \(expected one of benchmark, limit, n, path, seed, source, sources\)"),
    ("model", "family", "../../../../etc/passwd", r"model\.family must be a frozen name \(letters, "
                                                  r"digits, \. _ -\) or a \.toml file, got "),
    ("model", "family", "/etc/passwd", r"model\.family must be a frozen name"),
    ("sampling", "top_p", math.inf, r"sampling\.top_p must be in \(0, 1\] \(a finite number\), got inf"),
])
def test_typed_keys(section, key, value, msg):
    with pytest.raises(JobError, match=msg):
        job_from_dict(_with(section, key, value))


def test_a_table_that_is_not_a_table():
    with pytest.raises(JobError, match=r"\[probe\] must be a table, got 3"):
        job_from_dict({**BASE, "probe": 3})


def test_non_utf8_and_unreadable_job_files(tmp_path: Path):
    p = tmp_path / "job.toml"
    p.write_bytes(b'[model]\npath = "m\xff"\n')
    with pytest.raises(JobError, match=r"job\.toml: not UTF-8 text \(invalid start byte at byte 17\)"):
        load_job(p)
    fifo = tmp_path / "fifo.toml"
    os.mkfifo(fifo)                     # no writer: a blocking open would wait forever
    for special in (tmp_path, fifo, "/dev/zero"):
        with pytest.raises(JobError, match=r": not a regular file \(a FIFO, device or folder is "
                                           r"not a job file \(a TOML table\)\)$"):
            load_job(special)


_toml_values = st.recursive(
    st.booleans() | st.integers(-2**70, 2**70) | st.floats() | st.text(max_size=20),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=8), c, max_size=3),
    max_leaves=8)


@given(st.dictionaries(st.sampled_from(["model", "engine", "data", "probe", "sampling", "grader"]),
                       st.dictionaries(st.sampled_from(["name", "path", "family", "kind", "n", "R",
                                                        "P", "b", "temperature", "top_p", "source",
                                                        "max_model_len", "boundary", "x"]),
                                       _toml_values, max_size=4), max_size=4))
def test_any_job_table_is_a_job_or_one_job_error(cfg):
    try:
        job_from_dict(cfg)
    except JobError as e:
        assert "\n" not in str(e)
    except ValueError as e:        # the family/model loaders' ArtifactError (one line, exit 2)
        assert type(e).__name__ == "ArtifactError" and "\n" not in str(e)


def test_data_file_rules(tmp_path: Path):
    from click.testing import CliRunner
    from otbench.cli import main

    with pytest.raises(JobError, match=r"data\.benchmark must be one of MATH500, AIME2024, .*got 'aime'"):
        job_from_dict({**BASE, "data": {"source": "file", "benchmark": "aime", "path": "x"}})
    job = tmp_path / "job.toml"
    job.write_text('[model]\nname = "smollm2-135m-instruct"\n[data]\nsource = "file"\n'
                   'benchmark = "AIME2024"\npath = "missing.jsonl"\n')
    r = CliRunner().invoke(main, ["probe", "run", "--config", str(job), "--out",
                                  str(tmp_path / "out")])
    assert r.exit_code == 2 and "Traceback" not in r.output
    assert r.stderr.strip().splitlines()[-1].endswith("missing.jsonl: no such file")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("dtype", ["__import__('os')", "float64", "torch.float16", "", 16, "auto"])
def test_engine_dtype_is_one_of_the_three_the_engines_load(dtype):
    """Issue 24, item 4: a hostile dtype never reaches vLLM or torch's name lookup."""
    with pytest.raises(JobError, match=r"^engine\.dtype must be one of bfloat16, float16, "
                                       r"float32, got "):
        job_from_dict(_with("engine", "dtype", dtype))
    assert job_from_dict(_with("engine", "dtype", "float16")).engine.dtype == "float16"


@pytest.mark.parametrize("text,msg", [
    ("x = " + "{a = " * 1000 + "1" + "}" * 1000, r"not accepted TOML \(nested too deep to parse\)"),
    ("x = " + "[" * 1000 + "1" + "]" * 1000, r"not accepted TOML \(nested too deep to parse\)"),
    ("[data]\nsources = " + "[" * 40 + "1" + "]" * 40,
     r"the job is nested deeper than 16 levels \(at data\.sources\[0\]"),
    ("[data]\n[data.sources" + ".a" * 1000 + "]\nk = 1",
     r"the job is nested deeper than 16 levels \(at data\.sources\.a\.a"),
])
def test_deep_tables_are_one_line(text, msg, tmp_path):
    """Issue 24, item 4: 1,000-deep tables and arrays are refused, not a RecursionError."""
    p = tmp_path / "job.toml"
    p.write_text('[model]\nname = "smollm2-135m-instruct"\n' + text + "\n")
    with pytest.raises(JobError, match=msg) as e:
        load_job(p)
    assert str(e.value).startswith(f"{p}: ") and "\n" not in str(e.value)
