"""The in-memory measurement set: dense padded arrays plus name tables (docs/rules.md)."""

import dataclasses
import threading
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from ._tidy import Tidy

SCHEMA = "otbench.measurement_set/1"
SPLITS = ("train", "validation", "test")
"""Split names; `MeasurementSet.split` stores their index, -1 = unassigned."""


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
        from ._io import cell_table  # _io builds on this module
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


def pad_ragged(values: np.ndarray, offsets: np.ndarray, width: int,
               dtype, order: np.ndarray | None = None) -> np.ndarray:
    """Dense `[rows, width]` from flat ragged values, repeating each row's last value.

    Args:
      values: flat values of all rows, concatenated.
      offsets: int64[rows + 1] row start offsets into `values`; every row
        must be non-empty.
      width: padded width (>= the longest row).
      order: optional int[rows] permutation: output row `i` is input row
        `order[i]` (the same as indexing the result, without a second dense copy).
    """
    offsets = np.asarray(offsets, dtype=np.int64)
    lengths = np.diff(offsets)
    starts = offsets[:-1]
    if order is not None:
        lengths, starts = lengths[order], starts[order]
    rows = lengths.shape[0]
    if rows == 0:
        return np.zeros((0, width), dtype=dtype)
    # Each cell reads value `min(k, length - 1)` of its row (docs/rules.md: padding repeats
    # the last), gathered a block of rows at a time: the index is a block's size, never
    # the set's. Every page a command touches first costs a fault, and faults were
    # most of this function's time with whole-set index arrays and masks.
    values = np.asarray(values).astype(dtype, copy=False)
    out = np.empty((rows, width), dtype=dtype)
    cols = np.arange(width, dtype=np.int64)
    step = max(1, PAD_BLOCK // max(width, 1))
    for r0 in range(0, rows, step):
        r1 = min(rows, r0 + step)
        idx = np.minimum(cols[None, :], (lengths[r0:r1] - 1)[:, None])
        idx += starts[r0:r1, None]
        np.take(values, idx, out=out[r0:r1], mode="clip")   # in range: rows are non-empty
    return out


PAD_BLOCK = 1 << 18
"""Cells gathered per block by `pad_ragged` (2 MiB of int64 index)."""


class PaddedSignals(Mapping):
    """The signals of a loaded set: name -> float64[traj, pos], padded on first access.

    A padded signal is the set's largest array (8 bytes per padded cell) and
    most commands never read one (`otbench frontier` reads none): padding
    every signal up front was a tenth of such a command's time, and its memory.
    `measured` gives a signal's values without padding (for the content hash).
    """

    def __init__(self, ragged: Mapping[str, tuple[np.ndarray, np.ndarray]], width: int,
                 order: np.ndarray):
        self._ragged = dict(ragged)          # name -> (flat float64, int64 offsets), input rows
        self._width, self._order = width, order
        self._dense: dict[str, np.ndarray] = {}
        self._lock = threading.Lock()

    def __getitem__(self, name: str) -> np.ndarray:
        with self._lock:
            if name not in self._dense:
                flat, off = self._ragged[name]     # KeyError for a name the set lacks
                arr = pad_ragged(flat, off, self._width, np.float64, order=self._order)
                arr.setflags(write=False)
                self._dense[name] = arr
            return self._dense[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._ragged)

    def __len__(self) -> int:
        return len(self._ragged)

    def __repr__(self) -> str:
        return f"PaddedSignals({sorted(self._ragged)})"

    def __reduce__(self):
        return (dict, (dict(self.items()),))   # a copy elsewhere is a plain, padded dict

    def measured(self, name: str, lo: int, hi: int) -> np.ndarray:
        """float64 values of rows `lo..hi-1` (set order), each row's `n + 1`, concatenated."""
        flat, off = self._ragged[name]
        rows = self._order[lo:hi]
        starts, lengths = off[rows], off[rows + 1] - off[rows]
        ends = np.cumsum(lengths)
        idx = np.repeat(starts - (ends - lengths), lengths)
        idx += np.arange(int(ends[-1]) if ends.size else 0, dtype=np.int64)
        return np.asarray(flat, dtype="<f8")[idx]      # the bytes the content hash reads


def unpad(dense: np.ndarray, n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Inverse of `pad_ragged`: (flat values, int64 offsets) of rows `dense[t, :n[t]+1]`."""
    lengths = n.astype(np.int64) + 1
    offsets = np.zeros(lengths.shape[0] + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    # One flat index per kept cell: half the time of a boolean mask over every cell.
    idx = np.repeat(np.arange(lengths.shape[0], dtype=np.int64) * dense.shape[1] - offsets[:-1],
                    lengths)
    idx += np.arange(int(offsets[-1]), dtype=np.int64)
    return np.ascontiguousarray(dense).reshape(-1)[idx], offsets


def hash_measured(h, dense: np.ndarray, n: np.ndarray, dtype: str) -> None:
    """Feed `h` the measured values `dense[t, :n[t] + 1]` of every row as `dtype`, in row order.

    The bytes of `unpad(dense, n)[0].astype(dtype)`, a block of rows at a time: no
    copy of the whole set (each first-touched page costs a fault).
    """
    rows = dense.shape[0]
    step = max(1, (1 << 18) // max(dense.shape[1], 1))
    for r0 in range(0, rows, step):
        flat, _ = unpad(dense[r0:r0 + step], n[r0:r0 + step])
        h.update(np.ascontiguousarray(flat, dtype=dtype))
