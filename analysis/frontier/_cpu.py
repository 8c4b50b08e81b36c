"""CPU kernels of the frontier bootstrap: units, pruning, DP and budget queries in one pass (docs/rules.md).

The JAX pipeline (`_pipeline.Runner`, `_dp`) stays the accelerator path. On
a CPU the host, not the DP, was most of a replicate's time (rebuilding the
resampled units with NumPy over every occurrence, then packing plans), so
this module does a replicate's whole frontier in one compiled loop, with
numba, replicates in parallel over the cores:

* per cell, once: every trajectory's pruned DEE actions (`_units.dee_actions`
  on the point occurrences), the DR sums' per-trajectory terms, and the FB
  step events of each question sorted by `L` (`_units.fb_events`);
* per replicate: DEE units are a gather of the drawn trajectories' actions;
  DR units are two sums per occurrence; FB units walk their question's
  sorted events once with the drawn multiplicities, emitting the candidate
  at the last event of each distinct cap and pruning on the fly exactly as
  `_units.prune_sorted` does;
* the DP is `_dp`'s recurrence `g'[r] = min_a g[max(r - r_a, 0)] + c_a`
  on a state `[front zeros | g[0..reach]]` that grows by each unit's offset
  reward range, without tile or lane rounding, units in Smith order
  (`top / w` ascending, `w` the unit's loads and stores per state entry:
  `sum_j w_j * reach_j` is then least); up to four actions share one
  vectorizable pass between two buffers;
* the budget queries are binary searches on the final `g`.

The state is int32 where `_dp.dtype_for` allows it (twice the SIMD lanes of
int64), else int64; in both the sentinel plus any cost fits the type. Every
step is exact integer arithmetic, so the result is that of the JAX path bit
for bit, whatever the unit order or the number of threads (tests check it
against `_units`, `_dp` and a plain Python DP).

Without numba the functions run as plain Python (slow; the pipeline then
uses the JAX path).
"""

# The min/max below stay explicit comparisons: in the hot loops they keep numba's integer
# types (int32 state lanes) as measured; the builtins would unify them first.
# ruff: noqa: FURB136, PLR1730

import dataclasses
import functools
import threading

import numpy as np

from . import _dp
from ._units import CellData, dee_actions, fb_events
from otbench.errors import ArgumentError

try:                                     # optional: the CPU fast path
    import numba
except ImportError:                      # pragma: no cover - exercised where numba is absent
    numba = None


def available() -> bool:
    """True when numba is installed (the CPU kernels are compiled)."""
    return numba is not None


def _jit(parallel=False):
    def wrap(fn):
        if numba is None:
            return fn
        return numba.njit(cache=True, nogil=True, parallel=parallel, boundscheck=False)(fn)
    return wrap


_prange = range if numba is None else numba.prange


@dataclasses.dataclass(frozen=True)
class CPUCell:
    """Per-cell tables of the CPU kernels (cell-local rows; int64 unless noted)."""

    Lend: np.ndarray       # [traj] L(n): full-thinking tokens
    Cend: np.ndarray       # [traj] C(n)
    C0: np.ndarray         # [traj] C(0)
    zero: np.ndarray       # [traj] C at the latest position with L = 0 (DR's zero action)
    probes: np.ndarray     # [traj]
    d_off: np.ndarray      # [traj + 1] DEE action range of each trajectory
    d_cost: np.ndarray     # [action] DEE action cost (identity included, first)
    d_rew: np.ndarray      # [action] offset reward
    d_base: np.ndarray     # [traj] DEE base reward
    eoff: np.ndarray       # [question + 1] FB event range (events sorted by L per question)
    erow: np.ndarray       # [event] cell-local row
    evalue: np.ndarray     # [event] L at the event (the cap that reaches it)
    edL: np.ndarray        # [event] change of retained tokens
    edC: np.ndarray        # [event] change of correct probes


