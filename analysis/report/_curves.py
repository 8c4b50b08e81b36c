"""Trajectory-level report figures: example STP curves, one question's trajectories, step lengths.

Which trajectories are shown is fixed by documented deterministic rules, so
a report never depends on a random draw or on someone's choice:

* `example_rows` (paper Fig. 7): for each benchmark group, among its
  trajectories with at least 3 steps (else at least 1, else all), the one
  whose (OR, AD) is nearest to the group's mean (OR, AD) over those
  trajectories, distance measured in units of their standard deviations (a
  deviation of 0 counts as 1); ties go to the first row in the set's order
  (cell, question, trajectory). A typical curve, not an extreme one.
* `example_question` (paper Fig. 8): among (model, question) pairs with at
  least two trajectories, the one whose within-question variation -- the
  mean absolute OR difference over its trajectory pairs, docs/rules.md -- equals
  the lower median over all such pairs; ties go to the first pair in the
  set's order. A representative level of variation, not the largest.
* `step_lengths` (paper Fig. 9): every trajectory of the probe's ``tokens``
  table re-segmented (docs/rules.md, the set's recorded boundary rule) at
  ``b in {b0 // 2, b0, 2 b0}``, ``b0`` the set's recorded target step length
  (256 when none is recorded); the realized step lengths pooled per model,
  every step weighted equally.
"""

import dataclasses
import os
from collections.abc import Mapping, Sequence

import numpy as np
from otbench.analysis.measurement import MeasurementSet

from ._style import COLUMN_IN, TEXT_IN, new_figure

MAX_SMALL_MULTIPLES = 16
"""Fig. 8 shows at most this many trajectories (the first by trajectory index)."""


@dataclasses.dataclass(frozen=True)
class PerTrajectory:
    """Host copies of the per-trajectory metrics (docs/rules.md)."""

    k_star: np.ndarray    # int32[traj]
    ratio: np.ndarray     # float64[traj] OR (fraction)
    degradation: np.ndarray  # float64[traj] AD (fraction)

    @classmethod
    def of(cls, ms: MeasurementSet) -> "PerTrajectory":
        import jax.numpy as jnp
        from otbench.analysis.overthinking import trajectory_metrics

        tm = trajectory_metrics(jnp.asarray(ms.L), jnp.asarray(ms.C), jnp.asarray(ms.n),
                                jnp.asarray(ms.probes))
        return cls(np.asarray(tm.k_star), np.asarray(tm.ratio, dtype=np.float64),
                   np.asarray(tm.degradation, dtype=np.float64))


# -- selection rules ---------------------------------------------------------------------

def example_rows(ms: MeasurementSet, pt: PerTrajectory) -> list[int]:
    """One representative row per present group, in group order (module docstring)."""
    group_of_row = ms.cell_group[ms.cell]
    out = []
    for g in np.unique(group_of_row).tolist():
        rows = np.flatnonzero(group_of_row == g)
        for min_n in (3, 1, 0):
            cand = rows[ms.n[rows] >= min_n]
            if cand.size:
                break
        o, a = pt.ratio[cand], pt.degradation[cand]
        so, sa = o.std(), a.std()
        d = ((o - o.mean()) / (so if so > 0 else 1.0)) ** 2 + ((a - a.mean()) / (sa if sa > 0 else 1.0)) ** 2
        out.append(int(cand[int(np.argmin(d))]))       # argmin: first of equal distances
    return out


def pair_mad(values: np.ndarray) -> float:
    """Mean |v_a - v_b| over all unordered pairs (len >= 2)."""
    v = np.sort(np.asarray(values, dtype=np.float64))
    n = v.size
    # Sorted, pair (a < b) contributes v_b - v_a: sum_b v_b (2b - n + 1) over 0-based b.
    return float(np.sum(v * (2 * np.arange(n) - n + 1)) / (n * (n - 1) / 2))


