"""Probe stage: trajectories, segmentation and answer probes (heavy deps imported lazily).

Subpackages, in pipeline order: `config` (families, model entries, seeds),
`data` (questions), `tokens` (boundary vocabulary, probe prompts), `engines`
(vLLM, transformers), `grading`, `stp` (the job, the probe loop, the runner,
journal, Ray) and `horizon` (matched-horizon runs). Importing this package
never imports torch, transformers, vLLM or JAX.
"""

from otbench.analysis.measurement import (
                                          SPAN_RULES,
                                          boundary_mask,
                                          segment,
                                          segment_flat,
                                          target_steps,
)

from .config import (
                                          ArtifactError,
                                          Family,
                                          Limits,
                                          ModelEntry,
                                          Sampling,
                                          derive_seed,
                                          list_entries,
                                          load_family,
                                          load_instructions,
                                          load_model,
)
from .engines import ENGINES, Completion, EngineConfig, GenRequest, Signal, open_engine
from .grading import GRADERS, GradeItem, resolve_grader
from .stp import (
                                          SIGNALS,
                                          JobError,
                                          ProbeJob,
                                          RunSummary,
                                          UnitResult,
                                          job_from_dict,
                                          load_job,
                                          probe_units,
                                          resegment,
                                          run_job,
                                          run_units,
)
from .tokens import (
                                          KINDS,
                                          FormatError,
                                          ProbeFormat,
                                          Vocabulary,
                                          audit,
                                          build_vocabulary,
                                          classify_form,
                                          compile_format,
)

__all__ = [
    "ENGINES", "GRADERS", "KINDS", "SIGNALS", "SPAN_RULES",
    "ArtifactError", "Completion", "EngineConfig", "Family", "FormatError", "GenRequest",
    "GradeItem", "JobError", "Limits", "ModelEntry", "ProbeFormat", "ProbeJob", "RunSummary",
    "Sampling", "Signal", "UnitResult", "Vocabulary",
    "audit", "boundary_mask", "build_vocabulary", "classify_form", "compile_format",
    "derive_seed", "job_from_dict", "list_entries", "load_family", "load_instructions",
    "load_job", "load_model", "open_engine", "probe_units", "resegment", "resolve_grader",
    "run_job", "run_units", "segment", "segment_flat", "target_steps",
]
