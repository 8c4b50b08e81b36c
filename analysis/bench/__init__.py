"""OTBench (SPEC §6): question splits, the method interface, baselines, the online walk, the evaluator."""

from otbench.analysis import core as _core  # noqa: F401  (JAX configured first)

from ._baselines import PredictiveScheduling, ThinkBrake, ThinkSwitcher
from ._cost import NO_SIGNAL, SignalCost, signal_tokens
from ._evaluate import (
                       BenchResult,
                       compare,
                       compare_json,
                       evaluate,
                       format_compare,
                       format_result,
)
from ._features import (
                       HashedText,
                       StoredFeatures,
                       read_question_features,
                       ridge_fit,
                       units_of,
)
from ._field import AnswerConsistency, BudgetForcing, Deer, DynasorCoT
from ._leaderboard import (
                       MIN_RANK_QUESTIONS,
                       RANKED_BY,
                       Leaderboard,
                       leaderboard,
                       leaderboard_key,
                       small_split_warning,
)
from ._methods import (
                       BUILTINS,
                       BudgetMethod,
                       ExitMethod,
                       MethodError,
                       OnlineView,
                       RoutingMethod,
                       UnitTable,
                       load_method,
)
from ._positions import offline_point, stop_positions
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
from ._stops import ImportedStops, read_stops

__all__ = [
    "BUILTINS", "DEFAULT_RATIOS", "DEFAULT_SEED",
    "MIN_RANK_QUESTIONS", "NO_SIGNAL", "RANKED_BY", "AnswerConsistency", "BenchResult",
    "BudgetForcing", "BudgetMethod", "Deer", "DynasorCoT", "ExitMethod", "HashedText",
    "ImportedStops", "Leaderboard", "MethodError", "OnlineView",
    "PredictiveScheduling", "RoutingMethod", "SignalCost", "StoredFeatures", "ThinkBrake",
    "ThinkSwitcher", "UnitTable",
    "apply_split_file", "assign_splits", "compare", "compare_json", "evaluate",
    "format_compare", "format_result", "leaderboard", "leaderboard_key", "load_method", "offline_point", "question_splits", "ratios_iv",
    "read_question_features", "read_split_file", "read_stops", "ridge_fit", "signal_tokens",
    "small_split_warning", "split_questions", "stop_positions", "units_of",
    "write_split_file",
]
