"""The report's sections: which tables and figures each shows, their captions and fallbacks.

Each function takes the report context (`_report._Ctx`), writes its figures
and tables through it and returns the page `Section`. A missing input gives
a note that says what to run, never an empty or made-up figure.
"""

import functools
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from otbench.analysis.overthinking import ZERO_ACCURACY_NOTE, spearman_note

from . import _curves as curves
from . import _figures as figs
from . import _numbering as num
from . import _tables as tabs
from ._html import Section

_WEIGHTS = ("means over trajectories within a question, questions within a group, then equal "
            "weights over groups (Avg. column) and models (Avg. row)")


def _n(x: int) -> str:
    return f"{x:,}"


# -- 1. overthinking matrices (Tables 1, 3-7; Fig. 1) ------------------------------------------

_PCT, _FROM_ZERO = (0.0, 100.0), (0.0, None)
"""Colour-scale ends (display units): shares of a whole on 0-100 %, the rest from 0, so a
spread of a few points is never stretched over the whole scale."""
_MATRIX_FIGURES = {
    # key: (metric keys, panel titles, units, scales, digits, colour maps, scale ends)
    "overthinking": (("or", "ad"), ("Overthinking Ratio OR (%)", "Accuracy Degradation AD (pp)"),
                     ("OR (%)", "AD (pp)"), (100.0, 100.0), (1, 2), ("Blues", "Reds"),
                     (_PCT, _FROM_ZERO)),
    "baselines": (("full_acc", "tokens"), ("original full-thinking accuracy (%)",
                                           "mean thinking tokens L(n) (tokens)"),
                  ("accuracy (%)", "tokens"), (100.0, 1.0), (1, 0), ("Greens", "Purples"),
                  (_PCT, _FROM_ZERO)),
}
_POINT_TABLES = (
    # (table, metric key, title, caption start, HTML intervals, scale ends, trajectories said)
    ("or", "or", "Overthinking Ratio OR (%)", "Mean OR in % of thinking tokens", True, _PCT, True),
    ("ad", "ad", "Accuracy Degradation AD (pp)", "Mean AD in percentage points", True,
     _FROM_ZERO, True),
    ("full_acc", "full_acc", "Original full-thinking accuracy (%)",
     "Accuracy of the original final answers (not the STP probes)", False, _PCT, False),
    ("tokens", "tokens", "Mean thinking tokens", "Mean full thinking length L(n) in tokens",
     True, _FROM_ZERO, False),
    ("endpoint_acc", "endpoint_acc", "STP endpoint accuracy P(n) (%)",
     "Mean probe accuracy at full thinking", True, _PCT, False),
    ("zero_step", "zero_step_acc", "Zero-step accuracy P(0) (%)",
     "Mean probe accuracy with no thinking retained", True, _PCT, False),
    ("pairwise_or", "pairwise_or", "Within-question variation of OR (pp)",
     "Mean absolute OR difference over a question's trajectory pairs (questions with R ≥ 2)",
     True, _FROM_ZERO, False),
    ("pairwise_ad", "pairwise_ad", "Within-question variation of AD (pp)",
     "Mean absolute AD difference over a question's trajectory pairs (questions with R ≥ 2)",
     True, _FROM_ZERO, False),
)
_INTERVAL_TABLES = (
    ("or_ci", "or", "OR (%)"), ("ad_ci", "ad", "AD (pp)"),
    ("full_acc_ci", "full_acc", "original full-thinking accuracy (%)"),
    ("tokens_ci", "tokens", "mean thinking tokens"),
    ("endpoint_acc_ci", "endpoint_acc", "STP endpoint accuracy P(n) (%)"),
    ("zero_step_ci", "zero_step_acc", "zero-step accuracy P(0) (%)"),
    ("pairwise_or_ci", "pairwise_or", "the within-question variation of OR (pp)"),
    ("pairwise_ad_ci", "pairwise_ad", "the within-question variation of AD (pp)"),
)
_PAIR_NOTE = ("; pairs are formed within each drawn (model, question) occurrence from draws of "
              "distinct trajectories (a trajectory drawn twice is not a pair with itself), so "
              "replicate values centre on the estimate")


