"""Workflows: the one layer that joins the probe stage and the analysis, with the CLI alone above it.

A workflow takes what a command was given (a set, a method's name, θ, ...) and returns the
result document the command writes; it passes data, never closures, between the two stages.
The CLI parses arguments, calls one workflow and prints.

* `certify` -- `otbench online certify`: a method's (or the engine cap's) certificate.
* `run_online` -- `otbench online run`: a method run online, per trajectory.
* `certify_effort` -- `otbench effort --certify LEVEL`: each cell's budget run as the engine's cap.
* `plan_precision` -- `otbench plan --pilot SET`: the plan's predicted interval half-widths
  (`PrecisionPlan`), and with targets the cheapest design that meets them.
"""

from ._online import ENGINE_BUDGET, certify, certify_effort, run_online
from ._plan import PrecisionPlan, plan_precision

__all__ = ["ENGINE_BUDGET", "PrecisionPlan", "certify", "certify_effort", "plan_precision", "run_online"]
