"""Frozen configuration artifacts: model families, model entries, instructions, per-sample seeds (SPEC §3.1)."""

from ._embedded import DEFAULT_MODEL, EmbeddedModelError, cache_dir, embedded_model_dir
from ._family import (
                      ArtifactError,
                      Family,
                      Limits,
                      ModelEntry,
                      Sampling,
                      artifacts_dir,
                      family_from_dict,
                      list_entries,
                      load_family,
                      load_instructions,
                      load_model,
)
from ._seeds import PHASES, derive_seed

__all__ = [
    "DEFAULT_MODEL", "PHASES",
    "ArtifactError", "EmbeddedModelError", "Family", "Limits", "ModelEntry", "Sampling",
    "artifacts_dir", "cache_dir", "derive_seed", "embedded_model_dir", "family_from_dict",
    "list_entries", "load_family", "load_instructions", "load_model",
]
