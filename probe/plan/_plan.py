"""`otbench plan`: a probe job's tokens by phase and device-hours, before any engine starts.

Per benchmark group the job's work is counted exactly from its settings
(questions x R trajectories; each trajectory's `n + 1` positions get `P`
answer probes and two signal reads) and the lengths that decide the tokens
come from one of two places:

* a pilot measurement set (`pilot=`): per group, the measured thinking
  lengths at the job's thinking limit, the steps at the job's `b` (the
  measured ones when the pilot used the same `b`, else the paper's target
  `max(1, floor(L/b + 1/2))` with even steps), and, when the set has the
  probe's token tables, the measured prompt, own-answer and probe-answer
  lengths (cut at the job's answer limit); its range is +-2 standard errors
  of each mean over the pilot's questions;
* stated priors otherwise (`_lengths`: `PRIORS`, and per benchmark group its thinking length,
  `GROUP_THINKING`), each with its source, printed per group.

Time comes from the device model (`_throughput`): decode reads weights / B
plus every sequence's KV per token, prefill costs 2 x active parameters
FLOPs per uncached prompt token. Low and high combine the lengths' range
with the bandwidth efficiency's. The planner imports no engine, torch or
JAX and starts nothing; it only reads the job, its question list and the
pilot's files.
"""

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ._advice import hours_text
from ._lengths import GROUP_THINKING, PRIORS, Lengths, _prior_lengths, _shift, group_prior, pilot_lengths
from ._throughput import GIB, Architecture, PlanError, Throughput, architecture, as_dict, device

PHASES = ("think", "probe", "signal")

# -- the workload --------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Work:
    """One group's work in one scenario: counts, tokens per phase, and their context sums."""

    trajectories: float
    positions: float
    answers: float
    requests: dict[str, float]
    decoded: dict[str, float]
    prompt: dict[str, float]
    uncached: dict[str, float]
    context: dict[str, float]
    shape: tuple[float, float, float, int]


SUFFIX_CHARS_PER_TOKEN = 4.0
"""Characters per token of a field probe's suffix text, for a plan made without the tokenizer (an
estimate; the suffixes are 24 and 84 characters, so it moves a position's cost by a few tokens)."""


def _field_work(T: float, pos: float, x: Lengths, field_probes: Sequence[str]) -> dict[str, dict[str, float]]:
    """The field probes' share of the "probe" phase (`probe.stp._field_probes`): per position a dynasor
    or deer request (its suffix prefilled after the cached prefix, its own tokens decoded) and a
    thinkbrake fork (one token decoded on the cached prefix, charged at every position), and per
    trajectory one DeepConf confidence request: prompt + whole output (thinking; for a finished trajectory
    the marker, its own answer and stop id) prefilled with prompt log-probabilities, which vLLM never
    serves from its prefix cache (0.32 `sampling_params.py` lines 622-629)."""
    from otbench.probe.grading import DEER_MAX_TOKENS, DEER_PROMPT, DYNASOR_MAX_TOKENS, DYNASOR_SUFFIX

    out = {"requests": 0.0, "decoded": 0.0, "prompt": 0.0, "uncached": 0.0, "context": 0.0}
    mean_prefix = x.prompt + x.prefix / max(x.positions, 1.0)
    for name, text, dec in (("dynasor", DYNASOR_SUFFIX, DYNASOR_MAX_TOKENS), ("deer", DEER_PROMPT, DEER_MAX_TOKENS)):
        if name in field_probes:
            suffix = len(text) / SUFFIX_CHARS_PER_TOKEN
            out["requests"] += pos
            out["decoded"] += pos * dec
            out["prompt"] += pos * (mean_prefix + suffix)
            out["uncached"] += pos * suffix
            out["context"] += pos * dec * (mean_prefix + suffix + dec / 2)
    if "thinkbrake" in field_probes:
        # ThinkBrake's fork 0 (one token on the cached prefix) at every position: an upper bound, as
        # only positions ending with '.\n\n' send it; its fork 1 is the position's own signal read
        # for Qwen3 and DeepSeek-R1 (another family's extra read is not charged)
        out["requests"] += pos
        out["decoded"] += pos
        out["prompt"] += pos * mean_prefix
        out["context"] += pos * mean_prefix
    if "deepconf" in field_probes:
        # the output as the think request decodes it (`workload`: the marker's first id, own answer, stop)
        whole = x.prompt + x.thinking + (1 - x.forced) * (x.own + 2)
        out["requests"] += T
        out["decoded"] += T
        out["prompt"] += T * whole
        out["uncached"] += T * whole
        out["context"] += T * whole
    return out


