"""Unit results -> the measurement set and its raw-token tables (docs/rules.md).

The set goes through `otbench.analysis.measurement._build.from_ragged` (the one
validation path every reader uses) and `otbench.analysis.measurement._io.save`, with two
extra tables:

* `tokens`: one row per trajectory: prompt, thinking and original-answer
  ids, how the thinking ended, the original answer's grade, seeds, and the
  signal's other token per position;
* `probes`: one row per answer probe: position, retained length, seed,
  sample index, answer ids, correctness and grade status.

Rows of both tables are sorted by (model, group, question, trajectory[,
position, sample]) so the bytes do not depend on the order units finished.

At paper scale the token tables are far larger than memory (~3 MB of probe
ids per unit), so the runner writes them with `write_token_tables`: units
are read back one at a time, in sorted order, and appended to Parquet in
row groups of a fixed number of units; `token_tables` builds the same rows
in memory for small sets and tests.
"""

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from ._loop import SIGNALS, UnitResult
from ._results import PEER_FIELDS

_I32_LIST = pa.list_(pa.int32())


def _sorted(results: Sequence[UnitResult]) -> list[UnitResult]:
    return sorted(results, key=lambda u: (u.group, u.question, u.trajectory))


def measurement_set(results: Sequence[UnitResult], *, model: str, P: int,
                    question_text: Mapping[tuple[str, str], str] | None = None,
                    provenance: Mapping[str, Any] | None = None):
    """A validated `MeasurementSet` from unit results (any order).

    Signals: `logp_end`, `logp_other` and `margin = logp_other - logp_end`
    per position (docs/rules.md), the others of `SIGNALS` and the job's field probes'.
    """
    from otbench.analysis.measurement import from_ragged, ragged

    rs = _sorted(results)
    signals = {
        "logp_end": ragged([u.logp_end for u in rs], np.float64),
        "logp_other": ragged([u.logp_other for u in rs], np.float64),
        "margin": ragged([[o - e for o, e in zip(u.logp_other, u.logp_end)] for u in rs], np.float64),
    }
    # The own-context and field signals exist only when every unit recorded them (a resumed
    # journal written before they existed holds units without them: the set omits the columns).
    if rs and all(len(u.logp_end_own) == len(u.L) for u in rs):
        signals["margin_own"] = ragged([[o - e for o, e in zip(u.logp_other_own, u.logp_end_own)]
                                        for u in rs], np.float64)
    if rs and all(len(u.answer_id) == len(u.L) for u in rs):
        signals["answer"] = ragged([u.answer_id for u in rs], np.float64)
        signals["answer_conf"] = ragged([u.answer_conf for u in rs], np.float64)
        signals["hesitation"] = ragged([u.hesitation for u in rs], np.float64)
        signals["answer_tokens"] = ragged([u.answer_tokens for u in rs], np.float64)
    # The prompt's length at every position (the net cost's partial KV block reads it); a unit
    # without its count (none is written without one) leaves the column out.
    if rs and all(u.prompt_tokens is not None for u in rs):
        signals["prompt_tokens"] = ragged([[u.prompt_tokens] * len(u.L) for u in rs], np.float64)
    # The field methods' own probes (probe.field_probes): a column where every unit recorded it.
    for name in PEER_FIELDS:
        if rs and all(len(getattr(u, name)) == len(u.L) for u in rs):
            signals[name] = ragged([getattr(u, name) for u in rs], np.float64)
    assert set(signals) <= set(SIGNALS) | set(PEER_FIELDS)
    prov = dict(provenance or {})
    if "signals" in prov:       # define exactly the columns the set has
        prov["signals"] = {k: v for k, v in dict(prov["signals"]).items() if k in signals}
    qt = question_text or {}
    return from_ragged(
        model=[model] * len(rs), group=[u.group for u in rs], question=[u.question for u in rs],
        trajectory=np.array([u.trajectory for u in rs], dtype=np.int64),
        probes=np.full(len(rs), P, dtype=np.int64),
        L=ragged([u.L for u in rs], np.int64), C=ragged([u.C for u in rs], np.int64),
        y=np.array([u.y for u in rs], dtype=np.int64),
        finished=np.array([u.finished for u in rs], dtype=bool),
        n=np.array([u.n for u in rs], dtype=np.int64),
        dataset=[u.dataset for u in rs],
        question_text=[qt.get((u.group, u.question)) for u in rs],
        signals=signals, synthetic=False, provenance=prov,
    )


