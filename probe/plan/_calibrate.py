"""`otbench plan --calibrate RUN...`: the throughput model's constants fitted on measured runs.

A probe run's folder holds its measurement set and `run.json`, whose `cost`
block records per phase and benchmark group the requests, prompt tokens,
prefix-cached prompt tokens, decoded tokens and engine-seconds, and the
engine's device (`otbench.probe.stp._cost`). The set's provenance holds the
job's settings (R, P, b, limits), the model entry and the engine's
configuration. From these the planner's own workload of the run is
rebuilt (`plan_job` with the run as its pilot: the run's measured lengths),
and the time model

    seconds = step x decoded / B + decode x decoded + context x KV-read tokens + prefill x uncached

is fitted on the runs' (group, phase) cells by non-negative least squares:
`step` is the cost of one engine step (weights read once, scheduling),
`decode` and `prefill` the cost per decoded and per uncached prompt token,
`context` per token of context a decoded token attends to; `B` is the
planner's batch. Decoded and uncached tokens are the measured ones; the
context is the model's, scaled to the measured decoded tokens. The prefix
cache's hit rate is measured per phase (cached / prompt tokens, pooled over
the runs) and replaces the planner's structural estimate of uncached tokens
when a calibrated plan is made.

When every run has one batch `B`, `step / B` and `decode` cannot be told
apart; `step` is then fixed at 0 and `decode` is the cost per token *at that
batch*, which a plan at another batch says in its notes. A calibration
belongs to its device (the label run.json records, e.g. "cpu" or "cuda
(NVIDIA H200)"), its model and its tensor-parallel size: a plan for another
one is refused in one line.
"""

import dataclasses
import itertools
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

from ._throughput import DEVICES, PlanError

PHASES = ("think", "probe", "signal")
CONSTANTS = ("step", "decode", "context", "prefill")
"""The fitted constants, seconds per: engine step, decoded token, context token read, uncached prompt token."""


def device_key(label: str) -> str | None:
    """The `DEVICES` key of a run.json device label ("cpu", "cuda (NVIDIA H200)"), or None."""
    low = str(label).lower()
    if low.startswith("cpu"):
        return "cpu"
    for key in DEVICES:
        if key != "cpu" and key.split("-")[0] in low:
            return key
    return None


@dataclasses.dataclass(frozen=True)
class Calibration:
    """Fitted constants of the time model (seconds per unit, `CONSTANTS`) and where they come from.

    Attributes:
      device: the runs' device label; device_key: its `DEVICES` key.
      engine, model, tp: the runs' engine, model id and tensor-parallel size.
      constants: name -> seconds per unit; hit_rate: phase -> prefix-cache hit rate.
      batches: the planner's batch of each run; runs: per run its name, units, and measured and
        predicted engine-seconds per phase (filled by `calibrate`).
    """

    device: str
    device_key: str
    engine: str
    model: str
    tp: int
    constants: Mapping[str, float]
    hit_rate: Mapping[str, float]
    batches: tuple[float, ...]
    held: Mapping[str, str] = dataclasses.field(default_factory=dict)
    runs: tuple[Mapping[str, Any], ...] = ()

    def seconds(self, phase: str, *, decoded: float, context: float, prompt: float, batch: float) -> float:
        """Engine-seconds of one phase's work (`prompt`: all its prompt tokens; the hit rate applies)."""
        c = self.constants
        return (c["step"] * decoded / max(batch, 1.0) + c["decode"] * decoded + c["context"] * context
                + c["prefill"] * prompt * (1.0 - self.hit_rate.get(phase, 0.0)))

    def check(self, *, device_name: str, model: str, tp: int) -> None:
        """Refuse (one line) a plan for another device, model or tensor-parallel size."""
        for what, ours, theirs in (("device", self.device_key, device_name.lower()), ("model", self.model, model),
                                   ("tensor_parallel_size", self.tp, tp)):
            if ours != theirs:
                raise PlanError(f"--calibrate: the runs were measured with {what} {ours!r} ({self.device}, "
                                f"{self.engine}), the plan is for {theirs!r}: a calibration applies only to the "
                                f"device, model and tensor-parallel size it was measured on")

    def assumptions(self) -> list[str]:
        c = self.constants
        b = sorted(set(self.batches))
        return [f"calibrated on {len(self.runs)} measured run(s) on {self.device} ({self.engine}, model {self.model}, "
                f"x{self.tp} per engine): step {c['step'] * 1e3:.3g} ms, decode {c['decode'] * 1e3:.3g} ms/token, "
                f"context {c['context'] * 1e6:.3g} us per context token, prefill {c['prefill'] * 1e3:.3g} ms/token; "
                "prefix-cache hit rate " + ", ".join(f"{p} {self.hit_rate.get(p, 0.0):.0%}" for p in PHASES)
                + f"; batch {', '.join(f'{x:g}' for x in b)}"
                + "".join(f"; {k} not fitted: {why}" for k, why in self.held.items()),
                "not modelled: grading, engine start"]

    def as_dict(self) -> dict[str, Any]:
        return {"schema": "otbench.plan-calibration/1", **dataclasses.asdict(self)}


