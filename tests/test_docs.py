"""The documentation cannot go stale: the site builds in strict mode and covers the code.

* `mkdocs build --strict` passes: every warning is an error, every internal link and
  anchor resolves, every generated part (CLI, job keys, columns, API) is filled;
* every name of every public package's `__all__`, every CLI command and every job
  key has its entry in the generated reference;
* the built site fetches nothing (no script, style sheet or font from the network; the
  formulas are MathML written at build time);
* the code blocks of README.md and docs/ marked `<!-- tested: NAME -->` run as written;
* every page's code fences are balanced and every backticked pointer to an object
  (`otbench.x.y`, `otbench.x:y`, `analysis/x.py:name`) names one that exists;
* the quickstart's `console` blocks show what their commands print, exactly (durations and
  the temporary folder aside); `OTBENCH_REGENERATE=1` rewrites them from a run, for review;
* the README is a front door that keeps the two newcomer commands, and every test the
  promise table names exists.
"""

import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
pytest.importorskip("mkdocs", reason="the `docs` extra is not installed")
pytest.importorskip("mkdocstrings_handlers.python", reason="the `docs` extra is not installed")
sys.path.insert(0, str(DOCS / "_hooks"))
import otbench_checks as checks  # noqa: E402  (the pages' fence and pointer checks)
import otbench_docs as hook  # noqa: E402  (the site's generator: the same lists the pages are built from)

TESTED = re.compile(r"<!-- tested: ([\w-]+) -->\n```python\n(.*?)```", re.S)
TWO_COMMANDS = """```bash
make demo    # create .venv, install otbench, run the main job on the embedded default
make test    # create .venv (if needed), install the test extras, run the test suite
```"""


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-4000:]
    return out


def ids(page: Path) -> set[str]:
    return set(re.findall(r'\sid="([^"]+)"', page.read_text(encoding="utf-8")))


def test_strict_build_writes_every_page(site):
    for page in ("index.html", "rules.html", "reference/cli.html", "reference/job-toml.html",
                 "reference/measurement-set.html", "reference/promises.html", "guides/probe.html"):
        assert (site / page).stat().st_size > 2_000, page


def test_every_public_name_has_an_api_entry(site):
    packages = hook.public_packages()
    assert {"otbench.analysis", "otbench.analysis.frontier", "otbench.probe.stp", "otbench.files",
            "otbench.errors"} <= set(packages)
    missing = []
    for package in packages:
        names = importlib.import_module(package).__all__
        if package == "otbench.analysis":          # the facade: a table linking each entry
            text = (site / "reference/api/otbench.analysis.html").read_text(encoding="utf-8")
            for public, sub, inner in hook.analysis_names():
                target = site / f"reference/api/{sub}.html"
                if f"#{sub}.{inner}" not in text or f"{sub}.{inner}" not in ids(target):
                    missing.append(f"otbench.analysis.{public}")
            assert len(hook.analysis_names()) == len(names)
            continue
        anchors = ids(site / f"reference/api/{package}.html")
        missing += [f"{package}.{n}" for n in names if f"{package}.{n}" not in anchors]
    assert not missing, f"no API entry for {missing}"


def test_every_cli_command_is_documented(site):
    anchors = ids(site / "reference/cli.html")
    commands = hook.cli_commands()
    assert {"otbench probe run", "otbench bench compare", "otbench horizon analyze",
            "otbench online certify", "otbench report"} <= set(commands)
    missing = [c for c in commands if c.replace(" ", "-") not in anchors]
    assert not missing, f"commands without a reference entry: {missing}"
    text = (site / "reference/cli.html").read_text(encoding="utf-8")
    assert "Sentinel" not in text and "x&lt;=None" not in text     # click's "no default", "no bound"
    from otbench.cli import main
    assert "<code>--ray-address</code>" in text and main.commands["probe"].commands["run"].help.split()[0] in text


def test_every_job_key_is_documented(site):
    text = (site / "reference/job-toml.html").read_text(encoding="utf-8")
    # each table's section runs from its heading to the next heading
    sections = dict(re.findall(r'<h3 id="([\w-]+)">(.*?)(?=<h[23] |\Z)', text, re.S))
    missing = []
    from otbench.probe.stp import describe_job_keys

    for kind in ("stp", "horizon"):
        for d in describe_job_keys(kind):
            table, key = d["table"], d["key"]
            if d["shared"]:
                continue                      # the probe job's table, linked
            body = sections.get(table if kind == "stp" else f"horizon-{table}", "")
            if key != "*" and f"<code>{key}</code>" not in body:
                missing.append(f"{kind}: [{table}] {key}")
    assert not missing, f"job keys without a reference entry: {missing}"
    assert "at most 65535" in sections["probe"]         # the rule is read off the rule itself


