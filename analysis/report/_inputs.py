"""Report inputs: the analysis documents a report draws from, computed or reused from cached JSON.

Cache convention. Beside a measurement set ``DIR`` the report looks in
``DIR/results/`` (or the folder passed as `results_dir`) for

=====================  ==================================  ===========================
file                   schema                              written by
=====================  ==================================  ===========================
``metrics.json``       ``otbench.metrics/1``               ``otbench metrics --json``
``frontier.json``      ``otbench.frontier/1``              ``otbench frontier --json``
``bootstrap.json``     ``otbench.bootstrap/1``             ``otbench bootstrap --json``
``thinning.json``      ``otbench.thinning/1``              ``otbench thinning --json``
``otbench.json``,      ``otbench.bench/1`` or              ``otbench bench run/compare
``bench-*.json``       ``otbench.bench-compare/1``         --json``
=====================  ==================================  ===========================

Every result otbench writes records the content hash of the set it was
computed from (`content_hash`); a result whose hash differs from the set's
never fits. A bootstrap, thinning or OTBench file that records none (written
by an older otbench) is checked by its cells only, and a note says so. A `sweep.json` (``otbench.sweep/1``) can be
passed as the bootstrap or the thinning document: its part is used.

Metrics and frontiers are cheap, so a cached document is used only when it
provably belongs to the set -- same synthetic flag, same cells with the same
question and trajectory counts (metrics) or the same full-thinking tokens and
probes (frontiers), and the requested budget grid -- and is recomputed
otherwise (a note says so). Bootstrap, thinning and OTBench results cannot be
recomputed by the report: a document passed explicitly that does not fit the
set raises `ReportInputError`; a discovered one that does not fit is skipped
with a note, so a stale file never breaks a report nor silently enters it.
"""

import dataclasses
import hashlib
import json
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from otbench.analysis.measurement import MeasurementSet, MeasurementSetError

from otbench.errors import OtbenchError
from otbench.files import loads_json, read_json_bytes

from ._shapes import shape_misfit

RESULTS_DIR = "results"
CACHE_FILES = {"metrics": "metrics.json", "frontier": "frontier.json",
               "bootstrap": "bootstrap.json", "thinning": "thinning.json",
               "otbench": "otbench.json"}
BENCH_GLOB = "bench-*.json"
SWEEP_SCHEMA = "otbench.sweep/1"
SCHEMAS = {"metrics": "otbench.metrics/1", "frontier": "otbench.frontier/1",
           "bootstrap": "otbench.bootstrap/1", "thinning": "otbench.thinning/1",
           "bench": "otbench.bench/1", "bench_compare": "otbench.bench-compare/1"}


class ReportInputError(OtbenchError, ValueError):
    """A result document that cannot be used for this set; the message names the file and rule."""


@dataclasses.dataclass(frozen=True)
class Source:
    """Where one document came from (recorded in the report)."""

    kind: str                 # metrics | frontier | bootstrap | thinning | otbench
    origin: str               # "computed" | "cached" | "given"
    name: str | None          # file name (no directory: reports must not depend on paths)
    sha256: str | None        # of the file bytes, or None when computed / passed as a dict


@dataclasses.dataclass(frozen=True)
class Inputs:
    """Every document the report uses (JSON-able dicts; None = not available)."""

    metrics: dict[str, Any]
    frontier: dict[str, Any]
    bootstrap: dict[str, Any] | None
    thinning: dict[str, Any] | None
    bench: tuple[dict[str, Any], ...]
    sources: tuple[Source, ...]
    notes: tuple[str, ...]


def _read(path: Path) -> tuple[Any, str]:
    try:
        data = read_json_bytes(path)
        return loads_json(data, str(path)), hashlib.sha256(data).hexdigest()
    except MeasurementSetError as e:
        raise ReportInputError(str(e)) from None


def result_beside(set_dir: Path | None, name: str, limit: int = 1 << 30) -> tuple[Any, str | None]:
    """(document, note) of ``results/NAME`` beside the set: (None, None) when there is none, (None,
    "NAME: why; skipped.") when it cannot be read (a FIFO, over `limit` bytes, not JSON), else the
    parsed document, through the guarded reader every report input uses."""
    if set_dir is None:
        return None, None
    path = Path(set_dir) / "results" / name
    if not path.is_file():
        return None, None
    try:
        return loads_json(read_json_bytes(path, limit), str(path)), None
    except OtbenchError as e:
        return None, f"{name}: {e}; skipped."


