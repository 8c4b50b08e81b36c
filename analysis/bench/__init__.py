"""OTBench (SPEC §6): question splits, the method interface, baselines, the online walk, the evaluator."""

from otbench.analysis import core as _core  # noqa: F401  (JAX configured first)

from ._baselines import PredictiveScheduling, ThinkBrake, ThinkSwitcher
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
    "BUILTINS", "DEFAULT_RATIOS", "DEFAULT_SEED",
    "BenchResult", "BudgetMethod", "ExitMethod", "HashedText", "MethodError", "OnlineView",
    "PredictiveScheduling", "RoutingMethod", "StoredFeatures", "ThinkBrake", "ThinkSwitcher",
    "UnitTable",
    "apply_split_file", "assign_splits", "compare", "compare_json", "evaluate",
    "format_compare", "format_result", "load_method", "question_splits", "ratios_iv",
    "read_question_features", "read_split_file", "ridge_fit", "split_questions", "units_of",
    "write_split_file",
]
