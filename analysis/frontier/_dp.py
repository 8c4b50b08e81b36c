"""The exact frontier DP: min-plus combination of decision units on a reward-indexed state (docs/rules.md).

State. `g[r]` = the minimum total cost (retained tokens) with which the units
combined so far reach a total offset reward of *at least* `r` (unreachable:
a sentinel). This is the "minimum cost per attainable reward" state with the
dominated states already pruned: `g` is non-decreasing and its Pareto points
are the `r` where `g[r] < g[r + 1]`. Rewards are offset by each unit's
zero-cost action (`_units`), so `g[0] = 0` and the state spans only the
reward that tokens can buy. Combining a unit with actions `(c_a, r_a)`:

    g'[r] = min_a ( g[max(r - r_a, 0)] + c_a ),

a min-plus convolution. The zero-cost action `(0, 0)` is the identity term,
so it is never stored; the others are packed in chunks of `lanes` actions
(padding lanes `(0, 0)` are the identity again and change nothing).

Layout and in-place update. The state lives in one buffer
`[front zeros | g[0..cap-1]]`; the `front` zeros are `g` at negative rewards
(reaching "at least a negative reward" is free), so a shifted read never
leaves the buffer. A unit rewrites only the `tiles` leading tiles of `tile`
entries that cover the reward reachable so far, from the highest tile down:
a tile reads its own old values and up to `front` entries below it, which
are not yet rewritten -- the reverse-order trick of the 0/1 knapsack, so the
update is in place and costs no state copy.

Cost model. Let a problem have units `u` with `A_u` pruned actions (DEE:
`A_u <= P + 1`; DR: `<= 2`; FB: `<= R * P + 1`), offset reward range
`top_u` (its largest reward minus its zero-cost reward), `a_u = A_u - 1`
non-identity actions and `k_u = ceil(a_u / lanes)` chunks. Unit `j` (in
processing order) rewrites `t_j = ceil((sum_{i<=j} top_i + 1) / tile)`
tiles, so

    element ops (add+min)  E = sum_j lanes * k_j * tile * t_j
                             ~ sum_j a_j * sum_{i<=j} top_i
    loop iterations        I = sum_j k_j * t_j        (one fused pass each)
    state memory           front + cap entries (int32) per problem,
                           cap = next power of two of tiles >= sum_u top_u + 1
    unit tables            2 * block * chunks * lanes entries per kernel call

against `sum_u A_u * (P * traj + 1)` for the plain DP, whose state spans every
probe of the cell. Measured on the simulated paper-scale set (`simulate
("paper", seed=0)`: 24 cells, 92,448 trajectories, 25.3 positions each,
`P = 16`; `benchmarks/frontier.py`):

    strategy  units   actions   plain E   this E   (ideal*)   I       sum top / sum P
    DR        5,778    10,935   9.5e8     1.6e8    2.7e7      9.8e3   0.25
    FB        5,778   129,000   9.4e9     1.3e9    9.3e8      7.8e4   0.27
    DEE      92,448   232,000   1.8e10    2.7e9    9.4e8      1.7e5   0.32
    * no tile rounding or padding lanes: the operation count of the three ideas alone

Three choices shrink `E` 6.8x (15x before tile and lane rounding):
offsetting rewards by the zero-cost action (the state spans 25-32 % of the
probes instead of all of them), growing the state with the units (the
triangle factor ~1/2, at the granularity of one tile instead of powers of
two), and ordering units by `top_u / k_u` ascending (Smith's rule for
`sum_j w_j * prefix_j`: small reward ranges with many actions first while
the state is short; 20-40 % fewer operations than the input order). The
action count enters only through the dynamic chunk loop, so units are never
padded to the worst unit and no grouping by action count is needed (the
lanes of a unit's last chunk are padded; on this CPU `lanes` from 1 to 8
ran equally fast, the passes being memory-bound). `int32` halves the bytes
of `int64` and is used whenever every problem's full-thinking total is below
`2**30` (sentinel + any cost < `2**31`); otherwise `int64`.

Only a few shapes are compiled: the buffer length (`front + cap`), the block
size, the chunk capacity (a power of two) and the dtype; the unit count, the
per-unit chunk count and the growing reach are data. A second cell of the
same padded shape reuses the compiled kernel, and a whole run of frontiers
uses one shape (the bootstrap's `_pipeline`; the point frontiers of
`frontiers` are solved by the NumPy DP `_host_dp`, which compiles nothing).

Bootstrap on an H200 (an estimate from the counts above; not measured --
this project's sessions had no device). One replicate of all 72 frontiers
is `E ~ 4e9` element ops in `I ~ 2.5e5` sequential passes; the batched
kernel shares the passes across a vmapped batch (a pass runs to the batch's
largest chunk count, ~1.5-2x `I`). 10,000 replicates are `4e13` ops:
seconds of int32 ALU time. The limits are memory traffic and pass count: a
pass over a batch of `B` replicates reads and writes `B * tile` state
entries (`4 B * tile` bytes each way, the shifted reads hitting cache), so
with `B = 10,000` and `tile = 4096` a pass moves ~0.3-0.5 GB (~0.1 ms at
4.8 TB/s) and the ~5e5 passes take on the order of a minute; with `B =
1,000` slabs fit in the 50 MB L2 but the ~10-20 us launch cost per pass
(XLA while loops) times 10 batches gives a similar order. State memory:
`B * (front + cap) * 4` bytes, 5.2 GB for the largest cell at `B = 10,000`;
unit tables `B * block * chunks * lanes * 8` bytes per call (use a smaller
`block` for FB, whose chunk capacity is 64). So roughly a minute of device
time per 10,000 replicates of all frontiers, if the host builds the
resampled units fast enough: that is NumPy work of ~0.2 s per replicate of
all cells (measured: FB 0.09 s, DEE 0.10 s, DR 0.004 s), ~30 min on one core
for 10,000 -- spread it over the machine's cores and overlap it with the
device, batch by batch.

Batches. `solve` takes any batch of independent problems (cells, bootstrap
replicates) and `jax.vmap`s the kernel over it: units are aligned by position
(each problem's units in its own Smith order), the tile count of a position is
shared (the largest reach in the batch), and chunk counts are per problem
(a vmapped dynamic loop runs to the batch's largest count, masking the rest).
"""

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from otbench.analysis.core import Array, Int, Int32  # shapes in annotations (STYLE.md)

