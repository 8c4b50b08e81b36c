"""Parquet storage of measurement sets: atomic writer, verifying loader, manifest (docs/rules.md).

Layout of a measurement-set directory::

    DIR/manifest.json
    DIR/trajectories/<model>/<group>/part-0.parquet   one row per trajectory
    DIR/<table>/part-0.parquet                        optional extra tables
                                                      (the probe's `tokens`)

Folder names percent-encode the model and group ids (ids such as
``org/model`` contain slashes); every file also stores `model` and `group`
as columns, which are authoritative and are checked against the path.
The folders carry no ``key=value`` (Hive) names on purpose: a Hive name
makes readers add a second, dictionary-typed `model` column that clashes
with the in-file one (pandas refuses to read such a folder), while plain
folders let pandas, polars, pyarrow.dataset and DuckDB read
``DIR/trajectories`` as one table. Sets written with the earlier Hive
names (``model=<m>/group=<g>``) still load: the manifest lists every path.
"""

import hashlib
import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from otbench.files import (
    atomic_dir,
    foreign_entries,
    is_measurement_set,
    provenance,
    read_json,
    sha256_file,
)

from ._bound import PROVENANCE_HASH, check_provenance, provenance_hash
from ._build import MeasurementSetError
from ._columns import set_from_columns
from ._hub_id import hub_path
from ._listed import read_listed
from ._padding import PaddedSignals, hash_measured, unpad  # noqa: F401  (unpad: read here by the tests)
from ._rows import REQUIRED, SIGNAL_PREFIX, cell_table
from ._types import SCHEMA, MeasurementSet
from otbench.errors import ArgumentError

MANIFEST = "manifest.json"
TRAJ_DIR = "trajectories"

def content_hash(ms: MeasurementSet, *, signals: bool = True) -> str:
    """sha256 of the logical content (arrays and name tables), independent of file encoding.

    The synthetic label is part of the content (a simulated set is not the
    same data as a measured one): flipping `synthetic` in a manifest breaks
    the hash. It enters only when set, so measured sets keep their hashes.

    The hash covers every bit of the data, float signals included (it is the
    set's integrity check). Float signals measured by an engine (log-
    probabilities from CPU or GPU kernels) may differ in their last bits
    between machines and thread counts while everything else is the same;
    `signals=False` hashes the exact part only -- counts, `L`, `C`, `y`,
    flags, indices, name tables and the names of the signals, not their
    values -- so two such sets can be compared exactly there and within a
    tolerance on the signals.
    """
    h = hashlib.sha256()
    if ms.synthetic:
        h.update(b"synthetic")
    for name in ("n", "probes", "y", "finished", "trajectory", "cell", "question", "split"):
        h.update(name.encode())
        h.update(np.ascontiguousarray(getattr(ms, name)).astype("<i8").tobytes())
    if not signals:
        h.update(b"signals-left-out:" + ",".join(sorted(ms.signals)).encode())
    for name, arr in [("L", ms.L), ("C", ms.C)]:
        h.update(name.encode())
        hash_measured(h, np.asarray(arr), ms.n, "<i8")
    for name in sorted(ms.signals) if signals else []:
        h.update(name.encode())
        if isinstance(ms.signals, PaddedSignals):      # hashed without padding it
            step = 1 << 13
            for lo in range(0, ms.num_trajectories, step):
                h.update(ms.signals.measured(name, lo, lo + step))
        else:
            arr = np.asarray(ms.signals[name])
            hash_measured(h, arr, ms.n, "<f8" if arr.dtype.kind == "f" else "<i8")
    tables = {
        "models": ms.models, "groups": ms.groups,
        "cell_model": ms.cell_model.tolist(), "cell_group": ms.cell_group.tolist(),
        "question_group": ms.question_group.tolist(), "question_id": ms.question_id,
        "question_dataset": ms.question_dataset, "question_text": ms.question_text,
    }
    h.update(json.dumps(tables, sort_keys=True, ensure_ascii=False).encode())
    return h.hexdigest()


# Folder names are at most 255 bytes on common file systems; a long percent-encoded
# name keeps a readable head and is made unique by a hash of the full name.
_PART_MAX = 200


