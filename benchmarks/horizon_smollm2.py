"""Matched-horizon readouts with the embedded SmolLM2-135M on a CPU (issue 9; docs/rules.md).

Prints absolute times and, per target, a ratio against a baseline measured
in the same run:

1. scripted positive control (96 items, B = 64 and 512; transformers engine):
   long/short accuracy, the gap and its item-bootstrap interval, the
   sign-flip p-value (target: a large gap at 64, none at 512);
2. a prompt-arm job on four-choice sums (vLLM engine): generation, readouts
   and continuations timed; terminal-replay agreement with the natural
   answers; the calibration and contrast tables;
3. candidate-logit readout throughput, vLLM (one call, prefix cache) vs the
   transformers plain forward pass (baseline) on the same inputs, and the
   largest log-probability difference between the two engines;
4. the analysis at paper scale (500 items x 3 replicates x 2 arms x 5
   horizons, 10,000 item-bootstrap draws) vs a NumPy loop that redraws and
   re-averages per replicate (baseline, timed on 500 draws and scaled).

Usage: ``python benchmarks/horizon_smollm2.py [--quick]`` (``--quick``:
fewer items and float32 prompt arms, for a smoke run).
"""

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def _tables(doc, contrasts: bool) -> str:
    from otbench.analysis.horizon import _tables as t
    out = [t.calibration_table(doc)]
    if contrasts:
        out += [t.contrast_table(doc, "policy"), t.strata_table(doc, "policy")]
    out += [t.matched_table(doc), t.controls_table(doc), t.agreement_table(doc)]
    return "\n".join(t.format_text(x) for x in out if x[2])


def positive_control(work: Path, quick: bool) -> dict:
    from otbench.analysis.horizon import _inference as inf
    from otbench.analysis.horizon import analyze
    from otbench.analysis.horizon._group import scores as _scores
    from otbench.analysis.measurement._horizon_run import load_run
    from otbench.probe.horizon._job import load_horizon_job
    from otbench.probe.horizon._run import run_horizon

    job = load_horizon_job(Path(__file__).parent.parent / "artifacts" / "jobs" / "horizon-positive-control.toml")
    if quick:
        import dataclasses
        job = dataclasses.replace(job, data={**job.data, "n": 16})
    t = time.perf_counter()
    run_horizon(job, work / "pc", overwrite=True, progress=False, log=lambda s: None)
    t_run = time.perf_counter() - t
    doc = analyze(work / "pc", contrasts=["short,long"])
    (c,) = [c for c in doc["groups"][0]["contrasts"] if c["readout"] == "policy"]
    run = load_run(work / "pc")
    sc = _scores(run.stop["policy"], run.gold, run.valid)["correct"][:, :, 0, :].astype(float)
    res = {"run_s": t_run}
    for h, hr in enumerate(c["horizons"]):
        p = inf.sign_flip(sc[1, :, h] - sc[0, :, h]).p
        res[hr["B"]] = (hr["acc_b"]["estimate"], hr["acc_a"]["estimate"], hr["delta"], p)
    return res


def prompt_job(work: Path, quick: bool) -> tuple[dict, dict, dict]:
    from otbench.analysis.horizon._analysis import analyze
    from otbench.probe.horizon._job import load_horizon_job
    from otbench.probe.horizon._run import run_horizon

    job = load_horizon_job(Path(__file__).parent.parent / "artifacts" / "jobs" / "horizon-smollm2.toml")
    import dataclasses
    if quick:
        # float32 for the reason plan_calibration.py's SIZES gives; the full run keeps the job's bfloat16
        job = dataclasses.replace(job, base=dataclasses.replace(
            job.base, engine=dataclasses.replace(job.base.engine, dtype="float32")))
    job = dataclasses.replace(job, data={**job.data, "n": 3 if quick else 16}, replicates=1,
                              thinking_limit=128, horizons=(0, 32, 64, 128),
                              checkpoints=(0, 32, 64, 96, 128), control_horizons=(32, 64))
    s = run_horizon(job, work / "arms", overwrite=True, progress=False, log=lambda s: None)
    t = time.perf_counter()
    doc = analyze(work / "arms", contrasts=["concise,base"])
    return s.run, doc, {"analyze_s": time.perf_counter() - t, "dtype": job.base.engine.dtype}


