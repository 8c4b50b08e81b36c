"""The one-line start (issue 29): every --model-args key and --tasks name onto the job, and back
through --write-job; the job TOML it writes is the same job."""

import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner
from otbench.cli import main as cli
from otbench.probe.data import TASKS, source_task, task_source
from otbench.probe.stp import MODEL_ARGS, JobError, job_from_dict, job_toml, load_job, oneline_table
from otbench.probe.stp._oneline import GEN_KWARGS

FIXTURES = Path(__file__).parents[1] / "data" / "fixtures"
LOCAL = {"aime26": FIXTURES / "aime2026.jsonl", "math500": FIXTURES / "math500.jsonl",
         "aime24": FIXTURES / "aime2024.parquet", "aime25": FIXTURES / "aime2025.jsonl",
         "gpqa-diamond": FIXTURES / "gpqa_diamond.csv", "livecodebench": FIXTURES / "lcb"}

# One value per --model-args key, each different from the defaults, and where it must land.
VALUES = {
    "revision": ("abc123", "abc123"), "family": ("generic-chat", "generic-chat"), "id": ("my-id", "my-id"),
    "dtype": ("float32", "float32"), "max_model_len": ("40000", 40000), "max_length": ("40001", 40001),
    "tensor_parallel_size": ("2", 2), "gpu_memory_utilization": ("0.5", 0.5), "block_size": ("16", 16),
    "kv_cache_gib": ("3", 3), "max_num_seqs": ("7", 7), "enforce_eager": ("true", True),
    "chunked_prefill": ("false", False), "enable_chunked_prefill": ("True", True),
    "batch_invariant": ("1", True), "seed": ("9", 9), "base_url": ("http://127.0.0.1:8001", "http://127.0.0.1:8001"),
    "model": ("served-a", "served-a"), "served_model": ("served-b", "served-b"),
    "api_key_env": ("MY_KEY", "MY_KEY"), "num_concurrent": ("5", 5), "max_concurrency": ("6", 6),
    "timeout": ("12.5", 12.5), "request_timeout_s": ("13", 13.0), "retry_s": ("40", 40.0),
}


def test_every_model_args_key_has_a_test_value():
    assert set(VALUES) == set(MODEL_ARGS)


@pytest.mark.parametrize("key", sorted(MODEL_ARGS))
def test_each_model_args_key_lands_on_its_job_key_and_round_trips(key, tmp_path):
    text, want = VALUES[key]
    table_name, job_key, _ = MODEL_ARGS[key]
    kind = "openai" if job_key in ("base_url", "served_model", "api_key_env", "max_concurrency",
                                   "request_timeout_s", "retry_s") else "vllm"
    args = f"pretrained=smollm2-135m-instruct,{key}={text}"
    if kind == "openai" and key != "base_url":
        args += ",base_url=http://127.0.0.1:8000"
    t = oneline_table(kind, args, "sums", cwd=tmp_path)
    assert t[table_name][job_key] == want
    assert tomllib.loads(job_toml(t)) == t
    job = job_from_dict(t)
    if table_name == "engine":
        assert getattr(job.engine, job_key) == want
    _cli_round_trip(tmp_path, ["--model", kind, "--model-args", args, "--tasks", "sums"], job)


def _cli_round_trip(tmp_path, argv, job):
    path = tmp_path / "job.toml"
    r = CliRunner().invoke(cli, ["probe", "run", *argv, "--write-job", str(path)])
    assert r.exit_code == 0, r.output
    again = load_job(path)
    assert again.as_dict() == job.as_dict()
    path.unlink()


@pytest.mark.parametrize("name", list(TASKS))
def test_each_task_name_maps_onto_a_source_and_back(name, tmp_path):
    t = TASKS[name]
    specs = ([name] if t.embedded is not None or t.hub is not None else []) + \
        ([f"{name}={LOCAL[name]}"] if name in LOCAL else [])
    assert specs
    for spec in specs:
        src = task_source(spec)
        assert source_task(src) == spec
        if t.embedded is not None:
            assert src == {"embedded": t.embedded}
        else:
            assert src["benchmark"] == t.benchmark
        table = oneline_table("transformers", "pretrained=smollm2-135m-instruct", spec, limit=2,
                              R=3, P=5, b=7, cwd=tmp_path)
        job = job_from_dict(table)
        assert job.data["sources"] == [src] and job.data["limit"] == 2
        assert (job.R, job.P, job.b) == (3, 5, 7)
        _cli_round_trip(tmp_path, ["--model", "transformers", "--model-args",
                                   "pretrained=smollm2-135m-instruct", "--tasks", spec, "--limit", "2",
                                   "--R", "3", "--P", "5", "--b", "7"], job)


