"""Exact oracle Pareto frontiers of DR, FB and DEE (docs/rules.md).

Decision units and their pruned actions (`_units`), exact budget arithmetic
(`_budgets`), per-cell frontiers and macro summaries (`_frontiers`, solved
by the NumPy DP `_host_dp`), and the bootstrap's replicate entry points
(`_replicates`, `_pipeline`), the frontier's exact area per replicate
(`_replicate_areas`, for the OTBench leaderboard's gap-area intervals), with their kernels: the min-plus DP as a JAX
`lax.scan` (`_dp`) and the compiled CPU kernels (`_cpu`, with numba).

The point frontiers need no JAX: importing this package loads it only when
a JAX-using name (`Pipeline`, `cell_infos`, `ReplicateFrontiers`,
`frontier_replicates`, `replicate_areas`, `point_rows`) is first used (PEP 562), and those modules import
`otbench.analysis.core` (which switches JAX to x64) before any JAX work.
Why: `otbench frontier` on a CPU spent more on starting JAX than on its DP.
"""

import importlib
from typing import TYPE_CHECKING, Any

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
from ._host_dp import state_bytes
from ._units import STRATEGIES

# JAX-using names -> their private module, imported on first use
_LAZY = {"Pipeline": "_pipeline", "cell_infos": "_pipeline",
         "ReplicateFrontiers": "_replicates", "frontier_replicates": "_replicates",
         "point_rows": "_replicate_areas", "replicate_areas": "_replicate_areas"}

__all__ = [
    "MACRO_WEIGHTING", "STRATEGIES",
    "Cell", "FrontierHierarchyError", "FrontierResult", "Pipeline", "ReplicateFrontiers",
    "StrategyFrontier",
    "budget_grid", "budgets", "cell_infos", "check_hierarchy", "frontier_replicates",
    "frontiers", "pareto_points", "point_rows", "query", "replicate_areas", "state_bytes",
    "strategies_iv", "summarize",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
        globals()[name] = value     # later lookups skip this hook
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


if TYPE_CHECKING:   # static tools see the names the hook provides
    from ._pipeline import Pipeline, cell_infos  # noqa: F401
    from ._replicate_areas import point_rows, replicate_areas  # noqa: F401
    from ._replicates import ReplicateFrontiers, frontier_replicates  # noqa: F401
