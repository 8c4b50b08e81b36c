"""One benchmark group of a horizon run, sliced for the matched-horizon analysis (docs/rules.md).

Definitions, for arm `z`, item `i`, replicate `r`, horizon `B` (token counts
in the source model's tokenizer):

* survival `S(B) = P(L > B)`; a run is *finished by B* when it ended by
  itself with `L <= B` (a run cut at the thinking limit never finishes:
  its forced answer at the limit stands in for its answer, so choose
  horizons up to the limit);
* correct completion by the deadline `K(B) = 1{finished by B} y` (a
  readout of its own for paired contrasts, "completion");
* terminal-aware accuracy (policy context) `T(B) = y` when finished by `B`,
  else the readout of the reasoning cut at `B` under the arm's own prompt;
* survivor-only accuracy: the readout among runs with `L > B`;
* common-context accuracy: the readout under the common arm's prompt for
  every run, completed blocks replayed (no natural answers);
* behavioural (continuation) accuracy: `T(B)` with the greedy generated
  answer in place of the candidate-logit argmax.

`Group.outcome` gives these outcome grids `[item, rep, horizon]` with their
availability; `Group.boot` bootstraps stacks of them over the group's items
(`_inference.bootstrap`; weights drawn once per scheme and reused).
"""

import dataclasses
from collections.abc import Sequence
from typing import Any

import jax.numpy as jnp
import numpy as np
from otbench.analysis.measurement import HorizonRun, Readouts

from otbench.errors import OtbenchError

from . import _inference as inf
from . import _kernels as K
from otbench.errors import ArgumentError

SCHEMA = "otbench.horizon/1"
STRATA = ("both_active", "only_a_finished", "only_b_finished", "both_finished")
READOUTS = ("policy", "common", "continuation")
CONTRAST_READOUTS = (*READOUTS, "completion")
"""Contrasts also pair correct completion by the deadline (Table A8a), readout-context invariant."""
TAIL = 1e-4
DENSE_SPAN = 512
ACTIVE_SPAN = 128


class HorizonAnalysisError(OtbenchError, ValueError):
    """A request the run cannot answer (unknown arm, horizon not read out, ...)."""


@dataclasses.dataclass(frozen=True)
class Settings:
    """Analysis settings (recorded in the result).

    `scheme` resamples every primary interval ("item", or "nested" for
    designs with item-specific replicates); `direct` are contrasts reported
    from the same draws outside the simultaneous family; `diagonal` pairs
    of (arm, announced horizon) give the matching-number statistic.
    """

    contrasts: tuple[tuple[str, str], ...]
    horizons: tuple[int, ...]
    replicates: int
    seed: int
    two_way: bool
    batch: int
    tail: float
    scheme: str = "item"
    direct: tuple[tuple[str, str], ...] = ()
    diagonal: tuple[tuple[tuple[str, int], tuple[str, int]], ...] = ()


def _pairs(run: HorizonRun, contrasts) -> tuple[tuple[str, str], ...]:
    pairs = []
    for c in contrasts:
        if isinstance(c, str):
            c = tuple(s.strip() for s in c.split(","))
        if len(c) != 2 or c[0] == c[1]:
            raise HorizonAnalysisError(f"a contrast must name two different arms 'A,B', got {c!r}")
        for a in c:
            run.arm(a)
        pairs.append((str(c[0]), str(c[1])))
    return tuple(pairs)


def _diagonal(run: HorizonRun, spec, hs) -> tuple:
    """Parse diagonal specs: "X:512,Y:2048" or ((X, 512), (Y, 2048)); arms known, horizons analysed."""
    out = []
    for d in spec:
        if isinstance(d, str):
            try:
                d = tuple((a.strip(), int(h)) for a, h in (p.rsplit(":", 1) for p in d.split(",")))
            except ValueError:
                raise HorizonAnalysisError(f"a diagonal must read 'ARM:H,ARM:H', got {d!r}") from None
        d = tuple((str(a), int(h)) for a, h in d)
        if len(d) != 2 or d[0][0] == d[1][0] or d[0][1] == d[1][1]:
            raise HorizonAnalysisError(f"a diagonal names two arms announcing two different horizons, got {d!r}")
        for a, h in d:
            run.arm(a)
            if h not in hs:
                raise HorizonAnalysisError(f"diagonal horizon {h} is not among the analysed horizons {list(hs)}")
        out.append(tuple(sorted(d, key=lambda ah: ah[1])))
    return tuple(out)


def _budget(run: HorizonRun, replicates: int, batch: int) -> None:
    """The resource budget of the bootstrap, before anything is drawn: the resampler keeps every
    replicate's item and replicate weights (8 bytes each, the two-way scheme's too) and each
    statistic's draws; a batch holds its weights and kernel temporaries (~4 copies)."""
    from otbench.resources import check_budget

    words = 2 * (len(run.items) + max(int(run.R), 1))
    what = f"the matched-horizon bootstrap of {len(run.items)} items x {run.R} replicates"
    per_batch = 4 * 8.0 * words * max(len(run.arms), 1)
    check_budget(what, "`batch`", batch, per_unit=per_batch, unit="replicate per kernel call",
                 advice="use a smaller --batch")
    check_budget(what, "`replicates`", replicates, per_unit=8.0 * (words + 64),
                 fixed=per_batch * min(batch, replicates), unit="replicate",
                 advice="use fewer --replicates")