def test_every_measurement_set_column_is_documented(site):
    from otbench.analysis.measurement._io import REQUIRED

    text = (site / "reference/measurement-set.html").read_text(encoding="utf-8")
    missing = [c for c in REQUIRED if f"<code>{c}</code>" not in text]
    assert not missing, missing


def test_the_site_fetches_nothing(site):
    remote = re.compile(r'<(?:script|img|iframe)[^>]*\ssrc="(?:https?:)?//|<link[^>]*\shref="(?:https?:)?//'
                        r'|url\(\s*["\']?(?:https?:)?//|@import\s+["\']?(?:url\()?["\']?(?:https?:)?//')
    found = [f"{p.relative_to(site)}: {m.group(0)}" for p in site.rglob("*")
             if p.suffix in (".html", ".css", ".js") for m in remote.finditer(p.read_text(errors="replace"))]
    assert not found, found[:5]
    rules = (site / "rules.html").read_text(encoding="utf-8")
    assert rules.count("<math") >= 10 and "\\frac" not in re.sub(r"<math.*?</math>", "", rules, flags=re.S)


def marked_blocks() -> dict[str, tuple[str, str]]:
    out = {}
    for md in [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]:
        for name, code in TESTED.findall(md.read_text(encoding="utf-8")):
            assert name not in out, f"two blocks named {name}"
            out[name] = (str(md.relative_to(ROOT)), code)
    return out


BLOCKS = marked_blocks()


def test_the_marked_blocks_are_found():
    assert {"five-lines", "python-api", "tidy-tables", "own-measurements", "trace-records"} <= set(BLOCKS)
    assert BLOCKS["five-lines"][0] == "README.md"


@pytest.mark.parametrize("name", sorted(BLOCKS))
def test_marked_block_runs(name, tmp_path, monkeypatch, capsys):
    where, code = BLOCKS[name]
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    exec(compile(code, f"{where}:{name}", "exec"), {"__name__": "__docs__"})
    out = capsys.readouterr().out.splitlines()
    if name == "python-api":
        assert out[0].split() == ["model", "group", "OR", "AD"]
        assert len(out) == 1 + 12                    # 3 models x 4 groups in the small set
        assert (tmp_path / "frontiers.png").stat().st_size > 10_000
    if name == "own-measurements":
        assert out[-1] == "0.4243 0.25"              # the page's worked numbers
    if name == "trace-records":
        assert [line.split()[0] for line in out] == ["otbench", "lm-eval", "chat", "eee"]
        assert all("'2 + 2 is 4.' True 'The answer is" in line for line in out), out
    if name == "five-lines":
        assert re.fullmatch(r"\{'dr': [\d.]+, 'fb': [\d.]+, 'dee': [\d.]+\}", out[-1]), out[-1]


def test_readme_is_a_front_door():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 200
    assert TWO_COMMANDS in text                    # exactly the two commands CI and newcomers run
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text)
    assert len(links) >= 15 and not [x for x in links if not (ROOT / x).exists()]
    figure = ROOT / "docs" / "assets" / "demo-frontiers.png"
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and figure.stat().st_size < 400_000


def test_every_pinned_test_exists():
    """Each test the promise table names exists (a renamed test fails here, not silently)."""
    text = (DOCS / "reference" / "promises.md").read_text(encoding="utf-8")
    rows = [r for r in text.splitlines() if r.startswith("| ") and "Pinned by" not in r and "---" not in r]
    assert len(rows) >= 30
    checked = 0
    for row in rows:
        current = None
        for tok in re.findall(r"`([^`]+)`", row.rsplit(" | ", 1)[1]):
            m = re.fullmatch(r"((?:[\w/]+/)?test_\w+\.py)?(?:::(\w+)(?:\[.*\])?)?", tok)
            if not m or not (m.group(1) or m.group(2)):
                continue
            if m.group(1):
                path = ROOT / m.group(1)
                if not path.exists():
                    found = list((ROOT / "tests").rglob(Path(m.group(1)).name))
                    assert len(found) == 1, f"{tok}: no single file of that name ({row[:60]})"
                    path = found[0]
                current = path
            assert current is not None, f"{tok}: a test without its file ({row[:60]})"
            if m.group(2):
                assert re.search(rf"^\s*def {m.group(2)}\(", current.read_text(), re.M), \
                    f"{tok}: no test {m.group(2)} in {current.relative_to(ROOT)}"
            checked += 1
    assert checked >= 50


