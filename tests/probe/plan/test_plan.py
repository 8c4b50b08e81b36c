"""`otbench plan` (issue 26): the estimator against hand arithmetic, the pilot path, the CLI's errors."""

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from otbench.analysis.measurement import save, simulate
from otbench.cli import main
from otbench.probe.plan import (
    ARCHITECTURES,
    DEVICES,
    GROUP_THINKING,
    PRIORS,
    Architecture,
    Lengths,
    Throughput,
    group_prior,
    pilot_lengths,
    plan_job,
    plan_text,
    workload,
)
from otbench.probe.stp import load_job

JOB = """
[model]
name = "qwen3-4b-thinking-2507"
[engine]
kind = "vllm"
max_model_len = 65536
[data]
source = "sums"
n = {n}
[probe]
R = {R}
P = {P}
b = {b}
thinking_limit = {limit}
answer_limit = {answer}
"""


def _job(tmp_path: Path, *, n=4, R=2, P=2, b=256, limit=32768, answer=4096, name="job.toml") -> Path:
    p = tmp_path / name
    p.write_text(JOB.format(n=n, R=R, P=P, b=b, limit=limit, answer=answer))
    return p


SRC = {k: "hand" for k in ("thinking", "positions", "prefix", "answer", "own", "prompt", "forced")}


def test_workload_and_device_time_match_a_hand_computation():
    # 2 questions x R=1, P=2; each trajectory: 512 thinking tokens in 2 steps of 256
    # (positions 0, 256, 512), 10-token answers, 20-token prompt, never cut.
    x = Lengths(thinking=512, thinking_sq=512 ** 2, positions=3, prefix=0 + 256 + 512, answer=10, own=10,
                prompt=20, forced=0.0, source=SRC)
    w = workload(2, x, R=1, P=2)
    m = PRIORS["marker_tokens"][0]                              # 8 tokens appended per position
    assert (w.trajectories, w.positions, w.answers) == (2, 6, 12)
    # probe: two requests per position (the first answer with log-probabilities, the other P - 1);
    # signal: two one-token reads per position (the margin context and the own context, margin_own)
    assert w.requests == {"think": 2, "probe": 12, "signal": 12}
    # think: thinking + own answer + marker's first id + stop = 512 + 10 + 2 per trajectory
    assert w.decoded == {"think": 2 * 524, "probe": 12 * 11, "signal": 12}
    # probe prompts: sum over k of (20 + L(k) + 8) = 3 * 28 + 768 = 852 per trajectory, read by both
    # of a position's requests (the second from the prefix cache: `uncached` below)
    assert w.prompt["probe"] == 2 * 2 * (3 * (20 + m) + 768)
    assert workload(2, x, R=1, P=1).prompt["probe"] == 2 * (3 * (20 + m) + 768)
    assert w.prompt["signal"] == 2 * 2 * (3 * 20 + 768)
    # uncached: each trajectory's 512 thinking tokens once + 8 marker tokens at each of 3 positions
    assert w.uncached["probe"] == 2 * (512 + 3 * m)
    # KV read: a think token at context prompt + t, t = 0..L-1 (~ L^2 / 2), then its answer after all of it
    assert w.context["think"] == 2 * (512 * 20 + 512 ** 2 / 2 + 10 * (20 + 512))
    # a probe answer token a (0..9) at position k reads 20 + L(k) + 8 + a: P * (10 * 852 + 3 * 10^2 / 2)
    assert w.context["probe"] == 2 * 2 * (10 * 852 + 3 * 50)
    # the device: 1 GB of weights, 1 kB of KV per token, 1 TB/s at 50 %, 100 TFLOP/s at 50 %
    dev = DEVICES["h200"].__class__("test", 100e9, 1e12, 100e12)
    arch = Architecture(1e9, 1e9, 1000.0, "hand")
    t = Throughput(dev, max_num_seqs=4, prefill_efficiency=0.5, reserve=0.0)
    s = t.seconds(arch, decoded=w.decoded["probe"], context=w.context["probe"], prefill=w.uncached["probe"],
                  batch=4, efficiency=0.5)
    by_hand = (132 * 1e9 / 4 + 34680 * 1000) / (1e12 * 0.5) + 2 * 1e9 * 1072 / (100e12 * 0.5)
    assert s == pytest.approx(by_hand, rel=1e-12)
    # the cache holds (100 GB * 0.9 - 1 GB) / 1 kB tokens: far more than 4 sequences need
    assert t.batch_for(arch, w.shape) == 4
    # 89e6 tokens in 16-token blocks; a group over 1,000 shared tokens: 62 whole blocks once, 16 answers
    # of 8 + 64 + 1 (the next token) tokens (5 blocks each), 2 signals of 8 + 1 (1 block each): 144
    from otbench.probe.stp._kv import GROWTH_TOKENS

    big = Throughput(dev, max_num_seqs=10 ** 9, reserve=0.0)
    assert GROWTH_TOKENS == 1
    assert big.batch_for(arch, (100.0, 900.0, 64.0, 16)) == pytest.approx(89e6 / 16 / 144 * 16)
    # a trajectory's 4 positions in flight together hold the blocks of its longest prefix once: the
    # prompt and 900 + 3 * 450 / 2 of thinking (positions 450 tokens apart), 1675 tokens, 104 whole
    # blocks for 4 groups, then each its own 16 x 5 + 2
    assert big.batch_for(arch, (100.0, 900.0, 64.0, 16, 4.0)) == pytest.approx(89e6 / 16 / (104 / 4 + 82) * 16)


