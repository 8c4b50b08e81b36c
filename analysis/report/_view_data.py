"""What the trajectory view shows, gathered: the chosen rows, their text and answers, the stops.

* `select_rows`: the trajectories a view shows (filters by model, question,
  trajectory; at most `limit`, spread over cells and questions);
* `read_texts`: the thinking ids and the forced answers of those rows from the
  probe's `tokens` and `probes` tables, read a row group at a time (a paper-scale
  table is far larger than memory) after its checksum is checked;
* `tokenizer_decoder`: ids -> text with a local ``tokenizer.json`` (the
  `tokenizers` library, no network);
* `method_stops`: every method's stops on the rows, from the methods' own walk
  (`otbench.analysis.bench.sweep_stops`).

Everything a model wrote stays text here: it is never evaluated, and the page
escapes it (`_view_page`).
"""

import dataclasses
import hashlib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from otbench.analysis.measurement import MeasurementSet

from otbench.errors import OtbenchError

Decode = Callable[[Sequence[int]], str]
ANSWER_CHARS = 600
"""Characters of one forced answer shown (the rest is counted, not shown)."""
STEP_CHARS = 20_000
"""Characters of one step's text shown (a step that never closed can hold a whole budget)."""


class ViewError(OtbenchError, ValueError):
    """The view cannot be written: a filter matches nothing, a bad limit or tokenizer."""


@dataclasses.dataclass(frozen=True)
class Texts:
    """The rows' text, where the set stores ids and a decoder reads them.

    ``steps[row]``: one string per step `1..n` (None: the set stores no ids, or
    no decoder was given); ``answers[row][k]``: [(sample, correct, status,
    text or None)] per position; ``source``: how the text was read (one line).
    """

    steps: Mapping[int, list[str] | None]
    answers: Mapping[int, Mapping[int, list[tuple[int, bool, str, str | None]]]]
    source: str


@dataclasses.dataclass(frozen=True)
class Stops:
    """One method's stops on the shown rows: ``k[θ, i]`` is the stop of ``rows[i]`` at ``thetas[θ]``."""

    name: str
    strategy: str
    thetas: tuple[float, ...]
    k: np.ndarray


def _key(ms: MeasurementSet, r: int) -> tuple[str, str, str, int]:
    return (ms.models[ms.cell_model[ms.cell[r]]], ms.groups[ms.question_group[ms.question[r]]],
            ms.question_id[ms.question[r]], int(ms.trajectory[r]))


def select_rows(ms: MeasurementSet, *, model: str | None = None, question: str | None = None,
                trajectory: int | None = None, limit: int | None = None,
                where: str = "the set") -> tuple[np.ndarray, int]:
    """(rows to show, rows that matched): the filters, then at most `limit` rows.

    Without filters narrowing it to one question the rows are spread: the first
    trajectory of every (cell, question) in turn before any second one, the first
    question of every cell before any second question, so a capped view still shows
    every model. The shown rows come back in the set's order. `where` names the set in
    messages.
    """
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ViewError(f"`limit` must be an integer >= 1, got {limit!r}")
    keep = np.ones(ms.num_trajectories, dtype=bool)
    if model is not None:
        if model not in ms.models:
            raise ViewError(f"{where}: no model {model!r} (models: {', '.join(ms.models)})")
        keep &= ms.cell_model[ms.cell] == ms.models.index(model)
    if question is not None:
        qs = [i for i, q in enumerate(ms.question_id) if q == question]
        if not qs:
            raise ViewError(f"{where}: no question {question!r}")
        keep &= np.isin(ms.question, qs)
    if trajectory is not None:
        keep &= ms.trajectory == int(trajectory)
    rows = np.flatnonzero(keep)
    if rows.size == 0:
        given = ", ".join(f"`{k}` {v!r}" for k, v in (("model", model), ("question", question),
                                                        ("trajectory", trajectory)) if v is not None)
        raise ViewError(f"{where}: no trajectory matches {given}")
    # rows are in set order (cell, question, trajectory): rank of each row within its
    # (cell, question), and of that question among the cell's questions
    cq = ms.cell[rows].astype(np.int64) * max(ms.num_questions, 1) + ms.question[rows]
    within = np.arange(rows.size) - np.searchsorted(cq, cq)
    _, first, inverse = np.unique(cq, return_index=True, return_inverse=True)
    ucell = ms.cell[rows[first]]
    q_rank = (np.arange(first.size) - np.searchsorted(ucell, ucell))[inverse.reshape(-1)]
    order = np.lexsort((ms.cell[rows], q_rank, within))
    chosen = rows[order[:limit]] if limit is not None else rows
    return np.sort(chosen), int(rows.size)


