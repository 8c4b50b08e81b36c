"""The members of an inspect-ai `.eval` archive, checked before inspect-ai unpacks them.

An archive member is a side file of the log: it gets the log's checks (what is read is
bounded) and the resource budget, so a member that inflates to gigabytes is one line.
"""

from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

MEMBER_LIMIT = 1 << 28
"""Bytes one member of an inspect-ai `.eval` archive may unpack to (inspect writes one small
JSON document per sample; its header and summaries are a few MiB)."""


def check_archive(p: Path, open_log: Callable[[Path], BinaryIO],
                  error: Callable[[str], Exception]) -> None:
    """The members of an inspect-ai `.eval` log (a zip archive), checked as the log itself is,
    before inspect-ai unpacks any: the archive read through `open_log` (the log's own reader:
    a regular file), each member at most `MEMBER_LIMIT` bytes unpacked, all of them within
    the memory budget; `error(message)` builds the log's one-line error.

    The sizes are the ones the archive declares, which is what bounds a reader: Python's
    zipfile never unpacks past a member's declared size (more data fails its CRC), so a
    member that would inflate to gigabytes is one line here, not a read until memory runs out.
    """
    import zipfile

    from otbench.resources import check_budget

    with open_log(p) as f:
        try:
            with zipfile.ZipFile(f) as z:
                infos = z.infolist()
        except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError) as e:
            raise error(f"{p}: not an inspect-ai log (a .eval log is a zip archive: {e})") \
                from None
    for i in infos:
        if i.file_size > MEMBER_LIMIT:
            raise error(f"{p}: archive member {i.filename!r} unpacks to {i.file_size:,} bytes; "
                        f"a member of an inspect-ai log is read only up to {MEMBER_LIMIT:,} bytes")
    # parsed JSON takes a few times its text's bytes in memory
    check_budget(f"{p}: reading the inspect-ai log", "unpacked size",
                 sum(i.file_size for i in infos), per_unit=4.0, unit="byte",
                 advice="inspect-ai reads every member of the log into memory")