def test_field_probes_add_their_requests_and_deepconfs_uncached_prefill_by_hand():
    # the same two trajectories as above; deepconf: one request per trajectory, prompt + whole output
    # prefilled without the prefix cache (prompt log-probabilities), one token decoded; dynasor: per
    # position its 84-character suffix (21 tokens at 4 characters each) after the cached prefix, 20 decoded
    x = Lengths(thinking=512, thinking_sq=512 ** 2, positions=3, prefix=0 + 256 + 512, answer=10, own=10,
                prompt=20, forced=0.0, source=SRC)
    plain = workload(2, x, R=1, P=2)
    dc = workload(2, x, R=1, P=2, field_probes=("deepconf",))
    assert dc.requests["probe"] - plain.requests["probe"] == 2
    assert dc.decoded["probe"] - plain.decoded["probe"] == 2
    # the whole output (DeepConf's warm-up value): thinking + the marker's first id + own answer + stop
    assert dc.uncached["probe"] - plain.uncached["probe"] == 2 * (20 + 512 + 10 + 2)
    assert dc.prompt["probe"] - plain.prompt["probe"] == 2 * (20 + 512 + 10 + 2)
    assert (dc.decoded["think"], dc.uncached["signal"]) == (plain.decoded["think"], plain.uncached["signal"])
    dyn = workload(2, x, R=1, P=2, field_probes=("dynasor",))
    assert dyn.requests["probe"] - plain.requests["probe"] == 6
    assert dyn.decoded["probe"] - plain.decoded["probe"] == 6 * 20
    assert dyn.uncached["probe"] - plain.uncached["probe"] == pytest.approx(6 * 84 / 4)
    assert dyn.prompt["probe"] - plain.prompt["probe"] == pytest.approx(6 * (20 + 768 / 3 + 21))
    # thinkbrake: one token decoded on the cached prefix at each of the 6 positions (an upper bound)
    tb = workload(2, x, R=1, P=2, field_probes=("thinkbrake",))
    assert tb.requests["probe"] - plain.requests["probe"] == 6
    assert tb.decoded["probe"] - plain.decoded["probe"] == 6
    assert tb.uncached["probe"] == plain.uncached["probe"]
    assert tb.prompt["probe"] - plain.prompt["probe"] == pytest.approx(6 * (20 + 768 / 3))


