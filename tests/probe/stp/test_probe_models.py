"""Models by name (issue 13): entries and Hugging Face ids, offline resolution, sizing, clean refusals."""

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from otbench.probe.config import (
    ModelNotFoundError,
    check_fits,
    check_local_model,
    estimate_memory,
    resolve_hub_model,
)
from otbench.probe.stp import JobError, job_from_dict


def _job(model: dict, **engine):
    return job_from_dict({"model": model, "engine": {"kind": "vllm", **engine},
                          "probe": {"thinking_limit": 64, "answer_limit": 8}})


def test_entry_name_and_hub_id_resolve_to_the_entry():
    a = _job({"name": "qwen3-4b-thinking-2507"})
    b = _job({"name": "qwen/QWEN3-4B-Thinking-2507"})          # a hub id, any case
    for j in (a, b):
        assert j.hub == ("Qwen/Qwen3-4B-Thinking-2507", "main")
        assert j.family.name == "qwen3-thinking" and j.model == "qwen3-4b-thinking-2507"
        assert j.engine.tensor_parallel_size == 1 and j.engine.model == ""
    # the revision can be pinned in the job
    assert _job({"name": "qwen3-4b-thinking-2507", "revision": "abc123"}).hub[1] == "abc123"


def test_entries_carry_tensor_parallel_size():
    assert _job({"name": "deepseek-r1-distill-qwen-32b"}).engine.tensor_parallel_size == 2
    assert _job({"name": "deepseek-r1-distill-qwen-32b"}, tensor_parallel_size=4).engine.tensor_parallel_size == 4


def test_entry_with_a_local_path_takes_the_entry_family(tmp_path: Path):
    j = _job({"name": "qwen3-4b-thinking-2507", "path": str(tmp_path)})
    assert j.family.name == "qwen3-thinking" and j.hub is None and j.engine.model == str(tmp_path)


def test_unknown_ids_need_a_family():
    j = _job({"name": "someone/their-model", "family": "generic-chat", "revision": "r1"})
    assert j.hub == ("someone/their-model", "r1") and j.model == "someone/their-model"
    # Not in the (empty) Hugging Face cache: most likely a typo, said first.
    with pytest.raises(JobError, match=r"model.name 'someone/their-model' was not found: it is not "
                                       r"a model entry and not in the local Hugging Face cache"):
        _job({"name": "someone/their-model"})