def test_every_tidy_result_type_documents_its_columns():
    """Each `Tidy` type in `otbench.analysis.__all__` has its field paragraph in the reports guide."""
    import otbench.analysis as oa

    text = (DOCS / "guides" / "reports.md").read_text(encoding="utf-8")
    tidy = [n for n in oa.__all__ if isinstance(getattr(oa, n), type)
            and issubclass(getattr(oa, n), oa.Tidy) and getattr(oa, n) is not oa.Tidy]
    assert {"MeasurementSet", "FrontierResult", "StrategyFrontier", "BootstrapResult",
            "FrontierBootstrap", "ProbeThinning", "TrajectoryThinning", "BenchResult",
            "Leaderboard"} <= set(tidy)
    missing = [n for n in tidy if f"**`{n}`**" not in text]
    assert not missing, f"docs/guides/reports.md has no field paragraph for {missing}"


def test_generated_parts_name_the_code():
    """The generator reads the code's own tables: a key or column it lacks a note for is a warning."""
    from otbench.probe.stp import HORIZON_RULES, STP_RULES

    keys = {n for kind in ("stp", "horizon") for *_, n in hook.job_keys(kind)}
    assert {f"{t}.{k}" for t, ks in STP_RULES.items() for k in ks} <= keys
    assert "horizon.stp_logit.set" in keys and len(HORIZON_RULES) >= 8
    from otbench.probe.stp import describe_job_keys

    # every key states its meaning once, in the key table the validator and the job reader use
    assert all(d["note"] for kind in ("stp", "horizon") for d in describe_job_keys(kind))
    probe = {d["key"]: d for d in describe_job_keys("stp") if d["table"] == "probe"}
    assert probe["units_per_batch"]["default"] == "16" and probe["b"]["default"] == "256"


