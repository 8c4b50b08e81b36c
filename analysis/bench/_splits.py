"""Question-level train / validation / test splits, stratified by group and seeded (docs/rules.md).

The split of a measurement set is a pure function of the seed, the ratios
and, per benchmark group, the group's question ids -- never of the models,
the rows, their order, or a random generator's stream:

1. Every question gets the key SHA-256 of the length-prefixed fields
   ``"otbench/split/v1"``, ``str(seed)``, the group name and the question
   id (UTF-8; each field preceded by its byte length as 4 big-endian bytes,
   so ``("ab", "c")`` and ``("a", "bc")`` never collide). Sorting a group's
   questions by key is a uniformly random permutation that depends on
   nothing else -- the scheme the probe uses to shuffle answer options.
2. The group's `N` questions are apportioned to the splits by the largest
   remainder method on the exact quotas `N * r_j` (ratios normalized to sum
   1, read as exact decimals): floors first, the remaining questions to the
   largest fractional parts, ties to the earlier split (train, validation,
   test). Then every split with a positive ratio gets at least one question
   when `N` allows it: while one is empty, the largest split (earliest on
   ties) gives up one question. At 60/20/20: 90 -> 54/18/18, 500 ->
   300/100/100, 198 -> 119/40/39, 175 -> 105/35/35, 4 -> 2/1/1, 3 -> 1/1/1.
3. In key order, the first counts go to train, the next to validation, the
   rest to test. Every trajectory of a question shares its split, and every
   model sees the same question in the same split.

The questions taken into account are the set's question tables (for a
freshly loaded set, the questions it has rows for; a `MeasurementSet.take`
subset keeps the tables whole, so splitting a subset equals subsetting a
split set). The split is stored in the set's `split` column (written by
`save`) and described in ``provenance["split"]`` (scheme, seed, ratios,
per-group counts). A split file (`write_split_file`, `read_split_file`)
freezes an assignment and overrides the seeded one.
"""

import hashlib
import json
import math
import os
from collections.abc import Mapping, Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
from otbench.analysis.measurement import SPLITS, MeasurementSet, MeasurementSetError

from otbench.files import loads_json, read_json, read_json_bytes, write_text_atomic
from otbench.errors import ArgumentError

SCHEME = "otbench.split/1"
FILE_SCHEMA = "otbench.splits/1"
CONFIG_SCHEMA = "otbench.split-config/1"
"""A seeded split written down (scheme, seed, ratios): `artifacts/otbench/split-default.json`,
the frozen default, is one; `--from-file` applies it as `assign_splits` would."""
DEFAULT_SEED = 20260721
"""The project's recorded seed (docs/rules.md uses the same one for the bootstrap)."""
DEFAULT_RATIOS = (0.6, 0.2, 0.2)
_DOMAIN = b"otbench/split/v1"


# -- validation ---------------------------------------------------------------

def _seed_iv(seed: Any) -> int:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ArgumentError(f"`seed` must be a non-negative integer, got {seed!r}")
    return int(seed)


def ratios_iv(ratios: Any) -> tuple[Fraction, Fraction, Fraction]:
    """Three non-negative ratios with a positive sum, normalized exactly to sum 1.

    Floats are read as the decimals they print as (0.6 is 3/5), so
    ``(60, 20, 20)`` and ``(0.6, 0.2, 0.2)`` are the same ratios.
    """
    if isinstance(ratios, (str, bytes)) or not isinstance(ratios, (Sequence, np.ndarray)):
        raise ArgumentError(f"`ratios` must be a sequence of 3 numbers (train, validation, test), "
                            f"got {ratios!r}")
    if len(ratios) != len(SPLITS):
        raise ArgumentError(f"`ratios` must have 3 entries (train, validation, test), got {len(ratios)}")
    out = []
    for x in ratios:
        if isinstance(x, bool) or not isinstance(x, (int, float, np.integer, np.floating, Fraction)):
            raise ArgumentError(f"`ratios` entries must be numbers, got {x!r}")
        if isinstance(x, (float, np.floating)):
            if not math.isfinite(x):
                raise ArgumentError(f"`ratios` entries must be finite, got {x!r}")
            f = Fraction(str(float(x)))
        else:
            f = Fraction(x)
        if f < 0:
            raise ArgumentError(f"`ratios` entries must be non-negative, got {x!r}")
        out.append(f)
    total = sum(out)
    if total == 0:
        raise ArgumentError("`ratios` must have a positive sum")
    return tuple(f / total for f in out)


# -- the assignment -----------------------------------------------------------

def split_key(seed: int, group: str, question_id: str) -> bytes:
    """The SHA-256 sort key of a question (module docstring, step 1)."""
    parts = [_DOMAIN, str(int(seed)).encode(), group.encode("utf-8"), question_id.encode("utf-8")]
    return hashlib.sha256(b"".join(len(p).to_bytes(4, "big") + p for p in parts)).digest()


