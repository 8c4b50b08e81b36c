"""The measurement set: the contract between the probe stage and the analysis (SPEC §2). No JAX.

Types and validation (`MeasurementSet`, `from_ragged`), Parquet storage with
checksums (`save`, `load`), JSONL import/export, the calibrated simulator,
token-space segmentation and the stored-token reader the probe and the report
share, and the on-disk form of matched-horizon runs. Everything here is NumPy
and pyarrow only, so the probe can write sets without loading JAX.
"""

from ._atomic import atomic_dir, atomic_path, write_bytes_atomic, write_text_atomic
from ._build import INT32_MAX, MeasurementSetError, from_dense, from_ragged, ragged
from ._horizon_run import (
                           LETTERS,
                           HorizonDataError,
                           HorizonRun,
                           Readouts,
                           load_run,
                           write_run,
)
from ._io import content_hash, load, load_table, read_manifest, save, sha256_file
from ._json import loads_json, read_json
from ._jsonl import export_jsonl, import_jsonl
from ._provenance import git_commit, provenance
from ._segment import SPAN_RULES, boundary_mask, segment, segment_flat, target_steps
from ._simulate import simulate
from ._tidy import Tidy, concat_columns, melt_columns
from ._tokens import StoredThinking, stored_thinking
from ._types import SCHEMA, SPLITS, MeasurementSet

__all__ = [
    "INT32_MAX", "LETTERS", "SCHEMA", "SPAN_RULES", "SPLITS",
    "HorizonDataError", "HorizonRun", "MeasurementSet", "MeasurementSetError", "Readouts",
    "StoredThinking", "Tidy",
    "atomic_dir", "atomic_path", "boundary_mask", "concat_columns", "content_hash", "export_jsonl", "from_dense", "from_ragged", "git_commit",
    "import_jsonl", "load", "loads_json", "read_json", "provenance", "load_run", "load_table", "melt_columns", "ragged", "read_manifest", "save",
    "segment", "segment_flat", "sha256_file", "simulate", "stored_thinking", "target_steps",
    "write_bytes_atomic", "write_run", "write_text_atomic",
]
