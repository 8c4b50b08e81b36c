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
sha256 it has now, or when it is a JSON document whose `schema` is one of
the result schemas the commands write (`otbench.metrics/1`, ...; not a
set's or run's manifest).
A file the user changed since is no longer otbench's.

The output rule (`check_output`, applied by every writer):

* an output inside or onto an input is refused always (`refuse_input`;
  the inputs are the writer's and those of the enclosing `output_rules`);
* an existing file that otbench did not write is refused unless `overwrite`;
* a special file (character device, FIFO; also through a symbolic link,
  e.g. `/dev/stdout`) is written in place, never renamed over; a FIFO
  without a reader and a socket are refused; a symbolic link to a regular
  file is followed (the link stays, the file it names is the output);
  a dangling link is refused.

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
import contextvars
import errno
import hashlib
import json
import os
import shutil
import stat
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from otbench.errors import UnsafeOutputError

# Temporaries without a pid (older writers) are removed only once clearly abandoned.
_UNOWNED_STALE_S = 24 * 3600
_SET_MANIFEST = "manifest.json"
_SET_SCHEMA = "otbench.measurement_set/1"

LEDGER = ".otbench-written.json"
"""The file in a folder that records what otbench wrote there (name -> sha256)."""
_LEDGER_SCHEMA = "otbench.written/1"
_MARK = ".otbench"                       # suffix of a temporary's companion marker
_MARK_TEXT = b"otbench temporary\n"
_DOC_LIMIT = 1 << 28                     # schema'd documents are read up to 256 MiB
RESULT_KINDS = frozenset({"metrics", "frontier", "bootstrap", "thinning", "sweep", "horizon",
                          "bench", "bench-compare", "leaderboard", "splits", "grade"})
"""The result documents commands write as single files (`otbench.<kind>/<n>`): such a file is
recognisably otbench's. Containers (a set's or a run's manifest, a journal marker, a report's
report.json) are not: they are only ever replaced with the folder they describe."""
RECORDED = "recorded"
"""`atomic_dir(replace=RECORDED)` (the default): the ledger rule of the module docstring."""

_RULES: contextvars.ContextVar[tuple[tuple[Path, ...], bool, tuple[Path, ...]]] = \
    contextvars.ContextVar("otbench_output_rules", default=((), False, ()))


@contextlib.contextmanager
def output_rules(*, inputs: Iterable[str | os.PathLike] = (), overwrite: bool = False,
                 in_place: Iterable[str | os.PathLike] = ()) -> Iterator[None]:
    """Every write inside the block keeps off `inputs`; `overwrite` lets it replace files otbench
    did not write; `in_place` names inputs a command rewrites on purpose (`split` in place)."""
    old_in, old_over, old_place = _RULES.get()
    token = _RULES.set((old_in + tuple(_target(p) for p in inputs), old_over or bool(overwrite),
                        old_place + tuple(_target(p) for p in in_place)))
    try:
        yield
    finally:
        _RULES.reset(token)


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
        return int(pid_text) != os.getpid() and not _alive(int(pid_text))
    try:
        return time.time() - _mark_of(tmp).lstat().st_mtime > _UNOWNED_STALE_S
    except OSError:
        return False


def glob_escape(name: str) -> str:
    return "".join(f"[{c}]" if c in "*?[" else c for c in name)


# -- what otbench wrote -----------------------------------------------------------------------

def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


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
        digest = _sha256(path)
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
            if ledger["files"][p.name] == _sha256(p):
                return True
    return _otbench_document(p)


# -- inputs -----------------------------------------------------------------------------------

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


def _real(p: Path) -> Path:
    try:
        return Path(os.path.realpath(p))
    except (OSError, ValueError):
        return p


def refuse_input(out: str | os.PathLike, *inputs: str | os.PathLike) -> None:
    """Raise `UnsafeOutputError` when writing `out` would land on or inside one of `inputs`.

    A file input is protected itself; a measurement set is protected with
    everything it owns (its `results/` and other entries may take outputs);
    any other folder input is protected with everything inside it; and no
    output may be an ancestor of an input (replacing that folder would
    replace the input). Symbolic links are seen through. The inputs of the
    enclosing `output_rules` are protected too, except those it names
    `in_place`.
    """
    target = _target(out)
    ctx_inputs, _, in_place = _RULES.get()
    real_t = _real(target)
    rewritten = {_real(p) for p in in_place}
    for given, from_ctx in [(i, False) for i in inputs] + [(i, True) for i in ctx_inputs]:
        inp = _target(given)
        if from_ctx and _real(inp) == real_t and real_t in rewritten:
            continue                  # the command rewrites this input on purpose (in place)
        for t, i in ((target, inp), (real_t, _real(inp))):
            if t == i or t in i.parents:
                raise UnsafeOutputError(f"{out}: is the input {given} or contains it; "
                                        f"refusing to write onto an input")
            if i in t.parents and os.path.isdir(i) and not is_measurement_set(i):
                raise UnsafeOutputError(f"{out}: is inside the input folder {given}; "
                                        f"refusing to write into an input")
        if os.path.lexists(inp) and os.path.lexists(target):
            with contextlib.suppress(OSError):
                if os.path.samefile(target, inp):
                    raise UnsafeOutputError(f"{out}: is the input {given}; "
                                            f"refusing to write onto an input")
    for t in (target, real_t):
        owner = _member_of_set(t)
        if owner is not None:
            raise UnsafeOutputError(f"{out}: is part of the measurement set {owner}; "
                                    f"refusing to write onto an input")


# -- the output rule for files ----------------------------------------------------------------

def check_output(path: str | os.PathLike, *inputs: str | os.PathLike,
                 overwrite: bool | None = None) -> tuple[Path, bool]:
    """Apply the output rule to a file output; return (where to write, in place?).

    In place (True) for a character device or a FIFO with a reader; else the
    path of the regular file to replace atomically (a symbolic link's target).
    Raises `UnsafeOutputError` for everything the module docstring refuses.
    """
    over = _RULES.get()[1] if overwrite is None else (overwrite or _RULES.get()[1])
    target = _target(path)
    refuse_input(target, *inputs)
    try:
        st = os.stat(target)
    except FileNotFoundError:
        if os.path.islink(target):
            raise UnsafeOutputError(f"{path}: is a symbolic link to a missing file; refusing to "
                                    f"replace the link") from None
        return target, False
    except NotADirectoryError:
        raise UnsafeOutputError(f"{path}: a parent of it is not a folder") from None
    except OSError as e:
        raise UnsafeOutputError(f"{path}: cannot be inspected ({e.strerror})") from None
    mode = st.st_mode
    if stat.S_ISDIR(mode):
        raise UnsafeOutputError(f"{path}: is a folder; refusing to replace it with a file")
    if stat.S_ISCHR(mode) or (stat.S_ISREG(mode) and _descriptor_path(target)):
        return target, True
    if stat.S_ISFIFO(mode):
        try:
            fd = os.open(target, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            raise UnsafeOutputError(f"{path}: is a FIFO that no process reads; refusing to write "
                                    f"(or wait) on it") from None
        os.close(fd)
        return target, True
    if not stat.S_ISREG(mode):
        raise UnsafeOutputError(f"{path}: is a special file (not a regular file, character "
                                f"device or FIFO); refusing to write to it")
    real = target
    if os.path.islink(target):
        real = _real(target)
        refuse_input(real, *inputs)
    if not over and not written_by_otbench(real):
        raise UnsafeOutputError(f"{path}: exists and otbench did not write it (or it was changed "
                                f"since); refusing to replace it (pass `overwrite` to replace it)")
    return real, False


def _descriptor_path(target: Path) -> bool:
    """A path that names an open descriptor (`/dev/stdout`, `/proc/self/fd/1`, a link to one):
    what it points at is already the user's choice (a shell redirect), so it is written in place."""
    hops, p = 0, target
    while hops < 40:
        if p.parts[1:2] in (("proc",), ("dev",)) and (
                p.parts[1:2] == ("dev",) or "fd" in p.parts):
            return True
        if not p.is_symlink():
            return False
        p = Path(os.path.abspath(p.parent / os.readlink(p)))
        hops += 1
    return False


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
                    out[rel] = _sha256(p)
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
            return stat.S_ISREG(os.lstat(p).st_mode) and ours[rel] == _sha256(p)
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
            _write_ledger(tmp, {"files": _files_of(tmp), "folder": True})
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