def test_the_issue_example_is_one_job(tmp_path):
    argv = ["--model", "vllm", "--model-args",
            "pretrained=Qwen/Qwen3-4B-Thinking-2507,revision=abc,tensor_parallel_size=2,family=qwen3-thinking",
            "--tasks", "math500,aime24,gpqa-diamond,livecodebench", "--limit", "4", "--R", "8", "--P", "16",
            "--gen-kwargs", "temperature=0.7,thinking_limit=2048,answer_limit=256"]
    table = oneline_table("vllm", argv[3], argv[5], limit=4, R=8, P=16, gen_kwargs=argv[-1], cwd=tmp_path)
    job = job_from_dict(table)
    assert job.hub == ("Qwen/Qwen3-4B-Thinking-2507", "abc") and job.engine.tensor_parallel_size == 2
    assert [s["benchmark"] for s in job.data["sources"]] == ["MATH500", "AIME2024", "GPQA-Diamond",
                                                            "LiveCodeBench"]
    assert job.sampling.temperature == 0.7 and (job.thinking_limit, job.answer_limit) == (2048, 256)
    _cli_round_trip(tmp_path, argv, job)
    assert set(GEN_KWARGS) == {"temperature", "top_p", "top_k", "presence_penalty", "thinking_limit",
                               "answer_limit"}


def test_a_local_model_folder_and_relative_paths_become_absolute(tmp_path):
    (tmp_path / "m").mkdir()
    t = oneline_table("transformers", "pretrained=./m,family=generic-chat", "math500=data/x.jsonl", cwd=tmp_path)
    assert t["model"] == {"path": str(tmp_path / "m"), "family": "generic-chat"}
    assert t["data"]["sources"] == [{"benchmark": "MATH500", "path": str(tmp_path / "data" / "x.jsonl")}]


@pytest.mark.parametrize("model, args, tasks, message", [
    ("vllm", "revision=abc", "sums", "needs pretrained="),
    ("vllm", "pretrained=smollm2-135m-instruct,bogus=1", "sums", "unknown key 'bogus'"),
    ("vllm", "pretrained=smollm2-135m-instruct,max_model_len=big", "sums", "must be an integer"),
    ("vllm", "pretrained=smollm2-135m-instruct,max_length=10,max_model_len=11", "sums", "already set"),
    ("vllm", "pretrained=smollm2-135m-instruct,dtype", "sums", "is not KEY=VALUE"),
    ("vllm", "pretrained=smollm2-135m-instruct,base_url=http://127.0.0.1:1", "sums",
     r"engine.base_url applies to engine.kind = 'openai' only"),
    ("openai", "pretrained=smollm2-135m-instruct", "sums", "engine.base_url is required"),
    ("vllm", "pretrained=smollm2-135m-instruct", "math5000", "unknown task 'math5000'"),
    ("vllm", "pretrained=smollm2-135m-instruct", "aime26", "no default Hugging Face location"),
    ("vllm", "pretrained=smollm2-135m-instruct", "sums=x", "takes no =PATH"),
    ("vllm", "pretrained=smollm2-135m-instruct", "sums,sums", "given twice"),
    ("vllm", "pretrained=smollm2-135m-instruct", " , ", "at least one task"),
    ("tgi", "pretrained=smollm2-135m-instruct", "sums", "--model must be one of"),
])
def test_bad_one_line_starts_are_one_line_errors(model, args, tasks, message, tmp_path):
    with pytest.raises(Exception, match=message) as e:
        job_from_dict(oneline_table(model, args, tasks, cwd=tmp_path))
    assert isinstance(e.value, (JobError, ValueError)) and "\n" not in str(e.value)