def _replicates(b: Mapping[str, Any] | None) -> str:
    return f"{b['replicates']:,} " if b and isinstance(b.get("replicates"), int) else ""


def _excluded(m: Mapping[str, Any], b: Mapping[str, Any] | None, keys: Sequence[str]) -> bool:
    """Whether some bootstrap interval of `keys` does not contain its estimate."""
    if not b:
        return False
    pairs = [((b.get("macro") or {}).get(k), m["macro"].get(k)) for k in keys]
    for scope in ("by_model", "by_group"):
        pairs += [((b.get(scope) or {}).get(x, {}).get(k), v.get(k))
                  for x, v in m[scope].items() for k in keys]
    est = {(c["model"], c["group"]): c for c in m["cells"]}
    pairs += [(c.get(k), est.get((c["model"], c["group"]), {}).get(k))
              for c in b.get("cells", []) for k in keys]
    return any(tabs.excludes(iv, e) for iv, e in pairs)


def _matrix_figure(ctx, sec: Section, name: str, title: str, caption: str) -> None:
    keys, labels, units, scales, digits, cmaps, ranges = _MATRIX_FIGURES[name]
    if _excluded(ctx.inputs.metrics, ctx.inputs.bootstrap, keys):
        caption = caption.rstrip(".") + f"; {tabs.EXCLUDES_NOTE}."
    if "or" in keys and tabs.zero_or_places(ctx.inputs.metrics, "or"):
        caption = caption.rstrip(".") + f"; {ZERO_ACCURACY_NOTE}."
    draw = functools.partial(figs.matrix_figure, ctx.inputs.metrics, keys, labels, units, scales,
                             digits, cmaps, boot=ctx.inputs.bootstrap, ranges=ranges)
    sec.figure(ctx.fig(name, draw, title=title, caption=caption,
                       trajectories=ctx.ms.num_trajectories))


def _point_table(ctx, sec: Section, spec: tuple) -> None:
    name, key, title, cap, with_boot, heat_range, said = spec
    tail = f"; {_n(ctx.ms.num_trajectories)} trajectories." if said else "."
    note = _PAIR_NOTE if key.startswith("pairwise") and ctx.inputs.bootstrap else ""
    sec.table(ctx.table(tabs.matrix_table(
        name, ctx.inputs.metrics, key, title=title, caption=f"{cap}; {_WEIGHTS}{note}{tail}",
        boot=ctx.inputs.bootstrap if with_boot else None, heat_range=heat_range)))


def _spearman_text(m: Mapping[str, Any], b: Mapping[str, Any] | None) -> str:
    rho = m.get("spearman_or_ad")
    rho_iv = ((b or {}).get("spearman_or_ad") or {}).get("interval")
    return ("Spearman correlation of OR and AD across the cell means: "
            + ("n/a (fewer than two cells or constant values)" if rho is None else f"{rho:.3f}")
            + ("" if rho_iv is None else
               f", {figs.coverage(b)} bootstrap interval {tabs.fmt_interval(rho_iv, 1.0, 3, rho)} "
               f"(recomputed across the cells of every replicate)"
               + ("" if not tabs.excludes(rho_iv, rho) else f"; {tabs.EXCLUDES_NOTE}"))
            + spearman_note(len(m["cells"])) + ".")


def _interval_tables(ctx, sec: Section) -> None:
    b, m = ctx.inputs.bootstrap, ctx.inputs.metrics
    cov = figs.coverage(b)
    lo, hi = b.get("percentiles") or (2.5, 97.5)
    for name, key, what in _INTERVAL_TABLES:
        sec.table(ctx.table(tabs.interval_table(
            name, b, m, key, title=f"{cov} intervals of {what}",
            caption=f"{lo:g}/{hi:g} percentiles over {_replicates(b)}two-stage paired bootstrap "
                    f"replicates (questions, then trajectories; probe labels fixed; seed "
                    f"{b.get('seed')}); Avg. entries from replicate-level averages where the "
                    "bootstrap reports them" + (_PAIR_NOTE if key.startswith("pairwise") else "")
                    + ".")))