_TOKENS_TYPES = {
    "model": pa.string(), "group": pa.string(), "dataset": pa.string(), "question": pa.string(),
    "trajectory": pa.int32(), "prompt": _I32_LIST, "thinking": _I32_LIST, "finished": pa.bool_(),
    "stop_id": pa.int32(), "answer": _I32_LIST, "y": pa.int8(), "y_status": pa.string(), "L": _I32_LIST,
    "signal_other_id": _I32_LIST, "seed_think": pa.int64(), "seed_answer": pa.int64(),
}
_PROBES_TYPES = {
    "model": pa.string(), "group": pa.string(), "question": pa.string(), "trajectory": pa.int32(),
    "position": pa.int32(), "L": pa.int32(), "seed": pa.int64(), "sample": pa.int32(),
    "tokens": _I32_LIST, "correct": pa.bool_(), "status": pa.string(),
}
UNITS_PER_ROW_GROUP = 64
IDS_PER_ROW_GROUP = 1 << 20
"""A row group of the token tables closes after `UNITS_PER_ROW_GROUP` units or once it holds
`IDS_PER_ROW_GROUP` token ids (~1.4 paper-shaped units), whichever comes first: memory stays
bounded whatever the units' size, and the rule depends only on the units, so the bytes are
reproducible."""


def _tokens_cols(rs: Sequence[UnitResult], model: str) -> dict[str, list]:
    return {
        "model": [model] * len(rs), "group": [u.group for u in rs], "dataset": [u.dataset for u in rs],
        "question": [u.question for u in rs], "trajectory": [u.trajectory for u in rs],
        "prompt": [u.prompt for u in rs], "thinking": [u.thinking for u in rs],
        "finished": [u.finished for u in rs], "stop_id": [u.stop_id for u in rs],
        "answer": [u.answer for u in rs], "y": [u.y for u in rs],
        "y_status": [u.y_status for u in rs], "L": [u.L for u in rs],
        "signal_other_id": [u.other_id for u in rs],
        "seed_think": [u.seeds["think"] for u in rs], "seed_answer": [u.seeds["answer"] for u in rs],
    }


def _probes_cols(rs: Sequence[UnitResult], model: str) -> dict[str, list]:
    cols: dict[str, list] = {k: [] for k in _PROBES_TYPES}
    for u in rs:
        for k, (toks, stats) in enumerate(zip(u.probe_tokens, u.probe_status)):
            m = len(toks)
            cols["model"].extend([model] * m)
            cols["group"].extend([u.group] * m)
            cols["question"].extend([u.question] * m)
            cols["trajectory"].extend([u.trajectory] * m)
            cols["position"].extend([k] * m)
            cols["L"].extend([u.L[k]] * m)
            cols["seed"].extend([u.seeds["probe"][k]] * m)
            cols["sample"].extend(range(m))
            cols["tokens"].extend(toks)
            cols["correct"].extend(s == "ok" for s in stats)
            cols["status"].extend(stats)
    return cols


def _ids_array(seqs: Sequence[Sequence[int]]) -> pa.Array:
    """A list<int32> column from id sequences, through one flat array (~10x faster than from lists)."""
    lens = np.fromiter(map(len, seqs), dtype=np.int64, count=len(seqs))
    offsets = np.zeros(len(seqs) + 1, dtype=np.int32)
    np.cumsum(lens, out=offsets[1:])
    flat = np.concatenate([np.asarray(x, dtype=np.int32) for x in seqs]) if len(seqs) else \
        np.zeros(0, dtype=np.int32)
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(flat.astype(np.int32, copy=False)))