def test_prior_plan_adds_up_and_names_its_sources(tmp_path: Path):
    job = load_job(_job(tmp_path, n=4, R=2, P=2))
    plan = plan_job(job, questions={"A": 3, "B": 5})
    assert plan.total["questions"] == 8 and plan.total["trajectories"] == 16
    for key in ("trajectories", "positions", "answers"):
        assert plan.total[key] == pytest.approx(sum(g[key] for g in plan.groups.values()))
    # positions ~ L/b + 1 from the pooled prior; answers = P x positions
    pos = PRIORS["thinking_tokens"][0] / 256 + 1
    assert plan.groups["A"]["positions"] == pytest.approx(6 * pos)
    assert plan.groups["A"]["answers"] == pytest.approx(2 * 6 * pos)
    lo, mid, hi = plan.total["hours"]
    assert 0 < lo < mid < hi
    for p in ("think", "probe", "signal"):
        assert plan.total["tokens"][p][0] <= plan.total["tokens"][p][1] <= plan.total["tokens"][p][2]
    text = "\n".join(plan_text(plan))
    assert "prior thinking_tokens: 6238.0" in text and "576,688,123" in text and "datasheet" in text
    assert "SYNTHETIC" not in text
    # R doubles every count and (decode dominating) the hours
    plan2 = plan_job(load_job(_job(tmp_path, n=4, R=4, P=2, name="r4.toml")), questions={"A": 3, "B": 5})
    assert plan2.total["answers"] == pytest.approx(2 * plan.total["answers"])
    assert plan2.total["hours"][1] == pytest.approx(2 * mid, rel=1e-9)


def test_imported_trajectories_have_no_think_phase(tmp_path: Path):
    import dataclasses

    job = load_job(_job(tmp_path))
    plain = plan_job(job, questions={"A": 3})
    imported = plan_job(dataclasses.replace(job, trajectories={"path": "t.jsonl"}), questions={"A": 3})
    assert imported.total["tokens"]["think"] == [0.0, 0.0, 0.0]
    assert imported.total["tokens"]["probe"] == plain.total["tokens"]["probe"]
    assert imported.total["hours"][1] < plain.total["hours"][1]
    assert any("imports its trajectories" in n for n in imported.notes)


