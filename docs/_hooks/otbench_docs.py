"""The documentation site's generated pages: built from the code at every build, so they cannot go stale.

A page asks for a generated part with a marker comment on a line of its own,
`<!-- otbench:NAME ARG -->`; this hook replaces it at build time:

* `cli`                    every command of `otbench.cli:main`, from click's own command tree;
* `job-keys stp|horizon`   every table and key of a job TOML, from the one rule table
                           (`otbench.probe.stp.STP_RULES` / `HORIZON_RULES`), each key's rule
                           read off the rule itself;
* `set-columns`            the measurement set's columns, from the Parquet contract that
                           `otbench.analysis.measurement` checks on load;
* `horizon-columns`        the two tables of a matched-horizon run directory;
* `api-index`              the list of the Python API pages;
* `include PATH`           a file of the repository, shown as it is (an example that runs);
* `measured PATH`          the paragraph of a benchmark's docstring that starts with "Measured"
                           (its recorded figures): a figure lives in the benchmark beside the code
                           that produced it, and a page shows it from there, never a copy.

The Python API pages (`reference/api/<package>.md`) are generated whole, one
per public package (a package of the project with an `__all__`); mkdocstrings
renders each name of `__all__` from its docstring. A marker this hook does not
know, a column or key without a note below, or a note for a column or key the
code no longer has, is a build warning, and the strict build (`make docs`,
`tests/test_docs.py`) fails on it. Formulas written `$...$` are rendered to
MathML here, at build time (latex2mathml), so the site needs no script and no
network to show them.
"""

from __future__ import annotations

import html
import inspect
import importlib
import logging
import re
import tomllib
from pathlib import Path

log = logging.getLogger("mkdocs.plugins.otbench_docs")
ROOT = Path(__file__).resolve().parents[2]
STAGE = ROOT / "build" / "docs-src"        # the import layout, for griffe's static analysis
MARKER = re.compile(r"^<!-- otbench:([a-z-]+)(?: ([\w./-]+))? -->$", re.M)

# ---------------------------------------------------------------- public packages


def public_packages() -> list[str]:
    """The installed packages (pyproject) that declare `__all__`, in pyproject order."""
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    out = []
    for name in cfg["tool"]["setuptools"]["packages"]:
        mod = importlib.import_module(name)
        if getattr(mod, "__all__", None):
            out.append(name)
    for i, module in enumerate(("otbench.errors", "otbench.registry", "otbench.descriptors")):
        if module not in out:              # modules, not packages, and public all the same
            out.insert(1 + i, module)
    return out


def api_page(package: str) -> str:
    return f"reference/api/{package}.md"


def _stage_sources() -> None:
    """build/docs-src/otbench: the repository's folders laid out as the import names.

    The repo keeps the design's top-level folders (`analysis/`, `probe/`, `cli/`)
    and installs them under `otbench.*`; griffe reads sources by import name, so it
    is given this tree of links (nothing is copied).
    """
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    pkg = STAGE / "otbench"
    pkg.mkdir(parents=True, exist_ok=True)
    links = {p.name: p for p in (ROOT / "otbench").iterdir() if p.name != "__pycache__"}
    for name, folder in cfg["tool"]["setuptools"]["package-dir"].items():
        if name != "otbench":
            links[name.split(".", 1)[1]] = ROOT / folder
    for name, target in links.items():
        link = pkg / name
        if link.is_symlink() and link.resolve() == target.resolve():
            continue
        if link.is_symlink():
            link.unlink()
        link.symlink_to(target, target_is_directory=target.is_dir())


# ---------------------------------------------------------------- the CLI


def _option_row(p) -> str:
    import click

    if isinstance(p, click.Argument):
        return ""
    names = ", ".join(f"`{o}`" for o in [*p.opts, *p.secondary_opts])
    kind = "flag" if p.is_flag else (p.type.name if not isinstance(p.type, click.Choice)
                                     else " \\| ".join(p.type.choices))
    default = ""
    unset = getattr(importlib.import_module("click._utils"), "UNSET", None)   # click >= 8.3: "no default"
    if (not p.is_flag and p.default not in (None, "", ()) and p.default is not unset
            and not callable(p.default) and p.show_default is not False):
        d = p.default
        default = f"`{', '.join(map(str, d)) if isinstance(d, (tuple, list)) else d}`"
    helptext = " ".join((p.help or "").split()).replace("|", "\\|")
    return f"| {names} | {html.escape(kind)} | {default} | {helptext} |"


