"""Paired contrasts at fixed horizons, their sensitivities, McNemar and the four termination strata (SPEC §8).

Paired contrasts `A - B` pair the two arms within item and replicate (a pair
needs both outcomes). Per readout (Tables A6, A9a, A11): pointwise item-
bootstrap intervals, a simultaneous band over horizons and one over the
family of all requested contrasts x horizons, the trapezoid summary over
`log2 B` (horizons `B > 0`) divided by the span, and the same under the
two-way item x replicate bootstrap as a sensitivity; beside them, per
horizon, the second paper's crossed random-intercept sensitivity
(``crossed``: item and replicate intercepts by the method of moments on the
items paired in every replicate, Satterthwaite `t` interval;
`_inference.crossed_intercepts`), whose estimate can differ from `Δ` when
items lack a pair in some replicate. McNemar's test of the policy pairs.

The four-stratum decomposition (Tables A8b, A16, A18) splits each pair by
which arm has finished by `B`; a stratum's contribution is the mean of item
means of `D 1{stratum}` over all pairs, so contributions add up to the
total contrast in the estimate and in every replicate; its share is the
same mean of `1{stratum}`. Its within-stratum contrast ``within`` is the
second paper's: the item-averaged difference inside the stratum (the mean
over items with a pair in it of their mean `D` over those pairs),
bootstrapped the same way; ``items`` counts those items. The ratio
contribution / share, the contrast that makes share x contrast =
contribution, is kept as ``contribution_per_share`` (the two differ when
items contribute unequal numbers of pairs to the stratum).
"""

import dataclasses
from typing import Any

import numpy as np

from . import _inference as inf
from ._group import READOUTS, STRATA, Group, Settings, stack, summ


def contrast_block(gr: Group, st: Settings, A: int, Bz: int, readout: str, scheme: str):
    """Boot of the stack [D(H), x_A(H), x_B(H)] for one contrast and readout, plus pair masks."""
    xa, aa = gr.outcome(A, readout)
    xb, ab = gr.outcome(Bz, readout)
    pair = aa & ab
    x, a = stack([(xa - xb, pair), (xa, pair), (xb, pair)])
    return gr.boot(x, a, scheme), pair, xa, xb


def crossed(pair: np.ndarray, d: np.ndarray) -> dict[str, Any] | None:
    """Crossed item x replicate random intercepts on the items paired in every replicate."""
    full = pair.all(axis=1)
    fit = inf.crossed_intercepts(d[full]) if pair.shape[1] >= 2 else None
    return None if fit is None else dataclasses.asdict(fit)


def contrasts(gr: Group, st: Settings) -> tuple[list, list, list]:
    nH = len(st.horizons)
    rows, strata, tests = [], [], []
    for rd in READOUTS:
        if not gr.has_readout(rd):
            continue
        fam_est, fam_draws, fam_rows = [], [], []
        fam2_est, fam2_draws = [], []
        for (an, bn) in st.contrasts:
            A, Bz = gr.run.arm(an), gr.run.arm(bn)
            b, pair, xa, xb = contrast_block(gr, st, A, Bz, rd, "item")
            if not pair.any():
                continue
            d_est, d_draws = b.estimate[:nH], b.draws[:, :nH]
            band = inf.simultaneous_band(d_est, d_draws)
            auc_est = float(inf.log2_trapezoid(d_est, st.horizons))
            auc_draws = inf.log2_trapezoid(d_draws, st.horizons)
            two = None
            if st.two_way:
                b2, *_ = contrast_block(gr, st, A, Bz, rd, "two-way")
                two = b2
                fam2_est.append(b2.estimate[:nH])
                fam2_draws.append(b2.draws[:, :nH])
            items = pair.any(axis=1).sum(axis=0)
            row = {"a": an, "b": bn, "readout": rd,
                   "band_halfwidth": band,
                   "auc": summ(auc_est, auc_draws), "horizons": []}
            if two is not None:
                row["two_way"] = {
                    "band_halfwidth": inf.simultaneous_band(two.estimate[:nH], two.draws[:, :nH]),
                    "auc": summ(float(inf.log2_trapezoid(two.estimate[:nH], st.horizons)),
                                 inf.log2_trapezoid(two.draws[:, :nH], st.horizons))}
            for h, B in enumerate(st.horizons):
                e = b.estimate[h]
                hr = {"B": int(B), "items": int(items[h]), "pairs": int(pair[..., h].sum()),
                      "acc_a": summ(b.estimate[nH + h], b.draws[:, nH + h]),
                      "acc_b": summ(b.estimate[2 * nH + h], b.draws[:, 2 * nH + h]),
                      "delta": summ(e, b.draws[:, h]),
                      "band": None if band is None or not np.isfinite(e) else [e - band, e + band]}
                if two is not None:
                    hr["two_way_ci"] = inf.interval(two.draws[:, h]) if np.isfinite(e) else None
                hr["crossed"] = crossed(pair[..., h], (xa - xb)[..., h])
                row["horizons"].append(hr)
                if rd == "policy":
                    p = pair[..., h]
                    m = inf.mcnemar(xa[..., h][p].astype(np.int64), xb[..., h][p].astype(np.int64))
                    tests.append({"a": an, "b": bn, "B": int(B), **dataclasses.asdict(m)})
            rows.append(row)
            fam_est.append(d_est)
            fam_draws.append(d_draws)
            fam_rows.append(row)
            strata.extend(strata_rows(gr, st, A, Bz, an, bn, rd, pair, xa, xb))
        if fam_rows:
            q = inf.simultaneous_band(np.concatenate(fam_est), np.concatenate(fam_draws, axis=1))
            for row in fam_rows:
                row["family_band_halfwidth"] = q
                for hr in row["horizons"]:
                    e = hr["delta"]["estimate"]
                    hr["family_band"] = None if q is None or e is None else [e - q, e + q]
            if fam2_est:
                q2 = inf.simultaneous_band(np.concatenate(fam2_est), np.concatenate(fam2_draws, axis=1))
                for row in fam_rows:
                    row["two_way"]["family_band_halfwidth"] = q2
    return rows, strata, tests


