"""Two-stage paired bootstrap of the overthinking metrics and the exact frontiers (SPEC §7).

Design (SPEC §7): within each benchmark group resample as many questions as
the group has, with replacement, one draw shared by every model (AIME is one
pool: it is one group); then, within every selected (model, question)
occurrence, draw that pair's `R` trajectories with replacement. Probe curves
stay fixed, so per-trajectory OR, AD, `y`, `L(n)` and `P(n)` are computed
once and only the draws change. Each replicate recomputes every cell summary
of SPEC §4 -- OR, AD, full-thinking accuracy, tokens, the STP endpoint
`P(n)`, the zero-step accuracy `P(0)` and the within-question pairwise
spreads of OR and AD (`_summaries`; pairs within each occurrence's `R`
draws) -- as the mean over its occurrences of the occurrence values, the
equal-weight model and group averages, the macro average (SPEC §4 chain)
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
    MACRO_WEIGHTING,
    STRATEGIES,
    Cell,
    Pipeline,
    budget_grid,
    cell_infos,
    check_hierarchy,
)
from otbench.analysis.frontier import summarize as frontier_summary
from otbench.analysis.measurement import MeasurementSet, Tidy, concat_columns, melt_columns
from otbench.analysis.overthinking import (
    SUMMARY_DISPLAY,
    LayoutNames,
    build_layout,
    summarize,
    trajectory_metrics,
)

from otbench.files import provenance as measurement_provenance

from ._checkpoint import Checkpointer
from ._draws import fixed_point, packed_table, packing, replicate_kernel, resampling
from ._limits import check_bootstrap_budget
from ._summaries import (
    SUMMARY_METRICS,
    spearman_replicates,
    summary_kernel,
    summary_table,
    summary_values,
)

SCHEMA = "otbench.bootstrap/1"
REPLICATES = 10_000
SEED = 20260721
PERCENTILES = (2.5, 97.5)
KERNEL_METRICS = ("or", "ad", "full_acc", "tokens", "endpoint_acc")
"""The metrics of the main replicate kernel (linear in the draws), in its sums' order."""
BOOT_METRICS = KERNEL_METRICS + SUMMARY_METRICS
"""Bootstrapped metrics (the keys of `overthinking.METRICS`, same order): the metric axis."""
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


@dataclasses.dataclass(frozen=True)
class FrontierBootstrap(Tidy):
    """Replicate distributions of the frontiers (axis 0: replicates; strategies in `strategies` order).

    `to_arrow()`: one row per (replicate, strategy, budget): `replicate`,
    `strategy`, `beta` (fraction of the replicate's full-thinking tokens),
    `macro` (F_C(β), fraction) -- percentiles of any statistic are then a
    group-by away.
    """

    grid: tuple[Fraction, ...]
    strategies: tuple[str, ...]
    reward: np.ndarray       # int64[rep, strategy, cell, grid] best total reward at β * T_rep
    reward_one: np.ndarray   # int64[rep, strategy, cell] at β = 1
    tokens: np.ndarray       # int64[rep, cell] the replicate's full-thinking tokens T
    probes: np.ndarray       # int64[rep, cell] the replicate's total probes
    endpoint: np.ndarray     # int64[rep, cell] the replicate's sum of C(n)
    macro: np.ndarray        # float64[rep, strategy, grid] F_C(β)
    a_full: np.ndarray       # float64[rep] macro STP endpoint accuracy
    ceiling: np.ndarray      # float64[rep, strategy] F_C(1)
    beta_match: np.ndarray   # float64[rep, strategy]; NaN: never reached (or undefined)
    beta_sat: np.ndarray     # float64[rep, strategy]; NaN: never reached (or undefined)

    @property
    def acc(self) -> np.ndarray:
        """float64[rep, strategy, cell, grid] cell frontier accuracy (fraction; NaN: no draw)."""
        p = self.probes[:, None, :, None].astype(np.float64)
        return np.where(p > 0, self.reward / np.where(p > 0, p, 1.0), np.nan)

    @property
    def beta(self) -> np.ndarray:
        return np.asarray([float(b) for b in self.grid], dtype=np.float64)

    def _tidy_columns(self) -> dict[str, Any]:
        reps = list(range(self.macro.shape[0]))
        return melt_columns(self.macro, [("replicate", reps), ("strategy", list(self.strategies)),
                                         ("beta", list(self.beta))], "macro")


