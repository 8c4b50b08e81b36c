"""One cell's effort budgets: the smallest token cap within δ of full thinking (docs/rules.md).

A cap `c` (thinking tokens, the same for every request) stops each
trajectory at its latest position with `L(k) <= c` -- the FB action shared by
every question, s1's budget forcing, what an engine's per-request thinking
budget does at a step boundary. The cell's accuracy at `c` is
`sum C(k_c) / sum P` over its trajectories (pooled at probe level, as the
frontier pools a cell). It changes only where some trajectory's `C` changes,
so the candidate caps are 0 and every `L(k)` at which some `C(k) != C(k-1)`,
below the longest full thinking of the cell (a cap at or above it cuts
nothing); the smallest cap meeting any rule on accuracy is a candidate.

The sums over the drawn trajectories of a replicate are one running sum over
these events in cap order (`base + sum of w_row * dC`), taken in chunks of
events so memory stays `replicates x chunk`.
"""

import dataclasses
from collections.abc import Sequence
from fractions import Fraction

import numpy as np

CHUNK_BYTES = 1 << 26
"""Bytes of one chunk of running sums (replicates x events, int64)."""


@dataclasses.dataclass(frozen=True)
class CellArrays:
    """One cell's rows (int64): `L`, `C` [traj, pos] padded, `n`, `P` [traj]."""

    L: np.ndarray
    C: np.ndarray
    n: np.ndarray
    P: np.ndarray

    def at_cap(self, cap: int) -> tuple[np.ndarray, np.ndarray]:
        """(C(k_c), L(k_c)) per trajectory, `k_c` its latest position with `L(k) <= cap`."""
        k = np.minimum((self.L <= cap).sum(axis=1) - 1, self.n)
        r = np.arange(self.L.shape[0])
        return self.C[r, k], self.L[r, k]

    @property
    def full(self) -> tuple[np.ndarray, np.ndarray]:
        r = np.arange(self.L.shape[0])
        return self.C[r, self.n], self.L[r, self.n]


@dataclasses.dataclass(frozen=True)
class Scan:
    """What the cap scan finds for one cell.

    Attributes:
      caps: int64[cand] candidate caps, ascending.
      point_meets: bool[level, cand] the point difference is >= -δ (exact).
      lower: float64[cand] lower percentile of the replicate differences.
      first: int64[level, rep] per replicate the first candidate whose
        difference is >= -δ; -1: none; -2: the replicate drew nothing of the cell.
    """

    caps: np.ndarray
    point_meets: np.ndarray
    lower: np.ndarray
    first: np.ndarray


