"""The macro chain and the exact frontier read-out, shared by the gross and the net points (docs/rules.md).

Both are exact: cells weigh `1 / (models x cells of the model)` as exact
fractions, and the frontier is read at an integer token cost without
interpolation.
"""

from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from ._areas import share


def chain(weights: Sequence[Fraction], per: Sequence[Fraction]) -> Fraction:
    """The equal-weight macro of per-cell values (mean over a model's cells, then over models)."""
    return sum((wc * v for wc, v in zip(weights, per)), Fraction(0))


def frontier_at(pareto: tuple[np.ndarray, np.ndarray], cost: int) -> int:
    """The largest Pareto reward whose minimum cost is `<= cost` (`pc[0] = 0`: never index -1)."""
    pc, pr = pareto
    return int(pr[np.searchsorted(pc, cost, side="right") - 1])


def area_summary(weights: Sequence[Fraction], areas: Sequence[Any]) -> dict[str, Any]:
    """Macro ``gap_area``, ``gap_area_full`` and ``realized_share`` of the cells' exact areas."""
    return {"gap_area": float(chain(weights, [a.gap for a in areas])),
            "gap_area_full": float(chain(weights, [a.gap_full for a in areas])),
            "realized_share": share(chain(weights, [a.realized for a in areas]),
                                    chain(weights, [a.gain for a in areas]))}
