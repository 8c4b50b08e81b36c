"""The report (a leaf): HTML page, PNG figures, CSV and LaTeX tables of a measurement set."""

from otbench.analysis import core as _core  # noqa: F401  (JAX configured first)

from ._audit import audit_figure, write_audit
from ._inputs import ReportInputError
from ._write import ReportError, write_report

__all__ = ["ReportError", "ReportInputError", "audit_figure", "write_audit", "write_report"]
