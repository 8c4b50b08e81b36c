"""Matched-horizon analysis of a horizon run: calibration, paired contrasts, strata, scores, controls (SPEC §8).

Definitions, for arm `z`, item `i`, replicate `r`, horizon `B` (token counts
in the source model's tokenizer):

* survival `S(B) = P(L > B)`; a run is *finished by B* when it ended by
  itself with `L <= B` (a run cut at the thinking limit never finishes:
  its forced answer at the limit stands in for its answer, so choose
  horizons up to the limit);
* correct completion by the deadline `K(B) = 1{finished by B} y`;
* terminal-aware accuracy (policy context) `T(B) = y` when finished by `B`,
  else the readout of the reasoning cut at `B` under the arm's own prompt;
* survivor-only accuracy: the readout among runs with `L > B`;
* common-context accuracy: the readout under the common arm's prompt for
  every run, completed blocks replayed (no natural answers);
* behavioural (continuation) accuracy: `T(B)` with the greedy generated
  answer in place of the candidate-logit argmax.

Every rate is a mean of item means (replicates averaged within item first),
with percentile intervals from an item bootstrap (`_horizon_inference`;
default 10,000 draws, seed 0, recorded). Paired contrasts `A - B` pair the
two arms within item and replicate (a pair needs both outcomes), report
pointwise intervals, a simultaneous band over horizons and one over the
family of all requested contrasts x horizons (per readout), the trapezoid
summary over `log2 B` (horizons `B > 0`) divided by the span, and the same
under the two-way item x replicate bootstrap as a sensitivity; beside them,
per horizon, the second paper's crossed random-intercept sensitivity
(``crossed``: item and replicate intercepts by the method of moments on the
items paired in every replicate, Satterthwaite `t` interval;
`_inference.crossed_intercepts`), whose estimate can differ from `Δ` when
items lack a pair in some replicate. The
four-stratum decomposition splits each pair by which arm has finished by
`B`; a stratum's contribution is the mean of item means of `D 1{stratum}`
over all pairs, so contributions add up to the total contrast in the
estimate and in every replicate; its share is the same mean of
`1{stratum}`. Its within-stratum contrast ``within`` is the second paper's:
the item-averaged difference inside the stratum (the mean over items with a
pair in it of their mean `D` over those pairs), bootstrapped the same way;
``items`` counts those items. The ratio contribution / share, the contrast
that makes share x contrast = contribution, is kept as
``contribution_per_share`` (the two differ when items contribute unequal
numbers of pairs to the stratum).

Matched horizon chosen by one arm (a "matched" block of the run): for each
finished run of the lower arm `c`, the upper arm is read at `L^c` (its
complete block when it finished earlier); pairs whose upper run cannot be
replayed (it ended at the limit before `L^c`) are missing, and worst-case
bounds set their upper outcome to correct (lower bound) and to wrong (upper
bound), with the lower arm's natural outcome. ``bound_low`` / ``bound_high``
follow the second paper: pooled over the `N` retained pairs,
`(Σ_observed D + Σ_missing (Y - 1)) / N` (and `Y` for the upper), with
intervals from the item bootstrap of the two sums (a ratio of item totals,
items resampled). ``bound_low_item_mean`` / ``bound_high_item_mean`` average
within item first like every other rate here; they differ when items hold
unequal numbers of pairs.

Proper scores of the candidate-logit readout: conditional log loss
`-log q_true`, multiclass Brier score, valid-option mass `M`, and the share
of readouts with `q_true < 1e-4`; in the policy context only unfinished runs
have a readout distribution (a finished run keeps its natural answer), in
the common context every run has one.
"""

import dataclasses
import os
from collections.abc import Callable, Sequence
from typing import Any

import jax.numpy as jnp
import numpy as np
from otbench.analysis.measurement import LETTERS, HorizonRun, Readouts, load_run

from otbench.errors import OtbenchError

from . import _inference as inf
from . import _kernels as K

SCHEMA = "otbench.horizon/1"
STRATA = ("both_active", "only_a_finished", "only_b_finished", "both_finished")
READOUTS = ("policy", "common", "continuation")
TAIL = 1e-4
DENSE_SPAN = 512
ACTIVE_SPAN = 128


class HorizonAnalysisError(OtbenchError, ValueError):
    """A request the run cannot answer (unknown arm, horizon not read out, ...)."""