def cpu_cell(d: CellData, events=None) -> CPUCell:
    """The per-cell tables from `CellData` (every table computed once per run)."""
    ev = fb_events(d) if events is None else events
    dee = dee_actions(d, d.point())
    k0 = (d.L == 0).sum(axis=1) - 1
    rows = np.arange(d.L.shape[0])
    i64 = functools.partial(np.ascontiguousarray, dtype=np.int64)
    return CPUCell(Lend=i64(d.L[:, -1]), Cend=i64(d.C[:, -1]), C0=i64(d.C[:, 0]),
                   zero=i64(d.C[rows, k0]), probes=i64(d.probes),
                   d_off=i64(dee.offsets), d_cost=i64(dee.cost), d_rew=i64(dee.reward),
                   d_base=i64(dee.base), eoff=i64(ev.eoff), erow=i64(ev.row),
                   evalue=i64(ev.value), edL=i64(ev.dL), edC=i64(ev.dC))


# -- pruning (SPEC §5, as `_units.prune_sorted`) ------------------------------------------


@_jit()
def _prune_into(cand_c, cand_r, n, out_c, out_r):
    """Prune `n` candidates sorted by cost: per cost the best reward, then strictly rising.

    Writes the kept (cost, reward) to `out_c`, `out_r`; returns how many.
    """
    k = 0
    i = 0
    best = np.int64(-1)
    while i < n:
        c = cand_c[i]
        r = cand_r[i]
        i += 1
        while i < n and cand_c[i] == c:        # one candidate per cost: its best reward
            if cand_r[i] > r:
                r = cand_r[i]
            i += 1
        if k == 0 or r > best:                 # rewards non-negative; the first run is kept
            out_c[k] = c
            out_r[k] = r
            k += 1
            best = r
    return k


# -- units of one replicate ---------------------------------------------------------------


@_jit()
def dee_units(loc, d_off, d_cost, d_rew, d_base):
    """DEE units of one replicate: every draw is a unit with its trajectory's actions.

    Args:
      loc: int64[slot, draw] cell-local rows drawn (-1: none).

    Returns:
      (base, u_off int64[unit + 1], a_cost, a_rew): non-identity actions only;
      units with no such action are left out (they add only their base).
    """
    S, D = loc.shape
    base = np.int64(0)
    nu = 0
    na = 0
    for s in range(S):
        for d in range(D):
            t = loc[s, d]
            if t < 0:
                continue
            base += d_base[t]
            k = d_off[t + 1] - d_off[t] - 1
            if k > 0:
                nu += 1
                na += k
    u_off = np.zeros(nu + 1, dtype=np.int64)
    a_cost = np.empty(na, dtype=np.int64)
    a_rew = np.empty(na, dtype=np.int64)
    u = 0
    a = 0
    for s in range(S):
        for d in range(D):
            t = loc[s, d]
            if t < 0:
                continue
            lo = d_off[t] + 1
            hi = d_off[t + 1]
            if hi <= lo:
                continue
            for i in range(lo, hi):
                a_cost[a] = d_cost[i]
                a_rew[a] = d_rew[i]
                a += 1
            u += 1
            u_off[u] = a
    return base, u_off, a_cost, a_rew


@_jit()
def dr_units(loc, zero, Lend, Cend):
    """DR units of one replicate: per occurrence all-zero or all-full (`_units.dr_actions`)."""
    S, D = loc.shape
    base = np.int64(0)
    u_off = np.zeros(S + 1, dtype=np.int64)
    a_cost = np.empty(S, dtype=np.int64)
    a_rew = np.empty(S, dtype=np.int64)
    cc = np.empty(2, dtype=np.int64)
    cr = np.empty(2, dtype=np.int64)
    oc = np.empty(2, dtype=np.int64)
    orw = np.empty(2, dtype=np.int64)
    u = 0
    for s in range(S):
        if loc[s, 0] < 0:
            continue
        zr = np.int64(0)
        fc = np.int64(0)
        fr = np.int64(0)
        for d in range(D):
            t = loc[s, d]
            if t >= 0:
                zr += zero[t]
                fc += Lend[t]
                fr += Cend[t]
        cc[0], cr[0], cc[1], cr[1] = 0, zr, fc, fr
        k = _prune_into(cc, cr, 2, oc, orw)
        base += orw[0]
        if k > 1:
            a_cost[u] = oc[1]
            a_rew[u] = orw[1] - orw[0]
            u += 1
            u_off[u] = u
    return base, u_off[:u + 1], a_cost[:u], a_rew[:u]


