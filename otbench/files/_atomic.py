"""The one atomic writer: files and folders appear complete or not at all, and nothing is lost.

Every otbench output goes through here. A file or folder is written under a
hidden sibling temporary name (`.NAME.tmp-<pid>-<random>`), flushed, and
moved into place with one rename, so a killed writer never leaves a
half-written output under the real name, and the previous output stays valid
until the new one is complete. Temporaries are removed on every failure,
including `KeyboardInterrupt`; those of a writer that was killed (its pid no
longer runs) are removed by the next writer of the same name.

The safe-replace rule for folders (`atomic_dir`):

* without `replace`, the folder is created only if nothing is at `path` when
  it is moved in: something that appeared meanwhile (a concurrent writer, a
  user's file) is never replaced, the writer fails with `FileExistsError`;
* with `replace=kind`, an existing folder is replaced only if `kind(old)` says
  it is recognisably an otbench output of the same kind, checked again just
  before the swap, and every entry of the old folder that `keep(old)` names
  (a user's notes, `results/`, `run.json`) is moved into the new folder, so
  replacing never deletes anything the writer did not itself write.

Replacing a folder is two renames (old aside, new in place) followed by the
removal of the old copy: a crash between them leaves the old copy under
`.NAME.old-<random>` rather than losing it.

`refuse_input` and the member rule of `atomic_path` keep outputs off inputs:
no writer replaces the manifest, a trajectory file or a table of a
measurement set, whatever path it is given.
"""

import contextlib
import errno
import json
import os
import shutil
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from otbench.errors import UnsafeOutputError

# Temporaries without a pid (older writers) are removed only once clearly abandoned.
_UNOWNED_STALE_S = 24 * 3600
_SET_MANIFEST = "manifest.json"
_SET_SCHEMA = "otbench.measurement_set/1"


def _sibling(path: Path, tag: str) -> Path:
    return path.parent / f".{path.name}.{tag}-{os.getpid()}-{uuid.uuid4().hex}"


def _target(path: str | os.PathLike) -> Path:
    """Absolute, normalised output path (`.` and `..` resolved), never the filesystem root."""
    p = Path(os.path.abspath(os.fspath(path)))
    if p.name == "":
        raise UnsafeOutputError(f"{path}: cannot write an output at the filesystem root")
    return p


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def clean_stale(path: str | os.PathLike) -> list[Path]:
    """Remove `.NAME.tmp-*` temporaries of `path` left by killed writers; returns them.

    A temporary names its writer's pid; it is stale when that process no
    longer runs (pid-less names of older writers: after a day untouched).
    Old copies (`.NAME.old-*`) are data and are never removed here.
    """
    path = _target(path)
    removed = []
    if not path.parent.is_dir():
        return removed
    for tmp in path.parent.glob(f".{glob_escape(path.name)}.tmp-*"):
        tail = tmp.name[len(path.name) + 6:]
        pid_text = tail.split("-", 1)[0]
        if "-" in tail and pid_text.isdigit():
            stale = int(pid_text) != os.getpid() and not _alive(int(pid_text))
        else:
            try:
                stale = time.time() - tmp.lstat().st_mtime > _UNOWNED_STALE_S
            except OSError:
                stale = False
        if stale:
            if tmp.is_dir() and not tmp.is_symlink():
                shutil.rmtree(tmp, ignore_errors=True)
            else:
                tmp.unlink(missing_ok=True)
            removed.append(tmp)
    return removed


def glob_escape(name: str) -> str:
    return "".join(f"[{c}]" if c in "*?[" else c for c in name)