@dataclasses.dataclass(frozen=True)
class Settings:
    """Analysis settings (recorded in the result)."""

    contrasts: tuple[tuple[str, str], ...]
    horizons: tuple[int, ...]
    replicates: int
    seed: int
    two_way: bool
    batch: int
    tail: float


def _settings_iv(run: HorizonRun, contrasts, horizons, replicates, seed, two_way, batch,
                 tail) -> Settings:
    pairs = []
    for c in contrasts:
        if isinstance(c, str):
            c = tuple(s.strip() for s in c.split(","))
        if len(c) != 2 or c[0] == c[1]:
            raise HorizonAnalysisError(f"a contrast must name two different arms 'A,B', got {c!r}")
        for a in c:
            run.arm(a)
        pairs.append((str(c[0]), str(c[1])))
    if horizons is None:
        hs = tuple(run.horizons)
    else:
        hs = tuple(sorted({int(b) for b in horizons}))
        missing = [b for b in hs if b not in run.horizons]
        if missing:
            raise HorizonAnalysisError(f"horizons {missing} were not read out in this run "
                                       f"(available: {list(run.horizons)})")
    if not hs:
        raise HorizonAnalysisError("the run has no fixed-horizon readouts")
    if isinstance(replicates, bool) or not isinstance(replicates, int) or replicates < 1:
        raise HorizonAnalysisError(f"`replicates` must be a positive integer, got {replicates!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**64:
        raise HorizonAnalysisError(f"`seed` must be an integer in [0, 2**64), got {seed!r}")
    if not 0 < tail < 1:
        raise HorizonAnalysisError(f"`tail` must be in (0, 1), got {tail!r}")
    return Settings(tuple(pairs), hs, replicates, seed, bool(two_way), int(batch), float(tail))


# -- per-readout quantities ------------------------------------------------------------------

def _scores(ro: Readouts, gold: np.ndarray, valid: np.ndarray) -> dict[str, np.ndarray]:
    """Scores of readouts `ro`: grids [item, rep] (matched) or [arm, item, rep(, horizon)].

    `ok` marks readouts that exist and put mass on some valid option; an
    absent readout gets placeholder values and `ok` False.
    """
    shape = ro.avail.shape
    O = ro.logp.shape[-1]
    g_shape = [1] * len(shape)
    g_shape[0 if len(shape) == 2 else 1] = gold.shape[0]
    g = np.broadcast_to(gold.reshape(g_shape), shape)
    v = np.broadcast_to(valid.reshape(g_shape + [O]), shape + (O,))
    lp = np.where(ro.avail[..., None], ro.logp, 0.0).reshape(-1, O)   # placeholders where absent
    n = lp.shape[0]
    pad = max(64, 1 << (max(n, 1) - 1).bit_length()) - n    # few compiled shapes
    s = K.readout_scores(jnp.asarray(np.pad(lp, ((0, pad), (0, 0)))),
                         jnp.asarray(np.pad(g.reshape(-1), (0, pad))),
                         jnp.asarray(np.pad(v.reshape(-1, O), ((0, pad), (0, 0)), constant_values=True)))
    out = {f: np.asarray(getattr(s, f))[:n].reshape(shape) for f in s._fields}
    ok = ro.avail & (out["mass"] > 0)
    out["correct"] = (out["argmax"] == g) & ok
    out["ok"] = ok
    return out


def _summ(est: float, draws: np.ndarray) -> dict[str, Any]:
    e = None if not np.isfinite(est) else float(est)
    return {"estimate": e, "ci": inf.interval(draws) if e is not None else None}


def _stack(parts: Sequence[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """Stack (x, a) pairs of shape [item, rep] or [item, rep, k] along a last axis."""
    xs, as_ = [], []
    for x, a in parts:
        x = np.asarray(x, dtype=np.float64)
        a = np.asarray(a, dtype=bool)
        if x.ndim == 2:
            x, a = x[..., None], a[..., None]
        xs.append(np.where(a, x, 0.0))
        as_.append(a)
    return np.concatenate(xs, axis=-1), np.concatenate(as_, axis=-1)


# -- the analysis -----------------------------------------------------------------------------

class _Group:
    """One benchmark group's arrays, sliced to its items."""

    def __init__(self, run: HorizonRun, g: int, st: Settings):
        self.run, self.st = run, st
        sel = np.flatnonzero(run.item_group == g)
        self.sel = sel
        self.name = run.groups[g]
        self.hix = [run.horizons.index(b) for b in st.horizons]
        self.H = np.asarray(st.horizons, dtype=np.int64)
        self.gold = run.gold[sel]
        self.valid = run.valid[sel]
        self.obs = run.obs[:, sel]
        self.L = run.L[:, sel]
        self.fin = run.finished[:, sel]
        self.y = run.y[:, sel].astype(np.float64)
        self.stop = {}
        for ctx, ro in run.stop.items():
            sub = Readouts(*(f[:, sel][:, :, :, self.hix] for f in ro))
            self.stop[ctx] = (sub, _scores(sub, self.gold, self.valid))
        self.term = {ctx: (Readouts(*(f[:, sel] for f in ro)),
                           _scores(Readouts(*(f[:, sel] for f in ro)), self.gold, self.valid))
                     for ctx, ro in run.terminal.items()}
        self._res: dict[str, inf.Resampler] = {}

    def boot(self, x: np.ndarray, a: np.ndarray, scheme: str = "item") -> inf.Boot:
        """Bootstrap of stacked statistics over this group's items (weights drawn once per scheme)."""
        if scheme not in self._res:
            self._res[scheme] = inf.Resampler(self.sel.size, self.run.R, replicates=self.st.replicates,
                                              seed=self.st.seed, scheme=scheme, batch=self.st.batch)
        return inf.bootstrap(x, a, resampler=self._res[scheme])

    # per-arm outcome grids [item, rep, horizon]
    def done(self, z):
        return self.fin[z][..., None] & (self.L[z][..., None] <= self.H[None, None, :])

    def active(self, z):
        return self.L[z][..., None] > self.H[None, None, :]

    def outcome(self, z: int, readout: str) -> tuple[np.ndarray, np.ndarray]:
        """(x, a)[item, rep, horizon] of arm `z` under `readout` (module docstring)."""
        obs = self.obs[z][..., None]
        done = self.done(z)
        y = self.y[z][..., None]
        if readout == "common":
            ro, sc = self.stop["common"]
            return sc["correct"][z].astype(np.float64), obs & sc["ok"][z]
        ro, sc = self.stop["policy"]
        if readout == "policy":
            x = np.where(done, y, sc["correct"][z])
            return x.astype(np.float64), obs & (done | sc["ok"][z])
        if readout == "continuation":
            x = np.where(done, y, ro.cont_correct[z])
            return x.astype(np.float64), obs & (done | ro.cont_avail[z])
        raise ValueError(readout)

    def has_readout(self, readout: str) -> bool:
        if readout == "continuation":
            return "policy" in self.stop and bool(self.stop["policy"][0].cont_avail.any())
        return readout in self.stop and bool(self.stop[readout][0].avail.any())


def _calibration(gr: _Group, st: Settings) -> list[dict[str, Any]]:
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
            ro, sc = gr.stop["policy"]
            parts.append((sc["correct"][z], o3 & gr.active(z) & sc["ok"][z]))
            names.append("survivor_only")
        parts.append((np.broadcast_to(gr.y[z][..., None], o3.shape), o3))
        names.append("natural")
        x, a = _stack([(p[0], p[1]) for p in parts])
        b = gr.boot(x, a)
        survivors = (gr.active(z) & o3).sum(axis=(0, 1))
        items = int(obs.any(axis=1).sum())
        for h, B in enumerate(st.horizons):
            row = {"arm": arm, "B": int(B), "items": items, "pairs": int(obs.sum()),
                   "survivors": int(survivors[h])}
            for s, name in enumerate(names):
                k = s * nH + h
                row[name] = _summ(b.estimate[k], b.draws[:, k])
            rows.append(row)
    return rows


def _contrast_block(gr: _Group, st: Settings, A: int, Bz: int, readout: str, scheme: str):
    """Boot of the stack [D(H), x_A(H), x_B(H)] for one contrast and readout, plus pair masks."""
    xa, aa = gr.outcome(A, readout)
    xb, ab = gr.outcome(Bz, readout)
    pair = aa & ab
    x, a = _stack([(xa - xb, pair), (xa, pair), (xb, pair)])
    return gr.boot(x, a, scheme), pair, xa, xb


def _crossed(pair: np.ndarray, d: np.ndarray) -> dict[str, Any] | None:
    """Crossed item x replicate random intercepts on the items paired in every replicate."""
    full = pair.all(axis=1)
    fit = inf.crossed_intercepts(d[full]) if pair.shape[1] >= 2 else None
    return None if fit is None else dataclasses.asdict(fit)


def _contrasts(gr: _Group, st: Settings) -> tuple[list, list, list]:
    nH = len(st.horizons)
    rows, strata, tests = [], [], []
    for rd in READOUTS:
        if not gr.has_readout(rd):
            continue
        fam_est, fam_draws, fam_rows = [], [], []
        fam2_est, fam2_draws = [], []
        for (an, bn) in st.contrasts:
            A, Bz = gr.run.arm(an), gr.run.arm(bn)
            b, pair, xa, xb = _contrast_block(gr, st, A, Bz, rd, "item")
            if not pair.any():
                continue
            d_est, d_draws = b.estimate[:nH], b.draws[:, :nH]
            band = inf.simultaneous_band(d_est, d_draws)
            auc_est = float(inf.log2_trapezoid(d_est, st.horizons))
            auc_draws = inf.log2_trapezoid(d_draws, st.horizons)
            two = None
            if st.two_way:
                b2, *_ = _contrast_block(gr, st, A, Bz, rd, "two-way")
                two = b2
                fam2_est.append(b2.estimate[:nH])
                fam2_draws.append(b2.draws[:, :nH])
            items = pair.any(axis=1).sum(axis=0)
            row = {"a": an, "b": bn, "readout": rd,
                   "band_halfwidth": band,
                   "auc": _summ(auc_est, auc_draws), "horizons": []}
            if two is not None:
                row["two_way"] = {
                    "band_halfwidth": inf.simultaneous_band(two.estimate[:nH], two.draws[:, :nH]),
                    "auc": _summ(float(inf.log2_trapezoid(two.estimate[:nH], st.horizons)),
                                 inf.log2_trapezoid(two.draws[:, :nH], st.horizons))}
            for h, B in enumerate(st.horizons):
                e = b.estimate[h]
                hr = {"B": int(B), "items": int(items[h]), "pairs": int(pair[..., h].sum()),
                      "acc_a": _summ(b.estimate[nH + h], b.draws[:, nH + h]),
                      "acc_b": _summ(b.estimate[2 * nH + h], b.draws[:, 2 * nH + h]),
                      "delta": _summ(e, b.draws[:, h]),
                      "band": None if band is None or not np.isfinite(e) else [e - band, e + band]}
                if two is not None:
                    hr["two_way_ci"] = inf.interval(two.draws[:, h]) if np.isfinite(e) else None
                hr["crossed"] = _crossed(pair[..., h], (xa - xb)[..., h])
                row["horizons"].append(hr)
                if rd == "policy":
                    p = pair[..., h]
                    m = inf.mcnemar(xa[..., h][p].astype(np.int64), xb[..., h][p].astype(np.int64))
                    tests.append({"a": an, "b": bn, "B": int(B), **dataclasses.asdict(m)})
            rows.append(row)
            fam_est.append(d_est)
            fam_draws.append(d_draws)
            fam_rows.append(row)
            strata.extend(_strata(gr, st, A, Bz, an, bn, rd, pair, xa, xb))
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


def _strata(gr: _Group, st: Settings, A, Bz, an, bn, rd, pair, xa, xb) -> list[dict[str, Any]]:
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
    x, a = _stack(parts)
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
                         "share": _summ(share, b.draws[:, ks]),
                         "within": _summ(b.estimate[kw], b.draws[:, kw]),
                         "contribution_per_share": _summ(ratio, ratio_draws),
                         "contribution": _summ(contrib, b.draws[:, kc]),
                         "total": None if not np.isfinite(total) else float(total)})
    return rows


def _score_rows(gr: _Group, st: Settings) -> tuple[list, list]:
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
            x, a = _stack([(ll, okl), (sc["brier"][z], ok), (sc["mass"][z], ok),
                           ((sc["q_true"][z] < st.tail).astype(np.float64), ok), (sc["correct"][z], ok)])
            b = gr.boot(x, a)
            per_arm[(ctx, z)] = (ok, ll, sc["brier"][z])
            for h, B in enumerate(st.horizons):
                rows.append({"arm": arm, "context": ctx, "B": int(B),
                             "readouts": int(ok[..., h].sum()),
                             "infinite_log_loss": int((ok & ~okl)[..., h].sum()),
                             "log_loss": _summ(b.estimate[h], b.draws[:, h]),
                             "brier": _summ(b.estimate[nH + h], b.draws[:, nH + h]),
                             "mass": _summ(b.estimate[2 * nH + h], b.draws[:, 2 * nH + h]),
                             "tail_share": _summ(b.estimate[3 * nH + h], b.draws[:, 3 * nH + h]),
                             "accuracy": _summ(b.estimate[4 * nH + h], b.draws[:, 4 * nH + h])})
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
            x, a = _stack([(np.where(pl, lla - llb, 0.0), pl), (bra - brb, p)])
            b = gr.boot(x, a)
            for h, B in enumerate(st.horizons):
                contrasts.append({"a": an, "b": bn, "context": ctx, "B": int(B),
                                  "pairs": int(p[..., h].sum()),
                                  "log_loss": _summ(b.estimate[h], b.draws[:, h]),
                                  "brier": _summ(b.estimate[nH + h], b.draws[:, nH + h])})
    return rows, contrasts


def _matched(gr: _Group, st: Settings) -> list[dict[str, Any]]:
    run = gr.run
    out = []
    if "common" not in gr.term:
        return out
    tro, tsc = gr.term["common"]
    for lower, (upper, mro_all) in run.matched.items():
        c, h = run.arm(lower), run.arm(upper)
        mro = Readouts(*(f[gr.sel] for f in mro_all))
        msc = _scores(mro, gr.gold, gr.valid)
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
        x, a = _stack(parts)
        b = gr.boot(x, a)
        names = ["delta", "acc_lower", "acc_upper", "bound_low", "bound_high", "delta_high_active",
                 "log_loss_diff", "brier_diff", "tail_lower", "tail_upper"]
        if cont.any():
            names.append("delta_continuation")
        row = {"lower": lower, "upper": upper, "pairs": int(base.sum()), "replayable": int(rep.sum()),
               "missing": int(miss.sum()), "high_active": int(high_active.sum()),
               "items": int(base.any(axis=1).sum())}
        for k, name in enumerate(names):
            row[name] = _summ(b.estimate[k], b.draws[:, k])
        row["bound_low_item_mean"], row["bound_high_item_mean"] = row["bound_low"], row["bound_high"]
        row["bound_low"], row["bound_high"] = _pooled_bounds(gr, base, rep, d, ync)
        out.append(row)
    return out


def _pooled_bounds(gr: _Group, base, rep, d, ync) -> tuple[dict[str, Any], dict[str, Any]]:
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
    return _summ(est[0], draws[:, 0]), _summ(est[1], draws[:, 1])


def _controls(gr: _Group, st: Settings) -> list[dict[str, Any]]:
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
    orig = _scores(orig_ro, gr.gold, gr.valid)
    ctl = {v: _scores(Readouts(*(f[:, gr.sel] for f in ro)), gr.gold, gr.valid)
           for v, ro in run.control.items()}
    rows = []
    for z, arm in enumerate(run.arms):
        cohort = gr.obs[z][..., None] & (gr.L[z][..., None] > Hc[None, None, :]) & orig["ok"][z]
        for v in ctl:
            cohort = cohort & ctl[v]["ok"][z]
        if not cohort.any():
            continue
        I, R, _ = cohort.shape
        flat = lambda arr: arr.reshape(I, R * len(ch))   # noqa: E731  budgets pooled within item
        co = flat(cohort)
        xo = flat(orig["correct"][z].astype(np.float64))
        for v in ctl:
            xc = flat(ctl[v]["correct"][z].astype(np.float64))
            x, a = _stack([(xo - xc, co), (xo, co), (xc, co)])
            b = gr.boot(x, a)
            has = co.any(axis=1)
            dm = np.where(co, xo - xc, 0.0).sum(axis=1)[has] / co.sum(axis=1)[has]
            sf = inf.sign_flip(dm, draws=st.replicates, seed=st.seed)
            rows.append({"arm": arm, "control": v, "horizons": ch, "items": int(has.sum()),
                         "readouts": int(co.sum()),
                         "acc_original": _summ(b.estimate[1], b.draws[:, 1]),
                         "acc_control": _summ(b.estimate[2], b.draws[:, 2]),
                         "delta": _summ(b.estimate[0], b.draws[:, 0]),
                         "sign_flip_p": None if sf is None else sf.p})
    return rows


def _dense(gr: _Group, st: Settings) -> dict[str, Any] | None:
    run = gr.run
    # The common context when the run has it (the paper's dense readout), else the policy context.
    ctx = "common" if run.stop["common"].avail.any() else "policy"
    checks = [b for b in run.manifest.get("checkpoints", []) if b in run.horizons and b <= DENSE_SPAN]
    if len(checks) < 2:
        return None
    ix = [run.horizons.index(b) for b in checks]
    ro = Readouts(*(f[:, gr.sel][:, :, :, ix] for f in run.stop[ctx]))
    sc = _scores(ro, gr.gold, gr.valid)
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
        x, a = _stack([(lo[z], c3), (correct[z], c3), (stable[z], c3),
                       (auc_lo[z], comp[z]), (auc_st[z], comp[z])])
        b = gr.boot(x, a)
        curves.append({"arm": arm, "items": int(comp[z].any(axis=1).sum()),
                       "log_odds": [_summ(b.estimate[k], b.draws[:, k]) for k in range(T)],
                       "correct": [_summ(b.estimate[T + k], b.draws[:, T + k]) for k in range(T)],
                       "stable": [_summ(b.estimate[2 * T + k], b.draws[:, 2 * T + k]) for k in range(T)],
                       "auc_log_odds": _summ(b.estimate[3 * T], b.draws[:, 3 * T]),
                       "auc_stable": _summ(b.estimate[3 * T + 1], b.draws[:, 3 * T + 1])})
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
        x, a = _stack(parts)
        b = gr.boot(x, a)
        d = {"a": an, "b": bn, "pairs": int(p.sum()),
             "auc_log_odds": _summ(b.estimate[0], b.draws[:, 0]),
             "auc_stable": _summ(b.estimate[1], b.draws[:, 1])}
        if len(parts) == 3:
            d["active_pairs"] = int(both.sum())
            d["auc_log_odds_active"] = _summ(b.estimate[2], b.draws[:, 2])
        diffs.append(d)
    return {"context": ctx, "checkpoints": checks, "active_span": ACTIVE_SPAN,
            "curves": curves, "contrasts": diffs}


def _agreement(gr: _Group) -> list[dict[str, Any]]:
    out = []
    if "policy" not in gr.term:
        return out
    tro, tsc = gr.term["policy"]
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


def analyze(run: HorizonRun | str | os.PathLike, *, contrasts: Sequence = (),
            horizons: Sequence[int] | None = None, replicates: int = inf.REPLICATES,
            seed: int = inf.SEED, two_way: bool = True, batch: int = inf.BATCH,
            tail: float = TAIL, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """The matched-horizon analysis document (``otbench.horizon/1``) of a run.

    Args:
      run: a `HorizonRun` or a run directory.
      contrasts: pairs `(A, B)` (or "A,B" strings): the paired contrasts `A - B`.
      horizons: the fixed horizons `B` to report (default: every horizon read out).
      replicates, seed: item-bootstrap draws and their seed (recorded).
      two_way: also report the two-way item x replicate bootstrap of contrasts.
      batch: bootstrap replicates per kernel call (memory; never changes a result).
      tail: threshold of the correct-option probability tail share.

    Values are fractions (rates) or nats (log loss); intervals are 2.5/97.5
    percentiles. Groups are analysed separately.
    """
    say = progress or (lambda s: None)
    if not isinstance(run, HorizonRun):
        run = load_run(run)
    st = _settings_iv(run, contrasts, horizons, replicates, seed, two_way, batch, tail)
    groups = []
    for g, name in enumerate(run.groups):
        say(f"group {name}: calibration")
        gr = _Group(run, g, st)
        doc = {"group": name, "items": int(gr.sel.size), "calibration": _calibration(gr, st)}
        say(f"group {name}: contrasts")
        doc["contrasts"], doc["strata"], doc["mcnemar"] = _contrasts(gr, st)
        say(f"group {name}: proper scores, matched horizons, controls, dense readouts")
        doc["scores"], doc["score_contrasts"] = _score_rows(gr, st)
        doc["matched"] = _matched(gr, st)
        doc["controls"] = _controls(gr, st)
        doc["dense"] = _dense(gr, st)
        doc["agreement"] = _agreement(gr)
        groups.append(doc)
    man = run.manifest
    return {
        "schema": SCHEMA,
        "run": {"model": man.get("model"), "arms": list(run.arms), "common_arm": man.get("common_arm"),
                "closure": (man.get("closure") or {}).get("name"),
                "trajectories_sha256": man.get("trajectories_sha256"),
                "readouts_sha256": man.get("readouts_sha256"),
                "synthetic": bool(man.get("synthetic", False))},
        "settings": {"contrasts": [list(c) for c in st.contrasts], "horizons": list(st.horizons),
                     "replicates": st.replicates, "seed": st.seed, "scheme": "item",
                     "two_way": st.two_way, "percentiles": [2.5, 97.5], "level": inf.LEVEL,
                     "tail": st.tail, "options": LETTERS[:run.options]},
        "groups": groups,
    }
