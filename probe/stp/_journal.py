"""The work-unit journal: crash-safe commits and content-keyed reuse of probed units.

Layout of a journal folder (default: `OUT.journal` beside the output)::

    DIR/journal.json                 marker: {"schema": "otbench.journal/1"}
    DIR/model.json                   the hub model's resolved commit (`pin_model`)
    DIR/lock                         flock'ed by the one run that writes here
    DIR/lock.owner                   the lock where the filesystem has no flock (`_lock`)
    DIR/units/<k[:2]>/<key>.unit     one committed unit (key: `_resume_keys.unit_key`)
    DIR/quarantine/<key>.<i>.unit    records that failed verification, kept for inspection

A record file is ``MAGIC``, a header line ``<payload bytes> <sha256 of
payload>``, then the payload: a 4-byte little-endian length `J`, `J` bytes
of zlib-compressed canonical JSON ``{"key": key, "unit": record}``, and the
unit's token ids as raw little-endian int32 (prompt, thinking, answer, then
every probe answer in order); in the JSON record those fields hold only
their lengths. Token ids are ~99 % of a unit (~3 MB at paper shape), and as
JSON + zlib they cost the driver ~1 s per unit; raw, a few milliseconds. A commit writes a hidden
temp file in the same folder, fsyncs it, renames it over the final name and
fsyncs the folder, so after a kill -9 at any instant a record is either
absent or complete; the units in flight are lost and redone, nothing else.
Temp files left by a kill are deleted when the journal is next opened.

A record is read only after every check passes: magic, header, length,
checksum, decompression, JSON, the key inside equals the file's key, and the
unit is the one expected. Anything else (a truncated or bit-flipped file, a
file renamed to another key) is moved to `quarantine/`, reported, and the
unit is probed again: a damaged record is never silently read.
"""

import contextlib
import hashlib
import json
import os
import re
import struct
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from otbench.errors import OtbenchError
from otbench.files import pid_alive

from ._background import BackgroundWorker
from ._ids import from_le_bytes, to_le_bytes
from ._lock import JournalLock, LockHeldError
from ._loop import UnitResult

JOURNAL_SCHEMA = "otbench.journal/1"
MARKER = "journal.json"
MODEL = "model.json"
MAGIC = b"otbench.unit/2\n"
_UNITS = "units"
_QUARANTINE = "quarantine"


_KEY = re.compile(r"[0-9a-f]{64}")
_TMP = re.compile(r"\.([0-9a-f]{64})\.([0-9]+)\.tmp")


def _is_marker(marker: Path) -> bool:
    """A journal's marker: a regular file holding `{"schema": JOURNAL_SCHEMA}`."""
    try:
        if marker.is_symlink() or not marker.is_file() or marker.stat().st_size > 4096:
            return False
        doc = json.loads(marker.read_text())
    except (OSError, ValueError):
        return False
    return isinstance(doc, dict) and doc.get("schema") == JOURNAL_SCHEMA


def _drop_units(units: Path) -> None:
    """Remove the unit records under `units/` (`<k[:2]>/<key>.unit`, starting with MAGIC) and
    the folders they leave empty; anything else there (a user's file) is kept."""
    if not units.is_dir() or units.is_symlink():
        return
    for sub in units.iterdir():
        if sub.is_symlink() or not sub.is_dir():
            continue
        for f in sub.iterdir():
            if f.suffix != ".unit" or not _KEY.fullmatch(f.stem) or f.stem[:2] != sub.name \
                    or f.is_symlink() or not f.is_file():
                continue
            try:
                with open(f, "rb") as fh:
                    ours = fh.read(len(MAGIC)) == MAGIC
            except OSError:
                ours = False
            if ours:
                f.unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            sub.rmdir()                         # only when nothing else is left in it


class JournalError(OtbenchError, RuntimeError):
    """The journal folder cannot be used as asked; the message says what to do."""


class RecordError(OtbenchError, ValueError):
    """A record file failed verification; the message names the check."""


_FLAT_IDS = ("prompt", "thinking", "answer")


