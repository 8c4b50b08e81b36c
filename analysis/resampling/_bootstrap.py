"""Two-stage paired bootstrap of the overthinking metrics and the exact frontiers (docs/rules.md).

Design (docs/rules.md): within each benchmark group resample as many questions as
the group has, with replacement, one draw shared by every model (AIME is one
pool: it is one group); then, within every selected (model, question)
occurrence, draw that pair's `R` trajectories with replacement. Probe curves
stay fixed, so per-trajectory OR, AD, `y`, `L(n)` and `P(n)` are computed
once and only the draws change. Each replicate recomputes every cell summary
of docs/rules.md -- OR, AD, full-thinking accuracy, tokens, the STP endpoint
`P(n)`, the zero-step accuracy `P(0)` and the within-question pairwise
spreads of OR and AD (`_summaries`; pairs of draws of distinct trajectories
within each occurrence) -- as the mean over its occurrences of the occurrence values, the
equal-weight model and group averages, the macro average (docs/rules.md chain)
and Spearman's OR-AD correlation across the replicate's cells; percentiles of the
replicates (default 2.5 / 97.5, linear interpolation as `numpy.percentile`)
are the intervals. With `frontiers=True` the exact DR, FB and DEE frontiers
of every cell are re-solved on the same draws (paired), with budgets
normalized by the replicate's own full-thinking tokens, on the 101-point
grid; the replicate distributions of the macro frontier, `A_full`, the
ceilings, `β_match` and `β_sat` are kept, and their percentiles reported
pointwise.

A model that lacks a drawn question has no occurrence there; a cell none of
whose questions was drawn in a replicate is undefined (NaN) in it, and so is
every average over it; percentiles use the replicates where a value is
defined (`defined` counts them). `β_match` / `β_sat` that are never reached
count as +inf, and an interval end at +inf is reported as None ("never").

Reproducibility: replicate `i` is a pure function of `(seed, i)`
(`_bootstrap_draws`); its statistics are exact integer sums, so results are
bit-identical for any batch size, device count, and across a checkpoint and
resume (`_bootstrap_checkpoint`).
"""

import dataclasses
import os
import warnings
from collections.abc import Callable, Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec
from otbench.analysis.frontier import (
    STRATEGIES,
    Cell,
    Pipeline,
    budget_grid,
    cell_infos,
    check_hierarchy,
)
from otbench.analysis.measurement import MeasurementSet
from otbench.analysis.overthinking import (
    build_layout,
    summarize,
    trajectory_metrics,
)

from otbench.files import provenance as measurement_provenance

from ._bootstrap_result import SCHEMA, BootstrapResult, frontier_result
from ._checkpoint import Checkpointer
from ._draws import fixed_point, packed_table, packing, replicate_kernel, resampling
from ._limits import check_bootstrap_budget
from ._replicates import KERNEL_METRICS
from ._summaries import (
    SUMMARY_METRICS,
    spearman_replicates,
    summary_kernel,
    summary_table,
    summary_values,
)
from otbench.errors import ArgumentError
from otbench.resources import check_workers

REPLICATES = 10_000
MAX_CHECKPOINT_EVERY = 1_000_000
"""The most batches between two checkpoints (`checkpoint_every`): beyond it only the final
checkpoint of any run the resource budget admits is written; a larger count is a typo."""
SEED = 20260721
PERCENTILES = (2.5, 97.5)
SUMMARY_BATCH = 128
"""Replicates per call of the `P(0)` / spread kernel (it sorts every occurrence's draws)."""
DRAWS_VERSION = "otbench.bootstrap.draws/1"
"""Version of the documented draw (`_bootstrap_draws`): checkpoints and outputs record it."""
BATCH = 1000
"""Default replicates per kernel call without frontiers (~0.5 GB at paper scale)."""
FRONTIER_BATCH = {"cpu": 16}
FRONTIER_BATCH_ACCELERATOR = 1024
"""Default replicates per frontier job: large batches amortize the DP's
sequential passes on an accelerator; on CPU the passes cost the same per
replicate, and small batches keep memory and checkpoint intervals small."""


