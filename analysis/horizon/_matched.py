"""Matched horizon chosen by one arm: the effort comparison of the second paper (SPEC §8; Tables A14, A15, A20).

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
"""

from typing import Any

import numpy as np
from otbench.analysis.measurement import Readouts

from ._group import Group, Settings, scores, stack, summ


def matched(gr: Group, st: Settings) -> list[dict[str, Any]]:
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
        out.append(row)
    return out


def pooled_bounds(gr: Group, base, rep, d, ync) -> tuple[dict[str, Any], dict[str, Any]]:
    """The second paper's worst-case bounds: sums over all retained pairs over their number.

    Item totals (sum of the bound outcome over the item's pairs, pair count)
    are bootstrapped as item means on the same item weights; their ratio is
    the pooled pair mean in the estimate and in every replicate.
    """
    lo = np.where(base, np.where(rep, d, ync - 1.0), 0.0).sum(axis=1)
    hi = np.where(base, np.where(rep, d, ync), 0.0).sum(axis=1)
    n = base.sum(axis=1).astype(np.float64)
    has = np.broadcast_to((n > 0)[:, None, None], (n.size, 1, 3))
    b = gr.boot(np.stack([lo, hi, n], axis=-1)[:, None, :], has)
    with np.errstate(invalid="ignore", divide="ignore"):
        est = b.estimate[:2] / b.estimate[2] if b.estimate[2] > 0 else np.full(2, np.nan)
        draws = np.where(b.draws[:, 2:3] > 0, b.draws[:, :2] / b.draws[:, 2:3], np.nan)
    return summ(est[0], draws[:, 0]), summ(est[1], draws[:, 1])