KEYS = ("model", "group", "question", "trajectory")


def _listed_table(set_dir: Path, name: str, verify: bool = True) -> Path | None:
    """The file of the set's extra table `name`, checksum checked unless not `verify` (a table
    that will not be read); None: the set has none."""
    from otbench.analysis.measurement import MeasurementSetError, read_manifest
    from otbench.files import open_regular, sha256_stream

    entry = (read_manifest(set_dir).get("tables") or {}).get(name)
    if entry is None:
        return None
    fpath = set_dir / entry["path"]
    if not verify:
        return fpath
    with open_regular(fpath, what="a Parquet table", fail=lambda why: MeasurementSetError(
            str(fpath), f"table {name!r}: {why}")) as f:
        if sha256_stream(f) != entry["sha256"]:
            raise MeasurementSetError(str(fpath), f"table {name!r}: sha256 does not match the "
                                                  "manifest (file changed after writing)")
    return fpath


def _rows_of(fpath: Path, columns: Sequence[str], want: Mapping[tuple, int]):
    """(row of the set, {column: value}) for each row of the table at `fpath` whose key is in
    `want`: a row group's keys are read first, its other columns only when it holds one."""
    import pyarrow.parquet as pq

    from otbench.analysis.measurement import MeasurementSetError
    from otbench.files import arrow_file, open_regular

    with open_regular(fpath, what="a Parquet table",
                      fail=lambda why: MeasurementSetError(str(fpath), why)) as f, \
            arrow_file(f) as src, pq.ParquetFile(src) as pf:
        for g in range(pf.num_row_groups):
            if not _may_hold(pf.metadata.row_group(g), want):
                continue
            keys = pf.read_row_group(g, columns=list(KEYS)).to_pydict()
            hits = [(i, want[k]) for i, k in enumerate(zip(*(keys[c] for c in KEYS))) if k in want]
            if hits:
                cols = pf.read_row_group(g, columns=list(columns)).take([i for i, _ in hits])
                cols = cols.to_pydict()
                for j, (_, r) in enumerate(hits):
                    yield r, {c: cols[c][j] for c in columns}


def _may_hold(meta: Any, want: Mapping[tuple, int]) -> bool:
    """Whether a row group can hold a wanted key, by its min/max statistics (a paper-scale
    probes table has thousands of row groups; without statistics it is read)."""
    bounds = {}
    for c in range(meta.num_columns):
        col = meta.column(c)
        if col.path_in_schema in KEYS:
            st = col.statistics
            if st is None or not st.has_min_max:
                return True
            bounds[col.path_in_schema] = (st.min, st.max)
    if len(bounds) < len(KEYS):
        return True
    return any(all(bounds[k][0] <= v <= bounds[k][1] for k, v in zip(KEYS, key)) for key in want)


def _has_columns(fpath: Path, columns: Sequence[str]) -> bool:
    import pyarrow.parquet as pq

    return set(columns) <= set(pq.read_schema(fpath).names)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else \
        f"{text[:limit]}… ({len(text) - limit:,} more characters not shown)"


def read_texts(ms: MeasurementSet, rows: np.ndarray, set_dir: Path | None,
               decode: Decode | None) -> Texts:
    """The thinking of each row, cut at its steps, and its forced answers (module docstring)."""
    want = {_key(ms, int(r)): int(r) for r in rows}
    steps: dict[int, list[str] | None] = {int(r): None for r in rows}
    answers: dict[int, dict[int, list]] = {int(r): {} for r in rows}
    if set_dir is None:
        return Texts(steps, answers, "none: the set was given in memory (no token tables read)")
    # the thinking ids are read only to be decoded: without a decoder the table is not read
    tokens = _listed_table(set_dir, "tokens", verify=decode is not None)
    probes = _listed_table(set_dir, "probes")
    # tables from before the probe wrote keys into them cannot be matched to rows: not read
    unkeyed = [t for t, p in (("tokens", tokens), ("probes", probes))
               if p is not None and not _has_columns(p, KEYS)]
    tokens = None if "tokens" in unkeyed else tokens
    probes = None if "probes" in unkeyed else probes
    if tokens is not None and decode is not None:
        for r, row in _rows_of(tokens, ("thinking",), want):
            ids, L = row["thinking"], ms.L[r, : int(ms.n[r]) + 1].tolist()
            steps[r] = [_clip(decode(ids[a:b]), STEP_CHARS) for a, b in zip(L[:-1], L[1:])]
    if probes is not None:
        for r, row in _rows_of(probes, ("position", "sample", "tokens", "correct", "status"), want):
            text = None if decode is None else _clip(decode(row["tokens"]), ANSWER_CHARS)
            answers[r].setdefault(int(row["position"]), []).append(
                (int(row["sample"]), bool(row["correct"]), str(row["status"]), text))
    if unkeyed:
        source = f"not shown: the set's {' and '.join(unkeyed)} table has no " \
                 f"{'/'.join(KEYS)} columns to find a trajectory's rows by"
    elif tokens is None:
        source = "none: the set stores no token ids (no `tokens` table: simulated, or imported " \
                 "as counts)"
    elif decode is None:
        source = "not decoded: the set stores token ids; pass a tokenizer to read them as text"
    else:
        source = "the set's `tokens` and `probes` tables, decoded"
    if probes is None and "probes" not in unkeyed:
        source += "; no `probes` table: each cut shows how many of its P answers were correct, " \
                  "not each answer"
    return Texts(steps, answers, source)


