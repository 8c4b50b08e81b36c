"""Uncertainty and sensitivity (docs/rules.md): two-stage bootstrap, exact probe thinning, trajectory thinning, sweep."""

from otbench.analysis import core as _core  # noqa: F401  (JAX configured first)

from ._bootstrap import PERCENTILES, REPLICATES, SEED, bootstrap, chain, default_batch, provenance
from ._bootstrap_result import BootstrapResult, FrontierBootstrap, format_bootstrap
from ._checkpoint import CheckpointError
from ._precision import (
                         FRONTIER_STATS,
                         LINEAR_STATS,
                         PRECISION_REPLICATES,
                         Components,
                         PrecisionError,
                         PrecisionPrediction,
                         frontier_area,
                         predict_precision,
                         thin_probes,
)
from ._replicates import BOOT_METRICS, percentile
from ._weights import WEIGHT_BATCH, replicate_weights
from ._sweep import sweep, sweep_csv, sweep_header, sweep_tables, sweep_unit
from ._thinning import (
                         DRAWS,
                         PROBES,
                         THINNING_METRICS,
                         TRAJECTORIES,
                         ProbeThinning,
                         TrajectoryThinning,
                         default_levels,
                         format_thinning,
                         max_trajectories,
                         probe_thinning,
                         thinning,
                         trajectory_thinning,
)

__all__ = [
    "BOOT_METRICS", "DRAWS", "FRONTIER_STATS", "LINEAR_STATS", "PRECISION_REPLICATES", "PERCENTILES", "PROBES", "REPLICATES", "SEED", "THINNING_METRICS",
    "TRAJECTORIES", "WEIGHT_BATCH",
    "BootstrapResult", "CheckpointError", "Components", "PrecisionError", "PrecisionPrediction", "FrontierBootstrap", "ProbeThinning",
    "TrajectoryThinning",
    "bootstrap", "chain", "default_batch", "default_levels", "format_bootstrap", "format_thinning",
    "max_trajectories", "percentile", "replicate_weights", "predict_precision", "probe_thinning", "frontier_area", "thin_probes",
    "provenance", "sweep", "sweep_csv", "sweep_header", "sweep_tables", "sweep_unit", "thinning", "trajectory_thinning",
]
