"""The shapes of the result documents the report reads.

A document of the right schema but the wrong shape (`"probes": [1]` in a
thinning document, `"frontiers": [1, 2, 3]` in a bootstrap one, a metrics
document holding only `cells`, a bench document without `method`) must be
refused with the key and the rule, never reach a renderer that indexes it.
Each schema lists the keys otbench writes with their container types, and
the element types of the collections the report walks; `shape_misfit` walks
a document against it without recursion.
"""

from typing import Any

class NUM:
    """Marker: a JSON number (int or float, not a boolean)."""


class INTERVAL:
    """Marker: null, or [lo, hi] of numbers or nulls."""


OBJ, LIST, STR = dict, list, str
_IV = {k: INTERVAL for k in ("or?", "ad?", "full_acc?", "tokens?", "endpoint_acc?")}

# key -> type, or (type, element shape) for a list of objects / an object of objects;
# a key ending in "?" is optional.
SHAPES: dict[str, dict[str, Any]] = {
    "metrics": {"cells": (LIST, {"model": STR, "group": STR}), "macro": OBJ, "by_model": OBJ,
                "by_group": OBJ},
    "frontier": {"grid": LIST, "strategies": (OBJ, {"cells": (LIST, {"model": STR,
                                                                      "group": STR})})},
    "bootstrap": {"cells": (LIST, {"model": STR, "group": STR, **_IV}), "macro": _IV,
                  "by_model": (OBJ, _IV), "by_group": (OBJ, _IV), "frontiers?": {"grid": LIST, "dr?": {"lo": LIST, "hi": LIST,
                                                                         "median": LIST},
                                                  "fb?": {"lo": LIST, "hi": LIST, "median": LIST},
                                                  "dee?": {"lo": LIST, "hi": LIST,
                                                           "median": LIST}}},
    "thinning": {"probes?": (OBJ, {"or": NUM, "ad": NUM, "retention": NUM,
                                   "cells?": (LIST, {"model": STR, "group": STR}),
                                   "by_model?": OBJ, "by_group?": OBJ}),
                 "trajectories?": (OBJ, {"or": INTERVAL, "ad": INTERVAL})},
    "bench": {"method": STR, "strategy": STR, "points": (LIST, {"rel_cost": NUM, "acc": NUM,
                                                                "frontier_acc": NUM, "gap": NUM}),
              "cells?": (LIST, {"model": STR, "group": STR}), "summary": OBJ, "reference": OBJ},
}


def _name(t: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string",
            INTERVAL: "null or a [lo, hi] pair"}.get(t, "a number")


def _type_ok(v: Any, t: Any) -> bool:
    if t is NUM:
        return isinstance(v, (int, float)) and not isinstance(v, bool)
    if t is INTERVAL:
        return v is None or (isinstance(v, list) and len(v) == 2 and all(
            x is None or (isinstance(x, (int, float)) and not isinstance(x, bool)) for x in v))
    return isinstance(v, t)


def shape_misfit(doc: Any, kind: str) -> str | None:
    """Why `doc` does not have the shape of a `kind` document (None when it does)."""
    if not isinstance(doc, dict):
        return f"the document must be an object, got {type(doc).__name__}"
    todo = [(doc, SHAPES[kind], "")]
    while todo:
        obj, spec, where = todo.pop()
        for key, want in spec.items():
            optional = key.endswith("?")
            key = key.rstrip("?")
            at = f"{where}.{key}" if where else key
            if key not in obj or (optional and obj[key] is None):
                if optional:
                    continue
                return f"'{at}' is missing"
            v = obj[key]
            if isinstance(want, dict):
                if not isinstance(v, dict):
                    return f"'{at}' must be an object, got {type(v).__name__}"
                todo.append((v, want, at))
                continue
            t, inner = want if isinstance(want, tuple) else (want, None)
            if not _type_ok(v, t):
                return f"'{at}' must be {_name(t)}, got {type(v).__name__}"
            if inner is None:
                continue
            items = v.items() if isinstance(v, dict) else enumerate(v)
            for k, x in items:
                if not isinstance(x, dict):
                    return f"'{at}[{k!r}]' must be an object, got {type(x).__name__}"
                todo.append((x, inner, f"{at}[{k!r}]"))
    return None
