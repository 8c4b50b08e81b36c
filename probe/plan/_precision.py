"""`otbench plan --target`: precision targets, the candidate grid, and the cheapest design that meets
them. The widths come from `otbench.analysis.resampling.predict_precision` (called by the
CLI: the probe never loads JAX); here is only NumPy and arithmetic.

A target is a **half-width** of the bootstrap's 95 % interval, `(hi - lo) / 2`, in percentage
points of the macro statistic: `OR:1pp` asks for the macro OR's interval to be at most +-1 pp.
"""

import dataclasses
import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ._advice import hours_text
from ._throughput import PlanError

TARGET_STATS = {"or": "or", "ad": "ad", "p0": "zero_step_acc"}
"""Target names (case-insensitive) -> the predicted statistic: macro OR, AD, zero-step accuracy P(0)."""
CANDIDATE_R = (2, 4, 8, 16, 32)
CANDIDATE_P = (4, 8, 12, 16, 32)
"""The candidate grid of (R, P) that `--target` searches (with the job's own R and P added)."""
_VALUE = re.compile(r"^([0-9]+(\.[0-9]*)?|\.[0-9]+)pp$")   # ASCII digits only


def parse_targets(text: str) -> dict[str, float]:
    """`"OR:1pp,AD:0.5pp"` -> {"or": 0.01, "ad": 0.005} (half-widths as fractions).

    Refusals are one line (pinned by tests/probe/plan/test_plan_precision.py)."""
    out: dict[str, float] = {}
    parts = [p.strip() for p in str(text).split(",")]
    for part in parts:
        name, colon, value = part.partition(":")
        key = name.strip().lower()
        v = value.strip().lower()
        ok = bool(colon) and key in TARGET_STATS and bool(_VALUE.match(v)) and 0 < float(v[:-2]) <= 100
        if not ok:
            raise PlanError(f"--target {text!r}: want METRIC:HALF_WIDTHpp[,...] with METRIC one of OR, AD, P0 "
                            f"and a half-width in percentage points in (0, 100] (at {part!r})")
        if TARGET_STATS[key] in out:
            raise PlanError(f"--target {text!r}: {name.strip()} is given twice")
        out[TARGET_STATS[key]] = float(v[:-2]) / 100.0
    return out


def candidates(R: int, P: int, grid_R: Sequence[int] = CANDIDATE_R,
               grid_P: Sequence[int] = CANDIDATE_P) -> list[tuple[int, int]]:
    """The (R, P) pairs searched: the grid plus the job's own, sorted."""
    return sorted({(int(r), int(p)) for r in grid_R for p in grid_P} | {(int(R), int(P))})


@dataclasses.dataclass(frozen=True)
class Candidate:
    """One design: its device-hours (the cost model's central value) and predicted half-widths."""

    R: int
    P: int
    hours: float
    half_widths: Mapping[str, float]

    def meets(self, targets: Mapping[str, float]) -> bool:
        return all(math.isfinite(self.half_widths.get(s, math.nan)) and self.half_widths[s] <= t
                   for s, t in targets.items())


def recommend(options: Sequence[Candidate], targets: Mapping[str, float]) -> Candidate | None:
    """The cheapest candidate (fewest device-hours; then the fewest R x P, then the fewest R) whose
    predicted half-width meets every target; None when none does."""
    ok = [c for c in options if c.meets(targets)]
    return min(ok, key=lambda c: (c.hours, c.R * c.P, c.R)) if ok else None


@dataclasses.dataclass(frozen=True)
class MoreQuestions:
    """A design that meets the targets only with more questions: the candidate at the job's
    questions (`at_job`), the questions per group it needs, and its device-hours and half-widths there."""

    at_job: Candidate
    questions: Mapping[str, int]
    hours: float
    half_widths: Mapping[str, float]