def binding_misfit(doc: Any, set_hash: str) -> str | None:
    """Why a result is not bound to the set with content hash `set_hash` (None: it is, or
    it records no hash)."""
    got = doc.get("content_hash") if isinstance(doc, dict) else None
    if got is not None and got != set_hash:
        return (f"it was computed on another set (content hash {str(got)[:12]}..., this set's "
                f"{set_hash[:12]}...)")
    return None


def _unwrap_sweep(kind: str, doc: Any) -> Any:
    """The bootstrap or thinning part of an `otbench.sweep/1` document (others unchanged)."""
    if _schema_of(doc) != SWEEP_SCHEMA or not isinstance(doc.get(kind), dict):
        return doc
    part = dict(doc[kind])
    for key in ("content_hash", "synthetic"):
        if key in doc:
            part.setdefault(key, doc[key])
    return part


def _schema_of(doc: Any) -> str | None:
    return doc.get("schema") if isinstance(doc, dict) else None


# -- what a set looks like, for the fit checks ----------------------------------------

@dataclasses.dataclass(frozen=True)
class SetCells:
    """Per-cell counts of a set, keyed by (model, group)."""

    questions: dict[tuple[str, str], int]
    trajectories: dict[tuple[str, str], int]
    tokens: dict[tuple[str, str], int]
    probes: dict[tuple[str, str], int]

    @classmethod
    def of(cls, ms: MeasurementSet) -> "SetCells":
        q, t, tok, p = {}, {}, {}, {}
        end = ms.L[np.arange(ms.num_trajectories), ms.n].astype(np.int64)
        for c in np.unique(ms.cell).tolist():
            rows = ms.cell_rows(c)
            key = ms.cell_name(c)
            q[key] = int(np.unique(ms.question[rows]).size)
            t[key] = int(rows.size)
            tok[key] = int(end[rows].sum())
            p[key] = int(ms.probes[rows].astype(np.int64).sum())
        return cls(q, t, tok, p)


def metrics_misfit(doc: Any, ms: MeasurementSet, cells: SetCells) -> str | None:
    """Why a metrics document does not belong to `ms` (None when it does)."""
    if _schema_of(doc) != SCHEMAS["metrics"]:
        return f"schema is {_schema_of(doc)!r}, expected {SCHEMAS['metrics']!r}"
    if (shape := shape_misfit(doc, "metrics")) is not None:
        return shape
    if bool(doc.get("synthetic")) != bool(ms.synthetic):
        return "its synthetic flag differs from the set's"
    try:
        got = {(c["model"], c["group"]): (c["n_questions"], c["n_trajectories"])
               for c in doc["cells"]}
    except (KeyError, TypeError):
        return "its cells lack model/group/n_questions/n_trajectories"
    want = {k: (cells.questions[k], cells.trajectories[k]) for k in cells.questions}
    if got != want:
        return "its cells or their question/trajectory counts differ from the set's"
    return None


def frontier_misfit(doc: Any, ms: MeasurementSet, cells: SetCells, grid: np.ndarray) -> str | None:
    """Why a frontier document does not belong to `ms` at budgets `grid` (None when it does)."""
    if _schema_of(doc) != SCHEMAS["frontier"]:
        return f"schema is {_schema_of(doc)!r}, expected {SCHEMAS['frontier']!r}"
    if (shape := shape_misfit(doc, "frontier")) is not None:
        return shape
    if bool(doc.get("synthetic")) != bool(ms.synthetic):
        return "its synthetic flag differs from the set's"
    g = np.asarray(doc.get("grid", []), dtype=np.float64)
    if g.shape != grid.shape or np.any(np.abs(g - grid) > 1e-12):
        return f"its budget grid ({g.size} points) is not the requested one ({grid.size} points)"
    strat = doc.get("strategies") or {}
    if set(strat) != {"dr", "fb", "dee"}:
        return "it does not have all three strategies dr, fb, dee"
    for s, f in strat.items():
        got = {(c["model"], c["group"]): (c["total_tokens"], c["total_probes"]) for c in f["cells"]}
        want = {k: (cells.tokens[k], cells.probes[k]) for k in cells.tokens}
        if got != want:
            return f"its {s} cells or their token/probe totals differ from the set's"
    return None