def test_a_cached_id_without_a_family_names_the_families(tmp_path, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    (tmp_path / "models--someone--their-model").mkdir()
    with pytest.raises(JobError, match=r"is not a model entry, so model.family is required \(the "
                                       r"chat format: one of .*generic-chat"):
        _job({"name": "someone/their-model"})
    with pytest.raises(JobError, match="neither a model entry .* nor a Hugging Face id"):
        _job({"name": "no-such-entry"})
    with pytest.raises(JobError, match="unknown key model.weights"):
        _job({"name": "qwen3-4b-thinking-2507", "weights": "x"})


def _fake_cache(root: Path, repo: str, commit: str) -> Path:
    d = root / ("models--" + repo.replace("/", "--"))
    snap = d / "snapshots" / commit
    snap.mkdir(parents=True)
    (snap / "config.json").write_text("{}")
    (d / "refs").mkdir()
    (d / "refs" / "main").write_text(commit)
    return snap


@pytest.fixture
def offline_cache(tmp_path: Path, monkeypatch):
    constants = pytest.importorskip("huggingface_hub.constants")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    return tmp_path / "hub"


def test_offline_resolution_through_the_cache(offline_cache):
    snap = _fake_cache(offline_cache, "Org/Model", "c0ffee" * 6 + "abcd")
    got = resolve_hub_model("Org/Model", None)
    assert Path(got.path) == snap and got.commit == snap.name and got.repository == "Org/Model"
    assert Path(resolve_hub_model("Org/Model", snap.name).path) == snap     # pinned by commit
    with pytest.raises(ModelNotFoundError, match=r"^model 'Org/Missing' at revision 'main' is not in the "
                                                 r"Hugging Face cache \(HF_HUB_OFFLINE=1") as e:
        resolve_hub_model("Org/Missing", None)
    assert "\n" not in str(e.value)
    with pytest.raises(ModelNotFoundError, match="revision 'v9'"):
        resolve_hub_model("Org/Model", "v9")


def test_local_folder_checks(tmp_path: Path):
    with pytest.raises(ModelNotFoundError, match="no such folder"):
        check_local_model(tmp_path / "missing")
    with pytest.raises(ModelNotFoundError, match="no config.json"):
        check_local_model(tmp_path)


def _sized_model(d: Path, *, layers=64, kv=8, head=128, weights_gib=61.0) -> Path:
    d.mkdir()
    (d / "config.json").write_text(json.dumps({"num_hidden_layers": layers, "num_attention_heads": 40,
                                               "num_key_value_heads": kv, "head_dim": head,
                                               "hidden_size": 5120, "torch_dtype": "bfloat16"}))
    with open(d / "model.safetensors", "wb") as f:          # sparse: sizes only
        f.truncate(int(weights_gib * (1 << 30)))
    return d


def test_memory_estimate_and_refusal(tmp_path: Path):
    d = _sized_model(tmp_path / "m32b")
    one = estimate_memory(d, max_model_len=65536, tensor_parallel_size=1)
    assert one.weights_gib == pytest.approx(61.0) and one.kv_gib == pytest.approx(16.0)
    gpu = 80e9 / (1 << 30)                                   # an 80 GB GPU in GiB
    with pytest.raises(ValueError, match=r"needs ~81\.0 GiB \(weights 61\.0 \+ KV cache of one 65536-token "
                                         r"sequence 16\.0 \+ reserve 4\) at tensor_parallel_size 1, but "
                                         r"gpu_memory_utilization 0\.9 x 74\.5 GiB gives 67\.1 GiB"):
        check_fits(one, gpu_gib=gpu, utilization=0.9, tensor_parallel_size=1, max_model_len=65536)
    two = estimate_memory(d, max_model_len=65536, tensor_parallel_size=2)
    check_fits(two, gpu_gib=gpu, utilization=0.9, tensor_parallel_size=2, max_model_len=65536)
    assert estimate_memory(tmp_path / "absent", max_model_len=10) is None


def test_bad_model_path_is_one_line_and_leaves_nothing(tmp_path: Path):
    from otbench.cli import main

    job = tmp_path / "job.toml"
    job.write_text('[model]\npath = "no/such/model"\nfamily = "qwen3-thinking"\n'
                   '[engine]\nkind = "transformers"\n[data]\nsource = "sums"\nn = 1\n'
                   '[probe]\nthinking_limit = 16\nanswer_limit = 4\n')
    r = CliRunner().invoke(main, ["probe", "run", "--config", str(job), "--out", str(tmp_path / "out"),
                                  "--no-progress"])
    assert r.exit_code == 2, r.output
    msg = r.output.strip()
    assert "\n" not in msg and "no/such/model: no such folder" in msg and "Traceback" not in msg
    assert sorted(p.name for p in tmp_path.iterdir()) == ["job.toml"]        # no journal, no output


@pytest.mark.parametrize("kind, weights", [("vllm", True), ("openai", False)])
def test_a_served_model_resolves_its_tokenizer_without_weights(kind, weights, monkeypatch, tmp_path):
    huggingface_hub = pytest.importorskip("huggingface_hub")
    from otbench.probe.stp import job_from_dict, resolve_engine_config

    snap = tmp_path / "snapshots" / ("ab" * 20)
    snap.mkdir(parents=True)
    calls = []
    monkeypatch.setattr(huggingface_hub, "snapshot_download",
                        lambda repo, **kw: calls.append(kw["allow_patterns"]) or str(snap))
    engine = {"kind": kind, **({"base_url": "http://127.0.0.1:8000"} if kind == "openai" else {})}
    job = job_from_dict({"model": {"name": "Org/Model", "family": "generic-chat"}, "engine": engine})
    cfg = resolve_engine_config(job, lambda m: None)
    assert cfg.model == str(snap) and cfg.revision == snap.name
    assert ("*.safetensors" in calls[0]) is weights and "*.json" in calls[0]
