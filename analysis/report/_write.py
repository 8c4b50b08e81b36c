"""`write_report`: a measurement set's tables and figures as an HTML report, PNGs, CSV and LaTeX.

Output folder::

    index.html                 the report (inline CSS; figures beside it; no network)
    trajectories.html          the trajectories of Figures 8-9 read cut by cut (`write_view`)
    figures/<name>.png         every figure, fixed size, deterministic bytes (the page shows it)
    figures/<name>.pdf, .svg   the same figure as vector files (``formats``; PDF by default)
    tables/<name>.csv, .tex    every table (CSV: display units; LaTeX: booktabs; a table over
                               seven columns is printed in parts, each with its identifying
                               columns: `_tables.parts`)
    data/<kind>.json           every analysis document the report used
    report.json                manifest: figures (title, caption, pixel size,
                               trajectories), tables, inputs, notes

What is drawn from what (the report's own numbering, `_numbering`: file
names, captions and hints all use it; a missing item leaves its number unused):

==============================  =========================================  ====================
figure / tables                 input                                      when
==============================  =========================================  ====================
fig1_overthinking, Tab. 1-2     metrics (OR, AD); bootstrap intervals      always
fig2_baselines, Tab. 3-8        metrics (accuracies, tokens, variation)    always
Tab. 9-13 (intervals)           bootstrap                                  with a bootstrap
fig3_local_changes, Tab. 14     the set's L, C (ΔP(k) by L(k))             always
fig4_frontiers, Tab. 15         frontier (DR, FB, DEE, A_full)             always
fig5_frontier_bands             bootstrap ``frontiers`` + frontier         with frontier intervals
fig6_otbench, Tab. 16           OTBench results + test-split frontiers     with OTBench results
fig7_sensitivity, Tab. 17-18    thinning (probes, trajectories)            with a thinning result
fig8_stp_examples               the set (rule: `_report_curves`)           always
fig9_question_trajectories      the set (rule: `_report_curves`)           a question with R >= 2
fig10_step_lengths, Tab. 19     the set's ``tokens`` table                 token ids present
fig11-13, Tab. 20-22            DIR/results/horizon.json                   with a horizon result
==============================  =========================================  ====================

Metrics and frontiers are computed, or reused from cached JSON when they
provably belong to the set; bootstrap, thinning and OTBench results are read
from JSON (`_report_inputs` documents the cache folder, ``DIR/results/``).
A figure whose input is missing is replaced by a note saying what to run.

Synthetic sets are marked everywhere: a banner on the page, a watermark and
a title tag on every figure, a ``#`` comment line in every CSV, a LaTeX
comment and caption sentence, and ``"synthetic": true`` in ``report.json``.

Determinism: the same set and documents give byte-identical files (no
timestamps, no absolute paths, fixed fonts and sizes, sorted JSON).
"""

import dataclasses
import json
import os
import shlex
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from otbench.analysis.measurement import MeasurementSet

from otbench.errors import OtbenchError
from otbench.files import atomic_dir

from . import _figures as figs
from . import _numbering as num
from . import _tables as tabs
from ._cost import cost_sections
from ._effort import effort_sections
from ._horizon import horizon_sections
from ._html import Section, render
from ._inputs import Doc, Inputs, ReportInputError, gather
from ._bench_section import otbench_section
from ._sections import (
    frontier_section,
    local_section,
    matrices_section,
    sensitivity_section,
    steps_section,
    trajectories_section,
)

SCHEMA = "otbench.report/1"


class ReportError(OtbenchError, ValueError):
    """The report cannot be written (bad output folder or unusable inputs)."""


def _source(source: Any, set_dir: Any) -> tuple[MeasurementSet, Path | None]:
    if isinstance(source, MeasurementSet):
        return source, None if set_dir is None else Path(set_dir)
    if set_dir is not None:
        raise ReportError("`set_dir` goes with an in-memory MeasurementSet, not with a directory")
    if isinstance(source, (str, os.PathLike)):
        from otbench.analysis.measurement import load

        return load(source), Path(source)
    raise ReportError(f"`ms_or_dir` must be a MeasurementSet or a directory, got "
                      f"{type(source).__name__}")


