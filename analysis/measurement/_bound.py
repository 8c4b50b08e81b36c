"""What binds a measurement set's manifest to its provenance, beyond the trajectories' hashes.

`provenance_hash`: sha256 of the manifest's provenance (canonical JSON). The
  content hash covers the data only, so without it an edited provenance -- a
  server address, a model folder, a seed -- would pass `validate` unseen. A set
  whose provenance records a served engine's address must carry the hash (its
  address is what an edit would redirect); older sets without a served engine
  load as before. (The extra tables are checked against the manifest in `_tables`.)
"""

import hashlib
import json
from collections.abc import Mapping
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
