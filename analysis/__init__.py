"""otbench.analysis: the measurement set and the JAX analysis core (no torch here)."""

from ._build import MeasurementSetError, from_dense, from_ragged, ragged
from ._io import content_hash, load, load_table, read_manifest, save
from ._simulate import simulate
from ._types import SCHEMA, SPLITS, MeasurementSet

__all__ = [
    "SCHEMA", "SPLITS", "MeasurementSet", "MeasurementSetError",
    "content_hash", "from_dense", "from_ragged", "load", "load_table",
    "ragged", "read_manifest", "save", "simulate",
]
