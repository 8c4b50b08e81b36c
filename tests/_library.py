"""The library's modules and their imports, read from the source (shared by the layout tests
and the quick tier's coverage check).

The repository keeps the design's top-level folders; they install under `otbench`
(pyproject.toml, `[tool.setuptools.package-dir]`), so `probe/online/_request.py` is the module
`otbench.probe.online._request`.
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {"analysis": "otbench.analysis", "probe": "otbench.probe", "cli": "otbench.cli",
            "otbench": "otbench"}


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join([PACKAGES[parts[0]]] + parts[1:])


def library_files(root: Path = ROOT) -> dict[str, Path]:
    """Every library module, by dotted name."""
    return {module_name(p, root): p for d in PACKAGES for p in sorted((root / d).rglob("*.py"))}


def _type_checking_only(tree: ast.AST) -> set[int]:
    """ids of the nodes under `if TYPE_CHECKING:` (annotations only: never imported at run time)."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            out |= {id(x) for stmt in node.body for x in ast.walk(stmt)}
    return out


def imported_modules(source: str, me: str, is_package: bool, modules: set[str]) -> set[str]:
    """The modules of `modules` that the module `me` imports, anywhere in its body (a function's
    import runs when the function does), except under `if TYPE_CHECKING:`. ``from pkg import x``
    counts `pkg.x` where that is a module, else `pkg`."""
    tree = ast.parse(source)
    package = me if is_package else me.rsplit(".", 1)[0]
    skip = _type_checking_only(tree)
    out: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - (node.level - 1)] if node.level else []
            mod = ".".join(base + ([node.module] if node.module else [])) if node.level else node.module or ""
            for alias in node.names:
                out.add(f"{mod}.{alias.name}" if f"{mod}.{alias.name}" in modules else mod)
        elif isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
    return (out & modules) - {me}


def import_graph(files: dict[str, Path]) -> dict[str, set[str]]:
    """module -> the library modules it imports (`imported_modules`)."""
    names = set(files)
    return {m: imported_modules(p.read_text(), m, p.name == "__init__.py", names)
            for m, p in files.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles of `graph`: its strongly connected components of two or more modules
    (Tarjan's algorithm, iterative), each sorted, sorted by their first module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, edges = work[-1]
            w = next(edges, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return sorted(out)


def long_bodies(source: str, where: str, limit: int) -> list[str]:
    """`where:line name (N lines)` for every function whose body is longer than `limit` lines:
    from its first statement after the docstring to its last line, nested functions included."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        body = node.body
        if (len(body) > 1 and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            body = body[1:]                               # the docstring is not the body
        n = node.end_lineno - body[0].lineno + 1
        if n > limit:
            out.append(f"{where}:{node.lineno} {node.name} ({n} lines)")
    return out
