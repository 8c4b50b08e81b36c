"""OTBench (docs/rules.md): question splits, the online walk, the JAX-backed evaluator and the leaderboard.

The methods themselves (their contract, `Method`, the registry and the
built-ins) live in `otbench.analysis.methods`, which imports no JAX; their
names are re-exported here, so ``otbench.analysis.bench.evaluate(ms,
"deer")`` and ``bench.ThinkBrake`` keep working.
"""

from otbench.analysis import core as _core  # noqa: F401  (JAX configured first)
from otbench.analysis.methods import (
                                      BUILTINS,
                                      METHODS,
                                      NO_SIGNAL,
                                      AnswerConsistency,
                                      BudgetForcing,
                                      BudgetMethod,
                                      Deer,
                                      DeerSTP,
                                      DynasorCoT,
                                      DynasorCoTSTP,
                                      ExitMethod,
                                      HashedText,
                                      ImportedStops,
                                      Method,
                                      MethodError,
                                      OnlineView,
                                      PredictiveScheduling,
                                      RoutingMethod,
                                      SignalCost,
                                      StoredFeatures,
                                      ThinkBrake,
                                      ThinkBrakeOneContext,
                                      ThinkSwitcher,
                                      UnitTable,
                                      load_method,
                                      read_question_features,
                                      read_stops,
                                      resolve,
                                      ridge_fit,
                                      signal_tokens,
                                      units_of,
)

from ._evaluate import (
                       BenchResult,
                       compare,
                       compare_json,
                       evaluate,
                       format_compare,
                       format_result,
                       methods_for,
)
from ._leaderboard import (
                       MIN_RANK_QUESTIONS,
                       RANKED_BY,
                       Leaderboard,
                       leaderboard,
                       leaderboard_block,
                       leaderboard_key,
                       small_split_warning,
)
from ._positions import offline_point, stop_positions, sweep_stops
from ._splits import (
                       DEFAULT_RATIOS,
                       DEFAULT_SEED,
                       apply_split_file,
                       assign_splits,
                       question_splits,
                       ratios_iv,
                       read_split_file,
                       split_questions,
                       write_split_file,
)

__all__ = [
    "BUILTINS", "DEFAULT_RATIOS", "DEFAULT_SEED", "METHODS",
    "MIN_RANK_QUESTIONS", "NO_SIGNAL", "RANKED_BY", "AnswerConsistency", "BenchResult",
    "BudgetForcing", "BudgetMethod", "Deer", "DeerSTP", "DynasorCoT", "DynasorCoTSTP", "ExitMethod", "HashedText",
    "ImportedStops", "Leaderboard", "Method", "MethodError", "OnlineView",
    "PredictiveScheduling", "RoutingMethod", "SignalCost", "StoredFeatures", "ThinkBrake",
    "ThinkBrakeOneContext", "ThinkSwitcher", "UnitTable",
    "apply_split_file", "assign_splits", "compare", "compare_json", "evaluate",
    "format_compare", "format_result", "leaderboard", "leaderboard_block", "leaderboard_key", "load_method", "methods_for",
    "offline_point", "question_splits", "ratios_iv",
    "read_question_features", "read_split_file", "read_stops", "resolve", "ridge_fit",
    "signal_tokens", "small_split_warning", "split_questions", "stop_positions", "sweep_stops", "units_of",
    "write_split_file",
]
