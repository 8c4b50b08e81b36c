"""OTBench (SPEC §6): question splits, the method interface, baselines, the online walk, the evaluator."""

from otbench.analysis import core as _core  # noqa: F401  (JAX configured first)

from ._baselines import PredictiveScheduling, ThinkBrake, ThinkSwitcher
from ._cost import NO_SIGNAL, SignalCost, signal_tokens
from ._field import AnswerConsistency, BudgetForcing, Deer, DynasorCoT
from ._stops import ImportedStops, read_stops
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
    "NO_SIGNAL", "AnswerConsistency", "BudgetForcing", "Deer", "DynasorCoT", "SignalCost",
    "ImportedStops", "read_stops", "signal_tokens",
    "BUILTINS", "DEFAULT_RATIOS", "DEFAULT_SEED",
    "MIN_RANK_QUESTIONS", "RANKED_BY", "BenchResult", "BudgetMethod", "Leaderboard", "ExitMethod", "HashedText", "MethodError", "OnlineView",
    "PredictiveScheduling", "RoutingMethod", "StoredFeatures", "ThinkBrake", "ThinkSwitcher",
    "UnitTable",
    "apply_split_file", "assign_splits", "compare", "compare_json", "evaluate",
    "format_compare", "format_result", "leaderboard", "leaderboard_key", "load_method", "question_splits", "ratios_iv",
    "read_question_features", "read_split_file", "ridge_fit", "small_split_warning", "split_questions", "units_of",
    "write_split_file",
]
