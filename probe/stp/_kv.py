"""What the probe's engine sequences hold in the KV cache, counted as vLLM's block manager counts it (docs/rules.md).

One function of a job's shape answers both "may this position's probes go to
the engine now?" (the driver, `KVLedger`) and "how many sequences will decode
at once?" (the planner, `steady_batch`), so the plan's batch is the batch the
driver runs.

How vLLM holds a sequence (vLLM 0.32, read in `v1/core/kv_cache_manager.py`
`allocate_slots` and `v1/core/block_pool.py`): in whole blocks of
`block_size` tokens (16 on a GPU, 128 by default on a CPU); a request's blocks cover its
prompt and the tokens decoded so far. With prefix caching on (the probe's
engine always sets it), a *full* block whose tokens (and those before them)
match a cached one is shared, by hash, between requests; a partial last block
is never shared. A request of `n` samples is `n` child requests
(`v1/engine/llm_engine.py` `add_request`, `ParentRequest`) with the same
prompt. So a position's probe group (P samples of the probe prompt, the two
signal reads, the field methods' probes: every context starts with the
prompt and the retained thinking) holds the whole blocks of their common
prefix once, and every sequence its own copy of the rest of its context plus
what it has decoded. A trajectory being sampled holds its prompt and the
tokens decoded so far.

The driver cannot see a sequence's length while it decodes, but a sequence
decodes at most one token per engine step (no speculative decoding in the
probe's engine), so `min(max_tokens, steps since submission)` bounds it; the
ledger charges each sequence that bound plus `GROWTH_TOKENS`, the token it
may add before the driver's next decision. vLLM
preempts a running request (and recomputes it later) only when a decode step
finds no free block (`v1/core/sched/scheduler.py`, `schedule`:
`_preempt_request` when `allocate_slots` fails); the engine counts those
(`VLLMEngine.cache_stats`, vLLM's `vllm:num_preemptions`) and the run writes them to run.json, so a
preemption is never silent.
"""

import dataclasses
from collections.abc import Sequence

DEFAULT_BLOCK = 16
"""vLLM's block size on GPU (`CacheConfig.block_size`, 16 for the attention backends the probe uses);
used where an engine does not report its own."""

GROWTH_TOKENS = 1
"""Tokens each sequence in flight is charged beyond what it can have decoded so far: the one token it
can add before the driver's next decision (it decides at every engine step). No more room is kept:
measured by benchmarks/probe_batch.py, 32 tokens of room cost a third of the batch at its shape
(58.6 against 42.4 sequences per step, 0 preemptions either way), and vLLM's preemption, counted,
is the fallback should the sequences in flight outgrow their blocks before enough of them finish."""


