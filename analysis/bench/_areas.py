"""Exact area arithmetic of OTBench (docs/rules.md): Pareto filter, step integrals, cell areas.

A method's curve and its strategy's oracle frontier are right-continuous step
functions of integer retained tokens with integer rewards, so every area term
is an exact `Fraction` (see `_evaluate`'s module docstring, 6.); floats are
made only for the JSON summary.
"""

import dataclasses
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import numpy as np


def frac(num: int, den: int) -> Fraction:
    return Fraction(int(num), int(den)) if den else Fraction(0)


def nondominated(costs: Sequence[Fraction], accs: Sequence[Fraction]) -> list[bool]:
    """Exact Pareto filter (lower cost, higher accuracy); duplicates: the first counts."""
    out = []
    for i, (c, a) in enumerate(zip(costs, accs)):
        ok = True
        for j, (c2, a2) in enumerate(zip(costs, accs)):
            if j == i:
                continue
            if c2 <= c and a2 >= a and (c2 < c or a2 > a or j < i):
                ok = False
                break
        out.append(ok)
    return out


def step_integral(xs: np.ndarray, ys: np.ndarray, lo: int, hi: int) -> int:
    """`∫_lo^hi y(b) db` of the right-continuous step `y = ys[j]` on `[xs[j], xs[j+1])`.

    `xs` int64 ascending with `xs[0] <= lo`; the last value holds to the
    right. Integer tokens and rewards, so the result is an exact integer.
    """
    xs = np.asarray(xs, dtype=np.int64)
    ys = np.asarray(ys, dtype=np.int64)
    left = np.clip(xs, lo, hi)
    right = np.clip(np.append(xs[1:], hi), lo, hi)
    return int(np.sum(ys * (right - left), dtype=np.int64))


@dataclasses.dataclass(frozen=True)
class Areas:
    """Exact area terms of one cell (all accuracies as fractions of probes)."""

    gap: Fraction        # mean of F - M over the method's own range
    gap_full: Fraction   # mean of F - M over [0, 1]
    realized: Fraction   # ∫ (M - A0) dx over [0, 1]
    gain: Fraction       # ∫ (F - A0) dx over [0, 1]
    lo: Fraction         # the method's range (relative cost)
    hi: Fraction


def cell_areas(cost: Sequence[int], reward: Sequence[int], keep: Sequence[bool],
               pareto: tuple[np.ndarray, np.ndarray], total: int, probes: int,
               zero: int) -> Areas:
    """The area terms of one cell from its integer sweep (see the module docstring, 6.).

    Args:
      cost, reward: per `θ`, the cell's retained tokens `B_g` and correct probes.
      keep: per `θ`, whether the point is on the cell's curve (its step curve is
        `M(x) = max(A0, best kept point with cost <= x)`).
      pareto: the cell's exact frontier (min costs ascending from 0, rewards).
      total: `T_g`; probes: `Σ P`; zero: the zero-thinking reward.
    """
    on = sorted((int(cost[i]), int(reward[i])) for i, k in enumerate(keep) if k)
    pc, pr = (np.asarray(a, dtype=np.int64) for a in pareto)
    mx = np.array([0] + [c for c, _ in on], dtype=np.int64)
    # M(x) = max(A0, best curve point with cost <= x): A0 is an action of every strategy at
    # cost 0, so a curve point below it (even one at cost 0) never lowers the curve; without
    # the running maximum a cost-0 point under A0 replaced A0 and a net curve, whose costs
    # are never lower, could score a better area than its gross twin (issue 37, item 2).
    my = np.maximum.accumulate(np.array([zero] + [r for _, r in on], dtype=np.int64))
    lo, hi = on[0][0], on[-1][0]

    def gap_over(a: int, b: int) -> Fraction:
        if b == a:   # zero width: the gap at that cost
            at = np.searchsorted(pc, a, side="right") - 1
            return Fraction(int(pr[at]) - int(my[np.searchsorted(mx, a, side="right") - 1]), probes)
        return Fraction(step_integral(pc, pr, a, b) - step_integral(mx, my, a, b), (b - a) * probes)

    if total == 0:
        g = gap_over(0, 0)
        return Areas(g, g, Fraction(0), Fraction(0), Fraction(0), Fraction(0))
    den = total * probes
    return Areas(gap=gap_over(lo, hi), gap_full=gap_over(0, total),
                  realized=Fraction(step_integral(mx, my, 0, total) - zero * total, den),
                  gain=Fraction(step_integral(pc, pr, 0, total) - zero * total, den),
                  lo=Fraction(lo, total), hi=Fraction(hi, total))


def share(realized: Fraction, gain: Fraction) -> float | None:
    return float(realized / gain) if gain > 0 else None


def cell_summary(a: Areas, keep: Sequence[bool]) -> dict[str, Any]:
    return {"gap_area": float(a.gap), "gap_area_full": float(a.gap_full),
            "realized_share": share(a.realized, a.gain), "range": [float(a.lo), float(a.hi)],
            "points": len(keep), "curve_points": int(sum(keep))}