def matrices_section(ctx) -> Section:
    """Tables 1-16 and Figures 1-2: the model x group matrices, with intervals when bootstrapped."""
    m, b = ctx.inputs.metrics, ctx.inputs.bootstrap
    T = ctx.ms.num_trajectories
    sec = Section("matrices", "Overthinking matrices",
                  f"Per model × benchmark group; {_WEIGHTS} (docs/rules.md).")
    ci = (f"; {figs.coverage(b)} percentile intervals from {_replicates(b)}paired bootstrap "
          f"replicates" if b else "")
    scale = "; colour scales run from 0 (shares of a whole: 0–100%)"
    _matrix_figure(ctx, sec, "overthinking", "Overthinking Ratio and Accuracy Degradation",
                   f"OR (% of thinking tokens after the earliest accuracy maximum k*) and AD "
                   f"(probe-accuracy points lost from k* to full thinking) per model and group "
                   f"with equal-weight Avg. row and column{ci}{scale}; from {_n(T)} trajectories.")
    for spec in _POINT_TABLES[:2]:
        _point_table(ctx, sec, spec)
    sec.text(_spearman_text(m, b))
    _matrix_figure(ctx, sec, "baselines", "Original full-thinking accuracy and thinking length",
                   f"Accuracy of the trajectories' own final answers (%) and mean full thinking "
                   f"length L(n) (tokens) per model and group{ci}{scale}; from {_n(T)} "
                   "trajectories.")
    for spec in _POINT_TABLES[2:]:
        _point_table(ctx, sec, spec)
    if b is None:
        ctx.missing(sec, f"No bootstrap intervals ({num.tables_label('or_ci', 'ad_ci', 'full_acc_ci', 'tokens_ci', 'endpoint_acc_ci')}): "
                         "run `otbench bootstrap DIR --frontiers` (it writes "
                         "DIR/results/bootstrap.json) and rebuild the report.")
        return sec
    _interval_tables(ctx, sec)
    return sec


# -- 2. local changes (Fig. 2) ---------------------------------------------------------------------

def local_section(ctx) -> Section:
    import jax.numpy as jnp
    from otbench.analysis.overthinking import local_change_counts

    ms = ctx.ms
    T = ms.num_trajectories
    sec = Section("local", "Local accuracy changes",
                  "ΔP(k) = P(k) − P(k−1) at every measured step k = 1..n, pooled over all "
                  "trajectories, binned by the retained tokens L(k) after the step (docs/rules.md).")
    edges = figs.local_change_edges(int(ms.L[:, -1].max()))
    lc = local_change_counts(jnp.asarray(ms.L), jnp.asarray(ms.C), jnp.asarray(ms.n),
                             jnp.asarray(np.asarray(edges, dtype=np.int64)))
    pos, neg, flat = (np.asarray(a, dtype=np.int64) for a in lc)
    total = pos + neg + flat
    if int(total.sum()) == 0:
        ctx.missing(sec, "No local changes: every trajectory has n = 0 steps.")
        return sec
    sec.figure(ctx.fig(
        "local_changes", lambda: figs.local_changes_figure(edges, pos, neg, flat),
        title="Local accuracy changes by thinking progress",
        caption=f"Shares of positive, flat and negative ΔP(k) and the negative-to-positive ratio "
                f"per L(k) bin ({_bins_said(edges)}); {_n(int(total.sum()))} changes from "
                f"{_n(T)} trajectories.",
        trajectories=T))
    labels = figs.bin_labels(edges)
    rows = []
    for i in np.flatnonzero(total > 0).tolist():
        t = int(total[i])
        r = [(labels[i], labels[i]), (_n(t), str(t))]
        for arr in (pos, flat, neg):
            r.append((f"{100 * arr[i] / t:.1f}", f"{100 * arr[i] / t:.4f}"))
        ratio = None if pos[i] == 0 else neg[i] / pos[i]
        r.append((tabs.fmt(ratio, 1.0, 2), tabs.csv_num(ratio)))
        rows.append(r)
    sec.table(ctx.table(tabs.simple_table(
        "local_changes", title="Local accuracy changes by L(k) bin",
        caption="Counts of measured changes and their shares (%) per bin of retained tokens "
                f"(tokens); neg/pos is n/a without a positive change; {_bins_said(edges)}.",
        header=["L(k) bin (tokens)", "changes (count)", "positive (%)", "flat (%)",
                "negative (%)", "neg/pos (ratio)"], rows=rows)))
    return sec


