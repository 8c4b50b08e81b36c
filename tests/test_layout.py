"""The package layout's import rules (issue 12), read from the source with `ast`.

1. nothing under `analysis/` imports `otbench.probe` or `otbench.cli`;
2. `analysis.measurement` imports no JAX and no other analysis subpackage, and
   importing it, `otbench.analysis` or `otbench.probe` leaves `jax` unloaded;
3. the probe uses only public names of `otbench.analysis.measurement`;
4. `cli/` and `analysis/report/` are leaves, and the CLI imports only public
   names of the subpackages;
5. no `_`-prefixed module or name is imported across subpackage lines;
6. one module owns JAX configuration (`analysis/core/_config.py`);
7. the CLI only parses, calls and prints: no JAX (or orbax) import in `cli/`;
8. one CSV encoder (`otbench/files/_csv.py`): nobody else writes CSV;
9. the shared file helpers (atomic writers, the JSON reader, provenance, the
   checksum) are defined only in `otbench.files`, and the measurement
   contract does not re-export them;
10. one error base: every exception class otbench defines derives from
    `otbench.errors.OtbenchError`; a caller's bad value raises one of them
    (`ArgumentError` for arguments), a bare `ValueError` / `TypeError` only a
    bug that says so;
11. the methods import no JAX and only the measurement contract; the docs
    generator reads only public names;
12. user-facing text (strings, docstrings, docs) cites docs/rules.md, never the SPEC.
"""

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {"analysis": "otbench.analysis", "probe": "otbench.probe", "cli": "otbench.cli",
            "otbench": "otbench"}


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


JAX_ROOTS = ("jax", "jaxlib", "jaxtyping", "orbax")


def jax_free_violations(imports, where: str, allowed: tuple[str, ...]) -> list[str]:
    """Imports of JAX (or orbax) or of an analysis subpackage outside `allowed` (rules 2 and 2b)."""
    bad = []
    for ln, mod, name in imports:
        if mod.split(".")[0] in JAX_ROOTS:
            bad.append(f"{where}:{ln} imports {mod}")
        full = mod if name is None else f"{mod}.{name}"
        if full.startswith("otbench.analysis") and not mod.startswith(allowed):
            bad.append(f"{where}:{ln} imports {full}")
    return bad


def test_methods_import_no_jax_and_only_the_measurement_contract():
    allowed = ("otbench.analysis.measurement", "otbench.analysis.methods")
    bad = [v for p in (ROOT / "analysis" / "methods").rglob("*.py")
           for v in jax_free_violations(_imports(p), str(p.relative_to(ROOT)), allowed)]
    assert not bad, bad


def test_the_methods_rule_fails_on_a_planted_jax_import():
    allowed = ("otbench.analysis.measurement", "otbench.analysis.methods")
    planted = [(1, "jax.numpy", None), (2, "otbench.analysis.frontier", "frontiers"),
               (3, "otbench.analysis.measurement", "MeasurementSet"), (4, "numpy", None)]
    assert [v.split(":")[1].split()[0] for v in jax_free_violations(planted, "x", allowed)] == ["1", "2"]


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
                                    "otbench.analysis.methods", "otbench.probe.online",
                                    "otbench.analysis.frontier",
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


PROBE_MAY_IMPORT = ("otbench.analysis.measurement", "otbench.analysis.methods")
"""The analysis subpackages the probe (and the online controller) may use: the measurement
contract and the methods, both JAX-free; only their public names."""


def probe_violations(imports, where: str = "") -> list[str]:
    """The imports of analysis names the probe may not use (rule 3), for any import list."""
    return [f"{where}:{ln} imports {mod}:{name}" for ln, mod, name in imports
            if mod.startswith("otbench.analysis")
            and (mod not in PROBE_MAY_IMPORT or (name or "").startswith("_"))]


def test_probe_uses_only_public_measurement_and_methods_names():
    bad = [v for p in (ROOT / "probe").rglob("*.py")
           for v in probe_violations(_imports(p), str(p.relative_to(ROOT)))]
    assert not bad, bad


