"""JSONL import/export of measurement sets: how users bring measurements from elsewhere.

One trajectory per line::

    {"model": str, "group": str, "question": str | int, "trajectory": int,
     "probes": int, "L": [int, ...], "C": [int, ...], "y": 0 | 1,
     # optional
     "dataset": str, "split": "train" | "validation" | "test" | null,
     "finished": bool, "question_text": str | null,
     "signals": {name: [float, ...]}, "synthetic": bool}

`L` and `C` hold the `n+1` positions `k = 0..n`. `synthetic` (the same on
every line; the export writes `true` on every line of a synthetic set) keeps
the synthetic label across export and import. Integer question ids are
accepted and stored as their decimal string. Blank lines are ignored. Any
other deviation is an error naming `FILE:LINE` and the rule; nothing is
written then. `export_jsonl` writes the canonical form, so
export -> import -> export is byte-identical.
"""

import io
import json
import math
import os
from pathlib import Path

import numpy as np

from otbench.files import loads_json, open_regular, write_text_atomic

from ._build import INT32_MAX, MeasurementSetError, from_ragged, ragged
from ._types import SPLITS, MeasurementSet

REQUIRED_KEYS = ("model", "group", "question", "trajectory", "probes", "L", "C", "y")
OPTIONAL_KEYS = ("dataset", "split", "finished", "question_text", "signals", "synthetic")
_ALLOWED = set(REQUIRED_KEYS) | set(OPTIONAL_KEYS)


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _int_list(where: str, key: str, v) -> list[int]:
    if not isinstance(v, list):
        raise MeasurementSetError(where, f"{key} must be a list of integers, got {type(v).__name__}")
    for k, x in enumerate(v):
        if not _is_int(x):
            raise MeasurementSetError(where, f"{key}[{k}] must be an integer, got {json.dumps(x)}")
        if not -INT32_MAX - 1 <= x <= INT32_MAX:
            raise MeasurementSetError(where, f"{key}[{k}]={x} is beyond int32")
    return v


def _missing(where: str, obj: dict, missing: list[str]) -> str:
    """Why a row without `missing` keys is not a measurement row, and what to do: a row of an
    evaluation log (lm-eval's `samples_*.jsonl`, lighteval, chat) is read by other commands."""
    from otbench.evallogs import row_format

    kind = row_format(obj)
    if kind is not None:
        path = where.rsplit(":", 1)[0]
        return (f"a row of a {kind} log, not a measurement row: audit the log with `otbench audit-log "
                f"{path}`, or probe its replies with a probe job's [trajectories] path = \"{path}\", "
                f"format = \"{kind}\" (docs/guides/import-traces.md)")
    return (f"missing key{'s' if len(missing) > 1 else ''} {', '.join(map(repr, missing))}: a measurement "
            f"row has the keys {', '.join(REQUIRED_KEYS)} (docs/reference/measurement-set.md)")