def test_pilot_lengths_are_the_measured_ones_and_synthetic_says_so(tmp_path: Path):
    ms = simulate("tiny", 0)
    job = load_job(_job(tmp_path, b=256))                 # the simulator's b: steps as measured
    plan = plan_job(job, pilot=ms, questions={"AIME": 90, "GPQA-Diamond": 198, "MATH500": 500})
    text = "\n".join(plan_text(plan))
    assert text.startswith("SYNTHETIC pilot") and plan.synthetic and plan.as_dict()["synthetic_pilot"]
    assert "no trajectories of MATH500: priors used there" in text
    assert "no token tables" in text
    for gi, g in enumerate(ms.groups):                     # NumPy twin of the measured means
        rows = np.flatnonzero(ms.cell_group[ms.cell] == gi)
        L = ms.L[rows, ms.n[rows]].astype(float)
        got = plan.groups[g]["lengths"]
        assert got["thinking"] == pytest.approx(L.mean())
        assert got["positions"] == pytest.approx((ms.n[rows] + 1).mean())
        assert plan.groups[g]["sources"]["thinking"] == "pilot"
        assert plan.groups[g]["sources"]["answer"] == "prior"
        assert plan.groups[g]["positions"] == pytest.approx(plan.groups[g]["trajectories"] * got["positions"])
    assert plan.groups["MATH500"]["sources"]["thinking"] == "prior"
    # another b: steps recomputed with the paper's target rule from the measured lengths
    x, _ = pilot_lengths(ms, b=512, thinking_limit=32768, answer_limit=4096)
    rows = np.flatnonzero(ms.cell_group[ms.cell] == 0)
    L = ms.L[rows, ms.n[rows]].astype(np.int64)
    assert x[ms.groups[0]].positions == pytest.approx((np.maximum(1, (2 * L + 512) // 1024) + 1).mean())
    # a lower thinking limit cuts the measured lengths
    y, _ = pilot_lengths(ms, b=256, thinking_limit=1000, answer_limit=4096)
    assert y[ms.groups[0]].thinking == pytest.approx(np.minimum(L, 1000).mean())


PAPER = {"AIME": 90, "MATH500": 500, "GPQA-Diamond": 198, "LiveCodeBench": 175}


def test_the_worked_example_of_the_issue(tmp_path: Path):
    """R=8, P=16, b=256, Qwen3-4B, the paper's 963 questions on one H200: every group gets its own
    benchmark's thinking prior (issue 38, item 4), not the pooled one."""
    job = load_job(_job(tmp_path, R=8, P=16, b=256))
    plan = plan_job(job, questions=PAPER)
    assert plan.total["trajectories"] == 7704
    # positions per trajectory L_g / b + 1 with each group's default; answers = P x positions
    by_hand = {g: q * 8 * (GROUP_THINKING[g][0] / 256 + 1) for g, q in PAPER.items()}
    for g in PAPER:
        assert plan.groups[g]["lengths"]["thinking"] == GROUP_THINKING[g][0]
        assert plan.groups[g]["positions"] == pytest.approx(by_hand[g], rel=1e-12)
        assert plan.groups[g]["thinking_prior"]["prior"] == g
    assert plan.total["answers"] == pytest.approx(16 * sum(by_hand.values()), rel=1e-12)   # ~4.0 M
    think = plan.total["tokens"]["think"][1] / sum(plan.total["tokens"][p][1] for p in plan.total["tokens"])
    assert think < 0.02                                                    # the issue: ~1 %
    # the pooled prior gave every group 6,238 tokens: AIME's share grows ~5x (cost ~ L^2), MATH500's shrinks
    pooled = plan_job(job, questions={f"pooled{i}": q for i, q in enumerate(PAPER.values())})
    share = {g: plan.groups[g]["hours"][1] / plan.total["hours"][1] for g in PAPER}
    pooled_share = {g: pooled.groups[f"pooled{i}"]["hours"][1] / pooled.total["hours"][1]
                    for i, g in enumerate(PAPER)}
    assert share["AIME"] > 2.5 * pooled_share["AIME"] and share["MATH500"] < pooled_share["MATH500"]
    assert plan.groups["AIME"]["hours"][1] > 4 * pooled.groups["pooled0"]["hours"][1]
    lo, mid, hi = plan.total["hours"]
    assert lo < mid < hi and mid > pooled.total["hours"][1]


def test_the_paper_example_prints_a_thinking_prior_per_group(tmp_path: Path):
    res = CliRunner().invoke(main, ["plan", str(_job(tmp_path, R=8, P=16)), "--questions",
                                    ",".join(f"{g}={q}" for g, q in PAPER.items()) + ",SUMS=12"])
    assert res.exit_code == 0, res.output
    lines = {ln.split(":")[0]: ln for ln in res.output.splitlines() if ln.startswith("thinking ")}
    assert lines["thinking AIME"] == "thinking AIME: 16,000 tokens per trajectory [12,000, 21,240] (prior: AIME default)"
    assert lines["thinking MATH500"].startswith("thinking MATH500: 5,000 tokens per trajectory [3,750, ")
    assert "(prior: LiveCodeBench default)" in lines["thinking LiveCodeBench"]
    assert "thinking GPQA-Diamond: 8,000 tokens" in lines["thinking GPQA-Diamond"]
    # a group no default knows gets the pooled prior, and says so
    assert lines["thinking SUMS"] == "thinking SUMS: 6,238 tokens per trajectory [4,678, 8,281] (pooled prior)"
    assert len({ln.split(": ")[1].split(" tokens")[0] for ln in lines.values()}) == 5
    assert "prior thinking_tokens[AIME]: 16000.0 (mean thinking tokens per trajectory on AIME" in res.output


def test_group_priors_match_the_benchmark_names():
    assert group_prior("AIME")[:2] == ("AIME", 16000.0) and group_prior("aime2025")[0] == "AIME"
    assert group_prior("math-500")[:2] == ("MATH500", 5000.0) and group_prior("GPQA")[1] == 8000.0
    assert group_prior("LCB")[:2] == ("LiveCodeBench", 13000.0)
    name, v, src = group_prior("CHAMP")
    assert (name, v) == ("pooled", PRIORS["thinking_tokens"][0]) and "no per-benchmark default" in src
    assert all(len(s) > 80 and "an estimate" in s and "not a measurement" in s for _, s in GROUP_THINKING.values())


def test_a_pilot_with_two_groups_of_different_lengths_gets_two_priors(tmp_path: Path):
    ms = simulate("tiny", 0)
    assert len(ms.groups) == 2
    job = load_job(_job(tmp_path))
    plan = plan_job(job, pilot=ms, questions={g: 10 for g in ms.groups})
    text = plan_text(plan)
    means = {}
    for gi, g in enumerate(ms.groups):                     # NumPy twin: each group's own mean
        rows = np.flatnonzero(ms.cell_group[ms.cell] == gi)
        means[g] = ms.L[rows, ms.n[rows]].astype(float).mean()
        tp = plan.groups[g]["thinking_prior"]
        assert tp["prior"] == "pilot" and tp["tokens"][1] == pytest.approx(means[g])
        assert tp["tokens"][0] < tp["tokens"][1] < tp["tokens"][2]
        assert f"thinking {g}: {means[g]:,.0f} tokens per trajectory [" in "\n".join(text)
    a, b = ms.groups
    assert abs(means[a] / means[b] - 1) > 0.2             # the two groups differ, and so do their priors
    assert plan.groups[a]["positions"] / plan.groups[b]["positions"] != pytest.approx(1.0, rel=0.05)


def test_a_local_model_folder_is_sized_from_its_config(tmp_path: Path):
    from otbench.probe.plan import read_architecture

    (tmp_path / "config.json").write_text(json.dumps({"num_hidden_layers": 4, "num_attention_heads": 8,
                                                      "num_key_value_heads": 2, "hidden_size": 512}))
    (tmp_path / "model.safetensors").write_bytes(b"\0" * 4000)
    a = read_architecture(tmp_path)
    assert a.kv_bytes == 4 * 2 * 64 * 2 * 2 and a.weight_bytes == 4000 and a.active_params == 2000


def test_every_entry_has_an_architecture():
    entries = {p.stem for p in (Path(__file__).parents[3] / "artifacts" / "models").glob("*.toml")}
    assert entries <= set(ARCHITECTURES)


# -- the command -------------------------------------------------------------------------------------

def test_cli_prints_the_table_and_writes_json(tmp_path: Path):
    job = _job(tmp_path)
    res = CliRunner().invoke(main, ["plan", str(job), "--questions", "A=3,B=5", "--json", str(tmp_path / "p.json")])
    assert res.exit_code == 0, res.output
    assert res.output.splitlines()[1].split()[:4] == ["group", "questions", "units", "positions"]
    assert any(ln.startswith("total ") for ln in res.output.splitlines())
    doc = json.loads((tmp_path / "p.json").read_text())
    assert doc["schema"] == "otbench.plan/1" and set(doc["groups"]) == {"A", "B"}


def test_cli_plans_from_a_pilot_folder(tmp_path: Path):
    save(simulate("tiny", 1), tmp_path / "pilot")
    res = CliRunner().invoke(main, ["plan", str(_job(tmp_path)), "--pilot", str(tmp_path / "pilot")])
    assert res.exit_code == 0, res.output
    assert res.output.startswith("SYNTHETIC pilot")
    # the pilot's own accounting, when it has one, is shown beside the plan
    cost = {"engine": "vllm", "device": "cuda (NVIDIA H200)", "workers": 1,
            "total": {"decoded_tokens": 7_200_000, "engine_seconds": 3600.0}}
    (tmp_path / "pilot" / "run.json").write_text(json.dumps({"cost": cost}))
    res = CliRunner().invoke(main, ["plan", str(_job(tmp_path)), "--pilot", str(tmp_path / "pilot")])
    assert "note: pilot run: 7,200,000 decoded tokens in 3,600.0 engine-seconds on cuda (NVIDIA H200) " \
           "(vllm, 1 engine(s)), 2,000 tokens/s" in res.output
    (tmp_path / "pilot" / "run.json").write_text(json.dumps({"cost": {"total": {}}}))
    res = CliRunner().invoke(main, ["plan", str(_job(tmp_path)), "--pilot", str(tmp_path / "pilot")])
    assert res.exit_code == 0 and "no readable cost block" in res.output


@pytest.mark.parametrize("args, msg", [
    (["missing.toml"], "missing.toml"),
    (["JOB", "--pilot", "NOTASET"], "NOTASET"),
    (["JOB", "--device", "tpu9"], "--device 'tpu9': one of h200"),
    (["JOB", "--questions", "A=0"], "--questions 'A=0'"),
    (["JOB", "--questions", "A"], "GROUP=N"),
    (["BADJOB"], "bad.toml"),
])
def test_cli_bad_inputs_are_one_line_exit_2(tmp_path: Path, args, msg):
    job = _job(tmp_path)
    (tmp_path / "NOTASET").mkdir()
    (tmp_path / "bad.toml").write_text("[probe]\nR = 'x'\n")
    repl = {"JOB": str(job), "NOTASET": str(tmp_path / "NOTASET"), "BADJOB": str(tmp_path / "bad.toml"),
            "missing.toml": str(tmp_path / "missing.toml")}
    res = CliRunner().invoke(main, ["plan", *[repl.get(a, a) for a in args]])
    assert res.exit_code == 2, res.output
    out = res.output.strip()
    assert len(out.splitlines()) == 1 and msg in out and "Traceback" not in out


def test_plan_imports_no_engine_and_no_jax():
    code = ("import sys, otbench.probe.plan, otbench.cli._plan; "
            "print(sorted(m for m in ('torch', 'vllm', 'jax', 'transformers') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_offline_hub_data_fails_fast_in_one_line(tmp_path: Path, monkeypatch):
    import sys
    import time

    from otbench.probe.plan import _offline

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    for mod, names in (("huggingface_hub.constants", ("HF_HUB_OFFLINE",)),
                       ("datasets.config", ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"))):
        if mod in sys.modules:
            for n in names:
                monkeypatch.setattr(sys.modules[mod], n, getattr(sys.modules[mod], n))
    monkeypatch.setattr(_offline, "hub_reachable", lambda timeout=3.0: False)
    job = tmp_path / "hub.toml"
    job.write_text('[model]\nname = "qwen3-4b-thinking-2507"\n[engine]\nkind = "vllm"\n[data]\nseed = 0\n'
                   '[[data.sources]]\nbenchmark = "AIME2024"\nhub = "nobody/not-cached-aime"\nsplit = "train"\n')
    t = time.perf_counter()
    res = CliRunner().invoke(main, ["plan", str(job)])
    took = time.perf_counter() - t
    assert res.exit_code == 2, res.output
    out = res.output.strip()
    assert len(out.splitlines()) == 1 and "Traceback" not in out
    assert out.startswith("no network reaches the Hub (") and "plan without the data with --questions" in out
    assert "nobody/not-cached-aime" in out
    assert took < 20                                        # no retries (they took ~27 s)
    assert not _offline.hub_sources({"source": "sums"}) and _offline.hub_sources({"sources": [{"hub": "a/b"}]})


def test_the_cpu_device_holds_its_kv_cache_in_the_jobs_cpu_cache(tmp_path: Path):
    job = load_job(_job(tmp_path))
    plan = plan_job(job, device_name="cpu", questions={"A": 3})
    assert plan.throughput["kv_cache_bytes"] == job.engine.kv_cache_gib * (1 << 30)
    assert plan.throughput["device"]["name"].startswith("CPU (reference host")
    text = "\n".join(plan_text(plan))
    assert "(a stated reference host)" in text and "admits into the KV cache of 2 GiB, in 128-token blocks" in text
    t = Throughput(DEVICES["cpu"], max_num_seqs=10 ** 9, kv_cache_bytes=2 * (1 << 30))
    arch = ARCHITECTURES["qwen3-4b-thinking-2507"]
    # 128-token blocks (vLLM's CPU default): 1,000 shared tokens are 7 whole blocks and 104 more; each of
    # 4 answers holds 104 + 100 / 2 + 1 tokens (2 blocks), each signal 105 (1 block): 17 blocks a group
    blocks = 2 * (1 << 30) / arch.kv_bytes / 128
    assert t.batch_for(arch, (1000.0, 0.0, 100.0, 4)) == pytest.approx(blocks / 17 * 4)


@pytest.mark.parametrize("hours, shown", [(1410.3, "1,410"), (53.67, "53.7"), (0.05494, "0.0549"),
                                          (999.7, "1,000"), (12345.6, "12,346"), (3.0, "3.00"),
                                          (0.00012, "0.000120"), (3e-6, "<0.0001"), (0.0, "0")])
def test_hours_are_plain_numbers(hours, shown):
    from otbench.probe.plan import hours_text

    assert hours_text(hours) == shown


def test_the_paper_plan_prints_plain_hours_and_prices_its_probes(tmp_path: Path):
    """R=8, P=16 on Qwen3-4B: the answer probes are ~99 % of the device-hours, so the plan prices
    halving P and the answer limit by re-planning; no number is printed in exponent form."""
    job_file = _job(tmp_path, R=8, P=16, b=256)
    args = ["plan", str(job_file), "--questions", ",".join(f"{g}={q}" for g, q in PAPER.items()),
            "--json", str(tmp_path / "plan.json")]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    assert "e+" not in res.output and "e-0" not in res.output and "issue" not in res.output
    job = load_job(job_file)
    plan = plan_job(job, questions=PAPER)
    half_p = plan_job(dataclasses.replace(job, P=8), questions=PAPER).total["hours"][1]
    total, probe = plan.total["hours"][1], plan.total["hours_by_phase"]["probe"]
    assert probe / total > 0.95
    advice = [ln for ln in res.output.splitlines() if ln.startswith("advice: ")]
    assert len(advice) == 1
    from otbench.probe.plan import hours_text

    assert advice[0].startswith(f"advice: answer probes take {hours_text(probe)} of {hours_text(total)} "
                                f"device-hours ({100 * probe / total:.1f} %); lower P or the answer limit: "
                                f"P 16 -> 8: {hours_text(half_p)} device-hours; answer limit 4,096 -> 2,048: ")
    assert half_p < 0.55 * total and "--pilot SET --target" in advice[0]
    total_row = next(ln for ln in res.output.splitlines() if ln.startswith("total "))
    assert f" {hours_text(total)} " in total_row and "," in total_row.split()[-1]     # [lo, 1,234]
    assert json.loads((tmp_path / "plan.json").read_text())["advice"] == advice
    # a job whose probes do not dominate gets no advice
    small = plan_job(dataclasses.replace(job, P=1, answer_limit=16), questions=PAPER)
    from otbench.probe.plan import plan_advice

    assert plan_advice(dataclasses.replace(job, P=1, answer_limit=16), small, lambda j: 1 / 0) == []


def test_a_hub_source_without_a_pinned_commit_is_warned_in_one_line(tmp_path: Path):
    job = tmp_path / "hub.toml"
    pinned = "0123456789abcdef0123456789abcdef01234567"
    job.write_text('[model]\nname = "qwen3-4b-thinking-2507"\n[engine]\nkind = "vllm"\n[data]\nseed = 0\n'
                   '[[data.sources]]\nbenchmark = "AIME2024"\nhub = "someone/aime"\nsplit = "train"\n'
                   '[[data.sources]]\nbenchmark = "AIME2025"\nhub = "someone/aime25"\nrevision = "main"\n'
                   f'[[data.sources]]\nbenchmark = "MATH500"\nhub = "someone/math"\nrevision = "{pinned}"\n')
    res = CliRunner().invoke(main, ["plan", str(job), "--questions", "AIME=30"])
    assert res.exit_code == 0, res.output
    warned = [ln for ln in res.output.splitlines() if ln.startswith("warning: ")]
    assert warned == ["warning: [data] reads someone/aime, someone/aime25 from the Hub at no pinned revision: "
                      "the questions can change between this plan and the run; pin revision = \"<commit>\" "
                      "in each source"]
    res = CliRunner().invoke(main, ["plan", str(_job(tmp_path)), "--questions", "AIME=30"])
    assert "warning:" not in res.output                     # local data: nothing to pin