def test_the_probe_rule_fails_on_a_planted_private_import():
    planted = [(3, "otbench.analysis.methods._field", "Deer"), (4, "otbench.analysis.bench", "evaluate"),
               (5, "otbench.analysis.methods", "_takes_stored"), (6, "otbench.analysis.methods", "resolve")]
    assert [v.split(":")[1].split()[0] for v in probe_violations(planted, "x")] == ["3", "4", "5"]


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
    # is on whichever of its modules a user imports first. `frontier` is the
    # exception: its point frontiers need no JAX (`otbench frontier` must not pay
    # for starting it), so each of its modules that imports JAX imports `core` itself.
    for p in (ROOT / "analysis" / "frontier").glob("*.py"):
        mods = [mod for _, mod, _ in _imports(p)]
        if any(m.split(".")[0] == "jax" for m in mods):
            assert any(m.startswith("otbench.analysis.core") for m in mods), p.name
    for sub in ("overthinking", "resampling", "bench", "horizon", "report"):
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


def _top_level_imports(path: Path):
    """(line, top-level module) of every import of `path`, lazy ones included."""
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield node.lineno, a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            yield node.lineno, node.module.split(".")[0]


def test_cli_imports_no_jax():
    # Library knowledge (batch sizes, memory models, devices) lives in the library.
    bad = [f"{_where(p, ln)} imports {mod}" for p in (ROOT / "cli").rglob("*.py")
           for ln, mod in _top_level_imports(p) if mod in ("jax", "jaxlib", "orbax")]
    assert not bad, bad


def test_one_csv_encoder_and_reader():
    # Every CSV otbench writes goes through `csv_text` (the formula guard), every CSV it reads
    # through `csv_records` (a malformed record is one line): no other module imports `csv`.
    home = ROOT / "otbench" / "files" / "_csv.py"
    bad = []
    for p in _modules():
        if p == home:
            continue
        bad += [f"{_where(p, ln)} imports csv (read it with otbench.files.csv_records)"
                for ln, mod in _top_level_imports(p) if mod == "csv"]
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                    and node.value.id == "csv" and node.attr in ("writer", "DictWriter"):
                bad.append(f"{_where(p, node.lineno)} writes CSV with csv.{node.attr}")
            if isinstance(node, ast.FunctionDef) and node.name in ("csv_field", "csv_text",
                                                                   "_csv_field", "csv_cell"):
                bad.append(f"{_where(p, node.lineno)} defines {node.name}")
    assert not bad, bad


HELPERS = ("atomic_dir", "atomic_path", "write_text_atomic", "write_bytes_atomic", "refuse_input",
           "clean_stale", "loads_json", "read_json", "git_commit", "sha256_file")


def test_shared_helpers_live_in_files():
    home = ROOT / "otbench" / "files"
    bad = [f"{_where(p, node.lineno)} defines {node.name}" for p in _modules()
           if home not in p.parents
           for node in ast.walk(ast.parse(p.read_text()))
           if isinstance(node, ast.FunctionDef) and node.name in HELPERS + ("provenance",)
           and not (node.name == "provenance" and p.parent.name == "resampling")]
    assert not bad, bad
    import otbench.analysis.measurement as m
    assert not set(m.__all__) & set(HELPERS + ("provenance",)), "measurement re-exports helpers"


# Exception classes that are another library's mechanism, not otbench's errors.
_FOREIGN_BASES = {"cli/_common.py:DataError": "click.ClickException: click prints and exits"}


