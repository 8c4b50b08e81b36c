"""Job configuration, seeds, the minimal grader, unit records and the written measurement set."""

import hashlib
import json
from array import array
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from otbench.probe.config._seeds import derive_seed
from otbench.probe.data import sum_questions
from otbench.probe.grading._batch import grade_minimal, last_boxed, resolve_grader
from otbench.probe.stp._job import JobError, job_from_dict, load_job
from otbench.probe.stp._loop import UnitResult

# -- seeds ---------------------------------------------------------------------------


def test_seed_definition():
    # the documented formula, recomputed here with hashlib directly
    fields = "\x1f".join(["otbench.seed/1", "m", "MATH500", "q7", "3", "probe", "12"])
    want = int.from_bytes(hashlib.sha256(fields.encode()).digest()[:8], "big") >> 2
    assert derive_seed("m", "MATH500", "q7", 3, "probe", 12) == want
    assert want < 2 ** 62


def test_seeds_differ_by_every_field():
    base = ("m", "b", "q", 0, "probe", 0)
    seen = {derive_seed(*base)}
    for i, v in enumerate(["m2", "b2", "q2", 1, "think", 1]):
        args = list(base)
        args[i] = v
        if args[4] != "probe":
            args[5] = None
        seen.add(derive_seed(*args))
    assert len(seen) == 7


@pytest.mark.parametrize("args,msg", [
    (("m", "b", "q", 0, "gen"), r"`phase` must be one of think, answer, probe, direct, dynasor, deer, thinkbrake, got 'gen'"),
    (("m", "b", "q", 0, "probe"), r"`position` is required for phase 'probe' and only for it"),
    (("m", "b", "q", 0, "think", 3), r"`position` is required for phase 'probe' and only for it"),
    (("m", "b", "q", -1, "think"), r"`trajectory` must be a non-negative integer, got -1"),
    (("m\x1f", "b", "q", 0, "think"), r"`model` must be a string without U\+001F"),
])
def test_seed_validation(args, msg):
    with pytest.raises(ValueError, match=msg):
        derive_seed(*args)


# -- minimal grader ------------------------------------------------------------------------


@pytest.mark.parametrize("response,ref,want", [
    ("Therefore, the final answer is $\\boxed{7}$.", "7", (True, "ok")),        # the demo's format
    ("\\boxed{ -3 }", "-3", (True, "ok")),                                     # spaces and sign
    ("\\boxed{1,024}", "1024", (True, "ok")),                                  # thousands separator
    ("\\boxed{7.0}", "7", (True, "ok")),                                       # trailing .0
    ("\\boxed{6} then \\boxed{7}", "7", (True, "ok")),                        # the last box counts
    ("\\boxed{8}", "7", (False, "wrong_answer")),
    ("the answer is 7", "7", (False, "no_answer")),                            # no box: no answer
    ("\\boxed{7", "7", (False, "no_answer")),                                  # unbalanced
    ("\\boxed{x+1}", "7", (False, "parse_error")),
    ("<think>\\boxed{7}</think>\\boxed{8}", "7", (False, "wrong_answer")),      # thinking is never read
])
def test_minimal_grader(response, ref, want):
    assert grade_minimal("math", ref, response) == want


def test_minimal_grader_limits():
    with pytest.raises(ValueError, match=r"handles task 'math' only, got 'code'"):
        grade_minimal("code", "", "x")
    with pytest.raises(ValueError, match=r"needs an integer reference, got '1/2'"):
        grade_minimal("math", "1/2", "x")
    assert last_boxed("\\boxed{\\frac{1}{2}}") == "\\frac{1}{2}"
    assert resolve_grader("minimal")[0] == "minimal"
    with pytest.raises(ValueError, match=r"`grader` must be one of auto, otbench, minimal"):
        resolve_grader("llm")


def test_sum_questions_are_deterministic_and_exact():
    qs = sum_questions(20, seed=3)
    assert [q.text for q in qs] == [q.text for q in sum_questions(20, seed=3)]
    for q in qs:
        a, op, b = q.text[len("What is "):-1].split()
        assert int(q.reference) == (int(a) + int(b) if op == "+" else int(a) - int(b))
        assert 1 <= int(a) <= 9 and 1 <= int(b) <= 9
    assert len({q.id for q in qs}) == 20


# -- job configuration --------------------------------------------------------------------


BASE = {"model": {"path": "/m", "family": "qwen3-thinking"}, "engine": {"kind": "transformers"},
        "data": {"source": "sums", "n": 2}, "probe": {"R": 2, "P": 3, "b": 16, "thinking_limit": 64,
                                                    "answer_limit": 8}}


def _with(**kw):
    cfg = json.loads(json.dumps(BASE))
    for key, v in kw.items():
        sect, _, k = key.partition("__")
        if v is None:
            cfg[sect].pop(k, None)
        else:
            cfg[sect][k] = v
    return cfg


