"""Per-arm readouts of a horizon run: calibration, proper scores, prefix controls, dense curves, agreement (docs/rules.md).

Every rate is a mean of item means (replicates averaged within item first),
with percentile intervals from an item bootstrap (`_inference`; default
10,000 draws, seed 0, recorded).

* Calibration (Table A3): per arm and horizon, survival, correct completion,
  terminal-aware, common-context, continuation and survivor-only accuracy,
  and the natural full-trace accuracy of the same cohort.
* Proper scores of the candidate-logit readout (Tables A13, A15): conditional
  log loss `-log q_true`, multiclass Brier score, valid-option mass `M`, and
  the share of readouts with `q_true < tail` (1e-4); in the policy context
  only unfinished runs have a readout distribution (a finished run keeps its
  natural answer), in the common context every run has one. Paired score
  contrasts pair the arms within item and replicate.
* Length-matched prefix controls (Figure 2d): original minus control
  accuracy on the common cohort of every control, budgets pooled within
  item, with a paired sign-flip test of the item-level differences.
* Dense readouts (Table A17): per-checkpoint gold log-odds, correctness and
  retrospective stable correctness, their trapezoid averages over the
  checkpoints up to 512, and the jointly active AUC over 0–128.
* Agreement (Table A4): the candidate-logit answer of a completed block vs
  the parsed natural answer.
"""

from typing import Any

import jax.numpy as jnp
import numpy as np
from otbench.analysis.measurement import Readouts

from . import _inference as inf
from . import _kernels as K
from ._group import ACTIVE_SPAN, DENSE_SPAN, READOUTS, Group, Settings, scores, stack, summ


def calibration(gr: Group, st: Settings) -> list[dict[str, Any]]:
    rows = []
    nH = len(st.horizons)
    for z, arm in enumerate(gr.run.arms):
        obs = gr.obs[z]
        if not obs.any():
            continue
        o3 = np.broadcast_to(obs[..., None], obs.shape + (nH,))
        parts = [(gr.active(z), o3), (gr.done(z) * gr.y[z][..., None], o3)]
        names = ["survival", "completion"]
        for rd in READOUTS:
            if gr.has_readout(rd):
                parts.append(gr.outcome(z, rd))
                names.append({"policy": "terminal_aware", "common": "common",
                              "continuation": "continuation"}[rd])
        if gr.has_readout("policy"):
            sc = gr.stop["policy"][1]
            parts.append((sc["correct"][z], o3 & gr.active(z) & sc["ok"][z]))
            names.append("survivor_only")
        parts.append((np.broadcast_to(gr.y[z][..., None], o3.shape), o3))
        names.append("natural")
        x, a = stack([(p[0], p[1]) for p in parts])
        b = gr.boot(x, a)
        survivors = (gr.active(z) & o3).sum(axis=(0, 1))
        items = int(obs.any(axis=1).sum())
        for h, B in enumerate(st.horizons):
            row = {"arm": arm, "B": int(B), "items": items, "pairs": int(obs.sum()),
                   "survivors": int(survivors[h])}
            for s, name in enumerate(names):
                k = s * nH + h
                row[name] = summ(b.estimate[k], b.draws[:, k])
            rows.append(row)
    return rows


