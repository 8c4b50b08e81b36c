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
what it has decoded. Those shared blocks are shared across groups as well:
a trajectory's positions are queued together and their prefixes are nested
(the prompt, then the thinking up to each cut), the trajectories of a
question start with its prompt, and every prompt with the chat template's
common part; the ledger counts each such block once (`KVLedger`'s nodes).
A trajectory being sampled holds its prompt and the tokens decoded so far.

The driver cannot see a sequence's length while it decodes, but a sequence
decodes at most one token per engine step (no speculative decoding in the
probe's engine), so `min(max_tokens, steps since submission)` bounds it.
The driver admits by the *projected peak* (`KVLedger.peak`): every sequence
in flight grows one token a step until its expected end, the mean of the
finished lengths of its phase and `max_tokens` that exceed what it has
decoded so far (answers that stop early and answers that run to the limit
make two modes; before any has finished, its `max_tokens`); a trajectory
grows throughout. A new group fits when the most blocks all of them will
hold at any coming step fit in the cache. Sequences admitted at different
steps end at different steps, so this admits more than charging each its
final length at once (`held` + `need`, kept for the log) while still
keeping what is admitted within the cache as it grows, in expectation;
admitting by what they hold now lets them outgrow it (measured by
benchmarks/probe_batch.py: 19 preemptions against 0). vLLM
preempts a running request (and recomputes it later) only when a decode step
finds no free block (`v1/core/sched/scheduler.py`, `schedule`:
`_preempt_request` when `allocate_slots` fails); the engine counts those
(`VLLMEngine.cache_stats`, vLLM's `vllm:num_preemptions`) and the run writes them to run.json, so a
preemption is never silent.
"""

import dataclasses
import heapq
from collections import Counter
from collections.abc import Sequence

from . import _kv_peak
from ._bounds import default_units, holding_bound

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
    kind: str | None = None   # whose expected length it is charged (`KVLedger.expect`)
    charge: int = 0    # its blocks at the ledger's count step (`KVLedger._at`), where kept
    ver: int = 0       # bumped as `charge` is recomputed: older heap entries are stale


@dataclasses.dataclass
class _Group:
    full: int          # whole blocks of the prefix its requests share
    own: int           # those of them no other group holds (past the trajectory's tokens)
    tree: int          # those that are the trajectory's own tokens (prompt + thinking), shareable
    path: tuple        # ((node, its last whole block or None), ...): whose blocks the `tree` ones are
    count: int = 0
    spans: tuple = ()  # ((node, blocks of it this group's prefix holds), ...)


class KVLedger:
    """The blocks the sequences in flight hold now, at most, and whether more fit.

    `add` a request as it is submitted (with the group whose prefix it shares), `remove` it when its
    result arrives. `held(step)` is the whole blocks of the groups' prefixes, each distinct block once,
    plus each request's further whole blocks and, per sample, the blocks of what it can have decoded
    by then (`min(max_tokens, steps since submission + GROWTH_TOKENS)`): what vLLM's block manager
    holds at most, up to the growth allowance.

    Groups share whole blocks with one another where their contexts start with the same tokens: every
    prompt starts with the chat template's common part, the R trajectories of a question with its
    prompt, and the positions of one trajectory with its prompt and the thinking up to the earliest of
    them (their prefixes are nested). A group names those levels in `path`, outermost first: `(node,
    last)` with `last` the node's last whole block (None for a trajectory: its positions' prefixes
    end where each ends); a node's blocks are counted once, as many as its longest member holds.
    """

    def __init__(self, kv_tokens: int, block: int = DEFAULT_BLOCK, live=None):
        self.block = int(block)
        # tag -> samples still decoding (the engine's stream, where it can say; None: all n)
        self._live = live
        self.capacity = int(kv_tokens) // self.block
        self._groups: dict[object, _Group] = {}
        self._requests: dict[object, _Request] = {}
        self._memo: tuple[int, int] | None = None       # (step, held) of the last count
        self._expected: dict[str, float] = {}          # kind -> tokens a sequence of it decodes, mean
        # The count, kept up to date as requests come and go rather than redone per engine step (thousands
        # of requests in flight, a count per step): the groups' prefix blocks (node -> the most blocks a
        # group in flight holds of it, and the multiset it is the most of), and each request's charge at
        # step `_at`, which changes only where a block boundary or its cap is reached (`_due`, in `_heap`).
        self._nodes: dict[object, int] = {}
        self._spans: dict[object, Counter] = {}
        self._prefix = 0                                # the groups' blocks: own ones + the nodes'
        self._kept = 0                                  # the charges of the requests in `_requests`...
        self._asked: dict[object, _Request] = {}        # ...but these: several samples, `live` asked per count
        self._heap: list = []                           # (step its charge changes, seq, request, ver)
        self._seq = 0
        self._at = 0
        self._hist: dict[tuple, list] = {}              # (kind, max_tokens) -> finished lengths' counts (`remove`)
        self._tails: dict[tuple, tuple] = {}            # their suffix counts and sums (`_tail`)
        self._version = 0                               # bumped as requests come and go or lengths move
        self._cols = None                               # (step, version) -> `_rows`

    def expect(self, kind: str, tokens: float) -> None:
        """Charge every sequence of `kind` at least `tokens` decoded (capped at its `max_tokens`): the
        mean length of those that finished. A sequence's blocks only grow until it ends, so charging
        each its expected final length rather than its length now keeps the sequences admitted
        within the cache as they grow, in expectation; one longer than that is charged its own
        length as it goes."""
        old = int(self._expected.get(kind, 0.0))
        self._expected[kind] = float(tokens)
        self._memo = None
        self._version += 1
        if int(tokens) != old:               # the charges read the whole tokens only
            for tag, r in self._requests.items():
                if r.kind == kind and tag not in self._asked:
                    self._recharge(r)

    def __len__(self) -> int:
        return len(self._requests)

    def add(self, tag, group, shared: int, length: int, n: int, max_tokens: int, step: int,
            tree: int = 0, path: tuple = (), kind: str | None = None) -> None:
        """Submit request `tag` of `group`, whose requests share their first `shared` tokens; of those,
        the first `tree` are the tokens `path`'s nodes name (see the class)."""
        g = self._groups.get(group)
        if g is None:
            full = int(shared) // self.block
            t = min(int(tree) // self.block, full) if path else 0
            g = self._groups[group] = _Group(full, full - t, t, tuple(path))
            g.spans = _spans(g.path, g.tree)
        g.count += 1
        cols, self._cols = self._cols, None
        self._version += 1
        before = self._prefix
        if g.count == 1:
            self._join(g)
        replaced = tag in self._requests
        if replaced:                              # a tag reused: the old request is gone
            self._drop(self._requests[tag])
            self._asked.pop(tag, None)
        r = _Request(group, int(length), int(n), int(max_tokens), int(step), kind)
        self._requests[tag] = r
        if self._live is not None and r.n > 1:
            self._asked[tag] = r
        else:
            self._recharge(r)
        if self._memo is not None:
            memo_step, held = self._memo
            self._memo = (memo_step, held + self._prefix - before + self._charge(r, memo_step))
        if cols is not None and cols[0] == (int(step), self._version - 1) and not replaced:
            # the projection's rows of this step, with this request's: a pump admits many groups a step,
            # and rebuilding the rows for each would walk every request in flight per admission
            n = self._decoding(tag, r)
            if n > 0:
                row = (r.length, n, r.cap, 0, self._end(r, int(step)), r.length // self.block - g.full)
                self._cols = ((int(step), self._version), _kv_peak.append_row(cols[1], row))
            else:
                self._cols = ((int(step), self._version), cols[1])

    def _join(self, g: _Group) -> None:
        """Count a new group's prefix: its own blocks and, per node, the blocks past the most held."""
        self._prefix += g.own
        for node, span in g.spans:
            self._spans.setdefault(node, Counter())[span] += 1
            have = self._nodes.get(node, 0)
            if span > have:
                self._nodes[node] = span
                self._prefix += span - have

    def _leave(self, g: _Group) -> None:
        """The last request of `g` is gone: its prefix blocks are held only where another group holds them."""
        self._prefix -= g.own
        for node, span in g.spans:
            c = self._spans[node]
            c[span] -= 1
            if c[span]:
                continue
            del c[span]
            if span == self._nodes[node]:
                most = max(c) if c else 0
                self._prefix -= span - most
                if c:
                    self._nodes[node] = most
                else:
                    del self._nodes[node], self._spans[node]

    def _recharge(self, r: _Request) -> None:
        """Charge `r` at step `_at`, and queue the step its charge next changes."""
        self._kept -= r.charge
        r.charge = self._charge(r, self._at)
        self._kept += r.charge
        r.ver += 1
        due = self._due(r)
        if due is not None:
            self._seq += 1
            heapq.heappush(self._heap, (due, self._seq, r, r.ver))

    def _due(self, r: _Request) -> int | None:
        """The first step after `_at` whose charge of `r` differs (None: none, until `expect` changes)."""
        decoded = min(r.cap, max(self._at - r.step, int(self._expected.get(r.kind, 0.0))) + GROWTH_TOKENS)
        more = blocks(r.length + decoded, self.block) * self.block - r.length + 1   # one block more
        if decoded >= r.cap or more > r.cap:
            return None
        return r.step + more - GROWTH_TOKENS

    def _drop(self, r: _Request) -> None:
        self._kept -= r.charge
        r.charge = 0
        r.ver += 1                                # its queued changes are stale

    def remove(self, tag, decoded: Sequence[int] | None = None) -> None:
        """Request `tag` ended; `decoded`: the tokens each of its samples decoded, the lengths its kind's
        projection learns from (`_end`)."""
        self._memo = None
        self._version += 1
        r = self._requests.pop(tag, None)
        if r is None:
            return
        if decoded and r.kind not in (None, "think"):
            hist = self._hist.get((r.kind, r.cap))
            if hist is None:
                hist = self._hist[r.kind, r.cap] = [0] * (r.cap + 1)
            for d in decoded:
                hist[min(max(int(d), 0), r.cap)] += 1
            self._tails.pop((r.kind, r.cap), None)
        if self._asked.pop(tag, None) is None:
            self._drop(r)
        g = self._groups[r.group]
        g.count -= 1
        if not g.count:
            self._leave(g)
            del self._groups[r.group]

    def _charge(self, r: _Request, step: int, n: int | None = None) -> int:
        decoded = max(step - r.step, int(self._expected.get(r.kind, 0.0))) + GROWTH_TOKENS
        return _request_blocks(r.length, r.n if n is None else n, min(r.cap, decoded), self._groups[r.group].full,
                               self.block)

    def held(self, step: int) -> int:
        """Blocks held at most at engine step `step`, growth allowance included."""
        if self._memo is not None and self._memo[0] == step:
            return self._memo[1]
        total = self._count(int(step))
        self._memo = (step, total)
        return total

    def _count(self, step: int) -> int:
        """The count at `step`, from the kept charges: those whose step of change has come are redone."""
        if step < self._at:                       # an earlier step: every charge again
            self._at = step
            self._heap = []
            for tag, r in self._requests.items():
                if tag not in self._asked:
                    self._recharge(r)
        self._at = step
        heap = self._heap
        while heap and heap[0][0] <= step:
            _, _, r, ver = heapq.heappop(heap)
            if ver == r.ver:
                self._recharge(r)
        total = self._prefix + self._kept
        for tag, r in self._asked.items():
            n = self._live(tag)                   # a finished sample's blocks are free
            total += self._charge(r, step, None if n is None else min(n, r.n))
        return total

    def recount(self, step: int) -> int:
        """`held(step)` counted afresh from every group and request (what `held` keeps up to date)."""
        nodes: dict = {}
        for g in self._groups.values():
            for node, span in g.spans:
                nodes[node] = max(nodes.get(node, 0), span)
        total = sum(g.own for g in self._groups.values()) + sum(nodes.values())
        for tag, r in self._requests.items():
            n = self._live(tag) if self._live is not None and r.n > 1 else None
            total += self._charge(r, step, None if n is None else min(n, r.n))
        return total

    def fits(self, step: int, extra: int) -> bool:
        """Whether `extra` more blocks fit beside those held now (always, with nothing in flight: a run
        moves even where one group is larger than the cache, and vLLM's preemption then counts it)."""
        return not self._requests or self.held(step) + int(extra) <= self.capacity

    def fits_group(self, step: int, shared: int, contexts, tree: int = 0, path: tuple = (),
                   kind: str | None = None) -> bool:
        """Whether a new group (as `add` takes it; `contexts`: (length, samples, max_tokens) per request)
        fits beside the sequences in flight, from now until the last of its and their probes ends
        (`peak`): what they will hold at the worst moment, not the sum of what each holds at its end."""
        if not self._requests:
            return True
        return self.peak(step, shared, contexts, tree, path, kind) <= self.capacity

    # -- the projection (`_kv_peak`) --------------------------------------------------------

    def _rows(self, step: int):
        """Per request in flight (samples still decoding > 0): arrays (context, samples, max_tokens,
        decoded now, expected end in decoded tokens (inf: none within the horizon), own context blocks),
        built once per step and set of requests."""
        key = (step, self._version)
        if self._cols is not None and self._cols[0] == key:
            return self._cols[1]
        rows = []
        for tag, r in self._requests.items():
            n = self._decoding(tag, r)
            if n <= 0:
                continue
            rows.append((r.length, n, r.cap, max(0, step - r.step), self._end(r, step),
                         r.length // self.block - self._groups[r.group].full))
        cols = _kv_peak.rows_of(rows)
        self._cols = (key, cols)
        return cols

    def _decoding(self, tag, r: _Request) -> int:
        """Samples of `r` still decoding: the engine's stream says for a request of several (`live`)."""
        if tag not in self._asked:
            return r.n
        live = self._live(tag)
        return r.n if live is None else min(int(live), r.n)

    def _end(self, r: "_Request", step: int) -> float:
        """The decoded tokens `r` is expected to end at, given that it has not ended yet: the mean of the
        lengths of its kind's finished sequences of the same max_tokens that are longer than what it
        has decoded (`remove`'s `decoded`: answers that stop early and answers that run to the limit
        make two modes, and a sequence past the first is expected at the second), else its phase's
        mean (`expect`), else its max_tokens; at least its own length and growth. A trajectory (or a
        request of no phase) is projected to grow throughout."""
        if r.kind in (None, "think"):
            return float("inf")
        return _kv_peak.expected_end(self._tail(r.kind, r.cap), self._expected.get(r.kind), r.cap,
                                     max(0, step - r.step), GROWTH_TOKENS)

    def _tail(self, kind, cap):
        """`_kv_peak.suffix_sums` of the finished lengths of `kind` and max_tokens `cap`, kept until the next
        removal of one."""
        key = (kind, cap)
        if key not in self._tails:
            self._tails[key] = _kv_peak.suffix_sums(self._hist.get(key))
        return self._tails[key]

    def peak(self, step: int, shared: int = 0, contexts=(), tree: int = 0, path: tuple = (),
             kind: str | None = None) -> int:
        """The most blocks the sequences in flight, with a new group of `contexts` (as `fits_group`
        takes it; none: without one), will hold at once from engine step `step` on, as projected."""
        prefix = self._prefix_now(step)
        full = int(shared) // self.block
        new = None
        if contexts:
            prefix += full - self._held_of(shared, tree, path)
            r0 = _Request(None, 0, 0, 0, step, kind)
            ends = []
            for length, n, cap in contexts:
                r0.cap = int(cap)
                ends.append(self._end(r0, step))
            new = _kv_peak.rows_of([(int(length), int(n), int(cap), 0.0, e, int(length) // self.block - full)
                                    for (length, n, cap), e in zip(contexts, ends)])
        cols = self._rows(step)
        parts = [c for c in (cols, new) if c is not None]
        if not parts:
            return int(prefix)
        return int(prefix + _kv_peak.peak_blocks(parts, self.block, GROWTH_TOKENS))

    def _prefix_now(self, step: int) -> int:
        """The whole blocks of the prefixes of the groups in flight: kept as requests come and go (`_join`,
        `_leave`), so the admission does not redo `held`'s count of every request at each step."""
        return self._prefix

    def need(self, shared: int, contexts, tree: int = 0, path: tuple = (), kind: str | None = None) -> int:
        """Blocks a new group of `contexts` takes at submission beside what is held now: `group_blocks`,
        less the whole blocks of its prefix that groups in flight hold already (the nodes of `path`,
        as counted by the last `held`)."""
        total = group_blocks(shared, contexts, self.block,
                             int(self._expected.get(kind, 0.0)) + GROWTH_TOKENS if kind else None)
        # as counted by the last `held`: none before a count
        return total - (self._held_of(shared, tree, path) if self._memo is not None else 0)

    def _held_of(self, shared: int, tree: int, path: tuple) -> int:
        """Whole blocks of a new group's prefix that groups in flight hold already (the nodes of `path`,
        kept as requests come and go)."""
        if not path:
            return 0
        t = min(int(tree) // self.block, int(shared) // self.block)
        return sum(min(span, self._nodes.get(node, 0)) for node, span in _spans(path, t))


def _spans(path: tuple, tree: int) -> tuple:
    """(node, blocks) of the nodes on `path` that `tree` shared whole blocks reach."""
    out, start = [], 0
    for node, last in path:
        end = tree if last is None else min(int(last), tree)
        if end > start:
            out.append((node, end - start))
        if last is None or int(last) >= tree:
            break
        start = int(last)
    return tuple(out)


def steady_batch(kv_tokens: float, *, prompt: float, prefix: float, answer: float, P: int,
                 block: int = DEFAULT_BLOCK, max_num_seqs: int = 256, signals: int = 2,
                 positions: float = 1.0, trajectory_tokens: float = 0.0, trajectory_full: float = 0.0) -> float:
    """Sequences decoding at once when the ledger is full of probe groups of this shape (the planner's
    batch): groups of `P` answers and `signals` one-token reads over a retained prefix of
    `prompt + prefix` tokens (the mean over positions), each answer charged at its mean length plus
    the growth allowance, as the driver charges it once answers have finished (`KVLedger.expect`);
    the answers that decode at once, at most `max_num_seqs`, the scheduler's limit.

    The driver queues a trajectory's `positions` positions together, so the groups in flight are runs
    of `w` consecutive positions of one trajectory whose prefixes are nested: the run holds the whole
    blocks of its longest prefix once (`KVLedger`), about `prompt + prefix + (w - 1) * step / 2`
    with the positions `step = 2 * prefix / positions` apart (spread evenly over the thinking), and
    `w` is every position of the trajectory, or as many groups as fit where fewer do.

    Trajectories being sampled beside the probes (`trajectory_tokens` each at their end: prompt and
    thinking, the mean) are charged as the ledger projects them in the steady state, sampled at every
    age alike: the prompt, half the thinking, and the tokens they decode while a probe group runs
    (`answer`); they decode one sequence each; the probe groups get the rest. The driver keeps as many as its bounds allow (`_loop.UnitStream.wants`): as many as
    hold the cache at their full length `trajectory_full` (prompt + decode limit; `fits_think`),
    at most the default units in flight less those in their probe phase (`_bounds`)."""
    shared = float(prompt) + float(prefix)
    partial = shared - (shared // block) * block
    own = P * blocks(partial + answer + GROWTH_TOKENS, block) + signals * blocks(partial + 1, block)
    positions = max(float(positions), 1.0)
    step = 2.0 * float(prefix) / positions
    w = positions
    trajectories = 0.0
    if trajectory_full > 0:
        units = default_units(max_num_seqs)
        trajectories = float(min(units - holding_bound(units), int(kv_tokens) // block // blocks(trajectory_full, block)))
    # a trajectory being sampled is charged what it holds now and what it decodes while the probes admitted
    # beside it run (`KVLedger.peak`: it grows throughout the projection): in the steady state, sampled at
    # every age alike, its prompt, half its thinking and the answers' mean length
    sampled = float(prompt) + max(float(trajectory_tokens) - float(prompt), 0.0) / 2.0 + float(answer)
    cache = float(kv_tokens) / block - trajectories * blocks(sampled + GROWTH_TOKENS, block)
    for _ in range(8):               # w = min(positions, groups(w)): groups grows as w falls; settles fast
        longest = (shared + (w - 1.0) * step / 2.0) // block
        groups = max(cache, 0.0) / max(longest / w + own, 1.0)
        if groups >= w or w <= 1.0:
            break
        w = max(1.0, groups)
    # the signals end after their one token: the decoding batch is the answers
    return max(1.0, min(float(max_num_seqs), float(trajectories) + groups * P))