def workload(questions: int, x: Lengths, *, R: int, P: int, answer_limit: int = 0,
             field_probes: Sequence[str] = (), thinking_limit: int = 0) -> Work:
    """The tokens of `questions` x `R` trajectories with per-trajectory means `x`, per phase.

    think: one request per trajectory decoding its thinking, the marker's first
    id and its own answer (+ the stop id); a trajectory cut at the thinking
    limit decodes on through the answer room of its request (`answer_limit`
    + 1) and gets its answer from a forced request instead; probe: P answers
    per position in two requests (+ the forced answers); signal: two one-token reads per
    position (the probe's margin context and the model's own context,
    `margin_own`), plus the job's field probes (`_field_work`). `context` sums,
    over decoded tokens, the context each is decoded at (KV read per token);
    `uncached` is the prompt the prefix cache cannot serve. `thinking_limit`
    (0: not known) sets the full length the driver holds a trajectory being
    sampled to (`shape`, for the batch).
    """
    T = float(questions * R)
    m = PRIORS["marker_tokens"][0]
    pos = T * x.positions
    answers = pos * P
    forced = T * x.forced
    think_dec = T * (x.thinking + (1 - x.forced) * (x.own + 2) + x.forced * (answer_limit + 1))
    probe_dec = (answers + forced) * (x.answer + 1)
    # one trajectory's retained prefixes: sum_k (prompt + L(k) + marker) = positions (prompt + marker) + prefix
    pre = x.positions * (x.prompt + m) + x.prefix
    sig = 2.0                            # signal reads per position: margin and margin_own
    # probe requests per position: the first answer (with its log-probabilities) and the other P - 1
    # (`probe.stp._driver`), each prompt read once; the second request's prefix is cached
    per = 2.0 if P > 1 else 1.0
    fw = _field_work(T, pos, x, field_probes)
    return Work(
        trajectories=T, positions=pos, answers=answers,
        requests={"think": T, "probe": per * pos + forced + fw["requests"], "signal": sig * pos},
        decoded={"think": think_dec, "probe": probe_dec + fw["decoded"], "signal": sig * pos},
        prompt={"think": T * x.prompt, "probe": per * T * pre + forced * (x.prompt + x.thinking + m) + fw["prompt"],
                "signal": sig * T * (x.positions * x.prompt + x.prefix)},
        # the think request's prompt; each position's new step and marker (its earlier steps are
        # cached from the position before); the signals share the probes' prefixes
        uncached={"think": T * x.prompt, "probe": T * (x.thinking + x.positions * m) + forced * m + fw["uncached"],
                  "signal": sig * pos},
        context={"think": T * (x.thinking * x.prompt + x.thinking_sq / 2 + x.own * (x.prompt + x.thinking)),
                 "probe": T * P * (x.answer * pre + x.positions * x.answer * x.answer / 2)
                 + forced * x.answer * (x.prompt + x.thinking + x.answer / 2) + fw["context"],
                 "signal": sig * T * (x.positions * x.prompt + x.prefix)},
        # a position's probe group as the driver admits it (`_kv.steady_batch`): the prompt, the mean
        # retained thinking, the mean answer, P, and the positions of a trajectory (their nested
        # prefixes share whole blocks), and the trajectories sampled beside them: their mean length and
        # the full length the driver holds them to (`_kv.steady_batch`)
        shape=(x.prompt + m, x.prefix / max(x.positions, 1.0), x.answer, P, x.positions,
               x.prompt + x.thinking, x.prompt + thinking_limit + answer_limit if thinking_limit else 0.0),
    )


def _no_think(w: Work) -> Work:
    """`w` without its think requests (the trajectories are imported, not sampled)."""
    zero = lambda d: {**d, "think": 0.0}  # noqa: E731
    return dataclasses.replace(w, requests=zero(w.requests), decoded=zero(w.decoded), prompt=zero(w.prompt),
                               uncached=zero(w.uncached), context=zero(w.context), shape=w.shape[:5])


def _hours(w: Work, arch: Architecture, tput: Throughput, eff: float, calibration=None) -> dict[str, float]:
    batch = tput.batch_for(arch, w.shape)
    if calibration is not None:      # fitted on measured runs (`_calibrate`): prompt x (1 - hit rate) uncached
        return {p: tput.tp * calibration.seconds(p, decoded=w.decoded[p], context=w.context[p], prompt=w.prompt[p],
                                                 batch=batch) / 3600.0 for p in PHASES}
    return {p: tput.tp * tput.seconds(arch, decoded=w.decoded[p], context=w.context[p], prefill=w.uncached[p],
                                      batch=batch, efficiency=eff) / 3600.0 for p in PHASES}


