"""One Parquet row per trajectory: the columns of a set's files and `cell_table`, which writes
them (the save, the Hub export and the tidy view all build their rows here)."""

from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from ._padding import unpad

if TYPE_CHECKING:
    from ._types import MeasurementSet

SPLITS = ("train", "validation", "test")
"""Split names; `MeasurementSet.split` stores their index, -1 = unassigned."""

SIGNAL_PREFIX = "signal."

REQUIRED = {
    "model": pa.string(), "group": pa.string(), "dataset": pa.string(),
    "question": pa.string(), "trajectory": pa.int32(), "split": pa.string(),
    "probes": pa.int32(), "n": pa.int32(), "L": pa.list_(pa.int32()),
    "C": pa.list_(pa.int32()), "y": pa.int8(), "finished": pa.bool_(),
    "question_text": pa.string(),
}


def _list_array(dense: np.ndarray, n: np.ndarray, typ: pa.DataType) -> pa.Array:
    flat, offsets = unpad(dense, n)
    return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)),
                                    pa.array(flat, type=typ.value_type))


def cell_table(ms: "MeasurementSet", rows: np.ndarray) -> pa.Table:
    """The Parquet rows (one per trajectory) for the given row indices."""
    n = ms.n[rows]
    q = ms.question[rows]
    cols: dict[str, pa.Array] = {
        "model": pa.array([ms.models[ms.cell_model[c]] for c in ms.cell[rows]], pa.string()),
        "group": pa.array([ms.groups[ms.cell_group[c]] for c in ms.cell[rows]], pa.string()),
        "dataset": pa.array([ms.question_dataset[i] for i in q], pa.string()),
        "question": pa.array([ms.question_id[i] for i in q], pa.string()),
        "trajectory": pa.array(ms.trajectory[rows], pa.int32()),
        "split": pa.array([None if s < 0 else SPLITS[s] for s in ms.split[rows]], pa.string()),
        "probes": pa.array(ms.probes[rows], pa.int32()),
        "n": pa.array(n, pa.int32()),
        "L": _list_array(ms.L[rows], n, REQUIRED["L"]),
        "C": _list_array(ms.C[rows], n, REQUIRED["C"]),
        "y": pa.array(ms.y[rows], pa.int8()),
        "finished": pa.array(ms.finished[rows], pa.bool_()),
        "question_text": pa.array([ms.question_text[i] for i in q], pa.string()),
    }
    for name in sorted(ms.signals):
        cols[SIGNAL_PREFIX + name] = _list_array(ms.signals[name][rows], n,
                                                 pa.list_(pa.float64()))
    return pa.table(cols)