def cli_markdown() -> str:
    import click

    from otbench.cli import main

    out: list[str] = []

    def walk(cmd, path: list[str], ctx):
        name = " ".join(path)
        depth = min(len(path) + 2, 5)
        out.append(f"{'#' * depth} `{name}`\n")
        usage = " ".join(cmd.collect_usage_pieces(ctx))
        out.append(f"```text\n{name} {usage}\n```\n")
        doc = (cmd.help or "").split("\f")[0]
        out.append(_dedent_help(doc) + "\n")
        args = [p for p in cmd.params if isinstance(p, click.Argument)]
        if args:
            out.append("Arguments: " + ", ".join(f"`{a.human_readable_name}`" for a in args) + ".\n")
        rows = [r for r in (_option_row(p) for p in cmd.params) if r]
        if rows:
            out.append("| option | type | default | meaning |\n|---|---|---|---|")
            out.extend(rows)
            out.append("")
        if isinstance(cmd, click.Group):
            for sub in sorted(cmd.commands):
                c = cmd.commands[sub]
                walk(c, [*path, sub], click.Context(c, info_name=sub, parent=ctx))

    walk(main, ["otbench"], click.Context(main, info_name="otbench"))
    summary = ["| command | what it does |", "|---|---|"]
    for path in cli_commands()[1:]:
        cmd = main
        for part in path.split()[1:]:
            cmd = cmd.commands[part]
        what = cmd.get_short_help_str(limit=150).replace("|", "\\|")
        summary.append(f"| [`{path}`](#{path.replace(' ', '-')}) | {what} |")
    return "\n".join(summary) + "\n\n" + "\n".join(out)


def cli_commands() -> list[str]:
    """Every command path, `otbench`, `otbench probe run`, ... (the test checks each is documented)."""
    import click

    from otbench.cli import main

    out = []

    def walk(cmd, path):
        out.append(" ".join(path))
        if isinstance(cmd, click.Group):
            for sub, c in cmd.commands.items():
                walk(c, [*path, sub])
    walk(main, ["otbench"])
    return out


def _dedent_help(text: str) -> str:
    import inspect

    text = inspect.cleandoc(text)
    # click's \b marks a paragraph that keeps its line breaks: show it as a block
    parts = []
    for para in text.split("\n\n"):
        if para.startswith("\b\n"):
            parts.append("```text\n" + para[2:] + "\n```")
        else:
            parts.append(para)
    return "\n\n".join(parts)


# ---------------------------------------------------------------- job TOML keys

# Every key's rule, default, type and meaning come from the job key table itself
# (`otbench.probe.stp.describe_job_keys`): nothing here restates or parses them.


def job_keys(kind: str) -> list[tuple[str, str, str]]:
    """(table, key, full name) of every key of job kind `kind` (`stp` or `horizon`)."""
    from otbench.probe.stp import describe_job_keys

    out = []
    for d in describe_job_keys(kind):
        prefix = "" if kind == "stp" or d["shared"] else "horizon."
        full = f"{prefix}{d['table']}" if d["key"] == "*" else f"{prefix}{d['table']}.{d['key']}"
        out.append((d["table"], d["key"], full))
    return out


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def job_markdown(kind: str) -> str:
    from otbench.probe.stp import describe_job_keys

    out: list[str] = []
    seen: set[str] = set()
    for d in describe_job_keys(kind):
        table = d["table"]
        if table not in seen:                    # a table's heading, before its first key
            seen.add(table)
            if out:
                out.append("")
            if d["shared"]:
                out.append(f"### `[{table}]`\n\nThe probe job's [`[{table}]`](#{table}) table, the "
                           f"same keys and rules.")
            else:
                form = f"[[{table}]]" if d["form"] == "array" else f"[{table}]"
                anchor = table if kind == "stp" else f"horizon-{table}"
                out.append(f"### `{form}` {{#{anchor}}}\n")
                if d["form"] != "map":
                    out.append("| key | value | default | meaning |\n|---|---|---|---|")
        if d["shared"]:
            continue
        if not d["note"]:
            log.warning("job key %s.%s has no note in its key table", table, d["key"])
        if d["form"] == "map":
            out.append(f"Any key; each value {_cell(d['rule'])}: {d['note']}.")
            continue
        alias = f" (also: {', '.join(f'`{a}`' for a in d['aliases'])})" if d["aliases"] else ""
        out.append(f"| `{d['key']}` | {_cell(d['rule'])} | {_cell(d['default'])} | "
                   f"{_cell(d['note'])}{alias} |")
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------- measurement-set columns

