"""The measurement set: the contract between the probe stage and the analysis (SPEC §2). No JAX.

Types and validation (`MeasurementSet`, `from_ragged`), Parquet storage with
checksums (`save`, `load`), JSONL import/export, the calibrated simulator,
token-space segmentation and the stored-token reader the probe and the report
share, and the on-disk form of matched-horizon runs. The file helpers every
stage shares (atomic writers, the JSON reader, provenance) live in
`otbench.files`, the error base in `otbench.errors`. Everything here is NumPy
and pyarrow only, so the probe can write sets without loading JAX.
"""

from ._bound import verify_tables
from ._build import INT32_MAX, MeasurementSetError, from_dense, from_ragged, ragged
from ._field import FIELD_SIGNALS, HESITATION_WORDS, SIGNAL_DEFINITIONS, add_field_signals
from ._field_rules import consistency_stop, deer_asks, deer_stop, dynasor_stop, window_agrees
from ._horizon_run import (
                           LETTERS,
                           HorizonDataError,
                           HorizonRun,
                           Readouts,
                           load_run,
                           write_run,
)
from ._io import content_hash, load, load_table, read_manifest, save
from ._jsonl import export_jsonl, import_jsonl
from ._segment import SPAN_RULES, boundary_mask, segment, segment_flat, target_steps
from ._simulate import simulate
from ._tidy import Tidy, concat_columns, melt_columns
from ._tokens import StoredThinking, stored_thinking
from ._types import SCHEMA, SPLITS, MeasurementSet

__all__ = [
    "FIELD_SIGNALS", "HESITATION_WORDS", "INT32_MAX", "LETTERS", "SCHEMA", "SIGNAL_DEFINITIONS", "SPAN_RULES", "SPLITS",
    "HorizonDataError", "HorizonRun", "MeasurementSet", "MeasurementSetError", "Readouts",
    "StoredThinking", "Tidy",
    "add_field_signals", "boundary_mask", "concat_columns", "consistency_stop", "content_hash",
    "deer_asks", "deer_stop", "dynasor_stop", "export_jsonl", "from_dense", "from_ragged",
    "import_jsonl", "load", "load_run", "load_table", "melt_columns", "ragged", "read_manifest", "save",
    "segment", "segment_flat", "simulate", "stored_thinking", "target_steps", "verify_tables",
    "window_agrees", "write_run",
]
