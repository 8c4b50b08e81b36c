"""Random matched-horizon runs written through the run format, for the analysis tests (no torch).

`random_run` draws every array a run holds -- terminal lengths, natural
termination and answers, per-option log-probabilities of every readout,
continuation outcomes -- with some replicates absent (unequal R per item),
ties between options, and readouts that are missing; `write` stores them as
a run directory (`otbench.analysis.measurement._horizon_run.write_run`). The tests'
twins compute their expectations from the same arrays.
"""

import dataclasses

import numpy as np
from otbench.analysis.measurement._horizon_run import LETTERS, write_run


@dataclasses.dataclass
class Synth:
    arms: tuple[str, ...]
    items: list[tuple[str, str]]
    gold: np.ndarray            # [item]
    n_opt: np.ndarray           # [item]
    obs: np.ndarray             # [arm, item, rep]
    L: np.ndarray
    fin: np.ndarray
    letter: np.ndarray          # natural answer letter index, -1 unparsed
    horizons: tuple[int, ...]
    checkpoints: tuple[int, ...]
    stop: dict                  # ctx -> (avail[a,i,r,h], logp[a,i,r,h,O], cont_avail, cont_correct)
    term: dict                  # ctx -> (avail[a,i,r], logp[a,i,r,O])
    matched: tuple | None       # (lower, upper, avail[i,r], logp[i,r,O])
    control_h: tuple[int, ...]
    control: dict               # variant -> (avail[a,i,r,hc], logp[...,O])

    @property
    def y(self):
        return (self.letter == self.gold[None, :, None]).astype(np.int8)


def _logp(rng, shape, O):
    # values on a coarse grid so that ties between options occur
    v = np.log(rng.integers(1, 6, size=shape + (O,)) / 20.0)
    return np.where(rng.random(shape + (O,)) < 0.03, -np.inf, v)


def random_run(seed: int, *, A=2, I=5, R=3, O=4, horizons=(0, 64, 128, 512), groups=("G1",),
               missing=0.15, controls=True, matched=True) -> Synth:
    rng = np.random.default_rng(seed)
    items = [(groups[i % len(groups)], f"q{i}") for i in range(I)]
    n_opt = rng.integers(2, O + 1, size=I)
    n_opt[0] = O
    gold = np.array([rng.integers(0, n) for n in n_opt])
    obs = rng.random((A, I, R)) >= missing
    obs[:, :, 0] = True                  # every item keeps one replicate in every arm
    L = rng.integers(0, 700, size=(A, I, R))
    L[rng.random((A, I, R)) < 0.2] = 64  # ties with a horizon: L <= B counts as finished by B
    fin = rng.random((A, I, R)) < 0.7
    letter = np.where(rng.random((A, I, R)) < 0.8, rng.integers(0, 2, size=(A, I, R)), -1)
    letter = np.minimum(letter, n_opt[None, :, None] - 1)
    H = len(horizons)
    stop = {}
    for ctx in ("policy", "common"):
        av = obs[..., None] & (rng.random((A, I, R, H)) > 0.05)
        cav = av & (rng.random((A, I, R, H)) > 0.1)
        stop[ctx] = (av, _logp(rng, (A, I, R, H), O), cav, rng.random((A, I, R, H)) < 0.5)
    term = {ctx: (obs.copy(), _logp(rng, (A, I, R), O)) for ctx in ("policy", "common")}
    m = None
    if matched and A >= 2:
        av = obs[1] & obs[0] & fin[1] & (rng.random((I, R)) > 0.2)
        m = ("a1", "a0", av, _logp(rng, (I, R), O))
    ch = tuple(b for b in horizons if b > 0)[:2]
    ctl = {}
    if controls:
        for v in ("random", "swap", "shuffle"):
            av = np.zeros((A, I, R, len(ch)), bool)
            av[0] = obs[0][..., None] & (L[0][..., None] > np.array(ch)) & (rng.random((I, R, len(ch))) > 0.1)
            ctl[v] = (av, _logp(rng, (A, I, R, len(ch)), O))
    return Synth(tuple(f"a{k}" for k in range(A)), items, gold, n_opt, obs, L, fin, letter,
                 tuple(horizons), tuple(horizons), stop, term, m, ch, ctl)