def _out_iv(out_dir: Any, inputs: Sequence[Any], overwrite: bool) -> Path:
    """The output folder under the one output rule (`otbench.files.check_output_dir`), checked
    before any work: never on or inside an input; an existing folder only when otbench's
    ledger in it says otbench wrote it (or with `overwrite`, which keeps its other files)."""
    from otbench.errors import UnsafeOutputError
    from otbench.files import check_output_dir

    try:
        check_output_dir(out_dir, *inputs, overwrite=overwrite)
    except UnsafeOutputError as e:
        raise ReportError(str(e)) from None
    return Path(out_dir)


def _dump(obj: Any) -> str:
    return json.dumps(obj, indent=2, sort_keys=True, allow_nan=False, ensure_ascii=False) + "\n"


def _versions() -> dict[str, str]:
    import importlib.metadata as md

    from otbench import __version__

    # otbench's own version from its one source (an editable checkout's metadata can be older).
    out = {"otbench": __version__}
    for name in ("numpy", "jax", "matplotlib"):
        try:
            out[name] = md.version(name)
        except md.PackageNotFoundError:
            out[name] = "unknown"
    return out


def write_report(ms_or_dir: MeasurementSet | str | os.PathLike, out_dir: str | os.PathLike, *,
                 bootstrap: Doc | None = None, thinning: Doc | None = None,
                 otbench: Sequence[Doc] = (), grid: int | Sequence[float] = 1001,
                 results_dir: str | os.PathLike | None | bool = True,
                 metrics: Doc | None = None, frontier: Doc | None = None,
                 set_dir: str | os.PathLike | None = None,
                 formats: str | Sequence[str] | None = None,
                 progress: Callable[[str], None] | None = None, overwrite: bool = False) -> Path:
    """Write the report of a measurement set to `out_dir`; return the path of ``index.html``.

    Args:
      ms_or_dir: a measurement set directory (enables the result cache and
        the token-id figure) or a loaded `MeasurementSet`.
      out_dir: output folder; created, or rewritten when otbench's ledger in
        it (`.otbench-written.json`, with every file's sha256) proves it an
        earlier otbench output: only the files it proves otbench wrote are
        replaced, everything else in it (a user's notes, a changed figure) is
        kept. Any other non-empty folder is refused unless `overwrite` (which
        writes into it and keeps its files); a folder that is or holds an
        input is refused always. Written to a sibling temporary folder first,
        so a failed run leaves the old report intact.
      bootstrap, thinning: a path or a loaded document (``otbench.bootstrap/1``,
        ``otbench.thinning/1``); None to look in the results folder.
      otbench: paths or documents (``otbench.bench/1``,
        ``otbench.bench-compare/1``, or lists of bench documents); empty to look
        in the results folder.
      grid: the frontier budget grid (points, default 1,001 as docs/rules.md).
      results_dir: folder of cached results; True (default) means
        ``DIR/results`` for a directory input and none for an in-memory set;
        None or False disables the cache.
      metrics, frontier: precomputed documents to reuse (checked against the
        set like cached ones, recomputed when they do not fit).
      set_dir: the directory an in-memory `ms_or_dir` was loaded from (a
        caller that has loaded the set already avoids a second load).
      formats: figure files besides the PNG the page shows: "png,pdf,svg"-style
        text or names (default PNG and PDF; `_style.FORMATS`).
      progress: called with one short line per step (the CLI prints them).
      overwrite: let the report write into a folder otbench did not write, and
        replace its entries of the same names (never an input).

    Raises:
      ReportError: the output folder cannot be used.
      ReportInputError: a given result document does not fit the set.
      MeasurementSetError: the set cannot be loaded.
    """
    say = progress or (lambda s: None)
    try:
        fmts = figs.figure_formats(formats)
    except figs.FigureFormatError as e:
        raise ReportError(str(e)) from None
    given = [ms_or_dir] if isinstance(ms_or_dir, (str, os.PathLike)) else []
    given += [set_dir] if set_dir is not None else []
    given += [d for d in (bootstrap, thinning, metrics, frontier, *otbench)
              if isinstance(d, (str, os.PathLike))]
    out = _out_iv(out_dir, given, overwrite)
    ms, set_dir = _source(ms_or_dir, set_dir)
    if ms.num_trajectories == 0:
        raise ReportError("the measurement set has no trajectories")
    if results_dir is True:
        rdir = None if set_dir is None else set_dir / "results"
    else:
        rdir = None if results_dir in (None, False) else Path(results_dir)
    say("loading and checking results" + (f" (cache: {rdir})" if rdir is not None else ""))
    inputs = gather(ms, results_dir=rdir, grid=grid, bootstrap=bootstrap, thinning=thinning,
                    otbench=otbench, metrics_doc=metrics, frontier_doc=frontier, progress=say)
    command = reproduce_command(set_dir, out_dir, bootstrap=bootstrap, thinning=thinning,
                                otbench=otbench, grid=grid, results_dir=results_dir,
                                formats=fmts)
    from otbench.errors import UnsafeOutputError

    try:
        with atomic_dir(out, inputs=given, overwrite=overwrite) as tmp:
            _build(ms, set_dir, inputs, tmp, say, formats=fmts, command=command)
    except UnsafeOutputError as e:          # checked again at the swap (a file changed meanwhile)
        raise ReportError(str(e)) from None
    say(f"wrote {out / 'index.html'}")
    return out / "index.html"