@_jit()
def _fb_candidates(drawn, q, C0, eoff, erow, evalue, edL, edC, mult, cand_c, cand_r):
    """Candidates (cost, reward) of one FB occurrence of question `q`, one per distinct cap."""
    cr = np.int64(0)
    for t in drawn:
        if t >= 0:
            mult[t] += 1
            cr += C0[t]
    cc = np.int64(0)
    n = 0
    value = np.int64(0)
    for e in range(eoff[q], eoff[q + 1]):
        if evalue[e] != value:          # past the last event of the previous cap
            cand_c[n] = cc
            cand_r[n] = cr
            n += 1
            value = evalue[e]
        w = mult[erow[e]]
        cc += w * edL[e]
        cr += w * edC[e]
    cand_c[n] = cc
    cand_r[n] = cr
    for t in drawn:
        if t >= 0:
            mult[t] = 0
    return n + 1


@_jit()
def fb_units(loc, local_q, C0, eoff, erow, evalue, edL, edC, mult):
    """FB units of one replicate: each occurrence walks its question's events in L order.

    The cap `c`'s cost and reward are the base (all at `k = 0`) plus the
    multiplicity-weighted changes of every event with `L <= c`; a candidate
    is taken after the last event of each distinct `L` (cap 0 included: it
    counts zero-length leading steps), then pruned (`_units.fb_actions`).

    Args:
      mult: int64[traj] zeros (scratch; returned to zeros).
    """
    S = loc.shape[0]
    na = 0
    for s in range(S):
        t0 = loc[s, 0]
        if t0 >= 0:
            q = local_q[t0]
            na += eoff[q + 1] - eoff[q] + 1
    u_off = np.zeros(S + 1, dtype=np.int64)
    a_cost = np.empty(na, dtype=np.int64)
    a_rew = np.empty(na, dtype=np.int64)
    cand_c = np.empty(na, dtype=np.int64)
    cand_r = np.empty(na, dtype=np.int64)
    out_c = np.empty(na, dtype=np.int64)
    out_r = np.empty(na, dtype=np.int64)
    base = np.int64(0)
    u = 0
    a = 0
    for s in range(S):
        t0 = loc[s, 0]
        if t0 < 0:
            continue
        n = _fb_candidates(loc[s], local_q[t0], C0, eoff, erow, evalue, edL, edC, mult,
                           cand_c, cand_r)
        k = _prune_into(cand_c, cand_r, n, out_c, out_r)
        base += out_r[0]
        if k > 1:
            for i in range(1, k):
                a_cost[a] = out_c[i]
                a_rew[a] = out_r[i] - out_r[0]
                a += 1
            u += 1
            u_off[u] = a
    return base, u_off[:u + 1], a_cost[:a], a_rew[:a]


# -- the DP and the queries ---------------------------------------------------------------


# -- one unit: fused passes of up to 4 actions ---------------------------------------------
# `hh[r] = min(src[r], g[r - r_a] + c_a)` over the unit's actions, up to 4 per
# pass, so a pass loads and stores the state once for several actions. The first pass
# reads the old state `g0` and writes the other buffer `hh`; later passes update `hh`
# through the same array argument, which keeps the loops vectorizable (a separate
# `src` that may alias `hh` would not be).


@_jit()
def _first4(hh, g0, a0, a1, a2, a3, c0, c1, c2, c3, n):
    for r in range(n):
        y = g0[r]
        x = a0[r] + c0
        y = x if x < y else y
        x = a1[r] + c1
        y = x if x < y else y
        x = a2[r] + c2
        y = x if x < y else y
        x = a3[r] + c3
        hh[r] = x if x < y else y


@_jit()
def _later4(hh, a0, a1, a2, a3, c0, c1, c2, c3, n):
    for r in range(n):
        y = hh[r]
        x = a0[r] + c0
        y = x if x < y else y
        x = a1[r] + c1
        y = x if x < y else y
        x = a2[r] + c2
        y = x if x < y else y
        x = a3[r] + c3
        hh[r] = x if x < y else y


@_jit()
def _first3(hh, g0, a0, a1, a2, c0, c1, c2, n):
    for r in range(n):
        y = g0[r]
        x = a0[r] + c0
        y = x if x < y else y
        x = a1[r] + c1
        y = x if x < y else y
        x = a2[r] + c2
        hh[r] = x if x < y else y


@_jit()
def _later3(hh, a0, a1, a2, c0, c1, c2, n):
    for r in range(n):
        y = hh[r]
        x = a0[r] + c0
        y = x if x < y else y
        x = a1[r] + c1
        y = x if x < y else y
        x = a2[r] + c2
        hh[r] = x if x < y else y


