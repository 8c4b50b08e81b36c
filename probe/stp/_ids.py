"""Answer token ids as compact int32 arrays: how the probe loop holds, commits and reads them.

A paper-shaped unit has ~0.75 M probe-answer ids. Held as Python ints in
tuples that is ~36 bytes per id (the int object and its pointer), ~25 MiB
per unit in flight; as `array("i")` it is 4 bytes, and the journal writes
and reads the array's bytes without creating one object per id. Engines
hand back Python ints (vLLM's outputs are lists), so each answer is packed
once, when it arrives, through a cached `struct.Struct`: ~7 ns per id, four
times faster than a NumPy array per sequence (parsing a format string per
call costs as much as packing 1,400 ids, hence the cache; answers share few
lengths). `array` compares by value, so unit results stay comparable.

On disk ids are little-endian int32 whatever the machine (`to_le_bytes`,
`from_le_bytes`).
"""

import functools
import struct
import sys
from array import array
from collections.abc import Sequence

_LITTLE = sys.byteorder == "little"
if array("i").itemsize != 4:                                    # C int is 4 bytes on every supported platform
    raise ImportError("otbench needs a platform whose C int is 32 bits (array typecode 'i')")


@functools.lru_cache(maxsize=4096)
def _packer(n: int, order: str) -> struct.Struct:
    return struct.Struct(f"{order}{n}i")


def compact(ids: Sequence[int]) -> array:
    """`ids` as an `array("i")` (returned as is when it already is one).

    Raises:
      struct.error: an id is not an integer or lies outside int32.
    """
    if isinstance(ids, array) and ids.typecode == "i":
        return ids
    if hasattr(ids, "dtype"):                                   # a NumPy array (transformers engine)
        import numpy as np

        a = np.asarray(ids)
        if a.size and (a.min() < -2**31 or a.max() >= 2**31):
            raise struct.error("a token id is outside int32")
        return array("i", a.astype("=i4").tobytes())
    return array("i", _packer(len(ids), "=").pack(*ids))


def to_le_bytes(ids: Sequence[int]) -> bytes:
    """`ids` as little-endian int32 bytes (the journal's on-disk form)."""
    if hasattr(ids, "dtype"):
        ids = compact(ids)
    if not (isinstance(ids, array) and ids.typecode == "i"):
        return _packer(len(ids), "<").pack(*ids)            # Python ints: packed little-endian directly
    if _LITTLE:
        return ids.tobytes()
    swapped = array("i", ids)
    swapped.byteswap()
    return swapped.tobytes()


def from_le_bytes(buf) -> array:
    """The `array("i")` stored as little-endian int32 bytes in `buf`."""
    a = array("i")
    a.frombytes(buf)
    if not _LITTLE:
        a.byteswap()
    return a
