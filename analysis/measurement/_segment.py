"""Token-space step segmentation: boundary blocks merged to a target step count (docs/rules.md).

A trajectory's thinking token ids are cut into *initial blocks*: a block
ends right after every token whose id is in the boundary vocabulary `B`
(`_vocab.boundary_vocabulary`), and the tokens after the last boundary form
the last block. The target step count is ``max(1, floor(L/b + 1/2))``,
capped by the number of blocks; while there are more blocks than the
target, the adjacent pair with the smallest combined token count is merged
(ties: the leftmost pair). The positions are the cumulative block lengths:
``L = [0, len(step 1), len(step 1) + len(step 2), ..., L(n)]``.

Nothing is ever decoded: the scan is one vectorised membership test of the
ids against a boolean lookup table (plus, under the optional "vocab+span"
rule, one test of adjacent pairs; see `SPAN_RULES`), and the merge runs on block lengths
with a binary heap (O(B log B) per trajectory, never a quadratic rescan).
The heap kernel is compiled with numba when it is installed (the probe
extra brings it) and runs as plain Python otherwise; both give identical
results, which the tests check against a slow rescan twin.
"""

import heapq
from collections.abc import Sequence

import numpy as np
from otbench.errors import ArgumentError


def _segment_iv(b: int) -> int:
    if isinstance(b, (bool, np.bool_)) or not isinstance(b, (int, np.integer)) or b < 1:
        raise ArgumentError(f"`b` must be a positive integer (target tokens per step), got {b!r}.")
    return int(b)


def boundary_mask(vocab_size: int, boundary_ids: Sequence[int]) -> np.ndarray:
    """bool[vocab] lookup table: True for ids in the boundary vocabulary."""
    ids = np.asarray(boundary_ids, dtype=np.int64).reshape(-1)
    if ids.size and (ids.min() < 0 or ids.max() >= vocab_size):
        raise ArgumentError(f"`boundary_ids` must lie in 0..{vocab_size - 1}, got "
                            f"{int(ids.min())}..{int(ids.max())}.")
    mask = np.zeros(vocab_size, dtype=bool)
    mask[ids] = True
    return mask


