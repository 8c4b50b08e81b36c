"""What a method's signal costs, in tokens of the reasoning model (docs/rules.md).

A method declares ``signal_cost`` (a `SignalCost`); the evaluator adds the
tokens it implies to the retained thinking tokens for the *net* point, while
the gross point keeps the paper's rule (thinking tokens only). The oracle
frontier needs no signal and is the same for both.

Per paid decision the cost is ``prefill + flops_tokens + decoded``, where
``decoded`` is read per position from the recorded signal ``recorded`` when
the set has it (the probe's decoded answer-span length), else the declared
``decoded``. Which positions are paid (a DEE method):

* ``paid = "asked"``: every boundary the method was asked at, from
  ``first`` on: `j = first .. min(k, n - 1)` for a stop at `k`;
* ``paid = "before_stop"``: the signal is taken on the prefix before the
  next chunk is decoded (Dynasor-CoT's probe), so a stop at `k` paid for
  positions `first .. k - 1`;

at most ``max_decisions`` of them (None: no limit). A DR or FB method
decides once per trajectory before thinking, so it pays one decision. A
method that declares nothing pays 0 and its result says "undeclared".
"""

import dataclasses
from typing import Any

import numpy as np


@dataclasses.dataclass(frozen=True)
class SignalCost:
    """Per-decision signal cost, in reasoning-model tokens (module docstring)."""

    prefill: int = 0            # prompt tokens not served by the prefix cache
    decoded: int = 0            # decoded tokens (declared; `recorded` overrides per position)
    flops_tokens: int = 0       # a helper model's compute as reasoning-model tokens by FLOPs
    recorded: str | None = None  # signal holding the decoded tokens per position
    paid: str = "asked"         # "asked" | "before_stop"
    first: int = 0
    max_decisions: int | None = None
    note: str = ""

    def to_json(self, recorded_used: bool | None = None) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        if recorded_used is not None:
            out["decoded_from"] = f"signal.{self.recorded}" if recorded_used else "declared"
        return out


NO_SIGNAL = SignalCost(note="no per-decision signal")


def declared_cost(method: Any) -> SignalCost | None:
    c = getattr(method, "signal_cost", None)
    return c if isinstance(c, SignalCost) else None


def signal_tokens(ms: Any, strategy: str, cost: SignalCost | None, k: np.ndarray) -> np.ndarray:
    """int64[traj] signal tokens of each trajectory stopped at `k` (module docstring)."""
    T = ms.num_trajectories
    if cost is None:
        return np.zeros(T, dtype=np.int64)
    per = np.full(ms.L.shape, cost.prefill + cost.flops_tokens + cost.decoded, dtype=np.int64)
    if cost.recorded is not None and cost.recorded in ms.signals:
        dec = np.rint(np.asarray(ms.signals[cost.recorded])).astype(np.int64)
        per = cost.prefill + cost.flops_tokens + dec
    if strategy != "dee":
        return per[:, 0].copy()
    k = np.asarray(k, dtype=np.int64)
    last = np.minimum(k, ms.n.astype(np.int64) - 1) if cost.paid == "asked" else k - 1
    j = np.arange(ms.L.shape[1])[None, :]
    mask = (j >= cost.first) & (j <= last[:, None])
    if cost.max_decisions is not None:
        mask &= np.cumsum(mask, axis=1) <= cost.max_decisions
    return (per * mask).sum(axis=1).astype(np.int64)