def events(cell: CellArrays) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(row, cap, dC) of every step `k >= 1` whose `C` changes, sorted by cap (stable)."""
    K = cell.L.shape[1]
    k = np.arange(K)[None, :]
    dC = np.zeros_like(cell.C)
    dC[:, 1:] = cell.C[:, 1:] - cell.C[:, :-1]
    ev = (k >= 1) & (k <= cell.n[:, None]) & (dC != 0)
    row, pos = np.nonzero(ev)
    cap = cell.L[row, pos]
    order = np.argsort(cap, kind="stable")
    return row[order], cap[order], dC[row, pos][order]


def scan(cell: CellArrays, W: np.ndarray, deltas: Sequence[Fraction], lower_pct: float,
         percentile) -> Scan:
    """Every candidate cap's point and replicate differences against full thinking.

    Args:
      cell: the cell's rows; W: int[rep, traj] the replicates' multiplicities.
      deltas: exact δ per level (fractions of accuracy).
      lower_pct: the interval's lower percentile; percentile: the bootstrap's
        percentile function (NaN-aware, linear).
    """
    row, cap, dc = events(cell)
    C_full, L_full = cell.full
    top = int(L_full.max(initial=0))
    caps = np.unique(np.concatenate([[0], cap]))
    caps = caps[caps < top]
    last = np.searchsorted(cap, caps, side="right") - 1            # last event within each cap
    base0, full0, probes0 = int(cell.C[:, 0].sum()), int(C_full.sum()), int(cell.P.sum())
    cum = np.concatenate([[0], np.cumsum(dc)])
    reward0 = base0 + cum[last + 1]
    point = np.array([[(int(r) - full0) * d.denominator >= -d.numerator * probes0 for r in reward0]
                      for d in deltas], dtype=bool).reshape(len(deltas), caps.size)
    Wi = np.asarray(W, dtype=np.int64)
    B = Wi.shape[0]
    base, full, probes = Wi @ cell.C[:, 0], Wi @ C_full, Wi @ cell.P
    defined = probes > 0
    thr = np.asarray([-float(d) for d in deltas])
    lower = np.full(caps.size, np.nan)
    first = np.where(defined[None, :], -1, -2).repeat(len(deltas), axis=0).astype(np.int64)

    def take(js: np.ndarray, reward: np.ndarray) -> None:      # reward: int64[rep, js]
        with np.errstate(invalid="ignore", divide="ignore"):
            d = np.where(defined[:, None], (reward - full[:, None]) / probes[:, None], np.nan)
        lower[js] = percentile(d, [lower_pct])[0]
        for i, t in enumerate(thr):
            ok = d >= t                                             # NaN: False
            new = (first[i] == -1) & ok.any(axis=1)
            first[i, new] = js[np.argmax(ok[new], axis=1)]

    none = np.flatnonzero(last < 0)                                 # caps before any event
    if none.size:
        take(none, np.repeat(base[:, None], none.size, axis=1))
    carry = base.copy()
    m = max(1, CHUNK_BYTES // (8 * max(B, 1)))
    for e0 in range(0, cap.size, m):
        e1 = min(cap.size, e0 + m)
        run = np.cumsum(Wi[:, row[e0:e1]] * dc[e0:e1][None, :], axis=1) + carry[:, None]
        lo, hi = np.searchsorted(last, [e0, e1], side="left")
        if hi > lo:
            js = np.arange(lo, hi)
            take(js, run[:, last[js] - e0])
        carry = run[:, -1]
    return Scan(caps=caps, point_meets=point, lower=lower, first=first)


def at_budget(cell: CellArrays, W: np.ndarray, cap: int, pcts: Sequence[float], percentile
              ) -> dict:
    """Point values and intervals at one cap: accuracy, difference, relative cost, tokens."""
    C_cap, L_cap = cell.at_cap(cap)
    C_full, L_full = cell.full
    P = cell.P
    acc0 = C_cap.sum() / P.sum()
    full0 = C_full.sum() / P.sum()
    Wi = np.asarray(W, dtype=np.int64)
    probes, tokens = Wi @ P, Wi @ L_full
    with np.errstate(invalid="ignore", divide="ignore"):
        acc = np.where(probes > 0, (Wi @ C_cap) / probes, np.nan)
        diff = np.where(probes > 0, (Wi @ C_cap - Wi @ C_full) / probes, np.nan)
        rel = np.where(tokens > 0, (Wi @ L_cap) / tokens, np.nan)
    iv = percentile(np.stack([acc, diff, rel], axis=1), pcts)         # [2, 3]
    return {"accuracy": float(acc0), "accuracy_interval": _pair(iv[:, 0]),
            "difference": float(acc0 - full0), "difference_interval": _pair(iv[:, 1]),
            "relative_cost": float(L_cap.sum() / L_full.sum()) if L_full.sum() else None,
            "relative_cost_interval": _pair(iv[:, 2]),
            "tokens": float(L_cap.mean()), "cost": (int(L_cap.sum()), int(L_full.sum()))}


def _pair(x: np.ndarray) -> tuple[float | None, float | None]:
    return tuple(None if not np.isfinite(v) else float(v) for v in x)