def encode_record(key: str, rec: Mapping[str, Any]) -> tuple[bytes, bytes]:
    """(file bytes, the canonical JSON inside) of one unit record (`UnitResult.to_record()` form)."""
    small = dict(rec)
    parts = [rec[k] for k in _FLAT_IDS]
    small["ids"] = {k: len(rec[k]) for k in _FLAT_IDS}
    small["probe_tokens"] = [[len(t) for t in pos] for pos in rec["probe_tokens"]]
    for k in _FLAT_IDS:
        del small[k]
    parts.extend(t for pos in rec["probe_tokens"] for t in pos)
    body = json.dumps({"key": key, "unit": small}, sort_keys=True, separators=(",", ":")).encode()
    z = zlib.compress(body, 3)
    payload = b"".join([struct.pack("<I", len(z)), z, *map(to_le_bytes, parts)])
    head = f"{len(payload)} {hashlib.sha256(payload).hexdigest()}\n".encode()
    return MAGIC + head + payload, body


def _unpack(payload: bytes) -> tuple[Any, memoryview]:
    if len(payload) < 4:
        raise RecordError("payload does not decode")
    (jlen,) = struct.unpack_from("<I", payload)
    try:
        obj = json.loads(zlib.decompress(payload[4:4 + jlen]))
    except (zlib.error, ValueError):
        raise RecordError("payload does not decode") from None
    return obj, memoryview(payload)[4 + jlen:]


def _with_ids(unit: dict, blob: memoryview, *, arrays: bool = False) -> dict:
    """The record with its token ids put back from the int32 blob.

    As `UnitResult` holds them (tuples; `array("i")` probe answers); with
    `arrays`, read-only NumPy views of the blob instead (the final writer's
    path: no copy at all).
    """
    import numpy as np

    try:
        flat = np.frombuffer(blob, dtype="<i4")
        lens = [int(unit["ids"][k]) for k in _FLAT_IDS]
        shape = unit["probe_tokens"]
        want = sum(lens) + sum(n for pos in shape for n in pos)
    except (KeyError, TypeError, ValueError):
        raise RecordError("fields do not form a unit result") from None
    if flat.size != want:
        raise RecordError(f"holds {flat.size} token ids, its fields need {want}")
    rec = {k: v for k, v in unit.items() if k != "ids"}
    at = 0
    for k, n in zip(_FLAT_IDS, lens):
        rec[k] = flat[at:at + n] if arrays else tuple(flat[at:at + n].tolist())
        at += n
    probes = []
    for pos in shape:
        row = []
        for n in pos:
            row.append(flat[at:at + n] if arrays else from_le_bytes(blob[4 * at:4 * (at + n)]))
            at += n
        probes.append(tuple(row))
    rec["probe_tokens"] = tuple(probes)
    return rec


def decode_record(data: bytes, key: str, *, arrays: bool = False) -> dict[str, Any]:
    """The unit record (`UnitResult.to_record()` form) stored in `data` under `key`.

    `arrays`: token ids as NumPy views (see `_with_ids`) instead of tuples.

    Raises:
      RecordError: the first check that fails (see module docstring).
    """
    if not data.startswith(MAGIC):
        raise RecordError("bad magic (not an otbench unit record, or its start is damaged)")
    nl = data.find(b"\n", len(MAGIC))
    if nl < 0:
        raise RecordError("truncated header")
    try:
        size_s, digest = data[len(MAGIC):nl].decode("ascii").split(" ")
        size = int(size_s)
    except (UnicodeDecodeError, ValueError):
        raise RecordError("malformed header") from None
    payload = memoryview(data)[nl + 1:]              # no copy of the ~3 MB of ids
    if len(payload) != size:
        raise RecordError(f"truncated payload: {len(payload)} of {size} bytes")
    if hashlib.sha256(payload).hexdigest() != digest:
        raise RecordError("checksum mismatch")
    obj, blob = _unpack(payload)
    if not isinstance(obj, dict) or obj.get("key") != key or not isinstance(obj.get("unit"), dict):
        raise RecordError(f"holds key {str(obj.get('key') if isinstance(obj, dict) else None)[:16]}..., "
                          f"not {key[:16]}...")
    return _with_ids(obj["unit"], blob, arrays=arrays)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


_WRITE_DEPTH = 2
"""Encoded records handed to the journal's writer thread and not yet on disk (~3 MB each at paper
shape)."""


