"""The exact frontier DP: min-plus combination of decision units on a reward-indexed state (SPEC §5).

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

Cost model (the numbers behind the defaults; measured on the 2-core CPU of
this project). Let a problem have units `u` with `A_u` pruned actions, offset
reward range `top_u = max reward - base reward`, `a_u = A_u - 1` non-identity
actions and `k_u = ceil(a_u / lanes)` chunks. Processing units in order, unit
`j` touches `t_j = ceil((sum_{i<=j} top_i + 1) / tile)` tiles, so

    element operations   E = sum_j  lanes * k_j * tile * t_j
                           ~ sum_j  a_j * (sum_{i<=j} top_i)        (add + min each)
    state memory         front + cap   int32 entries per problem,  cap >= sum_u top_u + 1
    unit tables          per block of `block` units: 2 * block * chunks * lanes entries

against the plain DP's `sum_j A_j * S` with a fixed state of `S = P * traj + 1`
entries. Three choices shrink `E`: offsetting rewards by the zero-cost action
(`top_u` instead of the unit's probes; ~45 % shorter final state on realistic
curves), growing the state with the units (the triangle factor ~1/2, at the
granularity of one tile instead of powers of two), and ordering units by
`top_u / k_u` ascending (Smith's rule for `sum_j w_j * prefix_j`: small reward
ranges with many actions first while the state is short; ~20 % fewer
operations than the input order). The action count enters only through the
dynamic chunk loop, so units are never padded to the worst unit and no
grouping by action count is needed. `int32` keeps the inner loop at twice the
SIMD width of `int64`; it is used whenever every problem's full-thinking
total is below `2**30` (then sentinel + any cost < `2**31`), else `int64`.

Only a few shapes are compiled: the buffer length (`front + cap`, `cap`
rounded up to a power of two of tiles), the block size, the chunk capacity
(a power of two) and the dtype; the unit count, the per-unit chunk count and
the growing reach are data. A second cell of the same padded shape reuses the
compiled kernel.

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

from ._units import Actions

# Exact integer DP: int64 is needed for totals past 2**30 and for the host
# side budget arithmetic; enable it where this kernel is imported.
jax.config.update("jax_enable_x64", True)

TILE = 4096
"""Default tile: large enough to amortize the loop overhead (~1 us per tile
iteration on CPU), small enough that the growth granularity wastes little."""
LANES = 4
"""Default actions per chunk (unrolled): DEE units have ~3 non-identity actions."""
BLOCK = 256
"""Default units per kernel call (scan length); padding units cost nothing."""

SENTINEL32 = 2 ** 30
SENTINEL64 = 2 ** 62


class DPState(NamedTuple):
    """Scan carry of the DP kernel."""

    buf: jax.Array  # int32|int64[front + cap]: `front` zeros, then g[0..cap-1] (sentinel = unreachable)


class UnitBlock(NamedTuple):
    """A block of units (scan inputs) in packed chunk form."""

    cost: jax.Array    # int32|int64[unit, chunk, lane] action cost (tokens); padding 0
    reward: jax.Array  # int32[unit, chunk, lane] offset action reward (probes); padding 0
    chunks: jax.Array  # int32[unit] chunks to apply (0: an identity/padding unit)
    tiles: jax.Array   # int32[unit] leading tiles of the state to rewrite (shared in a batch)


def _unit_step(buf: jax.Array, cost: jax.Array, reward: jax.Array, chunks: jax.Array,
               tiles: jax.Array, *, front: int, tile: int) -> jax.Array:
    """Combine one unit into the state buffer, in place, highest tile first."""
    lanes = cost.shape[-1]

    def do_tile(i, buf):
        lo = front + (tiles - 1 - i) * tile

        def do_chunk(j, new):
            cj, rj = cost[j], reward[j]
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
      block: units in packed form; `reward` <= `front`, `tiles * tile <= cap`.
      front, tile: static layout constants.
    """
    def step(buf, unit):
        c, r, k, t = unit
        return _unit_step(buf, c, r, k, t, front=front, tile=tile), None

    buf, _ = jax.lax.scan(step, state.buf, tuple(block))
    return DPState(buf)