def test_job_defaults_from_family():
    job = job_from_dict(_with())
    assert (job.R, job.P, job.b, job.thinking_limit, job.answer_limit) == (2, 3, 16, 64, 8)
    assert job.sampling.top_k == 20 and job.boundary == "vocab" and job.model == "m"
    job = job_from_dict({"model": {"name": "smollm2-135m-instruct"},
                         "engine": {"max_model_len": 40000}})
    assert job.embedded == "smollm2-135m-instruct" and job.boundary == "vocab+span"
    assert job.thinking_limit == 32768 and job.family.name == "generic-chat"


@pytest.mark.parametrize("cfg,msg", [
    (_with(probe__R=0), r"probe.R must be a positive integer, got 0"),
    (_with(probe__b=2.5), r"probe.b must be a positive integer, got 2.5"),
    (_with(probe__boundary="lines"), r"probe.boundary must be one of vocab, vocab\+span, got 'lines'"),
    (_with(engine__kind="tgi"), r"engine.kind must be one of vllm, transformers, openai, got 'tgi'"),
    (_with(engine__base_url="http://127.0.0.1:8000"), r"engine.base_url applies to engine.kind = 'openai' only"),
    (_with(engine__kind="openai"), r"engine.base_url is required for engine.kind = 'openai'"),
    (_with(engine__gpus=2), r"unknown key engine.gpus"),
    (_with(data__source="web"), r"data.source must be one of sums, arithmetic, champ, file, got 'web'"),
    (_with(data__source="file"), r"data.benchmark is required for data.source = 'file'"),
    (_with(model__family=None), r"model.family is required for a model that is not a model entry"),
    (dict(_with(), sampling={"temperature": -1}), r"sampling.temperature must be a non-negative number"),
    (dict(_with(), sampling={"top_p": 0}), r"sampling.top_p must be in \(0, 1\], got 0"),
    (dict(_with(), sampling={"min_p": 0.1}), r"unknown key sampling.min_p"),
    (dict(_with(), grader={"kind": "judge"}), r"grader.kind must be one of auto, otbench, minimal"),
    (dict(_with(), extra={}), r"unknown table \[extra\]"),
    (_with(engine__max_model_len=60), r"engine.max_model_len \(60\) must exceed"),
    ({"model": {"name": "qwen3-4b-thinking"}}, r"model.name 'qwen3-4b-thinking' is neither a model entry"),
])
def test_job_validation(cfg, msg):
    with pytest.raises(JobError, match=msg):
        job_from_dict(cfg)


def test_load_job_names_the_file(tmp_path: Path):
    p = tmp_path / "job.toml"
    p.write_text('[model]\npath = "m"\nfamily = "qwen3-thinking"\n[probe]\nP = 0\n')
    with pytest.raises(JobError, match=r"job.toml: probe.P must be a positive integer, got 0"):
        load_job(p)
    p.write_text('[model]\npath = "m"\nfamily = "qwen3-thinking"\n')
    assert load_job(p).engine.model == str(tmp_path / "m")   # relative to the file


# -- unit records and the written set --------------------------------------------------------


def _unit(q="q1", r=0, L=(0, 3, 5), C=(0, 1, 2), group="G", finished=True):
    n = len(L) - 1
    return UnitResult(
        group=group, dataset="D", question=q, trajectory=r, prompt=(1, 2), thinking=tuple(range(L[-1])),
        finished=finished, stop_id=9 if finished else None, answer=(4,), y=1, y_status="ok", L=tuple(L),
        C=tuple(C), probe_tokens=tuple(((5,), (6, 7)) for _ in range(n + 1)),
        probe_status=tuple(tuple("ok" if j < c else "wrong_answer" for j in range(2)) for c in C),
        logp_end=tuple(-1.0 - k for k in range(n + 1)), logp_other=tuple(-0.5 for _ in range(n + 1)),
        other_id=tuple(3 for _ in range(n + 1)),
        seeds={"think": 11, "answer": 12, "probe": [13 + k for k in range(n + 1)]},
    )


def test_unit_record_round_trip():
    u = _unit()
    assert UnitResult.from_record(u.to_record()) == u
    # probe answers are int32 arrays whatever was passed: given as tuples, they compare by value
    assert all(isinstance(t, array) and t.typecode == "i" for pos in u.probe_tokens for t in pos)
    assert u.probe_tokens[0] == (array("i", [5]), array("i", [6, 7]))
    rec = u.to_record()
    rec["probe_tokens"] = [[list(t) for t in pos] for pos in rec["probe_tokens"]]   # lists, as from JSON
    assert UnitResult.from_record(rec) == u