@dataclasses.dataclass(frozen=True)
class Plan:
    """What `plan_job` estimates: per group and in total, central value with a low/high range.

    `groups`: name -> {"questions", "trajectories", "positions", "answers", "tokens": {phase:
    [low, mid, high]}, "prompt_tokens": {phase: mid}, "hours": [low, mid, high], "batch", "sources"};
    `total`: the same sums; `assumptions`: the device model's and the priors' statements;
    `notes`: what the pilot lacked; `synthetic`: the pilot was simulated.
    """

    job: dict[str, Any]
    groups: dict[str, dict[str, Any]]
    total: dict[str, Any]
    assumptions: list[str]
    notes: list[str]
    synthetic: bool
    throughput: dict[str, Any]

    def as_dict(self) -> dict[str, Any]:
        return {"schema": "otbench.plan/1", **dataclasses.asdict(self),
                **({"synthetic_pilot": "the pilot set is SYNTHETIC (simulated): its lengths are not a "
                                       "model's"} if self.synthetic else {})}


def _thinking_prior(g: str, xs: Mapping[str, Lengths], measured: Lengths | None, limit: int) -> dict[str, Any]:
    """What a group's thinking length is and where it comes from (printed per group)."""
    lo, mid, hi = (xs[w].thinking for w in ("low", "mid", "high"))
    if measured is not None:
        src, name = "pilot: the group's measured mean (range +-2 standard errors over its questions)", "pilot"
    else:
        name, _, src = group_prior(g)
        src = f"prior ({'pooled' if name == 'pooled' else name + ' default'}): {src}"
    cut = f"; cut at the thinking limit {limit:,}" if measured is None and hi >= limit else ""
    return {"tokens": [lo, mid, hi], "prior": name, "source": src + cut}


def _pilot_rate(folder: Path | None) -> str | None:
    """What the pilot's own run spent (its run.json cost block), as a note; None without one."""
    if folder is None or not (folder / "run.json").is_file():
        return None
    from otbench.errors import OtbenchError
    from otbench.files import read_json

    try:
        cost = read_json(folder / "run.json").get("cost")
        tot = cost["total"]
        dec, sec = float(tot["decoded_tokens"]), float(tot["engine_seconds"])
        where = f"{cost['device']} ({cost['engine']}, {cost['workers']} engine(s))"
    except (OtbenchError, AttributeError, KeyError, TypeError, ValueError):
        return "pilot: its run.json has no readable cost block (a run of an older otbench?)"
    if sec <= 0:
        return None
    return (f"pilot run: {dec:,.0f} decoded tokens in {sec:,.1f} engine-seconds on {where}, "
            f"{dec / sec:,.0f} tokens/s at the pilot's (smaller) batch")


def _question_counts(job, questions: Mapping[str, int] | None) -> dict[str, int]:
    if questions is not None:
        return dict(questions)
    from otbench.probe.data import DatasetError, load_data

    from ._offline import go_offline_if_unreachable

    offline = go_offline_if_unreachable(job.data)
    try:
        qs, _ = load_data(job.data)
    except DatasetError as e:
        if offline is None:
            raise
        raise PlanError(f"{offline}: {e}; plan without the data with --questions GROUP=N,...") from None
    counts: dict[str, int] = {}
    for q in qs:
        counts[q.group] = counts.get(q.group, 0) + 1
    if not counts:
        raise PlanError("the job's [data] selects no questions")
    return counts


def _pilot(job, pilot, counts: Mapping[str, int]) -> tuple[dict[str, Lengths], list[str], bool]:
    """(group -> measured lengths, notes, synthetic) of a pilot set or its folder (nothing without
    one); a group the pilot lacks is planned from the priors, and a note says so."""
    if pilot is None:
        return {}, [], False
    folder = None
    if not hasattr(pilot, "num_trajectories"):
        from otbench.analysis.measurement import load
        folder = Path(pilot)
        pilot = load(folder)
    synthetic = bool(pilot.synthetic)
    measured, notes = pilot_lengths(pilot, b=job.b, thinking_limit=job.thinking_limit,
                                    answer_limit=job.answer_limit, model=job.model, folder=folder)
    missing = sorted(set(counts) - set(measured))
    if missing:
        notes.append(f"pilot: no trajectories of {', '.join(missing)}: priors used there")
    if synthetic:
        notes.insert(0, "the pilot set is SYNTHETIC (simulated): these are not a model's lengths")
    measured_rate = _pilot_rate(folder)
    if measured_rate:
        notes.append(measured_rate)
    return measured, notes, synthetic