from ._host_dp import SENTINEL32, SENTINEL64, dtype_for  # noqa: F401  (defined JAX-free)
from ._units import Actions, isum
from otbench.errors import ArgumentError

TILE = 4096
"""Default tile: large enough to amortize the loop overhead (~1 us per pass
on CPU), small enough that the growth granularity wastes little (2048-8192
measured alike on the paper-scale set)."""
LANES = 4
"""Default actions per chunk (unrolled); 1-8 measured alike on this CPU."""
BLOCK = 256
"""Default units per kernel call (scan length); padding units cost nothing."""
SLOTS = 1024
"""Default chunk slots per kernel call; a block ends early when its units'
chunks would not fit (so unit tables never pad to the worst unit)."""



class DPState(NamedTuple):
    """Scan carry of the DP kernel."""

    # int32|int64[front + cap]: `front` zeros, then g[0..cap-1] (sentinel = unreachable)
    buf: Int[Array, " buf"]


class UnitBlock(NamedTuple):
    """A block of units: a shared chunk table and per-unit scan inputs."""

    cost: Int[Array, "slot lane"]      # int32|int64 action cost (tokens) of each chunk lane; padding 0
    reward: Int32[Array, "slot lane"]  # offset action reward (probes); padding 0
    first: Int32[Array, " unit"]       # the unit's first chunk in the table
    chunks: Int32[Array, " unit"]      # chunks to apply (0: an identity/padding unit)
    tiles: Int32[Array, " unit"]       # leading tiles of the state to rewrite (shared in a batch)


