"""Typed keys of the job TOML tables: every key known, every value of its type and range.

One declarative rule table per job kind (`STP_RULES` for probe jobs,
`HORIZON_RULES` for matched-horizon jobs) names every table a job may have,
every key of each, and the rule its value must meet; `check_tables` is the
one place that refuses unknown tables and keys. The job readers
(`job_from_dict`, `horizon_job_from_dict`) then validate meaning (which
sources exist, how limits relate) and never list keys again.

What this catches is the shape a careless edit breaks: unknown tables and
keys (a misspelt `[model]` key was silently ignored), wrong types
(`kv_cache_gib = "lots"`, `max_model_len = 4096.5`), values beyond any
sensible range (`b = 99999999999999999`) and non-finite numbers
(`temperature = nan`). Messages read `TABLE.KEY must be ..., got VALUE`,
like the job's own; unknown keys list the known ones in sorted order.
"""

import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from otbench.analysis.measurement import INT32_MAX

INT64_MAX = 2**63 - 1
# A frozen artifact is named by a plain name; anything else must be a .toml file.
_PLAIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")

Rule = Callable[[Any], str | None]     # the rule a value breaks, or None


def meaning(v) -> str | None:
    """Any value: the job reader checks it, because its rule depends on other keys."""
    return None


class ArrayOf(dict):
    """The key rules of an array of tables (`[[arm]]`): each entry is checked as `TABLE[i]`."""


class MapOf:
    """A table of free names (`[closures]`): any key, each value meeting `rule`."""

    def __init__(self, rule: Rule):
        self.rule = rule


def integer(lo: int = 1, hi: int = INT32_MAX) -> Rule:
    what = "a positive integer" if lo == 1 else ("a non-negative integer" if lo == 0
                                                  else f"an integer >= {lo}")

    def check(v):
        if isinstance(v, bool) or not isinstance(v, int) or v < lo:
            return f"must be {what}, got {v!r}"
        if v > hi:
            return f"must be at most {hi}, got {v!r}"
        return None
    return check


def number(lo: float, hi: float, *, what: str) -> Rule:
    def check(v):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            return f"must be {what} (a finite number), got {v!r}"
        return None if lo <= v <= hi else f"must be {what}, got {v!r}"
    return check


def choice(*allowed: str) -> Rule:
    def check(v):
        return None if v in allowed else f"must be one of {', '.join(allowed)}, got {v!r}"
    return check


MAX_DEPTH = 16
"""Deepest nesting of tables and arrays a job may have (the deepest real one is 4:
[[data.sources]] entries with a list value); a deeper document is refused before any
code walks it recursively."""


def depth_problem(cfg: Any) -> str | None:
    """"nested deeper than MAX_DEPTH levels (at KEY.PATH)", or None (iterative walk)."""
    stack = [(cfg, 0, "")]
    while stack:
        v, d, where = stack.pop()
        if d > MAX_DEPTH:
            return f"nested deeper than {MAX_DEPTH} levels (at {where[:80] or 'the top'})"
        if isinstance(v, Mapping):
            stack.extend((x, d + 1, f"{where}.{k}" if where else str(k)) for k, x in v.items())
        elif isinstance(v, list):
            stack.extend((x, d + 1, f"{where}[{i}]") for i, x in enumerate(v))
    return None


def text(v) -> str | None:
    return None if isinstance(v, str) and v else f"must be a non-empty string, got {v!r}"


def flag(v) -> str | None:
    return None if isinstance(v, bool) else f"must be true or false, got {v!r}"


def benchmark(v) -> str | None:
    from otbench.probe.data import BENCHMARKS

    return None if v in BENCHMARKS else f"must be one of {', '.join(BENCHMARKS)}, got {v!r}"


def artifact(v) -> str | None:
    """A frozen family/model name, or a path to a `.toml` file (nothing else is opened)."""
    if isinstance(v, str) and (v.endswith(".toml") or (_PLAIN_NAME.fullmatch(v) and ".." not in v)):
        return None
    return f"must be a frozen name (letters, digits, . _ -) or a .toml file, got {v!r}"


_HUB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*")


def model_name(v) -> str | None:
    """A frozen model entry (see `artifact`) or a Hugging Face id `org/name` (no `..`, no path)."""
    if isinstance(v, str) and _HUB_ID.fullmatch(v) and ".." not in v:
        return None
    return artifact(v)


