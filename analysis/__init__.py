"""otbench.analysis: the measurement set and the JAX analysis core (no torch, no probe).

The pipeline's analysis half, one subpackage per stage:

* `measurement`  the contract (types, validation, Parquet/JSONL, simulator, segmentation); no JAX
* `core`         JAX configuration, shape types, counter-based random streams
* `overthinking` per-trajectory k*, OR, AD and equal-weight aggregation (docs/rules.md)
* `frontier`     exact oracle frontiers of DR, FB, DEE (docs/rules.md)
* `resampling`   bootstrap, probe and trajectory thinning, sweep (docs/rules.md)
* `methods`      stopping methods, no JAX: the contract, `Method`, the registry, built-ins (docs/rules.md)
* `bench`        OTBench: splits, the walk, the evaluator, the leaderboard (docs/rules.md)
* `horizon`      matched-horizon analysis (docs/rules.md)
* `report`       HTML report, figures, tables (a leaf)

Every public name below is loaded on first use (PEP 562), so importing
`otbench.analysis` (or its `measurement` subpackage) does not import JAX;
the first JAX-using name switches JAX to x64 (see `core`).
"""

import importlib
from typing import TYPE_CHECKING, Any

# public name -> (subpackage, name there)
_EXPORTS: dict[str, tuple[str, str]] = {}


def _export(sub: str, *names: str, **renamed: str) -> None:
    for n in names:
        _EXPORTS[n] = (sub, n)
    for public, inner in renamed.items():
        _EXPORTS[public] = (sub, inner)


_export("measurement", "SCHEMA", "SPLITS", "MeasurementSet", "MeasurementSetError",
        "HorizonDataError", "HorizonRun", "content_hash", "from_dense", "from_ragged", "load",
        "load_table", "ragged", "read_manifest", "save", "simulate", "export_jsonl", "Tidy",
        "import_jsonl", load_horizon_run="load_run", write_horizon_run="write_run")
_export("overthinking", "DEFAULT_BIN_EDGES", "METRICS", "Layout", "LayoutNames",
        "LocalChangeCounts", "MetricsResult", "Summary", "TrajectoryMetrics", "aggregate", "build_layout",
        "format_metrics", "local_change_counts", "metrics", "segment_mean", "segment_pair_mad",
        "spearman", "summarize", "trajectory_metrics")
_export("frontier", "Cell", "FrontierHierarchyError", "FrontierResult", "StrategyFrontier",
        "ReplicateFrontiers", "budget_grid", "check_hierarchy", "frontier_replicates",
        "frontiers")
_export("resampling", "BOOT_METRICS", "BootstrapResult", "CheckpointError", "FrontierBootstrap",
        "ProbeThinning", "TrajectoryThinning", "bootstrap", "format_bootstrap",
        "format_thinning", "percentile", "probe_thinning", "sweep", "sweep_tables", "thinning",
        "trajectory_thinning")
_export("bench", "BUILTINS", "BenchResult", "BudgetMethod", "DEFAULT_RATIOS", "DEFAULT_SEED",
        "ExitMethod", "HashedText", "MethodError", "OnlineView", "PredictiveScheduling",
        "RoutingMethod", "StoredFeatures", "ThinkBrake", "ThinkBrakeOneContext", "ThinkSwitcher", "UnitTable",
        "apply_split_file", "assign_splits", "load_method", "question_splits",
        "read_question_features", "read_split_file", "ridge_fit", "split_questions", "units_of",
        "write_split_file", "Leaderboard", "MIN_RANK_QUESTIONS", "leaderboard", "leaderboard_key",
        "small_split_warning", bench_compare="compare", bench_evaluate="evaluate")
_export("methods", "METHODS", "Method", resolve_method="resolve")
_export("horizon", "HorizonAnalysisError", "McNemar", "SignFlip", "log2_trapezoid", "mcnemar",
        "mcnemar_counts", "sign_flip", "simultaneous_band", horizon_analyze="analyze")
_export("report", "ReportError", "ViewError", "write_report", "write_view")

SUBPACKAGES = ("measurement", "core", "overthinking", "frontier", "resampling", "methods",
               "bench", "horizon", "report", "effort")

__all__ = sorted(_EXPORTS)


def describe_exports() -> list[tuple[str, str, str]]:
    """(public name, defining subpackage, its name there) of every name of `__all__`, for the
    reference pages (each facade name links to where it is defined)."""
    return [(n, f"{__name__}.{_EXPORTS[n][0]}", _EXPORTS[n][1]) for n in __all__]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        sub, inner = _EXPORTS[name]
        value = getattr(importlib.import_module(f"{__name__}.{sub}"), inner)
        globals()[name] = value     # later lookups skip this hook
        return value
    if name in SUBPACKAGES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS) | set(SUBPACKAGES))


if TYPE_CHECKING:   # static tools see the names the hook provides
    from .bench import *  # noqa: F401,F403
    from .frontier import *  # noqa: F401,F403
    from .horizon import *  # noqa: F401,F403
    from .measurement import *  # noqa: F401,F403
    from .methods import Method, METHODS  # noqa: F401
    from .methods import resolve as resolve_method  # noqa: F401
    from .overthinking import *  # noqa: F401,F403
    from .report import *  # noqa: F401,F403
    from .resampling import *  # noqa: F401,F403
