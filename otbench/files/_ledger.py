"""What otbench wrote: the folder ledger and the result documents (`written_by_otbench`).

A regular file is otbench's when the ledger of its folder
(`.otbench-written.json`, updated by every write of `_atomic`) records it
with the sha256 it has now, or, when the ledger does not record it at all
(written where no ledger could be kept), when it is a JSON document whose
`schema` is one of the result schemas the commands write. A file the user
changed since is no longer otbench's: a recorded file whose sha256 differs
is the user's even when it still names an otbench schema.

A ledger is evidence only if no other hand can write it in the same place: it
carries an HMAC-SHA256 (`mac`) over its entries and the real path of the folder
it lives in, keyed by a random per-user secret (`ledger.key` in otbench's cache
folder, mode 0600). A ledger planted beside a user's files (copied from an
archive, written by a set's author, moved from another folder) does not verify
and counts as no ledger; so does an entry that names anything but a file of
its own folder (`..`, `/`, `\\`). Without a usable secret nothing verifies:
otbench then only asks for `--overwrite` more often, it never replaces more.
"""


import contextlib
import hashlib
import hmac
import json
import os
import re
import secrets
import stat
from pathlib import Path

from ._hash import sha256_file
from ._temporaries import _drop_mark, _new_temporary, clean_stale

LEDGER = ".otbench-written.json"
"""The file in a folder that records what otbench wrote there (name -> sha256)."""
_LEDGER_SCHEMA = "otbench.written/2"     # 2: bound by `mac` to its folder and the secret
_DOC_LIMIT = 1 << 28                     # schema'd documents are read up to 256 MiB
RESULT_KINDS = frozenset({"metrics", "frontier", "bootstrap", "thinning", "sweep", "horizon",
                          "bench", "bench-compare", "leaderboard", "splits", "grade"})
"""The result documents commands write as single files (`otbench.<kind>/<n>`): such a file is
recognisably otbench's. Containers (a set's or a run's manifest, a journal marker, a report's
report.json) are not: they are only ever replaced with the folder they describe."""


# -- the ledger's secret ----------------------------------------------------------------------

_SECRET: list[bytes | None] = []


def _secret() -> bytes | None:
    """The per-user ledger key (created once, 0600), or None where it cannot be had."""
    if _SECRET:
        return _SECRET[0]
    base = os.environ.get("OTBENCH_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
        "otbench")
    path = Path(base) / "ledger.key"
    key = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists():
            tmp = path.with_name(f".ledger.key.{os.getpid()}.{secrets.token_hex(4)}")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(secrets.token_hex(32))
            try:
                os.link(tmp, path)              # the first writer's key wins, never replaced
            except FileExistsError:
                pass
            finally:
                os.unlink(tmp)
        st = os.lstat(path)
        if stat.S_ISREG(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o077:
            text = path.read_text().strip()
            key = bytes.fromhex(text) if re.fullmatch(r"[0-9a-f]{64}", text) else None
    except (OSError, ValueError):
        key = None
    _SECRET.append(key)
    return key


def _mac(directory: Path, files: dict, folder: bool) -> str | None:
    key = _secret()
    if key is None:
        return None
    msg = json.dumps([_LEDGER_SCHEMA, os.path.realpath(directory), bool(folder),
                      sorted(files.items())], ensure_ascii=True, separators=(",", ":"))
    return hmac.new(key, msg.encode(), hashlib.sha256).hexdigest()


def _own_entry(rel: str) -> bool:
    """A ledger key that names a file inside its own folder (relative, no `..`, no `\\`)."""
    parts = rel.split("/")
    return bool(rel) and not rel.startswith("/") and "\\" not in rel and "\0" not in rel \
        and all(p not in ("", ".", "..") for p in parts)


# -- what otbench wrote -----------------------------------------------------------------------

def _read_ledger(directory: Path) -> dict | None:
    """The ledger of `directory` ({"files": {rel: sha256}, "folder": bool}), or None when there
    is none or it does not verify (module docstring)."""
    lpath = directory / LEDGER
    try:
        if not stat.S_ISREG(os.lstat(lpath).st_mode):
            return None
        with open(lpath, "rb") as f:
            doc = json.loads(f.read(_DOC_LIMIT).decode("utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(doc, dict) or doc.get("schema") != _LEDGER_SCHEMA \
            or not isinstance(doc.get("files"), dict) or not isinstance(doc.get("mac"), str):
        return None
    files, folder = doc["files"], doc.get("folder") is True
    if not all(isinstance(k, str) and isinstance(v, str) and _own_entry(k) for k, v in files.items()):
        return None
    want = _mac(directory, files, folder)
    if want is None or not hmac.compare_digest(want, doc["mac"]):
        return None
    return {"files": dict(files), "folder": folder}


def _write_ledger(directory: Path, ledger: dict, *, home: Path | None = None) -> None:
    """Write the ledger of `directory`, bound to `home` (where the folder will live; default
    `directory` itself)."""
    files = dict(sorted(ledger["files"].items()))
    folder = bool(ledger.get("folder"))
    text = json.dumps({"schema": _LEDGER_SCHEMA, "folder": folder, "files": files,
                       "mac": _mac(home or directory, files, folder) or ""},
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
    return kind in RESULT_KINDS and re.fullmatch(r"[0-9]+", version) is not None  # not "²"


def written_by_otbench(path: str | os.PathLike) -> bool:
    """Whether the regular file at `path` is recognisably otbench's (module docstring)."""
    p = Path(path)
    try:
        if not stat.S_ISREG(os.lstat(p).st_mode):
            return False
    except OSError:
        return False
    ledger = _read_ledger(p.parent)
    recorded = ledger["files"].get(p.name) if ledger is not None else None
    if recorded is not None:
        # The ledger knows this file, so its bytes alone decide: a result the user edited
        # (a key added) still names otbench's schema, but it is the user's now.
        try:
            return recorded == sha256_file(p)
        except OSError:
            return False
    return _otbench_document(p)


