"""The exact frontier DP in NumPy, for the point estimate on any machine (docs/rules.md).

The same recurrence as `_dp` (the JAX kernel that serves the bootstrap on
an accelerator) and `_cpu` (numba), on one problem at a time:

    g'[r] = min_a ( g[max(r - r_a, 0)] + c_a ),

`g[r]` the least cost reaching an offset reward of at least `r`. Why a
third copy: `otbench frontier` solves each cell once, and on a CPU the
process start of JAX (importing it, ~1.3 s on two shared cores, and
compiling the kernel, ~0.7 s) cost more than the whole DP. These passes
are NumPy's own vectorized integer loops, so nothing is imported or
compiled beyond NumPy.

What keeps it fast, as in `_cpu`: rewards offset by each unit's zero-cost
action (the state spans the reward tokens can buy, 25-32 % of the probes
on the paper-scale set); the state grows with the units (`reach`, the sum
of the offset rewards combined so far), never rounded to tiles; units in
Smith order (`top / a` ascending, `a` the non-identity actions: a pass per
action over `reach` entries, so `sum_j a_j * reach_j` is least); two
buffers, `front` zeros before `g[0]` so a shifted read never leaves them,
and a scratch row for the shifted sums (no allocation in the loop).
Entries past `reach` are never written, so they keep the sentinel: a
reward not yet reachable.

Exact integer arithmetic throughout, so the result is `_dp`'s and `_cpu`'s
bit for bit, whatever the unit order (tests compare all three with a plain
Python DP and brute force). The state is int32 where `_dp.dtype_for`
allows it (half the memory traffic of int64): every value is a real cost
(< 2**30) or the sentinel 2**30, and a sum of the two stays below 2**31;
the identity action is in every minimum, so no entry exceeds the sentinel.
"""

import numpy as np

from ._units import Actions
from otbench.errors import ArgumentError

SENTINEL32 = 2 ** 30           # here, not in `_dp`: `_dp` loads JAX; `_dp` and `_cpu` import them
SENTINEL64 = 2 ** 62


def dtype_for(max_total_cost: int) -> type:
    """int32 while sentinel + any cost stays below 2**31 (every total < 2**30), else int64."""
    return np.int32 if max_total_cost < SENTINEL32 else np.int64


def solve(acts: Actions, problem: int = 0, *, dtype=None) -> np.ndarray:
    """The least-cost state of one problem of `acts`.

    Args:
      acts: pruned actions (`_units`); only the units of `problem` are used.
      dtype: np.int32 or np.int64 (default: `dtype_for` the problem's total cost).

    Returns:
      `g` int64[top_total + 1]: the least total cost reaching an offset reward
      of at least `r` (add the problem's base reward for the reward).
      Non-decreasing, `g[0] = 0`, every entry reachable.
    """
    units = np.flatnonzero(acts.unit_problem == problem)
    off = acts.offsets
    count = off[units + 1] - off[units]
    total_cost = int(acts.cost[off[units + 1] - 1].sum())    # every unit at its last action
    if dtype is None:
        dtype = dtype_for(total_cost)
    if dtype == np.int32 and total_cost >= SENTINEL32:
        raise ArgumentError(f"int32 state cannot hold a total cost of {total_cost}")
    sent = SENTINEL32 if dtype == np.int32 else SENTINEL64
    use = units[count > 1]                            # a single action adds only its base
    a = count[count > 1] - 1
    top = acts.reward[off[use + 1] - 1]
    total = int(top.sum())
    if use.size == 0:
        return np.zeros(total + 1, dtype=np.int64)
    # Smith order; a stable sort keeps ties in input order (any order gives the same g).
    order = np.argsort(top / a, kind="stable")
    use, top = use[order], top[order]
    tops = top.tolist()
    front = int(top.max())                            # rewards rise within a unit
    g = np.full(front + total + 1, sent, dtype=dtype)
    g[:front + 1] = 0
    h = g.copy()
    tmp = np.empty(total + 1, dtype=dtype)
    costs = acts.cost.astype(dtype)                   # int32 lanes when the state is int32
    rewards = acts.reward.tolist()
    cost_list = costs.tolist()
    starts, stops = (off[use] + 1).tolist(), off[use + 1].tolist()
    reach = 0
    add, minimum = np.add, np.minimum
    for j, (lo, hi) in enumerate(zip(starts, stops)):
        reach += tops[j]
        n = reach + 1
        g0 = g[front:front + n]
        hv = h[front:front + n]
        s = front - rewards[lo]
        add(g[s:s + n], dtype(cost_list[lo]), out=hv)
        minimum(hv, g0, out=hv)
        t = tmp[:n]
        for i in range(lo + 1, hi):
            s = front - rewards[i]
            add(g[s:s + n], dtype(cost_list[i]), out=t)
            minimum(hv, t, out=hv)
        g, h = h, g
    return g[front:front + total + 1].astype(np.int64)


def state_bytes(ms) -> tuple[int, str]:
    """The largest per-cell DP state of `ms` (bytes) and the `model/group` cell it belongs to.

    The exact DP's state spans every attainable reward of a cell: one int32
    entry per probe of each trajectory, rounded up to a power of two. It
    dominates a frontier's memory, so it is what callers estimate before
    anything is allocated (per replicate in flight for the bootstrap).
    """
    per_cell = np.bincount(ms.cell, weights=ms.probes.astype(np.float64), minlength=ms.num_cells)
    c = int(np.argmax(per_cell))
    entries = 1 << int(per_cell[c] + 1).bit_length()
    m, g = ms.cell_name(c)
    return 4 * entries, f"{m}/{g}"
