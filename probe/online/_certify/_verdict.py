"""The certificate's verdict: enough evidence, the tests, and every source of disagreement named.

Verdict (one of three, never a bare "inside"):

* ``not certified`` -- too little evidence to certify anything, with each
  reason: fewer than `MIN_QUESTIONS` questions in some cell (the interval
  of the macro point rests on resampling questions; below the floor its
  rejection rate was measured above nominal); fewer than `MIN_FAITHFUL_SHARE` of
  the replays reproduced their stored tokens (the stop comparison is made
  on faithful replays only); no early stop -- online or offline -- among
  the faithful replays (θ never fired, so nothing of the rule was compared);
* ``rejected`` -- enough evidence, and a faithful replay stopped elsewhere
  than OTBench's offline walk, or the paired difference of accuracy or of
  relative cost has 0 outside its interval (`_interval`);
* ``certified`` -- enough evidence and none of those.

Sources of disagreement (``disagreements``): every trajectory whose online
stop position or thinking length differs from the offline one is given one
cause -- the replay diverged from the stored tokens (with the first token
that differs), the signal read now differs from the recorded one (the
controller agrees with the offline walk on the signal it read online:
another machine or kernel), the controller itself (it disagrees with that
walk on the same signal), or unattributed (no online-context read was
made) -- with its share of the cost and accuracy gaps; the answers at equal
stops are the answer-sampling source (one graded sample online, `C(k)/P`
offline). Shares are pooled over the certified trajectories (the macro gap
weights cells equally, so shares add up to it exactly with one cell).
"""

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

MIN_QUESTIONS = 30
"""Questions per cell below which no certificate is given. Measured (SYNTHETIC, online and offline
answers from one accuracy, the demo's R = 3, P = 4, two groups at 4 : 1): at 40 + 10 questions the
paired stage-1 interval rejected 8-10 % of runs (nominal 5 %: too few questions to resample), at
120 + 30 questions 3.3 % (300 runs, s.e. 1.3 pp); `benchmarks/certify_calibration.py`."""
MIN_FAITHFUL_SHARE = 0.5
"""Share of replays that must reproduce their stored tokens for the stop comparison to count."""
EXAMPLES = 3


def first_divergence(online: Sequence[int], stored: Sequence[int]) -> int | None:
    """The first token index where `online` thinking leaves `stored` (None: a prefix of it)."""
    a, b = np.asarray(online, dtype=np.int64), np.asarray(stored, dtype=np.int64)
    n = min(a.size, b.size)
    diff = np.flatnonzero(a[:n] != b[:n])
    if diff.size:
        return int(diff[0])
    return None if a.size <= b.size else int(n)


def evidence(cert: Mapping[str, Any], questions_per_cell: np.ndarray) -> list[str]:
    """Why the certificate cannot be given (empty: enough evidence); module docstring."""
    n = int(cert["trajectories"])
    if n == 0:
        return ["no trajectories were replayed"]
    out = []
    q = int(np.min(questions_per_cell))
    if q < MIN_QUESTIONS:
        out.append(f"too few questions: {q} in the smallest cell, at least {MIN_QUESTIONS} per cell "
                   "(the interval resamples questions)")
    f = int(cert["faithful"])
    if f < MIN_FAITHFUL_SHARE * n:
        out.append(f"unfaithful replays: only {f} of {n} reproduced their stored tokens "
                   f"(at least {MIN_FAITHFUL_SHARE:.0%} must; stops are compared on those)")
    early = sum(1 for r in cert["per_trajectory"] if r["faithful"] and (r["offline_early"] or r["online_early"]))
    if f and not early:
        out.append(f"no early stops: θ stopped none of the {f} faithful replays early, online or "
                   "offline (nothing of the rule was compared)")
    return out


def verdict(cert: Mapping[str, Any], questions_per_cell: np.ndarray) -> dict[str, Any]:
    """``verdict`` and its ``reasons`` (module docstring)."""
    why = evidence(cert, questions_per_cell)
    if why:
        return {"verdict": "not certified", "reasons": why}
    faithful = [r for r in cert["per_trajectory"] if r["faithful"]]
    unequal = sum(r["online_k"] != r["offline_k"] for r in faithful)
    fails = []
    if unequal:
        fails.append(f"stop position differs on {unequal} of {len(faithful)} faithful replays")
    for key, label in (("accuracy", "accuracy"), ("relative_cost", "relative cost")):
        d = cert["interval"][key]
        if not d["inside"]:
            lo, hi = d["difference_interval"]
            fails.append(f"{label} gap {100 * d['difference']:.1f} pp outside its paired interval "
                         f"[{100 * lo:.1f}, {100 * hi:.1f}] pp")
    return {"verdict": "rejected" if fails else "certified", "reasons": fails}