def _row(s: Synth, a, i, r, **kw):
    g, q = s.items[i]
    return {"arm": s.arms[a], "group": g, "question": q, "replicate": int(r), **kw}


def _read(s: Synth, i, logp, cont=None, **kw):
    lp = [float(x) for x in logp[:s.n_opt[i]]]
    arg = int(np.argmax(lp)) if np.isfinite(max(lp)) else None
    out = {"logp": lp, "M": float(np.exp(lp).sum()), "argmax": None if arg is None else LETTERS[arg],
           "correct": arg == s.gold[i], "input_sha256": "0" * 64, **kw}
    if cont is not None:
        out |= {"cont": [], "cont_letter": LETTERS[s.gold[i]] if cont else None, "cont_correct": bool(cont),
                "cont_status": "ok" if cont else "no_answer"}
    return out


def write(s: Synth, path) -> None:
    A, I, R = s.obs.shape
    trajs, reads = [], []
    for a in range(A):
        for i in range(I):
            for r in range(R):
                if not s.obs[a, i, r]:
                    continue
                lt = None if s.letter[a, i, r] < 0 else LETTERS[s.letter[a, i, r]]
                trajs.append(_row(s, a, i, r, model="m", dataset="d", seed=0,
                                  gold=LETTERS[s.gold[i]], n_options=int(s.n_opt[i]), scripted=False,
                                  prompt=[1], thinking=[5] * int(s.L[a, i, r]), L=int(s.L[a, i, r]),
                                  finished=bool(s.fin[a, i, r]), stop_id=None, answer=[],
                                  answer_letter=lt, y=int(s.y[a, i, r]), y_status="ok"))
                for ctx, (av, lp, cav, cc) in s.stop.items():
                    for h, B in enumerate(s.horizons):
                        if av[a, i, r, h]:
                            done = bool(s.fin[a, i, r] and s.L[a, i, r] <= B)
                            reads.append(_row(s, a, i, r, **_read(
                                s, i, lp[a, i, r, h], cc[a, i, r, h] if cav[a, i, r, h] else None,
                                context=ctx, kind="stop", variant="", B=B,
                                length=int(min(B, s.L[a, i, r])), terminal=done)))
                for ctx, (av, lp) in s.term.items():
                    if av[a, i, r]:
                        reads.append(_row(s, a, i, r, **_read(
                            s, i, lp[a, i, r], True, context=ctx, kind="terminal", variant="",
                            B=int(s.L[a, i, r]), length=int(s.L[a, i, r]), terminal=bool(s.fin[a, i, r]))))
                for v, (av, lp) in s.control.items():
                    for h, B in enumerate(s.control_h):
                        if av[a, i, r, h]:
                            reads.append(_row(s, a, i, r, **_read(
                                s, i, lp[a, i, r, h], None, context="policy", kind="control", variant=v,
                                B=B, length=B, terminal=False)))
    if s.matched is not None:
        lower, upper, av, lp = s.matched
        c, h = s.arms.index(lower), s.arms.index(upper)
        for i in range(I):
            for r in range(R):
                if av[i, r]:
                    ell = int(s.L[c, i, r])
                    reads.append(_row(s, h, i, r, **_read(
                        s, i, lp[i, r], True, context="common", kind="matched", variant=lower, B=ell,
                        length=int(min(ell, s.L[h, i, r])), terminal=False)))
    man = {"model": "m", "arms": [{"name": a} for a in s.arms], "common_arm": s.arms[0],
           "checkpoints": list(s.checkpoints),
           "matched": [] if s.matched is None else [{"lower": s.matched[0], "upper": s.matched[1]}]}
    write_run(path, man, trajs, reads)
