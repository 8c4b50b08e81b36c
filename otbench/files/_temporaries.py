"""Temporaries of the atomic writers: sibling names, their otbench markers, stale ones.

A temporary is `.NAME.tmp-<pid>-<hex>` beside its output, with a companion
marker `.NAME.tmp-<pid>-<hex>.otbench`; only marked temporaries of writers
that no longer run are ever removed (`clean_stale`).
"""


import contextlib
import os
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
        if tmp.name.endswith(_MARK):
            owner = tmp.parent / tmp.name[:-len(_MARK)]
            if not os.path.lexists(owner) and _stale(owner, path) and _is_marked(owner):
                tmp.unlink(missing_ok=True)          # a marker whose temporary is gone
            continue
        if not _is_marked(tmp) or not _stale(tmp, path):
            continue
        if tmp.is_dir() and not tmp.is_symlink():
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            tmp.unlink(missing_ok=True)
        _drop_mark(tmp)
        removed.append(tmp)
    return removed


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