def _parse_line(where: str, obj) -> dict:
    if not isinstance(obj, dict):
        kind = {list: "array", str: "string", bool: "boolean", type(None): "null"}.get(
            type(obj), "number")
        raise MeasurementSetError(where, f"expected a JSON object, got {kind}")
    missing = [key for key in REQUIRED_KEYS if key not in obj]
    if missing:
        raise MeasurementSetError(where, _missing(where, obj, missing))
    for key in obj:
        if key not in _ALLOWED:
            raise MeasurementSetError(where, f"unknown key {key!r} (allowed: {', '.join(sorted(_ALLOWED))})")
    rec = {}
    for key in ("model", "group"):
        if not isinstance(obj[key], str) or not obj[key]:
            raise MeasurementSetError(where, f"{key} must be a non-empty string, got {json.dumps(obj[key])}")
        rec[key] = obj[key]
    q = obj["question"]
    if _is_int(q):
        q = str(q)
    if not isinstance(q, str) or not q:
        raise MeasurementSetError(where, f"question must be a non-empty string or an integer, got {json.dumps(q)}")
    rec["question"] = q
    for key, lo in (("trajectory", 0), ("probes", 1)):
        v = obj[key]
        if not _is_int(v):
            raise MeasurementSetError(where, f"{key} must be an integer, got {json.dumps(v)}")
        if not -INT32_MAX - 1 <= v <= INT32_MAX:
            raise MeasurementSetError(where, f"{key}={v} is beyond int32")
        rec[key] = v
    rec["L"] = _int_list(where, "L", obj["L"])
    rec["C"] = _int_list(where, "C", obj["C"])
    y = obj["y"]
    if isinstance(y, bool):
        y = int(y)
    if not _is_int(y) or y not in (0, 1):
        raise MeasurementSetError(where, f"y must be 0 or 1, got {json.dumps(obj['y'])}")
    rec["y"] = y
    fin = obj.get("finished", True)
    if not isinstance(fin, bool):
        raise MeasurementSetError(where, f"finished must be true or false, got {json.dumps(fin)}")
    rec["finished"] = fin
    syn = obj.get("synthetic", False)
    if not isinstance(syn, bool):
        raise MeasurementSetError(where, f"synthetic must be true or false, got {json.dumps(syn)}")
    rec["synthetic"] = syn
    for key in ("dataset",):
        v = obj.get(key)
        if v is not None and (not isinstance(v, str) or not v):
            raise MeasurementSetError(where, f"{key} must be a non-empty string, got {json.dumps(v)}")
        rec[key] = v
    for key in ("split", "question_text"):
        v = obj.get(key)
        if v is not None and not isinstance(v, str):
            raise MeasurementSetError(where, f"{key} must be a string or null, got {json.dumps(v)}")
        rec[key] = v
    if rec["split"] is not None and rec["split"] not in SPLITS:
        raise MeasurementSetError(
            where, f"split must be one of {', '.join(SPLITS)} or null, got {json.dumps(rec['split'])}")
    sig = obj.get("signals", {})
    if not isinstance(sig, dict):
        raise MeasurementSetError(where, f"signals must be an object name -> list of numbers, got {json.dumps(sig)}")
    rec["signals"] = {}
    for name, vals in sig.items():
        if not name:
            raise MeasurementSetError(where, "signal names must be non-empty")
        if not isinstance(vals, list):
            raise MeasurementSetError(where, f"signal {name!r} must be a list of numbers")
        for k, x in enumerate(vals):
            if isinstance(x, bool) or not isinstance(x, (int, float)) or (isinstance(x, float) and math.isnan(x)):
                raise MeasurementSetError(where, f"signal {name!r}[{k}] must be a number, got {json.dumps(x)}")
        rec["signals"][name] = [float(x) for x in vals]
    return rec


MAX_LINE = 64 << 20
"""Longest line (characters) of a JSONL import: a trajectory of a million positions is
under 20 MB, so a longer line is not a record (`/dev/zero`, a binary file, a stream
without line breaks) and reading it whole could exhaust memory."""
MIN_FREE = 256 << 20
"""Bytes of memory that must stay available while records accumulate (checked every
`CHECK_EVERY` lines): an endless stream is refused before the system kills the process."""
CHECK_EVERY = 16384


def _lines(f, name: str):
    """(line number, line) of a text file, each at most `MAX_LINE` characters."""
    from otbench.resources import available_memory

    lineno = 0
    while True:
        line = f.readline(MAX_LINE + 1)
        if not line:
            return
        lineno += 1
        if len(line) > MAX_LINE:
            raise MeasurementSetError(f"{name}:{lineno}", f"line longer than {MAX_LINE >> 20} MiB "
                                                          f"(not a JSONL record)")
        if lineno % CHECK_EVERY == 0:
            free = available_memory()
            if free is not None and free < MIN_FREE:
                raise MeasurementSetError(f"{name}:{lineno}", f"less than {MIN_FREE >> 20} MiB of "
                                                              f"memory left; the file is too large "
                                                              f"to import here")
        yield lineno, line


def import_jsonl(path: str | os.PathLike, *, synthetic: bool = False,
                 provenance: dict | None = None) -> MeasurementSet:
    """Read a JSONL file of trajectories into a validated `MeasurementSet`.

    Raises `MeasurementSetError` whose message is ``FILE:LINE: rule`` at the
    first offending line.
    """
    path = Path(path)
    recs, lines = parse_lines(path, _parse_line)
    return build_records(recs, lines, str(path), synthetic=synthetic,
                         provenance=provenance if provenance is not None else
                         {"source": {"jsonl": path.name}})


