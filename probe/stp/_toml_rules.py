"""Typed keys of the job TOML tables: every key known, every value of its type and range.

The rules a key's value must meet (each with ``rule.text``, what it
accepts, in words) and `check_tables`, the one place that refuses unknown
tables and keys. The tables themselves -- every table a job kind may have,
every key, its rule, default and meaning -- are the key tables of
`_job_keys` (`STP_RULES` / `HORIZON_RULES` are their rules). The job readers
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


def described(text: str):
    """Attach what a rule accepts (`rule.text`, read by the key table's `describe`) to `fn`."""
    def wrap(fn):
        fn.text = text
        return fn
    return wrap


@described("checked by the job reader (it depends on other keys)")
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

    @described(f"{what}, at most {hi}")
    def check(v):
        if isinstance(v, bool) or not isinstance(v, int) or v < lo:
            return f"must be {what}, got {v!r}"
        if v > hi:
            return f"must be at most {hi}, got {v!r}"
        return None
    return check


def number(lo: float, hi: float, *, what: str) -> Rule:
    @described(f"{what} (a finite number)")
    def check(v):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            return f"must be {what} (a finite number), got {v!r}"
        return None if lo <= v <= hi else f"must be {what}, got {v!r}"
    return check


def choice(*allowed: str) -> Rule:
    @described(f"one of {', '.join(allowed)}")
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


@described("a non-empty string")
def text(v) -> str | None:
    return None if isinstance(v, str) and v else f"must be a non-empty string, got {v!r}"


@described("true or false")
def flag(v) -> str | None:
    return None if isinstance(v, bool) else f"must be true or false, got {v!r}"


@described("a built-in benchmark schema (see the probe guide)")
def benchmark(v) -> str | None:
    from otbench.descriptors import file_benchmarks

    names = file_benchmarks()
    return None if v in names else f"must be one of {', '.join(names)}, got {v!r}"


@described("a frozen name (letters, digits, . _ -) or a .toml file")
def artifact(v) -> str | None:
    """A frozen family/model name, or a path to a `.toml` file (nothing else is opened)."""
    if isinstance(v, str) and (v.endswith(".toml") or (_PLAIN_NAME.fullmatch(v) and ".." not in v)):
        return None
    return f"must be a frozen name (letters, digits, . _ -) or a .toml file, got {v!r}"


_HUB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*")


@described("a frozen model entry or a Hugging Face id org/name")
def model_name(v) -> str | None:
    """A frozen model entry (see `artifact`) or a Hugging Face id `org/name` (no `..`, no path)."""
    if isinstance(v, str) and _HUB_ID.fullmatch(v) and ".." not in v:
        return None
    return artifact(v)


@described("a list of tables, each checked by the job's source rules")
def sources(v) -> str | None:
    return None


@described("a non-empty list of words")
def words(v) -> str | None:
    return None if isinstance(v, list) and v and all(isinstance(w, str) and w for w in v) \
        else f"must be a non-empty list of words, got {v!r}"


@described("a list of field-method names")
def field_probes(v) -> str | None:
    return None if isinstance(v, list) and all(isinstance(w, str) for w in v) \
        else f"must be a list of method names, got {v!r}"


@described("a string")
def string(v) -> str | None:
    return None if isinstance(v, str) else f"must be a string, got {v!r}"


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
