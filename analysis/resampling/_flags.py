"""Point estimates outside their own bootstrap interval, each with the reason (docs/rules.md).

A percentile interval follows the replicates' distribution; the point
estimate is the statistic on all data once. The two need not agree: a rank
correlation is not an average of the draws, and a mean over a few resampled
questions can be skewed. docs/rules.md asks that such an estimate be flagged
where it is printed rather than shown as if its interval covered it; the
reason is measured on the replicates (the share on either side of the
estimate, and how many replicates define the value at all), not assumed.
"""

from typing import TYPE_CHECKING, Any

import numpy as np

from ._replicates import BOOT_METRICS, percentile

if TYPE_CHECKING:
    from ._bootstrap_result import BootstrapResult

MARK = "\u2020"
"""The mark a printed entry carries when its estimate lies outside its interval."""

_KIND = {
    "spearman_or_ad": "a rank correlation across cells is not an average of the draws, so its "
                      "replicates need not centre on the estimate",
    "pairwise_or": "a mean pairwise spread over few questions: its replicates are skewed",
    "pairwise_ad": "a mean pairwise spread over few questions: its replicates are skewed",
}
_MEAN = "a mean over few resampled questions: its replicates are skewed"


def reason(estimate: float, reps: np.ndarray, metric: str) -> str:
    """Why `estimate` lies outside the percentile interval of `reps` (float64[rep], NaN undefined)."""
    x = reps[~np.isnan(reps)]
    side = "below" if np.mean(x < estimate) > np.mean(x > estimate) else "above"
    share = 100.0 * np.mean(x < estimate if side == "below" else x > estimate)
    text = (f"{share:.1f}% of its {x.size:,} defined replicates lie {side} the estimate "
            f"({_KIND.get(metric, _MEAN)})")
    if x.size < reps.size:
        text += (f"; undefined in {reps.size - x.size:,} of {reps.size:,} replicates (no drawn "
                 "question, or no pair of distinct trajectories), so the interval describes "
                 "the others only")
    return text


def _outside(estimate: float, reps: np.ndarray, q) -> bool:
    if not np.isfinite(estimate):
        return False
    lo, hi = percentile(reps, q)
    return bool(np.isfinite(lo) and np.isfinite(hi) and not (lo <= estimate <= hi))


def outside_intervals(r: "BootstrapResult") -> list[dict[str, Any]]:
    """Every reported point estimate outside its own interval: scope, place, metric, reason.

    Scopes are those `format_bootstrap` and `to_json` report: every cell,
    model, group and the macro value of every `BOOT_METRICS` metric, and the
    Spearman OR-AD correlation (`metric` ``spearman_or_ad``, scope macro).
    """
    n, q = r.names, r.percentiles
    places = ([("cell", m, g, r.estimate_cell[:, c], r.cell[:, :, c])
               for c, (m, g) in enumerate(n.cells)]
              + [("model", m, None, r.estimate_model[:, i], r.model[:, :, i])
                 for i, m in enumerate(n.models)]
              + [("group", None, g, r.estimate_group[:, i], r.group[:, :, i])
                 for i, g in enumerate(n.groups)]
              + [("macro", None, None, r.estimate_macro, r.macro)])
    out = []
    for scope, model, group, est, reps in places:
        for j, metric in enumerate(BOOT_METRICS):
            if _outside(est[j], reps[:, j], q):
                out.append(_entry(metric, scope, model, group, est[j], reps[:, j], q))
    if r.spearman_or_ad.size and _outside(r.estimate_spearman, r.spearman_or_ad, q):
        out.append(_entry("spearman_or_ad", "macro", None, None, r.estimate_spearman,
                          r.spearman_or_ad, q))
    return out


def _entry(metric, scope, model, group, estimate, reps, q) -> dict[str, Any]:
    lo, hi = percentile(reps, q)
    return {"metric": metric, "scope": scope, "model": model, "group": group,
            "estimate": float(estimate), "interval": [float(lo), float(hi)],
            "reason": reason(float(estimate), reps, metric)}