def _bins_said(edges: Sequence[int]) -> str:
    """The bin width and how it relates to the metrics' 2,048-token bins."""
    w = edges[1] - edges[0] if len(edges) > 1 else 1
    if w == 2048:
        return "2,048-token bins, as in metrics.json"
    return (f"{_n(w)}-token bins, finer than the 2,048-token bins of metrics.json because the "
            f"longest trajectory has under 16,384 thinking tokens; {_n(w)} divides 2,048, so "
            f"each bin's counts add into one metrics.json bin")


# -- 3. frontiers (Fig. 3, Fig. 5) -------------------------------------------------------------------

def _pct(x: float | None, digits: int = 1) -> tuple[str, str]:
    return (("never", "") if x is None else (f"{100 * x:.{digits}f}", f"{100 * x:.4f}"))


def frontier_section(ctx) -> Section:
    f, b = ctx.inputs.frontier, ctx.inputs.bootstrap
    T = ctx.ms.num_trajectories
    sec = Section("frontiers", "Oracle frontiers",
                  "Exact Pareto frontiers of dynamic routing (DR), fixed budgets (FB) and dynamic "
                  "early exit (DEE), macro-averaged over cells, against the relative token budget "
                  "β (docs/rules.md).")
    sec.figure(ctx.fig(
        "frontiers", lambda: figs.frontier_figure(f),
        title="Oracle frontiers of the three termination strategies",
        caption=f"Macro frontier F_C(β) on {len(f['grid'])} budgets with the STP full-thinking "
                f"line A_full = {100 * f['a_full']:.2f}%, β_match (circles) and β_sat (squares); "
                f"from {_n(T)} trajectories.",
        trajectories=T))
    bf = (b or {}).get("frontiers") if b else None
    cov = figs.coverage(b) if b else "95%"

    def ci(x, est) -> tuple[str, tuple[str, str]]:
        if not x or None in x:
            return tabs.fmt_interval(x, 100.0, 1), ("", "")
        return (tabs.fmt_interval(x, 100.0, 1, est),
                (tabs.csv_num(x[0], 100.0), tabs.csv_num(x[1], 100.0)))

    header, csv_header, rows = ["strategy"], ["strategy"], []
    for label, key in (("β_match", "beta_match"), ("ceiling", "ceiling"), ("β_sat", "beta_sat")):
        header += [f"{label} (%)"] + ([f"{label} {cov}"] if bf else [])
        csv_header += [f"{key} (%)"] + ([f"{key} lo (%)", f"{key} hi (%)"] if bf else [])
    for s in ("dr", "fb", "dee"):
        sf = f["strategies"].get(s)
        if sf is None:
            continue
        r = [(s.upper(), s)]
        for key, digits in (("beta_match", 1), ("ceiling", 2), ("beta_sat", 1)):
            r.append(_pct(sf[key], digits))
            if bf:
                r.append(ci((bf.get(s) or {}).get(key), sf[key]))
        rows.append(r)
    sec.table(ctx.table(tabs.simple_table(
        "frontiers", title="Frontier summaries",
        caption=tabs.marked(f"β_match = min β with F_C(β) ≥ A_full ({100 * f['a_full']:.2f}%), ceiling F_C(1), "
                "β_sat = min β with F_C(β) = F_C(1), all in %; \"never\" when not reached on the "
                "grid" + (f"; {cov} bootstrap intervals (\"n/a\" for an end that is never reached)"
                          if bf else "") + ".", [d for r in rows for d, _ in r]),
        header=header, csv_header=csv_header, rows=rows)))
    if bf and any(s in bf for s in ("dr", "fb", "dee")):
        reps = b.get("replicates")
        sec.figure(ctx.fig(
            "frontier_bands", lambda: figs.bands_figure(f, b),
            title="Bootstrap uncertainty of the oracle frontiers",
            caption=f"Pointwise {figs.coverage(b)} bands and medians of the macro frontiers over "
                    f"{reps if reps is not None else 'the'} replicates on {len(bf['grid'])} "
                    f"budgets, each replicate normalized by its own full-thinking cost; from "
                    f"{_n(T)} trajectories.",
            trajectories=T))
    else:
        ctx.missing(sec, f"No frontier bands ({num.figure_label('frontier_bands')}): run "
                         "`otbench bootstrap DIR --frontiers` (it writes "
                         "DIR/results/bootstrap.json) and rebuild the report.")
    return sec