@dataclasses.dataclass(frozen=True)
class BootstrapResult(Tidy):
    """Replicate distributions of the bootstrap (axis 0: replicates).

    Values are fractions (OR, AD, accuracies) and tokens, as in `metrics`;
    the metric axis follows `BOOT_METRICS`; cells, models and groups follow
    `names` (the `_aggregate` layout).

    `to_arrow()`: one row per (metric, scope, model, group): `metric` (a
    `BOOT_METRICS` name), `scope` (`cell` | `model` | `group` | `macro`),
    `model`, `group` (null where the scope has none), `estimate` (all data
    once), `lo`, `hi` (the `percentiles` of the replicates), `defined`
    (replicates in which the value exists).
    """

    replicates: int
    seed: int
    percentiles: tuple[float, float]
    names: LayoutNames
    estimate_cell: np.ndarray    # float64[metric, cell] point estimate (all data once)
    estimate_model: np.ndarray   # float64[metric, model]
    estimate_group: np.ndarray   # float64[metric, group]
    estimate_macro: np.ndarray   # float64[metric]
    cell: np.ndarray             # float64[rep, metric, cell]
    model: np.ndarray            # float64[rep, metric, model]
    group: np.ndarray            # float64[rep, metric, group]
    macro: np.ndarray            # float64[rep, metric]
    frontiers: FrontierBootstrap | None
    synthetic: bool
    provenance: dict[str, Any] = dataclasses.field(default_factory=dict)
    spearman_or_ad: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0))
    # float64[rep] Spearman OR-AD across the replicate's cells (NaN: undefined)
    estimate_spearman: float = float("nan")

    def _tidy_columns(self) -> dict[str, Any]:
        metrics = list(BOOT_METRICS)
        n = self.names
        scopes = (("cell", self.estimate_cell, self.cell, [("model", "group"), list(n.cells)]),
                  ("model", self.estimate_model, self.model, ["model", list(n.models)]),
                  ("group", self.estimate_group, self.group, ["group", list(n.groups)]),
                  ("macro", self.estimate_macro[:, None], self.macro[:, :, None], None))
        parts = []
        for scope, est, reps, axis in scopes:
            axes = [("metric", metrics), tuple(axis) if axis else ("scope", [scope])]
            part = melt_columns(est, axes, "estimate")
            lohi = percentile(reps, self.percentiles)                  # [2, metric, x]
            part["lo"], part["hi"] = lohi[0].reshape(-1), lohi[1].reshape(-1)
            part["defined"] = np.sum(~np.isnan(reps), axis=0).reshape(-1)
            part["scope"] = np.full(part["estimate"].size, scope, dtype=object)
            parts.append(part)
        cols = concat_columns(parts)
        order = ("metric", "scope", "model", "group", "estimate", "lo", "hi", "defined")
        return {k: cols[k] for k in order}

    def to_json(self) -> dict[str, Any]:
        """The `otbench.bootstrap/1` document (fractions and tokens; null = undefined / never)."""
        q = self.percentiles
        iv = _json_interval

        def keyed(x):             # x: [rep, metric] -> {metric: [lo, hi]}
            lohi = percentile(x, q)
            return {k: iv(lohi[:, j]) for j, k in enumerate(BOOT_METRICS)}

        cells = []
        for c, (m, g) in enumerate(self.names.cells):
            entry = {"model": m, "group": g, "defined": int(np.sum(~np.isnan(self.cell[:, 0, c])))}
            entry.update(keyed(self.cell[:, :, c]))
            entry["estimate"] = {k: _num(self.estimate_cell[j, c]) for j, k in enumerate(BOOT_METRICS)}
            cells.append(entry)
        out = {
            "schema": SCHEMA, "replicates": int(self.replicates), "seed": int(self.seed),
            "synthetic": bool(self.synthetic), "percentiles": list(q),
            "cells": cells,
            "by_model": {m: keyed(self.model[:, :, i]) for i, m in enumerate(self.names.models)},
            "by_group": {g: keyed(self.group[:, :, i]) for i, g in enumerate(self.names.groups)},
            "macro": keyed(self.macro),
            "estimate": {
                "macro": {k: _num(v) for k, v in zip(BOOT_METRICS, self.estimate_macro)},
                "by_model": {m: {k: _num(self.estimate_model[j, i]) for j, k in enumerate(BOOT_METRICS)}
                             for i, m in enumerate(self.names.models)},
                "by_group": {g: {k: _num(self.estimate_group[j, i]) for j, k in enumerate(BOOT_METRICS)}
                             for i, g in enumerate(self.names.groups)}},
            "spearman_or_ad": {
                "estimate": _num(self.estimate_spearman),
                "interval": iv(percentile(self.spearman_or_ad, q)),
                "defined": int(np.sum(~np.isnan(self.spearman_or_ad)))},
            "provenance": dict(self.provenance),
        }
        f = self.frontiers
        if f is not None:
            fr: dict[str, Any] = {"grid": f.beta.tolist(), "a_full": iv(percentile(f.a_full, q)),
                                  "weighting": MACRO_WEIGHTING}
            for k, s in enumerate(f.strategies):
                acc = f.acc[:, k]                                       # [rep, cell, grid]
                lo, hi = percentile(f.macro[:, k], q)
                fr[s] = {
                    "lo": _json_list(lo), "hi": _json_list(hi),
                    "median": _json_list(percentile(f.macro[:, k], (50.0,))[0]),
                    "beta_match": iv(percentile(_never(f.beta_match[:, k]), q)),
                    "ceiling": iv(percentile(f.ceiling[:, k], q)),
                    "beta_sat": iv(percentile(_never(f.beta_sat[:, k]), q)),
                    "cells": [{"model": m, "group": g,
                               "lo": _json_list(percentile(acc[:, c], q)[0]),
                               "hi": _json_list(percentile(acc[:, c], q)[1]),
                               "median": _json_list(percentile(acc[:, c], (50.0,))[0])}
                              for c, (m, g) in enumerate(self.names.cells)],
                }
            out["frontiers"] = fr
        return out


