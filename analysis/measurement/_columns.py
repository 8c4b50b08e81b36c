"""Trajectory rows (one Arrow table, the Parquet files' columns) -> a validated set.

The one reader of the trajectory columns: `load` feeds it the concatenated
files of a set, `from_table` a table read by any other route (the `datasets`
library reading a set's Hub folder). Null-free numeric columns are read from
their Arrow buffers (`to_numpy`), so loading a set never imports pandas.
"""

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np
import pyarrow as pa

from ._build import MeasurementSetError, from_ragged
from ._rows import SIGNAL_PREFIX
from ._types import MeasurementSet


def set_from_columns(table: pa.Table, signal_names: Iterable[str], *, synthetic: bool,
                     provenance: Mapping[str, Any], where: Callable[[int], str]) -> MeasurementSet:
    """The set of `table`'s rows (columns already checked for presence and type); a null or
    a broken rule raises `MeasurementSetError` naming `where(row)`."""
    cols = Columns(table, where)
    for name in ("model", "group", "question"):
        vals = cols.strings(name)
        if None in vals:
            raise MeasurementSetError(where(vals.index(None)), f"{name} is null")
    return from_ragged(
        model=cols.strings("model"), group=cols.strings("group"), question=cols.strings("question"),
        trajectory=cols.ints("trajectory"), probes=cols.ints("probes"), n=cols.ints("n"),
        L=cols.ragged("L", np.int64), C=cols.ragged("C", np.int64), y=cols.ints("y"),
        finished=cols.ints("finished"), dataset=cols.strings("dataset"),
        split=cols.strings("split"), question_text=cols.strings("question_text"),
        signals={s: cols.ragged(SIGNAL_PREFIX + s, np.float64) for s in sorted(signal_names)},
        synthetic=synthetic, provenance=provenance, where=where,
    )


class Columns:
    """Typed access to the concatenated trajectory columns; nulls are errors naming the row."""

    def __init__(self, table: pa.Table, where):
        self.table, self.where = table, where

    def strings(self, name: str) -> list:
        return self.table.column(name).to_pylist()

    def ragged(self, name: str, dtype) -> tuple[np.ndarray, np.ndarray]:
        # Chunk by chunk from the offsets and the child values: `combine_chunks` and
        # `flatten` import pyarrow.compute (~0.05-0.1 s, a tenth of a frontier run).
        flats, offs, rows, total = [], [np.zeros(1, dtype=np.int64)], 0, 0
        for chunk in self.table.column(name).chunks:
            if chunk.null_count:
                r = chunk.is_valid().to_pylist().index(False)
                raise MeasurementSetError(self.where(rows + r), f"{name} is null")
            off = to_numpy(chunk.offsets).astype(np.int64)
            lo, hi = int(off[0]), int(off[-1])
            flats.append(np.asarray(to_numpy(chunk.values.slice(lo, hi - lo)), dtype=dtype))
            offs.append(off[1:] - lo + total)
            rows, total = rows + len(chunk), total + hi - lo
        flat = np.concatenate(flats) if flats else np.zeros(0, dtype=dtype)
        return flat, np.concatenate(offs)

    def ints(self, name: str) -> np.ndarray:
        arr = self.table.column(name).combine_chunks()
        if arr.null_count:
            r = arr.is_null().to_pylist().index(True)
            raise MeasurementSetError(self.where(r), f"{name} is null")
        return to_numpy(arr)


NUMPY_TYPES = {pa.int8(): np.int8, pa.int16(): np.int16, pa.int32(): np.int32,
                pa.int64(): np.int64, pa.uint8(): np.uint8, pa.uint16(): np.uint16,
                pa.uint32(): np.uint32, pa.uint64(): np.uint64, pa.float32(): np.float32,
                pa.float64(): np.float64}


def to_numpy(arr: pa.Array) -> np.ndarray:
    """`arr.to_numpy(zero_copy_only=False)`, read from the buffers for null-free numbers and flags.

    pyarrow's `to_numpy` imports pandas where it is installed (~0.5 s, more than
    reading a paper-scale set); a primitive array without nulls is its data buffer.
    """
    n = len(arr)
    if arr.null_count == 0 and n:
        if pa.types.is_boolean(arr.type):
            bits = np.frombuffer(arr.buffers()[1], dtype=np.uint8)
            return np.unpackbits(bits, count=arr.offset + n, bitorder="little")[arr.offset:].view(bool)
        dt = NUMPY_TYPES.get(arr.type)
        if dt is not None:
            size = np.dtype(dt).itemsize
            return np.frombuffer(arr.buffers()[1], dtype=dt, count=n, offset=arr.offset * size)
    return arr.to_numpy(zero_copy_only=False)
