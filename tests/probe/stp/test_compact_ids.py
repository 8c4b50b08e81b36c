"""Compact int32 token ids (`probe.stp._ids`): what the loop holds, the journal writes and reads (issue 13)."""

import struct
from array import array

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from otbench.probe.stp import _ids

int32s = st.lists(st.integers(-2**31, 2**31 - 1), max_size=300)


@given(int32s)
def test_round_trip_through_little_endian_bytes(ids):
    for given_as in (ids, tuple(ids), np.asarray(ids, dtype=np.int64), array("i", ids)):
        a = _ids.compact(given_as)
        assert isinstance(a, array) and a.typecode == "i" and a.tolist() == ids
        b = _ids.to_le_bytes(given_as)
        assert b == struct.pack(f"<{len(ids)}i", *ids)             # the on-disk form, whatever the input
        assert _ids.from_le_bytes(b) == a


def test_an_array_is_kept_and_bad_ids_raise():
    a = array("i", [1, 2, 3])
    assert _ids.compact(a) is a                                    # no copy of what is already compact
    for bad in ([2**31], [-2**31 - 1], np.array([2**31]), np.array([-2**40])):
        with pytest.raises(struct.error):
            _ids.compact(bad)
    with pytest.raises(struct.error):
        _ids.compact([1.5])
    assert _ids.compact([]) == array("i") and _ids.to_le_bytes(()) == b""


def test_big_endian_machines_write_and_read_little_endian(monkeypatch):
    # On a big-endian machine native ints are swapped on the way out and back in: simulate
    # one by declaring this machine big-endian, so native (little) bytes count as "big".
    monkeypatch.setattr(_ids, "_LITTLE", False)
    ids = [1, 256, -2, 2**31 - 1]
    assert _ids.to_le_bytes(array("i", ids)) == struct.pack(">4i", *ids)   # native arrays are swapped
    assert _ids.to_le_bytes(ids) == struct.pack("<4i", *ids)   # Python ints: packed in an explicit order
    assert _ids.from_le_bytes(struct.pack(">4i", *ids)).tolist() == ids