def _is_path(x: Any) -> bool:
    return isinstance(x, (str, os.PathLike))


def reproduce_command(set_dir: Path | None, out_dir: Any, *, bootstrap: Any = None,
                      thinning: Any = None, otbench: Sequence[Any] = (), grid: Any = 1001,
                      results_dir: Any = True,
                      formats: Sequence[str] = figs.DEFAULT_FORMATS) -> str:
    """The ``otbench report`` command line that rebuilds this report, with the paths as given.

    What a command line cannot express (an in-memory set or document, a
    custom grid, a disabled cache) is said after it in parentheses.
    """
    q = shlex.quote
    args = ["otbench", "report", "SET_DIR" if set_dir is None else q(str(set_dir)),
            "--out", q(str(out_dir))]
    unsaid = [] if set_dir is not None else ["the set was given in memory: SET_DIR is its folder"]
    for flag, doc in (("--bootstrap", bootstrap), ("--thinning", thinning)):
        if _is_path(doc):
            args += [flag, q(str(doc))]
        elif doc is not None:
            unsaid.append(f"{flag[2:]} given in memory, stored as data/{flag[2:]}.json")
    for doc in ([otbench] if _is_path(otbench) or isinstance(otbench, Mapping) else otbench):
        if _is_path(doc):
            args += ["--otbench", q(str(doc))]
        else:
            unsaid.append("OTBench results given in memory, stored as data/otbench.json")
    if results_dir in (None, False):
        unsaid.append("no results cache was read")
    elif results_dir is not True and not (set_dir is not None
                                          and Path(results_dir) == set_dir / "results"):
        args += ["--results", q(str(results_dir))]
    if isinstance(grid, int) and grid != 1001:
        args += ["--grid", str(grid)]
    elif not isinstance(grid, int):
        unsaid.append(f"a custom grid of {len(grid)} budgets")
    if tuple(formats) != figs.DEFAULT_FORMATS:
        args += ["--format", ",".join(formats)]
    return " ".join(args) + (f" ({'; '.join(dict.fromkeys(unsaid))})" if unsaid else "")


# -- building ---------------------------------------------------------------------------------

@dataclasses.dataclass
class _Ctx:
    ms: MeasurementSet
    inputs: Inputs
    out: Path
    say: Callable[[str], None]
    synthetic: bool
    formats: tuple[str, ...] = ("png",)
    figures: list[figs.FigureInfo] = dataclasses.field(default_factory=list)
    tables: list[tabs.Table] = dataclasses.field(default_factory=list)
    notes: list[str] = dataclasses.field(default_factory=list)
    view_rows: list[int] = dataclasses.field(default_factory=list)   # trajectories.html shows them

    def fig(self, name: str, draw: Callable[[], Any], *, title: str, caption: str,
            trajectories: int) -> figs.FigureInfo:
        name = num.figure_file(name)     # the one numbering (`_numbering`)
        self.say(f"figure {name}")
        with figs.figure_style():
            fig = draw()
            info = figs.save(fig, self.out, name, title=title, caption=caption,
                             trajectories=trajectories, synthetic=self.synthetic,
                             formats=self.formats)
        self.figures.append(info)
        return info

    def table(self, t: tabs.Table) -> tabs.Table:
        t = dataclasses.replace(t, name=num.table_file(t.name))
        d = self.out / "tables"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"{t.name}.csv").write_bytes(tabs.to_csv(t, synthetic=self.synthetic).encode())
        (d / f"{t.name}.tex").write_bytes(tabs.to_latex(t, synthetic=self.synthetic).encode())
        self.tables.append(t)
        return t

    def missing(self, sec: Section, text: str) -> None:
        sec.note(text)
        self.notes.append(text)


