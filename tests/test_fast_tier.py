"""The quick tier's own rules (tests/_fast_tier.py, `make test-fast`):

* every entry names a test file and tests that exist (a renamed test fails here instead of
  silently leaving the tier);
* it starts no engine or server and runs no benchmark smoke: none of its files is one the
  suite hands out first for its engines (tests/conftest.py, HEAVY_FIRST) or a benchmark smoke,
  and none of its tests takes an engine or server fixture;
* the coverage rule a whole-tier run applies (tests/conftest.py, `pytest_sessionfinish`)
  names a library module no test process loaded, and only such modules;
* a property's own example budget is capped in the tier.
"""

import ast
from pathlib import Path

from _fast_tier import (CHILD_PROGRAMS, FAST_EXAMPLES, FAST_TIER, PENDING, cap_examples, in_tier, tier_key,
                        tier_line, untouched)
from _library import ROOT, import_graph, library_files
from hypothesis import given, settings
from hypothesis import strategies as st

# Fixtures that start an engine or a server, or build the tiny model only an engine reads
# (tests/probe/conftest.py and the files that define their own): a tier test takes none.
ENGINE_FIXTURES = ("engine", "server", "served", "vllm", "tiny_model")


def _tests_of(path: Path) -> dict[str, ast.FunctionDef]:
    """`name` or `Class::name` -> the test function, as pytest collects them from `path`."""
    out = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
            out[node.name] = node
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            for fn in node.body:
                if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and fn.name.startswith("test"):
                    out[f"{node.name}::{fn.name}"] = fn
    return out


def test_every_entry_names_existing_tests():
    bad = []
    for rel, names in FAST_TIER.items():
        path = ROOT / rel
        if not (path.is_file() and path.name.startswith("test_")):
            bad.append(f"{rel}: no such test file")
            continue
        have = _tests_of(path)
        bad += [f"{rel}::{n}: no such test" for n in names or () if n not in have]
        if names is not None and not names:
            bad.append(f"{rel}: an empty selection (use None for the whole file)")
    assert not bad, bad


def test_the_tier_starts_no_engine_server_or_benchmark():
    tree = ast.parse((ROOT / "tests" / "conftest.py").read_text())
    heavy = next(set(ast.literal_eval(n.value)) for n in tree.body if isinstance(n, ast.Assign)
                 and [t.id for t in n.targets if isinstance(t, ast.Name)] == ["HEAVY_FIRST"])
    assert "tests/test_benchmarks_online.py" in heavy
    bad = [rel for rel in FAST_TIER if rel in heavy or Path(rel).name.startswith("test_benchmarks")]
    for rel, names in FAST_TIER.items():
        for name, fn in _tests_of(ROOT / rel).items():
            if names is not None and name not in names:
                continue
            args = [a.arg for a in fn.args.args]
            bad += [f"{rel}::{name} takes {a}" for a in args if any(w in a for w in ENGINE_FIXTURES)]
    assert not bad, bad


def test_selection_reads_the_test_name_without_its_parameters():
    tier = {"tests/a.py": None, "tests/b.py": ("test_x", "TestC::test_y")}
    assert tier_key("tests/b.py::TestC::test_y[1-2]") == ("tests/b.py", "TestC::test_y")
    assert in_tier("tests/a.py::test_anything[3]", tier)
    assert in_tier("tests/b.py::test_x[p]", tier) and in_tier("tests/b.py::TestC::test_y", tier)
    assert not in_tier("tests/b.py::test_xy", tier) and not in_tier("tests/c.py::test_x", tier)


def test_the_coverage_rule_names_each_module_no_process_loaded(tmp_path):
    for rel in ("analysis/__init__.py", "analysis/x/__init__.py", "analysis/x/_kept.py",
                "analysis/x/_planted.py", "otbench/__init__.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("")
    library = set(library_files(tmp_path))
    assert library == {"otbench", "otbench.analysis", "otbench.analysis.x",
                       "otbench.analysis.x._kept", "otbench.analysis.x._planted"}
    worker_a = {"otbench", "otbench.analysis", "numpy"}
    worker_b = {"otbench.analysis.x", "otbench.analysis.x._kept", "otbench.probe.other"}
    missing = untouched(library, worker_a | worker_b, exempt=())
    assert missing == ["otbench.analysis.x._planted"]
    assert untouched(library, worker_a | worker_b | {"otbench.analysis.x._planted"}, exempt=()) == []
    # an exempt module is left out while unloaded, and named once it is loaded (a stale entry)
    assert untouched(library, worker_a | worker_b, exempt={"otbench.analysis.x._planted"}) == []
    assert untouched(library, library, exempt={"otbench.analysis.x._kept"}) == ["otbench.analysis.x._kept"]
    assert tier_line(missing).endswith(": otbench.analysis.x._planted")
    # the real library: every module has a name the rule can be checked against
    assert "otbench.probe.online._certify._cap" in library_files()


def test_a_property_s_own_budget_is_capped():
    @settings(max_examples=200, deadline=None)
    @given(st.integers())
    def prop(x):
        seen.append(x)

    @given(st.integers())
    def small(x):
        pass

    seen: list[int] = []
    assert cap_examples(prop) and prop._hypothesis_internal_use_settings.max_examples == FAST_EXAMPLES
    assert prop._hypothesis_internal_use_settings.deadline is None          # the rest is kept
    prop()
    assert 0 < len(seen) <= FAST_EXAMPLES
    small._hypothesis_internal_use_settings = settings(max_examples=FAST_EXAMPLES)
    assert not cap_examples(small) and not cap_examples(lambda: None)


def test_child_programs_are_started_by_name_and_never_imported():
    """A child program cannot be loaded by a test process: no library module imports it, and
    some library module starts it by name (`python -m MODULE` or its file)."""
    files = library_files()
    graph = import_graph(files)
    sources = {m: p.read_text() for m, p in files.items()}
    assert set(CHILD_PROGRAMS) | set(PENDING) <= set(files)
    for child in CHILD_PROGRAMS:
        assert not [m for m, deps in graph.items() if child in deps], child
        by_name = (child, Path(files[child]).name)
        assert [m for m, text in sources.items() if m != child and any(n in text for n in by_name)], child
