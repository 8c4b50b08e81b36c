"""Typed NumPy access to the trajectory columns of a loaded set (nulls are errors naming the row)."""

import numpy as np
import pyarrow as pa

from otbench.errors import MeasurementSetError


class Columns:
    """Typed access to the concatenated trajectory columns; nulls are errors naming the row."""

    def __init__(self, table: pa.Table, where):
        self.table, self.where = table, where

    def strings(self, name: str) -> list:
        return self.table.column(name).to_pylist()

    def ragged(self, name: str, dtype) -> tuple[np.ndarray, np.ndarray]:
        arr = self.table.column(name).combine_chunks()
        if arr.null_count:
            r = arr.is_valid().to_pylist().index(False)
            raise MeasurementSetError(self.where(r), f"{name} is null")
        flat = to_numpy(arr.flatten())
        off = to_numpy(arr.offsets).astype(np.int64)
        return np.asarray(flat, dtype=dtype), off - off[0]

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
    """`arr.toto_numpy(zero_copy_only=False)`, read from the buffers for null-free numbers and flags.

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
    return arr.toto_numpy(zero_copy_only=False)
