"""Temporaries of the atomic writers: sibling names, their otbench markers, stale ones.

A temporary is `.NAME.tmp-<pid>-<hex>` beside its output, with a companion
marker `.NAME.tmp-<pid>-<hex>.otbench`; only marked temporaries of writers
that no longer run are ever removed (`clean_stale`), and a writer removes its
own only through `drop_temporary` (marked, and its pid is this process's).
This is the one rule for every temporary otbench deletes: a file or folder
that merely looks like one (a user's `.out.tmp-1-notes`, another live run's)
is never touched.
"""


import contextlib
import os
import re
import shutil
import stat
import time
import uuid
from pathlib import Path

from otbench.errors import UnsafeOutputError

# Temporaries without a pid (older writers) are removed only once clearly abandoned.
_UNOWNED_STALE_S = 24 * 3600
_MARK = ".otbench"                       # suffix of a temporary's companion marker
_MARK_TEXT = b"otbench temporary\n"
_OWNER = re.compile(r"\.tmp-([0-9]+)-[0-9a-f]{32}$")   # `_sibling`'s tail: the writer's pid


def _sibling(path: Path, tag: str) -> Path:
    return path.parent / f".{path.name}.{tag}-{os.getpid()}-{uuid.uuid4().hex}"


def _target(path: str | os.PathLike) -> Path:
    """Absolute, normalised output path (`.` and `..` resolved), never the filesystem root."""
    p = Path(os.path.abspath(os.fspath(path)))
    if p.name == "":
        raise UnsafeOutputError(f"{path}: cannot write an output at the filesystem root")
    return p


def pid_alive(pid: int) -> bool:
    """Whether process `pid` runs on this machine (one we may not signal counts as running)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OverflowError:
        return False
    return True


# -- temporaries and their markers ------------------------------------------------------------

def _new_temporary(path: Path) -> Path:
    """A fresh temporary sibling name of `path`, with its marker written first."""
    tmp = _sibling(path, "tmp")
    fd = os.open(_mark_of(tmp), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        os.write(fd, _MARK_TEXT)
    finally:
        os.close(fd)
    return tmp


def new_temporary(path: str | os.PathLike) -> Path:
    """A fresh, marked temporary name beside `path` (nothing is created at the name itself):
    for a writer that fills a private folder there (a spool) and removes it with
    `drop_temporary`; one killed meanwhile leaves it to the next `clean_stale` of `path`."""
    where = _target(path)
    where.parent.mkdir(parents=True, exist_ok=True)
    return _new_temporary(where)


def drop_temporary(tmp: str | os.PathLike) -> bool:
    """Remove this process's marked temporary `tmp` (file or folder) and its marker.

    Anything else at such a name -- no otbench marker beside it, or another process's pid in
    it -- is left where it is; returns whether `tmp` was removed.
    """
    tmp = Path(tmp)
    m = _OWNER.search(tmp.name)
    if m is None or int(m.group(1)) != os.getpid() or not _is_marked(tmp):
        return False
    if tmp.is_dir() and not tmp.is_symlink():
        shutil.rmtree(tmp, ignore_errors=True)
    else:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
    _drop_mark(tmp)
    return True


def _mark_of(tmp: Path) -> Path:
    return tmp.parent / (tmp.name + _MARK)


def _drop_mark(tmp: Path) -> None:
    with contextlib.suppress(OSError):
        os.unlink(_mark_of(tmp))


def _is_marked(tmp: Path) -> bool:
    """Whether `tmp` carries otbench's marker (a regular file with the marker text)."""
    mark = _mark_of(tmp)
    try:
        if not stat.S_ISREG(os.lstat(mark).st_mode):
            return False
        with open(mark, "rb") as f:
            return f.read(len(_MARK_TEXT) + 1) == _MARK_TEXT
    except OSError:
        return False


def clean_stale(path: str | os.PathLike) -> list[Path]:
    """Remove `.NAME.tmp-*` temporaries of `path` left by killed writers; returns them.

    A temporary names its writer's pid; it is stale when that process no
    longer runs (pid-less names of older writers: after a day untouched).
    Only a temporary with otbench's marker beside it is removed; anything
    else with such a name is the user's. Old copies (`.NAME.old-*`) are data
    and are never removed here.
    """
    path = _target(path)
    removed = []
    if not path.parent.is_dir():
        return removed
    for tmp in path.parent.glob(f".{glob_escape(path.name)}.tmp-*"):
        if not stale_temporary(tmp, path):
            continue
        if tmp.name.endswith(_MARK):
            tmp.unlink(missing_ok=True)          # a marker whose temporary is gone
            continue
        if tmp.is_dir() and not tmp.is_symlink():
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            tmp.unlink(missing_ok=True)
        _drop_mark(tmp)
        removed.append(tmp)
    return removed


def stale_temporary(entry: Path, path: Path) -> bool:
    """Whether `entry` (a `.NAME.tmp-*` beside `path`) is a temporary otbench may remove: one
    with otbench's marker whose writer no longer runs, or the marker of such a temporary that
    is already gone. Every deletion of temporaries asks this (module docstring)."""
    prefix = f".{path.name}.tmp-"
    if not entry.name.startswith(prefix):
        return False
    if entry.name.endswith(_MARK):
        owner = entry.parent / entry.name[:-len(_MARK)]
        return not os.path.lexists(owner) and _stale(owner, path) and _is_marked(owner)
    return _is_marked(entry) and _stale(entry, path)


def _stale(tmp: Path, path: Path) -> bool:
    tail = tmp.name[len(path.name) + 6:]
    pid_text = tail.split("-", 1)[0]
    if "-" in tail and pid_text.isdigit():
        return int(pid_text) != os.getpid() and not pid_alive(int(pid_text))
    try:
        return time.time() - _mark_of(tmp).lstat().st_mtime > _UNOWNED_STALE_S
    except OSError:
        return False


def glob_escape(name: str) -> str:
    return "".join(f"[{c}]" if c in "*?[" else c for c in name)