STP_RULES: dict[str, dict[str, Rule]] = {
    # model.name: a frozen entry or a Hugging Face repository id ("Org/Model"), resolved
    # through the hub cache (never a path: `path` is for local directories).
    "model": {"name": model_name, "path": text, "family": artifact, "id": text, "revision": text},
    # dtype: the three the engines load (`EngineConfig.dtype`); anything else never
    # reaches an engine (vLLM and torch look the name up).
    "engine": {"kind": text, "dtype": choice("bfloat16", "float16", "float32"),
               "max_model_len": integer(1, 1 << 24),
               "seed": integer(0, INT64_MAX), "block_size": integer(1, 1 << 16),
               "kv_cache_gib": integer(1, 1 << 20),
               "gpu_memory_utilization": number(0.0, 1.0, what="in [0, 1]"),
               "tensor_parallel_size": integer(1, 1 << 12), "enforce_eager": flag,
               "max_num_seqs": integer(1, 1 << 20), "chunked_prefill": flag,
               "revision": text, "batch_invariant": flag,
               # kind = "openai" (probe.engines._openai)
               "base_url": text, "served_model": text, "api_key_env": text,
               "max_concurrency": integer(1, 1 << 16),
               "request_timeout_s": number(0.001, 1e6, what="a positive number of seconds"),
               "retry_s": number(0.0, 1e7, what="a non-negative number of seconds")},
    # [[data.sources]] entries are checked by the job's own source rules.
    "data": {"source": text, "n": integer(), "seed": integer(0, INT64_MAX),
             "limit": integer(), "sources": lambda v: None,
             "benchmark": benchmark, "path": text},
    "probe": {"R": integer(1, 65_535), "P": integer(1, 65_535), "b": integer(),
              "thinking_limit": integer(1, 1 << 24), "answer_limit": integer(1, 1 << 24),
              "units_per_batch": integer(1, 1 << 20), "units_in_flight": integer(1, 1 << 24),
              "requests_in_flight": integer(1, 1 << 24),
              "boundary": text, "direct_answer": flag,
              "hesitation_words": lambda v: None if isinstance(v, list) and v and all(
                  isinstance(w, str) and w for w in v) else f"must be a non-empty list of words, got {v!r}"},
    "sampling": {"temperature": number(0.0, 1e6, what="a non-negative number"),
                 "top_p": number(0.0, 1.0, what="in (0, 1]"),
                 "top_k": integer(0, INT32_MAX),
                 "presence_penalty": number(-2.0, 2.0, what="in [-2, 2]")},
    "grader": {"kind": text},
    # [trajectories]: imported traces (`_imported`); which of path / hub is the job's rule.
    "trajectories": {"path": text, "hub": text, "config": text, "split": text, "revision": text,
                     "format": text, "per_question": integer(),
                     # source verdicts and prompt (`_verdicts`, `_imported`): values checked there
                     "filter": text, "metric": text, "verdicts": text, "extract": meaning, "prompt": text},
}

HORIZON_RULES: dict[str, Any] = {
    # [model], [engine], [sampling] are those of a probe job (checked again by `job_from_dict`).
    "model": STP_RULES["model"], "engine": STP_RULES["engine"], "sampling": STP_RULES["sampling"],
    "data": {"source": text, "n": meaning, "seed": integer(0, INT64_MAX), "benchmark": text,
             "path": text},
    "horizon": {k: meaning for k in (
        "replicates", "thinking_limit", "answer_limit", "horizons", "checkpoints", "contexts",
        "common_arm", "closure", "continuation", "answer_prefix", "control_arm",
        "control_horizons", "controls", "seed", "batch")},
    "arm": ArrayOf({k: meaning for k in ("name", "instruction", "effort", "script",
                                         "thinking_limit")}),
    "matched": ArrayOf({"lower": meaning, "upper": meaning}),
    "closures": MapOf(lambda v: None if isinstance(v, str) else f"must be a string, got {v!r}"),
    "stp_logit": {"set": text},
}


def check_tables(cfg: Mapping[str, Any], rules: Mapping[str, Any],
                 error: type[Exception]) -> None:
    """Raise `error(...)` at the first table or key of `cfg` that breaks `rules`.

    `rules` maps every table a job may have, in the order the message lists
    them, to its key rules: a mapping `key -> Rule`, an `ArrayOf` (an array of
    such tables) or a `MapOf` (free keys, one rule for every value). The whole
    document's nesting is bounded first (`MAX_DEPTH`).
    """
    deep = depth_problem(cfg)
    if deep is not None:
        raise error(f"the job is {deep}")
    for table in cfg:
        if table not in rules:
            raise error(f"unknown table [{table}] (expected {', '.join(rules)})")
    for table, keys in rules.items():
        if table not in cfg:
            continue
        t = cfg[table]
        if isinstance(keys, ArrayOf):
            if not isinstance(t, list) or not all(isinstance(x, Mapping) for x in t):
                raise error(f"[{table}] must be an array of tables ([[{table}]]), got {t!r}")
            for j, entry in enumerate(t):
                _check_keys(entry, keys, f"{table}[{j}]", error)
            continue
        if not isinstance(t, Mapping):
            raise error(f"[{table}] must be a table, got {t!r}")
        if isinstance(keys, MapOf):
            for key, value in t.items():
                why = keys.rule(value)
                if why is not None:
                    raise error(f"{table}.{key} {why}")
            continue
        _check_keys(t, keys, table, error)


def _check_keys(t: Mapping[str, Any], keys: Mapping[str, Rule], where: str,
                error: type[Exception]) -> None:
    for key, value in t.items():
        rule = keys.get(key)
        if rule is None:
            raise error(f"unknown key {where}.{key} (expected one of {', '.join(sorted(keys))})")
        why = rule(value)
        if why is not None:
            raise error(f"{where}.{key} {why}")