def _interval_ok(x: Any) -> bool:
    return x is None or (isinstance(x, list) and len(x) == 2
                         and all(v is None or isinstance(v, (int, float)) for v in x))


def bootstrap_misfit(doc: Any, cells: SetCells, synthetic: bool) -> str | None:
    """Why a bootstrap document cannot be shown for this set (None when it can)."""
    if _schema_of(doc) != SCHEMAS["bootstrap"]:
        return f"schema is {_schema_of(doc)!r}, expected {SCHEMAS['bootstrap']!r}"
    if (shape := shape_misfit(doc, "bootstrap")) is not None:
        return shape
    if "synthetic" in doc and bool(doc["synthetic"]) != synthetic:
        return "its synthetic flag differs from the set's"
    try:
        keys = {(c["model"], c["group"]) for c in doc["cells"]}
        ok = all(_interval_ok(c.get(k)) for c in doc["cells"] for k in ("or", "ad", "full_acc",
                                                                         "tokens", "endpoint_acc"))
    except (KeyError, TypeError):
        return "its cells lack model/group"
    if keys != set(cells.questions):
        return "its cells are not the set's cells"
    if not ok:
        return "an interval is not a [lo, hi] pair"
    fr = doc.get("frontiers")
    if fr is not None:
        n = len(fr.get("grid", []))
        for s in ("dr", "fb", "dee"):
            if s in fr and any(len(fr[s].get(k, [])) != n for k in ("lo", "hi", "median")):
                return f"frontiers.{s} lo/hi/median do not have one value per grid point"
    return None


def thinning_misfit(doc: Any, cells: SetCells, synthetic: bool) -> str | None:
    """Why a thinning document cannot be shown (None when it can)."""
    if _schema_of(doc) != SCHEMAS["thinning"]:
        return f"schema is {_schema_of(doc)!r}, expected {SCHEMAS['thinning']!r}"
    if (shape := shape_misfit(doc, "thinning")) is not None:
        return shape
    if "synthetic" in doc and bool(doc["synthetic"]) != synthetic:
        return "its synthetic flag differs from the set's"
    probes = doc.get("probes") or {}
    trajs = doc.get("trajectories") or {}
    if not probes and not trajs:
        return "it has neither probe nor trajectory thinning results"
    try:
        for m, v in probes.items():
            int(m)
            for k in ("or", "ad", "retention"):
                if not isinstance(v[k], (int, float)):
                    return f"probes[{m!r}].{k} is not a number"
            for c in v.get("cells", []):
                if (c["model"], c["group"]) not in cells.questions:
                    return f"probes[{m!r}] has a cell ({c['model']}, {c['group']}) not in the set"
        for r, v in trajs.items():
            int(r)
            if not (_interval_ok(v["or"]) and _interval_ok(v["ad"])):
                return f"trajectories[{r!r}] or/ad is not a [lo, hi] pair"
    except (KeyError, TypeError, ValueError) as e:
        return f"malformed entry ({type(e).__name__}: {e})"
    return None


def bench_docs(doc: Any) -> list[dict[str, Any]] | None:
    """The ``otbench.bench/1`` documents inside `doc` (one, a compare doc, or a list); None if none."""
    if isinstance(doc, list):
        out = [d for d in doc if _schema_of(d) == SCHEMAS["bench"]]
        return out if out and len(out) == len(doc) else None
    s = _schema_of(doc)
    if s == SCHEMAS["bench"]:
        return [doc]
    if s == SCHEMAS["bench_compare"]:
        out = doc.get("results") or []
        return out if out and all(_schema_of(d) == SCHEMAS["bench"] for d in out) else None
    return None


def bench_misfit(doc: dict[str, Any], cells: SetCells, synthetic: bool) -> str | None:
    """Why an ``otbench.bench/1`` document cannot be shown (None when it can)."""
    if (shape := shape_misfit(doc, "bench")) is not None:
        return shape
    if "synthetic" in doc and bool(doc["synthetic"]) != synthetic:
        return "its synthetic flag differs from the set's"
    if doc.get("strategy") not in ("dr", "fb", "dee"):
        return f"strategy {doc.get('strategy')!r} is not dr, fb or dee"
    try:
        for p in doc["points"]:
            for k in ("rel_cost", "acc", "frontier_acc", "gap", "nondominated"):
                p[k]
        for c in doc.get("cells", []):
            if (c["model"], c["group"]) not in cells.questions:
                return f"cell ({c['model']}, {c['group']}) is not in the set"
    except (KeyError, TypeError) as e:
        return f"a point lacks {e}"
    if not doc["points"]:
        return "it has no operating points"
    return None