COLUMN_NOTES = {
    "model": "model id",
    "group": "reporting benchmark group (AIME, MATH500, GPQA-Diamond, LiveCodeBench, or your own)",
    "dataset": "source dataset inside the group (AIME2024, …); defaults to the group",
    "question": "question id, unique within its group; a question is shared by all models",
    "trajectory": "trajectory index `s` (not necessarily contiguous)",
    "split": "`train` / `validation` / `test` or null, the same for all trajectories of a question",
    "probes": "answer probes per position `P` (the same for all trajectories of a model's question)",
    "n": "number of steps",
    "L": "`n+1` values: retained thinking tokens at `k = 0..n`; `L[0] = 0`, non-decreasing",
    "C": "`n+1` values: correct probes at `k`, each in `0..P`",
    "y": "the trajectory's own original answer was correct (0/1)",
    "finished": "thinking ended naturally (false: it hit the limit)",
    "question_text": "the question, when known (may be null)",
}


def set_columns_markdown() -> str:
    from otbench.analysis.measurement import describe_columns   # the loader's contract

    cols = describe_columns()
    rows = ["| column | Arrow type | meaning |", "|---|---|---|"]
    for name, typ in cols["set"].items():
        if name not in COLUMN_NOTES:
            log.warning("measurement-set column %s has no note in COLUMN_NOTES", name)
        rows.append(f"| `{name}` | `{typ}` | {COLUMN_NOTES.get(name, '')} |")
    for stale in sorted(set(COLUMN_NOTES) - set(cols["set"])):
        log.warning("COLUMN_NOTES has %s, which the measurement set no longer has", stale)
    rows.append(f"| `{cols['signal_prefix']}<name>` | `list<double>` | optional per-position signal, "
                "`n+1` values, e.g. `signal.margin` (the ThinkBrake margin) |")
    return "\n".join(rows) + "\n"


def horizon_columns_markdown() -> str:
    from otbench.analysis.measurement import describe_columns    # the run directory's contract

    out = []
    for title, cols in describe_columns()["horizon"].items():
        out.append(f"`{title}`:\n\n| column | Arrow type |\n|---|---|")
        out.extend(f"| `{n}` | `{t}` |" for n, t in cols.items())
        out.append("")
    return "\n".join(out)


def trace_fields_markdown() -> str:
    """The field names the trace readers look up, from the readers' own lists."""
    from otbench.probe.data import describe_trace_fields

    tr = describe_trace_fields()

    def names(xs):
        return ", ".join(f"`{x}`" for x in xs).replace("|", "\\|")

    return "\n".join([
        "| what | looked up in (first found wins) |", "|---|---|",
        f"| the question's id (`lm-eval`: in `doc`; `chat`: in the row) | {names(tr['question_id'])} (`chat`: `question_id`, `id`) |",
        f"| the question's text (`lm-eval`: in `doc`; `chat`: in the row, else the last user turn) | {names(tr['question_text'])} |",
        f"| the reasoning (`chat`: in the assistant turn, then the row) | {names(tr['reasoning'])}, else inside the markers |",
        f"| reasoning markers in text | {names(o + ' … ' + c for o, c in tr['markers'])} |",
    ]) + "\n"


# ---------------------------------------------------------------- the analysis facade


def analysis_names() -> list[tuple[str, str, str]]:
    """(public name, subpackage, name there) for every name of `otbench.analysis.__all__`."""
    import otbench.analysis as oa

    return oa.describe_exports()


