"""The one atomic writer: files and folders appear complete or not at all, and nothing is lost.

Every otbench output goes through here. A file or folder is written under a
hidden sibling temporary name (`.NAME.tmp-<pid>-<hex>`, with a companion
marker `.NAME.tmp-<pid>-<hex>.otbench` that says otbench made it), flushed,
and moved into place with one rename, so a killed writer never leaves a
half-written output under the real name, and the previous output stays valid
until the new one is complete. Temporaries are removed on every failure,
including `KeyboardInterrupt`; those of a writer that was killed (its pid no
longer runs) are removed by the next writer of the same name -- only when
their marker is there: a user's `.set.tmp-999999-mythings` is never touched.

What "otbench wrote it" means (`written_by_otbench`), one rule for every
entry point: a regular file is otbench's when the ledger of its folder
(`.otbench-written.json`, updated by every write here) records it with the
sha256 it has now, or, when the ledger does not record it at all, when it
is a JSON document whose `schema` is one of the result schemas the commands
write (`otbench.metrics/1`, ...; not a set's or run's manifest).
A file the user changed since is no longer otbench's (a recorded file with
another sha256 is the user's, whatever schema it names).

The output rule (`check_output`, applied by every writer):

* an output inside or onto an input is refused always (`refuse_input`;
  the inputs are the writer's and those of the enclosing `output_rules`);
* an existing file that otbench did not write is refused unless `overwrite`;
* aliases are resolved before deciding: a descriptor path (`/dev/stdin`,
  `/dev/stdout`, `/dev/fd/N`, `/proc/self/fd/N`, a link to one) is judged by
  what it names: a regular file behind it is written only through this
  process's write-only descriptor (a shell's `>` or `>>`, in its mode:
  appended, never truncated), and refused when the descriptor is open for
  reading (`--json /dev/stdin < thesis.tex`) or belongs to another process;
  an output with the same st_dev + st_ino as an input's file (a hard link)
  is the input; any other path under `/dev` (`/dev/shm/x`) is a plain file;
* a special file (character device, FIFO; also through a symbolic link)
  is written in place, never renamed over; a FIFO without a reader and a
  socket are refused; a symbolic link to a regular file is followed (the
  link stays, the file it names is the output); a dangling link is refused.

The safe-replace rule for folders (`atomic_dir`):

* by default (`replace=RECORDED`) a folder output records every file it
  wrote in its ledger; writing it again drops only the files the old ledger
  proves otbench wrote (same sha256) and moves everything else (a user's
  notes, a changed figure, a user's folder) into the new output; an entry
  of the user's that the new output would write is refused unless
  `overwrite`; a non-empty folder without a folder ledger is refused unless
  `overwrite` (and then written into, its files kept);
* without `replace` (None, False), the folder is created only if nothing is
  at `path` when it is moved in: something that appeared meanwhile is never
  replaced, the writer fails with `FileExistsError`;
* with `replace=kind`, an existing folder is replaced only if `kind(old)` says
  it is recognisably an otbench output of the same kind (a measurement set:
  its manifest is its marker), checked again just before the swap, and every
  entry of the old folder that `keep(old)` names is moved into the new one.

Replacing a folder is two renames (old aside, new in place) followed by the
removal of the old copy: a crash between them leaves the old copy under
`.NAME.old-<random>` rather than losing it.
"""

import contextlib
import errno
import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from otbench.errors import UnsafeOutputError

from ._hash import sha256_file
from ._ledger import LEDGER, _read_ledger, _record, _write_ledger
from ._rules import _RULES, check_output, refuse_input, write_descriptor
from ._temporaries import _drop_mark, _new_temporary, _sibling, _target, clean_stale