# -- gathering ------------------------------------------------------------------------

Doc = str | os.PathLike | Mapping[str, Any] | Sequence[Any]


def _given(kind: str, value: Doc) -> tuple[Any, Source]:
    if isinstance(value, (str, os.PathLike)):
        p = Path(value)
        if not p.exists():      # anything else (a FIFO, a device) is `_read`'s to refuse by name
            raise ReportInputError(f"{p}: no such {kind} result file")
        doc, sha = _read(p)
        return doc, Source(kind, "given", p.name, sha)
    return json.loads(json.dumps(value)), Source(kind, "given", None, None)


class _Resolver:
    """Finds each document of a report: given, cached in `results_dir`, or computed.

    Explicit state instead of closures: `sources` (what was used, in order)
    and `notes` (what was skipped or recomputed, and why) are filled as the
    documents are resolved.
    """

    def __init__(self, set_hash: str, results_dir: Path | None,
                 progress: Callable[[str], None]):
        self.set_hash, self.results_dir, self.progress = set_hash, results_dir, progress
        self.sources: list[Source] = []
        self.notes: list[str] = []

    def misfit(self, doc, src: Source, misfit, kind: str | None = None) -> str | None:
        """Why `doc` does not fit the set (None: it fits); notes a missing content hash."""
        why = binding_misfit(doc, self.set_hash) or misfit(doc)
        if why is None and kind and src.name and not (isinstance(doc, dict)
                                                      and "content_hash" in doc):
            self.notes.append(f"{kind}: {src.name} records no content hash (older otbench); "
                              f"only its cells were checked against the set")
        return why

    def cached(self, kind: str) -> tuple[Any, Source] | None:
        if self.results_dir is None:
            return None
        p = Path(self.results_dir) / CACHE_FILES[kind]
        if not p.is_file():
            return None
        try:
            doc, sha = _read(p)
        except ReportInputError as e:
            self.notes.append(f"ignored {p.name}: {e}")
            return None
        return doc, Source(kind, "cached", p.name, sha)

    def cheap(self, kind: str, given: Doc | None, misfit, compute) -> dict[str, Any]:
        """A document that is cheap to compute: given or cached if it fits, else computed."""
        given_found = _given(kind, given) if given is not None else None
        for found in ([given_found] if given_found is not None else []) + [self.cached(kind)]:
            if found is None:
                continue
            doc, src = found
            why = self.misfit(doc, src, misfit)
            if why is None and found is not given_found and not (
                    isinstance(doc, dict) and "content_hash" in doc):
                # A cached result must prove it was computed on this set; a cheap one
                # that cannot is recomputed (the note says so), never used silently.
                why = "it records no content hash"
            if why is None:
                self.sources.append(src)
                return doc
            self.notes.append(f"{kind}: {src.name or 'the given document'} not used ({why}); "
                              f"recomputed")
        self.progress(f"computing {kind}")
        doc = compute()
        self.sources.append(Source(kind, "computed", None, None))
        return doc

    def expensive(self, kind: str, given: Doc | None, misfit) -> dict[str, Any] | None:
        """A document too slow to compute here: given (must fit) or cached (skipped if not)."""
        if given is not None:
            doc, src = _given(kind, given)
            doc = _unwrap_sweep(kind, doc)
            why = self.misfit(doc, src, misfit, kind)
            if why is not None:
                raise ReportInputError(f"{src.name or f'the {kind} document'}: cannot be used "
                                       f"for this set: {why}")
            self.sources.append(src)
            return doc
        found = self.cached(kind)
        if found is None:
            return None
        doc, src = found
        why = self.misfit(doc, src, misfit, kind)
        if why is not None:
            self.notes.append(f"{kind}: {src.name} skipped ({why})")
            return None
        self.sources.append(src)
        return doc


