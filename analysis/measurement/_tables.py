"""A set's extra tables (the probe's `tokens`, `probes`) against their manifest sha256 and row
counts; `validate` and `report` run it (a load checks the trajectories only, as the tables can
be large)."""

from pathlib import Path

import pyarrow.parquet as pq

from otbench.files import arrow_file, sha256_stream

from ._build import MeasurementSetError
from ._io import read_manifest
from ._listed import open_listed


def verify_tables(path: str | Path) -> None:
    """Every extra table of the set at `path`: present, its sha256 and row count as listed."""
    path = Path(path)
    for name, entry in sorted(read_manifest(path).get("tables", {}).items()):
        fpath = path / entry["path"]
        if fpath.is_symlink():
            raise MeasurementSetError(str(fpath), f"table {name!r}: listed in the manifest but "
                                                  "missing (or a link)")
        with open_listed(fpath, f"table {name!r}: ") as f:
            if sha256_stream(f) != entry["sha256"]:
                raise MeasurementSetError(str(fpath), f"table {name!r}: sha256 does not match "
                                                      "the manifest (file changed after writing)")
            f.seek(0)
            try:
                with arrow_file(f) as src:
                    rows = pq.ParquetFile(src).metadata.num_rows
            except Exception as e:  # noqa: BLE001 -- any unreadable file is one line
                raise MeasurementSetError(str(fpath), f"table {name!r}: not a readable Parquet "
                                                      f"file ({type(e).__name__})") from None
        if rows != entry["rows"]:
            raise MeasurementSetError(str(fpath), f"table {name!r}: has {rows} rows, the manifest "
                                                  f"says {entry['rows']}")
