"""Probe stage: trajectories, segmentation and answer probes (heavy deps imported lazily).

Importing this package never imports torch, transformers or vLLM; engines
load their libraries when one is opened (`open_engine`).
"""

from ._engine import ENGINES, Completion, EngineConfig, GenRequest, Signal, open_engine
from ._execute import RunSummary, run_job
from ._family import (ArtifactError, Family, Limits, ModelEntry, Sampling, list_entries,
                      load_family, load_instructions, load_model)
from ._grader import GRADERS, GradeItem, resolve_grader
from ._job import JobError, ProbeJob, job_from_dict, load_job
from ._probe_ids import FormatError, ProbeFormat, compile_format
from ._resegment import resegment
from ._run import SIGNALS, UnitResult, probe_units, run_units
from ._seeds import derive_seed
from ._segment import SPAN_RULES, boundary_mask, segment, segment_flat, target_steps
from ._vocab import KINDS, Vocabulary, audit, build_vocabulary, classify_form

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
