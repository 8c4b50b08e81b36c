"""The one guarded JSON reader: every JSON otbench reads goes through `loads_json`.

The standard parser accepts inputs that later become tracebacks or silent
errors: nesting deep enough to exhaust the stack, integers of thousands of
digits (the interpreter refuses to print them), lone UTF-16 surrogates
(unencodable, so every later write fails), numbers beyond float64 (they
become `inf`), `NaN`/`Infinity` literals (not JSON), and duplicate keys
(silently last-wins). Each is refused here with one line naming the place
and the rule, as `MeasurementSetError`.
"""

import json
import os
import re
from pathlib import Path
from typing import Any

from otbench.errors import MeasurementSetError, OtbenchError

from ._read import read_regular

MAX_DEPTH = 64
# Integers past int64 have no meaning in any otbench document.
MAX_INT_DIGITS = 19
_SURROGATE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


class _Refused(OtbenchError, ValueError):     # internal: always re-raised as MeasurementSetError
    pass


def _int(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits > MAX_INT_DIGITS:
        raise _Refused(f"integer with {digits} digits is beyond int64")
    return int(text)


def _float(text: str) -> float:
    x = float(text)
    if x in (float("inf"), float("-inf")):
        raise _Refused(f"number {text[:40]} is beyond float64")
    return x


def _constant(text: str):
    raise _Refused(f"{text} is not a JSON number (numbers must be finite)")


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise _Refused(f"duplicate key {k!r} in one object")
        out[k] = v
    return out


def _check_tree(obj: Any, check_strings: bool) -> None:
    """Depth <= MAX_DEPTH and (when escapes may hide them) no lone surrogate, without recursion."""
    stack = [(obj, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, (list, dict)):
            if d > MAX_DEPTH:
                raise _Refused(f"nested deeper than {MAX_DEPTH} levels")
            items = v.items() if isinstance(v, dict) else enumerate(v)
            for k, x in items:
                if check_strings and isinstance(k, str):
                    _encodable(k)
                if isinstance(x, (list, dict)) or (check_strings and isinstance(x, str)):
                    stack.append((x, d + 1))
        elif isinstance(v, str):
            _encodable(v)


def _encodable(s: str) -> None:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        raise _Refused(f"string {s[:40]!r} holds a lone surrogate (not valid Unicode)") from None


def loads_json(text: str | bytes, where: str, *, bad: str = "not valid JSON") -> Any:
    """Parse one JSON document; `MeasurementSetError(where, rule)` on anything unsafe.

    `bad` opens the message of a syntax error (the JSONL importer says "malformed JSON").
    """
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as e:
            raise MeasurementSetError(where, f"not UTF-8 text ({e.reason} at byte {e.start})") \
                from None
    try:
        obj = json.loads(text, parse_int=_int, parse_float=_float, parse_constant=_constant,
                         object_pairs_hook=_pairs)
        deep = text.count("[") + text.count("{") > MAX_DEPTH
        surrogates = _SURROGATE.search(text) is not None
        if deep or surrogates:
            _check_tree(obj, surrogates)
    except json.JSONDecodeError as e:
        at = f"column {e.colno}" if e.lineno == 1 else f"line {e.lineno} column {e.colno}"
        raise MeasurementSetError(where, f"{bad} ({e.msg} at {at})") from None
    except RecursionError:
        raise MeasurementSetError(where, f"not accepted JSON (nested deeper than {MAX_DEPTH} "
                                         f"levels)") from None
    except _Refused as e:
        raise MeasurementSetError(where, f"not accepted JSON ({e})") from None
    return obj


def read_json_bytes(path: str | os.PathLike, limit: int = 1 << 30) -> bytes:
    """The bytes of the JSON document at `path`, unparsed, for a caller that also hashes them.

    Through `read_regular`: a FIFO or device named as a document is refused, not waited on;
    every refusal is one `MeasurementSetError` naming the file.
    """
    where = str(Path(path))

    def fail(reason: str) -> MeasurementSetError:
        return MeasurementSetError(where, reason)

    return read_regular(path, limit, what="a JSON document", fail=fail)


def read_json(path: str | os.PathLike, limit: int = 1 << 30) -> Any:
    """Read and parse the JSON file at `path` (one-line `MeasurementSetError` on any problem)."""
    return loads_json(read_json_bytes(path, limit), str(Path(path)))
