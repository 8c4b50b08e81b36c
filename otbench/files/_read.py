"""Reading an input file that a user names: a regular file, bounded, never a hang."""

import os
import stat
from collections.abc import Callable


def read_regular(path: str | os.PathLike, limit: int, *, what: str,
                 fail: Callable[[str], Exception]) -> bytes:
    """The bytes of the regular file at `path`, at most `limit` of them.

    A FIFO would block the read forever and a device (``/dev/zero``) fill memory, so the file is
    opened without blocking and checked with ``fstat`` on that same descriptor (no swap between
    the check and the read) before a byte is read. `what` names the kind of file in the messages
    ("a config file"); `fail(reason)` builds the caller's one-line error, raised for a missing or
    unreadable path, a file that is not regular, or one over `limit` bytes.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise fail("no such file") from None
    except OSError as e:
        raise fail(f"cannot be read ({e.strerror or e})") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise fail(f"not a regular file (a FIFO, device or folder is not {what})")
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
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
