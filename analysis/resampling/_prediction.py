"""The result of a precision prediction: per-statistic variance components and the predicted widths (`_precision`).
"""

import dataclasses
import math
from collections.abc import Mapping

import numpy as np
from otbench.errors import OtbenchError



class PrecisionError(OtbenchError, ValueError):
    """A precision prediction cannot be made from this pilot or design; one line."""


def inverse_probe_fit(x: np.ndarray, y: np.ndarray, P: int) -> float:
    """A variance component at `P` probes from its values `y` at the levels `1 / x`: the least-squares
    `α + β / m` with the floor `α >= 0` (method step 5).

    Why the floor: `α` is the component's limit as the probes grow; a variance has no negative
    limit, and an unconstrained fit of a component falling like `β/m` (AD's) often gives a
    slightly negative `α`, which made `α + β/P'` negative beyond the pilot's `P`, clipped to a
    half-width of exactly 0 although every computed level had sampling noise. Where the
    unconstrained `α` is negative the fit is `β/m` through the origin (`β = Σxy / Σx²`), so a
    component that is positive at the computed levels stays positive at every `P'`."""
    beta, alpha = np.polyfit(x, y, 1)
    if alpha < 0:
        alpha, beta = 0.0, float(np.dot(x, y) / np.dot(x, x))
    return float(alpha + beta / P)


@dataclasses.dataclass(frozen=True)
class Components:
    """The estimates of one statistic at one probe level (method steps 3, 6)."""

    between: float      # b = σ_b² / Q'
    within: float       # w = σ_w² / Q'
    v1: float
    v2: float
    width: float        # hi - lo of θ12 at the reference R'
    defined: int        # replicates where θ1 and θ12 are both finite


@dataclasses.dataclass(frozen=True)
class PrecisionPrediction:
    """Predicted interval widths at `questions` (per group) for any `R'`, `P'` (method docstring).

    Attributes:
      questions: group -> planned questions `Q'_g`; reference_R: the `R'` of the stage-2 draws.
      pilot_questions, pilot_R, pilot_P: the pilot's design (`R_p` harmonic mean over segments).
      levels: probe level -> statistic -> `Components`.
      replicates, seed, percentiles: what was drawn.
      synthetic: the pilot was simulated.
    """

    questions: Mapping[str, int]
    reference_R: int
    pilot_questions: Mapping[str, int]
    pilot_R: float
    pilot_P: int
    levels: Mapping[int, Mapping[str, Components]]
    replicates: int
    seed: int
    percentiles: tuple[float, float]
    synthetic: bool

    @property
    def stats(self) -> tuple[str, ...]:
        return tuple(next(iter(self.levels.values())))

    def _harmonic(self, counts: Mapping[str, int]) -> float:
        return len(counts) / sum(1.0 / q for q in counts.values())

    def _components(self, stat: str, P: int) -> tuple[float, float]:
        if P in self.levels:
            c = self.levels[P][stat]
            return c.between, c.within
        fit = [m for m in self.levels if m >= -(-self.pilot_P // 2)]
        if P < self.pilot_P or len(fit) < 2:
            raise PrecisionError(f"P={P}: not a computed probe level ({', '.join(map(str, sorted(self.levels)))}); "
                                 "pass it in `probe_levels`")
        x = np.asarray([1.0 / m for m in fit])
        out = []
        for k in ("between", "within"):
            y = np.asarray([getattr(self.levels[m][stat], k) for m in fit])
            out.append(inverse_probe_fit(x, y, P))
        return out[0], out[1]

    def variance(self, stat: str, R: int, P: int) -> float:
        """Predicted bootstrap variance `V` of `stat` at `R' = R`, `P' = P` (method step 4; for
        `β_match` the two-component model only, which `width` does not use: step 7)."""
        b, w = self._components(stat, P)
        b, w = max(b, 0.0), max(w, 0.0)
        Q = self._harmonic(self.questions)
        return (Q - 1) / Q * b + w * ((Q - 1) / (Q * R) + (R - 1) / R ** 2)

    def width(self, stat: str, R: int, P: int) -> float:
        """Predicted interval width `hi - lo` of `stat` at `R' = R`, `P' = P` (NaN: undefined).

        `β_match` (method step 7): the width of its simulated replicates `θ12` at the reference
        `R'`, scaled by the ratio of the same strategy's area width at (`R`, `P`) to the area's
        `θ12` width."""
        top = self.levels[max(self.levels)][stat]
        if top.defined < max(2, self.replicates // 2):
            return math.nan
        if stat.startswith("beta_match_"):
            proxy = "area_" + stat[len("beta_match_"):]
            area = self.levels[max(self.levels)][proxy]
            if area.defined < max(2, self.replicates // 2):
                return math.nan
            ref, v = area.v1 + area.v2, self.variance(proxy, R, P)
            if ref <= 0:
                return top.width if v <= 0 else math.nan
            return top.width * math.sqrt(v / ref)
        ref = top.v1 + top.v2
        kappa = top.width / math.sqrt(ref) if ref > 0 else 0.0
        return kappa * math.sqrt(self.variance(stat, R, P))

    def widths(self, R: int, P: int) -> dict[str, float]:
        return {s: self.width(s, R, P) for s in self.stats}

    def at_questions(self, questions: Mapping[str, int]) -> "PrecisionPrediction":
        """The prediction at other planned question counts, without new draws.

        The components are per planned question (`b = σ_b² / Q'`, `w = σ_w² / Q'`, and `v1`, `v2`
        likewise), so at `Q''` they are scaled by `Q' / Q''` (harmonic means over groups) and the
        replicates' widths by its square root, which keeps `κ` (step 6). For the linear statistics,
        whose `v1`, `v2` are exact, and every group scaled by one factor, the variances are what
        `predict_precision` at `Q''` computes; the widths differ from it only by `κ`'s Monte Carlo
        error (new replicates at `Q''`). `β_match`'s simulated width is scaled the same way (its
        pseudo-sets are not redrawn at `Q''`)."""
        new = {g: int(questions.get(g, q)) for g, q in self.questions.items()}
        if any(q < 1 for q in new.values()):
            raise PrecisionError(f"questions: want positive counts, got {dict(questions)!r}")
        f = self._harmonic(self.questions) / self._harmonic(new)
        levels = {m: {s: dataclasses.replace(c, between=c.between * f, within=c.within * f, v1=c.v1 * f,
                                             v2=c.v2 * f, width=c.width * math.sqrt(f))
                      for s, c in comps.items()} for m, comps in self.levels.items()}
        return dataclasses.replace(self, questions=new, levels=levels)
