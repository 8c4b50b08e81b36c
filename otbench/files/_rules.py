"""The output rule: outputs never on or inside inputs, never over what otbench did not write.

`output_rules` sets the inputs and the `overwrite` permission of a block (the
CLI sets them per command); `refuse_input` keeps an output off every input
(a measurement set's members included); `check_output` applies the whole
rule to one file output (see `_atomic`'s module docstring).
"""


import contextlib
import contextvars
import json
import os
import re
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path

from otbench.errors import UnsafeOutputError

from ._ledger import written_by_otbench
from ._temporaries import _target, stale_temporary

_SET_MANIFEST = "manifest.json"
_SET_SCHEMA = "otbench.measurement_set/1"

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


def _owned_files(directory: Path) -> set[str]:
    """What the set at `directory` can prove it wrote: its manifest, and each file the manifest
    lists (a `trajectories/` file, a table under its own name's folder, `.parquet`) that is a
    regular file with the sha256 listed. A forged or stale entry owns nothing."""
    from ._hash import sha256_file

    try:
        with open(directory / _SET_MANIFEST, "rb") as f:
            doc = json.loads(f.read(1 << 24).decode("utf-8"))
    except (OSError, ValueError, RecursionError):
        return set()
    if not isinstance(doc, dict) or doc.get("schema") != _SET_SCHEMA:
        return set()
    files = doc.get("files") if isinstance(doc.get("files"), list) else []
    tables = doc.get("tables") if isinstance(doc.get("tables"), dict) else {}
    claims = [("trajectories", e) for e in files] + [(str(k), e) for k, e in tables.items()]
    owned = {_SET_MANIFEST}
    for folder, entry in claims:
        rel = entry.get("path") if isinstance(entry, dict) else None
        if not isinstance(rel, str) or not rel.endswith(".parquet") or "\\" in rel:
            continue
        parts = rel.split("/")
        if parts[0] != folder or len(parts) < 2 or any(p in ("", ".", "..") for p in parts):
            continue
        p = directory / rel
        try:
            if stat.S_ISREG(os.lstat(p).st_mode) and sha256_file(p) == entry.get("sha256"):
                owned.add(rel)
        except OSError:
            continue
    return owned


def foreign_entries(directory: Path) -> list[str]:
    """Entries of the set at `directory` that the set does not own, kept when it is replaced:
    everything but what `_owned_files` proves, as relative paths -- inside the trajectory and
    table folders too (a user's README there is kept, and so is a file that no longer has the
    sha256 its manifest lists)."""
    owned = _owned_files(directory)
    out: list[str] = []

    def visit(rel_dir: str) -> None:
        for e in sorted((directory / rel_dir).iterdir() if rel_dir else directory.iterdir()):
            rel = f"{rel_dir}/{e.name}" if rel_dir else e.name
            # (a manifest temporary of a killed writer goes with the old set; a look-alike
            # without otbench's marker, or a live writer's, is kept)
            if rel in owned or (not rel_dir and stale_temporary(e, directory / _SET_MANIFEST)):
                continue
            # folders are kept file by file (the new set may write into one of the same name:
            # its trajectories, a table's folder); an empty folder is kept as it is
            if e.is_dir() and not e.is_symlink() and any(e.iterdir()):
                visit(rel)
            else:
                out.append(rel)
    visit("")
    return out


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


PATH_RESERVE = 256
"""Bytes an output path leaves free under the system's PATH_MAX: the names otbench writes under
and beside an output (a temporary sibling, a report's figures, a checkpoint's steps)."""
NAME_RESERVE = 64
"""Bytes an output's own name leaves free under NAME_MAX: its temporary sibling's name
(`.NAME.tmp-<pid>-<32 hex>.otbench`) is that much longer."""
PATH_DEPTH = 512
"""Names an output path may hold (its absolute form): the folders a writer creates are made by
`Path.mkdir(parents=True)` and `os.makedirs`, which recurse once per missing folder, and the
interpreter's recursion limit (1,000 frames, less the command's own) ends a deeper path with a
`RecursionError` in the middle of the work. Far beyond any real layout."""


