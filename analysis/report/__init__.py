"""The report (a leaf): HTML page, PNG figures, CSV and LaTeX tables of a measurement set."""

from otbench.analysis import core as _core  # noqa: F401  (JAX configured first)

from ._audit import audit_figure, write_audit
from ._inputs import ReportInputError
from ._view import DEFAULT_LIMIT, view_html, write_view
from ._view_data import ViewError
from ._write import ReportError, write_report

__all__ = ["DEFAULT_LIMIT", "ReportError", "ReportInputError", "ViewError", "audit_figure", "view_html",
           "write_audit", "write_report", "write_view"]