def analysis_names_markdown(page_dir: str) -> str:
    rows = ["| name | defined in |", "|---|---|"]
    for public, sub, inner in analysis_names():
        rel = _relative(api_page(sub), page_dir)
        shown = f"`{public}`" if public == inner else f"`{public}` (`{inner}` there)"
        rows.append(f"| [{shown}]({rel}#{sub}.{inner}) | `{sub}` |")
    return "\n".join(rows) + "\n"


def _relative(target: str, page_dir: str) -> str:
    import posixpath

    return posixpath.relpath(target, page_dir or ".")


# ---------------------------------------------------------------- mkdocs events


class _DocstringNotes(logging.Filter):
    """The code's docstrings are prose, not a markup: what griffe and autorefs say about them
    (a `Args:` line griffe cannot split, `x[P]` read as a link) is a note, not a site error.

    Such records are lowered to DEBUG (shown by `mkdocs build --verbose`) and counted; every
    other warning (a link or anchor of a page, a marker, a missing note) still fails the
    strict build.
    """

    count = 0

    def filter(self, record):
        msg = record.getMessage()
        if record.name.endswith("griffe") or "/docs-src/" in msg:
            if record.levelno >= logging.WARNING:
                record.levelno, record.levelname = logging.DEBUG, "DEBUG"
                _DocstringNotes.count += 1
                return logging.getLogger("mkdocs").isEnabledFor(logging.DEBUG)
        return True


for _name in ("griffe", "mkdocs.plugins.griffe", "mkdocs.plugins.mkdocs_autorefs._internal.references",
              "mkdocs.plugins.mkdocs_autorefs._internal.plugin"):
    logging.getLogger(_name).addFilter(_DocstringNotes())

_stage_sources()          # at import: mkdocstrings resolves its search paths before on_config


def on_config(config):
    return config


def on_files(files, config):
    from mkdocs.structure.files import File

    for package in public_packages():
        mod = importlib.import_module(package)
        names = sorted(getattr(mod, "__all__", ()))
        doc = (mod.__doc__ or "").strip().split("\n\n")[0]
        body = [f"# {package}\n"]
        if package == "otbench.analysis":
            body.append(_escape_md(doc) + "\n" if doc else "")
            body.append("The lazy facade: every name below is loaded from its subpackage on first "
                        "use (`import otbench.analysis` imports no JAX). Each links to its entry.\n")
            body.append(analysis_names_markdown("reference/api"))
        else:
            static, extra = _split_members(package, names)
            if static:
                members = "\n".join(f"        - {n}" for n in static)
                body.append(f"::: {package}\n    options:\n      members:\n{members}\n")
            body.extend(extra)
        files.append(File.generated(config, api_page(package), content="\n".join(body)))
    files.append(File.generated(config, "assets/pygments.css", content=_pygments_css()))
    return files


def _split_members(package: str, names: list[str]) -> tuple[list[str], list[str]]:
    """The names mkdocstrings renders from `package`, and entries written here for the rest.

    Two kinds of public name cannot be rendered from the package's own namespace:
    re-exports of another library (`otbench.analysis.core`'s jaxtyping shape types),
    and names a module-level `__getattr__` provides lazily (`ExitProcessor`, which
    must not import vLLM on `import otbench.probe.online`: it is looked up in the
    package's sources, not imported). The first get a line naming the library; the
    second are rendered from the private module that defines them, under the public
    name's anchor.
    """
    mod = importlib.import_module(package)
    static, extra = [], []
    for name in names:
        if name not in vars(mod):                       # provided lazily by __getattr__
            home = _defining_module(package, name)
            if home is None:
                log.warning("%s.%s: in __all__ but defined nowhere in the package", package, name)
                continue
            extra.append(f"## `{name}` {{#{package}.{name}}}\n\nLoaded on first use (a module "
                         f"`__getattr__`), defined in `{home}`.\n\n::: {home}.{name}\n"
                         "    options:\n      show_root_heading: false\n")
            continue
        obj = vars(mod)[name]
        origin = getattr(obj, "__module__", None) if isinstance(obj, type) or inspect.isroutine(obj) else None
        if isinstance(origin, str) and not origin.startswith("otbench"):
            extra.append(f"## `{name}` {{#{package}.{name}}}\n\nRe-exported from "
                         f"`{origin}.{name}` (its own documentation applies).\n")
        else:
            static.append(name)
    return static, extra


