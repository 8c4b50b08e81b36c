"""Two more layout rules (issue 57), read from the source with `ast` (tests/_library.py):

1. no import cycle among the library's modules: an import anywhere in a module counts (a
   function's import runs when the function does; a cycle broken by a late import is still a
   cycle), one under `if TYPE_CHECKING:` does not (it never runs);
2. no function body over 80 lines (from its first statement after the docstring to its last
   line, nested functions included).

Each rule is shown to fail on a planted violation.
"""

from pathlib import Path

from _library import ROOT, cycles, import_graph, library_files, long_bodies

MAX_BODY = 80

# Bodies over the limit whose split is pending, each named; any other long body fails, and an
# entry that is no longer long fails too (remove it). None pending.
PENDING_BODIES: set[str] = set()


def _long(files: dict[str, Path], root: Path) -> dict[str, str]:
    """`path name` -> the finding, for every body over MAX_BODY lines."""
    out = {}
    for p in files.values():
        rel = p.relative_to(root).as_posix()
        for finding in long_bodies(p.read_text(), rel, MAX_BODY):
            name = finding.split()[1]
            out[f"{rel} {name}"] = finding
    return out


def test_no_import_cycle():
    found = cycles(import_graph(library_files()))
    assert not found, [" <-> ".join(c) for c in found]


def test_no_function_body_over_80_lines():
    found = _long(library_files(), ROOT)
    new = sorted(v for k, v in found.items() if k not in PENDING_BODIES)
    assert not new, new
    done = sorted(PENDING_BODIES - set(found))
    assert not done, f"no longer over {MAX_BODY} lines: remove from PENDING_BODIES: {done}"


def _tree(tmp_path: Path, files: dict[str, str]) -> dict[str, Path]:
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    return library_files(tmp_path)


def test_the_cycle_rule_fails_on_a_planted_cycle(tmp_path):
    files = _tree(tmp_path, {
        "probe/__init__.py": "",
        "probe/x/__init__.py": "from ._a import f\n",
        # a late (function-level) import closes the cycle: still a cycle
        "probe/x/_a.py": "from ._b import g\n\ndef f():\n    from . import _c\n    return _c\n",
        "probe/x/_b.py": "import otbench.probe.x._c as c\n\ndef g():\n    return c\n",
        "probe/x/_c.py": "def h():\n    from otbench.probe.x._a import f\n    return f\n",
        # under TYPE_CHECKING: never imported, so no cycle with _a
        "probe/x/_d.py": "from typing import TYPE_CHECKING\nfrom ._a import f\n"
                         "if TYPE_CHECKING:\n    from ._e import E\n",
        "probe/x/_e.py": "from ._d import f\n",
    })
    graph = import_graph(files)
    assert graph["otbench.probe.x._a"] == {"otbench.probe.x._b", "otbench.probe.x._c"}
    assert graph["otbench.probe.x._d"] == {"otbench.probe.x._a"}
    assert cycles(graph) == [["otbench.probe.x._a", "otbench.probe.x._b", "otbench.probe.x._c"]]
    (tmp_path / "probe/x/_c.py").write_text("def h():\n    return 1\n")
    assert cycles(import_graph(library_files(tmp_path))) == []


def test_the_body_rule_fails_on_a_planted_long_body(tmp_path):
    def fn(name: str, lines: int, doc: bool) -> str:
        head = f'def {name}():\n' + ('    """Doc\n    string."""\n' if doc else "")
        return head + "".join(f"    x{i} = {i}\n" for i in range(lines))

    files = _tree(tmp_path, {"cli/_x.py": fn("ok", 80, True) + "\n\n" + fn("long", 81, False)
                             + "\n\nclass C:\n    " + fn("method", 81, True).replace("\n", "\n    ")})
    assert sorted(_long(files, tmp_path)) == ["cli/_x.py long", "cli/_x.py method"]
    assert _long(files, tmp_path)["cli/_x.py long"] == "cli/_x.py:86 long (81 lines)"