# -- 5. sensitivity (Fig. 6) -----------------------------------------------------------------------------

def sensitivity_section(ctx) -> Section:
    th = ctx.inputs.thinning
    T = ctx.ms.num_trajectories
    sec = Section("sensitivity", "Probe-count and trajectory-count sensitivity",
                  "Exact hypergeometric probe thinning and trajectory subsampling (docs/rules.md).")
    if th is None:
        ctx.missing(sec, f"No thinning results ({num.figure_label('sensitivity')}): run `otbench "
                         "thinning DIR` (its levels follow the set; it writes "
                         "DIR/results/thinning.json) and rebuild the report.")
        return sec
    probes, trajs = th.get("probes") or {}, th.get("trajectories") or {}
    parts = []
    if probes:
        parts.append(f"Expected OR, AD and earliest-maximizer retention at m = "
                     f"{', '.join(sorted(probes, key=int))} probes")
    if trajs:
        draws = th.get("draws") or (th.get("trajectories_config") or {}).get("draws")
        parts.append(f"{'R' if not parts else 'r'}anges (2.5–97.5%) of macro OR and AD at r = "
                     f"{', '.join(sorted(trajs, key=int))} "
                     f"trajectories" + (f" over {draws:,} draws" if isinstance(draws, int) else ""))
    sec.figure(ctx.fig(
        "sensitivity", lambda: figs.thinning_figure(th, ctx.inputs.metrics),
        title="Sensitivity to the number of probes and trajectories",
        caption="; ".join(parts) + f"; from {_n(T)} trajectories.", trajectories=T))
    if probes:
        sec.table(ctx.table(tabs.simple_table(
            "thinning_probes", title="Probe thinning (exact expectations)",
            caption="Expected macro OR (%), AD (pp) and probability (%) that the thinned earliest "
                    "maximizer equals the full one, per probe count m.",
            header=["m (probes)", "OR (%)", "AD (pp)", "retention (%)"],
            rows=[[(k, k)] + [(tabs.fmt(probes[k][x], 100.0, 2), tabs.csv_num(probes[k][x], 100.0))
                              for x in ("or", "ad", "retention")] for k in sorted(probes, key=int)])))
    if trajs:
        def rng(iv) -> tuple[str, tuple[str, str]]:
            csv = ("", "") if iv is None or None in iv else \
                (tabs.csv_num(iv[0], 100.0), tabs.csv_num(iv[1], 100.0))
            return tabs.fmt_interval(iv, 100.0, 2), csv

        rows = [[(k, k), rng(trajs[k]["or"]), rng(trajs[k]["ad"])]
                + [(tabs.fmt(trajs[k].get(x), 100.0, 2), tabs.csv_num(trajs[k].get(x), 100.0))
                   for x in ("mean_or", "mean_ad")] for k in sorted(trajs, key=int)]
        sec.table(ctx.table(tabs.simple_table(
            "thinning_trajectories", title="Trajectory thinning",
            caption="2.5–97.5 percentile ranges and means over draws of the macro OR (%) and AD "
                    "(pp) per trajectory count r.",
            header=["r (trajectories)", "OR range (%)", "AD range (pp)", "mean OR (%)",
                    "mean AD (pp)"],
            csv_header=["r (trajectories)", "OR lo (%)", "OR hi (%)", "AD lo (pp)", "AD hi (pp)", "mean OR (%)",
                        "mean AD (pp)"], rows=rows)))
    return sec


