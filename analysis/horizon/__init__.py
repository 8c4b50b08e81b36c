"""Matched-horizon analysis (docs/rules.md): calibration, paired contrasts, strata, scores, controls, tables.

The run's on-disk form (`HorizonRun`, `load_run`) is part of the measurement
contract (`otbench.analysis.measurement`), since the probe writes it.
"""

from otbench.analysis import core as _core  # noqa: F401  (JAX configured first)

from ._analysis import HorizonAnalysisError, analyze
from ._audit import audit_line, audit_replies, bounds_table, censoring_table
from ._inference import (
                         McNemar,
                         SignFlip,
                         log2_trapezoid,
                         mcnemar,
                         mcnemar_counts,
                         sign_flip,
                         simultaneous_band,
)
from ._tables import (
                         DASH,
                         Table,
                         agreement_table,
                         calibration_table,
                         contrast_table,
                         controls_table,
                         diagonal_table,
                         format_text,
                         length_table,
                         matched_table,
                         scores_table,
                         sensitivity_table,
                         strata_table,
)

__all__ = [
    "DASH", "HorizonAnalysisError", "McNemar", "SignFlip", "Table",
    "agreement_table", "analyze", "audit_line", "audit_replies", "bounds_table", "censoring_table", "calibration_table", "contrast_table", "controls_table",
    "diagonal_table", "format_text", "length_table", "log2_trapezoid", "matched_table", "mcnemar", "mcnemar_counts",
    "scores_table", "sensitivity_table", "sign_flip", "simultaneous_band", "strata_table",
]