def parse_lines(path: Path, parse) -> tuple[list[dict], list[int]]:
    """`parse(where, obj)` of each non-blank line of the JSONL file `path`, and the line numbers.

    Every line bounded (`_lines`), every JSON value through the guarded reader.
    """
    name = str(path)
    recs, lines = [], []
    # `open_regular`: a device (an endless `/dev/zero`) or folder is refused; a FIFO is read as
    # a stream (`<(zcat ...)`), its lines bounded by `_lines` like a file's.
    f = io.TextIOWrapper(open_regular(path, what="a JSONL file", pipes=True,
                                      fail=lambda why: MeasurementSetError(name, why)),
                         encoding="utf-8")
    with f:
        try:
            for lineno, line in _lines(f, name):
                if not line.strip():
                    continue
                where = f"{name}:{lineno}"
                obj = loads_json(line, where, bad="malformed JSON")
                recs.append(parse(where, obj))
                lines.append(lineno)
        except UnicodeDecodeError as e:
            raise MeasurementSetError(name, f"not UTF-8 text ({e.reason} at byte {e.start})") from None
    return recs, lines


def build_records(recs: list[dict], lines: list[int], name: str, *, synthetic: bool,
                  provenance: dict) -> MeasurementSet:
    """The set of parsed records (`_parse_line`'s dicts) read from lines `lines` of `name`.

    Shared by the JSONL and the Every Eval Ever imports, so both apply one set of rules.
    """
    if not recs:
        raise MeasurementSetError(name, "empty file (no trajectories)")
    names = set(recs[0]["signals"])
    for rec, lineno in zip(recs, lines):
        if rec["synthetic"] != recs[0]["synthetic"]:
            raise MeasurementSetError(
                f"{name}:{lineno}", f"synthetic is {json.dumps(rec['synthetic'])} but "
                f"{json.dumps(recs[0]['synthetic'])} on line {lines[0]}; a file is synthetic or not")
        if set(rec["signals"]) != names:
            raise MeasurementSetError(
                f"{name}:{lineno}", f"signals {sorted(rec['signals'])} differ from {sorted(names)} on line "
                f"{lines[0]}; every trajectory must record the same signals")
    return from_ragged(
        model=[r["model"] for r in recs], group=[r["group"] for r in recs],
        question=[r["question"] for r in recs],
        trajectory=np.array([r["trajectory"] for r in recs], dtype=np.int64),
        probes=np.array([r["probes"] for r in recs], dtype=np.int64),
        L=ragged([r["L"] for r in recs], np.int64), C=ragged([r["C"] for r in recs], np.int64),
        y=np.array([r["y"] for r in recs], dtype=np.int64),
        finished=np.array([r["finished"] for r in recs], dtype=bool),
        dataset=[r["dataset"] for r in recs], split=[r["split"] for r in recs],
        question_text=[r["question_text"] for r in recs],
        signals={s: ragged([r["signals"][s] for r in recs], np.float64) for s in sorted(names)},
        # The label is never lost: a file that says synthetic stays synthetic.
        synthetic=synthetic or recs[0]["synthetic"],
        provenance=provenance, where=lambda i: f"{name}:{lines[i]}",
    )


def iter_records(ms: MeasurementSet):
    """Canonical per-trajectory dicts in row order (the JSONL export format)."""
    for t in range(ms.num_trajectories):
        k = int(ms.n[t]) + 1
        q = int(ms.question[t])
        rec = {
            "model": ms.models[ms.cell_model[ms.cell[t]]],
            "group": ms.groups[ms.cell_group[ms.cell[t]]],
            "dataset": ms.question_dataset[q],
            "question": ms.question_id[q],
            "trajectory": int(ms.trajectory[t]),
            "split": None if ms.split[t] < 0 else SPLITS[ms.split[t]],
            "probes": int(ms.probes[t]),
            "L": ms.L[t, :k].tolist(),
            "C": ms.C[t, :k].tolist(),
            "y": int(ms.y[t]),
            "finished": bool(ms.finished[t]),
            "question_text": ms.question_text[q],
        }
        if ms.signals:
            rec["signals"] = {s: v[t, :k].tolist() for s, v in sorted(ms.signals.items())}
        if ms.synthetic:
            rec["synthetic"] = True
        yield rec


def export_jsonl(ms: MeasurementSet, path: str | os.PathLike) -> int:
    """Write `ms` as canonical JSONL atomically; returns the number of lines."""
    lines = [json.dumps(rec, ensure_ascii=False, separators=(", ", ": ")) + "\n"
             for rec in iter_records(ms)]
    write_text_atomic(path, "".join(lines))
    return len(lines)