def test_screenshots_in_a_real_browser(site, tmp_path):
    """The built site as a reader sees it: headless Chromium renders four pages (skipped without one)."""
    import shutil

    if not any(shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome")):
        pytest.skip("no headless Chromium on this machine (Debian: apt-get install chromium)")
    r = subprocess.run([sys.executable, str(ROOT / "examples" / "docs_screenshots.py"), "--site", str(site),
                        "--out", str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    for name in ("docs-home.png", "docs-guide.png", "docs-rules.png", "docs-cli.png"):
        png = (tmp_path / name).read_bytes()
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20_000, name


def command_lines() -> list[tuple[str, str]]:
    """(page, line) of every `otbench ...` command in a bash block of README.md and docs/."""
    out = []
    for md in [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]:
        for block in re.findall(r"```bash\n(.*?)```", md.read_text(encoding="utf-8"), re.S):
            joined = re.sub(r"\\\n\s*", " ", block)               # continuation lines
            for line in joined.splitlines():
                line = re.sub(r"^(?:[A-Z_]+=\S+\s+)+", "", line.split("#")[0].strip())   # VAR=x prefixes
                for part in re.split(r"\s*(?:&&|;|\|)\s*", line):
                    if part.startswith("otbench "):
                        out.append((str(md.relative_to(ROOT)), part))
    return out


def test_every_command_line_in_the_docs_names_real_options():
    """Each `otbench ...` line of the guides names a command and options the CLI has."""
    import shlex

    import click

    from otbench.cli import main

    lines = command_lines()
    assert len(lines) >= 30
    wrong = []
    for page, line in lines:
        words = shlex.split(line.replace("<", "").replace(">", ""))[1:]
        cmd, ctx_opts = main, {o for p in main.params for o in p.opts}
        while isinstance(cmd, click.Group) and words and words[0] in cmd.commands:
            cmd = cmd.commands[words.pop(0)]
        if isinstance(cmd, click.Group):
            if words and not words[0].startswith("-"):
                wrong.append(f"{page}: `{line}`: no command {words[0]!r}")
            continue
        known = ctx_opts | {o for p in cmd.params for o in (*p.opts, *p.secondary_opts)}
        for w in words:
            if w.startswith("--") and w.split("=")[0] not in known:
                wrong.append(f"{page}: `{line}`: {cmd.name} has no option {w.split('=')[0]}")
    assert not wrong, "\n".join(wrong)


def test_every_tidy_column_is_named_in_its_paragraph():
    """The reports guide names every `to_arrow()` column each result type really has."""
    import otbench.analysis as oa

    ms = oa.assign_splits(oa.simulate("tiny", seed=0))          # SYNTHETIC
    fr = oa.frontiers(ms, grid=5)
    bench = oa.bench_evaluate(ms, "thinkbrake-onectx", theta_grid=3)
    made = {"MeasurementSet": ms, "FrontierResult": fr, "StrategyFrontier": fr.strategies["dee"],
            "MetricsResult": oa.metrics(ms), "BootstrapResult": oa.bootstrap(ms, replicates=4),
            "ProbeThinning": oa.probe_thinning(ms, probes=(2,)),
            "TrajectoryThinning": oa.trajectory_thinning(ms, trajectories=(2,), draws=5),
            "BenchResult": bench, "Leaderboard": oa.leaderboard([bench])}
    text = (DOCS / "guides" / "reports.md").read_text(encoding="utf-8")
    missing = []
    for name, obj in made.items():
        start = text.index(f"**`{name}`**")
        end = text.find("\n**`", start + 1)
        section = text[start:end if end > 0 else None]
        for col in obj.to_arrow().column_names:
            shown = "signal.<name>" if col.startswith("signal.") else col
            if f"`{shown}`" not in section:
                missing.append(f"{name}.{col}")
    assert not missing, f"columns the reports guide does not name: {missing}"


def test_pages_name_no_internal_issue():
    """Users have no access to the project's issue tracker: no page cites one of its issues."""
    pages = [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]
    bad = [f"{p.relative_to(ROOT)}:{i}" for p in pages
           for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
           if re.search(r"\bissues? #?\d", line)]
    assert not bad, bad


def test_guides_cite_the_rules_page_not_the_spec():
    """Users have the rules page and the guides, not the design specification."""
    pages = [*DOCS.glob("*.md"), *(DOCS / "guides").glob("*.md")]
    bad = [f"{p.relative_to(ROOT)}:{i}" for p in pages
           for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
           if re.search(r"\bSPEC\b", line)]
    assert len(pages) >= 10 and not bad, bad


def test_every_page_has_closed_fences_and_live_pointers():
    pages = [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]
    found = [f"{p.relative_to(ROOT)}: {f}" for p in pages for f in checks.page_errors(p)]
    assert len(pages) >= 20 and not found, "\n".join(found)


def test_the_page_checks_fail_on_planted_faults(tmp_path):
    """A page with each fault: the checks name every one by line, and pass the good pointers."""
    page = tmp_path / "planted.md"
    page.write_text("\n".join([
        "Good: `otbench.analysis.load(DIR)`, `otbench.errors:OtbenchError`, `otbench.probe`,",
        "`analysis/bench/_splits.py:assign_splits`, `otbench.bench/1`, `make docs`.",
        "Bad: `otbench.probe.engines._openai.vllm_server_command` and",
        "`otbench.analysis:no_such.thing`, `otbench.nowhere`, `analysis/gone.py`,",
        "`cli/_plan.py:no_such_function`.",
        "```python",
        "x = `otbench.not_checked_in_code`",
        "``` A",
        "```bash",
        "otbench --help",
        "```",
        "````markdown",
        "```python",
        "````",
        "~~~",
        "never closed",
    ]) + "\n", encoding="utf-8")
    assert checks.page_errors(page) == [
        "line 8: fence with text 'A' inside the block opened at line 6 (a closing fence has nothing after it)",
        "line 9: fence with text 'bash' inside the block opened at line 6 (a closing fence has nothing after it)",
        "line 15: code fence never closed",
        "line 3: `otbench.probe.engines._openai.vllm_server_command`: otbench.probe.engines._openai has "
        "no vllm_server_command",
        "line 4: `otbench.analysis:no_such.thing`: otbench.analysis has no no_such",
        "line 4: `otbench.nowhere`: otbench has no nowhere",
        "line 4: `analysis/gone.py`: no file analysis/gone.py",
        "line 5: `cli/_plan.py:no_such_function`: cli/_plan.py defines no no_such_function",
    ]
    page.write_text("```bash\nok\n```\n\n`otbench.files.csv_text` and `otbench.probe.stp:STP_RULES`\n")
    assert checks.page_errors(page) == []


def command_table(text: str, heading: str) -> str:
    """The rows of the first table under `heading` (the lines starting `|` up to the next heading)."""
    section = text[text.index(heading):]
    section = section[:m.start()] if (m := re.search(r"^#", section[len(heading):], re.M)) is None \
        else section[:len(heading) + m.start()]
    return "\n".join(line for line in section.splitlines() if line.startswith("|"))


def missing_commands(table: str, group) -> list[str]:
    """Commands of the click `group` that `table` does not name: `otbench NAME` for each command,
    `NAME SUB` for each subcommand of a group."""
    import click

    out = []
    for name, cmd in sorted(group.commands.items()):
        if cmd.hidden:
            continue
        if not re.search(rf"otbench {re.escape(name)}\b", table):
            out.append(f"otbench {name}")
        if isinstance(cmd, click.Group):
            out += [f"otbench {name} {sub}" for sub, c in sorted(cmd.commands.items())
                    if not c.hidden and not re.search(rf"\b{re.escape(name)} {re.escape(sub)}\b", table)]
    return out


def test_the_front_doors_list_every_command():
    """The README's pipeline table and the docs' front page name every command of the CLI, read
    from the click group: a new command fails here until both list it."""
    from otbench.cli import main

    readme = command_table((ROOT / "README.md").read_text(encoding="utf-8"), "## The pipeline")
    index = command_table((DOCS / "index.md").read_text(encoding="utf-8"), "## Every command")
    assert len(main.commands) >= 19
    assert missing_commands(readme, main) == [], "README.md's pipeline table"
    assert missing_commands(index, main) == [], "docs/index.md's command table"
    for table in (readme, index):                     # the round's features, by their options
        assert "--hub-dir" in table and "--log" in table and "inspect-ai" in table
    import click

    planted = click.Group(commands=[click.Command("new-thing"), click.Group("g", commands=[
        click.Command("sub")]), click.Command("secret", hidden=True)])
    assert missing_commands("| a | `otbench g` |", planted) == ["otbench g sub", "otbench new-thing"]


CONSOLE = re.compile(r"```console\n\$ (.*?)\n(.*?)```", re.S)


def normalise(text: str, folder: Path) -> str:
    """The quickstart's two normalisations (the page states them): a duration `12.3 s` reads
    `<t> s`, the run's temporary folder reads `.`."""
    text = text.replace(str(folder) + "/", "").replace(str(folder), ".")
    return re.sub(r"\b\d+(?:\.\d+)? s\b(?!\.\w)", "<t> s", text)


def test_normalise_touches_only_durations_and_the_folder(tmp_path):
    shown = f"wrote {tmp_path}/sim/results/frontier.json in 12.5 s; 12 cells, 3 s.d.; {tmp_path}"
    assert normalise(shown, tmp_path) == "wrote sim/results/frontier.json in <t> s; 12 cells, 3 s.d.; ."


def test_the_quickstart_shows_what_its_commands_print(tmp_path):
    """Each `$ otbench ...` of docs/quickstart.md runs, in order, in one empty folder; stdout and
    stderr together (as a terminal shows them) equal the block's text after the command."""
    import os
    import shlex

    page = DOCS / "quickstart.md"
    text = page.read_text(encoding="utf-8")
    blocks = CONSOLE.findall(text)
    assert [c.split()[:2] for c, _ in blocks] == [["otbench", w] for w in
                                                   ("simulate", "validate", "metrics", "frontier", "bench")]
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "JAX_PLATFORMS": "cpu"}
    env.pop("OTBENCH_REGENERATE", None)
    got = []
    for command, _ in blocks:
        words = shlex.split(command)
        r = subprocess.run([sys.executable, "-c", "from otbench.cli import main; main(prog_name='otbench')",
                            *words[1:]], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=300)
        assert r.returncode == 0, f"$ {command}\n{r.stdout[-2000:]}"
        got.append(normalise(r.stdout, tmp_path))
    if os.environ.get("OTBENCH_REGENERATE"):
        parts = iter(got)
        page.write_text(CONSOLE.sub(lambda m: f"```console\n$ {m.group(1)}\n{next(parts)}```", text),
                        encoding="utf-8")
        pytest.skip("docs/quickstart.md rewritten from this run: review the diff")
    for (command, shown), out in zip(blocks, got):
        assert normalise(shown, tmp_path) == out, f"$ {command}: the page shows other output"


def test_the_calibration_figure_has_one_source():
    """online.md shows the certificate's calibration from the benchmark's own record, never a copy."""
    page = (DOCS / "guides" / "online.md").read_text(encoding="utf-8")
    assert "<!-- otbench:measured benchmarks/certify_calibration.py -->" in page
    assert not re.search(r"rejection rate \d", page)           # no figure typed into the page
    shown = hook.measured_markdown("benchmarks/certify_calibration.py")
    import ast

    doc = ast.get_docstring(ast.parse((DOCS.parent / "benchmarks" / "certify_calibration.py")
                                      .read_text(encoding="utf-8")))
    last = re.search(r"`(rejection rate [^`]*)`", " ".join(doc.split()))
    assert last and last.group(1) in shown and shown.startswith("Measured")
    assert hook.measured_markdown("benchmarks/none.py") is None
    assert hook.measured_markdown("../x.py") is None