def test_one_error_base():
    import builtins
    builtin_errors = {n for n, v in vars(builtins).items()
                      if isinstance(v, type) and issubclass(v, BaseException)}
    classes = {}       # name -> (where, base names)
    for p in _modules():
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.ClassDef):
                bases = [b.id if isinstance(b, ast.Name) else ast.unparse(b) for b in node.bases]
                classes.setdefault(node.name, []).append((p, node.lineno, bases))

    def is_error(name, seen=()):
        if name in builtin_errors:
            return True
        return name not in seen and any(is_error(b, seen + (name,)) for _, _, bs in
                                        classes.get(name, ()) for b in bs)

    def has_base(name, seen=()):
        if name == "OtbenchError":
            return True
        return name not in seen and any(has_base(b, seen + (name,)) for _, _, bs in
                                        classes.get(name, ()) for b in bs)

    bad = []
    for name, defs in classes.items():
        for p, line, bases in defs:
            where = f"{p.relative_to(ROOT)}:{name}"
            if where in _FOREIGN_BASES or name == "OtbenchError":
                continue
            if any(is_error(b) for b in bases) and not any(has_base(b) for b in bases):
                bad.append(f"{_where(p, line)} {name}({', '.join(bases)}) does not derive from "
                           f"OtbenchError")
    assert not bad, bad


def private_names(imports, where: str) -> list[str]:
    """Imports of a private otbench module or name (a `_`-prefixed part), for any import list."""
    return [f"{where}:{ln} imports {mod}:{name}" for ln, mod, name in imports
            if mod.startswith("otbench") and any(p.startswith("_") for p in
                                                 mod.split(".") + [name or ""])]


def _hook_imports():
    path = ROOT / "docs" / "_hooks" / "otbench_docs.py"
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and not node.level:
            for alias in node.names:
                yield node.lineno, node.module or "", alias.name
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, None
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and node.value.id in ("oa", "otbench") and node.attr.startswith("_"):
            yield node.lineno, "otbench.analysis", node.attr    # oa._EXPORTS and the like


def test_the_docs_hook_reads_only_public_names():
    bad = private_names(_hook_imports(), "docs/_hooks/otbench_docs.py")
    assert not bad, bad


def test_the_private_name_rule_fails_on_planted_imports():
    planted = [(1, "otbench.probe.stp._toml_rules", "ArrayOf"), (2, "otbench.analysis", "_EXPORTS"),
               (3, "otbench.probe.stp", "describe_job_keys"), (4, "mkdocs._internal", "x")]
    assert [v.split(":")[1].split()[0] for v in private_names(planted, "x")] == ["1", "2"]


BARE = ("ValueError", "TypeError")


def bare_raises(source: str, where: str) -> tuple[int, list[str]]:
    """(raise sites, the bare `ValueError` / `TypeError` raises that do not say why they are a
    bug) of one module's source: a user's bad value raises an `OtbenchError` subclass
    (`otbench.errors.ArgumentError` for arguments), a bare built-in only a bug, said so in a
    `# bug` comment on its line or the line before."""
    lines = source.splitlines()
    total, bad = 0, []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Raise) and node.exc is not None:
            total += 1
            f = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            if isinstance(f, ast.Name) and f.id in BARE:
                ctx = " ".join(lines[max(0, node.lineno - 2):node.lineno]).lower()
                if "bug" not in ctx:
                    bad.append(f"{where}:{node.lineno}")
    return total, bad


def test_library_raises_otbench_errors_not_bare_builtins():
    total, bad = 0, []
    for p in _modules():
        t, b = bare_raises(p.read_text(), str(p.relative_to(ROOT)))
        total, bad = total + t, bad + b
    assert total > 500 and not bad, f"{len(bad)} of {total} raise sites raise a bare built-in: {bad[:20]}"
    # and the bugs themselves stay rare: at most 5 % of the raise sites are bare built-ins at all
    bare = sum(len(bare_raises(p.read_text().replace("bug", "B_G"), "")[1]) for p in _modules())
    assert bare <= 0.05 * total, f"{bare} of {total} raise sites are bare built-ins"


def test_the_raise_rule_fails_on_a_planted_bare_raise():
    planted = ("def f(x):\n"
               "    if x < 0:\n"
               "        raise ValueError('`x` must be >= 0')\n"
               "    if x > 9:\n"
               "        raise ArgumentError('`x` must be <= 9')\n"
               "    # bug: the caller checked x already\n"
               "    raise TypeError('unreachable')\n")
    assert bare_raises(planted, "x") == (3, ["x:3"])


