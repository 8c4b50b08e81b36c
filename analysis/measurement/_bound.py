"""What binds a measurement set's manifest to what it claims, beyond the trajectories' hashes.

* `provenance_hash`: sha256 of the manifest's provenance (canonical JSON). The
  content hash covers the data only, so without it an edited provenance -- a
  server address, a model folder, a seed -- would pass `validate` unseen. A set
  whose provenance records a served engine's address must carry the hash (its
  address is what an edit would redirect); older sets without a served engine
  load as before.
* `verify_tables`: the extra tables (the probe's `tokens`, `probes`) against
  their manifest sha256 and row counts; `validate` and `report` run it (a load
  checks the trajectories only, as the tables can be large).
"""

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ._build import MeasurementSetError

PROVENANCE_HASH = "provenance_hash"


def provenance_hash(prov: Mapping[str, Any]) -> str:
    """sha256 of `prov` as canonical JSON (sorted keys, no whitespace, non-ASCII escaped)."""
    text = json.dumps(prov, sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _served_address(prov: Mapping[str, Any]) -> Any:
    engine = prov.get("engine")
    config = engine.get("config") if isinstance(engine, Mapping) else None
    return config.get("base_url") if isinstance(config, Mapping) else None


def check_provenance(where: str, manifest: Mapping[str, Any]) -> None:
    """Refuse a provenance that differs from its recorded hash (or a served one without it)."""
    prov = manifest.get("provenance", {})
    want = manifest.get(PROVENANCE_HASH)
    if want is None:
        if _served_address(prov) is not None:
            raise MeasurementSetError(where, "the provenance records a served engine's address "
                                             "but no provenance_hash binds it to the set")
        return
    if not isinstance(want, str) or provenance_hash(prov) != want:
        raise MeasurementSetError(where, "provenance does not match its provenance_hash "
                                         "(edited after writing)")


def verify_tables(path: str | Path) -> None:
    """Every extra table of the set at `path`: present, its sha256 and row count as listed."""
    import pyarrow.parquet as pq

    from otbench.files import arrow_file, sha256_stream

    from ._io import read_manifest
    from ._listed import open_listed

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