def target_steps(length: int, b: int) -> int:
    """max(1, floor(length/b + 1/2)) in exact integer arithmetic (before the block cap)."""
    return max(1, (2 * int(length) + b) // (2 * b))


def initial_blocks(ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """int64[blocks] lengths of the initial blocks of one trajectory's thinking ids.

    Args:
      ids: int[L] thinking token ids.
      mask: bool[vocab] boundary lookup table (`boundary_mask`).
    """
    ids = np.asarray(ids)
    if ids.size == 0:
        return np.zeros(0, dtype=np.int64)
    ends = np.flatnonzero(mask[ids]) + 1          # a block ends right after a boundary token
    if ends.size == 0 or ends[-1] != ids.size:
        ends = np.append(ends, ids.size)           # trailing tokens form the last block
    return np.diff(ends, prepend=0).astype(np.int64)


SPAN_RULES = ("vocab", "vocab+span")
"""Boundary rules: "vocab" is docs/rules.md (a block ends after every id in B);
"vocab+span" also ends a block after a token that starts with a line feed
when the token before it (in the same trajectory) ends with one: a double
LF spanning two tokens. Tokenizers whose pre-tokenizer splits "\n\n" before
a word into two "\n" tokens (GPT-2-style, e.g. SmolLM2) write paragraph
breaks that way, and the vocabulary rule alone never sees them. For the
paper's tokenizers no double LF spans tokens (its audit), so the two rules
agree there; `_vocab.count_events` measures it on stored data."""


def boundary_flags(ids: np.ndarray, offsets: np.ndarray, mask: np.ndarray,
                   span: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """bool[total]: a block ends right after token `i` (see `SPAN_RULES`).

    Args:
      ids: int[total] token ids of all rows, concatenated; offsets: int64[T+1].
      mask: bool[vocab] the boundary vocabulary.
      span: None for the "vocab" rule, or (ends_newline, starts_newline)
        bool[vocab] tables for "vocab+span".
    """
    ids = np.asarray(ids)
    if ids.size == 0:
        return np.zeros(0, dtype=bool)
    flags = mask[ids]
    if span is not None:
        ends_nl, starts_nl = span
        pair = np.zeros(ids.size, dtype=bool)
        pair[1:] = ends_nl[ids[:-1]] & starts_nl[ids[1:]]
        starts = np.asarray(offsets[:-1], dtype=np.int64)
        pair[starts[starts < ids.size]] = False       # never across rows
        flags = flags | pair
    return flags


def _merge_python(lengths: np.ndarray, target: int) -> np.ndarray:
    """Merge adjacent blocks down to `target` (see module docstring); plain-Python heap."""
    nb = int(lengths.shape[0])
    if nb <= target:
        return lengths.copy()
    size = lengths.astype(np.int64).tolist()
    nxt = list(range(1, nb + 1))
    nxt[-1] = -1
    prv = list(range(-1, nb - 1))
    alive = [True] * nb
    # Heap key (pair sum, left block index): block indices keep the left-to-right
    # order through merges (a merged block keeps its left part's index), so the
    # second key is exactly "leftmost pair first" on ties.
    heap = [(size[i] + size[i + 1], i) for i in range(nb - 1)]
    heapq.heapify(heap)
    blocks = nb
    pop, push = heapq.heappop, heapq.heappush
    while blocks > target:
        s, i = pop(heap)
        j = nxt[i]
        # Lazy deletion: an entry is current when its left block is alive and the
        # pair it names still sums to s. A stale entry that passes this test has
        # the very key of the current (i, nxt[i]) pair, so taking it is exact.
        if not alive[i] or j < 0 or size[i] + size[j] != s:
            continue
        size[i] = s
        alive[j] = False
        k = nxt[j]
        nxt[i] = k
        if k >= 0:
            prv[k] = i
            push(heap, (s + size[k], i))
        p = prv[i]
        if p >= 0:
            push(heap, (size[p] + s, p))
        blocks -= 1
    out = [size[i] for i in range(nb) if alive[i]]
    return np.asarray(out, dtype=np.int64)


def _segment_flat_python(is_b: np.ndarray, offsets: np.ndarray, b: int) -> tuple[np.ndarray, np.ndarray]:
    T = offsets.shape[0] - 1
    out_L: list[np.ndarray] = []
    for t in range(T):
        lo, hi = int(offsets[t]), int(offsets[t + 1])
        ends = np.flatnonzero(is_b[lo:hi]) + 1
        L = hi - lo
        if L and (ends.size == 0 or ends[-1] != L):
            ends = np.append(ends, L)
        lengths = np.diff(ends, prepend=0)
        target = min(target_steps(L, b), lengths.shape[0])
        merged = _merge_python(lengths, target)
        row = np.zeros(merged.shape[0] + 1, dtype=np.int64)
        np.cumsum(merged, out=row[1:])
        out_L.append(row)
    lens = np.fromiter((r.shape[0] for r in out_L), dtype=np.int64, count=T)
    off = np.zeros(T + 1, dtype=np.int64)
    np.cumsum(lens, out=off[1:])
    flat = np.concatenate(out_L) if T else np.zeros(0, dtype=np.int64)
    return flat, off


def _build_numba():
    """Compile the heap kernel with numba (None when numba is not installed).

    numba compiles closures over module state poorly, so each compiled helper is built here
    from the ones it calls (`_numba_heap`, `_numba_merge`), and the kernel is one loop nest
    over the rows; the NumPy twin `segment` in this module and the tests keep it honest.
    """
    try:
        import numba
    except ImportError:
        return None
    _merge_blocks = _numba_merge(numba, *_numba_heap(numba))

    @numba.njit(cache=True, nogil=True)
    def _kernel(is_b, offsets, b):
        T = offsets.shape[0] - 1
        total = offsets[T] - offsets[0]
        # Upper bound on output size: every token a block, plus one L[0] per row.
        out = np.empty(total + T, dtype=np.int64)
        out_off = np.zeros(T + 1, dtype=np.int64)
        size = np.empty(total + 1, dtype=np.int64)
        nxt = np.empty(total + 1, dtype=np.int64)
        prv = np.empty(total + 1, dtype=np.int64)
        alive = np.empty(total + 1, dtype=np.bool_)
        hs = np.empty(3 * total + 3, dtype=np.int64)
        hi = np.empty(3 * total + 3, dtype=np.int64)
        w = 0
        for t in range(T):
            lo = offsets[t]
            hi_ = offsets[t + 1]
            L = hi_ - lo
            nb = 0
            start = 0
            for x in range(L):
                if is_b[lo + x]:
                    size[nb] = x + 1 - start
                    start = x + 1
                    nb += 1
            if start < L:
                size[nb] = L - start
                nb += 1
            tgt = max(1, (2 * L + b) // (2 * b))
            if tgt > nb:
                tgt = nb
            _merge_blocks(size, nb, tgt, nxt, prv, alive, hs, hi)
            out[w] = 0
            w += 1
            acc = 0
            for i in range(nb):
                if alive[i]:
                    acc += size[i]
                    out[w] = acc
                    w += 1
            out_off[t + 1] = w
        return out[:w].copy(), out_off

    return _kernel


def _numba_heap(numba):
    """The binary min-heap on (sum, index) pairs, stored in parallel arrays: push and pop,
    compiled with `numba` (ties go to the lower index, as in `_merge_python`)."""

    @numba.njit(cache=True, nogil=True)
    def _heap_push(hs, hi, n, s, i):
        # Binary min-heap on (hs, hi) pairs stored in parallel arrays.
        c = n
        hs[c] = s
        hi[c] = i
        while c > 0:
            p = (c - 1) >> 1
            if hs[p] < hs[c] or (hs[p] == hs[c] and hi[p] < hi[c]):
                break
            hs[p], hs[c] = hs[c], hs[p]
            hi[p], hi[c] = hi[c], hi[p]
            c = p
        return n + 1

    @numba.njit(cache=True, nogil=True)
    def _heap_pop(hs, hi, n):
        s, i = hs[0], hi[0]
        n -= 1
        hs[0] = hs[n]
        hi[0] = hi[n]
        c = 0
        while True:
            l = 2 * c + 1
            if l >= n:
                break
            m = l
            r = l + 1
            if r < n and (hs[r] < hs[l] or (hs[r] == hs[l] and hi[r] < hi[l])):
                m = r
            if hs[c] < hs[m] or (hs[c] == hs[m] and hi[c] < hi[m]):
                break
            hs[m], hs[c] = hs[c], hs[m]
            hi[m], hi[c] = hi[c], hi[m]
            c = m
        return s, i, n

    return _heap_push, _heap_pop


def _numba_merge(numba, _heap_push, _heap_pop):
    """The greedy merge of one row's `nb` blocks (`size[:nb]`) down to `tgt`, compiled with
    `numba`: the adjacent pair with the smallest sum (lowest index on ties) merges first. The
    surviving blocks are the `alive` ones, `size` their lengths; the rest are work arrays."""

    @numba.njit(cache=True, nogil=True)
    def _merge_blocks(size, nb, tgt, nxt, prv, alive, hs, hi):
        for i in range(nb):
            nxt[i] = i + 1
            prv[i] = i - 1
            alive[i] = True
        if nb > 0:
            nxt[nb - 1] = -1
        n = 0
        for i in range(nb - 1):
            n = _heap_push(hs, hi, n, size[i] + size[i + 1], i)
        blocks = nb
        while blocks > tgt:
            s, i, n = _heap_pop(hs, hi, n)
            j = nxt[i]
            if (not alive[i]) or j < 0 or size[i] + size[j] != s:
                continue
            size[i] = s
            alive[j] = False
            k = nxt[j]
            nxt[i] = k
            if k >= 0:
                prv[k] = i
                n = _heap_push(hs, hi, n, s + size[k], i)
            p = prv[i]
            if p >= 0:
                n = _heap_push(hs, hi, n, size[p] + s, p)
            blocks -= 1

    return _merge_blocks


NUMBA_MIN_TOKENS = 1 << 22
"""`backend="auto"` uses numba (when installed) from this many tokens on."""

_NUMBA_KERNEL = None
_NUMBA_TRIED = False


def _numba_kernel():
    global _NUMBA_KERNEL, _NUMBA_TRIED
    if not _NUMBA_TRIED:
        _NUMBA_TRIED = True
        _NUMBA_KERNEL = _build_numba()
    return _NUMBA_KERNEL


def segment_flat(ids: np.ndarray, offsets: np.ndarray, mask: np.ndarray, b: int, *,
                 span: tuple[np.ndarray, np.ndarray] | None = None,
                 backend: str = "auto") -> tuple[np.ndarray, np.ndarray]:
    """Segment many trajectories at once: ragged positions `L` for every row.

    Args:
      ids: int[total] thinking token ids of all trajectories, concatenated.
      offsets: int64[T + 1] row start offsets into `ids`.
      mask: bool[vocab] boundary lookup table.
      b: target average step length in tokens.
      span: (ends_newline, starts_newline) tables for the "vocab+span" rule
        (`SPAN_RULES`); None for docs/rules.md's vocabulary rule.
      backend: "auto" (numba when installed and the batch has at least
        `NUMBA_MIN_TOKENS` tokens), "numba" or "python"; all give identical results.

    Returns:
      (flat int64 L values, int64[T + 1] offsets): row `t` is
      ``L_t = [0, ..., L_t(n)]`` with `n_t + 1` entries (`n_t = 0` for an
      empty trajectory).
    """
    b = _segment_iv(b)
    ids = np.asarray(ids)
    offsets = np.asarray(offsets, dtype=np.int64)
    if backend not in ("auto", "numba", "python"):
        raise ArgumentError(f"`backend` must be 'auto', 'numba' or 'python', got {backend!r}.")
    if ids.size and (ids.min() < 0 or ids.max() >= mask.shape[0]):
        raise ArgumentError(f"token ids must lie in 0..{mask.shape[0] - 1} (the vocabulary), got "
                            f"{int(ids.min())}..{int(ids.max())}.")
    is_b = boundary_flags(ids, offsets, mask, span)
    # numba compiles once per machine (~4 s, then cached); below this size the
    # plain-Python heap (~20 M tokens/s) finishes before compilation would.
    use_numba = backend == "numba" or (backend == "auto" and ids.size >= NUMBA_MIN_TOKENS)
    kernel = _numba_kernel() if use_numba else None
    if backend == "numba" and kernel is None:
        raise ArgumentError("`backend='numba'` needs the numba package (pip install numba).")
    if kernel is None:
        return _segment_flat_python(is_b, offsets, b)
    # The kernel indexes from offsets[0]; pass a zero-based view.
    base = offsets[0] if offsets.size else 0
    return kernel(np.ascontiguousarray(is_b[base:] if base else is_b),
                  offsets - base, np.int64(b))


def segment(ids: np.ndarray, mask: np.ndarray, b: int, *, span=None, backend: str = "auto") -> np.ndarray:
    """int64[n + 1] step positions `L` of one trajectory (`L[0] = 0`, `L[n]` = its length)."""
    ids = np.asarray(ids)
    flat, _ = segment_flat(ids, np.array([0, ids.size], dtype=np.int64), mask, b, span=span,
                           backend=backend)
    return flat
