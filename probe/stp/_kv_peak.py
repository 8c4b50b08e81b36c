"""What the sequences in flight will hold as they grow: the KV ledger's projection (`KVLedger.peak`).

Every sequence in flight grows by one token a step until it ends. A probe-phase
sequence is expected to end at the mean of the finished lengths of its phase
and `max_tokens` that exceed what it has decoded so far (`expected_end`); a
trajectory grows throughout. Sequences admitted at different steps end at
different steps, so what the cache must hold is the largest total over the
coming steps, which the sum of the final lengths (`KVLedger.held`) overstates
where they are staggered (benchmarks/probe_batch.py: the ledger's sum at 92 % of
the cache where positions waited, vLLM's own count at 75 %). Between two ends the
total only grows, so its largest value is at the step before one of them ends
(or now): `peak_blocks` evaluates it there and nowhere else, exactly.

A request's row (`KVLedger._rows`): (context tokens, samples still decoding,
max_tokens, tokens decoded now, expected end in decoded tokens (inf: grows
throughout), its context's whole blocks beyond its group's shared ones).
"""

import numpy as np



def suffix_sums(hist) -> tuple[list, list] | None:
    """(count, total): count[i], total[i] the number and sum of the lengths >= i in `hist` (hist[i]: how
    many finished at length i), one entry past the longest; None: none finished. numpy suffix sums:
    answers of the paper's 1,400 tokens make it 1,400 entries long, rebuilt after removals."""
    if not hist:
        return None
    h = np.asarray(hist, dtype=np.int64)
    count = np.append(np.cumsum(h[::-1])[::-1], 0)
    if not count[0]:
        return None
    total = np.append(np.cumsum((h * np.arange(h.size, dtype=np.int64))[::-1])[::-1], 0)
    return count.tolist(), total.tolist()


def expected_end(tail, mean: float | None, cap: int, now: int, growth: int) -> float:
    """The decoded tokens a sequence that has decoded `now` and not ended is expected to end at: the mean of
    the finished lengths longer than `now` (`tail`, `suffix_sums`: answers that stop early and answers that
    run to the limit make two modes, and one past the first is expected at the second), else `mean` (its
    phase's, where no sequence of its max_tokens finished), else `cap`; at least `now` and `growth` (the
    ledger's `GROWTH_TOKENS`)."""
    if tail is not None:
        count, total = tail
        # in whole tokens, rounded up: a sequence decodes whole tokens, one a step
        end = -(-total[now + 1] // count[now + 1]) if now + 1 < len(count) and count[now + 1] else cap
    else:
        end = cap if mean is None else int(mean)      # nothing of its kind finished yet: max_tokens
    return float(min(cap, max(end, now + growth)))


def rows_of(rows) -> tuple | None:
    """Column arrays of request rows (None: no row)."""
    return tuple(np.array(c, dtype=np.float64) for c in zip(*rows)) if rows else None


def append_row(cols, row) -> tuple:
    """`cols` (None: none before) with one more row."""
    if cols is None:
        return tuple(np.array([v], dtype=np.float64) for v in row)
    return tuple(np.append(c, v) for c, v in zip(cols, row))


def usage(cols, offsets, block: int, growth: int) -> np.ndarray:
    """Blocks the requests `cols` hold at each of `offsets` steps from now (those not ended by then)."""
    length, n, cap, now, end, own = (c[:, None] for c in cols)
    t = np.asarray(offsets, dtype=np.float64)[None, :]
    decoded = np.minimum(np.minimum(cap, end), now + t + growth)
    held = own + n * (np.ceil((length + decoded) / block) - np.floor(length / block))
    return ((now + t < end) * held).sum(axis=0)


def peak_blocks(parts, block: int, growth: int) -> float:
    """The most blocks the requests of `parts` (column arrays, each as `rows_of` makes them) hold at once
    from now on: the total at now and at the step before each expected end."""
    ends = np.concatenate([c[4] - c[3] for c in parts])
    finite = ends[np.isfinite(ends)]
    offsets = np.unique(np.concatenate([[0.0], np.maximum(finite - 1.0, 0.0)]))
    return float(sum(usage(c, offsets, block, growth) for c in parts).max())
