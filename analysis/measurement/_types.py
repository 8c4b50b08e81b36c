"""The in-memory measurement set: dense padded arrays plus name tables (docs/rules.md)."""

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

from ._padding import PaddedSignals
from ._rows import SPLITS  # noqa: F401  (the set's split names, where the set's type is read)
from ._tidy import Tidy

SCHEMA = "otbench.measurement_set/1"


@dataclasses.dataclass(frozen=True, eq=False)
class MeasurementSet(Tidy):
    """A loaded STP measurement set.

    Rows are trajectories, sorted by (cell, question, trajectory) so the
    order never depends on the order of the input files. Cells are
    (model, group) pairs in lexicographic order of the names; questions are
    (group, question id) pairs -- a question is shared by every model, which
    the paired bootstrap relies on.

    Padding rule (docs/rules.md): `L`, `C` and every signal are padded to the right
    by repeating the trajectory's last valid value, so `L[t, k] == L[t, n[t]]`
    for `k > n[t]`. With this padding "the latest position whose `L` is under
    a cap" and per-row maxima are correct without masks: a padded position
    never costs more tokens, and never shows a new accuracy level, than the
    endpoint it copies. Kernels that need the earliest maximizer or position
    counts still use `n`.

    Attributes:
      L: int32[traj, pos] retained thinking tokens at each position; `L[:, 0] = 0`.
      C: int32[traj, pos] correct probes at each position, `0..probes`.
      n: int32[traj] number of steps; position `k` is valid for `k <= n`.
      probes: int32[traj] answer probes per position `P`.
      y: int8[traj] correctness of the trajectory's original answer (0/1).
      finished: bool[traj] thinking ended naturally (False: hit the limit).
      trajectory: int32[traj] the trajectory index as recorded.
      cell: int32[traj] index into `cell_model`/`cell_group`.
      question: int32[traj] index into the question tables.
      split: int8[traj] index into `SPLITS`, -1 when unassigned.
      signals: name -> float64[traj, pos], per-position signals (same padding).
      models, groups: name tables (sorted).
      cell_model, cell_group: int32[cell] model / group index of each cell.
      question_group: int32[question] group index of each question.
      question_id, question_dataset, question_text: per-question tables.
      synthetic: True when the set came from a simulator.
      provenance: free-form JSON-serializable provenance from the writer.

    `to_arrow()` / `to_pandas()` / `to_polars()` give the stored table: one
    row per trajectory with the columns of the Parquet files (`L`, `C` and
    `signal.<name>` as lists of the `n + 1` valid positions, no padding).
    """

    L: np.ndarray
    C: np.ndarray
    n: np.ndarray
    probes: np.ndarray
    y: np.ndarray
    finished: np.ndarray
    trajectory: np.ndarray
    cell: np.ndarray
    question: np.ndarray
    split: np.ndarray
    signals: Mapping[str, np.ndarray]
    models: tuple[str, ...]
    groups: tuple[str, ...]
    cell_model: np.ndarray
    cell_group: np.ndarray
    question_group: np.ndarray
    question_id: tuple[str, ...]
    question_dataset: tuple[str, ...]
    question_text: tuple[str | None, ...]
    synthetic: bool = False
    provenance: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def _tidy_columns(self) -> dict[str, Any]:
        from ._rows import cell_table
        table = cell_table(self, np.arange(self.num_trajectories))
        return {name: table.column(name) for name in table.column_names}

    def __post_init__(self):
        for name in ("L", "C", "n", "probes", "y", "finished", "trajectory",
                     "cell", "question", "split", "cell_model", "cell_group",
                     "question_group"):
            getattr(self, name).setflags(write=False)
        if not isinstance(self.signals, PaddedSignals):     # it pads read-only on first use
            for v in self.signals.values():
                v.setflags(write=False)

    # -- sizes -------------------------------------------------------------
    @property
    def num_trajectories(self) -> int:
        return int(self.L.shape[0])

    @property
    def num_positions(self) -> int:
        """K = max n + 1 (the padded width)."""
        return int(self.L.shape[1])

    @property
    def num_cells(self) -> int:
        return int(self.cell_model.shape[0])

    @property
    def num_questions(self) -> int:
        return len(self.question_id)

    def cell_name(self, c: int) -> tuple[str, str]:
        """(model, group) of cell `c`."""
        return self.models[self.cell_model[c]], self.groups[self.cell_group[c]]

    def valid(self) -> np.ndarray:
        """bool[traj, pos]: position k is measured (k <= n)."""
        return np.arange(self.num_positions)[None, :] <= self.n[:, None]

    def cell_rows(self, c: int) -> np.ndarray:
        """int64[rows] the rows of cell `c` (contiguous, in sorted order)."""
        return np.flatnonzero(self.cell == c)

    def take(self, rows: np.ndarray) -> "MeasurementSet":
        """A new set with the given rows (sorted), re-padded to their max n.

        Name tables are kept whole, so indices stay comparable with `self`.
        """
        rows = np.sort(np.asarray(rows, dtype=np.int64))
        k = int(self.n[rows].max()) + 1 if rows.size else 1
        return dataclasses.replace(
            self,
            L=np.ascontiguousarray(self.L[rows, :k]),
            C=np.ascontiguousarray(self.C[rows, :k]),
            n=self.n[rows], probes=self.probes[rows], y=self.y[rows],
            finished=self.finished[rows], trajectory=self.trajectory[rows],
            cell=self.cell[rows], question=self.question[rows],
            split=self.split[rows],
            signals={s: np.ascontiguousarray(v[rows, :k])
                     for s, v in self.signals.items()},
        )

    def summary(self) -> dict[str, Any]:
        """Counts for printing and for the manifest."""
        return {
            "trajectories": self.num_trajectories,
            "questions": int(np.unique(self.question).size),
            "cells": int(np.unique(self.cell).size),
            "models": len(self.models),
            "groups": len(self.groups),
            "max_steps": int(self.n.max()) if self.n.size else 0,
            "thinking_tokens": int(self.L[:, -1].astype(np.int64).sum()),
            "signals": sorted(self.signals),
        }