RECORDED = "recorded"
"""`atomic_dir(replace=RECORDED)` (the default): the ledger rule of the module docstring."""


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, *, inputs: Iterable[str | os.PathLike] = (),
                overwrite: bool | None = None) -> Iterator[Path]:
    """Yield a temporary sibling path to write a file to; it becomes `path` on normal exit.

    For writers that want a file name (pyarrow, matplotlib); the temporary
    file is removed on any exception and `path` is untouched. The output
    rule (`check_output`) decides first: refused outputs raise
    `UnsafeOutputError`; a character device or FIFO is yielded itself
    (written in place, never renamed over). The written file is recorded in
    its folder's ledger.
    """
    where, in_place = check_output(path, *inputs, overwrite=overwrite)
    fd = write_descriptor(where) if in_place and stat.S_ISREG(os.stat(where).st_mode) else None
    if fd is not None:
        # A regular file behind a write-only descriptor (`--json /dev/stdout >> log`): written
        # through the descriptor, in its mode, never reopened (which would truncate it).
        with tempfile.TemporaryDirectory(prefix="otbench-") as d:
            tmp = Path(d) / "out"
            yield tmp
            with open(tmp, "rb") as f:
                while chunk := f.read(1 << 20):
                    view = memoryview(chunk)
                    while view:
                        view = view[os.write(fd, view):]
        return
    if in_place:
        yield where
        return
    where.parent.mkdir(parents=True, exist_ok=True)
    clean_stale(where)
    tmp = _new_temporary(where)
    try:
        yield tmp
        if os.path.lexists(where):             # checked again just before the rename
            check_output(where, *inputs, overwrite=overwrite)
        os.replace(tmp, where)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        _drop_mark(tmp)
        raise
    _drop_mark(tmp)
    _record(where)


def write_bytes_atomic(path: str | os.PathLike, data: bytes, *,
                       inputs: Iterable[str | os.PathLike] = (),
                       overwrite: bool | None = None) -> None:
    """Write `data` to `path` atomically (same-directory temp file, fsync, rename).

    A character device or a FIFO with a reader is written in place.
    """
    with atomic_path(path, inputs=inputs, overwrite=overwrite) as tmp:
        if os.path.lexists(tmp) and not stat.S_ISREG(os.stat(tmp).st_mode):
            fd = os.open(tmp, os.O_WRONLY)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
            finally:
                os.close(fd)
            return
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())


def write_text_atomic(path: str | os.PathLike, text: str, *,
                      inputs: Iterable[str | os.PathLike] = (),
                      overwrite: bool | None = None) -> None:
    """Write UTF-8 `text` to `path` atomically (`write_bytes_atomic`)."""
    write_bytes_atomic(path, text.encode("utf-8"), inputs=inputs, overwrite=overwrite)


# -- folders ----------------------------------------------------------------------------------

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
    _exchange(tmp, path, [(Path(name), Path(name)) for name in kept])


def _exchange(tmp: Path, path: Path, moves: list[tuple[Path, Path]]) -> None:
    """Move the kept entries (`moves`: relative old -> relative new) into `tmp`, swap `tmp` in
    for `path`, and remove what is left of the old folder; undone on failure."""
    done: list[tuple[Path, Path]] = []
    try:
        for src, dst in moves:
            (tmp / dst).parent.mkdir(parents=True, exist_ok=True)
            os.rename(path / src, tmp / dst)
            done.append((src, dst))
        old = _sibling(path, "old")
        os.rename(path, old)
        try:
            _move_in(tmp, path)
        except BaseException:
            os.rename(old, path)
            raise
    except BaseException:
        for src, dst in reversed(done):
            with contextlib.suppress(OSError):
                os.rename(tmp / dst, path / src)
        raise
    shutil.rmtree(old, ignore_errors=True)


