"""Exact oracle Pareto frontiers of DR, FB and DEE (SPEC §5).

Decision units and their pruned actions (`_units`), the min-plus DP as a
`lax.scan` (`_dp`), exact budget arithmetic (`_budgets`), per-cell frontiers
and macro summaries (`_frontiers`), the replicate entry points the
bootstrap uses (`_replicates`, `_pipeline`), and the pipeline's compiled CPU
kernels (`_cpu`: units, DP and budget queries per replicate, with numba).
"""

from otbench.analysis import core as _core  # noqa: F401  (JAX configured first)

from ._budgets import MACRO_WEIGHTING, budget_grid, budgets, pareto_points, query, summarize
from ._frontiers import (
                         Cell,
                         FrontierHierarchyError,
                         FrontierResult,
                         StrategyFrontier,
                         check_hierarchy,
                         frontiers,
                         strategies_iv,
)
from ._dp import state_bytes
from ._pipeline import Pipeline, cell_infos
from ._replicates import ReplicateFrontiers, frontier_replicates
from ._units import STRATEGIES

__all__ = [
    "MACRO_WEIGHTING", "STRATEGIES",
    "Cell", "FrontierHierarchyError", "FrontierResult", "Pipeline", "ReplicateFrontiers",
    "StrategyFrontier",
    "budget_grid", "budgets", "cell_infos", "check_hierarchy", "frontier_replicates",
    "frontiers", "pareto_points", "query", "state_bytes", "strategies_iv", "summarize",
]
