"""Overthinking metrics (docs/rules.md): per-trajectory k*, OR, AD and their equal-weight aggregation.

(Named `overthinking`, not `metrics`, so the subpackage never shadows the
`otbench.analysis.metrics` function.)
"""

from otbench.analysis import core as _core  # noqa: F401  (JAX configured first)

from ._aggregate import (
                         Aggregate,
                         Layout,
                         LayoutNames,
                         aggregate,
                         build_layout,
                         segment_mean,
                         segment_pair_mad,
                         spearman,
)
from ._edge import (
                         MIN_SPEARMAN_CELLS,
                         ZERO_ACCURACY_MARK,
                         ZERO_ACCURACY_NOTE,
                         spearman_note,
                         zero_accuracy,
                         zero_accuracy_places,
)
from ._metrics import (
                         DEFAULT_BIN_EDGES,
                         METRICS,
                         SUMMARY_DISPLAY,
                         LocalChangeCounts,
                         MetricsResult,
                         Summary,
                         TrajectoryMetrics,
                         format_metrics,
                         local_change_counts,
                         metrics,
                         summarize,
                         trajectory_metrics,
)
from ._reason import accuracy_reason, set_accuracy_reason

__all__ = [
    "SUMMARY_DISPLAY",
    "DEFAULT_BIN_EDGES", "METRICS", "MIN_SPEARMAN_CELLS", "ZERO_ACCURACY_MARK", "ZERO_ACCURACY_NOTE",
    "Aggregate", "Layout", "LayoutNames", "LocalChangeCounts", "MetricsResult", "Summary",
    "TrajectoryMetrics",
    "accuracy_reason", "aggregate", "build_layout", "format_metrics", "local_change_counts", "metrics",
    "segment_mean", "segment_pair_mad", "spearman", "spearman_note", "set_accuracy_reason", "summarize", "trajectory_metrics",
    "zero_accuracy", "zero_accuracy_places",
]
