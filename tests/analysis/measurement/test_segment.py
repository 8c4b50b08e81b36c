"""Token-space segmentation (SPEC §3.2) against a slow, obviously correct twin."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from otbench.analysis.measurement._segment import (
    NUMBA_MIN_TOKENS,
    boundary_flags,
    boundary_mask,
    initial_blocks,
    segment,
    segment_flat,
    target_steps,
)

try:
    import numba  # noqa: F401
    HAVE_NUMBA = True
except ImportError:
    HAVE_NUMBA = False

BACKENDS = ["python"] + (["numba"] if HAVE_NUMBA else [])


# -- the twin ----------------------------------------------------------------------


def twin_positions(ids, boundary: set, b: int, span=None) -> list[int]:
    """SPEC §3.2 read literally: a list of blocks, rescanned for the smallest pair each merge."""
    ids = list(ids)
    ends = []
    for i, t in enumerate(ids):
        cut = t in boundary
        if span is not None and i > 0:
            ends_nl, starts_nl = span
            cut = cut or (ids[i - 1] in ends_nl and t in starts_nl)
        if cut:
            ends.append(i + 1)
    if ids and (not ends or ends[-1] != len(ids)):
        ends.append(len(ids))
    blocks = [e - s for s, e in zip([0] + ends[:-1], ends)]
    # target = max(1, floor(L/b + 1/2)) computed with exact rationals
    import math
    from fractions import Fraction
    target = min(max(1, math.floor(Fraction(len(ids), b) + Fraction(1, 2))), len(blocks))
    while len(blocks) > target:
        sums = [blocks[i] + blocks[i + 1] for i in range(len(blocks) - 1)]
        i = sums.index(min(sums))            # index() finds the leftmost minimum
        blocks[i:i + 2] = [sums[i]]
    return [0] + list(np.cumsum(blocks, dtype=np.int64).tolist())


V = 12
B_IDS = (0, 1, 2)   # boundary ids of the toy vocabulary


@st.composite
def streams(draw):
    """Ragged token streams over a 12-id vocabulary: empty rows, no boundaries, runs of boundaries."""
    rows = draw(st.lists(st.lists(st.integers(0, V - 1), max_size=60), min_size=1, max_size=6))
    b = draw(st.integers(1, 25))
    return rows, b


def _flat(rows):
    off = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum([len(r) for r in rows], out=off[1:])
    flat = np.asarray([t for r in rows for t in r], dtype=np.int64)
    return flat, off


@pytest.mark.parametrize("backend", BACKENDS)
@given(streams())
@settings(max_examples=80)
def test_matches_twin(backend, data):
    rows, b = data
    mask = boundary_mask(V, B_IDS)
    flat, off = _flat(rows)
    L, o = segment_flat(flat, off, mask, b, backend=backend)
    for t, r in enumerate(rows):
        assert L[o[t]:o[t + 1]].tolist() == twin_positions(r, set(B_IDS), b)


@pytest.mark.parametrize("backend", BACKENDS)
@given(streams())
@settings(max_examples=60)
def test_span_rule_matches_twin(backend, data):
    rows, b = data
    ends_nl, starts_nl = {3, 4, 0}, {4, 5, 1}          # 4 both starts and ends with LF
    span = (boundary_mask(V, sorted(ends_nl)), boundary_mask(V, sorted(starts_nl)))
    flat, off = _flat(rows)
    L, o = segment_flat(flat, off, boundary_mask(V, B_IDS), b, span=span, backend=backend)
    for t, r in enumerate(rows):
        assert L[o[t]:o[t + 1]].tolist() == twin_positions(r, set(B_IDS), b, (ends_nl, starts_nl))


@given(streams())
@settings(max_examples=60)
def test_properties(data):
    rows, b = data
    mask = boundary_mask(V, B_IDS)
    for r in rows:
        L = segment(np.asarray(r, dtype=np.int64), mask, b)
        blocks = initial_blocks(np.asarray(r, dtype=np.int64), mask)
        ends = set(np.cumsum(blocks).tolist())
        assert L[0] == 0 and L[-1] == len(r)
        assert np.all(np.diff(L) > 0)                     # merging never makes an empty step
        assert set(L[1:].tolist()) <= ends                # no boundary inside a block is created
        assert len(L) - 1 == min(target_steps(len(r), b), len(blocks))


def test_hand_example():
    # blocks [2, 1, 3, 1, 1]: L = 8, b = 4 -> target floor(2 + 1/2) = 2.
    # merges: sums [3,4,4,2] -> merge (3,4) at index 3 -> [2,1,3,2];
    # sums [3,4,5] -> merge index 0 -> [3,3,2]; sums [6,5] -> merge index 1 -> [3,5].
    ids = [7, 0, 1, 7, 7, 2, 0, 7]
    assert segment(np.asarray(ids), boundary_mask(V, B_IDS), 4).tolist() == [0, 3, 8]


def test_tie_takes_leftmost_pair():
    # four blocks of 1 token, b = 2 -> target 2: pairs (0,1), (1,2), (2,3) all sum 2;
    # the leftmost merges first, then sums [2, 1, 1] -> (2,3) merges.
    assert segment(np.asarray([0, 0, 0, 0]), boundary_mask(V, B_IDS), 2).tolist() == [0, 2, 4]


@pytest.mark.parametrize("length,b,want", [
    (0, 256, 1), (127, 256, 1), (128, 256, 1), (383, 256, 1), (384, 256, 2),
    (640, 256, 3), (8281, 256, 32), (32768, 256, 128),
])
def test_target_steps(length, b, want):
    # max(1, floor(L/b + 1/2)): 384/256 + 1/2 = 2 exactly, so the rounding is half up.
    assert target_steps(length, b) == want


def test_empty_and_boundaryless_rows():
    mask = boundary_mask(V, B_IDS)
    L, o = segment_flat(np.zeros(0, dtype=np.int64), np.array([0, 0]), mask, 8)
    assert L.tolist() == [0] and o.tolist() == [0, 1]        # n = 0
    assert segment(np.asarray([5] * 30), mask, 4).tolist() == [0, 30]   # one block


def test_flags_never_cross_rows():
    ends_nl, starts_nl = boundary_mask(V, [3]), boundary_mask(V, [5])
    flat, off = _flat([[3], [5, 3, 5]])
    flags = boundary_flags(flat, off, boundary_mask(V, []), (ends_nl, starts_nl))
    assert flags.tolist() == [False, False, False, True]


@pytest.mark.skipif(not HAVE_NUMBA, reason="numba not installed")
def test_backends_agree_on_a_large_batch():
    rng = np.random.default_rng(0)
    lens = rng.integers(0, 3000, 200)
    off = np.zeros(201, dtype=np.int64)
    np.cumsum(lens, out=off[1:])
    ids = rng.integers(0, V, off[-1])
    mask = boundary_mask(V, B_IDS)
    a = segment_flat(ids, off, mask, 64, backend="python")
    c = segment_flat(ids, off, mask, 64, backend="numba")
    assert np.array_equal(a[0], c[0]) and np.array_equal(a[1], c[1])
    assert NUMBA_MIN_TOKENS > 0


def test_offsets_need_not_start_at_zero():
    mask = boundary_mask(V, B_IDS)
    ids = np.asarray([9, 9, 0, 7, 7, 0, 7], dtype=np.int64)
    for backend in BACKENDS:
        L, o = segment_flat(ids, np.array([2, 7]), mask, 2, backend=backend)
        assert L.tolist() == twin_positions(ids[2:7].tolist(), set(B_IDS), 2)


@pytest.mark.parametrize("b", [0, -3, 2.5, True, "8"])
def test_bad_b(b):
    with pytest.raises(ValueError, match=r"`b` must be a positive integer \(target tokens per step\)"):
        segment_flat(np.asarray([1]), np.array([0, 1]), boundary_mask(V, B_IDS), b)


def test_bad_ids_and_backend():
    mask = boundary_mask(V, B_IDS)
    with pytest.raises(ValueError, match=r"token ids must lie in 0\.\.11 \(the vocabulary\), got 0\.\.12"):
        segment_flat(np.asarray([0, 12]), np.array([0, 2]), mask, 4)
    with pytest.raises(ValueError, match=r"`backend` must be 'auto', 'numba' or 'python'"):
        segment_flat(np.asarray([0]), np.array([0, 1]), mask, 4, backend="c")
    with pytest.raises(ValueError, match=r"`boundary_ids` must lie in 0\.\.11"):
        boundary_mask(V, [3, 12])
