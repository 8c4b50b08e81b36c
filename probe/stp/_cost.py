"""What a probe run cost: tokens, requests and engine-seconds per phase and benchmark group.

`cost_record` turns the loop's counters (`_loop.RunStats`) into the `cost`
block of `run.json`; `cost_rows` lays it out as the table `otbench probe
run` prints and the report shows. Engine-seconds are each phase's and
group's share of the time the engine was being stepped (`PhaseStats`), so
they add up to the run's busy engine time; with several workers they add up
across workers (device-seconds, not wall time).
"""

import sys
from typing import Any

from ._results import PHASES, PhaseStats, RunStats

COST_FIELDS = ("requests", "prompt_tokens", "cached_prompt_tokens", "decoded_tokens", "engine_seconds")
"""The counters of every cost entry, in table order."""


def _entry(p: PhaseStats) -> dict[str, Any]:
    return {"requests": p.requests, "prompt_tokens": p.prompt_tokens,
            "cached_prompt_tokens": p.cached_prompt_tokens, "decoded_tokens": p.generated,
            "engine_seconds": p.engine_seconds}


def _sum(entries) -> dict[str, Any]:
    out = dict.fromkeys(COST_FIELDS, 0)
    for e in entries:
        for k in COST_FIELDS:
            out[k] += e[k]
    return out


def device_label(info: dict[str, Any]) -> str:
    """The engine's device: its kind ("cuda", "cpu", ...) and, on a GPU this process sees, its name.

    Only a torch the engine already imported is asked (never imported here).
    """
    device = str(info.get("device", "unknown"))
    torch = sys.modules.get("torch")
    if device.startswith("cuda") and torch is not None:
        try:
            if torch.cuda.is_available():
                return f"{device} ({torch.cuda.get_device_name(0)})"
        except Exception:           # a driver that cannot be asked: the kind alone is still true
            pass
    return device


def cost_record(stats: RunStats, info: dict[str, Any], *, workers: int = 1) -> dict[str, Any]:
    """The `cost` block of `run.json`: per phase, per benchmark group (per phase and total), total.

    Every entry has `COST_FIELDS`; `device` is the engine's (`device_label`),
    `engine` its name, `workers` how many engines ran.
    """
    phases = {p: _entry(getattr(stats, p)) for p in PHASES}
    benchmarks = {}
    for bench in sorted(stats.benchmarks):
        per = {p: _entry(stats.benchmarks[bench][p]) for p in PHASES}
        benchmarks[bench] = {**per, "total": _sum(per.values())}
    return {"engine": info.get("engine"), "device": device_label(info), "workers": workers,
            "phases": phases, "benchmarks": benchmarks, "total": _sum(phases.values())}


def cost_rows(cost: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """(benchmark group, phase, entry) rows of a `cost` block: each group's phases and total, then
    the run's phases and total (group "all")."""
    rows = []
    for bench, per in cost["benchmarks"].items():
        rows.extend((bench, p, per[p]) for p in (*PHASES, "total"))
    rows.extend(("all", p, cost["phases"][p]) for p in PHASES)
    rows.append(("all", "total", cost["total"]))
    return rows


def cost_text(cost: dict[str, Any]) -> list[str]:
    """The cost table as plain lines (what `otbench probe run` prints at the end)."""
    head = (f"{'group':<16} {'phase':<7} {'requests':>10} {'prompt tok':>13} {'cached':>7} "
            f"{'decoded tok':>13} {'engine s':>10}")
    lines = [f"cost on {cost['device']} ({cost['engine']}, {cost['workers']} worker"
             f"{'s' if cost['workers'] != 1 else ''}):", head]
    for bench, phase, e in cost_rows(cost):
        cached = (f"{100 * e['cached_prompt_tokens'] / e['prompt_tokens']:.0f}%"
                  if e["prompt_tokens"] else "-")
        lines.append(f"{bench:<16} {phase:<7} {e['requests']:>10,} {e['prompt_tokens']:>13,} {cached:>7} "
                     f"{e['decoded_tokens']:>13,} {e['engine_seconds']:>10.1f}")
    return lines
