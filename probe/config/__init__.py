"""Frozen configuration artifacts: model families, model entries, instructions, per-sample seeds (docs/rules.md)."""

from ._embedded import DEFAULT_MODEL, EmbeddedModelError, cache_dir, embedded_model_dir
from ._family import (
                      ArtifactError,
                      Family,
                      Limits,
                      ModelEntry,
                      Sampling,
                      artifacts_dir,
                      family_from_dict,
                      find_model,
                      list_entries,
                      load_family,
                      load_instructions,
                      load_model,
)
from ._hub import (
                   MemoryEstimate,
                   ModelNotFoundError,
                   ResolvedModel,
                   check_fits,
                   check_local_model,
                   estimate_memory,
                   resolve_hub_model,
)
from ._seeds import PHASES, derive_seed

__all__ = [
    "DEFAULT_MODEL", "PHASES",
    "ArtifactError", "EmbeddedModelError", "Family", "Limits", "MemoryEstimate", "ModelEntry",
    "ModelNotFoundError", "ResolvedModel", "Sampling",
    "artifacts_dir", "cache_dir", "check_fits", "check_local_model", "derive_seed", "embedded_model_dir",
    "estimate_memory", "family_from_dict", "find_model", "list_entries", "load_family",
    "load_instructions", "load_model", "resolve_hub_model",
]
