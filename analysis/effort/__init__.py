"""Effort levels from the frontier (docs/rules.md): per cell, the smallest thinking-token cap whose
paired two-stage bootstrap interval stays within δ of full thinking, and writers for engines."""

from otbench.analysis import core as _core  # noqa: F401  (JAX configured first)

from ._cells import CellArrays, Scan, scan
from ._effort import REPLICATES, SCHEMA, SEED, CellEffort, EffortMap, LevelBudget, effort_map
from ._formats import FORMATS, UNLIMITED, VLLM_SOURCE, csv_rows, format_effort, render, vllm_budgets
from ._levels import DEFAULT_LEVELS, delta_fraction, levels_iv, parse_levels

__all__ = [
    "DEFAULT_LEVELS", "FORMATS", "REPLICATES", "SCHEMA", "SEED", "UNLIMITED", "VLLM_SOURCE",
    "CellArrays", "CellEffort", "EffortMap", "LevelBudget", "Scan",
    "csv_rows", "delta_fraction", "effort_map", "format_effort", "levels_iv", "parse_levels",
    "render", "scan", "vllm_budgets",
]