# -- reading a run ----------------------------------------------------------------------------------

def _read(folder: Path) -> tuple[dict[str, Any], Any, dict[str, Any]]:
    """(run.json, the measurement set, its provenance) of a run folder; one line when not readable."""
    from otbench.analysis.measurement import load
    from otbench.errors import OtbenchError
    from otbench.files import read_json

    if not (folder / "run.json").is_file():
        raise PlanError(f"--calibrate {folder}: no run.json (want the output folder of `otbench probe run`)")
    try:
        run = read_json(folder / "run.json")
        ms = load(folder)
    except OtbenchError as e:
        raise PlanError(f"--calibrate {folder}: {e}") from None
    cost = run.get("cost") if isinstance(run, Mapping) else None
    try:
        ok = float(cost["total"]["engine_seconds"]) > 0 and all(p in cost["phases"] for p in PHASES)
    except (KeyError, TypeError, ValueError):
        ok = False
    if not ok:
        raise PlanError(f"--calibrate {folder}/run.json: no cost block with engine-seconds per phase "
                        "(a run of an older otbench, or one that probed nothing)")
    prov = ms.provenance or {}
    if not isinstance(prov.get("probe"), Mapping) or not isinstance(prov.get("engine"), Mapping):
        raise PlanError(f"--calibrate {folder}: the set records no probe or engine settings (not a probe run)")
    return run, ms, prov


def run_job_settings(prov: Mapping[str, Any], model: str):
    """A stand-in for the run's `ProbeJob` with what `plan_job` reads, from the set's provenance."""
    p, cfg = prov["probe"], prov["engine"].get("config") or {}
    entry = (prov.get("model") or {}).get("entry")
    engine = SimpleNamespace(max_num_seqs=cfg.get("max_num_seqs"), tensor_parallel_size=int(cfg.get(
        "tensor_parallel_size") or 1), gpu_memory_utilization=float(cfg.get("gpu_memory_utilization") or 0.9),
        kv_cache_gib=float(cfg.get("kv_cache_gib") or 2), model=None, dtype=cfg.get("dtype") or "bfloat16")
    return SimpleNamespace(model=model, model_entry=entry, engine=engine, R=int(p["R"]), P=int(p["P"]),
                           b=int(p["b"]), thinking_limit=int(p["thinking_limit"]), answer_limit=int(p["answer_limit"]),
                           trajectories=None, data={})


def _counts(ms) -> dict[str, int]:
    out: dict[str, int] = {}
    for gi, g in enumerate(ms.groups):
        qs = np.unique(ms.question[ms.cell_group[ms.cell] == gi])
        if qs.size:
            out[g] = int(qs.size)
    return out


# -- the fit ----------------------------------------------------------------------------------------