def _limits(path: Path) -> tuple[int, int]:
    """(PATH_MAX, NAME_MAX) of the file system holding `path` (its nearest existing folder)."""
    probe = path.parent
    while True:
        try:     # -1: no limit of its own (the kernel's limits still hold)
            path_max, name_max = os.pathconf(probe, "PC_PATH_MAX"), os.pathconf(probe, "PC_NAME_MAX")
            return (path_max if path_max > 0 else 4096), (name_max if name_max > 0 else 255)
        except (OSError, ValueError):
            if probe.parent == probe:
                return 4096, 255
            probe = probe.parent


def _shown_path(path: str | os.PathLike) -> str:
    text = os.fspath(path) if not isinstance(path, bytes) else os.fsdecode(path)
    return text if len(text) <= 120 else f"{text[:60]}...{text[-40:]}"


def check_path_length(out: str | os.PathLike, target: Path | None = None) -> None:
    """Raise `UnsafeOutputError` (one line naming `out` and the rule) when the output path
    `out` is too long to write: more than `PATH_DEPTH` names deep, its absolute path over
    PATH_MAX less `PATH_RESERVE`, a name
    in it over NAME_MAX, or its own name over NAME_MAX less `NAME_RESERVE`. Checked before
    any work, so the operating system's "file name too long" never ends a finished run."""
    target = _target(out) if target is None else target
    if len(target.parts) - 1 > PATH_DEPTH:        # by the path alone: nothing is created
        raise UnsafeOutputError(
            f"{_shown_path(out)}: too deep an output path ({len(target.parts) - 1:,} names); at "
            f"most {PATH_DEPTH} names (creating a deeper path's folders exhausts the interpreter's "
            f"recursion limit)")
    path_max, name_max = _limits(target)
    size = len(os.fsencode(target))
    if size > path_max - 1 - PATH_RESERVE:
        raise UnsafeOutputError(
            f"{_shown_path(out)}: too long an output path ({size} bytes, {len(target.parts) - 1} "
            f"names); at most {path_max - 1 - PATH_RESERVE} bytes (the system's PATH_MAX "
            f"{path_max} less {PATH_RESERVE} for what otbench writes under and beside it)")
    for k, name in enumerate(target.parts[1:], 1):
        room = name_max - (NAME_RESERVE if k == len(target.parts) - 1 else 0)
        size = len(os.fsencode(name))
        if size > room:
            why = (f"the system's NAME_MAX {name_max} less {NAME_RESERVE} for the temporary "
                   f"beside it" if room < name_max else "the system's NAME_MAX")
            raise UnsafeOutputError(
                f"{_shown_path(out)}: too long a name in the output path ({_shown_path(name)!r}: "
                f"{size} bytes); at most {room} bytes ({why})")


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
    check_path_length(out, target)
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
            try:                # a hard link of an input is the input (same st_dev + st_ino)
                same = os.path.samefile(target, inp)
            except OSError:     # (UnsafeOutputError is an OSError: raised outside the try)
                same = False
            if same:
                raise UnsafeOutputError(f"{out}: is the input {given}; "
                                        f"refusing to write onto an input")
    for t in (target, real_t):
        owner = _member_of_set(t)
        if owner is not None:
            raise UnsafeOutputError(f"{out}: is part of the measurement set {owner}; "
                                    f"refusing to write onto an input")


def refuse_same_output(*outputs: str | os.PathLike | None) -> None:
    """Raise `UnsafeOutputError` when two of one command's `outputs` (None: not given) are the
    same file or folder (links and hard links seen through): the later write would silently
    replace the earlier one (`bench compare --json` onto its own leaderboard.json). A stream
    (a FIFO or device, `/dev/stdout` twice) takes both writes one after the other and passes."""
    seen: list[tuple[str | os.PathLike, Path]] = []
    for out in outputs:
        if out is None:
            continue
        t = _real(_target(out))
        try:
            if not (stat.S_ISREG(os.stat(t).st_mode) or stat.S_ISDIR(os.stat(t).st_mode)):
                continue
        except OSError:
            pass                                  # not there yet: compared by its path
        for prev, pt in seen:
            same = t == pt
            if not same and os.path.exists(t) and os.path.exists(pt):
                try:
                    same = os.path.samefile(t, pt)
                except OSError:
                    same = False
            if same:
                raise UnsafeOutputError(f"{out}: is also the output {prev} of the same command; "
                                        f"refusing to write one output over another")
        seen.append((out, t))


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
    if stat.S_ISREG(mode) and descriptor_of(target) is not None:
        write_descriptor(target, path)            # refuses what is not an output redirect
        _refuse_hard_link(path, st, inputs)
        return target, True
    if stat.S_ISCHR(mode) or stat.S_ISFIFO(mode):
        _refuse_reading_descriptor(target, path)
    if stat.S_ISCHR(mode):
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
    _refuse_hard_link(path, os.stat(real), inputs)
    return real, False


