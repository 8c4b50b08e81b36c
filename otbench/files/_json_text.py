"""The JSON text of otbench's result documents: `json.dumps(indent=2, sort_keys=True)` byte for byte, faster.

With `indent` the standard library encodes in pure Python, one generator
step per value; a frontier document (tens of thousands of floats) took
~0.3 s of a command that should take well under a second. Here a list of
plain numbers is one `map` of the same `repr` and one `join`, everything
else is encoded as `json.dumps` would (the standard string encoder, the
same separators and key order). Anything this encoder does not handle
(non-string keys, NaN or infinity, objects of other types) makes it hand
the whole document to `json.dumps`, so its output and its errors are the
standard library's.
"""

import json
from typing import Any

from otbench.errors import OtbenchError

_encode_str = json.encoder.encode_basestring     # ensure_ascii=False: the standard str encoder
_NON_FINITE = frozenset(("nan", "inf", "-inf"))


class _Unusual(OtbenchError):
    """A value the fast path does not encode; `dumps_indented` falls back to `json.dumps`."""


def dumps_indented(obj: Any) -> str:
    """`json.dumps(obj, indent=2, sort_keys=True, allow_nan=False, ensure_ascii=False)`."""
    try:
        parts: list[str] = []
        _encode(obj, "\n", parts)
        return "".join(parts)
    except (_Unusual, RecursionError):
        return json.dumps(obj, indent=2, sort_keys=True, allow_nan=False, ensure_ascii=False)


def _scalar(v: Any) -> str:
    if isinstance(v, str):
        return _encode_str(v)
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, int):
        return int.__repr__(v)
    if isinstance(v, float):
        text = float.__repr__(v)
        if text in _NON_FINITE:
            raise _Unusual
        return text
    raise _Unusual


def _numbers(items: list | tuple) -> list[str] | None:
    """The texts of a list of plain floats or plain ints (exact types), else None."""
    kinds = set(map(type, items))
    if kinds == {float}:
        texts = list(map(float.__repr__, items))
        if _NON_FINITE.intersection(texts):
            raise _Unusual
        return texts
    if kinds == {int}:
        return list(map(int.__repr__, items))
    return None


def _encode(obj: Any, nl: str, out: list[str]) -> None:
    """Append `obj`'s text; `nl` is a newline plus the indentation of the line it starts on."""
    if isinstance(obj, dict):
        if not obj:
            out.append("{}")
            return
        if not all(type(k) is str for k in obj):
            raise _Unusual                  # json.dumps's key coercion and its sort errors
        inner = nl + "  "
        out.append("{")
        first = True
        for k in sorted(obj):
            out.append(inner if first else "," + inner)
            first = False
            out.append(_encode_str(k))
            out.append(": ")
            _encode(obj[k], inner, out)
        out.append(nl + "}")
    elif isinstance(obj, (list, tuple)):
        if not obj:
            out.append("[]")
            return
        inner = nl + "  "
        texts = _numbers(obj)
        if texts is not None:
            out.append("[" + inner + ("," + inner).join(texts) + nl + "]")
            return
        out.append("[")
        first = True
        for v in obj:
            out.append(inner if first else "," + inner)
            first = False
            _encode(v, inner, out)
        out.append(nl + "]")
    else:
        out.append(_scalar(obj))