def settings_iv(run: HorizonRun, contrasts, horizons, replicates, seed, two_way, batch,
                tail, scheme="item", direct=(), diagonal=()) -> Settings:
    """Validated `Settings` of a request on `run`; HorizonAnalysisError names the bad argument."""
    pairs = _pairs(run, contrasts)
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
    if scheme not in ("item", "nested"):
        raise HorizonAnalysisError(f"`scheme` must be 'item' or 'nested', got {scheme!r}")
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise HorizonAnalysisError(f"`batch` must be a positive integer, got {batch!r}")
    _budget(run, replicates, batch)
    return Settings(pairs, hs, replicates, seed, bool(two_way), int(batch), float(tail), scheme,
                    _pairs(run, direct), _diagonal(run, diagonal, hs))


# -- per-readout quantities ------------------------------------------------------------------

def scores(ro: Readouts, gold: np.ndarray, valid: np.ndarray) -> dict[str, np.ndarray]:
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


def terminal_outcome(obs: np.ndarray, done: np.ndarray, y: np.ndarray, stopped: np.ndarray | None = None,
                     stopped_ok: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(x, a) of the horizon readouts: the natural outcome `y` once finished by the deadline, else
    the readout at the stop (`stopped`, defined where `stopped_ok`).

    Without a stopped readout it is the correct completion by the deadline `1{done}·y` over
    every observed run (an unfinished run counts wrong: the worst case); with one it is the
    terminal-aware accuracy over the runs that finished or have a readout. Shared by the
    horizon analysis (`Group.outcome`) and the log audit (`_audit`).
    """
    if stopped is None:
        return (done * y).astype(np.float64), np.broadcast_to(obs, done.shape)
    x = np.where(done, y, stopped)
    return x.astype(np.float64), obs & (done | stopped_ok)


def summ(est: float, draws: np.ndarray) -> dict[str, Any]:
    e = None if not np.isfinite(est) else float(est)
    return {"estimate": e, "ci": inf.interval(draws) if e is not None else None}


def stack(parts: Sequence[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
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

class Group:
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
            self.stop[ctx] = (sub, scores(sub, self.gold, self.valid))
        self.term = {ctx: (Readouts(*(f[:, sel] for f in ro)),
                           scores(Readouts(*(f[:, sel] for f in ro)), self.gold, self.valid))
                     for ctx, ro in run.terminal.items()}
        self._res: dict[str, inf.Resampler] = {}

    def boot(self, x: np.ndarray, a: np.ndarray, scheme: str | None = None) -> inf.Boot:
        """Bootstrap of stacked statistics over this group's items (weights drawn once per scheme).

        `scheme` defaults to the primary one of the settings.
        """
        scheme = scheme or self.st.scheme
        if scheme not in self._res:
            self._res[scheme] = inf.Resampler(self.sel.size, self.run.R, replicates=self.st.replicates,
                                              seed=self.st.seed, scheme=scheme, batch=self.st.batch)
        return inf.bootstrap(x, a, resampler=self._res[scheme])

    def pooled_ratio(self, num: np.ndarray, den: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(estimate[k], draws[rep, k]) of pooled pair means `Σ num[..., k] / Σ den[..., k]` over resampled items.

        `num`, `den` `[item, rep, k]` are per-pair sums (0 where no pair).
        Item totals are bootstrapped as item means on the primary weights
        (under the nested scheme, per replicate slot), so their ratio is the
        pooled mean in the estimate and in every replicate; NaN where a
        replicate has no pair.
        """
        k = num.shape[-1]
        if self.st.scheme == "nested":
            x = np.concatenate([num, den], axis=-1)
            a = np.ones(x.shape, dtype=bool)
        else:
            x = np.concatenate([num.sum(axis=1), den.sum(axis=1)], axis=-1)[:, None, :]
            a = np.tile(den.sum(axis=1) > 0, 2)[:, None, :]
        b = self.boot(x, a)
        with np.errstate(invalid="ignore", divide="ignore"):
            est = np.where(b.estimate[k:] > 0, b.estimate[:k] / b.estimate[k:], np.nan)
            draws = np.where(b.draws[:, k:] > 0, b.draws[:, :k] / b.draws[:, k:], np.nan)
        return est, draws

    # per-arm outcome grids [item, rep, horizon]
    def done(self, z):
        """Finished by `B`: bool[item, rep, horizon]."""
        return self.fin[z][..., None] & (self.L[z][..., None] <= self.H[None, None, :])

    def active(self, z):
        """Still reasoning at `B` (`L > B`): bool[item, rep, horizon]."""
        return self.L[z][..., None] > self.H[None, None, :]

    def outcome(self, z: int, readout: str) -> tuple[np.ndarray, np.ndarray]:
        """(x, a)[item, rep, horizon] of arm `z` under `readout` (module docstring)."""
        obs = self.obs[z][..., None]
        done = self.done(z)
        y = self.y[z][..., None]
        if readout == "completion":
            return terminal_outcome(obs, done, y)
        if readout == "common":
            ro, sc = self.stop["common"]
            return sc["correct"][z].astype(np.float64), obs & sc["ok"][z]
        ro, sc = self.stop["policy"]
        if readout == "policy":
            return terminal_outcome(obs, done, y, sc["correct"][z], sc["ok"][z])
        if readout == "continuation":
            return terminal_outcome(obs, done, y, ro.cont_correct[z], ro.cont_avail[z])
        raise ArgumentError(readout)

    def has_readout(self, readout: str) -> bool:
        """Whether the run holds any readout of this kind for the group."""
        if readout == "completion":
            return True
        if readout == "continuation":
            return "policy" in self.stop and bool(self.stop["policy"][0].cont_avail.any())
        return readout in self.stop and bool(self.stop[readout][0].avail.any())
