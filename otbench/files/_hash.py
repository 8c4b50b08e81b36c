"""The one file checksum."""

import hashlib
import os
from typing import BinaryIO


def sha256_file(path: str | os.PathLike) -> str:
    """Hex sha256 of a file's bytes, read in 1 MiB chunks."""
    with open(path, "rb") as f:
        return sha256_stream(f)


def sha256_stream(f: BinaryIO) -> str:
    """Hex sha256 of the bytes of the open binary file `f` from its position to its end, read
    in 1 MiB chunks (a file opened once, e.g. by `open_regular`, hashed and then read)."""
    h = hashlib.sha256()
    for chunk in iter(lambda: f.read(1 << 20), b""):
        h.update(chunk)
    return h.hexdigest()