def split_counts(num_questions: int, ratios: Sequence[Any] = DEFAULT_RATIOS) -> tuple[int, int, int]:
    """(train, validation, test) question counts of a group of `num_questions` (step 2)."""
    r = ratios_iv(ratios)
    N = int(num_questions)
    quota = [N * x for x in r]
    counts = [math.floor(q) for q in quota]
    left = N - sum(counts)
    # Largest fractional part first; `sorted` is stable, so ties keep split order.
    for j in sorted(range(len(r)), key=lambda j: -(quota[j] - counts[j]))[:left]:
        counts[j] += 1
    positive = [j for j in range(len(r)) if r[j] > 0]
    if N >= len(positive):
        while True:
            empty = [j for j in positive if counts[j] == 0]
            if not empty:
                break
            donor = max(range(len(r)), key=lambda j: (counts[j], -j))
            counts[donor] -= 1
            counts[empty[0]] += 1
    return tuple(counts)


def split_questions(groups: Sequence[str], question_ids: Sequence[str], *,
                    seed: int = DEFAULT_SEED,
                    ratios: Sequence[Any] = DEFAULT_RATIOS) -> np.ndarray:
    """int8[question] split index (into `SPLITS`) of each (group, question id) pair.

    A pure function of its arguments that is invariant to the order of the
    pairs: each group is apportioned on its own (module docstring).

    Raises:
      ValueError: bad seed or ratios, mismatched lengths, or a repeated pair.
    """
    seed = _seed_iv(seed)
    r = ratios_iv(ratios)
    if len(groups) != len(question_ids):
        raise ArgumentError(f"`groups` and `question_ids` differ in length "
                            f"({len(groups)} vs {len(question_ids)})")
    out = np.full(len(groups), -1, dtype=np.int8)
    by_group: dict[str, list[int]] = {}
    for i, g in enumerate(groups):
        by_group.setdefault(g, []).append(i)
    for g, idx in by_group.items():
        ids = [question_ids[i] for i in idx]
        if len(set(ids)) != len(ids):
            dup = next(q for q in ids if ids.count(q) > 1)
            raise ArgumentError(f"question {dup!r} of group {g!r} appears more than once")
        order = sorted(idx, key=lambda i: split_key(seed, g, question_ids[i]))
        counts = split_counts(len(order), r)
        bounds = np.cumsum(counts)
        for rank, i in enumerate(order):
            out[i] = int(np.searchsorted(bounds, rank, side="right"))
    return out


def _rows_from_questions(ms: MeasurementSet, q_split: np.ndarray) -> np.ndarray:
    return np.asarray(q_split, dtype=np.int8)[ms.question]


def group_counts(ms: MeasurementSet, q_split: np.ndarray) -> dict[str, list[int]]:
    """group -> [train, validation, test] question counts of a per-question assignment."""
    out = {}
    for gi, g in enumerate(ms.groups):
        s = q_split[ms.question_group == gi]
        out[g] = [int((s == j).sum()) for j in range(len(SPLITS))]
    return out


def assign_splits(ms: MeasurementSet, *, seed: int = DEFAULT_SEED,
                  ratios: Sequence[Any] = DEFAULT_RATIOS) -> MeasurementSet:
    """A copy of `ms` with the seeded, group-stratified question split (module docstring).

    Any earlier assignment is replaced. ``provenance["split"]`` records the
    scheme, seed, ratios and per-group counts.
    """
    if not isinstance(ms, MeasurementSet):
        raise ArgumentError(f"`ms` must be a MeasurementSet, got {type(ms).__name__}")
    seed = _seed_iv(seed)
    r = ratios_iv(ratios)
    groups = [ms.groups[g] for g in ms.question_group.tolist()]
    q_split = split_questions(groups, ms.question_id, seed=seed, ratios=r)
    info = {"scheme": SCHEME, "seed": seed, "ratios": [float(x) for x in r],
            "counts": group_counts(ms, q_split)}
    return _with_split(ms, q_split, info)


def _with_split(ms: MeasurementSet, q_split: np.ndarray, info: Mapping[str, Any]) -> MeasurementSet:
    import dataclasses

    prov = dict(ms.provenance)
    prov["split"] = dict(info)
    return dataclasses.replace(ms, split=_rows_from_questions(ms, q_split), provenance=prov)


def question_splits(ms: MeasurementSet) -> np.ndarray:
    """int8[question] the split of each question of the set (-1: no rows or unassigned)."""
    out = np.full(ms.num_questions, -1, dtype=np.int8)
    out[ms.question] = ms.split
    return out


# -- split files ----------------------------------------------------------------

