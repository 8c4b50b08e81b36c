"""`otbench plan --calibrate` (issue 41): the fit recovers known constants from run folders whose
engine-seconds were made with them, predicted against measured per run, and the one-line refusals
(another device, model or TP size; unreadable runs)."""

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from otbench.analysis.measurement import save, simulate
from otbench.cli import main
from otbench.probe.plan import DEVICES, PlanError, calibrate, device_key, plan_job
from otbench.probe.plan._calibrate import PHASES, _counts, _datasheet_context, nnls, run_job_settings

MODEL = "smollm2-135m-instruct"
TRUTH = {"step": 0.02, "decode": 0.004, "prefill": 0.0007}
HIT = {"think": 0.5, "probe": 0.9, "signal": 0.8}


def _prov(seqs: int = 16, tp: int = 1, device: str = "cpu") -> dict:
    return {"probe": {"R": 2, "P": 4, "b": 256, "thinking_limit": 32768, "answer_limit": 4096},
            "engine": {"engine": "vllm", "device": device,
                       "config": {"max_num_seqs": seqs, "tensor_parallel_size": tp, "kv_cache_gib": 2,
                                  "gpu_memory_utilization": 0.9, "dtype": "bfloat16"}},
            "model": {"id": MODEL, "entry": {"name": MODEL}}}


def _run(tmp: Path, name: str, seed: int, *, seqs: int = 16, device: str = "cpu", label: str = "cpu",
         step: float | None = None) -> Path:
    """A run folder: a (simulated) set with a probe run's provenance, and a run.json whose cost cells
    are the planner's own workload of it, timed with `TRUTH` (and `step`, when given)."""
    ms = simulate("tiny", seed)
    ms = dataclasses.replace(ms, provenance={**ms.provenance, **_prov(seqs, device=device)})
    folder = tmp / name
    save(ms, folder)
    job = run_job_settings(ms.provenance, MODEL)
    plan = plan_job(job, pilot=folder, device_name=device_key(label) or "cpu", questions=_counts(ms))
    ctx = _datasheet_context(job, "cpu")
    groups = {}
    for g, v in plan.groups.items():
        per = {}
        for p in PHASES:
            dec = v["tokens"][p][1]
            prompt = v["prompt_tokens"][p]
            sec = ((step or 0.0) * dec / v["batch"] + TRUTH["decode"] * dec + ctx * v["context_tokens"][p]
                   + TRUTH["prefill"] * prompt * (1 - HIT[p]))
            per[p] = {"requests": 1, "prompt_tokens": prompt, "cached_prompt_tokens": prompt * HIT[p],
                      "decoded_tokens": dec, "engine_seconds": sec}
        groups[g] = per
    phases = {p: {k: sum(groups[g][p][k] for g in groups) for k in groups[next(iter(groups))][p]} for p in PHASES}
    total = {k: sum(phases[p][k] for p in PHASES) for k in phases["think"]}
    cost = {"engine": "vllm", "device": label, "workers": 1, "phases": phases, "benchmarks": groups, "total": total}
    (folder / "run.json").write_text(json.dumps({"cost": cost, "units": {"total": int(ms.num_trajectories)}}))
    return folder


def test_nnls_matches_a_plain_projected_solver():
    rng = np.random.default_rng(0)
    for _ in range(20):
        A = rng.random((7, 4))
        y = A @ np.where(rng.random(4) < 0.5, 0.0, rng.random(4)) + 0.05 * rng.standard_normal(7)
        x = nnls(A, y)
        assert np.all(x >= 0)
        # twin: projected gradient to convergence
        z = np.zeros(4)
        lr = 1.0 / np.linalg.norm(A.T @ A, 2)
        for _ in range(20000):
            z = np.maximum(0.0, z - lr * (A.T @ (A @ z - y)))
        assert np.sum((A @ x - y) ** 2) <= np.sum((A @ z - y) ** 2) + 1e-9
        assert x == pytest.approx(z, abs=1e-4)


def test_device_labels_map_to_the_planners_devices():
    assert device_key("cpu") == "cpu" and device_key("cuda (NVIDIA H200)") == "h200"
    assert device_key("cuda (NVIDIA A100-SXM4-80GB)") == "a100-80gb" and device_key("cuda (NVIDIA L40S)") == "l40s"
    assert device_key("cuda") is None and device_key("server") is None
    assert "cpu" in DEVICES


def test_one_run_recovers_its_constants_and_predicts_itself(tmp_path: Path):
    run = _run(tmp_path, "a", 0)
    cal = calibrate([run])
    assert cal.device == "cpu" and cal.device_key == "cpu" and cal.model == MODEL and cal.tp == 1
    # one batch (16): the step cost is not separable and is held at 0; decode and prefill recovered
    assert cal.constants["step"] == 0.0 and "step" in cal.held
    assert cal.constants["decode"] == pytest.approx(TRUTH["decode"], rel=1e-6)
    assert cal.constants["prefill"] == pytest.approx(TRUTH["prefill"], rel=1e-6)
    assert cal.hit_rate == pytest.approx(HIT)
    (r,) = cal.runs
    assert r["units"] > 0
    for p in PHASES:
        assert r["predicted"][p] == pytest.approx(r["measured"][p], rel=1e-6)


