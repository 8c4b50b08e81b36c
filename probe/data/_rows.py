"""Reading benchmark rows: JSONL, JSON, CSV and Parquet files and saved datasets, guarded.

Every row comes with its location (`file:line` or `file row N`) so a bad row
is refused in one line naming it; text fields are checked for what later
becomes a silent error (NUL, a byte-order mark inside the data).
"""

import io
import os
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from otbench.errors import OtbenchError
from otbench.files import arrow_file, bounded_lines, csv_records, loads_json, open_regular


MAX_LINE = 64 << 20
"""Longest JSONL line (bytes) of a benchmark file, as the set import bounds its lines: a question is
kilobytes, so a longer line is not a row (a binary file, a stream without line breaks) and reading
it whole could exhaust memory."""


class DatasetError(OtbenchError, ValueError):
    """A benchmark file (or hub row) that breaks its schema: message `FILE:LINE: rule`."""


def _rows(path: str) -> Iterator[tuple[str, Any]]:
    """(location, row) for each record of a JSONL, Parquet or CSV file.

    JSONL lines go through the one guarded JSON reader (duplicate keys, deep
    nesting, lone surrogates and out-of-range numbers are refused); text
    holding NUL or a byte-order mark past the file's start is refused; a file
    without a single record is refused (an empty benchmark is a wrong path,
    never zero questions).
    """
    n = 0
    for loc, row in _raw_rows(path):
        _clean_text(row, loc)
        n += 1
        yield loc, row
    if n == 0:
        raise DatasetError(f"{os.fspath(path)}: no records (an empty benchmark file)")


def _clean_text(row: Any, loc: str) -> None:
    """Refuse NUL and U+FEFF (a byte-order mark inside the data) in a row's strings."""
    stack = [row]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            for ch, name in (("\x00", "NUL (U+0000)"), ("\ufeff", "a byte-order mark (U+FEFF)")):
                if ch in v:
                    raise DatasetError(f"{loc}: text holds {name}; not a clean text file")
        elif isinstance(v, Mapping):
            stack.extend(v.keys())
            stack.extend(v.values())
        elif isinstance(v, (list, tuple)):
            stack.extend(v)


def _open(path: str):
    """The benchmark file at `path` for reading; a FIFO or device is one line, not a hang."""
    return open_regular(path, what="a benchmark file",
                        fail=lambda why: DatasetError(f"{path}: {why}"))


def _raw_rows(path: str) -> Iterator[tuple[str, Any]]:
    path = os.fspath(path)
    if path.endswith(".parquet"):
        import pyarrow.parquet as pq

        with _open(path) as f:      # pyarrow reads the descriptor that was checked
            try:
                with arrow_file(f) as src:
                    rows = pq.read_table(src).to_pylist()
            except Exception as e:  # pyarrow raises several types for a corrupt file
                raise DatasetError(f"{path}: not a readable Parquet file ({e})") from None
        for i, row in enumerate(rows, 1):
            yield f"{path}:row {i}", row
        return
    if path.endswith(".csv"):
        yield from _csv_rows(path)
        return
    if not path.endswith(".jsonl"):
        if not os.path.lexists(path):
            raise DatasetError(f"{path}: no such file")
        raise DatasetError(f"{path}: expected a .jsonl, .parquet or .csv file")
    with _open(path) as f:
        too_long = lambda i: DatasetError(f"{path}:{i}: line longer than {MAX_LINE >> 20} MiB "  # noqa: E731
                                          f"(not a JSONL row)")
        for i, raw in bounded_lines(f, MAX_LINE, too_long):
            if not raw.strip():
                continue
            yield f"{path}:{i}", _loads(raw, f"{path}:{i}")


def _loads(text: str | bytes, where: str) -> Any:
    """One JSON document through the guarded reader; its refusal as a `DatasetError`."""
    from otbench.errors import MeasurementSetError

    try:
        return loads_json(text, where)
    except MeasurementSetError as e:
        raise DatasetError(str(e)) from None


def _csv_rows(path: str) -> Iterator[tuple[str, Any]]:
    """Rows of a CSV file with a header (GPQA's `gpqa_diamond.csv` as distributed).

    Cells are strings; quoted cells may span lines, so locations count data
    rows from 1 (`FILE:row N`), not lines. An empty cell reads as missing.
    """
    def bad(line: int, why: str) -> DatasetError:
        return DatasetError(f"{path}, line {line}: {why}")

    try:
        with io.TextIOWrapper(_open(path), encoding="utf-8-sig", newline="") as f:
            reader = csv_records(f, bad)
            header = next(reader, None)
            if header is None:
                raise DatasetError(f"{path}: empty CSV file (no header row)")
            for i, cells in enumerate(reader, 1):
                if not any(c.strip() for c in cells):
                    continue
                if len(cells) != len(header):
                    raise DatasetError(f"{path}:row {i}: {len(cells)} cells, the header has {len(header)}")
                yield f"{path}:row {i}", {h: (c if c != "" else None) for h, c in zip(header, cells)}
    except UnicodeDecodeError:
        raise DatasetError(f"{path}: not UTF-8 text") from None


def _field(row: Mapping, loc: str, names: Sequence[str], *, types=(str,), required: bool = True):
    if not isinstance(row, Mapping):
        raise DatasetError(f"{loc}: expected a JSON object, got {type(row).__name__}")
    for n in names:
        if n in row and row[n] is not None:
            v = row[n]
            if isinstance(v, bool) or not isinstance(v, types):
                want = " or ".join(t.__name__ for t in types)
                raise DatasetError(f"{loc}: field '{n}' must be {want}, got {type(v).__name__}")
            return v
    if not required:
        return None
    others = ", ".join(f"'{n}'" for n in names[1:])
    also = f" (also accepted: {others})" if others else ""
    raise DatasetError(f"{loc}: missing field '{names[0]}'{also}")


def _text(row, loc, names) -> str:
    v = _field(row, loc, names)
    if not v.strip():
        raise DatasetError(f"{loc}: field '{names[0]}' is empty")
    return v


def _id(row, loc, names) -> str:
    v = _field(row, loc, names, types=(str, int))
    v = str(v).strip()
    if not v:
        raise DatasetError(f"{loc}: field '{names[0]}' is empty")
    return v
