"""What otbench wrote: the folder ledger and the result documents (`written_by_otbench`).

A regular file is otbench's when the ledger of its folder
(`.otbench-written.json`, updated by every write of `_atomic`) records it
with the sha256 it has now, or when it is a JSON document whose `schema` is
one of the result schemas the commands write. A file the user changed since
is no longer otbench's.
"""


import contextlib
import json
import os
import stat
from pathlib import Path

from ._hash import sha256_file
from ._temporaries import _drop_mark, _new_temporary, clean_stale

LEDGER = ".otbench-written.json"
"""The file in a folder that records what otbench wrote there (name -> sha256)."""
_LEDGER_SCHEMA = "otbench.written/1"
_DOC_LIMIT = 1 << 28                     # schema'd documents are read up to 256 MiB
RESULT_KINDS = frozenset({"metrics", "frontier", "bootstrap", "thinning", "sweep", "horizon",
                          "bench", "bench-compare", "leaderboard", "splits", "grade"})
"""The result documents commands write as single files (`otbench.<kind>/<n>`): such a file is
recognisably otbench's. Containers (a set's or a run's manifest, a journal marker, a report's
report.json) are not: they are only ever replaced with the folder they describe."""


# -- what otbench wrote -----------------------------------------------------------------------

def _read_ledger(directory: Path) -> dict | None:
    """The ledger of `directory` ({"files": {rel: sha256}, "folder": bool}), or None."""
    lpath = directory / LEDGER
    try:
        if not stat.S_ISREG(os.lstat(lpath).st_mode):
            return None
        with open(lpath, "rb") as f:
            doc = json.loads(f.read(_DOC_LIMIT).decode("utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(doc, dict) or doc.get("schema") != _LEDGER_SCHEMA \
            or not isinstance(doc.get("files"), dict):
        return None
    files = {k: v for k, v in doc["files"].items() if isinstance(k, str) and isinstance(v, str)}
    return {"files": files, "folder": doc.get("folder") is True}


def _write_ledger(directory: Path, ledger: dict) -> None:
    text = json.dumps({"schema": _LEDGER_SCHEMA, "folder": bool(ledger.get("folder")),
                       "files": dict(sorted(ledger["files"].items()))},
                      indent=1, sort_keys=True) + "\n"
    lpath = directory / LEDGER
    with contextlib.suppress(OSError):
        if not stat.S_ISREG(os.lstat(lpath).st_mode):
            return                              # something else sits there: leave it alone
    clean_stale(lpath)
    tmp = _new_temporary(lpath)
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, lpath)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    finally:
        _drop_mark(tmp)


def _record(path: Path) -> None:
    """Record the regular file `path` (just written) in its folder's ledger."""
    try:
        digest = sha256_file(path)
        ledger = _read_ledger(path.parent) or {"files": {}, "folder": False}
        ledger["files"][path.name] = digest
        _write_ledger(path.parent, ledger)
    except OSError:
        pass                         # an unrecorded output is only refused later, never lost


def _otbench_document(path: Path) -> bool:
    """Whether `path` is a JSON object whose `schema` is an otbench schema."""
    try:
        if os.path.getsize(path) > _DOC_LIMIT:
            return False
        with open(path, "rb") as f:
            head = f.read(1)
            if head not in (b"{", b" ", b"\n", b"\t", b"\r"):
                return False
            doc = json.loads((head + f.read()).decode("utf-8"))
    except (OSError, ValueError, RecursionError):
        return False
    schema = doc.get("schema") if isinstance(doc, dict) else None
    if not isinstance(schema, str) or not schema.startswith("otbench.") or "/" not in schema:
        return False
    kind, _, version = schema[len("otbench."):].partition("/")
    return kind in RESULT_KINDS and version.isdigit()


def written_by_otbench(path: str | os.PathLike) -> bool:
    """Whether the regular file at `path` is recognisably otbench's (module docstring)."""
    p = Path(path)
    try:
        if not stat.S_ISREG(os.lstat(p).st_mode):
            return False
    except OSError:
        return False
    ledger = _read_ledger(p.parent)
    if ledger is not None and ledger["files"].get(p.name) is not None:
        with contextlib.suppress(OSError):
            if ledger["files"][p.name] == sha256_file(p):
                return True
    return _otbench_document(p)


