"""The one atomic writer: files and folders appear complete or not at all.

Every otbench output goes through here. A file or folder is written under a
hidden sibling temporary name (`.NAME.tmp-<random>`), flushed, and moved into
place with one `os.replace`, so a killed writer never leaves a half-written
output under the real name, and the previous output stays valid until the
new one is complete. Temporaries are removed on every failure, including
`KeyboardInterrupt`.

Replacing a folder is two renames (old aside, new in place) followed by the
removal of the old copy: at no moment is the name missing for longer than
between those two renames, and a crash between them leaves the old copy
under `.NAME.old-<random>` rather than losing it.
"""

import contextlib
import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path


def _sibling(path: Path, tag: str) -> Path:
    return path.parent / f".{path.name}.{tag}-{uuid.uuid4().hex}"


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary sibling path to write a file to; it becomes `path` on normal exit.

    For writers that want a file name (pyarrow, matplotlib); the temporary
    file is removed on any exception and `path` is untouched.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
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


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike) -> Iterator[Path]:
    """Build a folder in a temporary sibling, then move it to `path` in one step.

    Yields the (empty, existing) temporary folder. On normal exit it replaces
    whatever folder is at `path` (callers decide beforehand whether that is
    allowed); on any exception the temporary folder is removed and `path` is
    untouched.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _sibling(path, "tmp")
    tmp.mkdir()
    try:
        yield tmp
        if path.exists():
            old = _sibling(path, "old")
            os.replace(path, old)
            os.replace(tmp, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