def _unit_step(buf: Int[Array, " buf"], cost: Int[Array, "slot lane"],
               reward: Int32[Array, "slot lane"], first: Int32[Array, ""],
               chunks: Int32[Array, ""], tiles: Int32[Array, ""], *, front: int,
               tile: int) -> Int[Array, " buf"]:
    """Combine one unit into the state buffer, in place, highest tile first."""
    lanes = cost.shape[-1]

    def do_tile(i, buf):
        lo = front + (tiles - 1 - i) * tile

        def do_chunk(j, new):
            cj, rj = cost[first + j], reward[first + j]
            for a in range(lanes):       # static unroll: one fused pass per chunk
                new = jnp.minimum(new, jax.lax.dynamic_slice(buf, (lo - rj[a],), (tile,)) + cj[a])
            return new

        new = jax.lax.fori_loop(0, chunks, do_chunk, jax.lax.dynamic_slice(buf, (lo,), (tile,)))
        return jax.lax.dynamic_update_slice(buf, new, (lo,))

    return jax.lax.fori_loop(0, tiles, do_tile, buf)


def scan_units(state: DPState, block: UnitBlock, *, front: int, tile: int) -> DPState:
    """The DP kernel: `lax.scan` over the units of `block` (pure; jit/vmap at the edges).

    Args:
      state: carry; `buf` int[front + cap].
      block: units and their chunk table; `reward <= front`,
        `tiles * tile <= cap`, `first + chunks <= slots`.
      front, tile: static layout constants.
    """
    def step(buf, unit):
        f, k, t = unit
        return _unit_step(buf, block.cost, block.reward, f, k, t, front=front, tile=tile), None

    buf, _ = jax.lax.scan(step, state.buf, (block.first, block.chunks, block.tiles))
    return DPState(buf)


@functools.cache
def _compiled(front: int, tile: int, batched: bool):
    """The jitted (and, for batches, vmapped) kernel; jit caches by shape and dtype."""
    fn = functools.partial(scan_units, front=front, tile=tile)
    if batched:
        fn = jax.vmap(fn, in_axes=(DPState(0), UnitBlock(0, 0, 0, 0, None)))
    return jax.jit(fn, donate_argnums=0)


def _defaults(tile, lanes, block, slots=None):
    """Module defaults read at call time (tests shrink them to exercise many tiles/blocks)."""
    return (TILE if tile is None else tile, LANES if lanes is None else lanes,
            BLOCK if block is None else block, SLOTS if slots is None else slots)


def _next_pow2(x: int) -> int:
    return 1 << max(int(x) - 1, 0).bit_length()


class Shape(NamedTuple):
    """Lower bounds that make every problem of a run compile to one kernel shape."""

    front: int     # front padding (>= every offset action reward), a power of two
    chunks: int    # chunks of the largest unit (sizes the chunk table)
    cap: int       # state entries (>= every reach + 1)
    dtype: type    # np.int32 or np.int64


class Plan(NamedTuple):
    """Host-side packed schedule of a batch of problems (numpy)."""

    cost: np.ndarray     # int[problem, chunk] + [lane]: every problem's chunks in position order,
    reward: np.ndarray   # int32[problem, chunk, lane]   followed by `slots` zero chunks
    first: np.ndarray    # int64[problem, pos] first chunk of the unit at each position
    chunks: np.ndarray   # int32[problem, pos] chunks of the unit (0: none)
    tiles: np.ndarray    # int32[pos] shared tile count of each position
    blocks: tuple        # ((start, stop), ...) positions of each kernel call
    front: int
    cap: int             # state entries after the front (a power of two of tiles)
    dtype: type
    tile: int            # state entries per tile
    block: int           # units per kernel call
    slots: int           # chunk slots per kernel call


