"""Paired contrasts at fixed horizons, their sensitivities, McNemar and the four termination strata (docs/rules.md).

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
items lack a pair in some replicate; and each replicate alone
(``replicates``: the mean over items paired in replicate `r` of their
difference there, with its own item bootstrap; Table A11's run rows).
McNemar's test of the policy pairs, with the paired sign-flip test of the
item-level mean differences (Table A29). Readouts: policy, common,
continuation, and correct completion by the deadline (Table A8a).

Eight-replicate designs (§A.8, Tables A7–A9), with ``--scheme nested``:
every primary interval and band resamples items, then the paired replicate
slots within each selected item (the same draws for every arm, so pairs
stay paired). The simultaneous family band is the 95th percentile over
draws of the maximum absolute deviation over every requested contrast x
horizon of a readout (Table A9a); direct contrasts (``--direct``,
``family`` False) come from the same draws, pointwise only (Table A9b).
The diagonal matching statistic (Table A7b) of arms `X`, `Y` announcing
`H_X < H_Y` averages the advantage of `X` over `Y` at `B = H_X` with that of
`Y` over `X` at `B = H_Y`; positive when matching the announced and imposed
horizons helps.

The four-stratum decomposition (Tables A8b, A16, A18) splits each pair by
which arm has finished by `B`; a stratum's contribution is the mean of item
means of `D 1{stratum}` over all pairs, so contributions add up to the
total contrast in the estimate and in every replicate; its share is the
same mean of `1{stratum}` (``share_item_mean``). Its ``share`` is the
paper's (Table A18): the fraction of all paired item-replicates in the
stratum, pooled over items (a ratio of item totals, bootstrapped like the
worst-case bounds); the two differ when items hold unequal numbers of
pairs, and the pooled shares sum to one. Its within-stratum contrast ``within`` is the
second paper's: the item-averaged difference inside the stratum (the mean
over items with a pair in it of their mean `D` over those pairs),
bootstrapped the same way; ``items`` counts those items. The ratio
contribution / share_item_mean, the contrast that makes share x contrast =
contribution, is kept as ``contribution_per_share`` (the two differ when
items contribute unequal numbers of pairs to the stratum).
"""

import dataclasses
from typing import Any

import numpy as np

from . import _inference as inf
from ._group import CONTRAST_READOUTS, READOUTS, STRATA, Group, Settings, stack, summ


def contrast_block(gr: Group, st: Settings, A: int, Bz: int, readout: str, scheme: str | None = None):
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


def replicate_rows(gr: Group, pair: np.ndarray, d: np.ndarray) -> list[list[dict[str, Any]]]:
    """Each replicate alone (Table A11): per column `k` of `d[item, rep, k]`, one item-bootstrap row per replicate.

    Replicate `r`'s estimate is the mean over items paired in `r` of their
    difference there, its interval from the item bootstrap (the primary item
    weights, whatever the primary scheme). Empty with a single replicate.
    """
    I, R, k = d.shape
    if R < 2:
        return [[] for _ in range(k)]
    x = np.where(pair, d, 0.0).reshape(I, 1, R * k)
    b = gr.boot(x, pair.reshape(I, 1, R * k), "item")
    return [[{"replicate": r, "items": int(pair[:, r, h].sum()),
              "delta": summ(b.estimate[r * k + h], b.draws[:, r * k + h])} for r in range(R)]
            for h in range(k)]


def _horizon_rows(gr: Group, st: Settings, b, two, band, pair, xa, xb) -> list[dict[str, Any]]:
    nH = len(st.horizons)
    items = pair.any(axis=1).sum(axis=0)
    per_rep = replicate_rows(gr, pair, xa - xb)
    out = []
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
        hr["replicates"] = per_rep[h]
        out.append(hr)
    return out


