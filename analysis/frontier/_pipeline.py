"""Frontier bootstrap: the exact DR / FB / DEE frontiers of every cell per replicate (docs/rules.md).

Each replicate's draws (`_bootstrap_draws`) become, per cell, the
`_units.Occurrences` of `_frontier_replicates` -- one occurrence per drawn
question the model has, with the multiplicity of each of its trajectories --
so a replicate's frontier is exactly `frontier_replicates(ms, cell, s,
draws=...)` on the same draws (tested). What differs is the schedule, built
for 10,000 replicates:

* per (strategy, cell) one *job* per batch of replicates: units and pruned
  actions for the whole batch (vectorized NumPy), one `_dp.plan`, one vmapped
  DP run; the plan uses a fixed `_dp.Shape` per (strategy, cell) derived from
  bounds that hold for every replicate, so each shape compiles once per run;
* host work (units, actions, plans; ~0.3 s per replicate of all 72
  frontiers at paper scale, one core) runs in a pool of worker processes when
  `workers > 0`, overlapping the device DP; results never depend on it;
* the DP state of a batch is sharded over every device along the replicate
  axis (`jax.sharding`), and the budget queries run on the device, so only
  `[rep, grid]` rewards come back to the host;
* budgets are normalized by each replicate's own full-thinking tokens, in
  exact integers (`_frontier_budgets.budgets`).

On a CPU-only mesh with numba installed (`engine="auto"`) a batch runs
instead through `_cpu`: one compiled pass per (strategy, cell) builds the
units from precomputed per-trajectory actions and sorted FB events, runs the
DP and queries the budgets, replicates in parallel over the cores, in a
background thread so the next batch's draws overlap it. Both engines give
the same integers (tested); `engine="jax"` forces the path above.
"""

import concurrent.futures
import dataclasses
import functools
import multiprocessing
from collections.abc import Iterator, Sequence
from fractions import Fraction
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec
from otbench.analysis.core import use_cpu_only
from otbench.analysis.measurement import MeasurementSet

from . import _cpu, _dp
from ._budgets import budgets
from ._units import (
    STRATEGIES,
    CellData,
    Occurrences,
    actions,
    cell_data,
    fb_events,
    totals,
)
from otbench.errors import ArgumentError


@dataclasses.dataclass(frozen=True)
class CellInfo:
    """Host data of one layout cell (picklable: sent once to each worker)."""

    data: CellData
    events: Any                 # _units._FBEvents, shared by every FB job of the cell
    row0: int                   # global row of the cell's first row (cell rows are contiguous)
    local_q: np.ndarray         # int64[traj] local question of each cell row
    model: int                  # dense model index (axis 1 of the draws)
    slots: tuple[int, int]      # (first slot, Q_g) of the cell's group


def cell_infos(ms: MeasurementSet, cell_index: np.ndarray, cell_model: np.ndarray,
               cell_group: np.ndarray, group_slots: Sequence[tuple[int, int]]) -> list[CellInfo]:
    """`CellInfo` of every layout cell (`cell_index` into `ms.cell_model`)."""
    out = []
    for c, orig in enumerate(cell_index):
        rows = ms.cell_rows(int(orig))
        d = cell_data(ms.L[rows], ms.C[rows], ms.n[rows], ms.probes[rows], ms.question[rows])
        out.append(CellInfo(data=d, events=fb_events(d), row0=int(rows[0]),
                            local_q=np.repeat(np.arange(d.num_questions), np.diff(d.qoff)),
                            model=int(cell_model[c]), slots=tuple(group_slots[cell_group[c]])))
    return out


def occurrences(info: CellInfo, rows: np.ndarray) -> Occurrences:
    """`Occurrences` of one cell from a batch of drawn rows.

    Args:
      rows: int[rep, slot, draw] global rows drawn for the cell's model at
        the slots of its group, -1 for none (a slot whose question the model
        lacks has no draw at all: no occurrence).
    """
    B = rows.shape[0]
    d = info.data
    valid = rows >= 0
    has = valid[:, :, 0]                        # R >= 1: the first draw exists
    b, s = np.nonzero(has)                      # occurrences in (rep, slot) order
    local = rows[b, s] - info.row0              # [occ, draw] cell-local rows
    q = info.local_q[local[:, 0]]
    R = np.diff(d.qoff)[q]
    start = np.cumsum(R) - R
    ok = valid[b, s]
    o = np.broadcast_to(np.arange(q.shape[0])[:, None], ok.shape)[ok]
    mult = np.bincount(start[o] + local[ok] - d.qoff[q[o]], minlength=int(R.sum()))
    return Occurrences(problem=b.astype(np.int64), question=q.astype(np.int64),
                       mult=mult.astype(np.int64), num_problems=B)


