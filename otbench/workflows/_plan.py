"""`otbench plan --pilot`: the job's plan (probe) joined to the bootstrap's predicted widths (analysis).

The probe stage plans the job and prices each candidate design (`plan_job`, `candidate_hours`);
the analysis predicts the 95 % interval half-widths from the pilot (`predict_precision`). What
crosses is data: the pilot's rows, the job's question counts, the candidates' hours and widths.
"""

import dataclasses
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any


@dataclasses.dataclass(frozen=True)
class PrecisionPlan:
    """The precision part of a plan.

    Attributes:
      lines: the printed block (`otbench.probe.plan.precision_text`), or one note line when the
        pilot has no trajectories for the job.
      block: the plan JSON's ``precision`` entry; None when the pilot has no trajectories in the
        job's groups (nothing was predicted).
      note: why nothing was predicted (block None), or a note on the pilot (its model missing).
    """

    lines: list[str]
    block: dict[str, Any] | None
    note: str | None


def plan_precision(job, plan, pilot: Path, *, targets: Mapping[str, float] | None = None,
                   device_name: str = "h200", questions: Mapping[str, int] | None = None,
                   max_num_seqs: int | None = None, calibration=None) -> PrecisionPlan:
    """The predicted half-widths of the macro OR, AD and P(0) at the job's (R, P), read from the
    pilot set at `pilot`; with `targets` at every candidate (R, P) of the grid, each with its
    device-hours, the cheapest that meets them, and when none does, the questions one would need.

    `plan` is `otbench.probe.plan.plan_job`'s plan of `job`; `device_name`, `questions`,
    `max_num_seqs` and `calibration` are what it was planned with (each candidate is priced the
    same way)."""
    from otbench.analysis.measurement import load
    from otbench.analysis.resampling import PRECISION_REPLICATES, predict_precision
    from otbench.probe.plan import (
        TARGET_STATS,
        Candidate,
        candidate_hours,
        candidates,
        more_questions,
        pilot_for_job,
        precision_text,
    )

    t0 = time.perf_counter()
    pairs = candidates(job.R, job.P) if targets else [(job.R, job.P)]
    ms, note = pilot_for_job(load(pilot), job.model, sorted(plan.groups))
    if ms is None:
        return PrecisionPlan(lines=[f"note: {note}"], block=None, note=note)
    P_p = int(ms.probes[0])
    pred = predict_precision(ms, questions={g: v["questions"] for g, v in plan.groups.items() if g in ms.groups},
                             trajectories=job.R, probes=max(p for _, p in pairs),
                             probe_levels=[p for _, p in pairs if p <= P_p])
    hours = candidate_hours(job, pairs, pilot=pilot, device_name=device_name, questions=questions,
                            max_num_seqs=max_num_seqs, calibration=calibration) if targets \
        else {(job.R, job.P): plan.total["hours"][1]}
    stats = [TARGET_STATS[k] for k in ("or", "ad", "p0")]
    options = [Candidate(R=r, P=p, hours=hours[(r, p)],
                         half_widths={s: pred.width(s, r, p) / 2 for s in stats}) for r, p in pairs]
    info = {"pilot": f"{ms.num_trajectories} trajectories, R={pred.pilot_R:g}, P={P_p}"
                     + (" SYNTHETIC" if pred.synthetic else ""),
            "replicates": PRECISION_REPLICATES, "seconds": time.perf_counter() - t0}
    more = None
    if targets and not any(c.meets(targets) for c in options):
        qs = dict(pred.questions)

        def widths_at(r, p, counts):
            at = pred.at_questions(counts)
            return {s: at.width(s, r, p) / 2 for s in stats}

        more = more_questions(options, targets, qs, widths_at)
    lines = precision_text(options, targets, job.R, job.P, info, more) + ([f"  note: {note}"] if note else [])
    block = {"meaning": "half-width (hi - lo) / 2 of the 95 % bootstrap interval, fraction",
             "pilot": info["pilot"], "replicates": PRECISION_REPLICATES, "targets": targets,
             "candidates": [{"R": c.R, "P": c.P, "hours": c.hours, "half_widths": dict(c.half_widths)}
                            for c in options],
             **({"with_more_questions": {"R": more.at_job.R, "P": more.at_job.P, "questions": dict(more.questions),
                                         "hours": more.hours, "half_widths": dict(more.half_widths)}}
                if more is not None else {})}
    return PrecisionPlan(lines=lines, block=block, note=note)