def strata_rows(gr: Group, st: Settings, A, Bz, an, bn, rd, pair, xa, xb) -> list[dict[str, Any]]:
    if rd == "continuation":
        return []
    nH = len(st.horizons)
    da, db = gr.done(A), gr.done(Bz)
    code = da.astype(np.int64) + 2 * db.astype(np.int64)   # 0 both active, 1 only A, 2 only B, 3 both
    order = [0, 1, 2, 3]
    d = xa - xb
    parts = []
    for s in order:
        ind = (code == s).astype(np.float64)
        parts += [(ind, pair), (d * ind, pair)]
    parts.append((d, pair))
    # The paper's within-stratum contrast: mean of item means of D over the stratum's pairs.
    parts += [(d, pair & (code == s)) for s in order]
    x, a = stack(parts)
    b = gr.boot(x, a)
    # Built-in check: contributions add up to the total, in the estimate and in
    # every replicate (the statistic is linear in the outcomes; float rounding only).
    tot_cols = slice(8 * nH, 9 * nH)
    for est, tot in ((b.estimate[None, :], b.estimate[None, tot_cols]), (b.draws, b.draws[:, tot_cols])):
        parts_sum = sum(est[:, (2 * s + 1) * nH:(2 * s + 2) * nH] for s in order)
        if not np.allclose(parts_sum, tot, rtol=1e-9, atol=1e-12, equal_nan=True):
            raise AssertionError("stratum contributions do not add up to the total contrast")
    rows = []
    for h, B in enumerate(st.horizons):
        total = b.estimate[8 * nH + h]
        contribs = []
        for s in order:
            ks, kc = (2 * s) * nH + h, (2 * s + 1) * nH + h
            kw = (9 + s) * nH + h
            share, contrib = b.estimate[ks], b.estimate[kc]
            with np.errstate(invalid="ignore", divide="ignore"):
                ratio_draws = np.where(b.draws[:, ks] > 0, b.draws[:, kc] / b.draws[:, ks], np.nan)
            ratio = contrib / share if share > 0 else np.nan
            contribs.append(contrib)
            in_s = pair[..., h] & (code[..., h] == s)
            rows.append({"a": an, "b": bn, "readout": rd, "B": int(B), "stratum": STRATA[s],
                         "pairs": int(in_s.sum()), "items": int(in_s.any(axis=1).sum()),
                         "share": summ(share, b.draws[:, ks]),
                         "within": summ(b.estimate[kw], b.draws[:, kw]),
                         "contribution_per_share": summ(ratio, ratio_draws),
                         "contribution": summ(contrib, b.draws[:, kc]),
                         "total": None if not np.isfinite(total) else float(total)})
    return rows