def _contrast(gr: Group, st: Settings, an: str, bn: str, rd: str, tests: list) -> tuple | None:
    """One contrast's row (family bands left to the caller), its boots and pair masks; None without pairs."""
    nH = len(st.horizons)
    A, Bz = gr.run.arm(an), gr.run.arm(bn)
    b, pair, xa, xb = contrast_block(gr, st, A, Bz, rd)
    if not pair.any():
        return None
    d_est, d_draws = b.estimate[:nH], b.draws[:, :nH]
    band = inf.simultaneous_band(d_est, d_draws)
    two = contrast_block(gr, st, A, Bz, rd, "two-way")[0] if st.two_way else None
    row = {"a": an, "b": bn, "readout": rd, "band_halfwidth": band,
           "auc": summ(float(inf.log2_trapezoid(d_est, st.horizons)), inf.log2_trapezoid(d_draws, st.horizons))}
    if two is not None:
        row["two_way"] = {
            "band_halfwidth": inf.simultaneous_band(two.estimate[:nH], two.draws[:, :nH]),
            "auc": summ(float(inf.log2_trapezoid(two.estimate[:nH], st.horizons)),
                        inf.log2_trapezoid(two.draws[:, :nH], st.horizons))}
    row["horizons"] = _horizon_rows(gr, st, b, two, band, pair, xa, xb)
    if rd == "policy":
        for h, B in enumerate(st.horizons):
            p = pair[..., h]
            m = inf.mcnemar(xa[..., h][p].astype(np.int64), xb[..., h][p].astype(np.int64))
            has = p.any(axis=1)
            dm = np.where(p, xa[..., h] - xb[..., h], 0.0).sum(axis=1)[has] / p.sum(axis=1)[has]
            sf = inf.sign_flip(dm, draws=st.replicates, seed=st.seed)
            tests.append({"a": an, "b": bn, "B": int(B), **dataclasses.asdict(m),
                          "sign_flip_p": None if sf is None else sf.p})
    return row, b, two, pair, xa, xb


def _family_bands(fam: list, nH: int) -> None:
    """Simultaneous bands over every family contrast x horizon of one readout (max-abs deviation per draw)."""
    if not fam:
        return
    q = inf.simultaneous_band(np.concatenate([b.estimate[:nH] for _, b, _ in fam]),
                              np.concatenate([b.draws[:, :nH] for _, b, _ in fam], axis=1))
    for row, _, _ in fam:
        row["family_band_halfwidth"] = q
        for hr in row["horizons"]:
            e = hr["delta"]["estimate"]
            hr["family_band"] = None if q is None or e is None else [e - q, e + q]
    twos = [t for _, _, t in fam if t is not None]
    if twos:
        q2 = inf.simultaneous_band(np.concatenate([t.estimate[:nH] for t in twos]),
                                   np.concatenate([t.draws[:, :nH] for t in twos], axis=1))
        for row, _, _ in fam:
            row["two_way"]["family_band_halfwidth"] = q2


def contrasts(gr: Group, st: Settings) -> tuple[list, list, list]:
    """(contrast rows, stratum rows, McNemar tests) of the requested and direct contrasts, every readout.

    The simultaneous family covers the requested contrasts x horizons of a
    readout; direct contrasts (``family`` False) share the draws but not the band.
    """
    rows, strata, tests = [], [], []
    for rd in CONTRAST_READOUTS:
        if not gr.has_readout(rd):
            continue
        fam = []
        for k, (an, bn) in enumerate(st.contrasts + st.direct):
            got = _contrast(gr, st, an, bn, rd, tests)
            if got is None:
                continue
            row, b, two, pair, xa, xb = got
            row["family"] = k < len(st.contrasts)
            rows.append(row)
            if row["family"]:
                fam.append((row, b, two))
            strata.extend(strata_rows(gr, st, gr.run.arm(an), gr.run.arm(bn), an, bn, rd, pair, xa, xb))
        _family_bands(fam, len(st.horizons))
    return rows, strata, tests


def length_rows(gr: Group, st: Settings) -> list[dict[str, Any]]:
    """Reasoning length of each contrast's arms (Table A10a): medians and the paired mean `Δ log L`.

    Medians over every observed run of an arm (runs, not item means);
    `Δ log L = log L_A - log L_B` over the pairs where both runs exist and
    have `L > 0`, a mean of item means with the primary bootstrap interval.
    """
    out = []
    for an, bn in st.contrasts + st.direct:
        A, Bz = gr.run.arm(an), gr.run.arm(bn)
        pair = gr.obs[A] & gr.obs[Bz] & (gr.L[A] > 0) & (gr.L[Bz] > 0)
        if not pair.any():
            continue
        dl = np.where(pair, np.log(np.maximum(gr.L[A], 1)) - np.log(np.maximum(gr.L[Bz], 1)), 0.0)
        x, a = stack([(dl, pair)])
        b = gr.boot(x, a)
        out.append({"a": an, "b": bn, "pairs": int(pair.sum()), "items": int(pair.any(axis=1).sum()),
                    "median_a": float(np.median(gr.L[A][gr.obs[A]])),
                    "median_b": float(np.median(gr.L[Bz][gr.obs[Bz]])),
                    "delta_log_L": summ(b.estimate[0], b.draws[:, 0])})
    return out


