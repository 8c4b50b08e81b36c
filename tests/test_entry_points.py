"""Installed plug-ins (issue 57): entry points in `otbench.methods` and `otbench.graders` join
the registries (`otbench.registry.Registry`, its `group`), and a server loads an installed
method only when its operator listed it (the rule it applies to `module:object` plug-ins).

The registry tests put a distribution's metadata (a `.dist-info` folder with its
`entry_points.txt`) on `sys.path`, as an install does; `test_bench_list_shows_a_pip_installed_method`
installs a real package with pip (`--target`, no index, no network) and runs `otbench bench list`
with it on the path.
"""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from otbench.analysis.methods import METHODS, MethodError, online_method, resolve
from otbench.registry import Registry, RegistryError

OTBENCH = [sys.executable, "-c", "from otbench.cli import main; main()"]

TOY = textwrap.dedent('''
    class ToyStop:
        """Stop at the first boundary whose margin is below theta (a toy installed plug-in)."""

        name = "toy-stop"
        strategy = "dee"
        signals = ("margin",)
        online = "processor"

        def stop(self, view, theta):
            return view.signal("margin") < theta


    def toy_grader(items):
        return [(True, "ok") for _ in items]
''')


def _install(site: Path, dist: str, entry_points: str, module: str = "toy_otbench_plugin") -> None:
    """What an install leaves on the path: the module and its distribution's metadata."""
    (site / module).mkdir(parents=True, exist_ok=True)
    (site / module / "__init__.py").write_text(TOY)
    info = site / f"{dist.replace('-', '_')}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(textwrap.dedent(entry_points))


@pytest.fixture
def site(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "toy_otbench_plugin", raising=False)
    yield tmp_path
    sys.modules.pop("toy_otbench_plugin", None)


def _methods() -> Registry:
    """A fresh registry of the built-in methods with the method group (METHODS reads it once)."""
    return Registry("method", dict(METHODS._entries), error=MethodError, group="otbench.methods")


def test_an_installed_method_is_listed_and_resolved_like_a_registered_one(site):
    _install(site, "toy-otbench-plugin", """
        [otbench.methods]
        toy-stop = toy_otbench_plugin:ToyStop
    """)
    reg = _methods()
    assert reg.names() == tuple(METHODS._entries) + ("toy-stop",)     # after the built-ins
    assert "toy-stop" in reg and reg.target("toy-stop") == "toy_otbench_plugin:ToyStop"
    cls = reg.resolve("toy-stop")
    m = resolve(cls())
    assert (m.name, m.strategy, m.online) == ("toy-stop", "dee", "processor")


def test_a_server_loads_an_installed_method_only_when_listed(site, monkeypatch):
    _install(site, "toy-otbench-plugin", """
        [otbench.methods]
        toy-stop = toy_otbench_plugin:ToyStop
    """)
    import otbench.analysis.methods._method as method_module

    monkeypatch.setattr(method_module, "METHODS", _methods())
    with pytest.raises(MethodError, match="'toy-stop' .*is not allowed here"):
        online_method("toy-stop", allowed=())
    with pytest.raises(MethodError, match="not allowed here"):
        online_method("toy-stop", allowed=("toy_otbench_plugin:Other",))
    for listed in (("toy-stop",), ("toy_otbench_plugin:ToyStop",)):     # by name or target
        assert online_method("toy-stop", allowed=listed).name == "toy-stop"
    assert online_method("toy-stop").name == "toy-stop"        # no allow-list: not a server
    assert online_method("thinkbrake-onectx", allowed=()).name == "thinkbrake-onectx"    # built-ins always

    from otbench.probe.online import ControlSpec, OnlineControlError
    from otbench.probe.online._processor._rule import load_rule

    spec = ControlSpec(method="toy-stop", theta=0.5, family="qwen3")
    with pytest.raises(OnlineControlError, match="not allowed here"):
        load_rule(spec, allowed="")
    assert load_rule(spec, allowed="toy-stop").method.name == "toy-stop"


def test_an_installed_grader_joins_the_grader_registry(site):
    from otbench.probe.grading._batch import GRADERS

    _install(site, "toy-otbench-plugin", """
        [otbench.graders]
        toy = toy_otbench_plugin:toy_grader
    """)
    reg = Registry("grader", dict(GRADERS._entries), plugins=False, group="otbench.graders")
    assert reg.names()[-1] == "toy" and reg.resolve("toy")(["a", "b"]) == [(True, "ok")] * 2
    with pytest.raises(RegistryError, match="plug-ins are not loaded here"):
        reg.resolve("toy_otbench_plugin:toy_grader")          # a target string stays refused
    assert GRADERS.group == "otbench.graders"


@pytest.mark.parametrize("entry, rule", [
    ("deer = toy_otbench_plugin:ToyStop", "needs a name of its own"),
    ("toy-stop = toy_otbench_plugin", "must be 'module:object' with both parts"),
    ("toy-stop = toy_otbench_plugin:__class__", "without dunders"),
])
def test_a_bad_entry_point_is_one_line_naming_the_distribution(site, entry, rule):
    _install(site, "toy-otbench-plugin", f"[otbench.methods]\n{entry}\n")
    reg = _methods()
    assert "deer" in reg                   # a built-in name resolves without reading the group
    with pytest.raises(MethodError, match=rule) as e:
        reg.names()
    assert "toy-otbench-plugin's entry point" in str(e.value) and "\n" not in str(e.value)


def test_two_distributions_may_not_declare_one_name_with_two_targets(site):
    _install(site, "toy-otbench-plugin", "[otbench.methods]\ntoy-stop = toy_otbench_plugin:ToyStop\n")
    _install(site, "other-plugin", "[otbench.methods]\ntoy-stop = other_plugin:Stop\n",
             module="other_plugin")
    with pytest.raises(MethodError, match="declares the same name"):
        _methods().names()


def test_bench_list_shows_a_pip_installed_method(tmp_path):
    """A real install: pip builds the package and writes its metadata (no index, no network)."""
    pytest.importorskip("setuptools")
    pkg = tmp_path / "pkg"
    (pkg / "toy_otbench_plugin").mkdir(parents=True)
    (pkg / "toy_otbench_plugin" / "__init__.py").write_text(TOY)
    (pkg / "pyproject.toml").write_text(textwrap.dedent("""
        [build-system]
        requires = ["setuptools"]
        build-backend = "setuptools.build_meta"

        [project]
        name = "toy-otbench-plugin"
        version = "0.1"

        [project.entry-points."otbench.methods"]
        toy-stop = "toy_otbench_plugin:ToyStop"
    """))
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                    "--no-build-isolation", "--target", str(site), str(pkg)],
                   check=True, capture_output=True, timeout=300)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    r = subprocess.run(OTBENCH + ["bench", "list"], env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    line = next(ln for ln in r.stdout.splitlines() if ln.split()[:1] == ["toy-stop"])
    assert "DEE" in line and "toy installed plug-in" in line and "logits processor" in line
    bare = subprocess.run(OTBENCH + ["bench", "list"],
                          capture_output=True, text=True, timeout=300)
    assert bare.returncode == 0 and "toy-stop" not in bare.stdout
