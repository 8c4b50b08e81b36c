"""The padded layout of a set's per-position arrays: ragged rows padded to one width, back, and
hashed over their measured part only (so a re-padded set hashes the same)."""

import threading
from collections.abc import Iterator, Mapping

import numpy as np


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
