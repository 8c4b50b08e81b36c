"""Checks of the pages' own text that a strict mkdocs build does not make.

Python-Markdown renders an unclosed code fence as code to the end of the page, and a fence
line with text after its backticks (```` ``` A ````) is not a closing fence at all, so the
strict build passes while half a page shows as one code block. A backticked name of an
object that was moved or renamed is plain text to mkdocs. Every page of `docs/` (and the
README, in `tests/test_docs.py`) is checked here; each finding is a build warning, so the
strict build fails on it.

**Fences.** A fence is a line whose first non-blank characters are at least three backticks
or tildes. It opens a block when none is open; it closes the open block when it is made of
the same character, at least as long as the opener, with nothing after it. Findings: a
block still open at the end of the page, and a fence line of the opener's character and
length that carries text (an info string or a stray word) inside an open block — a closing
fence written wrong, or a block that was never closed before the next one opens. A longer
outer fence (```` ```` ````) may hold shorter fences as content.

**Pointers.** Text outside code blocks, in single backticks, of one of these forms:

* `otbench.a.b.c` — a module, or an object reached from the longest importable module
  prefix by attribute access;
* `otbench.a.b:c.d` — module `otbench.a.b`, then attributes `c`, `d`;
* either of the above followed by a call, `otbench.analysis.load(DIR)` (the call is not read);
* `DIR/path/file.py` or `DIR/path/file.py:name`, where DIR is a top-level folder of the
  repository: the file exists, and defines `name` at module level (def, class, assignment
  or import), read without importing it.

Other backticked text (a schema id such as `otbench.bench/1`, a shell command, a bare file
name) is not a pointer. A module whose third-party import is missing here is read without
importing: its source must define the first attribute.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import logging
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
log = logging.getLogger("mkdocs.plugins.otbench_checks")

FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})(.*)$")
DOTTED = re.compile(r"(otbench(?:\.\w+)+)(?::(\w+(?:\.\w+)*))?(?:\(.*\))?")
FILE = re.compile(r"((?:analysis|benchmarks|cli|docs|examples|otbench|probe|artifacts|tests)"
                  r"/[\w./-]+\.py)(?::(\w+))?")
TICKED = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")


def fence_errors(text: str) -> list[str]:
    """The fence findings of one page's text, each `line N: what` (empty: balanced)."""
    out, open_at, opener = [], None, ""
    for n, line in enumerate(text.splitlines(), 1):
        m = FENCE.match(line)
        if not m:
            continue
        fence, rest = m.group(1), m.group(2).strip()
        if open_at is None:
            open_at, opener = n, fence
        elif fence[0] == opener[0] and len(fence) >= len(opener):
            if not rest:
                open_at = None
            else:
                out.append(f"line {n}: fence with text {rest!r} inside the block opened at line "
                           f"{open_at} (a closing fence has nothing after it)")
    if open_at is not None:
        out.append(f"line {open_at}: code fence never closed")
    return out


def _prose(text: str) -> list[tuple[int, str]]:
    """(line number, line) of the lines outside fenced code blocks."""
    out, opener = [], None
    for n, line in enumerate(text.splitlines(), 1):
        m = FENCE.match(line)
        if m and (opener is None or (m.group(1)[0] == opener[0] and len(m.group(1)) >= len(opener)
                                     and not m.group(2).strip())):
            opener = m.group(1) if opener is None else None
            continue
        if opener is None:
            out.append((n, line))
    return out


def _defines(path: Path, name: str) -> bool:
    """Whether the module source at `path` binds `name` at module level."""
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            return True
        targets = (node.targets if isinstance(node, ast.Assign)
                   else [node.target] if isinstance(node, (ast.AnnAssign, ast.AugAssign)) else [])
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            return True
        if isinstance(node, (ast.Import, ast.ImportFrom)) and any(
                (a.asname or a.name.split(".")[0]) == name for a in node.names):
            return True
    return False


def _module_source(module: str) -> Path | None:
    spec = importlib.util.find_spec(module)
    return Path(spec.origin) if spec is not None and spec.origin not in (None, "built-in") else None


def resolve_dotted(module_path: str, attrs: str | None) -> str | None:
    """Why `module_path[:attrs]` names nothing (None: it resolves)."""
    parts = module_path.split(".")
    if attrs is None:                       # dotted form: the longest importable module prefix
        for cut in range(len(parts), 0, -1):
            try:
                if importlib.util.find_spec(".".join(parts[:cut])) is not None:
                    break
            except ModuleNotFoundError:     # a parent is not a package
                continue
        else:
            return f"no module {parts[0]}"
        module, chain = ".".join(parts[:cut]), parts[cut:]
    else:
        module, chain = module_path, attrs.split(".")
        try:
            if importlib.util.find_spec(module) is None:
                return f"no module {module}"
        except ModuleNotFoundError:
            return f"no module {module}"
    try:
        obj = importlib.import_module(module)
    except ImportError as e:                # a third-party extra missing here: read the source
        if (e.name or "").split(".")[0] == "otbench" or not chain:
            return f"{module} does not import ({e})"
        src = _module_source(module)
        return None if src is not None and _defines(src, chain[0]) else f"{module} has no {chain[0]}"
    for i, attr in enumerate(chain):
        if not hasattr(obj, attr):
            return f"{'.'.join([module, *chain[:i]])} has no {attr}"
        obj = getattr(obj, attr)
    return None


def pointer_errors(text: str, root: Path = ROOT) -> list[str]:
    """The pointer findings of one page's text, each `line N: `pointer`: why` (empty: all resolve)."""
    out = []
    for n, line in _prose(text):
        for tick in TICKED.findall(line):
            tick = tick.strip()
            if m := DOTTED.fullmatch(tick):
                why = resolve_dotted(m.group(1), m.group(2))
            elif m := FILE.fullmatch(tick):
                path = root / m.group(1)
                why = (f"no file {m.group(1)}" if not path.is_file()
                       else f"{m.group(1)} defines no {m.group(2)}"
                       if m.group(2) and not _defines(path, m.group(2)) else None)
            else:
                continue
            if why is not None:
                out.append(f"line {n}: `{tick}`: {why}")
    return out


def page_errors(path: Path) -> list[str]:
    """Every finding of the page at `path`."""
    text = path.read_text(encoding="utf-8")
    return fence_errors(text) + pointer_errors(text)


def on_page_markdown(markdown, page, config, files):
    src = Path(page.file.abs_src_path or "")
    if src.suffix == ".md" and src.is_file():         # a generated API page has no source file
        for finding in page_errors(src):
            log.warning("%s: %s", page.file.src_uri, finding)
    return markdown