def more_questions(options: Sequence[Candidate], targets: Mapping[str, float], questions: Mapping[str, int],
                   widths_at: Callable[[int, int, Mapping[str, int]], Mapping[str, float]],
                   max_factor: float = 1e4) -> MoreQuestions | None:
    """When no candidate meets `targets` at the job's `questions`: for each, the fewest questions
    (every group scaled by one factor, rounded up) at which its predicted half-widths
    (`widths_at(R, P, questions)`) meet them, and the cheapest of those. Device-hours scale with the
    questions (the workload is linear in them, group by group). None: none meets them within
    `max_factor` times the questions (or a width is undefined)."""
    best = None
    total = sum(questions.values())
    for c in options:
        ratios = [c.half_widths.get(st, math.nan) / t for st, t in targets.items()]
        if not all(math.isfinite(r) for r in ratios):
            continue
        # widths shrink about as 1 / sqrt(questions): the first factor tried is the squared ratio,
        # then up 2 % at a time. A ratio beyond sqrt(max_factor) needs more than max_factor times
        # the questions: compared before squaring (a target of 1e-160 squared its ratio to beyond
        # a float's range: an OverflowError)
        if max(ratios) > math.sqrt(max_factor):
            continue
        k = max(1.0, max(ratios) ** 2)
        while k <= max_factor:
            qs = {g: math.ceil(k * q) for g, q in questions.items()}
            hw = dict(widths_at(c.R, c.P, qs))
            if Candidate(c.R, c.P, c.hours, hw).meets(targets):
                hours = c.hours * sum(qs.values()) / total
                if best is None or (hours, c.R * c.P, c.R) < (best.hours, best.at_job.R * best.at_job.P,
                                                              best.at_job.R):
                    best = MoreQuestions(c, qs, hours, hw)
                break
            k *= 1.02
    return best


def pilot_for_job(ms, model: str | None, groups: Sequence[str]):
    """The pilot's rows that plan this job: its model's (all models when the pilot lacks it) in the
    job's groups, and a note when the model is missing; (None, why) when no row is left."""
    keep = np.isin(ms.cell_group[ms.cell], [ms.groups.index(g) for g in groups if g in ms.groups])
    note = None
    if model in ms.models:
        keep &= ms.cell_model[ms.cell] == ms.models.index(model)
    elif model is not None:
        note = f"precision: model {model!r} not in the pilot; all its models' trajectories are used"
    if not keep.any():
        return None, (f"precision: the pilot has no trajectories in the job's groups ({', '.join(groups)}); "
                      "no widths predicted")
    return ms.take(np.flatnonzero(keep)), note


def precision_text(options: Sequence[Candidate], targets: Mapping[str, float] | None, R: int, P: int,
                   info: Mapping[str, Any], more: MoreQuestions | None = None) -> list[str]:
    """The printed precision block: the job's own predicted half-widths, and with targets the
    recommendation, or, when none of the grid meets them, the most precise design and the
    cheapest one with the questions it needs (`more`, `more_questions`)."""
    names = {v: k.upper() for k, v in TARGET_STATS.items()}
    own = next(c for c in options if (c.R, c.P) == (R, P))

    def hw(c):
        return ", ".join(f"{names[s]} +-{v * 100:.2f}pp" for s, v in c.half_widths.items())

    lines = [f"precision (95 % interval half-widths, predicted from the pilot: {info['pilot']}; "
             f"{info['replicates']} paired replicates per probe level, {info['seconds']:.1f} s):",
             f"  at the job's R={R}, P={P}: {hw(own)}"]
    if targets:
        want = ", ".join(f"{names[s]} +-{t * 100:g}pp" for s, t in targets.items())
        best = recommend(options, targets)
        if best is None:
            top = min(options, key=lambda c: sum(c.half_widths.get(s, math.inf) / t for s, t in targets.items()))
            lines.append(f"  no candidate R x P in the grid meets {want}; the most precise: R={top.R}, P={top.P}, "
                         f"{hours_text(top.hours)} device-hours ({hw(top)})")
            if more is None:
                lines.append("  no candidate meets it with up to 10,000 times the questions either")
            else:
                c = more.at_job
                n = sum(more.questions.values())
                lines.append(f"  with more questions: R={c.R}, P={c.P} meets it at {n:,} questions ("
                             + ", ".join(f"{g}={q}" for g, q in more.questions.items())
                             + f"), {hours_text(more.hours)} device-hours ("
                             + hw(Candidate(c.R, c.P, more.hours, more.half_widths))
                             + "; widths predicted from the pilot at those counts)")
        else:
            lines.append(f"  cheapest meeting {want}: R={best.R}, P={best.P}, {hours_text(best.hours)} device-hours "
                         f"({hw(best)})")
        lines.append(f"  searched R in {sorted({c.R for c in options})}, P in {sorted({c.P for c in options})}")
    return lines


def candidate_hours(job, pairs: Sequence[tuple[int, int]], **plan_kwargs) -> dict[tuple[int, int], float]:
    """Device-hours (the cost model's central value) of `job` at each (R, P) (`plan_job`'s kwargs)."""
    from ._plan import plan_job

    return {(r, p): float(plan_job(dataclasses.replace(job, R=r, P=p), **plan_kwargs).total["hours"][1])
            for r, p in pairs}