def _table(cols: Mapping[str, list], types: Mapping[str, pa.DataType]) -> pa.Table:
    return pa.table({k: _ids_array(cols[k]) if types[k] == _I32_LIST else pa.array(cols[k], types[k])
                     for k in types})


def token_tables(results: Sequence[UnitResult], *, model: str) -> dict[str, pa.Table]:
    """The `tokens` and `probes` extra tables in memory (see module docstring)."""
    rs = _sorted(results)
    return {"tokens": _table(_tokens_cols(rs, model), _TOKENS_TYPES),
            "probes": _table(_probes_cols(rs, model), _PROBES_TYPES)}


_DIRECT_TYPES = {"model": pa.string(), "group": pa.string(), "dataset": pa.string(),
                 "question": pa.string(), "seed": pa.int64(), "tokens": _I32_LIST, "correct": pa.bool_(),
                 "status": pa.string()}


def direct_table(rows: Sequence[Mapping[str, Any]], *, model: str) -> pa.Table:
    """The optional `direct` table: one direct answer per question (`_loop.direct_answers`), sorted."""
    rs = sorted(rows, key=lambda r: (r["group"], r["question"]))
    cols = {k: [r[k] for r in rs] for k in _DIRECT_TYPES if k != "model"} | {"model": [model] * len(rs)}
    return _table(cols, _DIRECT_TYPES)


def write_token_tables(units: Iterable[UnitResult], folder: Path, *, model: str) -> dict[str, int]:
    """Stream `units` (already in sorted order) into `folder/{tokens,probes}/part-0.parquet`.

    Holds at most two row groups at once (`IDS_PER_ROW_GROUP`): the one
    being gathered here and the one a writer thread encodes. Parquet
    encoding releases the GIL, so it runs beside the reading and gathering
    instead of after it (about half of this step's time at paper shape);
    the bytes are the same as writing in one thread.
    Returns rows per table.
    """
    import pyarrow.parquet as pq

    from ._background import BackgroundWorker

    folder = Path(folder)
    writers, rows = {}, {"tokens": 0, "probes": 0}
    for name, types in (("tokens", _TOKENS_TYPES), ("probes", _PROBES_TYPES)):
        (folder / name).mkdir(parents=True, exist_ok=True)
        writers[name] = pq.ParquetWriter(folder / name / "part-0.parquet",
                                         pa.schema(list(types.items())), compression="zstd")

    def encode(tables) -> None:
        for name, t in tables:
            writers[name].write_table(t, row_group_size=max(t.num_rows, 1))

    def flush(buf: list[UnitResult]) -> None:
        tables = []
        for name, cols, types in (("tokens", _tokens_cols(buf, model), _TOKENS_TYPES),
                                  ("probes", _probes_cols(buf, model), _PROBES_TYPES)):
            t = _table(cols, types)
            if t.num_rows:
                tables.append((name, t))
            rows[name] += t.num_rows
        buf.clear()                                       # the tables hold copies: free the units now
        worker.submit(tables)                             # once the previous row group is written

    worker = BackgroundWorker(encode, depth=1, name="otbench-parquet")
    try:
        buf: list[UnitResult] = []
        ids = 0
        for u in units:
            buf.append(u)
            ids += len(u.prompt) + len(u.thinking) + len(u.answer) + sum(
                len(t) for pos in u.probe_tokens for t in pos)
            if len(buf) == UNITS_PER_ROW_GROUP or ids >= IDS_PER_ROW_GROUP:
                flush(buf)
                ids = 0
        if buf:
            flush(buf)
        worker.drain()
    finally:
        worker.close()
        for w in writers.values():
            w.close()
    return rows