def part_name(value: str) -> str:
    """A model or group id as one folder name: percent-encoded, never hidden, bounded.

    Dataset readers (pyarrow, hence pandas) skip names starting with `.` or
    `_`, so a leading one is encoded too; a name longer than `_PART_MAX`
    keeps a readable head and a hash of the full name.
    """
    enc = quote(value, safe="")
    if enc[:1] in (".", "_"):
        enc = ("%2E" if enc[0] == "." else "%5F") + enc[1:]
    if len(enc) <= _PART_MAX:
        return enc
    head = enc[:120]
    head = head[:head.rfind("%")] if "%" in head[-2:] else head
    return f"{head}~{hashlib.sha256(value.encode('utf-8')).hexdigest()[:16]}"


def _partition(ms: MeasurementSet, c: int) -> str:
    m, g = ms.cell_name(c)
    return f"{TRAJ_DIR}/{part_name(m)}/{part_name(g)}/part-0.parquet"


def _partition_values(rel: str) -> dict[str, str]:
    """The encoded (model, group) a file's path claims, for both layouts.

    Current sets: ``trajectories/<model>/<group>/part-0.parquet``; sets written
    before: ``trajectories/model=<m>/group=<g>/part-0.parquet``.
    """
    segs = Path(rel).parts[1:-1]
    if any("=" in seg and seg.split("=", 1)[0] in ("model", "group") for seg in segs):
        return dict(seg.split("=", 1) for seg in segs if "=" in seg)
    return dict(zip(("model", "group"), segs))


def _replaceable(path: Path) -> bool:
    """What `--overwrite` may replace: a measurement set, or an empty folder."""
    return is_measurement_set(path) or (path.is_dir() and not path.is_symlink()
                                        and not any(path.iterdir()))