@_jit()
def _first2(hh, g0, a0, a1, c0, c1, n):
    for r in range(n):
        y = g0[r]
        x = a0[r] + c0
        y = x if x < y else y
        x = a1[r] + c1
        hh[r] = x if x < y else y


@_jit()
def _later2(hh, a0, a1, c0, c1, n):
    for r in range(n):
        y = hh[r]
        x = a0[r] + c0
        y = x if x < y else y
        x = a1[r] + c1
        hh[r] = x if x < y else y


@_jit()
def _first1(hh, g0, a0, c0, n):
    for r in range(n):
        y = g0[r]
        x = a0[r] + c0
        hh[r] = x if x < y else y


@_jit()
def _later1(hh, a0, c0, n):
    for r in range(n):
        y = hh[r]
        x = a0[r] + c0
        hh[r] = x if x < y else y


@_jit()
def _combine(g, h, front, n, a_rew, a_cost, lo, hi, cast):
    """Write into `h[front:front + n]` the state `g` combined with actions `lo..hi-1`."""
    g0 = g[front:front + n]
    hh = h[front:front + n]
    i = lo
    while i < hi:
        k = min(4, hi - i)
        for m in range(k):
            cast[m] = a_cost[i + m]
        a0 = g[front - a_rew[i]:front - a_rew[i] + n]
        if k == 4:
            a1 = g[front - a_rew[i + 1]:front - a_rew[i + 1] + n]
            a2 = g[front - a_rew[i + 2]:front - a_rew[i + 2] + n]
            a3 = g[front - a_rew[i + 3]:front - a_rew[i + 3] + n]
            if i == lo:
                _first4(hh, g0, a0, a1, a2, a3, cast[0], cast[1], cast[2], cast[3], n)
            else:
                _later4(hh, a0, a1, a2, a3, cast[0], cast[1], cast[2], cast[3], n)
        elif k == 3:
            a1 = g[front - a_rew[i + 1]:front - a_rew[i + 1] + n]
            a2 = g[front - a_rew[i + 2]:front - a_rew[i + 2] + n]
            if i == lo:
                _first3(hh, g0, a0, a1, a2, cast[0], cast[1], cast[2], n)
            else:
                _later3(hh, a0, a1, a2, cast[0], cast[1], cast[2], n)
        elif k == 2:
            a1 = g[front - a_rew[i + 1]:front - a_rew[i + 1] + n]
            if i == lo:
                _first2(hh, g0, a0, a1, cast[0], cast[1], n)
            else:
                _later2(hh, a0, a1, cast[0], cast[1], n)
        elif i == lo:
            _first1(hh, g0, a0, cast[0], n)
        else:
            _later1(hh, a0, cast[0], n)
        i += k