def test_two_batches_separate_the_step_cost(tmp_path: Path):
    runs = [_run(tmp_path, "a", 0, seqs=4, step=0.02), _run(tmp_path, "b", 1, seqs=16, step=0.02)]
    cal = calibrate(runs)
    assert sorted(set(cal.batches)) == [4.0, 16.0] and "step" not in cal.held
    assert cal.constants["step"] == pytest.approx(0.02, rel=1e-5)
    assert cal.constants["decode"] == pytest.approx(TRUTH["decode"], rel=1e-5)
    # a plan of another job on the same device and model uses them: seconds = the same formula
    job = run_job_settings(_prov(seqs=8), MODEL)
    plan = plan_job(job, pilot=runs[0], device_name="cpu", questions={"AIME": 5}, calibration=cal)
    g = plan.groups["AIME"]
    want = sum(cal.seconds(p, decoded=g["tokens"][p][1], context=g["context_tokens"][p],
                           prompt=g["prompt_tokens"][p], batch=g["batch"]) for p in PHASES)
    assert g["hours"][1] * 3600 == pytest.approx(want, rel=1e-12)
    assert plan.throughput["calibration"]["constants"] == dict(cal.constants)


def test_a_calibration_never_applies_to_another_device_model_or_tp(tmp_path: Path):
    cal = calibrate([_run(tmp_path, "a", 0)])
    job = run_job_settings(_prov(), MODEL)
    with pytest.raises(PlanError, match=r"^--calibrate: the runs were measured with device 'cpu' \(cpu, vllm\), "
                                        r"the plan is for 'h200': a calibration applies only"):
        plan_job(job, device_name="h200", questions={"AIME": 3}, calibration=cal)
    with pytest.raises(PlanError, match="measured with model 'smollm2-135m-instruct'.*the plan is for 'other'"):
        plan_job(_other(job, model="other"), device_name="cpu",
                 questions={"AIME": 3}, calibration=cal)
    with pytest.raises(PlanError, match="tensor_parallel_size 1"):
        plan_job(run_job_settings(_prov(tp=2), MODEL), device_name="cpu", questions={"AIME": 3}, calibration=cal)
    gpu = _run(tmp_path, "g", 1, device="h200", label="cuda (NVIDIA H200)")
    with pytest.raises(PlanError, match="the runs differ in device, model or tensor-parallel size"):
        calibrate([tmp_path / "a", gpu])


def _other(job, **kw):
    from types import SimpleNamespace
    return SimpleNamespace(**{**vars(job), **kw})


def test_cli_prints_predicted_against_measured_and_refuses_in_one_line(tmp_path: Path):
    run = _run(tmp_path, "a", 0)
    res = CliRunner().invoke(main, ["plan", "--calibrate", str(run), "--json", str(tmp_path / "cal.json")])
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert lines[0].startswith("calibration: calibrated on 1 measured run(s) on cpu (vllm, model smollm2")
    assert f"{run} (" in lines[1] and "predicted" in lines[1] and "(1.000)" in lines[1]
    assert json.loads((tmp_path / "cal.json").read_text())["schema"] == "otbench.plan-calibration/1"
    job = tmp_path / "job.toml"
    job.write_text(f'[model]\nname = "{MODEL}"\n[engine]\nkind = "vllm"\n[data]\nsource = "sums"\nn = 3\n')
    res = CliRunner().invoke(main, ["plan", str(job), "--calibrate", str(run)])
    assert res.exit_code == 0, res.output
    assert "device-hours on CPU" in res.output and "assumes calibrated on 1 measured run(s)" in res.output
    res = CliRunner().invoke(main, ["plan", str(job), "--calibrate", str(run), "--device", "h100"])
    assert res.exit_code == 2 and len(res.output.strip().splitlines()) == 1
    assert "the plan is for 'h100'" in res.output and "Traceback" not in res.output
    (tmp_path / "empty").mkdir()
    res = CliRunner().invoke(main, ["plan", "--calibrate", str(tmp_path / "empty")])
    assert res.exit_code == 2 and "no run.json" in res.output and len(res.output.strip().splitlines()) == 1
    (run / "run.json").write_text(json.dumps({"cost": {"total": {}}}))
    res = CliRunner().invoke(main, ["plan", "--calibrate", str(run)])
    assert res.exit_code == 2 and "no cost block with engine-seconds per phase" in res.output
    res = CliRunner().invoke(main, ["plan"])
    assert res.exit_code == 2 and "give JOB_FILE" in res.output