def test_cli_refuses_mixed_forms_and_writes_no_job_over_an_existing_file(tmp_path):
    job = tmp_path / "job.toml"
    job.write_text("# mine\n")
    r = CliRunner().invoke(cli, ["probe", "run", "--config", str(job), "--model", "vllm", "--tasks", "sums",
                                 "--out", str(tmp_path / "o")])
    assert r.exit_code == 2 and "not both" in r.output
    r = CliRunner().invoke(cli, ["probe", "run", "--model", "vllm", "--model-args",
                                 "pretrained=smollm2-135m-instruct", "--tasks", "sums", "--write-job", str(job)])
    assert r.exit_code == 2 and "otbench did not write it" in r.output and job.read_text() == "# mine\n"
    r = CliRunner().invoke(cli, ["probe", "run", "--model", "vllm", "--tasks", "sums"])
    assert r.exit_code == 2 and "--out DIR is required" in r.output


def test_probe_tasks_lists_the_registry(tmp_path):
    r = CliRunner().invoke(cli, ["probe", "tasks", "--json", str(tmp_path / "t.json")])
    assert r.exit_code == 0, r.output
    for t in TASKS.values():
        assert t.name in r.output and t.group in r.output
    assert "hub HuggingFaceH4/MATH-500 split test" in r.output
    import json
    assert json.loads((tmp_path / "t.json").read_text())["gpqa-diamond"]["config"] == "gpqa_diamond"


def test_a_short_model_context_sets_the_context_and_limits_that_fit(tmp_path):
    """A model whose own context (config.json) is shorter than its family's runs at its own, with the
    family's limits cut to fit; limits and a context the user gives are kept."""
    import json

    from otbench.probe.config import load_family

    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"max_position_embeddings": 8192}))
    t = oneline_table("vllm", f"pretrained={folder},family=generic-chat", "sums", cwd=tmp_path)
    fam = load_family("generic-chat").limits
    assert fam.context == 65536 and fam.thinking == 32768
    assert t["engine"]["max_model_len"] == 8192
    assert t["probe"] == {"answer_limit": 1024, "thinking_limit": 8192 - 1024 - 1024}
    t = oneline_table("vllm", f"pretrained={folder},family=generic-chat", "sums",
                      gen_kwargs="thinking_limit=96", cwd=tmp_path)
    assert t["probe"] == {"thinking_limit": 96, "answer_limit": 1024}
    t = oneline_table("vllm", f"pretrained={folder},family=generic-chat,max_model_len=4096", "sums", cwd=tmp_path)
    assert t["engine"]["max_model_len"] == 4096 and "probe" not in t
    (folder / "config.json").write_text(json.dumps({"max_position_embeddings": 131072}))   # longer: the family's
    assert "max_model_len" not in oneline_table("vllm", f"pretrained={folder},family=generic-chat", "sums",
                                                cwd=tmp_path)["engine"]


@pytest.mark.slow
def test_the_one_line_start_on_the_embedded_model_probes_three_questions(tmp_path):
    """`probe run --model vllm --model-args pretrained=smollm2-135m-instruct --tasks sums --limit 3`:
    SmolLM2's own 8,192-token context (not the family's 65,536, which vLLM refuses), three questions."""
    pytest.importorskip("vllm")
    from _models import embedded_smollm2

    embedded_smollm2()
    from otbench.analysis import load

    t = oneline_table("vllm", "pretrained=smollm2-135m-instruct", "sums", cwd=tmp_path)
    assert t["engine"]["max_model_len"] == 8192
    out = tmp_path / "set"
    r = CliRunner().invoke(cli, ["probe", "run", "--model", "vllm", "--model-args",
                                 "pretrained=smollm2-135m-instruct,dtype=float32", "--tasks", "sums",
                                 "--limit", "3", "--R", "1", "--P", "2",
                                 "--gen-kwargs", "thinking_limit=64,answer_limit=8", "--out", str(out),
                                 "--no-progress"])
    assert r.exit_code == 0, r.output
    ms = load(out)
    assert len(set(ms.question.tolist())) == 3 and ms.num_trajectories == 3
    assert ms.provenance["engine"]["config"]["max_model_len"] == 8192