def engines(work: Path, n: int) -> dict:
    """Readout throughput: vLLM (one call) vs transformers (baseline) on the same `n` inputs."""
    import pyarrow.parquet as pq
    from otbench.probe.config._embedded import embedded_model_dir
    from otbench.probe.config._family import load_family
    from otbench.probe.engines._interface import EngineConfig, open_engine
    from otbench.probe.horizon._readout import find_spellings
    from otbench.probe.horizon._stops import stop_input
    from otbench.probe.tokens._probe_prompts import compile_format
    from otbench.probe.tokens._vocab import build_vocabulary

    path = str(embedded_model_dir(log=lambda s: None))
    tt = pq.read_table(work / "arms" / "trajectories.parquet").to_pylist()
    res = {}
    hf = open_engine(EngineConfig(kind="transformers", model=path, dtype="float32"))
    tok = hf.tokenizer()
    fmt = compile_format(load_family("generic-chat"), tok, build_vocabulary(tok, hf.vocab_size()),
                         boundary_rule="vocab+span")
    prefix = tok.encode("\n\nThe correct option is", add_special_tokens=False)
    ctxs = [stop_input(fmt, t["prompt"], t["thinking"], B, t["finished"], [], prefix)[0]
            for t in tt for B in (32, 64, 128)][:n]
    sp = find_spellings(tok, 4)
    t0 = time.perf_counter()
    a = np.array(hf.choice_logprobs(ctxs, sp.flat_ids))
    res["transformers_s"] = time.perf_counter() - t0
    hf.close()
    vl = open_engine(EngineConfig(kind="vllm", model=path, dtype="float32", max_model_len=1024,
                                  block_size=32, kv_cache_gib=2))
    try:
        vl.choice_logprobs(ctxs[:2], sp.flat_ids)            # warm-up (graph capture, allocation)
        t0 = time.perf_counter()
        b = np.array(vl.choice_logprobs(ctxs, sp.flat_ids))
        res["vllm_s"] = time.perf_counter() - t0
    finally:
        vl.close()
    res["inputs"] = len(ctxs)
    res["tokens"] = int(sum(map(len, ctxs)))
    res["max_abs_diff"] = float(np.abs(a - b).max())
    res["argmax_agree"] = float((a.argmax(1) == b.argmax(1)).mean())
    return res


def analysis_scale() -> dict:
    from otbench.analysis.horizon import _inference as inf

    rng = np.random.default_rng(0)
    I, R, H = 500, 3, 5
    x = (rng.random((I, R, 3 * H)) < 0.6).astype(np.float64) - (rng.random((I, R, 3 * H)) < 0.5)
    a = rng.random((I, R, 3 * H)) < 0.95
    inf.bootstrap(x, a, replicates=1000)           # compile once (same shapes as below)
    t = time.perf_counter()
    b = inf.bootstrap(x, a, replicates=10_000)
    t_kernel = time.perf_counter() - t
    # Baseline: a NumPy loop drawing items per replicate and re-averaging item means.
    num = np.where(a, x, 0).sum(1)
    den = a.sum(1)
    t = time.perf_counter()
    base = []
    for _ in range(500):
        idx = rng.integers(0, I, I)
        n_, d_ = num[idx], den[idx]
        has = d_ > 0
        base.append(np.where(has, n_ / np.where(has, d_, 1), 0).sum(0) / has.sum(0))
    t_loop = (time.perf_counter() - t) * (10_000 / 500)
    t = time.perf_counter()
    inf.bootstrap(x, a, replicates=10_000, scheme="two-way")
    t_two = time.perf_counter() - t
    return {"kernel_s": t_kernel, "loop_s": t_loop, "two_way_s": t_two, "k": x.shape[2],
            "draws": b.draws.shape}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", "--smoke", action="store_true", dest="quick",
                    help="fewer items: the smoke size the test suite runs")
    ap.add_argument("--work", default=None, help="Folder for the runs (default: a temporary one).")
    args = ap.parse_args(argv)
    work = Path(args.work or tempfile.mkdtemp(prefix="otbench-horizon-"))
    print(f"runs in {work}", flush=True)

    pc = positive_control(work, args.quick)
    print(f"\n1. scripted positive control (transformers, SmolLM2-135M, float32): {pc['run_s']:.1f} s")
    for B in (64, 512):
        lo, hi, d, p = pc[B]
        print(f"   B = {B:4d}: long {100 * lo:5.1f}%  short {100 * hi:5.1f}%  gap {100 * d['estimate']:+.1f} pp "
              f"[{100 * d['ci'][0]:+.1f}, {100 * d['ci'][1]:+.1f}]  sign-flip p = {p:.4f}")

    stats, doc, an = prompt_job(work, args.quick)
    print(f"\n2. prompt arms on four-choice sums (vLLM, {an['dtype']}): total {stats['total_s']:.1f} s = engine start "
          f"{stats['engine_start_s']:.1f} + trajectories {stats['trajectories_s']:.1f} "
          f"({stats['reasoning_tokens']} tokens) + natural answers {stats['natural_answers_s']:.1f} + "
          f"readouts {stats['readouts_s']:.1f} ({stats['readout_inputs']} inputs, {stats['readout_tokens']} "
          f"tokens) + continuations {stats['continuations_s']:.1f} ({stats['continuations']}); "
          f"analysis (10,000 draws) {an['analyze_s']:.1f} s")
    print(_tables(doc, True))

    eg = engines(work, 24 if args.quick else 60)
    print(f"3. candidate-logit readouts, {eg['inputs']} inputs ({eg['tokens']} tokens): transformers "
          f"{eg['transformers_s']:.2f} s (baseline), vLLM {eg['vllm_s']:.2f} s, speed-up "
          f"{eg['transformers_s'] / eg['vllm_s']:.2f}x; max |Δ log p| {eg['max_abs_diff']:.2e}, "
          f"argmax agreement {100 * eg['argmax_agree']:.1f}%")

    sc = analysis_scale()
    print(f"4. analysis at paper scale (500 items x 3 replicates, {sc['k']} statistics, 10,000 draws): "
          f"kernel {sc['kernel_s']:.2f} s, NumPy loop {sc['loop_s']:.2f} s (baseline, scaled from 500 "
          f"draws), ratio {sc['loop_s'] / sc['kernel_s']:.1f}x; two-way item x replicate "
          f"{sc['two_way_s']:.2f} s")
    return 0


if __name__ == "__main__":      # vLLM starts worker processes: keep the guard
    sys.exit(main())