MAX_LINES = 500
EXEMPT = {"analysis/frontier/_cpu.py"}      # the numba kernels, one file so they compile together


def long_modules(sources) -> list[str]:
    """Library modules over `MAX_LINES` lines (one concept per module) among (name, text) pairs,
    the exempt ones aside."""
    return [f"{name}: {n} lines" for name, text in sources
            if name not in EXEMPT and (n := len(text.splitlines())) > MAX_LINES]


def test_modules_stay_at_most_500_lines():
    found = long_modules((str(p.relative_to(ROOT)), p.read_text()) for p in _modules())
    assert not found, found
    planted = [("probe/x.py", "x = 1\n" * (MAX_LINES + 1)), ("analysis/frontier/_cpu.py", "x\n" * 900),
               ("probe/y.py", "x = 1\n" * MAX_LINES)]
    assert long_modules(planted) == [f"probe/x.py: {MAX_LINES + 1} lines"]


def _spec_strings(tree: ast.AST) -> list[int]:
    """Lines of string constants (docstrings included: they are the API reference) naming the
    project's internal specification; comments are not read."""
    return sorted({node.lineno for node in ast.walk(tree)
                   if isinstance(node, ast.Constant) and isinstance(node.value, str)
                   and re.search(r"\bSPEC\b", node.value)})


def test_user_facing_text_cites_the_rules_page_not_the_spec():
    """12. help, messages, printed output and docstrings (rendered into the API reference) cite
    docs/rules.md: users do not have the specification. The docs and README likewise."""
    bad = [_where(p, line) for d in ("analysis", "probe", "cli", "otbench", "benchmarks")
           for p in sorted((ROOT / d).rglob("*.py")) for line in _spec_strings(ast.parse(p.read_text()))]
    bad += [str(p.relative_to(ROOT)) for p in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
            if re.search(r"\bSPEC\b", p.read_text())]
    # files a docs page shows whole (`<!-- otbench:include PATH -->`, comments included) and the
    # shipped artifacts' prose and JSON notes
    shown = {m for p in (ROOT / "docs").rglob("*.md")
             for m in re.findall(r"^<!-- otbench:include ([\w./-]+) -->$", p.read_text(), re.M)}
    assert "artifacts/otbench/patient_brake.py" in shown
    shown |= {str(p.relative_to(ROOT)) for p in (ROOT / "artifacts").rglob("*") if p.suffix in (".md", ".json")}
    bad += [name for name in sorted(shown) if re.search(r"\bSPEC\b", (ROOT / name).read_text())]
    assert not bad, f"{len(bad)} places name the SPEC (cite docs/rules.md): {bad[:10]}"


def _issue_strings(tree: ast.AST) -> list[int]:
    """Lines of string constants (docstrings included) naming the project's issue tracker
    (`issue 38`, `issues 6, 13`); comments are not read."""
    return sorted({node.lineno for node in ast.walk(tree)
                   if isinstance(node, ast.Constant) and isinstance(node.value, str)
                   and re.search(r"\bissues? #?\d", node.value)})


def test_user_facing_text_names_no_internal_issue():
    """Help, messages, printed output and docstrings say what a thing does, not which of the
    project's issues asked for it: a user has no access to that tracker."""
    bad = [_where(p, line) for d in ("analysis", "probe", "cli", "otbench")
           for p in sorted((ROOT / d).rglob("*.py")) for line in _issue_strings(ast.parse(p.read_text()))]
    assert not bad, f"{len(bad)} strings name an internal issue: {bad[:10]}"
    planted = ast.parse('"""Plan (issue 38, item 4)."""\nx = 1  # issue 9 in a comment is fine\n'
                        'y = "an issue with 2 rows"\nz = f"see issues 6, 13"\n')
    assert _issue_strings(planted) == [1, 4]


def test_the_spec_rule_fails_on_a_planted_string():
    planted = ast.parse('"""A module (SPEC §4)."""\nx = 1  # SPEC §5 in a comment is fine\ny = "ok"\n')
    assert _spec_strings(planted) == [1]
