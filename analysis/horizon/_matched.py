"""Matched horizon chosen by one arm: the effort comparison of the second paper (docs/rules.md; Tables A14, A15, A20).

For each finished run of the lower arm `c`, the upper arm is read at `L^c`
(its complete block when it finished earlier); pairs whose upper run cannot
be replayed (it ended at the limit before `L^c`) are missing, and
worst-case bounds set their upper outcome to correct (lower bound) and to
wrong (upper bound), with the lower arm's natural outcome. ``bound_low`` /
``bound_high`` follow the second paper: pooled over the `N` retained pairs,
`(Σ_observed D + Σ_missing (Y - 1)) / N` (and `Y` for the upper), with
intervals from the item bootstrap of the two sums (a ratio of item totals,
items resampled). ``bound_low_item_mean`` / ``bound_high_item_mean``
average within item first like every other rate here; they differ when
items hold unequal numbers of pairs.

Sensitivities of the all-replayable `Δ` and its continuation version
(``sensitivity``, Table A11 beside the fixed-horizon contrasts): the
two-way item x replicate bootstrap, crossed item and replicate intercepts
on the items replayable in every replicate (`_inference.crossed_intercepts`),
and each replicate alone with its own item bootstrap.
"""

from typing import Any

import numpy as np
from otbench.analysis.measurement import Readouts

from ._contrasts import crossed, replicate_rows
from ._group import Group, Settings, scores, stack, summ


def matched(gr: Group, st: Settings) -> list[dict[str, Any]]:
    """One row per matched block of the run: `Δ`, arm accuracies, bounds, diagnostics, sensitivities."""
    run = gr.run
    out = []
    if "common" not in gr.term:
        return out
    tro, tsc = gr.term["common"]
    for lower, (upper, mro_all) in run.matched.items():
        c, h = run.arm(lower), run.arm(upper)
        mro = Readouts(*(f[gr.sel] for f in mro_all))
        msc = scores(mro, gr.gold, gr.valid)
        base = gr.obs[c] & gr.fin[c] & tsc["ok"][c]      # an observed lower-arm terminal outcome
        rep = base & msc["ok"]
        miss = base & ~msc["ok"]
        yc = tsc["correct"][c].astype(np.float64)
        yh = msc["correct"].astype(np.float64)
        ync = gr.y[c]
        d = yc - yh
        high_active = rep & (gr.L[h] > gr.L[c])
        rep_l = rep & np.isfinite(tsc["log_loss"][c]) & np.isfinite(msc["log_loss"])
        parts = [(d, rep), (yc, rep), (yh, rep),
                 (np.where(rep, d, ync - 1.0), base), (np.where(rep, d, ync), base),
                 (d, high_active),
                 (np.where(rep_l, tsc["log_loss"][c] - msc["log_loss"], 0.0), rep_l),
                 (tsc["brier"][c] - msc["brier"], rep),
                 ((tsc["q_true"][c] < st.tail).astype(np.float64), rep),
                 ((msc["q_true"] < st.tail).astype(np.float64), rep)]
        cont = rep & tro.cont_avail[c] & mro.cont_avail
        if cont.any():
            parts.append((tro.cont_correct[c].astype(np.float64) - mro.cont_correct, cont))
        x, a = stack(parts)
        b = gr.boot(x, a)
        names = ["delta", "acc_lower", "acc_upper", "bound_low", "bound_high", "delta_high_active",
                 "log_loss_diff", "brier_diff", "tail_lower", "tail_upper"]
        if cont.any():
            names.append("delta_continuation")
        row = {"lower": lower, "upper": upper, "pairs": int(base.sum()), "replayable": int(rep.sum()),
               "missing": int(miss.sum()), "high_active": int(high_active.sum()),
               "items": int(base.any(axis=1).sum())}
        for k, name in enumerate(names):
            row[name] = summ(b.estimate[k], b.draws[:, k])
        row["bound_low_item_mean"], row["bound_high_item_mean"] = row["bound_low"], row["bound_high"]
        row["bound_low"], row["bound_high"] = pooled_bounds(gr, base, rep, d, ync)
        row["sensitivity"] = {"delta": sensitivity(gr, st, d, rep)}
        if cont.any():
            dc = tro.cont_correct[c].astype(np.float64) - mro.cont_correct
            row["sensitivity"]["delta_continuation"] = sensitivity(gr, st, dc, cont)
        out.append(row)
    return out


def sensitivity(gr: Group, st: Settings, d: np.ndarray, pair: np.ndarray) -> dict[str, Any]:
    """Table A11's sensitivities of a matched estimand `D[item, rep]` over its pairs.

    ``two_way``: the two-way item x replicate bootstrap (when requested);
    ``crossed``: crossed intercepts on the items paired in every replicate;
    ``replicates``: each replicate alone with its own item bootstrap.
    """
    out: dict[str, Any] = {}
    if st.two_way:
        x, a = stack([(d, pair)])
        b = gr.boot(x, a, "two-way")
        out["two_way"] = summ(b.estimate[0], b.draws[:, 0])
    out["crossed"] = crossed(pair, np.where(pair, d, 0.0))
    out["replicates"] = replicate_rows(gr, pair[..., None], d[..., None])[0]
    return out


def pooled_bounds(gr: Group, base, rep, d, ync) -> tuple[dict[str, Any], dict[str, Any]]:
    """The second paper's worst-case bounds: sums over all retained pairs over their number.

    Item totals (sum of the bound outcome over the item's pairs, pair count)
    are bootstrapped as item means on the same item weights; their ratio is
    the pooled pair mean in the estimate and in every replicate.
    """
    lo = np.where(base, np.where(rep, d, ync - 1.0), 0.0)
    hi = np.where(base, np.where(rep, d, ync), 0.0)
    n = np.broadcast_to(base[..., None], base.shape + (2,)).astype(np.float64)
    est, draws = gr.pooled_ratio(np.stack([lo, hi], axis=-1), n)
    return summ(est[0], draws[:, 0]), summ(est[1], draws[:, 1])
