"""Fixed-horizon stops by token-id copy, and length-matched prefix controls (docs/rules.md).

A stop at horizon `B` of a stored trajectory (prompt ids `p`, reasoning ids
`t`, `L = len(t)`) is built by copying ids, never by decoding and
re-encoding the reasoning::

    completed block (finished, L <= B):  p + t + end + answer_prefix
    cut reasoning (otherwise):           p + t[:min(B, L)] + closure + end + answer_prefix

`end` is the family's thinking-end marker and `answer_prefix` the answer
opening (`_probe_ids.ProbeFormat`); a completed block is replayed exactly as
the model closed it, so its readout context equals its natural answer
context. The closure (`_horizon_job.CLOSURES`) is encoded once; the neutral
closure is empty and then, as in the STP probe, the family's separator is
inserted before the marker unless the kept reasoning ends with a line feed.
Unlike the STP probe, a cut at `B` keeps the ids as they are: `B` need not
be a step boundary.

Controls at the same `B` (only for runs still reasoning at `B`, `L > B`),
read under the arm's own prompt and the same closure:

* ``random``: `B` ids drawn uniformly from the vocabulary without special
  tokens;
* ``swap``: the first `B` reasoning ids of another question's run (same
  arm), each donor used once per `B` and long enough (`len >= B`); a stop
  with no donor left is missing (recorded);
* ``shuffle``: the first `B` original ids in a seeded random order.

Seeds: `control_seed(model, item, replicate, kind, B, seed)` is SHA-256 of
those fields (tag "otbench.horizon-control/1"), the same on any machine.
"""

import hashlib
import random
from collections.abc import Sequence

from otbench.probe.tokens import ProbeFormat
from otbench.errors import ArgumentError

_TAG = "otbench.horizon-control/1"
_US = "\x1f"


def control_seed(model: str, group: str, question: str, replicate: int, kind: str, B: int,
                 seed: int) -> int:
    """The 62-bit seed of one control draw (module docstring)."""
    fields = [_TAG, model, group, question, str(int(replicate)), kind, str(int(B)), str(int(seed))]
    return int.from_bytes(hashlib.sha256(_US.join(fields).encode("utf-8")).digest()[:8], "big") >> 2


def stop_input(fmt: ProbeFormat, prompt: Sequence[int], thinking: Sequence[int], B: int, finished: bool,
               closure_ids: Sequence[int], answer_prefix_ids: Sequence[int]) -> tuple[list[int], int, bool]:
    """(input ids, reasoning tokens kept, completed block?) of the stop at horizon `B` (module docstring)."""
    if B < 0:
        raise ArgumentError(f"`B` must be >= 0, got {B}")
    L = len(thinking)
    if finished and L <= B:
        ids = list(prompt) + list(thinking) + list(fmt.end_ids) + list(answer_prefix_ids)
        return ids, L, True
    keep = min(B, L)
    return close(fmt, list(prompt) + list(thinking[:keep]), closure_ids, answer_prefix_ids), keep, False


def close(fmt: ProbeFormat, ids: list[int], closure_ids: Sequence[int],
          answer_prefix_ids: Sequence[int]) -> list[int]:
    """`ids` + closure (or the separator rule when the closure is empty) + marker + answer prefix."""
    if closure_ids:
        ids.extend(closure_ids)
    elif fmt.separator_ids and not (ids and fmt.vocab.ends_newline[int(ids[-1])]):
        ids.extend(fmt.separator_ids)
    ids.extend(fmt.end_ids)
    ids.extend(answer_prefix_ids)
    return ids


def plain_ids(tokenizer, vocab_size: int) -> list[int]:
    """Ids a random control may use: the model's vocabulary without special or added special tokens."""
    special = set(int(t) for t in getattr(tokenizer, "all_special_ids", []) or [])
    added = getattr(tokenizer, "added_tokens_decoder", None) or {}
    special |= {int(i) for i, t in added.items() if getattr(t, "special", False)}
    return [i for i in range(min(int(vocab_size), len(tokenizer))) if i not in special]


def random_prefix(pool: Sequence[int], B: int, seed: int) -> list[int]:
    """`B` ids drawn uniformly with replacement from `pool` (Python's Mersenne Twister seeded `seed`)."""
    rng = random.Random(seed)
    return [pool[rng.randrange(len(pool))] for _ in range(B)]


def shuffled_prefix(thinking: Sequence[int], B: int, seed: int) -> list[int]:
    """The first `B` ids of `thinking` in a seeded random order (Fisher-Yates, `random.Random(seed)`)."""
    if B > len(thinking):
        raise ArgumentError(f"`B` ({B}) exceeds the reasoning length ({len(thinking)})")
    ids = list(thinking[:B])
    random.Random(seed).shuffle(ids)
    return ids


def assign_donors(receivers: Sequence[str], donors: Sequence[tuple[str, int]], B: int,
                  seed: int) -> list[int | None]:
    """Swap donors at horizon `B`: for each receiver (its question), the index of its donor or None.

    `donors[d]` is (question, reasoning length). A donor must belong to another
    question and hold at least `B` reasoning ids, and each donor is used at
    most once. Receivers are served in a seeded random order, each picking a
    seeded random donor among the free eligible ones; a receiver with none
    left gets None (a missing control, recorded by the caller).
    """
    rng = random.Random(seed)
    order = list(range(len(receivers)))
    rng.shuffle(order)
    free = [d for d in range(len(donors)) if donors[d][1] >= B]
    out: list[int | None] = [None] * len(receivers)
    for u in order:
        cands = [d for d in free if donors[d][0] != receivers[u]]
        if not cands:
            continue
        d = cands[rng.randrange(len(cands))]
        out[u] = d
        free.remove(d)
    return out