def blocks(tokens: int, block: int) -> int:
    """Whole blocks that hold `tokens` tokens."""
    return -(-int(tokens) // int(block))


def group_blocks(shared: int, contexts: Sequence[tuple[int, int, int]], block: int,
                 decoded: int | None = None) -> int:
    """Blocks a group of sequences with a common prefix holds: the prefix's whole blocks once, and every
    sequence the rest of its context plus `decoded` tokens (at most its `max_tokens`).

    `shared`: tokens every context starts with; `contexts`: (context length, samples, max_tokens) per
    request of the group; `decoded` defaults to `GROWTH_TOKENS`, what a request is charged when sent. A
    request's n samples share its own context's whole blocks too."""
    decoded = GROWTH_TOKENS if decoded is None else decoded
    full = int(shared) // block
    return full + sum(_request_blocks(length, n, min(decoded, cap), full, block) for length, n, cap in contexts)


def _request_blocks(length: int, n: int, decoded: int, shared_full: int, block: int) -> int:
    """A request's blocks beyond its group's shared ones: its context's further whole blocks once (its n
    samples share them), and per sample the partial block and what it decoded."""
    own = length // block
    return own - shared_full + n * (blocks(length + decoded, block) - own)


@dataclasses.dataclass
class _Request:
    group: object
    length: int        # context tokens
    n: int
    cap: int           # max_tokens
    step: int          # the driver's engine step at submission


class KVLedger:
    """The blocks the sequences in flight hold now, at most, and whether more fit.

    `add` a request as it is submitted (with the group whose prefix it shares), `remove` it when its
    result arrives. `held(step)` is each group's shared whole blocks plus each request's further
    whole blocks and, per sample, the blocks of what it can have decoded by then
    (`min(max_tokens, steps since submission + GROWTH_TOKENS)`): what vLLM's block manager holds
    at most, up to the growth allowance (sharing across groups is not counted).
    """

    def __init__(self, kv_tokens: int, block: int = DEFAULT_BLOCK, live=None):
        self.block = int(block)
        # tag -> samples still decoding (the engine's stream, where it can say; None: all n)
        self._live = live
        self.capacity = int(kv_tokens) // self.block
        self._groups: dict[object, list[int]] = {}     # group -> [shared whole blocks, requests]
        self._requests: dict[object, _Request] = {}
        self._memo: tuple[int, int] | None = None       # (step, held) of the last full count

    def __len__(self) -> int:
        return len(self._requests)

    def add(self, tag, group, shared: int, length: int, n: int, max_tokens: int, step: int) -> None:
        g = self._groups.get(group)
        full = int(shared) // self.block
        if g is None:
            g = self._groups[group] = [full, 0]
        g[1] += 1
        r = _Request(group, int(length), int(n), int(max_tokens), int(step))
        self._requests[tag] = r
        if self._memo is not None:
            memo_step, held = self._memo
            self._memo = (memo_step, held + (full if g[1] == 1 else 0) + self._charge(r, memo_step))

    def remove(self, tag) -> None:
        self._memo = None
        r = self._requests.pop(tag, None)
        if r is None:
            return
        g = self._groups[r.group]
        g[1] -= 1
        if not g[1]:
            del self._groups[r.group]

    def _charge(self, r: _Request, step: int, n: int | None = None) -> int:
        return _request_blocks(r.length, r.n if n is None else n, min(r.cap, step - r.step + GROWTH_TOKENS),
                               self._groups[r.group][0], self.block)

    def held(self, step: int) -> int:
        """Blocks held at most at engine step `step`, growth allowance included."""
        if self._memo is not None and self._memo[0] == step:
            return self._memo[1]
        total = sum(g[0] for g in self._groups.values())
        if self._live is None:
            total += sum(self._charge(r, step) for r in self._requests.values())
        else:
            for tag, r in self._requests.items():
                n = self._live(tag) if r.n > 1 else None     # a finished sample's blocks are free
                total += self._charge(r, step, None if n is None else min(n, r.n))
        self._memo = (step, total)
        return total

    def fits(self, step: int, extra: int) -> bool:
        """Whether `extra` more blocks fit beside those held now (always, with nothing in flight: a run
        moves even where one group is larger than the cache, and vLLM's preemption then counts it)."""
        return not self._requests or self.held(step) + int(extra) <= self.capacity


def steady_batch(kv_tokens: float, *, prompt: float, prefix: float, answer: float, P: int,
                 block: int = DEFAULT_BLOCK, max_num_seqs: int = 256, signals: int = 2) -> float:
    """Sequences decoding at once when the ledger is full of probe groups of this shape (the planner's
    batch): groups of `P` answers and `signals` one-token reads over a retained prefix of
    `prompt + prefix` tokens (the mean over positions), each answer charged at half its mean length
    (its mean over its own life) plus the growth allowance, as the driver charges it; the answers
    that decode at once, at most `max_num_seqs`, the scheduler's limit."""
    shared = float(prompt) + float(prefix)
    full = shared // block
    partial = shared - full * block
    per = full + P * blocks(partial + answer / 2.0 + GROWTH_TOKENS, block) + signals * blocks(partial + 1, block)
    groups = (float(kv_tokens) / block) / max(per, 1.0)
    # the signals end after their one token: the decoding batch is the answers
    return max(1.0, min(float(max_num_seqs), groups * P))