def percentile(x: np.ndarray, q: Sequence[float]) -> np.ndarray:
    """Percentiles over axis 0, linear interpolation (`numpy.percentile`'s default).

    NaN marks an undefined replicate and is left out (per column); +inf is a
    value ("never"): an interpolation that touches it is +inf. A column
    without defined replicates gives NaN.

    Returns:
      float64[len(q), ...].
    """
    x = np.sort(np.asarray(x, dtype=np.float64), axis=0)           # NaN sorts last
    n = np.sum(~np.isnan(x), axis=0)
    out = []
    for p in q:
        h = (n - 1) * (p / 100.0)
        lo = np.floor(h).astype(np.int64)
        hi = np.ceil(h).astype(np.int64)
        t = h - lo
        a = np.take_along_axis(x, np.maximum(lo, 0)[None], axis=0)[0]
        b = np.take_along_axis(x, np.maximum(hi, 0)[None], axis=0)[0]
        with np.errstate(invalid="ignore"):
            v = np.where(t == 0, a, np.where(np.isinf(b), np.inf, a + (b - a) * t))
        out.append(np.where(n > 0, v, np.nan))
    return np.stack(out, axis=0)


def _never(beta: np.ndarray) -> np.ndarray:
    return np.where(np.isnan(beta), np.inf, beta)


def _num(x) -> float | None:
    x = float(x)
    return x if np.isfinite(x) else None


def _json_interval(lohi: np.ndarray) -> list[float | None]:
    return [_num(lohi[0]), _num(lohi[1])]