@functools.cache
def _compiled(front: int, tile: int, batched: bool):
    """The jitted (and, for batches, vmapped) kernel; jit caches by shape and dtype."""
    fn = functools.partial(scan_units, front=front, tile=tile)
    if batched:
        fn = jax.vmap(fn, in_axes=(DPState(0), UnitBlock(0, 0, 0, None)))
    return jax.jit(fn, donate_argnums=0)


def _defaults(tile, lanes, block):
    """Module defaults read at call time (tests shrink them to exercise many tiles/blocks)."""
    return (TILE if tile is None else tile, LANES if lanes is None else lanes,
            BLOCK if block is None else block)


def _next_pow2(x: int) -> int:
    return 1 << max(int(x) - 1, 0).bit_length()


class Shape(NamedTuple):
    """Lower bounds that make every problem of a run compile to one kernel shape."""

    front: int     # front padding (>= every offset action reward), a power of two
    chunks: int    # chunk capacity per unit, a power of two
    cap: int       # state entries (>= every reach + 1)
    dtype: type    # np.int32 or np.int64


def dtype_for(max_total_cost: int) -> type:
    """int32 while sentinel + any cost stays below 2**31 (every total < 2**30), else int64."""
    return np.int32 if max_total_cost < SENTINEL32 else np.int64


class Plan(NamedTuple):
    """Host-side packed schedule of a batch of problems (numpy)."""

    cost: np.ndarray     # int[problem, pos, chunk, lane]
    reward: np.ndarray   # int32[problem, pos, chunk, lane]
    chunks: np.ndarray   # int32[problem, pos]
    tiles: np.ndarray    # int32[pos] shared tile count of each position
    front: int
    cap: int             # state entries after the front (a multiple of the tile)
    dtype: type
    tile: int            # state entries per tile
    block: int           # units per kernel call