def _group_plan(job, n_questions: int, measured: Lengths | None, g: str, arch, tput,
                calibration) -> dict[str, Any]:
    """One benchmark group's plan: its tokens by phase and device-hours at low, mid and high
    lengths (the pilot's `measured` lengths, else the priors)."""
    lo_e, mid_e, hi_e = tput.efficiency
    if measured is not None:
        xs = {"low": _shift(measured, -1.0), "mid": measured, "high": _shift(measured, +1.0)}
    else:
        xs = {w: _prior_lengths(job.b, job.thinking_limit, job.answer_limit, w, group=g)
              for w in ("low", "mid", "high")}
    ws = {w: workload(n_questions, x, R=job.R, P=job.P, answer_limit=job.answer_limit,
                      field_probes=tuple(getattr(job, "field_probes", ())), thinking_limit=job.thinking_limit)
          for w, x in xs.items()}
    if job.trajectories is not None:          # imported trajectories: nothing is sampled
        ws = {w: _no_think(v) for w, v in ws.items()}
    hours = {"low": _hours(ws["low"], arch, tput, hi_e, calibration),
             "mid": _hours(ws["mid"], arch, tput, mid_e, calibration),
             "high": _hours(ws["high"], arch, tput, lo_e, calibration)}
    mid = ws["mid"]
    return {
        "questions": n_questions, "trajectories": mid.trajectories, "positions": mid.positions,
        "answers": mid.answers,
        "tokens": {p: [ws[w].decoded[p] for w in ("low", "mid", "high")] for p in PHASES},
        "prompt_tokens": {p: mid.prompt[p] for p in PHASES},
        "uncached_prompt_tokens": {p: mid.uncached[p] for p in PHASES},
        "context_tokens": {p: mid.context[p] for p in PHASES},
        "hours_by_phase": {p: hours["mid"][p] for p in PHASES},
        "hours": [sum(hours[w].values()) for w in ("low", "mid", "high")],
        "batch": tput.batch_for(arch, mid.shape),
        "sources": dict(xs["mid"].source),
        "lengths": {k: getattr(xs["mid"], k) for k in ("thinking", "positions", "answer", "own", "prompt",
                                                       "forced")},
        "thinking_prior": _thinking_prior(g, xs, measured, job.thinking_limit),
    }


def plan_job(job, *, pilot=None, device_name: str = "h200", questions: Mapping[str, int] | None = None,
             max_num_seqs: int | None = None, arch: Architecture | None = None, calibration=None) -> Plan:
    """Estimate `job`'s tokens by phase and its device-hours, per benchmark group and in total.

    Args:
      job: a `ProbeJob` (`otbench.probe.stp.load_job`).
      pilot: a measurement set, or the folder of one (then its token tables are used too).
      device_name: a key of `DEVICES`.
      questions: group -> questions, instead of loading the job's [data] (a plan before the data
        is downloaded).
      max_num_seqs: the scheduler's batch limit (default: the job's engine.max_num_seqs, else 256).
      arch: the model's architecture (default: `architecture(job)`).
      calibration: a `Calibration` fitted on measured runs (`calibrate`) instead of the device
        model's datasheet constants; refused (PlanError) for another device, model or TP size.
    """
    if calibration is not None:
        calibration.check(device_name=device_name, model=job.model, tp=job.engine.tensor_parallel_size)
    arch = arch or architecture(job)
    seqs = max_num_seqs or job.engine.max_num_seqs or 256
    cpu = device_name.lower() == "cpu"
    tput = Throughput(device(device_name), tp=job.engine.tensor_parallel_size, max_num_seqs=int(seqs),
                      memory_utilization=job.engine.gpu_memory_utilization,
                      kv_cache_bytes=float(job.engine.kv_cache_gib) * GIB if cpu else None)
    counts = _question_counts(job, questions)
    measured, notes, synthetic = _pilot(job, pilot, counts)
    groups = {g: _group_plan(job, counts[g], measured.get(g), g, arch, tput, calibration)
              for g in sorted(counts)}
    total = {k: sum(v[k] for v in groups.values()) for k in ("questions", "trajectories", "positions", "answers")}
    total["tokens"] = {p: [sum(v["tokens"][p][i] for v in groups.values()) for i in range(3)] for p in PHASES}
    total["prompt_tokens"] = {p: sum(v["prompt_tokens"][p] for v in groups.values()) for p in PHASES}
    total["hours_by_phase"] = {p: sum(v["hours_by_phase"][p] for v in groups.values()) for p in PHASES}
    total["hours"] = [sum(v["hours"][i] for v in groups.values()) for i in range(3)]
    if job.trajectories is not None:
        notes.append("the job imports its trajectories ([trajectories]): no think phase is sampled")
    assumptions = tput.assumptions(arch)
    if calibration is not None:
        assumptions = [assumptions[1], *calibration.assumptions()]
        cal_b = sorted(set(calibration.batches))
        if len(cal_b) == 1 and any(abs(v["batch"] - cal_b[0]) > 1e-9 for v in groups.values()):
            here = ", ".join(sorted({format(v["batch"], "g") for v in groups.values()}))
            notes.append(f"calibration: measured at batch {cal_b[0]:g} only, this plan's batch is {here}: "
                         "its per-token decode cost is used unchanged")
    if any(g not in measured for g in counts):
        assumptions += [f"prior {k}: {v} ({src})" for k, (v, src) in PRIORS.items()]
        used = sorted({group_prior(g)[0] for g in counts if g not in measured} - {"pooled"})
        assumptions += [f"prior thinking_tokens[{n}]: {GROUP_THINKING[n][0]} ({GROUP_THINKING[n][1]})" for n in used]
    else:
        assumptions.append(f"prior marker_tokens: {PRIORS['marker_tokens'][0]} ({PRIORS['marker_tokens'][1]})")
    assumptions.append(("range: low = short lengths, high = long lengths (calibrated constants)" if calibration
                        else "range: low = short lengths and high efficiency, high = long lengths and low efficiency")
                       + (" (pilot lengths: +-2 standard errors over its questions)" if measured else ""))
    jd = {"model": job.model, "R": job.R, "P": job.P, "b": job.b, "thinking_limit": job.thinking_limit,
          "answer_limit": job.answer_limit, "tensor_parallel_size": job.engine.tensor_parallel_size}
    tp_dict = as_dict(tput) | ({"calibration": calibration.as_dict()} if calibration is not None else {})
    return Plan(jd, groups, total, assumptions, notes, synthetic, tp_dict)