_FD_PATH = re.compile(r"/(?:dev/fd|proc/(?:self|thread-self|\d+)/fd)/(\d+)")


def descriptor_of(target: str | os.PathLike) -> tuple[int, bool] | None:
    """`(N, own)` when `target` names open descriptor N (`/dev/stdout`, `/dev/fd/N`,
    `/proc/self/fd/N`, `/proc/PID/fd/N`, or a link to one; folders resolved on the way); `own`:
    a descriptor of this process. None for every other path (`/dev/shm/x` is a plain file)."""
    p, hops = Path(os.path.abspath(target)), 0
    while hops < 40:
        p = Path(os.path.realpath(p.parent)) / p.name
        m = _FD_PATH.fullmatch(str(p))
        if m is not None:
            own = p.parts[2] in ("self", "thread-self", str(os.getpid())) or p.parts[1] == "dev"
            return int(m.group(1)), own
        if not p.is_symlink():
            return None
        p = Path(os.path.abspath(p.parent / os.readlink(p)))
        hops += 1
    return None


def write_descriptor(target: str | os.PathLike, shown: str | os.PathLike | None = None) -> int | None:
    """The descriptor to write a regular file named by a descriptor path through (None: `target`
    is not such a path). Only this process's descriptor opened write-only (a shell's `>` or `>>`)
    is one: it is written where it stands, in its mode (`>>` appends, nothing is truncated);
    a descriptor open for reading (`< thesis.tex`), or for reading and writing, names a file the
    user did not give as an output, and another process's descriptor is not ours to write."""
    import fcntl

    got = descriptor_of(target)
    if got is None:
        return None
    n, own = got
    shown = target if shown is None else shown
    if not own:
        raise UnsafeOutputError(f"{shown}: names a descriptor of another process; refusing to "
                                f"write through it")
    try:
        mode = fcntl.fcntl(n, fcntl.F_GETFL) & os.O_ACCMODE
    except OSError:
        raise UnsafeOutputError(f"{shown}: descriptor {n} is not open") from None
    if mode != os.O_WRONLY:
        what = "reading" if mode == os.O_RDONLY else "reading and writing"
        raise UnsafeOutputError(f"{shown}: is descriptor {n}, open for {what} (a redirect from "
                                f"a file, not an output redirect); refusing to write onto that file")
    return n


def _refuse_reading_descriptor(target: Path, shown) -> None:
    """A pipe or device named through this process's descriptor that is open for reading only
    (`--json /dev/fd/0` with a pipe on stdin) is where the command's input comes from: opened
    again for writing, the output would go into the command's own input (to whatever feeds it
    next, or back to itself). A terminal's descriptor (open for reading and writing) and an
    output redirect stay writable."""
    import fcntl

    got = descriptor_of(target)
    if got is None or not got[1]:
        return
    try:
        mode = fcntl.fcntl(got[0], fcntl.F_GETFL) & os.O_ACCMODE
    except OSError:
        raise UnsafeOutputError(f"{shown}: descriptor {got[0]} is not open") from None
    if mode == os.O_RDONLY:
        raise UnsafeOutputError(f"{shown}: is descriptor {got[0]}, open for reading (the "
                                f"command's input, not an output redirect); refusing to write "
                                f"into it")


def _refuse_hard_link(path, st: os.stat_result, inputs) -> None:
    """An output file with other names must not be one of an input's files (a hard link)."""
    if st.st_nlink < 2:
        return
    ctx_inputs, _, _ = _RULES.get()
    for given in list(inputs) + list(ctx_inputs):
        inp = _target(given)
        roots = [inp] if not os.path.isdir(inp) else []
        walked = 0
        if os.path.isdir(inp):
            for dirpath, _dirs, names in os.walk(inp):
                roots += [Path(dirpath) / n for n in names]
                walked += len(names)
                if walked > 100_000:
                    break
        for f in roots:
            try:
                o = os.stat(f)
            except OSError:
                continue
            if (o.st_dev, o.st_ino) == (st.st_dev, st.st_ino):
                raise UnsafeOutputError(f"{path}: is a hard link of the input {f}; refusing "
                                        f"to write onto an input")
