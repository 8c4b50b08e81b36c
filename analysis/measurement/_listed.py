"""The files a set's manifest lists, read as what they are: regular files, each opened once.

A FIFO where a listed table should be would block a plain open forever, and a device or folder
is no table: `open_listed` names each for what it is ("missing" only for a missing file), and
`read_listed` takes a table's checksum and its rows from that one descriptor, so nothing can be
swapped between the check and the read.
"""

from pathlib import Path
from typing import BinaryIO

import pyarrow as pa
import pyarrow.parquet as pq

from otbench.files import arrow_file, open_regular, sha256_stream

from ._build import MeasurementSetError


def open_listed(fpath: Path, label: str = "") -> BinaryIO:
    """The file a set's manifest lists at `fpath`, open for binary reading (`open_regular`);
    `label` prefixes the reason of a refusal (e.g. "table 'tokens': ")."""
    def fail(reason: str) -> MeasurementSetError:
        if reason == "no such file":
            reason = "listed in the manifest but missing"
        return MeasurementSetError(str(fpath), label + reason)
    return open_regular(fpath, what="a Parquet table", fail=fail)


def read_listed(fpath: Path, sha256: str | None, label: str = "") -> pa.Table:
    """The Parquet table the manifest lists at `fpath`; `sha256`: the digest its bytes must have
    (None: not verified)."""
    with open_listed(fpath, label) as f:
        if sha256 is not None and sha256_stream(f) != sha256:
            raise MeasurementSetError(str(fpath), f"{label}sha256 does not match the manifest "
                                                  f"(file changed after writing)")
        f.seek(0)
        try:
            # One file, read as one file: `pq.read_table` goes through pyarrow.dataset, whose
            # import (pandas too, where installed) cost more than reading a large set.
            with arrow_file(f) as src, pq.ParquetFile(src) as pf:
                return pf.read()
        except (pa.ArrowInvalid, OSError) as e:
            raise MeasurementSetError(str(fpath), f"{label}not a readable Parquet file ({e})") \
                from None