def score_rows(gr: Group, st: Settings) -> tuple[list, list]:
    nH = len(st.horizons)
    rows, contrasts = [], []
    per_arm: dict[tuple[str, int], tuple] = {}
    for ctx, (ro, sc) in gr.stop.items():
        for z, arm in enumerate(gr.run.arms):
            ok = gr.obs[z][..., None] & sc["ok"][z]
            if ctx == "policy":
                ok = ok & gr.active(z)
            if not ok.any():
                continue
            ll = sc["log_loss"][z]
            okl = ok & np.isfinite(ll)       # a gold letter without probability: infinite loss
            x, a = stack([(ll, okl), (sc["brier"][z], ok), (sc["mass"][z], ok),
                           ((sc["q_true"][z] < st.tail).astype(np.float64), ok), (sc["correct"][z], ok)])
            b = gr.boot(x, a)
            per_arm[(ctx, z)] = (ok, ll, sc["brier"][z])
            for h, B in enumerate(st.horizons):
                rows.append({"arm": arm, "context": ctx, "B": int(B),
                             "readouts": int(ok[..., h].sum()),
                             "infinite_log_loss": int((ok & ~okl)[..., h].sum()),
                             "log_loss": summ(b.estimate[h], b.draws[:, h]),
                             "brier": summ(b.estimate[nH + h], b.draws[:, nH + h]),
                             "mass": summ(b.estimate[2 * nH + h], b.draws[:, 2 * nH + h]),
                             "tail_share": summ(b.estimate[3 * nH + h], b.draws[:, 3 * nH + h]),
                             "accuracy": summ(b.estimate[4 * nH + h], b.draws[:, 4 * nH + h])})
    for ctx in gr.stop:
        for an, bn in st.contrasts:
            A, Bz = gr.run.arm(an), gr.run.arm(bn)
            if (ctx, A) not in per_arm or (ctx, Bz) not in per_arm:
                continue
            oka, lla, bra = per_arm[(ctx, A)]
            okb, llb, brb = per_arm[(ctx, Bz)]
            p = oka & okb
            if not p.any():
                continue
            pl = p & np.isfinite(lla) & np.isfinite(llb)
            with np.errstate(invalid="ignore"):     # inf - inf where a loss is infinite (masked out)
                d_ll = np.where(pl, lla - llb, 0.0)
            x, a = stack([(d_ll, pl), (bra - brb, p)])
            b = gr.boot(x, a)
            for h, B in enumerate(st.horizons):
                contrasts.append({"a": an, "b": bn, "context": ctx, "B": int(B),
                                  "pairs": int(p[..., h].sum()),
                                  "log_loss": summ(b.estimate[h], b.draws[:, h]),
                                  "brier": summ(b.estimate[nH + h], b.draws[:, nH + h])})
    return rows, contrasts


def controls(gr: Group, st: Settings) -> list[dict[str, Any]]:
    run = gr.run
    if not run.control or "policy" not in gr.stop:
        return []
    ch = list(run.control_horizons)
    missing = [b for b in ch if b not in run.horizons]
    if missing:
        return [{"error": f"control horizons {missing} have no original readout"}]
    hix = [run.horizons.index(b) for b in ch]
    Hc = np.asarray(ch, dtype=np.int64)
    orig_ro = Readouts(*(f[:, gr.sel][:, :, :, hix] for f in run.stop["policy"]))
    orig = scores(orig_ro, gr.gold, gr.valid)
    ctl = {v: scores(Readouts(*(f[:, gr.sel] for f in ro)), gr.gold, gr.valid)
           for v, ro in run.control.items()}
    rows = []
    for z, arm in enumerate(run.arms):
        cohort = gr.obs[z][..., None] & (gr.L[z][..., None] > Hc[None, None, :]) & orig["ok"][z]
        for v in ctl:
            cohort = cohort & ctl[v]["ok"][z]
        if not cohort.any():
            continue
        n_items = cohort.shape[0]

        def flat(arr, n_items=n_items):     # budgets pooled within item
            return arr.reshape(n_items, -1)

        co = flat(cohort)
        xo = flat(orig["correct"][z].astype(np.float64))
        for v in ctl:
            xc = flat(ctl[v]["correct"][z].astype(np.float64))
            x, a = stack([(xo - xc, co), (xo, co), (xc, co)])
            b = gr.boot(x, a, "item")   # budgets pooled: the item scheme
            has = co.any(axis=1)
            dm = np.where(co, xo - xc, 0.0).sum(axis=1)[has] / co.sum(axis=1)[has]
            sf = inf.sign_flip(dm, draws=st.replicates, seed=st.seed)
            rows.append({"arm": arm, "control": v, "horizons": ch, "items": int(has.sum()),
                         "readouts": int(co.sum()),
                         "acc_original": summ(b.estimate[1], b.draws[:, 1]),
                         "acc_control": summ(b.estimate[2], b.draws[:, 2]),
                         "delta": summ(b.estimate[0], b.draws[:, 0]),
                         "sign_flip_p": None if sf is None else sf.p})
    return rows


