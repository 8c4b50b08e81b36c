"""The package layout's import rules (issue 12), read from the source with `ast`.

1. nothing under `analysis/` imports `otbench.probe` or `otbench.cli`;
2. `analysis.measurement` imports no JAX and no other analysis subpackage, and
   importing it, `otbench.analysis` or `otbench.probe` leaves `jax` unloaded;
3. the probe uses only public names of `otbench.analysis.measurement`;
4. `cli/` and `analysis/report/` are leaves, and the CLI imports only public
   names of the subpackages;
5. no `_`-prefixed module or name is imported across subpackage lines;
6. one module owns JAX configuration (`analysis/core/_config.py`).
"""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {"analysis": "otbench.analysis", "probe": "otbench.probe", "cli": "otbench.cli"}


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join([PACKAGES[parts[0]]] + parts[1:])


def _modules() -> list[Path]:
    return sorted(p for d in PACKAGES for p in (ROOT / d).rglob("*.py"))


def _subpackage(dotted: str) -> str:
    """`otbench.analysis.frontier._dp.x` -> `otbench.analysis.frontier` (stops at the first `_` part)."""
    out = []
    for part in dotted.split("."):
        if part.startswith("_"):
            break
        out.append(part)
    return ".".join(out)


def _imports(path: Path):
    """(line, imported module, imported name or None) for every otbench import of `path`."""
    me = _module_name(path)
    package = me if path.name == "__init__.py" else me.rsplit(".", 1)[0]
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                if node.level > 1:
                    base = base[: -(node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            for alias in node.names:
                yield node.lineno, mod, alias.name
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, None


def _where(path: Path, line: int) -> str:
    return f"{path.relative_to(ROOT)}:{line}"


def _package_of(path: Path) -> str:
    me = _module_name(path)
    return me if path.name == "__init__.py" else me.rsplit(".", 1)[0]


def test_analysis_never_imports_probe_or_cli():
    bad = [f"{_where(p, ln)} imports {mod}" for p in _modules() if p.parts[len(ROOT.parts)] == "analysis"
           for ln, mod, _ in _imports(p) if mod.startswith(("otbench.probe", "otbench.cli"))]
    assert not bad, bad


def test_measurement_imports_no_jax_and_no_other_analysis_subpackage():
    bad = []
    for p in (ROOT / "analysis" / "measurement").rglob("*.py"):
        for ln, mod, name in _imports(p):
            if mod.split(".")[0] in ("jax", "jaxlib", "jaxtyping", "orbax"):
                bad.append(f"{_where(p, ln)} imports {mod}")
            full = mod if name is None else f"{mod}.{name}"
            if full.startswith("otbench.analysis") and not mod.startswith("otbench.analysis.measurement"):
                bad.append(f"{_where(p, ln)} imports {full}")
    assert not bad, bad


@pytest.mark.parametrize("module", ["otbench", "otbench.analysis", "otbench.analysis.measurement",
                                    "otbench.probe", "otbench.probe.stp", "otbench.probe.horizon",
                                    "otbench.cli"])
def test_importing_leaves_jax_unloaded(module):
    code = (f"import sys, {module}\n"
            "import otbench.analysis as oa\n"
            "oa.MeasurementSet, oa.save, oa.load, oa.from_ragged\n"
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('jax', 'torch', 'vllm'))\n"
            "print(bad[:5]); sys.exit(1 if bad else 0)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr


def test_probe_uses_only_public_measurement_names():
    bad = []
    for p in (ROOT / "probe").rglob("*.py"):
        for ln, mod, name in _imports(p):
            if not mod.startswith("otbench.analysis"):
                continue
            if mod != "otbench.analysis.measurement" or (name or "").startswith("_"):
                bad.append(f"{_where(p, ln)} imports {mod}:{name}")
    assert not bad, bad


def test_cli_and_report_are_leaves():
    # Nothing imports the CLI; only the CLI (and the lazy facade) import the report.
    allowed = {"otbench.cli": ("otbench.cli",), "otbench.analysis.report": ("otbench.cli", "otbench.analysis.report")}
    bad = []
    for p in _modules():
        mine = _package_of(p)
        if p == ROOT / "analysis" / "__init__.py":
            continue
        for ln, mod, name in _imports(p):
            full = mod if name is None else f"{mod}.{name}"
            for leaf, users in allowed.items():
                if (full == leaf or full.startswith(leaf + ".")) and not mine.startswith(users):
                    bad.append(f"{_where(p, ln)} imports {full}")
    assert not bad, bad


def test_no_private_import_across_subpackages():
    bad = []
    for p in _modules():
        mine = _subpackage(_package_of(p))
        for ln, mod, name in _imports(p):
            if not mod.startswith("otbench"):
                continue
            full = mod if name is None else f"{mod}.{name}"
            if name is not None and name.startswith("__"):     # __version__
                continue
            private = any(part.startswith("_") for part in full.split("."))
            if private and _subpackage(full) != mine:
                bad.append(f"{_where(p, ln)} imports {full}")
    assert not bad, bad


def _calls_jax_config(tree: ast.AST) -> list[int]:
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "update" and isinstance(node.func.value, ast.Attribute) \
                and node.func.value.attr == "config":
            lines.append(node.lineno)
    return lines


def test_one_module_configures_jax():
    owners = {str(p.relative_to(ROOT)) for p in _modules() if _calls_jax_config(ast.parse(p.read_text()))}
    assert owners == {"analysis/core/_config.py"}, owners


def test_jax_subpackages_configure_jax_first():
    # Every JAX-using subpackage imports `core` before its own modules, so x64
    # is on whichever of its modules a user imports first.
    for sub in ("overthinking", "frontier", "resampling", "bench", "horizon", "report"):
        tree = ast.parse((ROOT / "analysis" / sub / "__init__.py").read_text())
        first = next(n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom)))
        assert isinstance(first, ast.ImportFrom) and first.module == "otbench.analysis" \
            and first.names[0].name == "core", sub


def test_public_facades_resolve():
    import otbench.analysis as oa
    import otbench.probe as op
    for mod in (oa, op):
        for name in mod.__all__:
            assert getattr(mod, name) is not None, name
    for sub in oa.SUBPACKAGES:
        m = getattr(oa, sub)
        for name in getattr(m, "__all__", ()):
            assert hasattr(m, name), f"{sub}.{name}"


def test_every_subpackage_is_installed():
    # A subpackage missing from pyproject's `packages` works in an editable checkout
    # and vanishes from a wheel; keep the list complete.
    import tomllib
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {_module_name(p) for d in PACKAGES for p in (ROOT / d).rglob("__init__.py")}
    assert found <= listed, sorted(found - listed)
