"""Matched-horizon runs (docs/rules.md): arms, fixed-horizon stops, candidate-logit readouts, controls."""

from ._job import HorizonJob, horizon_job_from_dict, load_horizon_job
from ._run import HorizonSummary, run_horizon

__all__ = ["HorizonJob", "HorizonSummary", "horizon_job_from_dict", "load_horizon_job",
           "run_horizon"]