def nnls(A: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Non-negative least squares for a few columns: the best of the unconstrained fits on every
    subset of columns whose coefficients are all >= 0 (exact; 2^k - 1 small solves)."""
    k = A.shape[1]
    best, best_r = np.zeros(k), float(y @ y)
    for n in range(1, k + 1):
        for cols in itertools.combinations(range(k), n):
            sub = A[:, cols]
            if np.linalg.matrix_rank(sub) < n:
                continue
            x, *_ = np.linalg.lstsq(sub, y, rcond=None)
            if np.all(x >= 0):
                r = float(np.sum((sub @ x - y) ** 2))
                if r < best_r - 1e-12 * max(best_r, 1.0):
                    best, best_r = np.zeros(k), r
                    best[list(cols)] = x
    return best


def _cells(name: str, run, plan) -> list[tuple[np.ndarray, float]]:
    """(features, measured seconds) per (group, phase) cell of one run."""
    rows = []
    for g, per in run["cost"]["benchmarks"].items():
        pg = plan.groups.get(g)
        if pg is None:
            continue
        for p in PHASES:
            e = per[p]
            dec, sec = float(e["decoded_tokens"]), float(e["engine_seconds"])
            if sec <= 0 or dec <= 0:
                continue
            model_dec = pg["tokens"][p][1]
            ctx = pg["context_tokens"][p] * (dec / model_dec if model_dec > 0 else 0.0)
            unc = float(e["prompt_tokens"]) - float(e["cached_prompt_tokens"])
            rows.append((np.array([dec / pg["batch"], dec, ctx, unc]), sec))
    if not rows:
        raise PlanError(f"--calibrate {name}: no (group, phase) with engine-seconds and decoded tokens")
    return rows


CONTEXT_SPAN = 2.0
"""The context cost is fitted only when the cells' mean context per decoded token spans at least
this factor; else it cannot be told from the per-token decode cost and keeps the device model's
value (KV bytes per token / (bandwidth x central efficiency))."""


def _datasheet_context(job, key: str) -> float:
    from ._throughput import Throughput, architecture, device

    t = Throughput(device(key), tp=job.engine.tensor_parallel_size)
    return architecture(job).kv_bytes / (t.tp * t.device.bandwidth * t.efficiency[1])


def calibrate(folders: Sequence[str | Path]) -> Calibration:
    """Fit the time model on the runs in `folders` (module docstring); every run's predicted and
    measured engine-seconds per phase are in `runs`."""
    from ._plan import plan_job

    if not folders:
        raise PlanError("--calibrate: give at least one run folder")
    seen, cells, hits = [], [], {p: [0.0, 0.0] for p in PHASES}
    for f in folders:
        folder = Path(f)
        run, ms, prov = _read(folder)
        cost = run["cost"]
        label, model = str(cost.get("device")), str((prov.get("model") or {}).get("id") or ms.models[0])
        key = device_key(label)
        if key is None:
            raise PlanError(f"--calibrate {folder}/run.json: device {label!r} is none the planner knows "
                            f"({', '.join(DEVICES)}): its calibration could not be matched to a plan's device")
        job = run_job_settings(prov, model)
        plan = plan_job(job, pilot=folder, device_name=key, questions=_counts(ms))
        seen.append((folder, run, job, plan, label, key, model, str(cost.get("engine"))))
        cells += _cells(str(folder), run, plan)
        for p in PHASES:
            hits[p][0] += float(cost["phases"][p]["cached_prompt_tokens"])
            hits[p][1] += float(cost["phases"][p]["prompt_tokens"])
    ids = {(s[5], s[6], s[2].engine.tensor_parallel_size) for s in seen}
    if len(ids) > 1:
        raise PlanError("--calibrate: the runs differ in device, model or tensor-parallel size ("
                        + "; ".join(f"{s[0]}: {s[4]}, {s[6]}, x{s[2].engine.tensor_parallel_size}" for s in seen)
                        + "): calibrate on runs of one")
    A = np.stack([c[0] for c in cells])
    y = np.array([c[1] for c in cells])
    batches = tuple(float(s[3].groups[g]["batch"]) for s in seen for g in s[3].groups)
    first = seen[0]
    fixed = {}
    if len(set(batches)) == 1:
        fixed[0] = 0.0                     # step / B and decode are one column at one batch
    per_token = A[:, 2] / A[:, 1]
    if per_token.max() < CONTEXT_SPAN * per_token.min():
        fixed[2] = _datasheet_context(first[2], first[5])
    free = [j for j in range(A.shape[1]) if j not in fixed]
    rest = y - sum(A[:, j] * v for j, v in fixed.items())
    sub = A[:, free]
    scale = np.where(sub.max(axis=0) > 0, sub.max(axis=0), 1.0)
    x = np.zeros(A.shape[1])
    x[free] = nnls(sub / scale, rest) / scale
    for j, v in fixed.items():
        x[j] = v
    held = {}
    if 0 in fixed:
        held["step"] = "the runs have one batch, so decode is the cost per token at that batch"
    if 2 in fixed:
        held["context"] = (f"the runs' context per decoded token spans under {CONTEXT_SPAN:g}x, so it keeps "
                           "the device model's value (KV bytes / (bandwidth x central efficiency))")
    cal = Calibration(device=first[4], device_key=first[5], engine=first[7], model=first[6],
                      tp=first[2].engine.tensor_parallel_size, constants=dict(zip(CONSTANTS, map(float, x))),
                      hit_rate={p: (h / n if n > 0 else 0.0) for p, (h, n) in hits.items()}, batches=batches,
                      held=held)
    runs = []
    for folder, run, job, plan, *_ in seen:
        pred = predict(cal, plan)
        runs.append({"run": str(folder), "units": int((run.get("units") or {}).get("total") or 0),
                     "measured": {p: float(run["cost"]["phases"][p]["engine_seconds"]) for p in PHASES},
                     "predicted": pred})
    return dataclasses.replace(cal, runs=tuple(runs))


def predict(cal: Calibration, plan) -> dict[str, float]:
    """Engine-seconds per phase of `plan`'s central workload under `cal`."""
    out = dict.fromkeys(PHASES, 0.0)
    for g in plan.groups.values():
        for p in PHASES:
            out[p] += cal.seconds(p, decoded=g["tokens"][p][1], context=g["context_tokens"][p],
                                  prompt=g["prompt_tokens"][p], batch=g["batch"])
    return out


def calibration_text(cal: Calibration) -> list[str]:
    """The calibration as printed: its constants, then predicted against measured for each run."""
    lines = ["calibration: " + cal.assumptions()[0]]
    for r in cal.runs:
        m, p = sum(r["measured"].values()), sum(r["predicted"].values())
        lines.append(f"  {r['run']} ({r['units']} units): predicted {p:,.1f} / measured {m:,.1f} engine-seconds "
                     f"({p / m if m > 0 else math.nan:.3f}); " + ", ".join(
                         f"{ph} {r['predicted'][ph]:,.1f}/{r['measured'][ph]:,.1f}" for ph in PHASES))
    return lines
