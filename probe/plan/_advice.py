"""What a plan tells its reader to do: the lines `otbench plan` prints after its table.

* **Answer probes dominate.** Each position's P forced answers decode up to the answer limit
  each; on long-thinking models they are nearly all of a run's device-hours (the paper's design
  on Qwen3-4B: over 99 %). When they are at least `DOMINANT` of the central estimate, the
  plan says so and prices the two levers by re-planning the job with each changed: P halved
  (the probe count; `--pilot` with `--target` finds the smallest P the intervals allow) and
  the answer limit halved (only when that saves at least 1 %: answers shorter than the limit
  do not shrink).
* **A Hub source without a pinned revision.** A `[data]` source read from the Hub at a branch
  (`main` by default) can change between the plan and the run, and between two runs; the
  plan warns once, naming the sources, and says how to pin one.
"""

import dataclasses
import re
from collections.abc import Callable, Mapping
from typing import Any

DOMINANT = 0.8
"""Share of the central device-hours from the answer-probe phase above which the plan advises."""
COMMIT = re.compile(r"[0-9a-f]{40}")
"""A Hub revision that names one commit (a branch or tag can move)."""


def hours_text(h: float) -> str:
    """Device-hours as plain text: three significant digits, thousands separated, no exponent
    (`1,410`, `53.7`, `0.0549`); under 0.0001 h (a third of a second) `<0.0001`."""
    if h != h or h < 0:                       # NaN or negative: shown as they are
        return f"{h}"
    if h == 0:
        return "0"
    if h < 1e-4:
        return "<0.0001"
    digits = max(0, 2 - _magnitude(h))
    return f"{h:,.{digits}f}"


def _magnitude(x: float) -> int:
    """floor(log10(x)) of x > 0, read off its rounded scientific form (so 999.7 counts as 1,000)."""
    return int(f"{x:.2e}".split("e")[1])


def unpinned_sources(data: Mapping[str, Any]) -> list[str]:
    """The Hub ids of the job's `[data]` sources read at no pinned commit (missing revision, or a
    branch or tag name)."""
    sources = data.get("sources") if isinstance(data.get("sources"), list) else [data]
    return [str(s["hub"]) for s in sources if isinstance(s, Mapping) and s.get("hub")
            and not COMMIT.fullmatch(str(s.get("revision") or ""))]


def plan_advice(job, plan, replan: Callable[[Any], Any]) -> list[str]:
    """The advice and warning lines of `plan` (of `job`); `replan(changed_job)` plans a changed
    job with the same pilot, device and question counts, to price each lever."""
    lines = []
    hub = unpinned_sources(job.data)
    if hub:
        lines.append(f"warning: [data] reads {', '.join(hub)} from the Hub at no pinned revision: the questions can "
                     "change between this plan and the run; pin revision = \"<commit>\" in each source")
    total = plan.total["hours"][1]
    probe = plan.total["hours_by_phase"]["probe"]
    if total <= 0 or probe < DOMINANT * total:
        return lines
    levers = []
    if job.P > 1:
        p = max(1, job.P // 2)
        at_p = replan(dataclasses.replace(job, P=p)).total["hours"][1]
        levers.append(f"P {job.P} -> {p}: {hours_text(at_p)} device-hours")
    limit = max(1, job.answer_limit // 2)
    at_limit = replan(dataclasses.replace(job, answer_limit=limit)).total["hours"][1]
    lever = f"answer limit {job.answer_limit:,} -> {limit:,}: {hours_text(at_limit)} device-hours"
    if at_limit >= 0.99 * total:
        answers = sum(v["answers"] for v in plan.groups.values())
        mean = sum(v["answers"] * v["lengths"]["answer"] for v in plan.groups.values()) / max(answers, 1)
        lever += f" (answers average {mean:,.0f} tokens, so a lower limit cuts few)"
    levers.append(lever)
    lines.append(f"advice: answer probes take {hours_text(probe)} of {hours_text(total)} device-hours "
                 f"({100 * probe / total:.1f} %); lower P or the answer limit: " + "; ".join(levers)
                 + ("; fewer probes widen the intervals (--pilot SET --target finds the cheapest R and P "
                    "that meet yours)" if job.P > 1 else ""))
    return lines