def _cause(r: Mapping[str, Any], batch_variant: bool = False) -> str | None:
    if r["online_k"] == r["offline_k"] and r["online_L"] == r["offline_L"]:
        return None
    if not r["faithful"]:
        return "replay diverged without batch invariance" if batch_variant else "replay diverged"
    if "online_context_k" not in r:
        return "unattributed"
    return "signal read differs from the recorded one" if r["online_k"] == r["online_context_k"] \
        else "controller"


NOTES = {
    "replay diverged": "the engine sampled other tokens than the stored ones before the stop, with "
                       "batch invariance on in both runs (seeds and kernels alike: look for a defect)",
    "replay diverged without batch invariance": "the engine sampled other tokens than the stored ones "
                       "before the stop, and batch invariance was off in the stored run or the replay: "
                       "seeds are promised, bit-identical floats across batchings are not "
                       "(engine.batch_invariant on a GPU makes them so)",
    "signal read differs from the recorded one": "the controller stopped where the offline walk on the "
                       "signal it read online stops; the recorded signal walks elsewhere (another "
                       "machine, kernel or batch: see signal_shift / own_context_reread)",
    "controller": "the controller stopped elsewhere than the offline walk on the same online-context "
                  "signal: a defect of the controller",
    "unattributed": "no online-context signal read was made, so the signal and the controller "
                    "cannot be told apart",
    "answer sampling": "at equal stops online grades one answer sample, offline the position's C(k)/P",
}


def disagreements(cert: Mapping[str, Any], probes: np.ndarray, online_correct: np.ndarray,
                  offline_acc: np.ndarray) -> list[dict[str, Any]]:
    """Every source of disagreement with its trajectories and gap shares (module docstring)."""
    recs = cert["per_trajectory"]
    if not recs:
        return []
    full = float(sum(r["full_L"] for r in recs)) or 1.0
    P = np.asarray(probes, dtype=np.float64)
    acc_w = P / P.sum()
    out: dict[str, dict[str, Any]] = {}
    inv = cert.get("batch_invariance")
    variant = isinstance(inv, Mapping) and not inv.get("both", False)
    for i, r in enumerate(recs):
        cause = _cause(r, variant) or "answer sampling"
        d = out.setdefault(cause, {"source": cause, "trajectories": 0, "cost_gap_pp": 0.0,
                                   "acc_gap_pp": 0.0, "note": NOTES[cause], "examples": []})
        d["trajectories"] += 1
        d["cost_gap_pp"] += 100 * (r["online_L"] - r["offline_L"]) / full
        d["acc_gap_pp"] += 100 * acc_w[i] * (float(online_correct[i]) - float(offline_acc[i]))
        if cause != "answer sampling" and len(d["examples"]) < EXAMPLES:
            ex = {k: r[k] for k in ("question", "trajectory", "offline_k", "online_k")}
            if r.get("first_divergence") is not None:
                ex["first_divergence"] = r["first_divergence"]
            d["examples"].append(ex)
    order = ("replay diverged", "replay diverged without batch invariance", "signal read differs from the recorded one", "controller",
             "unattributed", "answer sampling")
    return [out[k] for k in order if k in out]


def disagreement_line(cert: Mapping[str, Any]) -> str:
    """One line naming each source of disagreement with its trajectories and gap shares."""
    parts = []
    for d in cert.get("disagreements", []):
        ex = "; e.g. " + ", ".join(f"{e['question']}#{e['trajectory']} k {e['offline_k']}->{e['online_k']}"
                                   + (f" (diverged at token {e['first_divergence']})"
                                      if "first_divergence" in e else "") for e in d["examples"]) \
            if d["examples"] else ""
        parts.append(f"{d['source']}: {d['trajectories']} trajectories, cost {d['cost_gap_pp']:+.1f} pp, "
                     f"accuracy {d['acc_gap_pp']:+.1f} pp{ex}")
    return "disagreement sources: " + (" | ".join(parts) if parts else "none (no trajectories)")