def diagonal_rows(gr: Group, st: Settings) -> list[dict[str, Any]]:
    """The matching-number statistic of each diagonal (Table A7b), per readout, from the primary draws.

    For arms `X` announcing `H1` and `Y` announcing `H2 > H1`:
    `((x_X - x_Y)(B = H1) + (x_Y - x_X)(B = H2)) / 2`, each difference a
    paired mean of item means; positive when matching the announced and
    imposed horizons helps.
    """
    out = []
    for rd in READOUTS:
        if not gr.has_readout(rd):
            continue
        for (xn, h1), (yn, h2) in st.diagonal:
            b, pair, *_ = contrast_block(gr, st, gr.run.arm(xn), gr.run.arm(yn), rd)
            i1, i2 = st.horizons.index(h1), st.horizons.index(h2)
            if not (pair[..., i1].any() and pair[..., i2].any()):
                continue
            est = 0.5 * (b.estimate[i1] - b.estimate[i2])
            draws = 0.5 * (b.draws[:, i1] - b.draws[:, i2])
            out.append({"readout": rd, "arms": [xn, yn], "announced": [h1, h2],
                        "pairs": [int(pair[..., i1].sum()), int(pair[..., i2].sum())],
                        "at_h1": summ(b.estimate[i1], b.draws[:, i1]),
                        "at_h2": summ(-b.estimate[i2], -b.draws[:, i2]),
                        "match_advantage": summ(est, draws)})
    return out


def strata_rows(gr: Group, st: Settings, A, Bz, an, bn, rd, pair, xa, xb) -> list[dict[str, Any]]:
    """The four termination strata of one contrast and readout, per horizon (module docstring)."""
    if rd in ("continuation", "completion"):
        return []
    nH = len(st.horizons)
    code = gr.done(A).astype(np.int64) + 2 * gr.done(Bz).astype(np.int64)  # 0 both active .. 3 both
    d = xa - xb
    parts = []
    for s in range(4):
        ind = (code == s).astype(np.float64)
        parts += [(ind, pair), (d * ind, pair)]
    parts.append((d, pair))
    # The paper's within-stratum contrast: mean of item means of D over the stratum's pairs.
    parts += [(d, pair & (code == s)) for s in range(4)]
    x, a = stack(parts)
    b = gr.boot(x, a)
    # Built-in check: contributions add up to the total, in the estimate and in
    # every replicate (the statistic is linear in the outcomes; float rounding only).
    tot_cols = slice(8 * nH, 9 * nH)
    for est, tot in ((b.estimate[None, :], b.estimate[None, tot_cols]), (b.draws, b.draws[:, tot_cols])):
        parts_sum = sum(est[:, (2 * s + 1) * nH:(2 * s + 2) * nH] for s in range(4))
        if not np.allclose(parts_sum, tot, rtol=1e-9, atol=1e-12, equal_nan=True):
            raise AssertionError("stratum contributions do not add up to the total contrast")
    # Table A18's shares: the fraction of all pairs in the stratum (pooled over items).
    in_s = np.concatenate([pair & (code == s) for s in range(4)], axis=-1).astype(np.float64)
    sh_est, sh_draws = gr.pooled_ratio(in_s, np.tile(pair, 4).astype(np.float64))
    rows = []
    for h, B in enumerate(st.horizons):
        total = b.estimate[8 * nH + h]
        for s in range(4):
            ks, kc, kw = (2 * s) * nH + h, (2 * s + 1) * nH + h, (9 + s) * nH + h
            share, contrib = b.estimate[ks], b.estimate[kc]
            with np.errstate(invalid="ignore", divide="ignore"):
                ratio_draws = np.where(b.draws[:, ks] > 0, b.draws[:, kc] / b.draws[:, ks], np.nan)
            ratio = contrib / share if share > 0 else np.nan
            cell = pair[..., h] & (code[..., h] == s)
            rows.append({"a": an, "b": bn, "readout": rd, "B": int(B), "stratum": STRATA[s],
                         "pairs": int(cell.sum()), "items": int(cell.any(axis=1).sum()),
                         "share": summ(sh_est[s * nH + h], sh_draws[:, s * nH + h]),
                         "share_item_mean": summ(share, b.draws[:, ks]),
                         "within": summ(b.estimate[kw], b.draws[:, kw]),
                         "contribution_per_share": summ(ratio, ratio_draws),
                         "contribution": summ(contrib, b.draws[:, kc]),
                         "total": None if not np.isfinite(total) else float(total)})
    return rows
