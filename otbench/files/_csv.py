"""The one CSV encoder: RFC-4180 fields, `\\n` line ends, and the formula guard.

Every CSV otbench writes (report tables, sweep tables, the leaderboard) is
encoded here. A text cell that a spreadsheet would run as a formula (a model
id such as ``=HYPERLINK(...)``, or one starting with ``+``, ``-``, ``@``, a
tab or a carriage return) is written with a leading ``'`` so it shows as
text; cells that are numbers (``-1.5``) stay numbers. Fields holding a comma,
a quote or a line break are quoted, quotes doubled.
"""

from collections.abc import Iterable, Sequence

_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _is_number(s: str) -> bool:
    try:
        float(s)
    except ValueError:
        return False
    return True


def csv_field(value: object) -> str:
    """One encoded field: None is empty, numbers as `str()`, text guarded and quoted."""
    if value is None:
        return ""
    s = value if isinstance(value, str) else str(value)
    if s[:1] in _FORMULA_START and isinstance(value, str) and not _is_number(s):
        s = "'" + s
    if any(ch in s for ch in ',"\n\r'):
        return '"' + s.replace('"', '""') + '"'
    return s


def csv_text(header: Sequence[object], rows: Iterable[Sequence[object]], *,
             comment: str | None = None) -> str:
    """A whole CSV document; `comment` becomes a leading ``# ...`` line (read it with
    ``pandas.read_csv(path, comment="#")``)."""
    lines = [f"# {comment}"] if comment is not None else []
    lines.append(",".join(csv_field(h) for h in header))
    lines += [",".join(csv_field(c) for c in r) for r in rows]
    return "\n".join(lines) + "\n"
