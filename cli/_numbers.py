"""The number types of every numeric option: ASCII digits, a bounded length, finite values.

click's `int` and `float` take what Python's `int()` and `float()` take: full-width and other
Unicode digits (``１２`` is 12), `_` separators, integers of any length (a 400-digit
`--replicates` overflowed a float deep inside a command, a traceback), and for floats `inf`,
`nan` and numbers past float64 (``9`` * 400 is `inf`, silently). `Count` and `Real` accept
ASCII numbers of a bounded size only, and `counts` / `reals` parse comma-separated lists the
same way, so a bad value is click's one-line usage error naming the option, exit 2.
"""

import math

import click

DIGITS = 18
"""Digits an integer option may have: every value below 10**18 fits the int64 it lands in."""
SEED_MAX = 2**64 - 1
"""The largest seed (the random streams take 64-bit seeds)."""
SEED_DIGITS = len(str(SEED_MAX))


def _shown(text: str) -> str:
    return repr(text) if len(text) <= 24 else f"{text[:20]!r}... ({len(text)} characters)"


def count_error(text: str, digits: int = DIGITS) -> str | None:
    """Why `text` is not an integer written with at most `digits` ASCII digits (None: it is)."""
    t = text.strip()
    body = t[1:] if t[:1] in "+-" else t
    # `str.isdigit` alone accepts "²" and full-width digits; `int()` reads the latter
    if not (body.isascii() and body.isdigit()):
        return f"{_shown(text)} is not an integer (ASCII digits 0-9)"
    n = len(body.lstrip("0"))
    if n > digits:
        return f"{_shown(text)} has {n} digits; at most {digits} are accepted"
    return None


_SPELLED = {"inf", "infinity", "nan"}


def real_error(text: str, *, spelled: bool = False) -> str | None:
    """Why `text` is not a finite number written in ASCII (None: it is).

    With `spelled`, ``inf`` and ``nan`` written out pass (the caller's rule decides: an FB
    method's θ = inf is "no cap"); a number that only overflows to inf never does.
    """
    t = text.strip()
    if spelled and t.lower().lstrip("+-") in _SPELLED:
        return None
    if not t.isascii() or "_" in t:
        return f"{_shown(text)} is not a number (ASCII digits 0-9)"
    try:
        x = float(t)
    except ValueError:
        return f"{_shown(text)} is not a number"
    if not math.isfinite(x):        # "inf", "nan", or a number past float64 read as inf
        return f"{_shown(text)} is not a finite number (beyond float64, or inf / nan)"
    return None


class _Bounds:
    """Help text of a range type without bounds: click's `IntRange` / `FloatRange` describe
    `min=None, max=None` as `x<=None` and name the type `INTEGER RANGE`; unbounded, the option
    reads `INTEGER` / `FLOAT` with no range, as click's plain `int` and `float` do."""

    def _describe_range(self) -> str:
        if self.min is None and self.max is None:
            return ""
        return super()._describe_range()

    def _unbounded_name(self, name: str) -> None:
        if self.min is None and self.max is None:
            self.name = name


class Count(_Bounds, click.IntRange):
    """click's `IntRange` (no bounds: `int`), of ASCII digits only and at most `digits` of them."""

    def __init__(self, min: int | None = None, max: int | None = None, *, digits: int = DIGITS,
                 **kw) -> None:
        super().__init__(min, max, **kw)
        self.digits = digits
        self._unbounded_name("integer")

    def convert(self, value, param, ctx):
        if isinstance(value, str):
            why = count_error(value, self.digits)
            if why is not None:
                self.fail(why, param, ctx)
        return super().convert(value, param, ctx)


class Real(_Bounds, click.FloatRange):
    """click's `FloatRange` (no bounds: `float`), of ASCII text and finite values only
    (`spelled`: ``inf`` / ``nan`` written out pass, as `real_error`)."""

    def __init__(self, min: float | None = None, max: float | None = None, *,
                 spelled: bool = False, **kw) -> None:
        super().__init__(min, max, **kw)
        self.spelled = spelled
        self._unbounded_name("float")

    def convert(self, value, param, ctx):
        if isinstance(value, str):
            why = real_error(value, spelled=self.spelled)
            if why is not None:
                self.fail(why, param, ctx)
        x = super().convert(value, param, ctx)
        if not (self.spelled or math.isfinite(x)):
            self.fail(f"{x} is not a finite number", param, ctx)
        return x


def Seed() -> Count:  # noqa: N802  (a type, written like the others)
    """A seed: 0 .. 2**64 - 1."""
    return Count(min=0, max=SEED_MAX, digits=SEED_DIGITS)


def counts(text: str, hint: str, *, digits: int = DIGITS) -> list[int]:
    """Comma-separated integers (empty items skipped), each as `Count` reads one; a bad item is
    `click.BadParameter` naming `hint` (the option, e.g. "'--horizons'") and the item."""
    out = []
    for item in text.split(","):
        if not item.strip():
            continue
        why = count_error(item, digits)
        if why is not None:
            raise click.BadParameter(
                f"expected comma-separated integers, got {_shown(text)} ({why})", param_hint=hint)
        out.append(int(item))
    return out


def reals(text: str, hint: str, *, spelled: bool = False) -> list[float]:
    """Comma-separated finite numbers (empty items skipped), each as `Real` reads one
    (`spelled`: as `real_error`)."""
    out = []
    for item in text.split(","):
        if not item.strip():
            continue
        why = real_error(item, spelled=spelled)
        if why is not None:
            raise click.BadParameter(
                f"expected comma-separated numbers, got {_shown(text)} ({why})", param_hint=hint)
        out.append(float(item))
    return out
