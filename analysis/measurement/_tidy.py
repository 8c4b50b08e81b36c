"""Result objects as tidy tables: `to_arrow()` (pyarrow, core), `to_pandas()`, `to_polars()`.

A result class mixes in `Tidy` and says, in `_tidy_columns`, what one row is
(one value per row, every label its own column: "long" form), so the three
dataframe libraries get the same table. pandas and polars are optional
extras (`pip install 'otbench[dataframes]'`); `to_arrow` needs only pyarrow.
"""

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
from otbench.errors import ArgumentError

_EXTRA = "pip install 'otbench[dataframes]'"


class Tidy:
    """Mixin: `to_arrow`, `to_pandas`, `to_polars` from the class's `_tidy_columns()`."""

    def _tidy_columns(self) -> Mapping[str, Any]:   # column name -> values, equal lengths
        raise NotImplementedError

    def to_arrow(self) -> pa.Table:
        """The result as a pyarrow Table, one row per value (see the class docs for its columns)."""
        return pa.table({k: _arrow(v) for k, v in self._tidy_columns().items()})

    def to_pandas(self):
        """`to_arrow()` as a pandas DataFrame (needs pandas)."""
        try:
            import pandas  # noqa: F401
        except ImportError:
            raise ImportError(f"to_pandas() needs pandas: {_EXTRA}") from None
        return self.to_arrow().to_pandas()

    def to_polars(self):
        """`to_arrow()` as a polars DataFrame (needs polars)."""
        try:
            import polars
        except ImportError:
            raise ImportError(f"to_polars() needs polars: {_EXTRA}") from None
        return polars.from_arrow(self.to_arrow())


def _arrow(values: Any) -> pa.Array:
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        return values
    arr = np.asarray(values)
    if arr.dtype.kind in "US":
        return pa.array(arr.tolist(), type=pa.string())
    if arr.dtype.kind == "O":      # labels, or numbers with nulls where a part lacks them
        return pa.array(arr.tolist())
    return pa.array(arr)


def melt_columns(values: np.ndarray, axes: Sequence[tuple[Any, Sequence[Any]]],
         value: str = "value") -> dict[str, np.ndarray]:
    """Long-form columns of an n-d array: one row per element, one column per axis label.

    Args:
      values: array of shape `[len(labels_0), len(labels_1), ...]`.
      axes: per axis `(name, labels)`; a tuple of names with tuple labels
        (e.g. `(("model", "group"), [("m", "g"), ...])`) spreads a label over
        several columns.
      value: the name of the values' column.
    """
    values = np.asarray(values)
    shape = tuple(len(labels) for _, labels in axes)
    if values.shape != shape:
        raise ArgumentError(f"values of shape {values.shape} do not match labels of shape {shape}")
    index = np.indices(shape).reshape(len(shape), -1)
    out: dict[str, np.ndarray] = {}
    for (name, labels), idx in zip(axes, index):
        if isinstance(name, tuple):
            for j, sub in enumerate(name):
                out[sub] = _labels([lab[j] for lab in labels])[idx]
        else:
            out[name] = _labels(list(labels))[idx]
    out[value] = values.reshape(-1)
    return out


def _labels(labels: list) -> np.ndarray:
    arr = np.empty(len(labels), dtype=object)
    arr[:] = labels
    if labels and all(isinstance(x, (int, np.integer)) for x in labels):
        return arr.astype(np.int64)
    if labels and all(isinstance(x, (float, np.floating)) for x in labels):
        return arr.astype(np.float64)
    return arr


def concat_columns(parts: Sequence[Mapping[str, Any]]) -> dict[str, np.ndarray]:
    """Row-wise concatenation of column dicts; a column missing from a part is null there."""
    names: list[str] = []
    for p in parts:
        names += [k for k in p if k not in names]
    out = {}
    for k in names:
        cols = []
        for p in parts:
            n = len(next(iter(p.values()))) if p else 0
            cols.append(np.asarray(p[k]) if k in p else np.full(n, None, dtype=object))
        kinds = {c.dtype.kind for c in cols if c.size}
        out[k] = np.concatenate([c.astype(object) for c in cols]) if len(kinds) > 1 \
            else np.concatenate(cols)
    return out
