"""Precision planning: the bootstrap interval widths a planned design will give, from a pilot set
(docs/rules.md).

Target. The width `hi - lo` of the project's two-stage bootstrap interval (`bootstrap`, docs/rules.md:
questions with replacement within each group, then `R` trajectories with replacement within each
(model, question) occurrence; default 2.5 / 97.5 percentiles) of a macro summary, on a full set
with `Q'_g` questions per group, `R'` trajectories and `P'` probes, as a function of the design.

Why not just resample the pilot at the planned design. Resampling `Q'` questions from the pilot's
`Q_p` and `R'` trajectories from each question's `R_p` is the exact two-stage design, but for
`R' > R_p` it is biased: a pilot question's mean over `R_p` trajectories carries within-question
noise `σ_w² / R_p` that a planned question's mean over `R'` would not, and `R'` draws from `R_p`
values see only the plug-in within variance `(R_p - 1) / R_p σ_w²`. At `R_p = 2, R' = 16` the
first term alone can double the variance. Likewise `P'` probes drawn from a cut's `P_p` pilot
probes keep the pilot's probe noise (an imputation of the missing probes was measured to predict
a 1.6x too wide AD interval at `P_p = 4, P' = 16`).

Method (for every statistic `θ`; all draws from one recorded seed):

1. Probe level `m`. For `m < P_p` every cut's count is thinned exactly (hypergeometric: `m` of the
   cut's `P_p` probes without replacement, independent across cuts); `m = P_p` is the pilot.
2. Paired resampling at the planned question counts: replicate `i` draws `Q'_g` questions per group
   from the pilot's pool of the group (with replacement, one draw shared by every model: stage 1),
   and for every occurrence `R'` of its `R_p` trajectories with replacement (stage 2). `θ1_i` is
   the statistic with each occurrence's pilot trajectories all taken once (stage 1 only), `θ12_i`
   with the stage-2 draws. Draws use the bootstrap's counter-based generator and word layout
   (`_draws`): at the pilot's own design (`Q' = Q_p`, every `R_p = R'`) they are exactly the
   bootstrap's draws, so `θ12` is the bootstrap's replicate distribution of the pilot.
3. Variance components (method of moments on the replicates; `~R_p`, `~Q_p`, `~Q'`: harmonic
   means over segments / groups): `v1 = Var θ1 = (Q_p - 1)/Q_p (σ_b² + σ_w²/R_p) / Q'` and
   `v2 = Var(θ12 - θ1) = (R_p - 1)/R_p σ_w² / (R' Q')`, so
   `w = σ_w²/Q' = v2 R' R_p / (R_p - 1)` and `b = σ_b²/Q' = v1 Q_p/(Q_p - 1) - w / R_p`.
   For a statistic linear in per-trajectory values (OR, AD, `P(0)`) these are the usual two-level
   components, and `v1`, `v2` -- the resampling's own variances -- are computed exactly
   (`_exact_linear`; no Monte Carlo error); for the frontier summaries (`β_match`, area) they
   are those of the statistic's question- and trajectory-level influence, estimated from the
   paired replicates.
4. The planned interval's variance is the bootstrap's own on a set of that design,
   `V(R') = (Q'-1)/Q' b + w ((Q'-1)/(Q' R') + (R'-1)/R'²)` (the two-stage bootstrap counts the
   within-question variance twice, and this is what it reports). At the pilot's own design this
   is exactly `v1 + v2`. Where the moments give `b < 0` the estimate is the boundary `b = 0`,
   `w = (v1 + v2) / ((Q_p - 1)/(Q_p R_p) + (R_p - 1)/(R_p R'))`, which keeps that identity.
5. Probes beyond the pilot (`P' > P_p`). Resampling cannot create probes the pilot lacks, so this
   one step is a model: `b` and `w` are each fitted as `α + β / m` (least squares) over the levels
   `m >= ceil(P_p / 2)` computed in step 1 (at least `fit_levels`: `ceil(P_p/2)`,
   `ceil(3 P_p/4)`, `P_p`; 2, 3, 4 for `P_p = 4`) and evaluated at `P'`, with
   `α >= 0` (`_prediction.inverse_probe_fit`: a component positive at the computed levels is never 0 beyond). (On the simulated
   paper-scale set, bootstrap variances thinned to `m = 1 .. 16` follow `α + β/m` for
   `m >= 2`: AD's is ~`β/m`, OR's and `P(0)`'s flat. `b` depends on `m` too: a question's
   probe-noise bias of AD varies across questions. Keeping `b` at its `P_p` value was measured
   to predict AD widths up to 2x too wide.) For `P' <= P_p` there is no model: the
   level `P'` is computed.
6. Width. `κ = (hi - lo of θ12) / sqrt(v1 + v2)` at the largest computed level keeps the
   replicate distribution's shape (no normal quantile is assumed); the predicted width is
   `κ sqrt(V)`. At the pilot's own design it is exactly the width of `θ12` (step 2).
7. `β_match` (a threshold: the first grid `β` with `F_C(β) >= A_full`) is not fitted by steps 3-5.
   Its `θ12 - θ1` is dominated by jumps of the first crossing, not by a within-question variance,
   so `w = v2 R' R_p / (R_p - 1)` comes out larger than `2 v1` and `b` negative (measured on every
   strategy of an `R_p = 2` pilot of the paper-scale set). Instead the width is the direct
   simulation -- the spread of `β_match` over the pseudo-sets `θ12` at (`Q'`, reference `R'`,
   `P_p`), each with its frontiers re-solved -- times `sqrt(V_A / (v1_A + v2_A))` of the same
   strategy's area `A` (a smooth summary of the same frontier whose components steps 3-5 do
   estimate): the area's predicted over simulated variance carries the corrections the simulation
   lacks (the pilot's within noise `σ_w²/R_p` kept in each question unit; `P' != P_p`; `R' !=`
   reference). At the pilot's own design the factor is 1 and the width is exactly the bootstrap's.

What stays approximate, stated: the Monte Carlo error of `κ` and of the frontier components
(`replicates` paired draws, default `PRECISION_REPLICATES`), the harmonic means across unequal groups and segments, the
`α + β/m` extrapolation in probes, that duplicating pilot trajectories in stage 2 shapes the
FB / DR question units less finely than distinct trajectories would, and (step 7) that
`β_match`'s spread scales with the design as its strategy's area's does (an assumption, measured
below, not derived).

Measured limit (benchmarks/plan_precision.py, SYNTHETIC paper-scale set, pilots of 20 % of the
questions, R_p = 2, P_p = 4, planned R' = P' = 16, all questions): medians OR 0.93x, AD 1.01x,
areas 0.86-0.93x (per pilot OR 0.75-1.45, AD 0.86-1.63, areas 0.82-1.04); `β_match` (step 7) DEE 0.95-1.29x
(median 1.00), DR 1.17-1.37x, FB 0.45-0.60x (5 pilots; the two-component fit of `β_match` itself
gave DEE 0.58-1.02, DR 0.51-0.90, FB 0.30-0.49). Why `β_match` from an `R_p = 2`
pilot cannot be exact: even the direct simulation at the pilot's own `P` (`θ12` at `R' = 16`,
`P = 4`), against the full set's bootstrap at `R = 16, P = 4`, gives DR 1.14 / 1.23, FB 0.58 /
0.77, DEE 1.47 / 2.00 (two pilots). Resampling 16 draws from 2 trajectories keeps 2 distinct
trajectories per question unit: FB's unit (one cap over the union of its trajectories' `L`) and
DR's (all or none) are then 2-trajectory units, whose frontier is a different nonlinear function
than a 16-trajectory unit's, and no resampling of the pilot restores the trajectories it lacks;
for DEE the kept `σ_w²/R_p` widens the simulated spread, which the area's factor (step 7) only
partly removes, and DEE's `β_match` width grows with `P` (0.70 pp at `P = 4`, 1.10 pp at 16 on the
full set) while the area's barely does -- the two errors partly cancel. Plan FB / DR `β_match`
from a pilot with more trajectories (an `R_p = 16, P_p = 4` pilot predicted DEE / FB at 0.94 /
0.91x under the two-component model, measured
before step 7; step 7 was not measured on such a pilot).
"""