def example_question(ms: MeasurementSet, pt: PerTrajectory) -> np.ndarray | None:
    """Rows of the representative (model, question) pair (module docstring); None if none has R >= 2."""
    key = ms.cell.astype(np.int64) * max(ms.num_questions, 1) + ms.question
    # Rows are sorted by (cell, question, trajectory), so segments are contiguous and
    # np.unique's first indices give them in the set's order.
    _, first, counts = np.unique(key, return_index=True, return_counts=True)
    order = np.argsort(first, kind="stable")
    segs = [(int(first[i]), int(counts[i])) for i in order if counts[i] >= 2]
    if not segs:
        return None
    vals = np.asarray([pair_mad(pt.ratio[s:s + c]) for s, c in segs])
    target = np.sort(vals)[(vals.size - 1) // 2]
    s, c = segs[int(np.flatnonzero(vals == target)[0])]
    return np.arange(s, s + c)


# -- drawing ---------------------------------------------------------------------------------

def _curve(ms: MeasurementSet, r: int) -> tuple[np.ndarray, np.ndarray]:
    n = int(ms.n[r])
    return ms.L[r, :n + 1].astype(np.float64), 100.0 * ms.C[r, :n + 1] / float(ms.probes[r])


def token_axis(ax, nbins: int = 5) -> None:
    """Compact token ticks (``12k``) with at most `nbins` intervals: no overlapping labels."""
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(nbins=nbins, integer=True))
    ax.xaxis.set_major_formatter(FuncFormatter(
        lambda v, _: f"{v / 1000:g}k" if abs(v) >= 1000 else f"{v:g}"))


def _draw_curve(ax, ms: MeasurementSet, pt: PerTrajectory, r: int, *, marks: bool = True,
                small: bool = False) -> None:
    x, y = _curve(ms, r)
    k = int(pt.k_star[r])
    n = x.size - 1
    if marks and n > 0 and x[-1] > x[k]:
        ax.axvspan(x[k], x[-1], color="#d62728", alpha=0.08, lw=0)
    ax.plot(x, y, "o-", color="#1f77b4", ms=2.5 if small else 3.5, lw=1.0)
    ax.plot([x[k]], [y[k]], marker="*", ms=9 if small else 12, color="#ff7f0e", mec="black",
            mew=0.5, ls="none", zorder=5)
    if marks and y[k] > y[-1]:
        # A plain vertical bar (arrowheads would swamp a drop of a few points).
        ax.plot([x[-1], x[-1]], [y[-1], y[k]], color="#d62728", lw=1.8, solid_capstyle="butt")
        ax.plot([x[k], x[-1]], [y[k], y[k]], ls=":", color="#d62728", lw=0.8)


def _legend_handles():
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    return [Line2D([], [], marker="o", color="#1f77b4", ms=3.5, label="probe accuracy P(k)"),
            Line2D([], [], marker="*", ls="none", color="#ff7f0e", mec="black", ms=11,
                   label="earliest maximizer k*"),
            Patch(color="#d62728", alpha=0.15, label="tokens after k* (OR)"),
            Line2D([], [], color="#d62728", lw=1.0, label="AD = P(k*) − P(n)")]


def _tag(ms: MeasurementSet, r: int) -> tuple[str, str, str, int]:
    m, g = ms.cell_name(int(ms.cell[r]))
    return m, g, ms.question_id[int(ms.question[r])], int(ms.trajectory[r])