def save(ms: MeasurementSet, path: str | os.PathLike, *, overwrite: bool = False,
         extra_tables: Mapping[str, pa.Table] | None = None,
         write_extra: Callable[[Path], Mapping[str, int]] | None = None) -> dict[str, Any]:
    """Write `ms` to directory `path` atomically and return the manifest.

    Everything is written into a sibling temporary directory first and moved
    into place with one rename, so a killed writer never leaves a half-written
    set under `path`. Output is deterministic: the same set gives the same
    bytes (no timestamps).

    Args:
      overwrite: replace an existing measurement set (or empty folder) at
        `path`; anything else there is refused, and entries of the old set
        that are not part of it (`results/`, `run.json`, a user's files) are
        kept in the new one.
      extra_tables: name -> table written as `path/<name>/part-0.parquet` and
        hashed in the manifest (the probe stores raw token ids this way).
      write_extra: for tables too large to hold in memory: called with the
        temporary folder, it writes `<folder>/<name>/part-0.parquet` itself
        (streaming) and returns name -> rows; those files are hashed too.
    """
    path = Path(path)
    if os.path.lexists(path) and not overwrite:
        raise FileExistsError(f"{path}: already exists (pass `overwrite` to replace it)")
    if overwrite and os.path.lexists(path) and not _replaceable(path):
        raise FileExistsError(f"{path}: exists and is not a measurement set; --overwrite "
                              f"replaces only a measurement set, refusing to touch it")
    # Replace only a measurement set, and keep what it holds besides the set
    # (results/, run.json, a user's notes): overwriting never deletes those.
    with atomic_dir(path, replace=_replaceable if overwrite else None,
                    keep=foreign_entries) as tmp:
        files = []
        for c in range(ms.num_cells):
            rows = ms.cell_rows(c)
            if rows.size == 0:
                continue
            rel = _partition(ms, c)
            (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
            pq.write_table(cell_table(ms, rows), tmp / rel, compression="zstd")
            files.append({"path": rel, "rows": int(rows.size), "sha256": sha256_file(tmp / rel)})
        extras = {}
        for name, table in sorted((extra_tables or {}).items()):
            if name in (TRAJ_DIR, MANIFEST) or "/" in name:
                raise ArgumentError(f"extra table name {name!r} is reserved or not a plain name")
            rel = f"{name}/part-0.parquet"
            (tmp / name).mkdir()
            pq.write_table(table, tmp / rel, compression="zstd")
            extras[name] = {"path": rel, "rows": table.num_rows, "sha256": sha256_file(tmp / rel)}
        for name, rows in sorted((write_extra(tmp) if write_extra is not None else {}).items()):
            if name in (TRAJ_DIR, MANIFEST) or "/" in name or name in extras:
                raise ArgumentError(f"extra table name {name!r} is reserved, repeated or not a plain name")
            rel = f"{name}/part-0.parquet"
            extras[name] = {"path": rel, "rows": int(rows), "sha256": sha256_file(tmp / rel)}
        manifest = write_manifest(tmp, ms, files, extras)
    return manifest


def write_manifest(folder: Path, ms: MeasurementSet, files: list[dict[str, Any]],
                   tables: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
    """Write and return the manifest of `ms` stored as `files` (trajectories) and `tables`."""
    manifest = {
        "schema": SCHEMA,
        "synthetic": bool(ms.synthetic),
        "counts": ms.summary(),
        "content_hash": content_hash(ms),
        "files": files,
        "tables": dict(tables),
        "provenance": dict(ms.provenance), PROVENANCE_HASH: provenance_hash(ms.provenance),
        "writer": provenance(("numpy", "pyarrow")),
    }
    with open(folder / MANIFEST, "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=2, sort_keys=True, ensure_ascii=False)
        f.write("\n")
    return manifest


def read_manifest(path: str | os.PathLike) -> dict[str, Any]:
    """The manifest of the measurement set at `path`, checked for schema (one-line errors)."""
    path = Path(path)
    mpath = path / MANIFEST
    if not path.is_dir():
        raise MeasurementSetError(str(path), "not a directory (expected a measurement set)")
    if not mpath.exists():      # a FIFO or device there is read_json's to refuse by name
        raise MeasurementSetError(str(mpath), "missing manifest (not a measurement set?)")
    manifest = read_json(mpath)
    if not isinstance(manifest, dict) or manifest.get("schema") != SCHEMA:
        got = manifest.get("schema") if isinstance(manifest, dict) else None
        raise MeasurementSetError(str(mpath), f"schema must be {SCHEMA!r}, got {got!r}")
    for key in ("files", "synthetic", "content_hash"):
        if key not in manifest:
            raise MeasurementSetError(str(mpath), f"missing key {key!r}")
    _manifest_shape(str(mpath), manifest)
    return manifest


def _manifest_shape(where: str, manifest: Mapping[str, Any]) -> None:
    """Types of the manifest's keys and confinement of every path it lists to the set."""
    if not isinstance(manifest["synthetic"], bool):
        raise MeasurementSetError(where, f"'synthetic' must be true or false, got "
                                         f"{json.dumps(manifest['synthetic'])}")
    if not isinstance(manifest["content_hash"], str):
        raise MeasurementSetError(where, "'content_hash' must be a string")
    for key in ("provenance", "counts", "writer"):
        if key in manifest and not isinstance(manifest[key], dict):
            raise MeasurementSetError(where, f"'{key}' must be an object, got "
                                             f"{type(manifest[key]).__name__} "
                                             f"{json.dumps(manifest[key])[:60]}")
    files, tables = manifest["files"], manifest.get("tables", {})
    if not isinstance(files, list):
        raise MeasurementSetError(where, "'files' must be a list of {path, rows, sha256}")
    if not isinstance(tables, dict):
        raise MeasurementSetError(where, "'tables' must be an object name -> {path, rows, sha256}")
    entries = [(f"files[{i}]", e, TRAJ_DIR) for i, e in enumerate(files)]
    entries += [(f"tables[{k!r}]", e, k) for k, e in tables.items()]
    for label, entry, folder in entries:
        if not (isinstance(entry, dict) and isinstance(entry.get("path"), str)
                and isinstance(entry.get("sha256"), str)
                and type(entry.get("rows")) is int and entry["rows"] >= 0):
            raise MeasurementSetError(where, f"{label} must be {{path: str, rows: int >= 0, "
                                             f"sha256: str}}")
        _confined(where, label, entry["path"], folder)
    paths = [e["path"] for e in files]
    if len(set(paths)) != len(paths):
        raise MeasurementSetError(where, "'files' lists a path twice")


def _confined(where: str, label: str, rel: str, folder: str) -> None:
    """A listed path is relative, inside its folder of the set, without `.`/`..` steps."""
    parts = rel.split("/")
    if (not rel or rel.startswith("/") or "\\" in rel or parts[0] != folder or len(parts) < 2
            or any(p in ("", ".", "..") for p in parts) or not rel.endswith(".parquet")):
        raise MeasurementSetError(where, f"{label} path {rel!r} must be a relative "
                                         f"'{folder}/...parquet' path inside the set")


def _check_column(file: str, table: pa.Table, name: str, typ: pa.DataType) -> None:
    if name not in table.column_names:
        raise MeasurementSetError(file, f"missing column {name!r}")
    got = table.schema.field(name).type
    ok = got == typ
    if not ok and pa.types.is_list(typ) and (pa.types.is_list(got) or pa.types.is_large_list(got)):
        ok = pa.types.is_integer(got.value_type) if pa.types.is_integer(typ.value_type) \
            else pa.types.is_floating(got.value_type)
    elif not ok and pa.types.is_integer(typ):
        ok = pa.types.is_integer(got)
    elif not ok and pa.types.is_string(typ):
        ok = pa.types.is_string(got) or pa.types.is_large_string(got) or pa.types.is_null(got)
    if not ok:
        raise MeasurementSetError(file, f"column {name!r} must be {_describe(typ)}, got {got}")


def _within_int64(file: str, table: pa.Table, name: str) -> pa.Table:
    """`table` with its unsigned 64-bit integer column `name` (or list of them) as int64;
    a value of 2**63 or more is refused with its row (it would wrap, or break the
    concatenation of files)."""
    typ = table.schema.field(name).type
    scalar = typ if not (pa.types.is_list(typ) or pa.types.is_large_list(typ)) else typ.value_type
    if scalar != pa.uint64():
        return table
    import pyarrow.compute as pc     # only for uint64 columns: its import outweighs a read

    col = table.column(name)
    top = pc.max(col if scalar is typ else pc.list_flatten(col)).as_py()
    if top is not None and top >= 2 ** 63:
        for r, v in enumerate(col.to_pylist()):
            hit = next((x for x in (v if isinstance(v, list) else [v])
                        if x is not None and x >= 2 ** 63), None)
            if hit is not None:
                raise MeasurementSetError(f"{file}: row {r}", f"{name} value {hit} is beyond "
                                                             f"int64 (at most 2**63 - 1)")
    want = pa.int64() if scalar is typ else pa.list_(pa.int64())
    return table.set_column(table.column_names.index(name), name, col.cast(want))


def _describe(typ: pa.DataType) -> str:
    if pa.types.is_list(typ):
        return "a list of " + ("integers" if pa.types.is_integer(typ.value_type) else "floats")
    if pa.types.is_integer(typ):
        return "an integer column"
    if pa.types.is_boolean(typ):
        return "a boolean column"
    return "a string column"


def load(path: str | os.PathLike, *, verify: bool = True) -> MeasurementSet:
    """Load and validate a measurement set directory.

    Every rule of docs/rules.md is checked (monotone `L`, `L[0] = 0`, `0 <= C <=
    probes`, consistent `n`, no duplicate (model, question, trajectory), no
    mixed probes within a question); a violation raises `MeasurementSetError`
    naming the file, the row (0-based within that file) and the rule. With
    `verify`, file checksums and the logical content hash are compared with
    the manifest. `path` may be a Hub id, `hf://datasets/ORG/NAME[@REVISION]`,
    of a set exported with `export_hub` and present in the local Hugging Face
    cache (nothing is downloaded).
    """
    path = hub_path(path)
    manifest = read_manifest(path)
    if verify:
        check_provenance(str(path / MANIFEST), manifest)
    tables, labels, signal_names = _read_files(path, manifest, verify)
    bounds = np.cumsum([0] + [r for _, r in labels])

    def where(i: int) -> str:
        j = int(np.searchsorted(bounds, i, side="right") - 1)
        return f"{labels[j][0]}: row {i - bounds[j]}"

    ms = set_from_columns(pa.concat_tables(tables, promote_options="permissive"), signal_names,
                          synthetic=bool(manifest["synthetic"]),
                          provenance=manifest.get("provenance", {}), where=where)
    if verify and content_hash(ms) != manifest["content_hash"]:
        raise MeasurementSetError(str(path / MANIFEST),
                                  "content hash does not match the trajectories (or the "
                                  "synthetic flag was changed)")
    counts, actual = manifest.get("counts"), ms.summary()
    if verify and counts is not None and counts != actual:
        wrong = (sorted(k for k in set(counts) | set(actual) if counts.get(k) != actual.get(k))
                 if isinstance(counts, dict) else ["counts"])
        raise MeasurementSetError(str(path / MANIFEST), f"counts do not match the trajectories "
                                                        f"({', '.join(wrong)} differ)")
    return ms


def _read_files(path: Path, manifest: Mapping[str, Any], verify: bool):
    """Every listed trajectory file, checked (presence, checksum, columns, rows, partitions).

    Returns the tables, `(file, rows)` labels for row messages, and the signal names.
    """
    listed = {f["path"] for f in manifest["files"]}
    found = {p.relative_to(path).as_posix() for p in (path / TRAJ_DIR).rglob("*.parquet")} \
        if (path / TRAJ_DIR).exists() else set()
    for extra in sorted(found - listed):
        raise MeasurementSetError(str(path / extra), "file is not listed in the manifest")
    tables, labels = [], []
    signal_names: set[str] | None = None
    for entry, (table, names) in zip(manifest["files"], _each_read(path, manifest["files"], verify)):
        if signal_names is None:
            signal_names = names
        elif names != signal_names:
            raise MeasurementSetError(str(path / entry["path"]),
                                      f"signal columns {sorted(names)} differ from "
                                      f"{sorted(signal_names)} in other files")
        tables.append(table)
        labels.append((str(path / entry["path"]), table.num_rows))
    if not tables:
        raise MeasurementSetError(str(path / MANIFEST), "the set has no trajectory files")
    return tables, labels, signal_names or set()


def _each_read(path: Path, entries, verify: bool):
    """`_read_file` of each entry, in order, two at a time (hashing and Parquet decoding
    release the GIL); the first failure in manifest order is the one raised."""
    import concurrent.futures

    if len(entries) < 2:
        yield from (_read_file(path, e, verify) for e in entries)
        return
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        yield from pool.map(lambda e: _read_file(path, e, verify), entries)


def _read_file(path: Path, entry: Mapping[str, Any], verify: bool) -> tuple[pa.Table, set[str]]:
    """One trajectory file of the manifest, checked; returns it and its signal names."""
    rel = entry["path"]
    fpath = path / rel
    file = str(fpath)
    table = read_listed(fpath, entry.get("sha256") if verify else None)
    for name, typ in REQUIRED.items():
        _check_column(file, table, name, typ)
        table = _within_int64(file, table, name)
    names = {c[len(SIGNAL_PREFIX):] for c in table.column_names if c.startswith(SIGNAL_PREFIX)}
    for name in sorted(names):
        _check_column(file, table, SIGNAL_PREFIX + name, pa.list_(pa.float64()))
    if table.num_rows != entry.get("rows"):
        raise MeasurementSetError(file, f"has {table.num_rows} rows, manifest says {entry.get('rows')}")
    parts = _partition_values(rel)
    for col in ("model", "group"):
        want = parts.get(col)
        if want is None:
            continue
        # Each distinct name once, in the order of its first row, so the first bad row is
        # still the one named (encoding every row's name took seconds on a large set).
        firsts: dict = {}
        for r, v in enumerate(table.column(col).to_pylist()):
            firsts.setdefault(v, r)
        for v, r in firsts.items():
            if want not in (part_name(v or ""), quote(v or "", safe="")):
                raise MeasurementSetError(f"{file}: row {r}",
                                          f"{col} {v!r} does not match its folder {want!r}")
    return table, names


def load_table(path: str | os.PathLike, name: str) -> pa.Table:
    """An extra table (e.g. the probe's `tokens`) of a measurement set, checksum verified."""
    path = Path(path)
    manifest = read_manifest(path)
    entry = manifest["tables"].get(name) if "tables" in manifest else None
    if entry is None:
        raise MeasurementSetError(str(path / MANIFEST), f"no table {name!r} in this set")
    return read_listed(path / entry["path"], entry["sha256"])
