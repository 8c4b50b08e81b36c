"""Planning a probe job before running it: tokens by phase and device-hours, from a pilot
set or stated priors and a device model. Imports no engine, torch or JAX; starts nothing."""

from ._advice import hours_text, plan_advice, unpinned_sources
from ._lengths import GROUP_THINKING, PRIORS, Lengths, group_prior, pilot_lengths
from ._calibrate import Calibration, calibrate, calibration_text, device_key
from ._plan import Plan, Work, plan_job, plan_text, workload
from ._precision import (
                          CANDIDATE_P,
                          CANDIDATE_R,
                          TARGET_STATS,
                          Candidate,
                          MoreQuestions,
                          candidate_hours,
                          candidates,
                          more_questions,
                          parse_targets,
                          pilot_for_job,
                          precision_text,
                          recommend,
)
from ._throughput import (
                          ARCHITECTURES,
                          DEVICES,
                          Architecture,
                          Device,
                          PlanError,
                          Throughput,
                          architecture,
                          read_architecture,
)

__all__ = ["ARCHITECTURES", "CANDIDATE_P", "CANDIDATE_R", "Calibration", "DEVICES", "calibrate", "calibration_text", "device_key", "MoreQuestions", "more_questions", "GROUP_THINKING", "PRIORS", "TARGET_STATS", "Candidate",
           "candidate_hours", "candidates", "parse_targets", "pilot_for_job", "precision_text", "recommend", "Architecture", "Device", "Lengths", "Plan", "PlanError",
           "Throughput", "Work", "architecture", "group_prior", "hours_text", "pilot_lengths", "plan_advice", "plan_job", "plan_text",
           "read_architecture", "unpinned_sources", "workload"]