def job_shape(info: CellInfo, strategy: str) -> _dp.Shape:
    """DP shape bounds valid for every replicate of a cell (one compile per run).

    An occurrence draws `R_q` rows of its question, so a unit's offset reward
    is at most `R_q * max P` (DR, FB) or `max P` (DEE); a replicate has at
    most `Q_g` occurrences, which bounds its reward and its total cost.
    """
    d = info.data
    R = np.diff(d.qoff)
    pmax = np.maximum.reduceat(d.probes, d.qoff[:-1])
    lmax = np.maximum.reduceat(d.L[:, -1], d.qoff[:-1])
    unit = int(pmax.max()) if strategy == "dee" else int((R * pmax).max())
    lanes = _dp._defaults(None, None, None)[1]
    n_occ = info.slots[1]
    return _dp.Shape(front=max(16, _dp._next_pow2(unit)),
                     chunks=_dp._next_pow2(-(-unit // lanes)),
                     cap=n_occ * int((R * pmax).max()) + 1,
                     dtype=_dp.dtype_for(n_occ * int((R * lmax).max())))


@dataclasses.dataclass(frozen=True)
class Built:
    """Host result of one job: the plan, per-problem base reward and totals."""

    plan: _dp.Plan
    base: np.ndarray        # int64[rep] reward at zero cost
    tokens: np.ndarray      # int64[rep] full-thinking tokens T of the replicate
    probes: np.ndarray      # int64[rep]
    endpoint: np.ndarray    # int64[rep]


def build(info: CellInfo, strategy: str, rows: np.ndarray, shape: _dp.Shape) -> Built:
    """Units, pruned actions and the DP plan of one cell for a batch of replicates."""
    occ = occurrences(info, rows)
    a = actions(strategy, info.data, occ, info.events if strategy == "fb" else None)
    t = totals(info.data, occ)
    return Built(plan=_dp.plan(a, shape=shape), base=a.base_total(), tokens=t["tokens"],
                 probes=t["probes"], endpoint=t["endpoint"])


_WORKER: dict[str, Any] = {}


def _worker_init(infos: list[CellInfo]) -> None:
    # Workers do NumPy only; pin JAX to the CPU before anything could touch a
    # backend, so no worker ever initializes (and preallocates) the accelerator.
    use_cpu_only()
    _WORKER["infos"] = infos


def _worker_build(c: int, strategy: str, rows: np.ndarray, shape: _dp.Shape) -> Built:
    return build(_WORKER["infos"][c], strategy, rows, shape)


def _query(buf: jax.Array, budget: jax.Array, front: int) -> jax.Array:
    """Per problem: entries of `g` (non-decreasing, sentinel tail) at or below each budget.

    Unreachable entries hold the sentinel, which exceeds every budget
    (`dtype_for` keeps totals below it), so this is `_frontier_budgets.query`
    without slicing each problem to its own reach.
    """
    g = buf[:, front:]
    return jax.vmap(lambda gi, bi: jnp.searchsorted(gi, bi, side="right"))(g, budget)


@functools.cache
def _query_fn(sharding):
    return jax.jit(_query, static_argnums=2, out_shardings=sharding)


@functools.cache
def _initial_fn(B: int, front: int, cap: int, dtype: str, sharding):
    """`_dp.initial_state` made on the devices (no host transfer of the state)."""
    sent = _dp.SENTINEL32 if dtype == "int32" else _dp.SENTINEL64

    def make():
        k = jnp.arange(front + cap, dtype=jnp.int32)
        row = jnp.where(k <= front, 0, sent).astype(dtype)
        return jnp.broadcast_to(row[None, :], (B, front + cap))

    return jax.jit(make, out_shardings=sharding)


class Runner:
    """Runs DP plans sharded over the replicate axis of a device mesh."""

    def __init__(self, devices: Sequence[Any] | None = None):
        devs = list(jax.devices() if devices is None else devices)
        self.mesh = Mesh(np.asarray(devs), ("rep",))
        self.rep = NamedSharding(self.mesh, PartitionSpec("rep"))
        self.replicated = NamedSharding(self.mesh, PartitionSpec())
        self.size = len(devs)

    def run(self, p: _dp.Plan, budget: np.ndarray) -> jax.Array:
        """Device array int[rep, budget]: `searchsorted(g, budget, 'right')` after the DP."""
        B = p.chunks.shape[0]
        fn = _dp._compiled(p.front, p.tile, True)
        state = _dp.DPState(_initial_fn(B, p.front, p.cap, np.dtype(p.dtype).name, self.rep)())
        put = jax.device_put
        for start, stop in p.blocks:
            blk = _dp.block_inputs(p, start, stop)
            blk = _dp.UnitBlock(put(blk.cost, self.rep), put(blk.reward, self.rep),
                                put(blk.first, self.rep), put(blk.chunks, self.rep),
                                put(blk.tiles, self.replicated))
            state = fn(state, blk)
        return _query_fn(self.rep)(state.buf, put(budget.astype(p.dtype), self.rep), p.front)


@dataclasses.dataclass(frozen=True)
class BatchFrontiers:
    """Frontiers of one batch of replicates (replicate axis first)."""

    reward: np.ndarray       # int64[rep, strategy, cell, grid]
    reward_one: np.ndarray   # int64[rep, strategy, cell] at β = 1
    tokens: np.ndarray       # int64[rep, cell] the replicate's full-thinking tokens T
    probes: np.ndarray       # int64[rep, cell]
    endpoint: np.ndarray     # int64[rep, cell] sum of C(n) over the draws


def _engine(engine: str, devices) -> str:
    if engine not in ("auto", "cpu", "jax"):
        raise ArgumentError(f"`engine` must be auto, cpu or jax, got {engine!r}")
    if engine == "cpu" and not _cpu.available():
        raise ArgumentError("`engine='cpu'` needs numba (pip install numba)")
    if engine == "auto":
        cpu_only = all(d.platform == "cpu" for d in devices)
        return "cpu" if cpu_only and _cpu.available() else "jax"
    return engine


WORKER_BYTES = 512 << 20
"""The memory floor assumed per worker process (an interpreter with JAX imported, and the cells'
data); a budget refusal, not a measurement."""


class Pipeline:
    """Frontier replicates of every (strategy, cell), batch after batch.

    Args:
      infos: `CellInfo` per layout cell.
      grid: exact budgets.
      strategies: subset of `STRATEGIES`.
      workers: worker processes for the host work (0: in this process; JAX engine only).
      devices: devices of the mesh (default all).
      engine: "auto" (the CPU kernels on a CPU-only mesh when numba is
        installed, else JAX), "cpu" or "jax".
    """

    def __init__(self, infos: list[CellInfo], grid: Sequence[Fraction],
                 strategies: Sequence[str] = STRATEGIES, workers: int = 0,
                 devices: Sequence[Any] | None = None, engine: str = "auto"):
        self.infos, self.grid, self.strategies = infos, tuple(grid), tuple(strategies)
        self.runner = Runner(devices)
        self.shapes = {(s, c): job_shape(info, s) for s in self.strategies
                       for c, info in enumerate(infos)}
        self.engine = _engine(engine, self.runner.mesh.devices.reshape(-1))
        self.pool = None
        if self.engine == "cpu":
            # One thread launches the (internally parallel) kernels: numba's
            # thread pool is never entered from two threads at once.
            self.cpu_cells = [_cpu.cpu_cell(info.data, info.events) for info in infos]
            self.pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
        elif workers > 0:
            from otbench.resources import check_workers

            check_workers(f"frontier units of {len(infos)} cells", "`workers`", workers,
                          per_worker=WORKER_BYTES)
            # spawn, not fork: the parent runs JAX threads, which fork would copy mid-state.
            self.pool = concurrent.futures.ProcessPoolExecutor(
                max_workers=workers, mp_context=multiprocessing.get_context("spawn"),
                initializer=_worker_init, initargs=(infos,))

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(cancel_futures=True)
            self.pool = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _jobs(self):
        # FB first: its units take the longest to build (as `_frontier`).
        return [(s, c) for s in sorted(self.strategies, key=("fb", "dee", "dr").index)
                for c in range(len(self.infos))]

    def _dispatch(self, built: Built) -> jax.Array:
        bud = np.concatenate([budgets(self.grid, built.tokens), built.tokens[:, None]], axis=1)
        return self.runner.run(built.plan, bud)           # asynchronous

    def submit(self, rows: np.ndarray) -> Any:
        """Start a batch; `rows` int[rep, model, slot, draw] global rows (-1: none).

        In this process each job's DP is dispatched (asynchronously) as soon
        as its plan is built, so the device works while the host builds the
        next job; with workers the plans are built in the pool. The CPU
        engine runs the whole batch in its thread.
        """
        if self.engine == "cpu":
            return self.pool.submit(self._cpu_batch, np.array(rows, dtype=np.int64))
        out = []
        for s, c in self._jobs():
            info = self.infos[c]
            f, n = info.slots
            sub = np.ascontiguousarray(rows[:, info.model, f:f + n])
            if self.pool is None:
                built = build(info, s, sub, self.shapes[(s, c)])
                out.append((s, c, built, self._dispatch(built)))
            else:
                out.append((s, c, self.pool.submit(_worker_build, c, s, sub, self.shapes[(s, c)]),
                            None))
        return out

    def _cpu_batch(self, rows: np.ndarray) -> BatchFrontiers:
        S, C, G = len(self.strategies), len(self.infos), len(self.grid)
        B = rows.shape[0]
        reward = np.zeros((B, S, C, G), dtype=np.int64)
        one = np.zeros((B, S, C), dtype=np.int64)
        tokens, probes, endpoint = (np.zeros((B, C), dtype=np.int64) for _ in range(3))
        for c, info in enumerate(self.infos):
            f, n = info.slots
            sub = rows[:, info.model, f:f + n]
            loc = np.where(sub >= 0, sub - info.row0, -1)
            cc = self.cpu_cells[c]
            t = _cpu.totals_batch(cc, loc)
            bud = np.concatenate([budgets(self.grid, t["tokens"]), t["tokens"][:, None]], axis=1)
            for k, s in enumerate(self.strategies):
                r = _cpu.frontier_batch(s, cc, info.local_q, loc, bud, self.shapes[(s, c)].dtype)
                reward[:, k, c], one[:, k, c] = r[:, :G], r[:, G]
            tokens[:, c], probes[:, c], endpoint[:, c] = t["tokens"], t["probes"], t["endpoint"]
        return BatchFrontiers(reward=reward, reward_one=one, tokens=tokens, probes=probes,
                              endpoint=endpoint)

    def finish(self, jobs: Any) -> BatchFrontiers:
        """Run the remaining DPs of a batch and collect the rewards."""
        if self.engine == "cpu":
            return jobs.result()
        jobs = [(s, c, b, dev) if dev is not None else (s, c, b.result(), None)
                for s, c, b, dev in jobs]
        jobs = [(s, c, b, dev if dev is not None else self._dispatch(b)) for s, c, b, dev in jobs]
        S, C, G = len(self.strategies), len(self.infos), len(self.grid)
        B = jobs[0][2].tokens.shape[0]
        reward = np.zeros((B, S, C, G), dtype=np.int64)
        one = np.zeros((B, S, C), dtype=np.int64)
        tokens, probes, endpoint = (np.zeros((B, C), dtype=np.int64) for _ in range(3))
        for s, c, built, dev in jobs:
            k = self.strategies.index(s)
            r = built.base[:, None] + np.asarray(dev).astype(np.int64) - 1
            reward[:, k, c], one[:, k, c] = r[:, :G], r[:, G]
            tokens[:, c], probes[:, c], endpoint[:, c] = built.tokens, built.probes, built.endpoint
        return BatchFrontiers(reward=reward, reward_one=one, tokens=tokens, probes=probes,
                              endpoint=endpoint)

    def batches(self, row_batches: Iterator[np.ndarray]) -> Iterator[BatchFrontiers]:
        """Pipelined: batch k+1's host work is submitted before batch k's DP is collected."""
        prev = None
        for rows in row_batches:
            jobs = self.submit(rows)
            if prev is not None:
                yield self.finish(prev)
            prev = jobs
        if prev is not None:
            yield self.finish(prev)
