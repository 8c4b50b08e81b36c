"""Step-wise truncation probing (SPEC §3): the job, the probe loop, the runner, its journal, Ray, output."""

from ._job import (
           DATA_SOURCES,
           JobError,
           ProbeJob,
           job_from_dict,
           load_job,
           load_toml_job,
)
from ._journal import Journal, JournalError
from ._oneline import MODEL_ARGS, job_toml, oneline_job, oneline_table, write_job_file
from ._loop import SIGNALS, UnitResult, probe_units, run_units
from ._ray import RayMissingError
from ._resegment import resegment
from ._runner import RunSummary, run_job
from ._setup import resolve_engine_config
from ._toml_rules import HORIZON_RULES, STP_RULES, check_tables

__all__ = ["MODEL_ARGS", "job_toml", "oneline_job", "oneline_table", "write_job_file", "DATA_SOURCES", "HORIZON_RULES", "SIGNALS", "STP_RULES", "Journal", "JournalError", "JobError", "ProbeJob",
           "RayMissingError", "RunSummary", "UnitResult", "job_from_dict", "load_job",
           "check_tables", "load_toml_job", "probe_units", "resegment", "resolve_engine_config", "run_job",
           "run_units"]
