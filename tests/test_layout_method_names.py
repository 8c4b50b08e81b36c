"""No registered method's name is written in the online controller or its CLI (issue 57).

A method is known by name only in `analysis/methods` (its registry line); the online controller
(`probe/online`) and `cli/_online.py` read what a method declares (`Method.online`, its signals,
its online parameters, its device-side form). A name written there is a switch on one method --
the closed set a contributor's new method cannot join -- so the checker reads every string
constant of those modules (docstrings aside: prose may cite a method) and names each one holding
a registered name as a whole word.
"""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHECKED = sorted((ROOT / "probe" / "online").rglob("*.py")) + [ROOT / "cli" / "_online.py"]


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
        # an attribute's docstring: a bare string right after an assignment
        for field in ("body", "orelse"):
            stmts = getattr(node, field, None)
            if not isinstance(stmts, list):             # a lambda's body is one expression
                continue
            for a, b in zip(stmts, stmts[1:]):
                if isinstance(a, (ast.Assign, ast.AnnAssign)) and isinstance(b, ast.Expr) \
                        and isinstance(b.value, ast.Constant):
                    out.add(id(b.value))
    return out


def method_names_in(source: str, names) -> list[tuple[int, str]]:
    """(line, name) of each registered `names` written as a whole word in a string constant of
    `source` (f-string parts included; docstrings and comments not)."""
    tree = ast.parse(source)
    skip = _docstrings(tree)
    words = [(n, re.compile(rf"(?<![\w-]){re.escape(n)}(?![\w-])")) for n in names]
    hits = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            hits += [(node.lineno, n) for n, rx in words if rx.search(node.value)]
    return sorted(set(hits))


def _registered() -> tuple[str, ...]:
    from otbench.analysis.methods import METHODS

    return METHODS.names()


def test_no_registered_method_name_in_the_online_controller_or_its_cli():
    names = _registered()
    assert len(names) >= 10            # the checker reads the real registry, not an empty one
    found = {str(p.relative_to(ROOT)): method_names_in(p.read_text(encoding="utf-8"), names)
             for p in CHECKED}
    assert {k: v for k, v in found.items() if v} == {}


def test_the_name_rule_fails_on_planted_switches():
    names = _registered()
    planted = '''
"""A docstring may cite thinkbrake-onectx and deepconf-exit."""
X = "deer"                                   # a bare name
def f(m):
    """So may this one: deer-stp."""
    if m.name == "deepconf-exit":            # a switch
        return f"{m.name} is dynasor-cot"
    return m.name in ("thinkbrake-onectx", "cap")   # a closed set; "cap" is no method
Y = "deer_conf, dynasor_window"              # signal names are not method names
Z = "certify deer-stp instead"               # a name inside a message
'''
    assert method_names_in(planted, names) == [(3, "deer"), (6, "deepconf-exit"), (7, "dynasor-cot"),
                                                (8, "thinkbrake-onectx"), (10, "deer-stp")]
    # the repository's own checked files are read (a wrong glob would pass anything)
    assert any(p.parts[-2:] == ("_processor", "_rule.py") for p in CHECKED) and (ROOT / "cli" / "_online.py") in CHECKED