def chain(cell: np.ndarray, cell_model: np.ndarray, cell_group: np.ndarray, num_models: int,
          num_groups: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Equal-weight averages (docs/rules.md) of cell values `[..., cell]`: model, group, macro.

    Sums run over cells in a fixed order (elementwise over the leading
    axes), so a replicate's averages do not depend on how many replicates
    are computed together. NaN cells propagate (as `_aggregate.aggregate`).
    """
    lead = cell.shape[:-1]
    model = np.zeros(lead + (num_models,))
    group = np.zeros(lead + (num_groups,))
    nm = np.zeros(num_models)
    ng = np.zeros(num_groups)
    for c in range(cell.shape[-1]):
        model[..., cell_model[c]] += cell[..., c]
        group[..., cell_group[c]] += cell[..., c]
        nm[cell_model[c]] += 1
        ng[cell_group[c]] += 1
    model /= nm
    group /= ng
    macro = np.zeros(lead)
    for m in range(num_models):
        macro += model[..., m]
    return model, group, macro / num_models


@dataclasses.dataclass(frozen=True)
class _Config:
    replicates: int
    seed: int
    frontiers: bool
    grid: tuple[Fraction, ...]
    batch: int | None
    checkpoint_dir: Path | None
    checkpoint_every: int
    resume: bool
    workers: int | None
    percentiles: tuple[float, float]


def _int_iv(name: str, value: Any, lo: int, hi: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < lo \
            or (hi is not None and value >= hi):
        rule = f"an integer >= {lo}" + ("" if hi is None else f" and < 2**{hi.bit_length() - 1}")
        raise ArgumentError(f"`{name}` must be {rule}, got {value!r}")
    return int(value)


def _bootstrap_iv(ms, replicates, seed, frontiers, grid, batch, checkpoint_dir,
                  checkpoint_every, resume, workers, percentiles) -> _Config:
    """Validate `bootstrap`'s arguments; messages are pinned by tests/test_bootstrap.py."""
    if not isinstance(ms, MeasurementSet):
        raise ArgumentError(f"`ms` must be a MeasurementSet, got {type(ms).__name__}")
    if ms.num_trajectories == 0:
        raise ArgumentError("`ms` has no trajectories")
    replicates = _int_iv("replicates", replicates, 1)
    seed = _int_iv("seed", seed, 0, 2 ** 64)
    batch = None if batch is None else _int_iv("batch", batch, 1)
    checkpoint_every = _int_iv("checkpoint_every", checkpoint_every, 1)
    if checkpoint_every > MAX_CHECKPOINT_EVERY:
        raise ArgumentError(f"`checkpoint_every` must be at most {MAX_CHECKPOINT_EVERY:,} batches "
                            f"(the final checkpoint is always written), got {checkpoint_every:,}")
    workers = None if workers is None else _int_iv("workers", workers, 0)
    if workers is not None:
        check_workers("bootstrap", "`workers`", workers)   # the count; its memory: `Pipeline`
    if resume and checkpoint_dir is None:
        raise ArgumentError("`resume` needs a `checkpoint_dir`")
    try:
        q = tuple(float(p) for p in percentiles)
    except (TypeError, ValueError):
        q = ()
    if len(q) != 2 or not (0 <= q[0] < q[1] <= 100):
        raise ArgumentError(f"`percentiles` must be two increasing numbers in [0, 100], got {percentiles!r}")
    return _Config(replicates=replicates, seed=seed, frontiers=bool(frontiers),
                   grid=budget_grid(grid), batch=batch,
                   checkpoint_dir=None if checkpoint_dir is None else Path(checkpoint_dir),
                   checkpoint_every=checkpoint_every, resume=bool(resume), workers=workers,
                   percentiles=q)


def _platform(devices) -> str:
    return devices[0].platform


def default_batch(frontiers: bool, platform: str | None = None) -> int:
    """Replicates per kernel call when `batch` is not given: `BATCH` without frontiers, else
    `FRONTIER_BATCH` on CPU and `FRONTIER_BATCH_ACCELERATOR` elsewhere (`platform`: JAX's
    default backend when None)."""
    if not frontiers:
        return BATCH
    if platform is None:
        platform = jax.default_backend()
    return FRONTIER_BATCH.get(platform, FRONTIER_BATCH_ACCELERATOR)


def provenance(devices: Sequence[Any] | None = None) -> dict[str, Any]:
    """The provenance block of a resampling result: the common key set plus the draw scheme and devices."""
    devs = list(jax.devices() if devices is None else devices)
    return measurement_provenance(("jax", "numpy"), draws=DRAWS_VERSION,
                                  devices=[getattr(d, "device_kind", d.platform) for d in devs])


def bootstrap(ms: MeasurementSet, *, replicates: int = REPLICATES, seed: int = SEED,
              frontiers: bool = False, grid: int | Sequence[Any] = 101, batch: int | None = None,
              checkpoint_dir: str | os.PathLike | None = None, checkpoint_every: int = 10,
              resume: bool = False, workers: int | None = None,
              percentiles: Sequence[float] = PERCENTILES,
              progress: Callable[[int], None] | None = None,
              devices: Sequence[Any] | None = None) -> BootstrapResult:
    """Two-stage paired bootstrap of every cell summary, optionally the frontiers (docs/rules.md).

    Args:
      ms: the measurement set.
      replicates: number of bootstrap replicates (default 10,000).
      seed: stream seed, `0 <= seed < 2**64` (default 20260721).
      frontiers: also re-solve the exact DR / FB / DEE frontiers of every
        cell in every replicate.
      grid: frontier budgets (default the 101-point bootstrap grid).
      batch: replicates per vmapped call (bounds memory; never changes a
        result). Default 1,000, with frontiers 16 on CPU and 1,024 on an
        accelerator. Rounded up to a multiple of the device count.
      checkpoint_dir: write an orbax checkpoint there every
        `checkpoint_every` batches and at the end.
      resume: continue the latest checkpoint in `checkpoint_dir` (same data
        and settings); the result equals an uninterrupted run.
      workers: worker processes that build frontier units (default: none on
        CPU, where the DP needs the cores; `cpu_count - 1` otherwise).
      percentiles: the interval's two percentiles.
      progress: called with the number of replicates done after each batch.
      devices: devices to shard replicate batches over (default all).

    Returns:
      `BootstrapResult` with every replicate value.
    """
    cfg = _bootstrap_iv(ms, replicates, seed, frontiers, grid, batch, checkpoint_dir,
                        checkpoint_every, resume, workers, percentiles)
    devs = list(jax.devices() if devices is None else devices)
    mesh = Mesh(np.asarray(devs), ("rep",))
    rep_sharding = NamedSharding(mesh, PartitionSpec("rep"))
    replicated = NamedSharding(mesh, PartitionSpec())
    platform = _platform(devs)
    B = cfg.batch or default_batch(cfg.frontiers, platform)
    B = min(B, cfg.replicates)        # a larger batch only pads (results never depend on it)
    B = -(-B // len(devs)) * len(devs)
    check_bootstrap_budget(ms, cfg.replicates, B, cfg.frontiers, len(cfg.grid))
    workers = cfg.workers if cfg.workers is not None else (
        0 if platform == "cpu" else max(1, (os.cpu_count() or 2) - 1))

    layout, names = build_layout(ms)
    res = resampling(ms, layout, names)
    tm, per_row, table, F, pk = _row_table(ms, layout, res)
    kernel = replicate_kernel(res, rep_sharding, replicated, rows=cfg.frontiers, pk=pk)
    tables = jax.device_put(res.tables, replicated)
    table_d = jax.device_put(jnp.asarray(table), replicated)
    seed_d = jax.device_put(jnp.asarray(cfg.seed, dtype=jnp.uint64), replicated)

    arrays = _arrays(cfg, res.num_cells)
    ckpt = _checkpointer(ms, cfg)
    try:
        done = ckpt.restore(arrays) if ckpt is not None else 0
        if progress is not None and done:
            progress(done)
        run = _Batches(arrays=arrays, replicates=cfg.replicates, grid=cfg.grid, ckpt=ckpt,
                       every=cfg.checkpoint_every, progress=progress,
                       cells=[Cell(index=int(i), model=m, group=g, total_tokens=0, total_probes=0,
                                   endpoint=0) for i, (m, g) in zip(names.cell_index, names.cells)])
        pipeline = None
        if cfg.frontiers:
            infos = cell_infos(ms, names.cell_index, res.cell_model, res.cell_group, res.group_slots)
            pipeline = Pipeline(infos, cfg.grid, STRATEGIES, workers, devs)
        try:
            run.run(done, B, lambda reps: kernel(jax.device_put(reps, rep_sharding), seed_d,
                                                 tables, table_d), pipeline)
        finally:
            if pipeline is not None:
                pipeline.close()
        if ckpt is not None:
            ckpt.save(cfg.replicates, arrays)
    finally:
        if ckpt is not None:
            ckpt.close()

    return _result(ms, cfg, arrays, F, tm, per_row, layout, res, names,
                   (rep_sharding, replicated, seed_d), devs)


def _arrays(cfg: "_Config", C: int) -> dict[str, np.ndarray]:
    """The replicate arrays the batches fill (and a checkpoint holds), zeroed."""
    N = cfg.replicates
    arrays = {"sums": np.zeros((N, C, len(KERNEL_METRICS)), dtype=np.int64),
              "count": np.zeros((N, C), dtype=np.int32)}
    if cfg.frontiers:
        G, S = len(cfg.grid), len(STRATEGIES)
        arrays.update(reward=np.zeros((N, S, C, G), dtype=np.int64),
                      reward_one=np.zeros((N, S, C), dtype=np.int64),
                      tokens=np.zeros((N, C), dtype=np.int64),
                      probes=np.zeros((N, C), dtype=np.int64),
                      endpoint=np.zeros((N, C), dtype=np.int64))
    return arrays


def _checkpointer(ms: MeasurementSet, cfg: "_Config") -> Checkpointer | None:
    """The checkpoint of this run (None without `checkpoint_dir`), keyed by data and settings."""
    if cfg.checkpoint_dir is None:
        return None
    from otbench.analysis.measurement import content_hash

    return Checkpointer(cfg.checkpoint_dir, {
        "schema": SCHEMA, "content": content_hash(ms), "replicates": cfg.replicates,
        "seed": cfg.seed, "frontiers": cfg.frontiers,
        "grid": [str(b) for b in cfg.grid] if cfg.frontiers else None, "draws": DRAWS_VERSION,
    }, resume=cfg.resume)


@dataclasses.dataclass
class _Batches:
    """The replicate loop and its explicit state (scipy's habit: validate, loop, return).

    Batch `[start, start + k)` is drawn by the kernel; with frontiers, its
    rows go to the frontier pipeline and are solved while the next batch is
    drawn, so a batch is *finished* (progress, checkpoint) once its frontiers
    are stored. `batches` counts finished batches; a checkpoint is written
    every `every` of them (the final one by the caller).
    """

    arrays: dict[str, np.ndarray]
    replicates: int
    grid: tuple[Fraction, ...]
    cells: list[Cell]
    ckpt: Checkpointer | None
    every: int
    progress: Callable[[int], None] | None
    batches: int = 0

    def run(self, done: int, B: int, draw: Callable[[np.ndarray], Any],
            pipeline: Pipeline | None) -> None:
        """Replicates `done .. replicates - 1` in batches of `B` (`draw`: the replicate kernel)."""
        N, waiting = self.replicates, None          # waiting: (start, k, frontier jobs)
        for start in range(done, N, B):
            k = min(B, N - start)
            out = draw(np.arange(start, start + B, dtype=np.uint64))
            self.arrays["sums"][start:start + k] = np.asarray(out.sums)[:k]
            self.arrays["count"][start:start + k] = np.asarray(out.count)[:k]
            if pipeline is None:
                self._finished(start + k)
                continue
            jobs = pipeline.submit(np.asarray(out.rows))
            if waiting is not None:
                self._store_frontiers(pipeline, *waiting)
            waiting = (start, k, jobs)
        if waiting is not None:
            self._store_frontiers(pipeline, *waiting)

    def _store_frontiers(self, pipeline: Pipeline, start: int, k: int, jobs) -> None:
        fb = pipeline.finish(jobs)
        C = len(self.cells)
        check_hierarchy({s: fb.reward[:k, i].reshape(k * C, -1) for i, s in enumerate(STRATEGIES)},
                        {s: fb.reward_one[:k, i].reshape(-1) for i, s in enumerate(STRATEGIES)},
                        self.grid, self.cells * k)
        sl, a = slice(start, start + k), self.arrays
        a["reward"][sl], a["reward_one"][sl] = fb.reward[:k], fb.reward_one[:k]
        a["tokens"][sl], a["probes"][sl], a["endpoint"][sl] = fb.tokens[:k], fb.probes[:k], \
            fb.endpoint[:k]
        self._finished(start + k)

    def _finished(self, upto: int) -> None:
        self.batches += 1
        if self.progress is not None:
            self.progress(upto)
        if self.ckpt is not None and self.batches % self.every == 0 and upto < self.replicates:
            self.ckpt.save(upto, self.arrays)


def _row_table(ms: MeasurementSet, layout, res):
    """(trajectory metrics, per-row metric values, the kernel's row table, its fixed-point scales,
    the packing or None): what one replicate draws from, built once."""
    tm = trajectory_metrics(jnp.asarray(ms.L), jnp.asarray(ms.C), jnp.asarray(ms.n),
                            jnp.asarray(ms.probes))
    per_row = np.stack([np.asarray(tm.ratio), np.asarray(tm.degradation),
                        np.asarray(ms.y, dtype=np.float64),
                        np.asarray(tm.tokens, dtype=np.float64), np.asarray(tm.endpoint)])
    rr = np.arange(ms.num_trajectories)
    k_star = np.asarray(tm.k_star)
    ints = np.stack([np.asarray(ms.y, dtype=np.int64), ms.C[rr, ms.n].astype(np.int64),
                     (ms.C[rr, k_star] - ms.C[rr, ms.n]).astype(np.int64),
                     ms.L[rr, ms.n].astype(np.int64)])
    pk = packing(ints, ms.probes, res)
    if pk is None:        # fields too wide to pack: one fixed-point column per metric
        table, F = fixed_point(per_row, res, np.asarray(layout.seg))
    else:
        table, F = packed_table(per_row[0], ints, res, np.asarray(layout.seg), pk)
    return tm, per_row, table, F, pk


def _result(ms: MeasurementSet, cfg, arrays, F, tm, per_row, layout, res, names, placed,
            devs) -> BootstrapResult:
    """The replicate values of every summary from the drawn sums, with the point estimates.

    `placed`: (replicate sharding, replicated sharding, seed on the devices) for the summaries
    that are drawn after the kernel's (`_summary_replicates`).
    """
    rep_sharding, replicated, seed_d = placed
    N = cfg.replicates
    count = arrays["count"].astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        cell = (arrays["sums"].astype(np.float64) * np.exp2(-F.astype(np.float64))
                / count[:, :, None])                                        # [rep, cell, metric]
    cell = np.where(count[:, :, None] > 0, cell, np.nan).transpose(0, 2, 1)
    cell = np.concatenate([cell, _summary_replicates(ms, tm, layout, res, cfg, rep_sharding,
                                                     replicated, seed_d)], axis=1)
    model, group, macro = chain(cell, res.cell_model, res.cell_group, layout.num_models,
                                layout.num_groups)
    point = summarize(tm, jnp.asarray(ms.y), jnp.ones(ms.num_trajectories, dtype=jnp.float64),
                      jnp.ones(layout.num_segments, dtype=jnp.float64), layout)
    est_cell = np.concatenate([_point_estimate(per_row, np.asarray(layout.seg), res),
                               np.asarray(point.cell)[len(KERNEL_METRICS):]], axis=0)
    est_model, est_group, est_macro = chain(est_cell, res.cell_model, res.cell_group,
                                            layout.num_models, layout.num_groups)
    fb = None
    if cfg.frontiers:
        fb = frontier_result(cfg.grid, STRATEGIES, arrays, res.cell_model)
    if np.isnan(cell).any():
        warnings.warn("some cells have no drawn question in some replicates; their intervals "
                      "use the replicates where they are defined (see `defined`)", stacklevel=3)
    return BootstrapResult(
        replicates=N, seed=cfg.seed, percentiles=cfg.percentiles, names=names,
        estimate_cell=est_cell, estimate_model=est_model, estimate_group=est_group,
        estimate_macro=est_macro,
        cell=cell, model=model, group=group, macro=macro, frontiers=fb,
        spearman_or_ad=spearman_replicates(cell[:, 0], cell[:, 1]),
        estimate_spearman=float(point.spearman_or_ad),
        synthetic=bool(ms.synthetic), provenance=provenance(devs))


def _summary_replicates(ms, tm, layout, res, cfg, rep_sharding, replicated, seed_d) -> np.ndarray:
    """float64[rep, 3, cell] `P(0)` and the pairwise spreads on the same draws (`_summaries`)."""
    sv, F = summary_table(np.asarray(tm.zero_step), np.asarray(tm.ratio),
                          np.asarray(tm.degradation), res, np.asarray(layout.seg))
    kernel = summary_kernel(res, rep_sharding, replicated)
    tables = jax.device_put(res.tables, replicated)
    table_d = jax.device_put(sv, replicated)
    ndev = rep_sharding.mesh.size
    B = -(-SUMMARY_BATCH // ndev) * ndev
    N, C = cfg.replicates, res.num_cells
    sums = np.zeros((N, C, len(SUMMARY_METRICS)), dtype=np.int64)
    count = np.zeros((N, C), dtype=np.int32)
    paired = np.zeros((N, C), dtype=np.int32)
    for start in range(0, N, B):
        k = min(B, N - start)
        reps = jax.device_put(np.arange(start, start + B, dtype=np.uint64), rep_sharding)
        out = kernel(reps, seed_d, tables, table_d)
        sums[start:start + k] = np.asarray(out.sums)[:k]
        count[start:start + k] = np.asarray(out.count)[:k]
        paired[start:start + k] = np.asarray(out.paired)[:k]
    return summary_values(sums, count, paired, F)


def _point_estimate(per_row: np.ndarray, seg: np.ndarray, res) -> np.ndarray:
    """float64[metric, cell] the docs/rules.md means with every row once (NumPy; no compile)."""
    nseg = res.seg_size.shape[0]
    q = np.stack([np.bincount(seg, weights=v, minlength=nseg) for v in per_row]) / res.seg_size
    n_q = np.bincount(res.seg_cell, minlength=res.num_cells)
    return np.stack([np.bincount(res.seg_cell, weights=v, minlength=res.num_cells)
                     for v in q]) / n_q