def _defining_module(package: str, name: str) -> str | None:
    folder = Path(importlib.import_module(package).__file__).parent
    # indented too: a name may be defined under a module-level `if` (a class for an optional library)
    pattern = re.compile(rf"^[ \t]*(?:class|def) {re.escape(name)}\b|^[ \t]*{re.escape(name)}\s*[:=]", re.M)
    # its private modules, those of its private subpackages too (`otbench.probe.online._processor`)
    for src in sorted(folder.rglob("_*.py")):
        rel = src.relative_to(folder).with_suffix("").parts
        if src.name != "__init__.py" and all(part.startswith("_") for part in rel) \
                and pattern.search(src.read_text(encoding="utf-8")):
            return ".".join((package, *rel))
    return None


def on_post_build(config):
    if _DocstringNotes.count:
        log.info("%d notes on the code's docstrings (griffe, autorefs): `mkdocs build --verbose` "
                 "shows them", _DocstringNotes.count)


def _escape_md(text: str) -> str:
    return text.replace("<", "&lt;")


def measured_markdown(path: str) -> str | None:
    """The "Measured ..." paragraph of the module docstring of `path` (a benchmark), or None."""
    import ast

    src = ROOT / path
    if ".." in path or not src.is_file() or src.suffix != ".py":
        return None
    doc = ast.get_docstring(ast.parse(src.read_text(encoding="utf-8"))) or ""
    paras = [p for p in re.split(r"\n\s*\n", doc) if p.startswith("Measured")]
    if len(paras) != 1:
        return None
    body = " ".join(line.strip() for line in paras[0].splitlines())
    return f"{body} (recorded in `{path}`.)\n"


def on_page_markdown(markdown, page, config, files):
    page_dir = str(Path(page.file.src_uri).parent).replace(".", "") if "/" in page.file.src_uri else ""

    def fill(m):
        name, arg = m.group(1), m.group(2)
        if name == "cli":
            return cli_markdown()
        if name == "job-keys" and arg in ("stp", "horizon"):
            return job_markdown(arg)
        if name == "set-columns":
            return set_columns_markdown()
        if name == "horizon-columns":
            return horizon_columns_markdown()
        if name == "include" and arg and (ROOT / arg).is_file() and ".." not in arg:
            lang = {".py": "python", ".toml": "toml", ".json": "json"}.get(Path(arg).suffix, "text")
            return f"```{lang}\n{(ROOT / arg).read_text(encoding='utf-8').rstrip()}\n```\n"
        if name == "measured" and arg and measured_markdown(arg) is not None:
            return measured_markdown(arg)
        if name == "trace-fields":
            return trace_fields_markdown()
        if name == "api-index":
            return "\n".join(f"* [`{p}`]({_relative(api_page(p), page_dir)})" for p in public_packages()) + "\n"
        log.warning("%s: unknown generated part <!-- otbench:%s -->", page.file.src_uri, name)
        return m.group(0)

    return MARKER.sub(fill, markdown)


_MATH = re.compile(r'<(span|div) class="arithmatex">(.*?)</\1>', re.S)


def on_page_content(html_text, page, config, files):
    """Formulas to MathML at build time: the browser draws them, no script, no network."""
    from latex2mathml.converter import convert

    def render(m):
        tag, tex = m.group(1), html.unescape(m.group(2)).strip()
        display = tag == "div"
        for a, b in (("\\(", "\\)"), ("\\[", "\\]"), ("$$", "$$"), ("$", "$")):
            if tex.startswith(a) and tex.endswith(b):
                tex = tex[len(a):len(tex) - len(b)]
                break
        mathml = convert(tex, display="block" if display else "inline")
        return f'<{tag} class="math">{mathml}</{tag}>'

    html_text = _MATH.sub(render, html_text)
    # A pipe inside code in a table cell is written `\|` (else it splits the cell); the table
    # extension keeps the backslash inside code, so it is dropped here.
    return _CELL_CODE.sub(lambda m: m.group(0).replace("\\|", "|"), html_text)


_CELL_CODE = re.compile(r"<td>.*?</td>", re.S)


def _pygments_css() -> str:
    from pygments.formatters import HtmlFormatter

    return HtmlFormatter(style="default").get_style_defs(".highlight")
