"""Step-wise truncation probing (docs/rules.md): the job, the probe loop, the runner, its journal, Ray, output."""

from ._cost import COST_FIELDS, cost_record, cost_rows, cost_text
from ._field_probes import CONTEXT_IDS, FIELD_PROBES, peer_request, suffix_ids
from ._job import (
           DATA_SOURCES,
           JobError,
           ProbeJob,
           job_from_dict,
           load_job,
           load_toml_job,
)
from ._journal import Journal, JournalError
from ._kv import KVLedger, steady_batch
from ._loop import SIGNALS, UnitResult, probe_units, run_units
from ._oneline import MODEL_ARGS, check_job_path, job_toml, oneline_job, oneline_table, write_job_file
from ._ray import RayMissingError
from ._resegment import resegment
from ._run_checks import check_run_arguments
from ._runner import RunSummary, run_job
from ._setup import resolve_engine_config
from ._job_keys import HORIZON_KEYS, HORIZON_RULES, STP_KEYS, STP_RULES, Key
from ._job_keys import describe as describe_job_keys
from ._toml_rules import check_tables

__all__ = ["KVLedger", "steady_batch", "check_run_arguments", "CONTEXT_IDS", "COST_FIELDS", "DATA_SOURCES", "FIELD_PROBES", "peer_request", "suffix_ids", "HORIZON_KEYS", "HORIZON_RULES", "MODEL_ARGS", "SIGNALS",
           "STP_KEYS", "STP_RULES", "Key", "describe_job_keys",
           "Journal", "JournalError", "JobError", "ProbeJob", "RayMissingError", "RunSummary",
           "UnitResult", "check_job_path", "check_tables", "cost_record", "cost_rows", "cost_text", "job_from_dict",
           "job_toml", "load_job", "load_toml_job", "oneline_job", "oneline_table", "probe_units",
           "resegment", "resolve_engine_config", "run_job", "write_job_file",
           "run_units"]