def plan(acts: Actions, *, tile: int | None = None, lanes: int | None = None,
         block: int | None = None,
         min_cap: int = 0, min_front: int = 16, min_chunks: int = 1,
         max_total_cost: int | None = None, shape: Shape | None = None) -> Plan:
    """Order, pack and schedule the units of a batch of problems.

    Units without a non-identity action (a single action) add only their base
    reward and are left out. Each problem's units are sorted by `top / chunks`
    (ties by input order, so the schedule is deterministic).

    Args:
      acts: pruned actions of `num_problems` problems.
      min_cap, min_front, min_chunks: lower bounds of the state capacity, the
        front padding and the chunk capacity, so that the problems of one run
        share a single compiled shape (see `shape_bounds`).
      max_total_cost: an upper bound of every problem's total cost (its
        full-thinking tokens); selects int32 when below 2**30.
      shape: bounds for a whole run (overrides the three minimums and the dtype).
    """
    tile, lanes, block = _defaults(tile, lanes, block)
    if shape is not None:
        min_cap, min_front, min_chunks = shape.cap, shape.front, shape.chunks
    B = acts.num_problems
    count = acts.count
    nontriv = count - 1
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
    npos_pad = max(block, -(-npos // block) * block)
    # Shared reach per position: the largest prefix sum of `top` in the batch.
    reach = np.zeros((B, npos_pad), dtype=np.int64)
    reach[prob, pos] = top
    reach = np.cumsum(reach, axis=1).max(axis=0)
    tiles = -(-(reach + 1) // tile)
    tiles[npos:] = 0                                  # padding positions: identity
    final_tiles = -(-(int(acts.top_total().max(initial=0)) + 1) // tile)
    cap = max(_next_pow2(final_tiles) * tile, _next_pow2(-(-min_cap // tile)) * tile)
    front = max(min_front, _next_pow2(int(acts.reward.max(initial=0))))
    if max_total_cost is None:
        max_total_cost = int(np.bincount(acts.unit_problem, weights=acts.cost[acts.offsets[1:] - 1],
                                         minlength=B).max(initial=0))
    dtype = dtype_for(max_total_cost) if shape is None else shape.dtype
    if dtype == np.int32 and max_total_cost >= SENTINEL32:
        raise ValueError(f"int32 state cannot hold a total cost of {max_total_cost}")
    nc = max(min_chunks, _next_pow2(int(nch.max(initial=1))))
    cost = np.zeros((B, npos_pad, nc, lanes), dtype=dtype)
    reward = np.zeros((B, npos_pad, nc, lanes), dtype=np.int32)
    chunks = np.zeros((B, npos_pad), dtype=np.int32)
    chunks[prob, pos] = nch
    # Scatter each unit's non-identity actions (all but the first) into lanes.
    a_count = nontriv[use]
    a_unit = np.repeat(np.arange(use.shape[0]), a_count)
    a_start = np.cumsum(a_count) - a_count            # exclusive prefix sums
    k = np.arange(a_unit.shape[0]) - np.repeat(a_start, a_count)   # action slot in the unit
    a_idx = acts.offsets[use][a_unit] + 1 + k
    cost[prob[a_unit], pos[a_unit], k // lanes, k % lanes] = acts.cost[a_idx]
    reward[prob[a_unit], pos[a_unit], k // lanes, k % lanes] = acts.reward[a_idx]
    return Plan(cost=cost, reward=reward, chunks=chunks, tiles=tiles.astype(np.int32),
                front=front, cap=cap, dtype=dtype, tile=tile, block=block)


def warm(shape: Shape, *, tile: int | None = None, lanes: int | None = None,
         block: int | None = None) -> None:
    """Compile the unbatched kernel for `shape` (a call that updates no tile)."""
    tile, lanes, block = _defaults(tile, lanes, block)
    front = shape.front
    cap = _next_pow2(-(-shape.cap // tile)) * tile          # as `plan` rounds it
    fn = _compiled(front, tile, False)
    z = np.zeros((block, shape.chunks, lanes), dtype=shape.dtype)
    blk = UnitBlock(z, z.astype(np.int32), np.zeros(block, np.int32), np.zeros(block, np.int32))
    jax.block_until_ready(fn(DPState(jax.device_put(initial_state(None, front, cap, shape.dtype))), blk))


def initial_state(batch: int | None, front: int, cap: int, dtype) -> np.ndarray:
    """`[front zeros | 0 | sentinel ...]`: before any unit, reward 0 is free."""
    sent = SENTINEL32 if dtype == np.int32 else SENTINEL64
    shape = (front + cap,) if batch is None else (batch, front + cap)
    buf = np.full(shape, sent, dtype=dtype)
    buf[..., :front + 1] = 0
    return buf


def run(p: Plan, *, batched: bool | None = None) -> jax.Array:
    """Execute a plan: the final buffers, int[problem, front + cap] when batched,
    else int[front + cap] (a device array; dispatch is asynchronous).

    Problems are vmapped when there is more than one (or `batched=True`);
    a single problem uses the unbatched kernel (no gathers on CPU).
    """
    tile, block = p.tile, p.block
    B, npos = p.chunks.shape
    if batched is None:
        batched = B != 1
    fn = _compiled(p.front, tile, batched)
    # device_put, not jnp ops: no eager dispatch on the host path.
    state = DPState(jax.device_put(initial_state(B if batched else None, p.front, p.cap, p.dtype)))
    for s in range(0, npos, block):
        sl = slice(s, s + block)
        if not p.tiles[sl].any():
            break                                  # the rest is padding
        if batched:
            blk = UnitBlock(p.cost[:, sl], p.reward[:, sl], p.chunks[:, sl], p.tiles[sl])
        else:
            blk = UnitBlock(p.cost[0, sl], p.reward[0, sl], p.chunks[0, sl], p.tiles[sl])
        state = fn(state, blk)
    return state.buf


def solve(acts: Actions, *, tile: int | None = None, lanes: int | None = None,
          block: int | None = None, min_cap: int = 0, max_total_cost: int | None = None,
          batched: bool | None = None) -> list[np.ndarray]:
    """Minimum-cost states of every problem in `acts`.

    Returns:
      per problem, `g` int64[top_total + 1]: the least total cost reaching an
      offset reward of at least `r` (add `acts.base_total()` for the reward).
      Non-decreasing, `g[0] = 0`, every entry reachable.
    """
    p = plan(acts, tile=tile, lanes=lanes, block=block, min_cap=min_cap,
             max_total_cost=max_total_cost)
    buf = np.asarray(run(p, batched=batched)).reshape((acts.num_problems, -1))
    tops = acts.top_total()
    return [buf[b, p.front:p.front + int(tops[b]) + 1].astype(np.int64)
            for b in range(acts.num_problems)]
