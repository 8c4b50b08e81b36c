"""The engine cap's strings: what `online certify --method engine-budget` gives vLLM's `ReasoningConfig`.

The start string decides where the engine starts counting, and the two model
runners count from different places (`_count`): V1 from the start string's
last occurrence in the prompt, V2 from its last occurrence anywhere. So the
default start depends on the runner: the prompts' last token under V1 (counted
exactly when it is one token), under V2 the family's reasoning start marker
(``<think>\\n``) or the shortest common prompt suffix that never recurs in the
stored thinking. The end string defaults to otbench's own close at a cut.
"""

import dataclasses
from collections.abc import Sequence
from typing import Any

from .._processor._control import Tables
from .._request import OnlineControlError
from ._count import RUNNERS, first_index, last_index

PARSERS = {"deepseek-r1-distill": "deepseek_r1", "qwen3-thinking": "qwen3"}
"""vLLM reasoning parsers whose end string is the family's own thinking end (`</think>`): with
one, the model's own close ends the cap's thinking section; without, only the end string does."""

@dataclasses.dataclass(frozen=True)
class CapStrings:
    """The cap's configuration: strings as the engine is given them, ids as it tokenizes them.

    `natural_end_ids`: what ends a thinking section for Model Runner V2 (the parser's end string,
    else the end string itself; `config/reasoning.py` `initialize_token_ids`). `runner`: the model
    runner the strings were chosen for; `start_reason`: how a default start was chosen."""

    start: str
    end: str
    parser: str
    start_ids: tuple[int, ...]
    end_ids: tuple[int, ...]
    natural_end_ids: tuple[int, ...] = ()
    runner: str = "v1"
    start_reason: str = "given"

    def forced_ids(self) -> tuple[int, ...]:
        """The ids the runner forces at a cut: under V2 with a parser whose end marker lies inside the
        end string, the end string up to that marker (forcing stops there); else all of it."""
        if self.runner == "v2" and self.parser and self.natural_end_ids:
            at = first_index(self.end_ids, self.natural_end_ids)
            if at >= 0:
                return self.end_ids[:at + len(self.natural_end_ids)]
        return self.end_ids

    def as_dict(self) -> dict[str, Any]:
        return {"reasoning_start_str": self.start, "reasoning_end_str": self.end,
                "reasoning_parser": self.parser, "start_ids": list(self.start_ids),
                "end_ids": list(self.end_ids), "natural_end_ids": list(self.natural_end_ids),
                "forced_ids": list(self.forced_ids()), "runner": self.runner,
                "start_reason": self.start_reason}


MAX_START_TOKENS = 16
"""The longest common prompt suffix tried as a V2 start string."""


def reasoning_marker(assistant: str, thinking_end: str) -> str:
    """The family's reasoning start marker: its generation prompt from the opening counterpart of its
    thinking end (``</think>`` -> ``<think>``) on, e.g. ``<think>\\n``; "" where there is none."""
    if not thinking_end.startswith("</"):
        return ""
    at = assistant.rfind("<" + thinking_end[2:])
    return assistant[at:] if at >= 0 else ""


def _v2_start(ids, tok, prompts: Sequence[Sequence[int]], thinkings: Sequence[Sequence[int]],
              marker: str) -> tuple[str, str]:
    """A start string V2 counts from the prompt's end: the family's marker when every prompt ends
    with it and it never recurs in the stored thinking, else the shortest such common suffix."""
    def clean(sub: tuple[int, ...]) -> bool:
        m = len(sub)
        return all(tuple(p[-m:]) == sub for p in prompts) and not any(
            last_index(list(p[-m + 1:] if m > 1 else []) + list(t), sub) >= 0
            for p, t in zip(prompts, thinkings))

    if marker:
        mids = ids(marker)
        if mids and clean(mids):
            return marker, "the family's reasoning start marker, which ends every prompt"
    shortest = min((len(p) for p in prompts), default=0)
    for m in range(1, min(MAX_START_TOKENS, shortest) + 1):
        sub = tuple(int(x) for x in prompts[0][-m:])
        text = tok.decode(list(sub))
        if ids(text) == sub and clean(sub):
            return text, f"the shortest common suffix of the prompts ({m} tokens) absent from the stored thinking"
    raise OnlineControlError("--method engine-budget: Model Runner V2 counts the budget from the last "
                             "occurrence of the start string, and no common suffix of the prompts of at most "
                             f"{MAX_START_TOKENS} tokens stays out of the stored thinking; give the cap's "
                             "start string (--reasoning-start)")


def cap_strings(tok: Any, tables: Tables, family: str, prompts: Sequence[Sequence[int]], *,
                start: str | None = None, end: str | None = None, runner: str = "v1",
                marker: str = "", thinkings: Sequence[Sequence[int]] = (),
                natural_end: str = "") -> CapStrings:
    """The start and end strings of the cap (module docstring), checked; refused in one line.

    `runner`: the model runner the cap will run on (the default start differs, `_count`);
    `marker`: the family's reasoning start marker (`reasoning_marker`); `thinkings`: the stored
    thinking of each prompt's trajectory; `natural_end`: the parser's end string ("": none)."""
    def ids(text: str) -> tuple[int, ...]:
        return tuple(int(i) for i in tok.encode(text, add_special_tokens=False))

    if runner not in RUNNERS:
        raise OnlineControlError(f"--method engine-budget: the model runner is one of {', '.join(RUNNERS)}, "
                                 f"got {runner!r}")
    reason = "given"
    if start is None and runner == "v2":
        start, reason = _v2_start(ids, tok, prompts, list(thinkings) or [()] * len(prompts), marker)
    elif start is None:
        last = {int(p[-1]) for p in prompts if len(p)}
        if len(last) != 1 or any(not len(p) for p in prompts):
            raise OnlineControlError("--method engine-budget: the replayed prompts do not end in one "
                                     "common token; give the cap's start string (--reasoning-start)")
        (tid,) = last
        start = tok.decode([tid])
        if ids(start) != (tid,):
            raise OnlineControlError(f"--method engine-budget: the prompts' last token {tid} does not "
                                     f"encode back to itself alone ({start!r}); give the cap's start "
                                     "string (--reasoning-start)")
        reason = "the prompts' last token"
    if end is None:
        end = tok.decode(list(tables.forced(None)))
    s_ids, e_ids = ids(start), ids(end)
    if not s_ids or not e_ids:
        raise OnlineControlError(f"--method engine-budget: the cap's start {start!r} and end {end!r} "
                                 "strings must each encode to at least one token")
    parser = PARSERS.get(family, "")
    n_ids = ids(natural_end) if parser and natural_end else e_ids
    return CapStrings(start, end, parser, s_ids, e_ids, n_ids or e_ids, runner, reason)