def gather(ms: MeasurementSet, *, results_dir: Path | None, grid: int | Sequence[float],
           bootstrap: Doc | None = None, thinning: Doc | None = None,
           otbench: Sequence[Doc] = (), metrics_doc: Doc | None = None,
           frontier_doc: Doc | None = None,
           progress: Callable[[str], None] = lambda s: None) -> Inputs:
    """Collect every document for the report of `ms` (see the module docstring).

    Args:
      ms: the measurement set.
      results_dir: folder of cached results (None: no cache).
      grid: frontier budget grid (a number of points or explicit budgets).
      bootstrap, thinning: a path or a loaded document; None to look in the cache.
      otbench: paths or documents (bench/1, bench-compare/1 or lists); empty
        to look in the cache.
      metrics_doc, frontier_doc: precomputed documents (checked like cached ones).
      progress: called with a short line before each slow step.
    """
    from otbench.analysis.frontier import budget_grid, frontiers
    from otbench.analysis.measurement import content_hash
    from otbench.analysis.overthinking import metrics

    cells, synthetic = SetCells.of(ms), bool(ms.synthetic)
    r = _Resolver(content_hash(ms), results_dir, progress)
    grid_arr = np.asarray([float(b) for b in budget_grid(grid)], dtype=np.float64)
    m_doc = r.cheap("metrics", metrics_doc, lambda d: metrics_misfit(d, ms, cells),
                    lambda: metrics(ms))
    f_doc = r.cheap("frontier", frontier_doc, lambda d: frontier_misfit(d, ms, cells, grid_arr),
                    lambda: frontiers(ms, grid=grid).to_json())
    b_doc = r.expensive("bootstrap", bootstrap, lambda d: bootstrap_misfit(d, cells, synthetic))
    t_doc = r.expensive("thinning", thinning, lambda d: thinning_misfit(d, cells, synthetic))
    if otbench:
        bench = _given_bench(otbench, cells, r.set_hash, synthetic, r.sources)
    elif results_dir is not None:
        bench = _cached_bench(Path(results_dir), cells, r.set_hash, synthetic, r.sources, r.notes)
    else:
        bench = []
    return Inputs(metrics=m_doc, frontier=f_doc, bootstrap=b_doc, thinning=t_doc,
                  bench=tuple(bench), sources=tuple(r.sources), notes=tuple(r.notes))


def _given_bench(values: Sequence[Doc], cells, set_hash: str, synthetic: bool,
                 sources: list) -> list[dict[str, Any]]:
    """The OTBench documents passed in: each must fit the set, or the report is refused."""
    bench: list[dict[str, Any]] = []
    for value in values:
        doc, src = _given("otbench", value)
        why = binding_misfit(doc, set_hash)
        if why is not None:
            raise ReportInputError(f"{src.name}: cannot be used for this set: {why}")
        docs = bench_docs(doc)
        if docs is None:
            raise ReportInputError(f"{src.name or 'an OTBench document'}: schema must be "
                                   f"{SCHEMAS['bench']!r} or {SCHEMAS['bench_compare']!r}, "
                                   f"got {_schema_of(doc)!r}")
        for d in docs:
            why = bench_misfit(d, cells, synthetic)
            if why is not None:
                raise ReportInputError(f"{src.name or 'an OTBench document'}: method "
                                       f"{d.get('method')!r} cannot be used: {why}")
        bench += docs
        sources.append(src)
    return bench


def _cached_bench(results_dir: Path, cells, set_hash: str, synthetic: bool, sources: list,
                  notes: list) -> list[dict[str, Any]]:
    """The cached OTBench documents that fit the set; the others are skipped with a note."""
    bench: list[dict[str, Any]] = []
    files = [results_dir / CACHE_FILES["otbench"]]
    files += sorted(results_dir.glob(BENCH_GLOB)) if results_dir.is_dir() else []
    for p in files:
        if not p.is_file():
            continue
        try:
            doc, sha = _read(p)
        except ReportInputError as e:
            notes.append(f"otbench: {p.name} skipped ({e})")
            continue
        docs = bench_docs(doc)
        fits = (bench_misfit(d, cells, synthetic) for d in docs or ())
        bad = binding_misfit(doc, set_hash) or (
            "not an OTBench document" if docs is None else next((w for w in fits if w), None))
        if bad:
            notes.append(f"otbench: {p.name} skipped ({bad})")
            continue
        bench += docs
        sources.append(Source("otbench", "cached", p.name, sha))
    return bench
