"""docs/api.md against the code: every constant it quotes has the value the code has (issue 30).

A table row ``| `NAME` | `literal` ... |`` under a heading that names its
module (``## ... (`otbench.analysis.X` ...)``) states a constant's value;
when ``literal`` is a Python literal it must equal ``otbench.analysis.X.NAME``
(a tuple quoted as ``("a", "b")`` is compared with the code's tuple). Rows
that describe rather than quote (shapes, prose) are not literals and are
left to the reader.
"""

import ast
import importlib
import re
from pathlib import Path

API = Path(__file__).resolve().parents[1] / "docs" / "api.md"
HEADING = re.compile(r"^## .*?\(`(otbench\.analysis\.[a-z_]+)`")
ROW = re.compile(r"^\| `([A-Z][A-Z0-9_]*)` \| `([^`]+)`")


def quoted_constants() -> list[tuple[int, str, str, str]]:
    """(line, module, name, literal text) of every constant row of docs/api.md."""
    out, module = [], None
    for i, line in enumerate(API.read_text().splitlines(), start=1):
        h = HEADING.match(line)
        if h:
            module = h.group(1)
        r = ROW.match(line)
        if r and module:
            out.append((i, module, r.group(1), r.group(2)))
    return out


def test_every_quoted_constant_matches_the_code():
    checked = []
    for line, module, name, text in quoted_constants():
        mod = importlib.import_module(module)
        if not hasattr(mod, name):      # a field or column name, not a constant
            continue
        try:
            want = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            continue                    # a description, not a value
        got = getattr(mod, name)
        assert (tuple(got) if isinstance(want, tuple) else got) == want, (
            f"docs/api.md:{line}: {module}.{name} is {got!r}, the doc says {text}")
        checked.append(name)
    # The check must bite: the constants the doc quotes are found and compared.
    assert {"SPLITS", "METRICS", "BOOT_METRICS", "MIN_RANK_QUESTIONS"} <= set(checked), checked
