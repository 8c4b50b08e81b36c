"""otbench.analysis: the measurement set and the JAX analysis core (no torch here)."""

from ._aggregate import (Layout, LayoutNames, aggregate, build_layout, segment_mean,
                         segment_pair_mad, spearman)
from ._bootstrap import (BOOT_METRICS, BootstrapResult, FrontierBootstrap, bootstrap,
                         format_bootstrap, percentile)
from ._bootstrap_checkpoint import CheckpointError
from ._bootstrap_sweep import sweep, sweep_tables
from ._build import MeasurementSetError, from_dense, from_ragged, ragged
from ._frontier import (Cell, FrontierHierarchyError, FrontierResult, StrategyFrontier,
                        check_hierarchy, frontiers)
from ._frontier_budgets import budget_grid
from ._frontier_replicates import ReplicateFrontiers, frontier_replicates
from ._horizon import HorizonAnalysisError, analyze as horizon_analyze
from ._horizon_data import (HorizonDataError, HorizonRun, load_run as load_horizon_run,
                            write_run as write_horizon_run)
from ._horizon_inference import (McNemar, SignFlip, log2_trapezoid, mcnemar, mcnemar_counts,
                                 sign_flip, simultaneous_band)
from ._io import content_hash, load, load_table, read_manifest, save
from ._metrics import (DEFAULT_BIN_EDGES, METRICS, LocalChangeCounts, Summary,
                       TrajectoryMetrics, format_metrics, local_change_counts, metrics,
                       summarize, trajectory_metrics)
from ._methods import (BUILTINS, BudgetMethod, ExitMethod, MethodError, OnlineView,
                       RoutingMethod, UnitTable, load_method)
from ._methods_baselines import PredictiveScheduling, ThinkBrake, ThinkSwitcher
from ._methods_features import HashedText, StoredFeatures, read_question_features, ridge_fit, units_of
from ._otbench import BenchResult, compare as bench_compare, evaluate as bench_evaluate
from ._report import ReportError, write_report
from ._simulate import simulate
from ._splits import (DEFAULT_RATIOS, DEFAULT_SEED, apply_split_file, assign_splits,
                      question_splits, read_split_file, split_questions, write_split_file)
from ._thinning import (ProbeThinning, TrajectoryThinning, format_thinning, probe_thinning,
                        thinning, trajectory_thinning)
from ._types import SCHEMA, SPLITS, MeasurementSet

__all__ = [
    "DEFAULT_BIN_EDGES", "METRICS", "SCHEMA", "SPLITS",
    "Layout", "LayoutNames", "LocalChangeCounts", "MeasurementSet", "MeasurementSetError",
    "Summary", "TrajectoryMetrics", "Cell", "FrontierHierarchyError", "FrontierResult",
    "StrategyFrontier", "ReplicateFrontiers", "budget_grid", "check_hierarchy",
    "frontier_replicates", "frontiers",
    "BUILTINS", "BenchResult", "BudgetMethod", "DEFAULT_RATIOS", "DEFAULT_SEED", "ExitMethod",
    "HashedText", "MethodError", "OnlineView", "PredictiveScheduling", "RoutingMethod",
    "StoredFeatures", "ThinkBrake", "ThinkSwitcher", "UnitTable", "apply_split_file",
    "assign_splits", "bench_compare", "bench_evaluate", "load_method", "question_splits",
    "read_question_features", "read_split_file", "ridge_fit", "split_questions", "units_of",
    "write_split_file", "ReportError", "write_report",
    "BOOT_METRICS", "BootstrapResult", "CheckpointError", "FrontierBootstrap", "ProbeThinning",
    "TrajectoryThinning", "bootstrap", "format_bootstrap", "format_thinning", "percentile",
    "probe_thinning", "sweep", "sweep_tables", "thinning", "trajectory_thinning",
    "HorizonAnalysisError", "HorizonDataError", "HorizonRun", "McNemar", "SignFlip",
    "horizon_analyze", "load_horizon_run", "log2_trapezoid", "mcnemar", "mcnemar_counts",
    "sign_flip", "simultaneous_band", "write_horizon_run",
    "aggregate", "build_layout", "content_hash", "format_metrics", "from_dense",
    "from_ragged", "load", "load_table", "local_change_counts", "metrics", "ragged",
    "read_manifest", "save", "segment_mean", "segment_pair_mad", "simulate", "spearman",
    "summarize", "trajectory_metrics",
]