# -- 6. trajectories (Fig. 7, Fig. 8) ---------------------------------------------------------------------

def trajectories_section(ctx) -> Section:
    ms = ctx.ms
    T = ms.num_trajectories
    sec = Section("curves", "STP curves",
                  "Measured token–accuracy curves (L(k), P(k)) of single trajectories with the "
                  "earliest maximizer k*, the tokens after it (OR) and the accuracy lost by the "
                  "end (AD). Examples are chosen by fixed rules, stated in each caption.")
    pt = curves.PerTrajectory.of(ms)
    rows = curves.example_rows(ms, pt)
    sec.figure(ctx.fig(
        "stp_examples", lambda: curves.examples_figure(ms, pt, rows),
        title="Example STP curves with k*, OR and AD",
        caption=f"One trajectory per group: the one (≥ 3 steps when available) nearest to its "
                f"group's mean (OR, AD) in standard-deviation units; {len(rows)} shown, chosen "
                f"from {_n(T)} trajectories.",
        trajectories=T))
    ctx.view_rows = list(rows)
    sec.link("trajectories.html", "These trajectories, read cut by cut",
             ": each one's thinking text at every step, the forced answers and their verdicts at "
             "each cut, the signals there and where each OTBench method stopped (`otbench view` "
             "writes such a page for any trajectories of a set).")
    q = curves.example_question(ms, pt)
    if q is None:
        ctx.missing(sec, f"No within-question small multiples "
                         f"({num.figure_label('question_trajectories')}): every question has a "
                         "single trajectory.")
        return sec
    m, g, qid, _ = curves._tag(ms, int(q[0]))
    shown = min(q.size, curves.MAX_SMALL_MULTIPLES)
    # the panels the figure draws (`curves.question_figure`: by trajectory index, the first ones)
    ctx.view_rows += np.asarray(q)[np.argsort(ms.trajectory[q], kind="stable")][:shown].tolist()
    sec.figure(ctx.fig(
        "question_trajectories", lambda: curves.question_figure(ms, pt, q),
        title=f"All trajectories of one question: {m}, {g}, question {qid}",
        caption=f"{shown} of {q.size} trajectories of the (model, question) pair whose mean pairwise "
                f"|ΔOR| is the lower median over all pairs with R ≥ 2, panels sharing both axes.",
        trajectories=int(q.size)))
    return sec


# -- 7. step lengths (Fig. 9) --------------------------------------------------------------------------

def steps_section(ctx, set_dir: Path | None) -> Section:
    sec = Section("steps", "Step-length distributions",
                  "Realized step lengths when the stored thinking token ids are re-segmented at "
                  "other target step lengths b (docs/rules.md); no new probing.")
    if set_dir is None:
        ctx.missing(sec, f"No step-length distributions ({num.figure_label('step_lengths')}): the "
                         "report was given an in-memory set; pass the set's directory so its "
                         "token ids can be read.")
        return sec
    ctx.say("re-segmenting stored token ids")
    sl = curves.step_lengths(set_dir)
    if isinstance(sl, str):
        ctx.missing(sec, f"No step-length distributions ({num.figure_label('step_lengths')}): {sl}.")
        return sec
    sec.figure(ctx.fig(
        "step_lengths", lambda: curves.step_length_figure(sl),
        title="Realized step lengths at different target step lengths b",
        caption=f"Share of each model's steps per log-spaced length bin at b = "
                f"{', '.join(str(b) for b in sl.bs)} (recorded b = "
                f"{sl.b0 if sl.b0 is not None else 'none, 256 assumed'}); every step weighted "
                f"equally; from {_n(sl.trajectories)} trajectories.",
        trajectories=sl.trajectories))
    sec.table(ctx.table(tabs.simple_table(
        "step_lengths", title="Step-length summaries",
        caption="Steps, mean and 10/50/90th percentiles (observed lengths) of the realized step "
                "length in tokens per model and target b.",
        header=["model", "b (tokens)", "steps (count)", "mean (tokens)", "p10 (tokens)",
                "p50 (tokens)", "p90 (tokens)"],
        rows=curves.step_length_rows(sl))))
    return sec
