"""Effort levels: `low=2,medium=1,high=0.5`, each a δ in accuracy points below full thinking."""

import math
import re
from collections.abc import Mapping
from fractions import Fraction

from otbench.errors import ArgumentError

DEFAULT_LEVELS = "low=2,medium=1,high=0.5"
"""The default levels (δ in accuracy points, i.e. percentage points of accuracy)."""

_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,31}")
_NUMBER = re.compile(r"[0-9]+(\.[0-9]+)?")
MAX_LEVELS = 16


def parse_levels(text: str) -> dict[str, float]:
    """`name=δ,...` -> {name: δ} in the order given; δ in accuracy points, 0 <= δ <= 100.

    A name starts with a letter (letters, digits, `_`, `-`; at most 32); δ is
    a plain decimal (`2`, `0.5`). Raises `ArgumentError` naming the item and
    the rule it breaks.
    """
    if not isinstance(text, str):
        raise ArgumentError(f"`levels` must be text like {DEFAULT_LEVELS!r}, got {text!r}")
    items = [x.strip() for x in text.split(",")]
    if not text.strip() or any(not x for x in items):
        raise ArgumentError(f"`--levels` must be comma-separated name=points items like "
                            f"{DEFAULT_LEVELS!r}, got {text!r} (an empty item)")
    out: dict[str, float] = {}
    for item in items:
        name, eq, value = (s.strip() for s in item.partition("="))
        if not eq:
            raise ArgumentError(f"`--levels` item {item!r}: expected name=points (e.g. low=2)")
        if not _NAME.fullmatch(name):
            raise ArgumentError(f"`--levels` item {item!r}: a level name starts with a letter and "
                                f"holds letters, digits, '_' or '-' (at most 32)")
        if not _NUMBER.fullmatch(value):
            raise ArgumentError(f"`--levels` item {item!r}: points must be a plain decimal >= 0 "
                                f"(accuracy points below full thinking, e.g. 0.5)")
        if name in out:
            raise ArgumentError(f"`--levels` item {item!r}: level {name!r} is given twice")
        out[name] = float(value)
    return levels_iv(out)


def levels_iv(levels: Mapping[str, float] | str) -> dict[str, float]:
    """Validate levels given as a mapping (or parse text); returns {name: δ points}."""
    if isinstance(levels, str):
        return parse_levels(levels)
    if not isinstance(levels, Mapping) or not levels:
        raise ArgumentError(f"`levels` must be a non-empty mapping name -> points, got {levels!r}")
    if len(levels) > MAX_LEVELS:
        raise ArgumentError(f"`levels`: at most {MAX_LEVELS} levels, got {len(levels)}")
    out = {}
    for name, d in levels.items():
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise ArgumentError(f"`levels`: bad level name {name!r} (a letter, then letters, digits, "
                                f"'_' or '-'; at most 32)")
        if isinstance(d, bool) or not isinstance(d, (int, float)) or not math.isfinite(d) \
                or not 0 <= d <= 100:
            raise ArgumentError(f"`levels`: level {name!r} needs points in [0, 100], got {d!r}")
        out[name] = float(d)
    return out


def delta_fraction(points: float) -> Fraction:
    """δ as an exact fraction of accuracy: the decimal written, over 100 (`0.5` -> 1/200)."""
    return Fraction(str(float(points))) / 100