def tokenizer_decoder(folder: str | Path, recorded_hash: str | None = None) -> tuple[Decode, str]:
    """(ids -> text, one line saying which tokenizer) from ``folder/tokenizer.json``.

    Local files only. The line says whether the file's serialization hashes to
    the tokenizer hash the set records (a differing or unrecorded hash is said,
    not refused: the text may then be another tokenizer's reading of the ids).
    """
    path = Path(folder) / "tokenizer.json"
    if not path.is_file():
        raise ViewError(f"{folder}: no tokenizer.json there (a local Hugging Face tokenizer "
                        "folder)")
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise ViewError(f"{folder}: reading token ids as text needs the tokenizers library "
                        "(pip install 'otbench[probe]' or pip install tokenizers)") from None
    try:
        tok = Tokenizer.from_file(str(path))
    except Exception as e:  # the library raises plain Exception for a malformed file
        why = str(e).splitlines()[0][:160] if str(e) else type(e).__name__
        raise ViewError(f"{path}: not a readable tokenizer ({why})") from None
    mine = hashlib.sha256(tok.to_str().encode()).hexdigest()
    if recorded_hash is None:
        note = "the set records no tokenizer hash"
    elif recorded_hash == mine:
        note = "its hash matches the set's record"
    else:
        note = (f"its hash {mine[:12]} differs from the set's record {recorded_hash[:12]}: the "
                "text may not be what the model read")
    vocab = tok.get_vocab_size(with_added_tokens=True)

    def decode(ids: Sequence[int]) -> str:
        ids = [int(i) for i in ids]
        known = [i for i in ids if 0 <= i < vocab]
        text = tok.decode(known, skip_special_tokens=False)
        # an id this tokenizer does not have is said, not dropped in silence
        return text + (f" [{len(ids) - len(known)} ids outside this tokenizer's vocabulary]"
                       if len(known) < len(ids) else "")

    # the folder's name only: the page names no absolute path of this machine
    return decode, f"tokenizer {Path(folder).resolve().name}/tokenizer.json ({note})"


def method_stops(ms: MeasurementSet, rows: np.ndarray, methods: Sequence[Any] | None,
                 points: int) -> tuple[list[Stops], list[str], MeasurementSet]:
    """(each runnable method's stops on `rows`, notes, the set with the split the methods used).

    The methods are fit and walked by `otbench.analysis.bench.sweep_stops`; a set
    without a split gets the default one `otbench split` assigns (said in the notes).
    """
    from otbench.analysis.bench import METHODS, assign_splits, resolve, sweep_stops

    notes = []
    if ms.split is None or not np.any(ms.split >= 0):
        ms = assign_splits(ms)
        notes.append("the set has no split: the methods were fit on the default split "
                     "`otbench split` assigns (seed 0)")
    out, skipped = [], []
    for spec in (METHODS.names() if methods is None else methods):
        m = resolve(spec)
        ok, why = m.runnable_on(ms)
        if not ok:
            skipped.append(f"{m.name} ({why})")
            continue
        thetas, k, fitted = sweep_stops(ms, m, rows, points=points)
        out.append(Stops(fitted.name, fitted.strategy, thetas, k))
    if skipped:
        notes.append("methods not shown, their signals are not in the set: " + "; ".join(skipped))
    return out, notes, ms