def examples_figure(ms: MeasurementSet, pt: PerTrajectory, rows: Sequence[int]):
    """Fig. 7: one panel per example row with k*, the OR span and the AD drop marked."""
    cols = min(2 if len(rows) <= 4 else 3, len(rows))
    nrows = -(-len(rows) // cols)
    fig = new_figure((TEXT_IN if cols > 1 else COLUMN_IN, 2.7 * nrows + 0.9))
    axes = fig.subplots(nrows, cols, squeeze=False)
    for ax in axes.flat[len(rows):]:
        ax.set_visible(False)
    for ax, r in zip(axes.flat, rows):
        _draw_curve(ax, ms, pt, r)
        m, g, q, s = _tag(ms, r)
        # The numbers go in the title, where they can never hide the curve.
        ax.set_title(f"{g} · {m}\nquestion {q}, trajectory {s}\nOR = {100 * pt.ratio[r]:.1f}%, "
                     f"AD = {100 * pt.degradation[r]:.2f} pp, n = {int(ms.n[r])} steps",
                     fontsize=7)
        ax.set_ylim(-4, 104)
        token_axis(ax)
        ax.set_xlabel("retained thinking tokens L(k) (tokens)")
        ax.set_ylabel("probe accuracy P(k) (%)")
    fig.legend(handles=_legend_handles(), loc="outside lower center", ncols=4)
    return fig


def question_figure(ms: MeasurementSet, pt: PerTrajectory, rows: np.ndarray):
    """Fig. 8: the question's trajectories as small multiples with shared axes."""
    rows = rows[np.argsort(ms.trajectory[rows], kind="stable")][:MAX_SMALL_MULTIPLES]
    cols = min(4, rows.size)
    nrows = -(-rows.size // cols)
    fig = new_figure((TEXT_IN if cols > 2 else COLUMN_IN * cols / 2 + 0.5, 1.8 * nrows + 1.1))
    axes = fig.subplots(nrows, cols, sharex=True, sharey=True, squeeze=False)
    for ax in axes.flat[rows.size:]:
        ax.set_visible(False)
    for ax, r in zip(axes.flat, rows):
        _draw_curve(ax, ms, pt, int(r), small=True)
        ax.set_title(f"traj {int(ms.trajectory[r])}: OR {100 * pt.ratio[r]:.0f}%, "
                     f"AD {100 * pt.degradation[r]:.1f} pp", fontsize=6.5)
        ax.set_ylim(-4, 104)
        token_axis(ax, nbins=4)
    for ax in axes[-1]:
        ax.set_xlabel("L(k) (tokens)")
    for ax in axes[:, 0]:
        ax.set_ylabel("P(k) (%)")
    # The hidden axes of a partial last row take no x labels: label the row above instead.
    for j in range(cols):
        if nrows > 1 and (nrows - 1) * cols + j >= rows.size:
            axes[-2, j].set_xlabel("L(k) (tokens)")
            axes[-2, j].xaxis.set_tick_params(labelbottom=True)
    fig.legend(handles=_legend_handles(), loc="outside lower center", ncols=4)
    return fig


# -- step lengths (paper Fig. 9) ----------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class StepLengths:
    """Realized step lengths per model and target `b` (module docstring)."""

    b0: int | None                           # the set's recorded b (None: not recorded)
    bs: tuple[int, ...]
    steps: Mapping[str, Mapping[int, np.ndarray]]   # model -> b -> int64[steps]
    trajectories: int


def step_length_bs(b0: int | None) -> tuple[int, ...]:
    b = 256 if b0 is None else int(b0)
    return tuple(sorted({max(1, b // 2), b, 2 * b}))


def step_lengths(path: str | os.PathLike) -> StepLengths | str:
    """Re-segment the set's stored thinking ids; a string says why that is not possible.

    Needs the ``tokens`` table (`load_table`) and the boundary ids recorded
    in the manifest's provenance (as ``otbench probe`` writes them). The
    segmentation is the probe's own (`otbench.analysis.measurement._segment`, NumPy only).
    """
    from otbench.analysis.measurement import (
        MeasurementSetError,
        load_table,
        read_manifest,
    )

    manifest = read_manifest(path)
    if "tokens" not in (manifest.get("tables") or {}):
        return "the set has no token ids (no 'tokens' table; sets written by `otbench probe` have one)"
    prov = manifest.get("provenance") or {}
    if "boundary_ids" not in prov:
        return "the set records no step-boundary token ids ('boundary_ids' in the provenance)"
    try:
        table = load_table(path, "tokens")
    except MeasurementSetError as e:
        return f"the 'tokens' table cannot be read: {' '.join(str(e).split())}"
    for col in ("model", "thinking"):
        if col not in table.column_names:
            return f"the 'tokens' table has no {col!r} column"
    from otbench.analysis.measurement import segment_flat, stored_thinking

    st = stored_thinking(table, prov)
    ids, off, mask, span = st.ids, st.off, st.mask, st.span
    b0 = (prov.get("probe") or {}).get("b")
    bs = step_length_bs(b0)
    models = np.asarray(table.column("model").to_pylist(), dtype=object)
    T = table.num_rows
    out: dict[str, dict[int, np.ndarray]] = {str(m): {} for m in sorted(set(models.tolist()))}
    for b in bs:
        flat, o = segment_flat(ids, off, mask, int(b), span=span)
        n = np.diff(o) - 1                                   # steps per trajectory
        d = np.diff(flat)
        keep = np.ones(d.size, dtype=bool)
        keep[o[1:-1] - 1] = False                            # differences across rows
        steps = d[keep]
        owner = np.repeat(models, n)
        for m in out:
            out[m][b] = steps[owner == m].astype(np.int64)
    return StepLengths(b0=None if b0 is None else int(b0), bs=bs, steps=out, trajectories=T)


def step_length_figure(sl: StepLengths):
    """Fig. 9: per model, the distribution of realized step lengths for each b (log-spaced bins)."""
    from matplotlib.ticker import FuncFormatter

    models = list(sl.steps)
    cols = min(3, len(models))
    nrows = -(-len(models) // cols)
    fig = new_figure((TEXT_IN if cols > 1 else COLUMN_IN, 2.6 * nrows + 1.2))
    axes = fig.subplots(nrows, cols, squeeze=False, sharex=True)
    for ax in axes.flat[len(models):]:
        ax.set_visible(False)
    top = max([int(v.max()) for m in models for v in sl.steps[m].values() if v.size] + [2])
    edges = np.unique(np.round(np.geomspace(1, top + 1, 41)))
    colors = ("#1f77b4", "#ff7f0e", "#2ca02c")
    for ax, m in zip(axes.flat, models):
        for i, b in enumerate(sl.bs):
            v = sl.steps[m][b]
            if v.size == 0:
                continue
            counts, _ = np.histogram(v[v > 0], bins=edges)
            zero = int((v == 0).sum())
            lab = f"b = {b}: mean {v.mean():.1f}, {v.size} steps" + (f" ({zero} empty)" if zero else "")
            ax.stairs(100.0 * counts / v.size, edges, color=colors[i % 3], lw=1.4, label=lab)
            ax.axvline(b, color=colors[i % 3], ls=":", lw=0.9)
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.set_title(m, fontsize=7.5)
        ax.set_xlabel("realized step length (tokens, log scale)")
        ax.set_ylabel("share of the model's steps (%)")
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.25), fontsize=6.0,
                  borderaxespad=0.0)
    return fig


def step_length_rows(sl: StepLengths) -> list[list[tuple[str, str]]]:
    """Table rows: model, b, steps, mean, p10, p50, p90 ("lower" percentiles: observed lengths)."""
    rows = []
    for m in sl.steps:
        for b in sl.bs:
            v = sl.steps[m][b]
            if v.size:
                q = np.percentile(v, [10, 50, 90], method="lower")
                cells = [str(v.size), f"{v.mean():.2f}"] + [str(int(x)) for x in q]
                csv = [str(v.size), f"{v.mean():.4f}"] + [str(int(x)) for x in q]
            else:
                cells = ["0"] + ["n/a"] * 4
                csv = ["0"] + [""] * 4
            rows.append([(m, m), (str(b), str(b))] + list(zip(cells, csv)))
    return rows