import dataclasses
import functools
import math
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from otbench.analysis.core import numbers, pick, words
from otbench.analysis.frontier import STRATEGIES, Pipeline, budget_grid, cell_infos
from otbench.analysis.frontier import summarize as frontier_summary
from otbench.analysis.measurement import MeasurementSet
from otbench.analysis.overthinking import build_layout, trajectory_metrics

from ._bootstrap import PERCENTILES, SEED, chain
from ._draws import resampling

PRECISION_REPLICATES = 200
"""Paired replicates per probe level (each gives `θ1` and `θ12`): they set the interval's shape
`κ` (a few % on a width) and, for the frontier summaries, the components (~7 % on a variance)."""
LINEAR_STATS = ("or", "ad", "zero_step_acc")
"""Macro statistics linear in per-trajectory values: OR, AD, `P(0)` (fractions)."""
FRONTIER_STATS = tuple(f"{k}_{s}" for k in ("beta_match", "area") for s in STRATEGIES)
"""Frontier summaries: `β_match` and the area `∫_0^1 F_C(β) dβ` (trapezoid on the grid) per strategy."""
_BATCH = 25


from ._prediction import Components, PrecisionError, PrecisionPrediction  # noqa: E402,F401


def _design_iv(ms, questions, trajectories, probes, replicates, seed, probe_levels, names):
    if not isinstance(ms, MeasurementSet) or ms.num_trajectories == 0:
        raise PrecisionError("pilot: want a measurement set with trajectories")
    for name, v in (("trajectories", trajectories), ("probes", probes), ("replicates", replicates)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < (2 if name == "replicates" else 1):
            raise PrecisionError(f"`{name}` must be an integer >= {2 if name == 'replicates' else 1}, got {v!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= seed < 2 ** 64:
        raise PrecisionError(f"`seed` must be an integer in [0, 2**64), got {seed!r}")
    if np.unique(ms.probes).size != 1:
        raise PrecisionError("pilot: probes per position differ across trajectories "
                             f"({sorted(set(ms.probes.tolist()))}); plan from one P")
    P_p = int(ms.probes[0])
    if names.seg_size.min() < 2:
        raise PrecisionError("pilot: some (model, question) has 1 trajectory; precision planning needs "
                             ">= 2 per (model, question) to separate within- from between-question variation")
    groups = names.groups
    if questions is None:
        questions = {}
    unknown = sorted(set(questions) - set(groups))
    if unknown:
        raise PrecisionError(f"questions: group(s) {', '.join(unknown)} not in the pilot "
                             f"({', '.join(groups)})")
    bad = [g for g, q in questions.items() if isinstance(q, bool) or not isinstance(q, (int, np.integer)) or q < 1]
    if bad:
        raise PrecisionError(f"questions: want a positive integer per group, got {questions[bad[0]]!r} "
                             f"for {bad[0]}")
    levels = sorted({int(m) for m in (probe_levels or ())} | (
        {int(probes)} if probes <= P_p else set(fit_levels(P_p))))
    if any(m < 1 or m > P_p for m in levels):
        raise PrecisionError(f"probe_levels: want levels in 1..{P_p} (the pilot's P), got {levels}")
    return dict(questions), P_p, levels


def fit_levels(P_p: int) -> tuple[int, ...]:
    """The probe levels the `α + β/m` fit uses: `ceil(P_p/2)`, `ceil(3 P_p/4)`, `P_p` (distinct)."""
    return tuple(sorted({-(-P_p // 2), -(-3 * P_p // 4), P_p}))


def thin_probes(ms: MeasurementSet, m: int, rng: np.random.Generator) -> MeasurementSet:
    """`ms` with every cut's count thinned to `m` of its `P` probes without replacement
    (hypergeometric, independent across cuts; padding re-applied, docs/rules.md)."""
    P = int(ms.probes[0])
    if m == P:
        return ms
    C = ms.C.astype(np.int64)
    k = np.arange(C.shape[1])[None, :]
    valid = k <= ms.n[:, None]
    draw = np.zeros_like(C)
    draw[valid] = rng.hypergeometric(C[valid], P - C[valid], m)
    last = draw[np.arange(C.shape[0]), ms.n]
    C2 = np.where(valid, draw, last[:, None]).astype(np.int32)
    return dataclasses.replace(ms, C=C2, probes=np.full_like(ms.probes, m))


@functools.cache
def _draw_fn(slots: int, models: int, draws: int):
    """Jitted `(rep uint64[B], seed, pool, slot_lo, slot_n, seg_of, size) -> (seg, local)`.

    The words of replicate `i` are `i * W + 1 .. i * W + W`, `W = ceil(S'/2) + M S' ceil(R'/2)`,
    split as in `_draws.occurrence_items`; `local[m, s, r]` is `floor(u * R_seg / 2**32)`, the local
    trajectory of draw `r < R'` (all `R'` draws used, whatever `R_seg`)."""
    Hs, Hr = -(-slots // 2), -(-draws // 2)
    W = Hs + models * slots * Hr

    def one(rep, seed, pool, slot_lo, slot_n, seg_of, size):
        w = words(seed, rep * jnp.uint64(W) + jnp.uint64(1), W)
        q = pool[slot_lo + pick(numbers(w[:Hs], slots), slot_n)]
        seg = seg_of[:, q]
        has = seg >= 0
        R = jnp.where(has, size[jnp.where(has, seg, 0)], 1)
        local = pick(numbers(w[Hs:].reshape(models, slots, Hr), draws), R[:, :, None])
        return jnp.where(has, seg, -1), local

    return jax.jit(jax.vmap(one, in_axes=(0, None, None, None, None, None, None)))


@dataclasses.dataclass(frozen=True)
class _Setup:
    res: Any
    names: Any
    slot_lo: np.ndarray      # int32[S'] first pool position of each planned slot's group
    slot_n: np.ndarray       # uint64[S'] the group's pilot pool size
    group_slots: tuple[tuple[int, int], ...]   # (first planned slot, Q'_g) per layout group
    seg_rows: np.ndarray     # int64[seg, Rmax] global rows of each segment (-1 padding)


def _setup(ms: MeasurementSet, questions: Mapping[str, int]) -> _Setup:
    layout, names = build_layout(ms)
    res = resampling(ms, layout, names)
    lo, n, gs, first = [], [], [], 0
    for g, (f, qp) in enumerate(res.group_slots):
        q = int(questions.get(names.groups[g], qp))
        lo += [f] * q
        n += [qp] * q
        gs.append((first, q))
        first += q
    rows = np.asarray(res.tables.rows, dtype=np.int64)[:-1].reshape(-1, res.rmax)
    return _Setup(res=res, names=names, slot_lo=np.asarray(lo, dtype=np.int32),
                  slot_n=np.asarray(n, dtype=np.uint64), group_slots=tuple(gs), seg_rows=rows)


def _draws(su: _Setup, R: int, seed: int, start: int, count: int) -> tuple[np.ndarray, np.ndarray]:
    """(seg int64[rep, M, S'] or -1, local int64[rep, M, S', R']) of replicates `start ..`."""
    t = su.res.tables
    fn = _draw_fn(int(su.slot_lo.shape[0]), su.res.models, R)
    seg, local = fn(jnp.arange(start, start + count, dtype=jnp.uint64), jnp.asarray(seed, dtype=jnp.uint64),
                    t.pool, jnp.asarray(su.slot_lo), jnp.asarray(su.slot_n), t.seg_of, t.size)
    return np.asarray(seg, dtype=np.int64), np.asarray(local, dtype=np.int64)


def _linear(su: _Setup, values: np.ndarray, seg: np.ndarray, local: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """float64[rep, stat] macro θ1 and θ12 of per-trajectory `values` [stat, traj]."""
    res = su.res
    nseg, Rm = su.seg_rows.shape
    size = res.seg_size
    table = np.zeros((values.shape[0], nseg, Rm))
    have = su.seg_rows >= 0
    table[:, have] = values[:, su.seg_rows[have]]
    seg_mean = table.sum(axis=2) / size                        # [stat, seg]
    has = seg >= 0
    s0 = np.where(has, seg, 0)
    occ1 = np.where(has, seg_mean[:, s0], 0.0)                 # [stat, rep, M, S']
    occ12 = np.where(has, table[:, s0[..., None], local].mean(axis=-1), 0.0)
    out = []
    for occ in (occ1, occ12):
        cell = np.zeros((occ.shape[1], len(res.cell_model), values.shape[0]))
        for c, (m, g) in enumerate(zip(res.cell_model, res.cell_group)):
            f, q = su.group_slots[g]
            cnt = has[:, m, f:f + q].sum(axis=1)
            with np.errstate(invalid="ignore", divide="ignore"):
                cell[:, c] = (occ[:, :, m, f:f + q].sum(axis=-1) / np.where(cnt > 0, cnt, np.nan)).T
        out.append(chain(cell.transpose(0, 2, 1), res.cell_model, res.cell_group,
                         len(su.names.models), len(su.names.groups))[2])
    return out[0], out[1]


def _frontier_stats(ms: MeasurementSet, su: _Setup, R: int, draws, grid) -> tuple[np.ndarray, np.ndarray]:
    """float64[rep, stat] (FRONTIER_STATS order) of θ1 and θ12, the frontiers re-solved per replicate.

    The pipeline bounds a unit by its question's trajectories in the set, so it runs on a copy of
    the pilot with every trajectory repeated `c = ceil(R' / min R_p)` times; a draw takes copy 0."""
    res = su.res
    c = max(1, -(-R // int(res.seg_size.min())))
    virtual = ms.take(np.repeat(np.arange(ms.num_trajectories), c)) if c > 1 else ms
    infos = cell_infos(virtual, su.names.cell_index, res.cell_model, res.cell_group, su.group_slots)
    Rm = su.seg_rows.shape[1]
    width = max(R, Rm)
    outs = ([], [])
    with Pipeline(infos, grid, STRATEGIES, 0) as pipe:
        for seg, local in draws:
            has = seg >= 0
            s0 = np.where(has, seg, 0)
            all_rows = np.where(has[..., None], su.seg_rows[s0], -1)                 # [rep, M, S', Rm]
            r1 = np.full(seg.shape + (width,), -1, dtype=np.int64)
            r1[..., :Rm] = np.where(all_rows >= 0, all_rows * c, -1)
            r12 = np.full(seg.shape + (width,), -1, dtype=np.int64)
            picked = np.take_along_axis(su.seg_rows[s0], local, axis=-1)
            r12[..., :R] = np.where(has[..., None], picked * c, -1)
            for rows, out in zip((r1, r12), outs):
                fb = pipe.finish(pipe.submit(rows))
                out.append(_summaries(fb, grid, res.cell_model))
    return np.concatenate(outs[0]), np.concatenate(outs[1])


def _summaries(fb, grid, cell_model) -> np.ndarray:
    beta = np.asarray([float(b) for b in grid])
    cols = []
    areas = []
    for i in range(len(STRATEGIES)):
        s = frontier_summary(grid, fb.reward[:, i], fb.reward_one[:, i], fb.endpoint, fb.probes, cell_model)
        bm = np.asarray(s.beta_match, dtype=np.float64)
        cols.append(np.where(np.isfinite(bm), bm, np.nan))
        areas.append(np.trapezoid(s.macro, beta, axis=-1))
    return np.stack(cols + areas, axis=1)


def _exact_linear(su: _Setup, values: np.ndarray, R: int) -> tuple[np.ndarray, np.ndarray]:
    """float64[stat] `v1`, `v2` of the linear statistics, the resampling's variances computed exactly.

    For a group `g` the `Q'_g` slots are i.i.d. uniform over its pool, and stage-2 draws are
    independent across occurrences, so with `w_c` the cell's macro weight (docs/rules.md chain), `π_c`
    the share of the pool the cell's model has, `ȳ_{c,q}` and `s²_{c,q}` the mean and plug-in
    variance of the occurrence's pilot values and `μ_c` the cell mean:
    `v1 = Σ_g mean_q (Σ_c w_c (ȳ_{c,q} - μ_c) / π_c)² / Q'_g` and
    `v2 = Σ_g mean_q Σ_c w_c² s²_{c,q} / (R' π_c²) / Q'_g` (sums over the group's cells that have
    `q`). Exact when every model has every question; otherwise the cell's ratio of sums is
    linearized (first order in `1/Q'_g`).
    """
    res = su.res
    pool, seg_of = np.asarray(res.tables.pool), np.asarray(res.tables.seg_of)
    nseg, Rm = su.seg_rows.shape
    have = su.seg_rows >= 0
    table = np.zeros((values.shape[0], nseg, Rm))
    table[:, have] = values[:, su.seg_rows[have]]
    mean = table.sum(axis=2) / res.seg_size
    s2 = np.where(have, (table - mean[..., None]) ** 2, 0.0).sum(axis=2) / res.seg_size
    M = len(su.names.models)
    cells_of = np.bincount(res.cell_model, minlength=M)
    v1, v2 = np.zeros(values.shape[0]), np.zeros(values.shape[0])
    for g, (f, qp) in enumerate(res.group_slots):
        pq = pool[f:f + qp]
        Z, V = np.zeros((values.shape[0], qp)), np.zeros((values.shape[0], qp))
        for c in np.flatnonzero(res.cell_group == g):
            m = res.cell_model[c]
            segs = seg_of[m, pq]
            present = segs >= 0
            pi, w = present.mean(), 1.0 / (M * cells_of[m])
            sp = segs[present]
            Z[:, present] += w * (mean[:, sp] - mean[:, sp].mean(axis=1, keepdims=True)) / pi
            V[:, present] += w * w * s2[:, sp] / (R * pi * pi)
        v1 += (Z * Z).mean(axis=1) / su.group_slots[g][1]
        v2 += V.mean(axis=1) / su.group_slots[g][1]
    return v1, v2


def _components(t1: np.ndarray, t12: np.ndarray, R: int, R_p: float, Q_p: float,
                percentiles, exact: tuple[float, float] | None = None) -> Components:
    """The components from paired replicates (`v1`, `v2` from `exact` when given, else estimated)."""
    ok = np.isfinite(t1) & np.isfinite(t12)
    a, b = t1[ok], t12[ok]
    if ok.sum() < 2:
        return Components(math.nan, math.nan, math.nan, math.nan, math.nan, int(ok.sum()))
    if exact is not None:
        v1, v2 = float(exact[0]), float(exact[1])
    else:
        v1 = float(np.var(a, ddof=1))
        v2 = float(np.var(b - a, ddof=1))
    w = v2 * R * R_p / (R_p - 1)
    between = v1 * Q_p / (Q_p - 1) - w / R_p if Q_p > 1 else v1 - w / R_p
    if between < 0:
        # the moments' boundary: no between-question variance, all of v1 + v2 within (so the pilot's
        # own design still predicts exactly v1 + v2)
        between = 0.0
        w = (v1 + v2) / ((Q_p - 1) / (Q_p * R_p) + (R_p - 1) / (R_p * R)) if v1 + v2 > 0 else 0.0
    lo, hi = np.percentile(b, percentiles)
    return Components(between=between, within=w, v1=v1, v2=v2, width=float(hi - lo), defined=int(ok.sum()))


def predict_precision(pilot: MeasurementSet, *, questions: Mapping[str, int] | None = None,
                      trajectories: int, probes: int, replicates: int = PRECISION_REPLICATES,
                      seed: int = SEED, frontiers: bool = False, probe_levels: Sequence[int] = (),
                      grid: int | Sequence[Any] = 101,
                      percentiles: Sequence[float] = PERCENTILES) -> PrecisionPrediction:
    """Predict the bootstrap interval widths of the macro OR, AD, `P(0)` (and with `frontiers`,
    `β_match` and the frontier area per strategy) at a planned design (module docstring).

    Args:
      pilot: the pilot measurement set (>= 2 trajectories per (model, question), one `P`).
      questions: group -> planned questions (default: the pilot's own counts).
      trajectories: the planned `R'` (the stage-2 draws; any `R` can be asked of the result).
      probes: the planned `P'`; levels `< P_p` are thinned, `> P_p` extrapolated.
      replicates: paired replicates per probe level.
      seed: the draws' seed (the bootstrap's generator).
      frontiers: also the frontier summaries (re-solves every frontier twice per replicate: minutes).
      probe_levels: further probe levels to compute (e.g. every candidate `P <= P_p`).
      grid, percentiles: as `bootstrap`.
    """
    layout, names = build_layout(pilot) if isinstance(pilot, MeasurementSet) and pilot.num_trajectories \
        else (None, None)
    if names is None:
        raise PrecisionError("pilot: want a measurement set with trajectories")
    qs, P_p, levels = _design_iv(pilot, questions, trajectories, probes, replicates, seed, probe_levels, names)
    R = int(trajectories)
    su = _setup(pilot, qs)
    R_p = float(su.res.seg_size.size / np.sum(1.0 / su.res.seg_size))
    pilot_q = {g: int(n) for g, (_, n) in zip(names.groups, su.res.group_slots)}
    Q_p = len(pilot_q) / sum(1.0 / q for q in pilot_q.values())
    planned = {g: qs.get(g, pilot_q[g]) for g in names.groups}
    grid_t = budget_grid(grid)
    q = tuple(float(x) for x in percentiles)
    rng = np.random.default_rng([int(seed) % 2 ** 63, 26])
    draws = [_draws(su, R, int(seed), s, min(_BATCH, replicates - s)) for s in range(0, replicates, _BATCH)]
    out: dict[int, dict[str, Components]] = {}
    for m in sorted(levels, reverse=True):
        ms_m = thin_probes(pilot, m, rng)
        tm = trajectory_metrics(jnp.asarray(ms_m.L), jnp.asarray(ms_m.C), jnp.asarray(ms_m.n),
                                jnp.asarray(ms_m.probes))
        values = np.stack([np.asarray(tm.ratio), np.asarray(tm.degradation), np.asarray(tm.zero_step)])
        t1, t12 = (np.concatenate(x) for x in zip(*(_linear(su, values, s, lo) for s, lo in draws)))
        e1, e2 = _exact_linear(su, values, R)
        comps = {s: _components(t1[:, j], t12[:, j], R, R_p, Q_p, q, (e1[j], e2[j]))
                 for j, s in enumerate(LINEAR_STATS)}
        if frontiers:
            f1, f12 = _frontier_stats(ms_m, su, R, draws, grid_t)
            comps.update({s: _components(f1[:, j], f12[:, j], R, R_p, Q_p, q)
                          for j, s in enumerate(FRONTIER_STATS)})
        out[m] = comps
    return PrecisionPrediction(questions=planned, reference_R=R, pilot_questions=pilot_q, pilot_R=R_p,
                               pilot_P=P_p, levels=dict(sorted(out.items())), replicates=int(replicates),
                               seed=int(seed), percentiles=(q[0], q[1]), synthetic=bool(pilot.synthetic))


def frontier_area(macro: np.ndarray, grid: Sequence[Fraction]) -> np.ndarray:
    """`∫_0^1 F_C(β) dβ` by the trapezoid rule on the grid (last axis of `macro`)."""
    beta = np.asarray([float(b) for b in grid])
    return np.trapezoid(macro, beta, axis=-1)