def test_measurement_set_from_units(tmp_path: Path):
    from otbench.analysis.measurement._io import load, load_table, save
    from otbench.probe.stp._output import measurement_set, token_tables

    units = [_unit("q2", 1, (0, 4), (2, 2)), _unit("q1", 0), _unit("q1", 1, (0, 2, 3, 6), (0, 0, 1, 2),
                                                                    finished=False)]
    ms = measurement_set(units, model="m", P=2, provenance={"x": 1})
    ms2 = measurement_set(list(reversed(units)), model="m", P=2, provenance={"x": 1})
    assert np.array_equal(ms.L, ms2.L) and np.array_equal(ms.C, ms2.C)     # order-free assembly
    assert ms.question_id == ("q1", "q2") and ms.n.tolist() == [2, 3, 1]
    # margin = other - end, padded to the right with the last value (SPEC §2)
    np.testing.assert_array_equal(ms.signals["margin"][0], [0.5, 1.5, 2.5, 2.5])
    assert ms.finished.tolist() == [True, False, True]
    save(ms, tmp_path / "set", extra_tables=token_tables(units, model="m"))
    back = load(tmp_path / "set")
    assert np.array_equal(back.L, ms.L)
    probes = load_table(tmp_path / "set", "probes")
    assert probes.num_rows == sum(2 * (u.n + 1) for u in units)
    assert probes.column("correct").to_pylist().count(True) == sum(sum(u.C) for u in units)
    tokens = load_table(tmp_path / "set", "tokens")
    assert tokens.column("question").to_pylist() == ["q1", "q1", "q2"]
    assert tokens.column("stop_id").to_pylist() == [9, None, 9]


# -- the CLI end to end (transformers engine; vLLM is covered in test_probe_engines) -------


def test_probe_cli(tmp_path: Path, tiny_model):
    from otbench.cli._probe import probe_group

    model = tiny_model
    cfg = tmp_path / "job.toml"
    cfg.write_text(f"""
[model]
path = "{model}"
family = "qwen3-thinking"
id = "tiny"
[engine]
kind = "transformers"
dtype = "float32"
max_model_len = 256
[data]
source = "sums"
n = 2
[probe]
R = 2
P = 2
b = 8
thinking_limit = 32
answer_limit = 4
[grader]
kind = "minimal"
""")
    runner = CliRunner()
    out = tmp_path / "set"
    r = runner.invoke(probe_group, ["run", "--config", str(cfg), "--out", str(out), "--no-progress"])
    assert r.exit_code == 0, r.output
    assert "4 trajectories, 2 questions" in r.output
    r2 = runner.invoke(probe_group, ["run", "--config", str(cfg), "--out", str(out), "--no-progress"])
    assert r2.exit_code == 2 and "already exists" in r2.output
    # progress in a log (stderr is not a terminal here): plain timed lines, no bar redraws
    r3 = runner.invoke(probe_group, ["run", "--config", str(cfg), "--out", str(tmp_path / "logged")])
    assert r3.exit_code == 0, r3.output
    lines = [x for x in r3.output.replace("\r", "\n").splitlines() if x.startswith("probing")]
    assert lines and all("|" not in x for x in lines)                # no tqdm bar of ours
    assert lines[-1].startswith("probing: 4/4 (100%), ") and lines[-1].endswith(" s (done)")

    from otbench.analysis.measurement._io import load
    ms = load(out)
    assert ms.provenance["probe"]["b"] == 8 and set(ms.signals) == {"logp_end", "logp_other", "margin", "margin_own", "answer",
                                                             "answer_conf", "hesitation", "answer_tokens",
                                                             "prompt_tokens"}
    assert set(ms.provenance["signals"]) == set(ms.signals)
    assert json.loads((out / "run.json").read_text())["think"]["requests"] == 4

    r = runner.invoke(probe_group, ["resegment", str(out), "--b", "4,8,16", "--json", str(tmp_path / "rs.json")])
    assert r.exit_code == 0, r.output
    assert "b = 8 reproduces the stored positions of 4/4 trajectories" in r.output
    rs = json.loads((tmp_path / "rs.json").read_text())
    assert [row["b"] for row in rs["distributions"]] == [4, 8, 16]
    steps = [row["steps"] for row in rs["distributions"]]
    assert steps[0] >= steps[1] >= steps[2]          # larger b, fewer (or as many) steps
    assert rs["distributions"][1]["steps"] == int(ms.n.sum())

    r = runner.invoke(probe_group, ["audit-tokenizer", str(model), "--top", "2"])
    assert r.exit_code == 0, r.output
    assert "boundary ids of" in r.output and "suffix" in r.output
    r = runner.invoke(probe_group, ["resegment", str(out), "--b", "0"])
    assert r.exit_code == 2 and "expected comma-separated positive integers" in r.output
    bad = tmp_path / "bad.toml"
    bad.write_text("[probe]\nR = 1\n")
    r = runner.invoke(probe_group, ["run", "--config", str(bad), "--out", str(tmp_path / "x")])
    assert r.exit_code == 2 and "[model] needs `name`" in r.output