class Journal:
    """One run's view of a journal folder: look up, verify and commit unit records.

    Open it with `Journal.open`; `close` releases the lock. Attributes
    counting what happened (for `run.json`): `reused`, `committed`,
    `quarantined` (list of (file name, reason)), `torn` (temp files of
    interrupted commits removed on open).
    """

    def __init__(self, root: Path, lock: JournalLock, torn: int):
        self.root = root
        self._lock = lock
        self.torn = torn
        self.reused = 0
        self.committed = 0
        self.quarantined: list[tuple[str, str]] = []
        self._writer: BackgroundWorker | None = None     # `commit_later`'s thread, once started

    # -- opening -------------------------------------------------------------------
    @classmethod
    def open(cls, root: str | os.PathLike, *, resume: bool, overwrite: bool = False) -> "Journal":
        """Open (creating it if needed) the journal at `root` and take its lock.

        A journal with records is continued only with `resume`; with
        `overwrite` (and no `resume`) it is emptied first; with neither it is
        refused, so an earlier run's work is never reused or discarded by
        accident. A folder that is not a journal is never touched.
        """
        root = Path(root)
        marker = root / MARKER
        if root.exists():
            if not root.is_dir():
                raise JournalError(f"{root}: exists and is not a journal folder")
            if _is_marker(marker):
                if not resume and not overwrite and any((root / _UNITS).glob("*/*.unit")):
                    raise JournalError(f"{root}: holds units of an earlier run; pass --resume to "
                                       "continue it, or --overwrite to start over")
            elif any(root.iterdir()):
                raise JournalError(f"{root}: exists and is not an otbench journal; choose another "
                                   "--journal folder")
        root.mkdir(parents=True, exist_ok=True)
        try:
            lock = JournalLock(root)
        except LockHeldError as e:
            raise JournalError(str(e)) from None
        try:
            if overwrite and not resume:
                _drop_units(root / _UNITS)          # only the records otbench wrote
                (root / MODEL).unlink(missing_ok=True)
            if not marker.is_file():
                marker.write_text(json.dumps({"schema": JOURNAL_SCHEMA}) + "\n")
                _fsync_dir(root)
            (root / _UNITS).mkdir(exist_ok=True)
            torn = 0
            # A commit's temporary (`.<key>.<pid>.tmp`) whose writer no longer runs is a leftover
            # of a killed commit; a live writer's, or a look-alike of a user's, is left alone.
            for tmp in (root / _UNITS).glob("*/.*.tmp"):
                m = _TMP.fullmatch(tmp.name)
                if m and m.group(1)[:2] == tmp.parent.name and not pid_alive(int(m.group(2))) \
                        and tmp.is_file() and not tmp.is_symlink():
                    tmp.unlink(missing_ok=True)
                    torn += 1
        except BaseException:
            lock.release()
            raise
        return cls(root, lock, torn)

    def close(self) -> None:
        """Finish the commits already handed to the writer thread, then release the lock.

        A failure of those late commits is not raised here (`drain` raises it
        on the normal path); their units are simply not in the journal.
        """
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        self._lock.release()

    def __enter__(self) -> "Journal":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def pin_model(self, repository: str, revision: str, commit: str | None) -> None:
        """Record the commit the hub model's `revision` resolved to, or refuse a run at another one.

        A branch or tag ("main") can move while a week-long run is resumed: its
        units would then be keyed anew and probed again on other weights. The
        first run writes `model.json`; a later run whose revision resolves to
        another commit is refused in one line naming both, before any unit is
        probed (pin `model.revision` to the recorded commit to continue).
        """
        from otbench.files import read_json, write_text_atomic

        path = self.root / MODEL
        now = {"repository": repository, "revision": revision, "commit": commit}
        if path.is_file():
            old = read_json(path)                     # a damaged file: one line naming it
            if not isinstance(old, dict) or not isinstance(old.get("commit"), (str, type(None))):
                raise JournalError(f"{path}: not a model record otbench wrote; remove it to record "
                                   "the model anew")
            if old.get("repository") == repository:
                was = old.get("commit")
                if was != commit:
                    raise JournalError(
                        f"{self.root}: this journal's run used {repository} at commit {was} (revision "
                        f"{old.get('revision')!r}), but revision {revision!r} now resolves to {commit}; "
                        f"set model.revision = \"{was}\" to continue the run, or use a new --journal")
                return
        write_text_atomic(path, json.dumps(now, sort_keys=True) + "\n")

    # -- records -------------------------------------------------------------------
    def path(self, key: str) -> Path:
        return self.root / _UNITS / key[:2] / f"{key}.unit"

    def _quarantine(self, path: Path, reason: str) -> None:
        qdir = self.root / _QUARANTINE
        qdir.mkdir(exist_ok=True)
        i = 0
        while (qdir / f"{path.stem}.{i}.unit").exists():
            i += 1
        os.replace(path, qdir / f"{path.stem}.{i}.unit")
        self.quarantined.append((path.name, reason))

    def lookup(self, key: str, *, group: str, question: str, trajectory: int) -> UnitResult | None:
        """The committed unit under `key`, or None (absent, or failed a check: then quarantined)."""
        path = self.path(key)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        try:
            rec = decode_record(data, key)
            try:
                unit = UnitResult.from_record(rec)
            except (KeyError, TypeError, ValueError):
                raise RecordError("fields do not form a unit result") from None
            if (unit.group, unit.question, unit.trajectory) != (group, question, trajectory):
                raise RecordError(f"holds unit {(unit.group, unit.question, unit.trajectory)}, "
                                  f"expected {(group, question, trajectory)}")
        except RecordError as e:
            self._quarantine(path, str(e))
            return None
        self.reused += 1
        return unit

    def read(self, key: str, *, arrays: bool = False) -> UnitResult:
        """The committed unit under `key`, verified; raises `RecordError` if it fails a check.

        The runner assembles the final set through this, one unit at a time,
        so a fresh run and a resumed one read the same bytes. With `arrays`
        the token fields are NumPy views (for the streaming writer; such a
        unit is for reading its fields, not for comparing).
        """
        rec = decode_record(self.path(key).read_bytes(), key, arrays=arrays)
        if arrays:
            return UnitResult(**{k: rec[k] for k in UnitResult.__dataclass_fields__ if k in rec})
        return UnitResult.from_record(rec)

    def commit(self, key: str, unit: UnitResult, *, read_back: bool = True) -> UnitResult | None:
        """Write `unit` under `key` atomically (temp file, fsync, rename, fsync folder).

        Returns the unit as decoded from the committed bytes (None with
        `read_back=False`, for callers that read it later with `read`).
        """
        data, _ = encode_record(key, unit.to_record())
        self._write(key, data)
        return UnitResult.from_record(decode_record(data, key)) if read_back else None

    def commit_later(self, key: str, unit: UnitResult) -> None:
        """`commit(key, unit, read_back=False)` with the file I/O in a writer thread.

        The record is encoded there too (a unit result is immutable): its
        checksum and compression release the GIL like writing, fsyncing and
        renaming do, and at paper shape encoding and writing were ~10 us of
        driver time per probe request, so all of it runs beside the probe
        loop (`_background`). At most `_WRITE_DEPTH` records are not yet on
        disk (bounded memory); a failed encoding or commit fails the run at
        the next `commit_later` or at `drain`. A kill loses the records not
        yet on disk, which is the same as losing units in flight: they are
        probed again.
        """
        if self._writer is None:
            self._writer = BackgroundWorker(self._encode_and_write, depth=_WRITE_DEPTH,
                                            name="otbench-journal")
        self._writer.submit((key, unit))

    def _encode_and_write(self, item: tuple[str, UnitResult]) -> None:
        key, unit = item
        self._write(key, encode_record(key, unit.to_record())[0])

    def drain(self) -> None:
        """Wait for every `commit_later` record to be committed; raise the first failure."""
        if self._writer is not None:
            self._writer.drain()

    def _write(self, key: str, data: bytes) -> None:
        final = self.path(key)
        folder = final.parent
        if not folder.is_dir():
            folder.mkdir(parents=True, exist_ok=True)
            _fsync_dir(folder.parent)
        tmp = folder / f".{key}.{os.getpid()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, final)
        _fsync_dir(folder)
        self.committed += 1

    def report(self) -> dict[str, Any]:
        """What this run did with the journal (for `run.json`)."""
        return {"path": str(self.root), "reused": self.reused, "committed": self.committed,
                "torn_commits_removed": self.torn,
                "quarantined": [{"file": f, "reason": r} for f, r in self.quarantined]}
