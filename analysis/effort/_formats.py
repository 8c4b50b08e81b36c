"""Writers of an effort map: otbench's document, a per-request vLLM budget table, a flat CSV.

vLLM (release 0.32.0) takes a thinking budget per request:
`SamplingParams.thinking_token_budget` (`vllm/sampling_params.py` line 424,
"Maximum number of tokens allowed for thinking operations"), validated as a
non-negative integer or -1 for unlimited (`validate_thinking_token_budget`,
lines 62-82, where -1 becomes None), and the same field in the body of an
OpenAI-compatible request (`entrypoints/openai/chat_completion/protocol.py`
line 265; `completion/protocol.py` line 268). The engine needs a
`ReasoningConfig` for the budget to act (docs/guides/online.md). Released
vLLM has no map from effort levels to budgets: its `reasoning_effort`
(`chat_completion/protocol.py` lines 252-264) is handed to the chat template
(line 630), not turned into a budget, so no engine effort-map format is
written here (docs/guides/effort.md).
"""

from typing import Any

from otbench.files import csv_text, dumps_indented

from ._effort import EffortMap

FORMATS = ("json", "vllm-budgets", "csv")
VLLM_SOURCE = ("vLLM 0.32.0 vllm/sampling_params.py line 424 (SamplingParams.thinking_token_budget; "
               "-1 = unlimited, lines 62-82); request body field: "
               "vllm/entrypoints/openai/chat_completion/protocol.py line 265")
UNLIMITED = -1
"""vLLM's unlimited budget: what a level gets where no cap meets its δ."""


def vllm_budgets(em: EffortMap) -> dict[str, Any]:
    """{model: {group: {level: {"thinking_token_budget": int}}}}: merge into a request's params."""
    table: dict[str, dict[str, dict[str, dict[str, int]]]] = {}
    for c in em.cells:
        per = table.setdefault(c.model, {}).setdefault(c.group, {})
        for x in c.levels:
            per[x.level] = {"thinking_token_budget": UNLIMITED if x.budget is None else int(x.budget)}
    return {"schema": "otbench.effort.vllm-budgets/1", "synthetic": em.synthetic,
            "field": "thinking_token_budget", "source": VLLM_SOURCE,
            "unlimited": f"{UNLIMITED}: no cap below full thinking is within the level's delta",
            "levels": {k: {"delta_points": v} for k, v in em.levels.items()},
            "content_hash": em.content_hash, "seed": em.seed, "replicates": em.replicates,
            "confidence": em.confidence, "requests": table}


def csv_rows(em: EffortMap) -> tuple[list[str], list[list[Any]]]:
    head = ["model", "group", "level", "delta_points", "budget", "budget_lo", "budget_hi",
            "accuracy", "accuracy_lo", "accuracy_hi", "full_accuracy", "relative_cost", "oracle_fb"]
    rows = []
    for c in em.cells:
        for x in c.levels:
            ab = x.at_budget or {}
            acc_iv = ab.get("accuracy_interval", (None, None))
            rows.append([c.model, c.group, x.level, x.delta, x.budget, *x.budget_interval,
                         ab.get("accuracy"), *acc_iv, c.full_accuracy, ab.get("relative_cost"),
                         x.oracle_fb])
    return head, rows


def render(em: EffortMap, fmt: str = "json") -> str:
    """The text of one output format (`FORMATS`)."""
    if fmt == "json":
        return dumps_indented(em.to_json()) + "\n"
    if fmt == "vllm-budgets":
        return dumps_indented(vllm_budgets(em)) + "\n"
    if fmt == "csv":
        head, rows = csv_rows(em)
        note = ["# SYNTHETIC DATA (simulated, not model outputs)"] if em.synthetic else []
        return "\n".join(note) + ("\n" if note else "") + csv_text(head, rows)
    from otbench.errors import ArgumentError
    raise ArgumentError(f"`format` must be one of {', '.join(FORMATS)}, got {fmt!r}")


def format_effort(em: EffortMap) -> str:
    """A short table for the terminal: per cell, each level's budget and its interval."""
    lines = ["SYNTHETIC DATA (simulated, not model outputs)"] if em.synthetic else []
    lines.append(f"effort levels ({', '.join(f'{k}={v:g}' for k, v in em.levels.items())} points), "
                 f"{em.replicates} replicates, seed {em.seed}, {100 * em.confidence:g}% intervals; "
                 f"budget: certified by its interval; point: the rule on the data, [its interval]")
    for c in em.cells:
        lines.append(f"{c.model} / {c.group}: full thinking {100 * c.full_accuracy:.1f}%, "
                     f"{c.full_tokens:.0f} tokens")
        for x in c.levels:
            if x.budget is None:
                lines.append(f"  {x.level:8s} no budget meets delta {x.delta:g}")
                continue
            ab = x.at_budget
            lo, hi = ("none" if v is None else f"{v:.0f}" for v in x.budget_interval)
            pt = "none" if x.point_budget is None else f"{x.point_budget}"
            lines.append(f"  {x.level:8s} {x.budget:>7d} tokens  accuracy {100 * ab['accuracy']:.1f}%"
                         f"  cost {100 * (ab['relative_cost'] or 0):.0f}%  (point {pt} [{lo}, {hi}]"
                         + (f"; {x.budget_flag})" if x.budget_flag else ")"))
    return "\n".join(lines) + "\n"