def _build(ms: MeasurementSet, set_dir: Path | None, inputs: Inputs, out: Path,
           say: Callable[[str], None], *, formats: tuple[str, ...], command: str) -> None:
    ctx = _Ctx(ms=ms, inputs=inputs, out=out, say=say, synthetic=bool(ms.synthetic),
               formats=formats)
    T = ms.num_trajectories
    sections = [matrices_section(ctx), local_section(ctx), frontier_section(ctx),
                otbench_section(ctx), sensitivity_section(ctx), trajectories_section(ctx),
                steps_section(ctx, set_dir)]
    sections += horizon_sections(ctx, set_dir)   # DIR/results/horizon.json, when present (issue 9)
    sections += cost_sections(ctx, set_dir)      # DIR/run.json's cost block, when present (issue 26)
    sections += effort_sections(ctx, set_dir, _content_hash(ms, set_dir))   # DIR/results/effort.json
    data = out / "data"
    data.mkdir()
    docs = {"metrics": inputs.metrics, "frontier": inputs.frontier,
            "bootstrap": inputs.bootstrap, "thinning": inputs.thinning,
            "otbench": {"schema": "otbench.bench-compare/1", "results": list(inputs.bench)}
            if inputs.bench else None}
    for kind, doc in docs.items():
        if doc is not None:
            (data / f"{kind}.json").write_bytes(_dump(doc).encode())
    summary = ms.summary()
    chash = _content_hash(ms, set_dir)
    prov = ms.provenance if isinstance(ms.provenance, dict) else {}
    scalars = {k: v for k, v in sorted(prov.items()) if isinstance(v, (str, int, float, bool))}
    meta = [("trajectories", f"{T:,}"), ("questions", f"{summary['questions']:,}"),
            ("cells (model × group)", f"{summary['cells']} ({summary['models']} models × "
                                      f"{summary['groups']} groups)"),
            ("answer probes per position", ", ".join(str(p) for p in np.unique(ms.probes).tolist())),
            ("thinking tokens", f"{summary['thinking_tokens']:,}"),
            ("content hash", chash)]
    meta += [(f"provenance: {k}", str(v)) for k, v in scalars.items()]
    versions = _versions()
    sources = [f"{s.kind}: {s.origin}" + (f" {s.name} (sha256 {s.sha256[:16]}…)" if s.name else "")
               for s in inputs.sources]
    footer = {"inputs": "; ".join(sources), "notes": " | ".join(inputs.notes) or "none",
              "versions": ", ".join(f"{k} {v}" for k, v in versions.items()),
              "reproduce": f"{command}; the same inputs and command give byte-identical files"}
    title = "otbench report" + (" [SYNTHETIC DATA]" if ctx.synthetic else "")
    say("writing trajectories.html")
    from ._view import view_html

    (out / "trajectories.html").write_bytes(
        view_html(ms, set_dir=set_dir, rows=ctx.view_rows).encode())
    say("writing index.html")
    (out / "index.html").write_bytes(render(title=title, synthetic=ctx.synthetic, meta=meta,
                                            sections=sections, footer=footer).encode())
    manifest = {
        "schema": SCHEMA, "synthetic": ctx.synthetic, "content_hash": chash,
        "trajectories": T, "versions": versions, "reproduce": command,
        "figures": [dict(dataclasses.asdict(f), file=f.file, files=list(f.files))
                    for f in ctx.figures],
        "tables": [{"name": t.name, "title": t.title, "csv": f"tables/{t.name}.csv",
                    "latex": f"tables/{t.name}.tex", "parts": len(tabs.parts(t))}
                   for t in ctx.tables],
        "inputs": [dataclasses.asdict(s) for s in inputs.sources],
        "notes": list(inputs.notes) + ctx.notes,
        "view": {"file": "trajectories.html", "trajectories": len(set(ctx.view_rows))},
    }
    (out / "report.json").write_bytes(_dump(manifest).encode())


def _content_hash(ms: MeasurementSet, set_dir: Path | None) -> str:
    if set_dir is not None:
        from otbench.analysis.measurement import read_manifest

        h = read_manifest(set_dir).get("content_hash")
        if h:
            return str(h)
    from otbench.analysis.measurement import content_hash

    return content_hash(ms)


__all__ = ["ReportError", "ReportInputError", "write_report"]