def _n(x: float) -> str:
    for div, suf in ((1e9, "B"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= div:
            return f"{x / div:.3g}{suf}"
    return f"{x:.0f}"


def plan_text(plan: Plan) -> list[str]:
    """The plan as plain lines: the table per group and the total, then notes and assumptions."""
    j = plan.job
    lines = []
    if plan.synthetic:
        lines.append("SYNTHETIC pilot (simulated set): the lengths below are not a model's")
    lines.append(f"plan for {j['model']}: R={j['R']}, P={j['P']}, b={j['b']}, thinking limit "
                 f"{j['thinking_limit']}, answer limit {j['answer_limit']}; device-hours on "
                 f"{plan.throughput['device']['name']}")
    head = (f"{'group':<16} {'questions':>9} {'units':>8} {'positions':>10} {'answers':>9} "
            f"{'think tok':>9} {'probe tok':>9} {'signal':>7} {'hours':>8} {'[low, high]':>17}")
    lines.append(head)
    for name, v in [*plan.groups.items(), ("total", plan.total)]:
        t, h = v["tokens"], v["hours"]
        lines.append(f"{name:<16} {v['questions']:>9,} {_n(v['trajectories']):>8} {_n(v['positions']):>10} "
                     f"{_n(v['answers']):>9} {_n(t['think'][1]):>9} {_n(t['probe'][1]):>9} "
                     f"{_n(t['signal'][1]):>7} {hours_text(h[1]):>8} "
                     f"{f'[{hours_text(h[0])}, {hours_text(h[2])}]':>17}")
    tot = plan.total
    dec = sum(tot["tokens"][p][1] for p in PHASES)
    lines.append(f"decoded tokens {_n(dec)} [{_n(sum(tot['tokens'][p][0] for p in PHASES))}, "
                 f"{_n(sum(tot['tokens'][p][2] for p in PHASES))}]; device-hours by phase: "
                 + ", ".join(f"{p} {hours_text(tot['hours_by_phase'][p])}" for p in PHASES))
    for name, v in plan.groups.items():
        tp = v["thinking_prior"]
        lo, mid, hi = tp["tokens"]
        short = "pilot" if tp["prior"] == "pilot" else ("pooled prior" if tp["prior"] == "pooled"
                                                         else f"prior: {tp['prior']} default")
        lines.append(f"thinking {name}: {mid:,.0f} tokens per trajectory [{lo:,.0f}, {hi:,.0f}] ({short})")
    srcs = sorted({f"{k}: {s}" for v in plan.groups.values() for k, s in v["sources"].items() if s != "prior"})
    if srcs:
        lines.append("measured on the pilot: " + "; ".join(srcs))
    lines.extend(f"note: {n}" for n in plan.notes)
    lines.extend(f"assumes {a}" for a in plan.assumptions)
    return lines