def _json_list(x: np.ndarray) -> list[float | None]:
    return [_num(v) for v in x]


def chain(cell: np.ndarray, cell_model: np.ndarray, cell_group: np.ndarray, num_models: int,
          num_groups: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Equal-weight averages (SPEC §4) of cell values `[..., cell]`: model, group, macro.

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
        raise ValueError(f"`{name}` must be {rule}, got {value!r}")
    return int(value)


def _bootstrap_iv(ms, replicates, seed, frontiers, grid, batch, checkpoint_dir,
                  checkpoint_every, resume, workers, percentiles) -> _Config:
    """Validate `bootstrap`'s arguments; messages are pinned by tests/test_bootstrap.py."""
    if not isinstance(ms, MeasurementSet):
        raise ValueError(f"`ms` must be a MeasurementSet, got {type(ms).__name__}")
    if ms.num_trajectories == 0:
        raise ValueError("`ms` has no trajectories")
    replicates = _int_iv("replicates", replicates, 1)
    seed = _int_iv("seed", seed, 0, 2 ** 64)
    batch = None if batch is None else _int_iv("batch", batch, 1)
    checkpoint_every = _int_iv("checkpoint_every", checkpoint_every, 1)
    workers = None if workers is None else _int_iv("workers", workers, 0)
    if resume and checkpoint_dir is None:
        raise ValueError("`resume` needs a `checkpoint_dir`")
    try:
        q = tuple(float(p) for p in percentiles)
    except (TypeError, ValueError):
        q = ()
    if len(q) != 2 or not (0 <= q[0] < q[1] <= 100):
        raise ValueError(f"`percentiles` must be two increasing numbers in [0, 100], got {percentiles!r}")
    return _Config(replicates=replicates, seed=seed, frontiers=bool(frontiers),
                   grid=budget_grid(grid), batch=batch,
                   checkpoint_dir=None if checkpoint_dir is None else Path(checkpoint_dir),
                   checkpoint_every=checkpoint_every, resume=bool(resume), workers=workers,
                   percentiles=q)


def _platform(devices) -> str:
    return devices[0].platform


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
    """Two-stage paired bootstrap of every cell summary (SPEC §4), optionally the frontiers (SPEC §7).

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
    B = cfg.batch or (FRONTIER_BATCH.get(platform, FRONTIER_BATCH_ACCELERATOR)
                      if cfg.frontiers else BATCH)
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

    N, C = cfg.replicates, res.num_cells
    strategies = STRATEGIES
    arrays = {"sums": np.zeros((N, C, len(KERNEL_METRICS)), dtype=np.int64),
              "count": np.zeros((N, C), dtype=np.int32)}
    if cfg.frontiers:
        G, S = len(cfg.grid), len(strategies)
        arrays.update(reward=np.zeros((N, S, C, G), dtype=np.int64),
                      reward_one=np.zeros((N, S, C), dtype=np.int64),
                      tokens=np.zeros((N, C), dtype=np.int64),
                      probes=np.zeros((N, C), dtype=np.int64),
                      endpoint=np.zeros((N, C), dtype=np.int64))
    ckpt = None
    if cfg.checkpoint_dir is not None:
        from otbench.analysis.measurement import content_hash

        ckpt = Checkpointer(cfg.checkpoint_dir, {
            "schema": SCHEMA, "content": content_hash(ms), "replicates": N, "seed": cfg.seed,
            "frontiers": cfg.frontiers, "grid": [str(b) for b in cfg.grid] if cfg.frontiers else None,
            "draws": DRAWS_VERSION,
        }, resume=cfg.resume)
    try:
        done = ckpt.restore(arrays) if ckpt is not None else 0
        if progress is not None and done:
            progress(done)
        cells = [Cell(index=int(i), model=m, group=g, total_tokens=0, total_probes=0, endpoint=0)
                 for i, (m, g) in zip(names.cell_index, names.cells)]
        infos = cell_infos(ms, names.cell_index, res.cell_model, res.cell_group,
                           res.group_slots) if cfg.frontiers else None
        batches = 0

        def finished(upto: int) -> None:
            nonlocal batches
            batches += 1
            if progress is not None:
                progress(upto)
            if ckpt is not None and batches % cfg.checkpoint_every == 0 and upto < N:
                ckpt.save(upto, arrays)

        def store_frontiers(start: int, k: int, fb) -> None:
            check_hierarchy({s: fb.reward[:k, i].reshape(k * C, -1) for i, s in enumerate(strategies)},
                            {s: fb.reward_one[:k, i].reshape(-1) for i, s in enumerate(strategies)},
                            cfg.grid, cells * k)
            sl = slice(start, start + k)
            arrays["reward"][sl], arrays["reward_one"][sl] = fb.reward[:k], fb.reward_one[:k]
            arrays["tokens"][sl], arrays["probes"][sl] = fb.tokens[:k], fb.probes[:k]
            arrays["endpoint"][sl] = fb.endpoint[:k]

        pipeline = Pipeline(infos, cfg.grid, strategies, workers, devs) if cfg.frontiers else None
        try:
            prev = None
            for start in range(done, N, B):
                k = min(B, N - start)
                reps = jax.device_put(np.arange(start, start + B, dtype=np.uint64), rep_sharding)
                out = kernel(reps, seed_d, tables, table_d)
                arrays["sums"][start:start + k] = np.asarray(out.sums)[:k]
                arrays["count"][start:start + k] = np.asarray(out.count)[:k]
                if pipeline is None:
                    finished(start + k)
                    continue
                jobs = pipeline.submit(np.asarray(out.rows))
                if prev is not None:
                    store_frontiers(prev[0], prev[1], pipeline.finish(prev[2]))
                    finished(prev[0] + prev[1])
                prev = (start, k, jobs)
            if prev is not None:
                store_frontiers(prev[0], prev[1], pipeline.finish(prev[2]))
                finished(prev[0] + prev[1])
        finally:
            if pipeline is not None:
                pipeline.close()
        if ckpt is not None:
            ckpt.save(N, arrays)
    finally:
        if ckpt is not None:
            ckpt.close()

    return _result(ms, cfg, arrays, F, tm, per_row, layout, res, names,
                   (rep_sharding, replicated, seed_d), devs)


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
        fb = _frontier_result(cfg.grid, STRATEGIES, arrays, res.cell_model)
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
    """float64[metric, cell] the SPEC §4 means with every row once (NumPy; no compile)."""
    nseg = res.seg_size.shape[0]
    q = np.stack([np.bincount(seg, weights=v, minlength=nseg) for v in per_row]) / res.seg_size
    n_q = np.bincount(res.seg_cell, minlength=res.num_cells)
    return np.stack([np.bincount(res.seg_cell, weights=v, minlength=res.num_cells)
                     for v in q]) / n_q


def _frontier_result(grid, strategies, arrays, cell_model) -> FrontierBootstrap:
    """Exact macro summaries per replicate; a replicate in which some cell drew no
    question has undefined (NaN) macro values, like the metric averages."""
    N, S, _, G = arrays["reward"].shape
    ok = np.all(arrays["probes"] > 0, axis=1)                        # [rep]
    macro = np.full((N, S, G), np.nan)
    a_full = np.full(N, np.nan)
    ceiling, beta_match, beta_sat = (np.full((N, S), np.nan) for _ in range(3))
    for i in range(S):
        if not ok.any():
            break
        summ = frontier_summary(grid, arrays["reward"][ok, i], arrays["reward_one"][ok, i],
                                arrays["endpoint"][ok], arrays["probes"][ok], cell_model)
        macro[ok, i], ceiling[ok, i] = summ.macro, summ.ceiling
        beta_match[ok, i], beta_sat[ok, i] = summ.beta_match, summ.beta_sat
        a_full[ok] = summ.a_full
    return FrontierBootstrap(
        grid=grid, strategies=strategies, reward=arrays["reward"], reward_one=arrays["reward_one"],
        tokens=arrays["tokens"], probes=arrays["probes"], endpoint=arrays["endpoint"], macro=macro,
        a_full=a_full, ceiling=ceiling, beta_match=beta_match, beta_sat=beta_sat)


def _fmt_iv(lohi, scale: float, digits: int, estimate: float | None = None) -> str:
    """`[lo, hi]`, or `estimate [lo, hi]` when the point estimate is given."""
    lo, hi = lohi
    if np.isnan(lo) or np.isnan(hi):
        return "n/a"
    iv = f"[{lo * scale:.{digits}f}, {hi * scale:.{digits}f}]"
    if estimate is None or np.isnan(estimate):
        return iv
    return f"{estimate * scale:.{digits}f} {iv}"


def _matrix(title: str, r: BootstrapResult, j: int, scale: float, digits: int) -> list[str]:
    q = r.percentiles
    groups, models = list(r.names.groups), list(r.names.models)
    by_cell = {cell: (percentile(r.cell[:, j, c], q), r.estimate_cell[j, c])
               for c, cell in enumerate(r.names.cells)}
    rows = [["model"] + groups + ["Avg."]]
    for i, m in enumerate(models):
        rows.append([m] + ["-" if (m, g) not in by_cell else _fmt_iv(*by_cell[(m, g)][:1], scale,
                                                                       digits, by_cell[(m, g)][1])
                           for g in groups]
                    + [_fmt_iv(percentile(r.model[:, j, i], q), scale, digits,
                               r.estimate_model[j, i])])
    rows.append(["Avg."] + [_fmt_iv(percentile(r.group[:, j, i], q), scale, digits,
                                    r.estimate_group[j, i]) for i in range(len(groups))]
                + [_fmt_iv(percentile(r.macro[:, j], q), scale, digits, r.estimate_macro[j])])
    widths = [max(len(x[k]) for x in rows) for k in range(len(rows[0]))]
    return [title] + ["  ".join([x[0].ljust(widths[0])]
                                + [v.rjust(w) for v, w in zip(x[1:], widths[1:])]) for x in rows]


def format_bootstrap(r: BootstrapResult) -> str:
    """Interval matrices in the layout of the paper's Tables 4-6 (models x groups, Avg. row/column)."""
    lo, hi = r.percentiles
    head = (f"Two-stage paired bootstrap: {r.replicates:,} replicates, seed {r.seed}; "
            f"each entry is the point estimate [{lo:g}-{hi:g} percentile interval]")
    lines = ([("SYNTHETIC DATA (simulated, not model outputs)")] if r.synthetic else []) + [head, ""]
    for title, key, scale, digits in SUMMARY_DISPLAY:
        digits = 0 if key == "tokens" else digits    # intervals of token means: whole tokens
        lines += _matrix(title, r, BOOT_METRICS.index(key), scale, digits) + [""]
    if r.spearman_or_ad.size:
        lines += [f"Spearman OR-AD across cells: {r.estimate_spearman:.3f} "
                  f"{_fmt_iv(percentile(r.spearman_or_ad, r.percentiles), 1.0, 3)}", ""]
    f = r.frontiers
    if f is not None:
        q = r.percentiles

        def beta(x):
            a, b = percentile(_never(x), q)
            return "[" + ", ".join("never" if not np.isfinite(v) else f"{100 * v:.1f}%"
                                   for v in (a, b)) + "]"

        lines.append(f"Oracle frontiers, {len(f.grid)}-point grid: A_full "
                     f"{_fmt_iv(percentile(f.a_full, q), 100.0, 2)}%")
        lines.append(f"{'strategy':8s}  {'beta_match':>16s}  {'ceiling (%)':>16s}  {'beta_sat':>16s}")
        for k, s in enumerate(f.strategies):
            lines.append(f"{s.upper():8s}  {beta(f.beta_match[:, k]):>16s}  "
                         f"{_fmt_iv(percentile(f.ceiling[:, k], q), 100.0, 2):>16s}  "
                         f"{beta(f.beta_sat[:, k]):>16s}")
    return "\n".join(lines) + "\n"