def write_split_file(ms: MeasurementSet, path: str | os.PathLike) -> dict[str, Any]:
    """Freeze the set's assignment as a JSON split file and return the document.

    Entries are sorted by (group, question id); the seed and ratios are
    copied from ``provenance["split"]`` when the split was seeded. Questions
    without rows are left out; every question with rows must be assigned.
    """
    q_split = question_splits(ms)
    present = np.zeros(ms.num_questions, dtype=bool)
    present[ms.question] = True
    if np.any(present & (q_split < 0)):
        q = int(np.flatnonzero(present & (q_split < 0))[0])
        raise ArgumentError(f"question {ms.question_id[q]!r} of group "
                            f"{ms.groups[ms.question_group[q]]!r} has no split; assign splits first")
    info = ms.provenance.get("split", {}) if isinstance(ms.provenance, Mapping) else {}
    entries = sorted((ms.groups[ms.question_group[q]], ms.question_id[q], SPLITS[q_split[q]])
                     for q in np.flatnonzero(present).tolist())
    doc = {
        "schema": FILE_SCHEMA,
        "scheme": info.get("scheme"), "seed": info.get("seed"), "ratios": info.get("ratios"),
        "questions": [{"group": g, "question": q, "split": s} for g, q, s in entries],
    }
    write_text_atomic(path, json.dumps(doc, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    return doc


def read_split_file(path: str | os.PathLike) -> dict[tuple[str, str], int]:
    """(group, question id) -> split index from a split file; `MeasurementSetError` on bad input."""
    p = Path(path)
    where = str(p)
    if not p.exists():          # anything else (a FIFO, a device) is read_json's to refuse
        raise MeasurementSetError(where, "split file not found")
    doc = read_json(p)
    if not isinstance(doc, dict) or doc.get("schema") != FILE_SCHEMA:
        got = doc.get("schema") if isinstance(doc, dict) else None
        raise MeasurementSetError(where, f"schema must be {FILE_SCHEMA!r}, got {got!r}")
    entries = doc.get("questions")
    if not isinstance(entries, list):
        raise MeasurementSetError(where, "'questions' must be a list of {group, question, split}")
    lookup = {s: j for j, s in enumerate(SPLITS)}
    out: dict[tuple[str, str], int] = {}
    for i, e in enumerate(entries):
        at = f"{where}: questions[{i}]"
        if not isinstance(e, dict) or not all(isinstance(e.get(k), str)
                                               for k in ("group", "question", "split")):
            raise MeasurementSetError(at, "entry must have string 'group', 'question' and 'split'")
        if e["split"] not in lookup:
            raise MeasurementSetError(at, f"split must be one of {', '.join(SPLITS)}, "
                                          f"got {e['split']!r}")
        key = (e["group"], e["question"])
        if key in out:
            raise MeasurementSetError(at, f"question {key[1]!r} of group {key[0]!r} is listed twice")
        out[key] = lookup[e["split"]]
    return out


def _apply_split_config(ms: MeasurementSet, p: Path, doc: Mapping[str, Any],
                        raw: bytes) -> MeasurementSet:
    """The seeded split a `CONFIG_SCHEMA` document names, with the file in the provenance."""
    where = str(p)
    if doc.get("scheme") != SCHEME:
        raise MeasurementSetError(where, f"scheme must be {SCHEME!r}, got {doc.get('scheme')!r}")
    try:
        seed, ratios = _seed_iv(doc.get("seed")), ratios_iv(doc.get("ratios"))
    except ValueError as e:
        raise MeasurementSetError(where, str(e).replace("`", "'")) from None
    out = assign_splits(ms, seed=seed, ratios=ratios)
    info = dict(out.provenance["split"])
    info.update(file=p.name, sha256=hashlib.sha256(raw).hexdigest())     # the bytes applied
    return _with_split(out, question_splits(out), info)


def apply_split_file(ms: MeasurementSet, path: str | os.PathLike) -> MeasurementSet:
    """A copy of `ms` with the assignment of a split file (it overrides any seeded split).

    A seeded-split document (`CONFIG_SCHEMA`: scheme, seed, ratios, as
    `artifacts/otbench/split-default.json`) is applied as `assign_splits`.

    Every question the set has rows for must be listed (`MeasurementSetError`
    names the first missing one); entries for other questions are ignored,
    so one file can freeze a whole benchmark and serve its subsets.
    """
    p = Path(path)
    raw = read_json_bytes(p) if p.exists() else None
    doc = loads_json(raw, str(p)) if raw is not None else None
    if isinstance(doc, dict) and doc.get("schema") == CONFIG_SCHEMA:
        return _apply_split_config(ms, p, doc, raw)
    if doc is not None and (not isinstance(doc, dict) or doc.get("schema") != FILE_SCHEMA):
        got = doc.get("schema") if isinstance(doc, dict) else None
        raise MeasurementSetError(str(p), f"schema must be {FILE_SCHEMA!r} (an assignment) or "
                                          f"{CONFIG_SCHEMA!r} (a seeded split), got {got!r}")
    table = read_split_file(path)
    present = np.zeros(ms.num_questions, dtype=bool)
    present[ms.question] = True
    q_split = np.full(ms.num_questions, -1, dtype=np.int8)
    for q in range(ms.num_questions):
        key = (ms.groups[ms.question_group[q]], ms.question_id[q])
        s = table.get(key)
        if s is None:
            if present[q]:
                raise MeasurementSetError(str(path), f"no entry for question {key[1]!r} of "
                                                     f"group {key[0]!r}")
            continue
        q_split[q] = s
    with open(path, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    info = {"scheme": "file", "file": Path(path).name, "sha256": digest,
            "counts": group_counts(ms, np.where(present, q_split, -1))}
    return _with_split(ms, q_split, info)