def _files_of(root: Path) -> dict[str, str]:
    """Every regular file under `root` (relative POSIX path -> sha256), links not followed."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in filenames:
            p = Path(dirpath) / name
            rel = p.relative_to(root).as_posix()
            if rel == LEDGER:
                continue
            with contextlib.suppress(OSError):
                if stat.S_ISREG(os.lstat(p).st_mode):
                    out[rel] = sha256_file(p)
    return out


def _recorded_swap(tmp: Path, path: Path, overwrite: bool) -> None:
    """The ledger rule (`replace=RECORDED`): drop what the old ledger proves otbench wrote,
    keep everything else, refuse (unless `overwrite`) where the new output would replace it."""
    if path.is_symlink() or not path.is_dir():
        raise UnsafeOutputError(f"{path}: exists and is not a folder; refusing to replace it")
    ledger = _read_ledger(path)
    ours = ledger["files"] if ledger is not None and ledger["folder"] else {}
    if ledger is None or not ledger["folder"]:
        if any(path.iterdir()) and not overwrite:
            raise UnsafeOutputError(
                f"{path}: exists and otbench did not write it (no otbench record in it); "
                f"refusing to write there (pass `overwrite` to write into it: its files are kept)")
        ours = ledger["files"] if ledger is not None else {}

    def recorded(rel: str, p: Path) -> bool:
        if rel not in ours:
            return False
        try:
            return stat.S_ISREG(os.lstat(p).st_mode) and ours[rel] == sha256_file(p)
        except OSError:
            return False

    def any_recorded(d: Path, rel: str) -> bool:
        for dirpath, _dirs, names in os.walk(d):
            for n in names:
                p = Path(dirpath) / n
                if recorded(f"{rel}/{p.relative_to(d).as_posix()}", p):
                    return True
        return False

    moves: list[tuple[Path, Path]] = []
    clashes: list[str] = []

    def visit(rel_dir: Path) -> None:
        for e in sorted((path / rel_dir).iterdir()):
            rel = rel_dir / e.name
            r = rel.as_posix()
            if r == LEDGER:
                continue
            new = tmp / rel
            if e.is_dir() and not e.is_symlink():
                if not os.path.lexists(new):
                    if any_recorded(e, r):
                        visit(rel)
                    else:
                        moves.append((rel, rel))
                elif new.is_dir() and not new.is_symlink():
                    visit(rel)
                else:
                    clashes.append(r)
            elif recorded(r, e):
                continue                                    # otbench's: replaced by the new output
            elif os.path.lexists(new):
                clashes.append(r)
            else:
                moves.append((rel, rel))

    visit(Path())
    if clashes and not overwrite:
        raise UnsafeOutputError(
            f"{path}: its entry {clashes[0]!r} was not written by otbench (or was changed since) "
            f"and the new output writes it; refusing to replace it (move it away, or pass "
            f"`overwrite`)")
    _exchange(tmp, path, moves)


def check_output_dir(path: str | os.PathLike, *inputs: str | os.PathLike,
                     overwrite: bool | None = None, recorded: bool = True) -> Path:
    """The output rule for a folder output (`atomic_dir`'s, callable before the work starts):
    never on or inside an input, never onto a file or link, and (`recorded`) never into a
    non-empty folder without otbench's folder ledger unless `overwrite`. Returns the path."""
    over = _RULES.get()[1] if overwrite is None else (overwrite or _RULES.get()[1])
    path = _target(path)
    refuse_input(path, *inputs)
    if os.path.lexists(path) and (path.is_symlink() or not path.is_dir()):
        raise UnsafeOutputError(f"{path}: exists and is not a folder; refusing to replace it")
    if recorded and path.is_dir() and any(path.iterdir()) and not over:
        ledger = _read_ledger(path)
        if ledger is None or not ledger["folder"]:
            raise UnsafeOutputError(
                f"{path}: exists and otbench did not write it (no otbench record in it); "
                f"refusing to write there (pass `overwrite` to write into it: its files are kept)")
    return path


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike, *,
               replace: Callable[[Path], bool] | bool | str | None = RECORDED,
               keep: Callable[[Path], Iterable[str]] | None = None,
               inputs: Iterable[str | os.PathLike] = (),
               overwrite: bool | None = None) -> Iterator[Path]:
    """Build a folder in a temporary sibling, then move it to `path` in one step.

    Yields the (empty, existing) temporary folder. On normal exit it is moved
    to `path` under the safe-replace rule of the module docstring: RECORDED
    (default) writes a ledger and replaces only what an old ledger proves
    otbench wrote; None or False never replaces anything; a predicate
    replaces only a folder it recognises (True: any folder, for callers that
    own the name outright, such as a cache); `keep(old)` names the entries of
    the old folder to carry over. On any exception the temporary folder is
    removed and `path` is untouched.
    """
    over = _RULES.get()[1] if overwrite is None else (overwrite or _RULES.get()[1])
    path = check_output_dir(path, *inputs, overwrite=over, recorded=replace == RECORDED)
    path.parent.mkdir(parents=True, exist_ok=True)
    clean_stale(path)
    tmp = _new_temporary(path)
    tmp.mkdir()
    try:
        yield tmp
        if replace == RECORDED:
            _write_ledger(tmp, {"files": _files_of(tmp), "folder": True}, home=path)
        if not replace or not os.path.lexists(path):
            _move_in(tmp, path)
        elif replace == RECORDED:
            _recorded_swap(tmp, path, over)
        else:
            _swap(tmp, path, (lambda p: True) if replace is True else replace, keep)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        _drop_mark(tmp)
        raise
    _drop_mark(tmp)
