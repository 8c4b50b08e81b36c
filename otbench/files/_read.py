"""Reading an input file that a user names: a regular file, bounded, never a hang."""

import fcntl
import os
import stat
from collections.abc import Callable, Iterator
from typing import BinaryIO


def open_regular(path: str | os.PathLike, *, what: str, fail: Callable[[str], Exception],
                 pipes: bool = False) -> BinaryIO:
    """The regular file at `path`, open for binary reading (a stream the caller closes).

    A FIFO would block the open (and then every read) forever and a device (``/dev/zero``) never
    ends, so the file is opened without blocking and checked with ``fstat`` on that same
    descriptor (no swap between the check and the read); only then does it read as usual.
    `what` names the kind of file in the messages ("a config file"); `fail(reason)` builds the
    caller's one-line error, raised for a missing or unreadable path or a file that is not
    regular. For readers that stream a file of any size line by line; `read_regular` bounds it.

    With `pipes`, a FIFO is read too, as a stream from the process writing it (`otbench import
    <(zcat runs.jsonl.gz)`): a path that is a FIFO is opened blocking at once, so the open waits
    for its writer as any reader of a pipe does; the caller bounds what it reads (a line limit).
    It is never opened twice: a first, non-blocking reader closed before a blocking reopen lets a
    quick writer connect to the first, write and leave, and the pipe drops what it wrote when the
    first reader closes -- the reopen then waits for a writer that already left, forever.
    Devices and folders stay refused.
    """
    if pipes:
        try:
            is_fifo = stat.S_ISFIFO(os.stat(path).st_mode)
        except FileNotFoundError:
            raise fail("no such file") from None
        except OSError as e:
            raise fail(f"cannot be read ({e.strerror or e})") from None
        if is_fifo:
            return os.fdopen(_open_pipe(path, fail), "rb")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise fail("no such file") from None
    except OSError as e:
        raise fail(f"cannot be read ({e.strerror or e})") from None
    try:
        mode = os.fstat(fd).st_mode
        if pipes and stat.S_ISFIFO(mode):       # a FIFO swapped in after the check above
            raise fail("changed while being opened (it became a FIFO)")
        if not stat.S_ISREG(mode):
            raise fail(f"not a regular file (a FIFO, device or folder is not {what})")
        # Blocking again: a regular file never blocks, and a stream over a non-blocking
        # descriptor may return short reads as None, which `io` reports as an error.
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _open_pipe(path: str | os.PathLike, fail: Callable[[str], Exception]) -> int:
    """A blocking descriptor of the FIFO at `path` (checked again on the descriptor: it is still one)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as e:
        raise fail(f"cannot be read ({e.strerror or e})") from None
    if not stat.S_ISFIFO(os.fstat(fd).st_mode):     # swapped since the check
        os.close(fd)
        raise fail("changed while being opened (a FIFO became something else)")
    return fd


def read_regular(path: str | os.PathLike, limit: int, *, what: str,
                 fail: Callable[[str], Exception]) -> bytes:
    """The bytes of the regular file at `path` (`open_regular`), at most `limit` of them.

    Read in chunks of at most 1 MiB, so a file over `limit` is refused after `limit + 1` bytes
    (`fail`: "larger than LIMIT bytes; WHAT is smaller"), not after reading all of it.
    """
    chunks, size = [], 0
    with open_regular(path, what=what, fail=fail) as f:
        while size <= limit:
            chunk = f.read(min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    if size > limit:
        raise fail(f"larger than {limit} bytes; {what} is smaller")
    return b"".join(chunks)


def read_regular_text(path: str | os.PathLike, limit: int, *, what: str,
                      fail: Callable[[str], Exception]) -> str:
    """`read_regular`'s bytes as UTF-8 text; bytes that are not UTF-8 are `fail`ed with their offset."""
    raw = read_regular(path, limit, what=what, fail=fail)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise fail(f"not UTF-8 text (byte {e.start})") from None


def bounded_lines(f: BinaryIO, limit: int, fail: Callable[[int], Exception]) -> Iterator[tuple[int, bytes]]:
    """(line number from 1, line) of the binary stream `f`, each read with at most `limit` bytes: a
    longer line (a binary file, a stream without line breaks) raises `fail(its line number)` before
    it is read whole."""
    for i, line in enumerate(iter(lambda: f.readline(limit + 1), b""), 1):
        if len(line) > limit:
            raise fail(i)
        yield i, line


def arrow_file(f: BinaryIO):
    """A pyarrow file reading the same file as `f` (an `open_regular` stream), for Parquet readers.

    pyarrow reading a Python file object calls back into Python from its own I/O threads and
    keeps the object alive in them; when the interpreter exits right after a refused input (one
    table read, the next one refused), such a thread that still holds the object takes the GIL
    during finalization and the process aborts ("terminate called without an active exception",
    exit -6 after the right message; seen on a loaded machine). A native file keeps Python out
    of those threads: the descriptor is reopened through /dev/fd, which names the very file
    already opened and checked, not whatever the path holds now. Where that reopen is refused
    (the file's permissions changed since), `f` itself is returned. Use it in a `with` block:
    the native file is a second descriptor, closed there (closing `f` twice is harmless).
    """
    import pyarrow as pa

    try:
        return pa.OSFile(f"/dev/fd/{f.fileno()}")
    except (OSError, ValueError):
        return f