def plan(acts: Actions, *, tile: int | None = None, lanes: int | None = None,
         block: int | None = None, slots: int | None = None,
         min_cap: int = 0, min_front: int = 16, min_chunks: int = 1,
         max_total_cost: int | None = None, shape: Shape | None = None) -> Plan:
    """Order, pack and schedule the units of a batch of problems.

    Units without a non-identity action (a single action) add only their base
    reward and are left out. Each problem's units are sorted by `top / chunks`
    (ties by input order, so the schedule is deterministic). Units at the
    same position of different problems form one vmapped step; a block of
    positions is one kernel call, ending early when some problem's chunks
    would overflow the chunk table.

    Args:
      acts: pruned actions of `num_problems` problems.
      min_cap, min_front, min_chunks: lower bounds of the state capacity, the
        front padding and the largest unit's chunk count, so that the
        problems of a run share a single compiled shape.
      max_total_cost: an upper bound of every problem's total cost (its
        full-thinking tokens); selects int32 when below 2**30.
      shape: bounds for a whole run (overrides the three minimums and the dtype).
    """
    tile, lanes, block, slots = _defaults(tile, lanes, block, slots)
    if shape is not None:
        min_cap, min_front, min_chunks = shape.cap, shape.front, shape.chunks
    B = acts.num_problems
    nontriv = acts.count - 1
    use = np.flatnonzero(nontriv > 0)
    prob = acts.unit_problem[use]
    top = acts.top[use]
    nch = -(-nontriv[use] // lanes)
    # Per problem Smith order; lexsort's last key is the primary one.
    order = np.lexsort((use, top / nch, prob))
    use, prob, top, nch = use[order], prob[order], top[order], nch[order]
    per = np.bincount(prob, minlength=B)
    pos = np.arange(use.shape[0]) - np.repeat(np.cumsum(per) - per, per)
    npos = int(per.max()) if B and use.size else 0
    # Shared reach per position: the largest prefix sum of `top` in the batch.
    reach = np.zeros((B, npos), dtype=np.int64)
    reach[prob, pos] = top
    reach = np.cumsum(reach, axis=1).max(axis=0, initial=0)
    tiles = (-(-(reach + 1) // tile)).astype(np.int32)
    final_tiles = -(-(int(acts.top_total().max(initial=0)) + 1) // tile)
    cap = max(_next_pow2(final_tiles) * tile, _next_pow2(-(-min_cap // tile)) * tile)
    front = max(min_front, _next_pow2(int(acts.reward.max(initial=0))))
    slots = max(slots, min_chunks, int(nch.max(initial=1)))
    if max_total_cost is None:
        max_total_cost = int(isum(acts.unit_problem, acts.cost[acts.offsets[1:] - 1], B).max(initial=0))
    dtype = dtype_for(max_total_cost) if shape is None else shape.dtype
    if dtype == np.int32 and max_total_cost >= SENTINEL32:
        raise ArgumentError(f"int32 state cannot hold a total cost of {max_total_cost}")
    chunks = np.zeros((B, npos), dtype=np.int32)
    chunks[prob, pos] = nch
    # Chunks of each problem in position order; a unit's chunks are contiguous.
    csum = np.cumsum(chunks, axis=1, dtype=np.int64)
    first = csum - chunks
    total = int(csum[:, -1].max(initial=0)) if npos else 0
    cost = np.zeros((B, total + slots, lanes), dtype=dtype)
    reward = np.zeros((B, total + slots, lanes), dtype=np.int32)
    a_count = nontriv[use]
    a_start = np.cumsum(a_count) - a_count                    # exclusive prefix sums
    a_unit = np.repeat(np.arange(use.shape[0]), a_count)
    k = np.arange(a_unit.shape[0]) - np.repeat(a_start, a_count)   # action slot in the unit
    a_idx = acts.offsets[use][a_unit] + 1 + k                 # skip the identity action
    slot = first[prob[a_unit], pos[a_unit]] + k // lanes
    cost[prob[a_unit], slot, k % lanes] = acts.cost[a_idx]
    reward[prob[a_unit], slot, k % lanes] = acts.reward[a_idx]
    # Blocks: at most `block` positions whose chunks fit `slots` in every
    # problem (bounded through the per-position maximum over problems).
    worst = np.cumsum(chunks.max(axis=0, initial=0), dtype=np.int64)
    blocks, s = [], 0
    while s < npos:
        before = worst[s - 1] if s else 0
        e = min(s + block, int(np.searchsorted(worst, before + slots, side="right")))
        blocks.append((s, max(e, s + 1)))
        s = max(e, s + 1)
    return Plan(cost=cost, reward=reward, first=first, chunks=chunks, tiles=tiles,
                blocks=tuple(blocks), front=front, cap=cap, dtype=dtype, tile=tile,
                block=block, slots=slots)


def warm(shape: Shape, *, tile: int | None = None, lanes: int | None = None,
         block: int | None = None, slots: int | None = None) -> None:
    """Compile the unbatched kernel for `shape` (a call that updates no tile)."""
    tile, lanes, block, slots = _defaults(tile, lanes, block, slots)
    slots = max(slots, shape.chunks)
    cap = _next_pow2(-(-shape.cap // tile)) * tile          # as `plan` rounds it
    fn = _compiled(shape.front, tile, False)
    z = np.zeros(block, np.int32)
    blk = UnitBlock(np.zeros((slots, lanes), dtype=shape.dtype), np.zeros((slots, lanes), np.int32),
                    z, z, z)
    state = DPState(jax.device_put(initial_state(None, shape.front, cap, shape.dtype)))
    jax.block_until_ready(fn(state, blk))


def initial_state(batch: int | None, front: int, cap: int, dtype) -> np.ndarray:
    """`[front zeros | 0 | sentinel ...]`: before any unit, reward 0 is free."""
    sent = SENTINEL32 if dtype == np.int32 else SENTINEL64
    shape = (front + cap,) if batch is None else (batch, front + cap)
    buf = np.full(shape, sent, dtype=dtype)
    buf[..., :front + 1] = 0
    return buf


def block_inputs(p: Plan, start: int, stop: int) -> UnitBlock:
    """Host arrays of one kernel call, batched over problems: [problem, ...].

    The chunk table is each problem's chunks from its first unit in the
    block on (`slots` of them); positions past `stop` are padding units.
    """
    B = p.chunks.shape[0]
    n = stop - start
    c0 = p.first[:, start]                                   # [problem]
    idx = c0[:, None] + np.arange(p.slots)[None, :]
    rows = np.arange(B)[:, None]
    pad = p.block - n
    first = np.zeros((B, p.block), dtype=np.int32)
    first[:, :n] = p.first[:, start:stop] - c0[:, None]
    chunks = np.zeros((B, p.block), dtype=np.int32)
    chunks[:, :n] = p.chunks[:, start:stop]
    tiles = np.concatenate([p.tiles[start:stop], np.zeros(pad, dtype=np.int32)])
    return UnitBlock(p.cost[rows, idx], p.reward[rows, idx], first, chunks, tiles)


def run(p: Plan, *, batched: bool | None = None) -> jax.Array:
    """Execute a plan: the final buffers, int[problem, front + cap] when batched,
    else int[front + cap] (a device array; dispatch is asynchronous).

    Problems are vmapped when there is more than one (or `batched=True`);
    a single problem uses the unbatched kernel (no gathers on CPU).
    """
    B = p.chunks.shape[0]
    if batched is None:
        batched = B != 1
    fn = _compiled(p.front, p.tile, batched)
    # device_put, not jnp ops: no eager dispatch on the host path.
    state = DPState(jax.device_put(initial_state(B if batched else None, p.front, p.cap, p.dtype)))
    for start, stop in p.blocks:
        blk = block_inputs(p, start, stop)
        if not batched:
            blk = UnitBlock(blk.cost[0], blk.reward[0], blk.first[0], blk.chunks[0], blk.tiles)
        state = fn(state, blk)
    return state.buf


def solve(acts: Actions, *, tile: int | None = None, lanes: int | None = None,
          block: int | None = None, slots: int | None = None, min_cap: int = 0,
          max_total_cost: int | None = None, batched: bool | None = None) -> list[np.ndarray]:
    """Minimum-cost states of every problem in `acts`.

    Returns:
      per problem, `g` int64[top_total + 1]: the least total cost reaching an
      offset reward of at least `r` (add `acts.base_total()` for the reward).
      Non-decreasing, `g[0] = 0`, every entry reachable.
    """
    p = plan(acts, tile=tile, lanes=lanes, block=block, slots=slots, min_cap=min_cap,
             max_total_cost=max_total_cost)
    buf = np.asarray(run(p, batched=batched)).reshape((acts.num_problems, -1))
    tops = acts.top_total()
    return [buf[b, p.front:p.front + int(tops[b]) + 1].astype(np.int64)
            for b in range(acts.num_problems)]
