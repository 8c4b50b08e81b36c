"""The one CSV encoder and reader: RFC-4180 fields, `\\n` line ends, and the formula guard.

Every CSV otbench writes (report tables, sweep tables, the leaderboard) is
encoded here, and every CSV it reads (a `--stops` file, a GPQA-style
benchmark file, a report's own tables) is parsed by `csv_records`. A text
cell that a spreadsheet would run as a formula (a model id such as
``=HYPERLINK(...)``, or one starting with ``+``, ``-``, ``@``, a tab or a
carriage return) is written with a leading ``'`` so it shows as text;
cells that are numbers (``-1.5``) stay numbers. Fields holding a comma, a
quote or a line break are quoted, quotes doubled.
"""

import csv
import io
from collections.abc import Callable, Iterable, Iterator, Sequence

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


def csv_records(text: str | Iterable[str],
                fail: Callable[[int, str], Exception]) -> Iterator[list[str]]:
    """The records of the CSV document `text`, as lists of cells (quoted cells may span lines).

    `text` is the whole document, or its lines (a text file opened with ``newline=""``, read as
    it goes, for a file too large to hold).

    The standard parser's refusals (a field over its 128 KiB field limit, a NUL byte, a stray
    quote) end the file with `fail(line, "not valid CSV (...)")`, `line` counting from 1: the
    caller names its file, so a malformed record is one line, never a `csv.Error` traceback.
    """
    reader = csv.reader(io.StringIO(text) if isinstance(text, str) else text)
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as e:
            raise fail(reader.line_num, f"not valid CSV ({e})") from None
        yield row