def dense(gr: Group, st: Settings) -> dict[str, Any] | None:
    run = gr.run
    # The common context when the run has it (the paper's dense readout), else the policy context.
    ctx = "common" if run.stop["common"].avail.any() else "policy"
    checks = [b for b in run.manifest.get("checkpoints", []) if b in run.horizons and b <= DENSE_SPAN]
    if len(checks) < 2:
        return None
    ix = [run.horizons.index(b) for b in checks]
    ro = Readouts(*(f[:, gr.sel][:, :, :, ix] for f in run.stop[ctx]))
    sc = scores(ro, gr.gold, gr.valid)
    t = np.asarray(checks, dtype=np.float64)
    A, I, R, T = ro.avail.shape
    full = gr.obs[..., None] & sc["ok"] & np.isfinite(sc["log_odds"])
    comp = full.all(axis=-1)                                   # [arm, item, rep] a complete curve
    lo = np.where(full, sc["log_odds"], 0.0)
    correct = sc["correct"] & full
    stable = np.asarray(K.stable_correct(jnp.asarray(correct.reshape(-1, T)))).reshape(correct.shape)
    auc_lo = np.asarray(K.trapezoid_mean(jnp.asarray(lo.reshape(-1, T)), t)).reshape(A, I, R)
    auc_st = np.asarray(K.trapezoid_mean(jnp.asarray(stable.reshape(-1, T).astype(np.float64)), t)
                        ).reshape(A, I, R)
    act = [k for k, b in enumerate(checks) if b <= ACTIVE_SPAN]
    auc_lo_act = (np.asarray(K.trapezoid_mean(jnp.asarray(lo[..., act].reshape(-1, len(act))),
                                              t[act])).reshape(A, I, R) if len(act) >= 2 else None)
    curves = []
    for z, arm in enumerate(run.arms):
        if not comp[z].any():
            continue
        c3 = np.broadcast_to(comp[z][..., None], (I, R, T))
        x, a = stack([(lo[z], c3), (correct[z], c3), (stable[z], c3),
                       (auc_lo[z], comp[z]), (auc_st[z], comp[z])])
        b = gr.boot(x, a)
        curves.append({"arm": arm, "items": int(comp[z].any(axis=1).sum()),
                       "log_odds": [summ(b.estimate[k], b.draws[:, k]) for k in range(T)],
                       "correct": [summ(b.estimate[T + k], b.draws[:, T + k]) for k in range(T)],
                       "stable": [summ(b.estimate[2 * T + k], b.draws[:, 2 * T + k]) for k in range(T)],
                       "auc_log_odds": summ(b.estimate[3 * T], b.draws[:, 3 * T]),
                       "auc_stable": summ(b.estimate[3 * T + 1], b.draws[:, 3 * T + 1])})
    diffs = []
    for an, bn in st.contrasts:
        a_, b_ = run.arm(an), run.arm(bn)
        p = comp[a_] & comp[b_]
        if not p.any():
            continue
        parts = [(auc_lo[a_] - auc_lo[b_], p), (auc_st[a_] - auc_st[b_], p)]
        both = p & (gr.L[a_] > ACTIVE_SPAN) & (gr.L[b_] > ACTIVE_SPAN)
        if auc_lo_act is not None and both.any():
            parts.append((auc_lo_act[a_] - auc_lo_act[b_], both))
        x, a = stack(parts)
        b = gr.boot(x, a)
        d = {"a": an, "b": bn, "pairs": int(p.sum()),
             "auc_log_odds": summ(b.estimate[0], b.draws[:, 0]),
             "auc_stable": summ(b.estimate[1], b.draws[:, 1])}
        if len(parts) == 3:
            d["active_pairs"] = int(both.sum())
            d["auc_log_odds_active"] = summ(b.estimate[2], b.draws[:, 2])
        diffs.append(d)
    return {"context": ctx, "checkpoints": checks, "active_span": ACTIVE_SPAN,
            "curves": curves, "contrasts": diffs}


def agreement(gr: Group) -> list[dict[str, Any]]:
    out = []
    if "policy" not in gr.term:
        return out
    tsc = gr.term["policy"][1]
    letter = gr.run.letter[:, gr.sel]
    for z, arm in enumerate(gr.run.arms):
        m = gr.obs[z] & gr.fin[z] & (letter[z] >= 0) & tsc["ok"][z]
        if not (gr.obs[z] & gr.fin[z]).any():
            continue
        agree = int((tsc["argmax"][z] == letter[z])[m].sum())
        out.append({"arm": arm, "finished": int((gr.obs[z] & gr.fin[z]).sum()),
                    "compared": int(m.sum()), "agree": agree,
                    "agreement": None if m.sum() == 0 else agree / int(m.sum())})
    return out
