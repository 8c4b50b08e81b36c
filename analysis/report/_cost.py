"""The report's cost section: what the probe run that wrote the set spent.

Input: the `cost` block of ``DIR/run.json``, written by `otbench probe run`
beside the measurement set (per benchmark group and phase: requests, prompt
tokens, cached prompt tokens, decoded tokens, engine-seconds; the engine's
device). A set without one (simulated, imported, or from an older version)
gets no section; a `run.json` that is not JSON or has a malformed block gets
a note, never a table.
"""

from pathlib import Path
from typing import Any

from otbench.errors import OtbenchError
from otbench.files import read_json

from . import _tables as tabs
from ._html import Section

RUN_FILE = "run.json"
FIELDS = ("requests", "prompt_tokens", "cached_prompt_tokens", "decoded_tokens", "engine_seconds")
HEADER = ("Group", "Phase", "Requests", "Prompt tokens", "Cached (%)", "Decoded tokens", "Engine hours")
CSV_HEADER = ("group", "phase", "requests (count)", "prompt_tokens (tokens)", "cached_prompt_tokens (tokens)",
              "decoded_tokens (tokens)", "engine_seconds (s)")


def read_cost(set_dir: Path | None) -> tuple[dict | None, str | None]:
    """(cost block, note): the cost of the run beside the set, or why there is none to show."""
    if set_dir is None or not (Path(set_dir) / RUN_FILE).is_file():
        return None, None
    try:
        run = read_json(Path(set_dir) / RUN_FILE)
    except OtbenchError as e:
        return None, f"{RUN_FILE}: {e}; cost skipped."
    cost = run.get("cost") if isinstance(run, dict) else None
    if cost is None:
        return None, None
    ok = (isinstance(cost, dict) and isinstance(cost.get("benchmarks"), dict)
          and isinstance(cost.get("phases"), dict) and isinstance(cost.get("total"), dict)
          and all(_entry_ok(e) for per in cost["benchmarks"].values() if isinstance(per, dict)
                  for e in per.values())
          and all(isinstance(per, dict) for per in cost["benchmarks"].values())
          and all(_entry_ok(e) for e in (*cost["phases"].values(), cost["total"])))
    if not ok:
        return None, f"{RUN_FILE}: the cost block is not the probe's layout; cost skipped."
    return cost, None


def _entry_ok(e: Any) -> bool:
    return isinstance(e, dict) and all(isinstance(e.get(k), (int, float)) and not isinstance(e.get(k), bool)
                                       and e[k] >= 0 for k in FIELDS)


def _rows(cost: dict[str, Any]):
    for bench, per in cost["benchmarks"].items():
        for phase, e in per.items():
            yield bench, phase, e
    for phase, e in cost["phases"].items():
        yield "all", phase, e
    yield "all", "total", cost["total"]


def cost_table(cost: dict[str, Any]) -> tabs.Table:
    rows, csv_rows = [], []
    for bench, phase, e in _rows(cost):
        cached = (f"{100 * e['cached_prompt_tokens'] / e['prompt_tokens']:.1f}"
                  if e["prompt_tokens"] else "–")
        rows.append(tuple(tabs.Cell(c) for c in (
            bench, phase, f"{e['requests']:,}", f"{e['prompt_tokens']:,}", cached,
            f"{e['decoded_tokens']:,}", f"{e['engine_seconds'] / 3600:.3f}")))
        csv_rows.append((bench, phase, *(str(e[k]) for k in FIELDS)))
    workers = cost.get("workers", 1)
    return tabs.Table(
        name="cost", title="Probe cost",
        caption=f"What the probe run spent per benchmark group and phase (think: trajectories; probe: "
                f"answer probes and forced answers; signal: ThinkBrake reads) on {cost.get('device')} "
                f"({cost.get('engine')}, {workers} engine{'s' if workers != 1 else ''}); engine hours: "
                f"each phase's share of the engine's stepping time, summed over engines.",
        header=HEADER, rows=tuple(rows), csv_header=CSV_HEADER, csv_rows=tuple(csv_rows),
        rule_before_last=True)


def cost_sections(ctx, set_dir: Path | None) -> list[Section]:
    """The cost section when the set's `run.json` has a cost block; no section otherwise."""
    cost, note = read_cost(set_dir)
    if cost is None and note is None:
        return []
    sec = Section("cost", "Probe cost", "Tokens, requests and engine time the probe run spent, from the "
                  "run's own accounting (run.json beside the set).")
    if cost is None:
        ctx.missing(sec, note)
    else:
        sec.table(ctx.table(cost_table(cost)))
    return [sec]