@_jit()
def solve_state(u_off, a_cost, a_rew, sentinel):
    """Min-plus DP over the units: `g[0..total]`, the least cost of an offset reward of at least `r`.

    Args:
      u_off, a_cost, a_rew: non-identity actions of each unit (offset rewards >= 1).
      sentinel: int32 or int64 scalar: the state's type and its unreachable value.
    """
    U = u_off.shape[0] - 1
    top = np.zeros(U, dtype=np.int64)
    key = np.zeros(U, dtype=np.float64)
    front = np.int64(0)
    total = np.int64(0)
    for j in range(U):
        lo, hi = u_off[j], u_off[j + 1]
        for i in range(lo, hi):
            if a_rew[i] > front:
                front = a_rew[i]
        top[j] = a_rew[hi - 1]                 # rewards rise within a unit
        total += top[j]
        # Smith's rule for sum_j w_j * reach_j: a unit costs, per state entry, a load
        # per action plus a load and a store per fused pass (up to 4 actions).
        a = hi - lo
        passes = -(-a // 4)
        key[j] = top[j] / (a + 2 * passes)
    order = np.argsort(key, kind="mergesort")
    size = front + total + 1
    g = np.full(size, sentinel)
    g[:front + 1] = 0
    h = g.copy()
    cast = np.full(4, sentinel)                # costs in the state's type (int32 keeps its lanes)
    reach = np.int64(0)
    for jj in range(U):
        j = order[jj]
        reach += top[j]
        _combine(g, h, front, reach + 1, a_rew, a_cost, u_off[j], u_off[j + 1], cast)
        g, h = h, g
    return g[front:front + total + 1]


@_jit()
def solve_query(u_off, a_cost, a_rew, budgets, sentinel, out):
    """`solve_state`, then `out[i]` = largest offset reward with cost <= `budgets[i]` (int64[query])."""
    final = solve_state(u_off, a_cost, a_rew, sentinel)
    total = final.shape[0] - 1
    for i in range(budgets.shape[0]):
        # searchsorted(final, budget, 'right') - 1: final is non-decreasing, final[0] = 0
        b = budgets[i]
        lo, hi = 0, total + 1
        while lo < hi:
            mid = (lo + hi) >> 1
            if final[mid] <= b:
                lo = mid + 1
            else:
                hi = mid
        out[i] = lo - 1


@_jit(parallel=True)
def _dee_batch(loc, d_off, d_cost, d_rew, d_base, budgets, sentinel, out):
    for b in _prange(loc.shape[0]):
        base, u_off, c, r = dee_units(loc[b], d_off, d_cost, d_rew, d_base)
        solve_query(u_off, c, r, budgets[b], sentinel, out[b])
        out[b] += base


@_jit(parallel=True)
def _dr_batch(loc, zero, Lend, Cend, budgets, sentinel, out):
    for b in _prange(loc.shape[0]):
        base, u_off, c, r = dr_units(loc[b], zero, Lend, Cend)
        solve_query(u_off, c, r, budgets[b], sentinel, out[b])
        out[b] += base


@_jit(parallel=True)
def _fb_batch(loc, local_q, C0, eoff, erow, evalue, edL, edC, budgets, sentinel, out):
    T = local_q.shape[0]
    for b in _prange(loc.shape[0]):
        mult = np.zeros(T, dtype=np.int64)
        base, u_off, c, r = fb_units(loc[b], local_q, C0, eoff, erow, evalue, edL, edC, mult)
        solve_query(u_off, c, r, budgets[b], sentinel, out[b])
        out[b] += base


@_jit()
def _area_into(base, u_off, a_cost, a_rew, tokens, sentinel, out):
    """`out[0]` = `∫_0^T F(b) db` of the frontier step `F` (largest reward with least cost <= b),
    exact in reward x tokens; `out[1]` = `F(0)` (what a cell without thinking tokens scores).

    With `g` non-decreasing, `∫_0^T F = base * T + sum_{r >= 1} max(0, T - g[r])`: offset
    reward level `r` is held on `[g[r], T]`.
    """
    final = solve_state(u_off, a_cost, a_rew, sentinel)
    area = base * tokens
    at0 = 0
    for r in range(1, final.shape[0]):
        c = np.int64(final[r])
        if c >= tokens:
            break
        area += tokens - c
    while at0 + 1 < final.shape[0] and final[at0 + 1] <= 0:
        at0 += 1
    out[0] = area
    out[1] = base + at0


@_jit(parallel=True)
def _dee_area(loc, d_off, d_cost, d_rew, d_base, tokens, sentinel, out):
    for b in _prange(loc.shape[0]):
        base, u_off, c, r = dee_units(loc[b], d_off, d_cost, d_rew, d_base)
        _area_into(base, u_off, c, r, tokens[b], sentinel, out[b])


@_jit(parallel=True)
def _dr_area(loc, zero, Lend, Cend, tokens, sentinel, out):
    for b in _prange(loc.shape[0]):
        base, u_off, c, r = dr_units(loc[b], zero, Lend, Cend)
        _area_into(base, u_off, c, r, tokens[b], sentinel, out[b])


@_jit(parallel=True)
def _fb_area(loc, local_q, C0, eoff, erow, evalue, edL, edC, tokens, sentinel, out):
    T = local_q.shape[0]
    for b in _prange(loc.shape[0]):
        mult = np.zeros(T, dtype=np.int64)
        base, u_off, c, r = fb_units(loc[b], local_q, C0, eoff, erow, evalue, edL, edC, mult)
        _area_into(base, u_off, c, r, tokens[b], sentinel, out[b])


_LAUNCH = threading.Lock()
"""numba's default thread pool must not be entered from two threads at once."""


def sentinel(dtype) -> np.generic:
    """The state's unreachable value in its type (`_dp.SENTINEL32` / `_dp.SENTINEL64`)."""
    return np.int32(_dp.SENTINEL32) if dtype == np.int32 else np.int64(_dp.SENTINEL64)


def frontier_batch(strategy: str, cell: CPUCell, local_q: np.ndarray, loc: np.ndarray,
                   budgets: np.ndarray, dtype) -> np.ndarray:
    """int64[rep, query] best total reward at each budget, for a batch of replicates.

    Args:
      loc: int64[rep, slot, draw] cell-local rows drawn (-1: none; a slot
        without a first draw has no occurrence).
      budgets: int64[rep, query] exact budgets (`_budgets.budgets`).
      dtype: the state type (`_dp.dtype_for` of a bound on every total cost).
    """
    loc = np.ascontiguousarray(loc, dtype=np.int64)
    budgets = np.ascontiguousarray(budgets, dtype=np.int64)
    out = np.zeros(budgets.shape, dtype=np.int64)
    sent = sentinel(dtype)
    with _LAUNCH:
        _launch(strategy, cell, local_q, loc, budgets, sent, out)
    return out


def _launch(strategy, cell, local_q, loc, budgets, sent, out) -> None:
    if strategy == "dee":
        _dee_batch(loc, cell.d_off, cell.d_cost, cell.d_rew, cell.d_base, budgets, sent, out)
    elif strategy == "dr":
        _dr_batch(loc, cell.zero, cell.Lend, cell.Cend, budgets, sent, out)
    elif strategy == "fb":
        _fb_batch(loc, local_q, cell.C0, cell.eoff, cell.erow, cell.evalue, cell.edL,
                  cell.edC, budgets, sent, out)
    else:
        raise ArgumentError(f"unknown strategy {strategy!r}")


def totals_batch(cell: CPUCell, loc: np.ndarray) -> dict[str, np.ndarray]:
    """Per replicate int64 totals of the draws: tokens `T`, probes, endpoint (as `_units.totals`)."""
    ok = loc >= 0
    t = np.where(ok, loc, 0)

    def tot(v):
        return np.where(ok, v[t], 0).sum(axis=(1, 2), dtype=np.int64)

    return {"tokens": tot(cell.Lend), "probes": tot(cell.probes), "endpoint": tot(cell.Cend)}


def occurrence_units(strategy: str, cell: CPUCell, local_q, loc: np.ndarray):
    """Per replicate (base, u_off, a_cost, a_rew) of the CPU builders (for tests)."""
    out = []
    for b in range(loc.shape[0]):
        lb = np.ascontiguousarray(loc[b], dtype=np.int64)
        if strategy == "dee":
            out.append(dee_units(lb, cell.d_off, cell.d_cost, cell.d_rew, cell.d_base))
        elif strategy == "dr":
            out.append(dr_units(lb, cell.zero, cell.Lend, cell.Cend))
        else:
            out.append(fb_units(lb, local_q, cell.C0, cell.eoff, cell.erow, cell.evalue,
                                cell.edL, cell.edC, np.zeros(local_q.shape[0], dtype=np.int64)))
    return out


def frontier_area_batch(strategy: str, cell: CPUCell, local_q: np.ndarray, loc: np.ndarray,
                        tokens: np.ndarray, dtype) -> np.ndarray:
    """int64[rep, 2] per replicate: the frontier's exact area `∫_0^T F(b) db` (reward x tokens)
    and its reward at cost 0, `T` = `tokens[rep]` the replicate's full-thinking tokens.

    `loc` and `dtype` as in `frontier_batch` (the same units and DP; only the read-out differs).
    """
    loc = np.ascontiguousarray(loc, dtype=np.int64)
    tokens = np.ascontiguousarray(tokens, dtype=np.int64)
    out = np.zeros((loc.shape[0], 2), dtype=np.int64)
    sent = sentinel(dtype)
    with _LAUNCH:
        if strategy == "dee":
            _dee_area(loc, cell.d_off, cell.d_cost, cell.d_rew, cell.d_base, tokens, sent, out)
        elif strategy == "dr":
            _dr_area(loc, cell.zero, cell.Lend, cell.Cend, tokens, sent, out)
        elif strategy == "fb":
            _fb_area(loc, local_q, cell.C0, cell.eoff, cell.erow, cell.evalue, cell.edL,
                     cell.edC, tokens, sent, out)
        else:
            raise ArgumentError(f"unknown strategy {strategy!r}")
    return out