def set_members(directory: Path) -> set[Path] | None:
    """The entries a measurement set at `directory` owns (manifest, trajectories, tables), or None.

    None when `directory` holds no readable measurement-set manifest.
    """
    mpath = directory / _SET_MANIFEST
    try:
        with open(mpath, "rb") as f:
            doc = json.loads(f.read(1 << 24).decode("utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(doc, dict) or doc.get("schema") != _SET_SCHEMA:
        return None
    members = {mpath, directory / "trajectories"}
    tables = doc.get("tables")
    if isinstance(tables, dict):
        members |= {directory / str(name) for name in tables if str(name) and "/" not in str(name)}
    return members


def is_measurement_set(directory: Path) -> bool:
    """Whether `directory` holds a readable measurement-set manifest."""
    return directory.is_dir() and set_members(directory) is not None


def foreign_entries(directory: Path) -> list[str]:
    """Entries of the set at `directory` that the set does not own (kept when it is replaced)."""
    members = set_members(directory) or set()
    return sorted(e.name for e in directory.iterdir() if e not in members
                  and not e.name.startswith(f".{_SET_MANIFEST}.tmp-"))


def _member_of_set(path: Path) -> Path | None:
    """The measurement set whose manifest, trajectory file or table `path` is, if any."""
    for parent in path.parents:
        if (parent / _SET_MANIFEST).is_file():
            members = set_members(parent)
            if members and any(path == m or m in path.parents for m in members):
                return parent
            return None
    return None


def refuse_input(out: str | os.PathLike, *inputs: str | os.PathLike) -> None:
    """Raise `UnsafeOutputError` when writing `out` would replace one of `inputs`.

    A file input is protected itself; a folder input (a measurement set) is
    protected with everything it owns, and no output may be one of its
    ancestors (replacing that folder would replace the input).
    """
    target = _target(out)
    for given in inputs:
        inp = _target(given)
        if target == inp or target in inp.parents:
            raise UnsafeOutputError(f"{out}: is the input {given} or contains it; "
                                    f"refusing to write onto an input")
        if inp.exists() and target.exists():
            with contextlib.suppress(OSError):
                if os.path.samefile(target, inp):
                    raise UnsafeOutputError(f"{out}: is the input {given}; "
                                            f"refusing to write onto an input")
    owner = _member_of_set(target)
    if owner is not None:
        raise UnsafeOutputError(f"{out}: is part of the measurement set {owner}; "
                                f"refusing to write onto an input")


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary sibling path to write a file to; it becomes `path` on normal exit.

    For writers that want a file name (pyarrow, matplotlib); the temporary
    file is removed on any exception and `path` is untouched. Refuses
    (`UnsafeOutputError`) a `path` that is a folder or part of a measurement set.
    """
    path = _target(path)
    refuse_input(path)
    if path.is_dir():
        raise UnsafeOutputError(f"{path}: is a folder; refusing to replace it with a file")
    path.parent.mkdir(parents=True, exist_ok=True)
    clean_stale(path)
    tmp = _sibling(path, "tmp")
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_bytes_atomic(path: str | os.PathLike, data: bytes) -> None:
    """Write `data` to `path` atomically (same-directory temp file, fsync, rename)."""
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())


def write_text_atomic(path: str | os.PathLike, text: str) -> None:
    """Write UTF-8 `text` to `path` atomically."""
    write_bytes_atomic(path, text.encode("utf-8"))


def _move_in(tmp: Path, path: Path) -> None:
    """Rename `tmp` to a `path` that must not exist (a non-empty folder there is never replaced)."""
    if os.path.lexists(path):
        raise FileExistsError(f"{path}: appeared while writing; left untouched (output discarded)")
    try:
        os.rename(tmp, path)
    except OSError as e:
        if e.errno in (errno.EEXIST, errno.ENOTEMPTY, errno.ENOTDIR, errno.EISDIR):
            raise FileExistsError(f"{path}: appeared while writing; left untouched "
                                  f"(output discarded)") from None
        raise


def _swap(tmp: Path, path: Path, replace: Callable[[Path], bool],
          keep: Callable[[Path], Iterable[str]] | None) -> None:
    """Replace the recognised folder at `path` by `tmp`, moving its kept entries across first."""
    if path.is_symlink() or not path.is_dir() or not replace(path):
        raise UnsafeOutputError(f"{path}: exists and is not an otbench output of this kind; "
                                f"refusing to replace it")
    kept = list(keep(path)) if keep is not None else []
    for name in kept:
        if os.path.lexists(tmp / name):
            raise UnsafeOutputError(f"{path}: its entry {name!r} would be replaced by the new "
                                    f"output; move it away first")
    for name in kept:
        os.rename(path / name, tmp / name)
    old = _sibling(path, "old")
    os.rename(path, old)
    try:
        _move_in(tmp, path)
    except BaseException:
        os.rename(old, path)
        for name in kept:
            os.rename(tmp / name, path / name)
        raise
    shutil.rmtree(old, ignore_errors=True)


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike, *, replace: Callable[[Path], bool] | bool | None = True,
               keep: Callable[[Path], Iterable[str]] | None = None) -> Iterator[Path]:
    """Build a folder in a temporary sibling, then move it to `path` in one step.

    Yields the (empty, existing) temporary folder. On normal exit it is moved
    to `path` under the safe-replace rule of the module docstring: `replace`
    None or False never replaces anything; a predicate replaces only a folder
    it recognises (True: any folder, for callers that own the name outright);
    `keep(old)` names the entries of the old folder to carry over. On any
    exception the temporary folder is removed and `path` is untouched.
    """
    path = _target(path)
    refuse_input(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    clean_stale(path)
    tmp = _sibling(path, "tmp")
    tmp.mkdir()
    try:
        yield tmp
        if not replace or not os.path.lexists(path):
            _move_in(tmp, path)
        else:
            _swap(tmp, path, (lambda p: True) if replace is True else replace, keep)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
