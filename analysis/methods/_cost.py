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

at most ``max_decisions`` of them (None: no limit), and, when ``at`` names a
signal, only the positions where that signal is non-zero (ThinkBrake checks
only where the text ends with ``.\n\n``). A DR or FB method decides once per
trajectory before thinking, so it pays one decision. A method that declares
nothing pays 0 and its result says "undeclared".

**Partial-block prefill.** A decision that sends a probe request (a declared
prefill, decoded tokens or a recorded cost) forks from the prefix the
trajectory holds in vLLM's prefix cache. vLLM caches whole blocks of
``block`` tokens (`KV_BLOCK`, 16 on a GPU); the prefix's partial last block is
not shared, so the probe recomputes it: ``(prompt + L(j)) mod block`` more
prefill tokens at position `j` (on average `(block - 1) / 2` = 7.5). The
prompt's length is read from the optional per-position signal
``prompt_tokens`` when the set records it; a set without it counts the
thinking's `L(j)` alone (the net section says which). ``block = 1`` charges
no partial block.
"""

import dataclasses
from typing import Any

import numpy as np
from otbench.errors import ArgumentError


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
    at: str | None = None       # signal whose non-zero positions are the only paid decisions

    @property
    def forks(self) -> bool:
        """Whether a decision sends a probe request (and so recomputes the prefix's partial block)."""
        return bool(self.prefill or self.decoded or self.recorded is not None)

    def to_json(self, recorded_used: bool | None = None) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        if recorded_used is not None:
            out["decoded_from"] = f"signal.{self.recorded}" if recorded_used else "declared"
        return out


NO_SIGNAL = SignalCost(note="no per-decision signal")
KV_BLOCK = 16
"""vLLM's KV-cache block size on a GPU, in tokens: the prefix cache shares whole blocks only."""
PROMPT_SIGNAL = "prompt_tokens"
"""The optional per-position signal holding a trajectory's prompt length in tokens."""


def declared_cost(method: Any) -> SignalCost | None:
    c = getattr(method, "signal_cost", None)
    return c if isinstance(c, SignalCost) else None


def partial_block(ms: Any, block: int = KV_BLOCK) -> np.ndarray:
    """int64[traj, K] the prefix's partial last block at each position: ``(prompt + L) mod block``."""
    if not isinstance(block, (int, np.integer)) or isinstance(block, bool) or block < 1:
        raise ArgumentError(f"block must be a positive number of tokens, got {block!r}")
    prefix = np.asarray(ms.L, dtype=np.int64)
    if PROMPT_SIGNAL in ms.signals:
        prefix = prefix + np.rint(np.asarray(ms.signals[PROMPT_SIGNAL])).astype(np.int64)
    return prefix % int(block)


def signal_tokens(ms: Any, strategy: str, cost: SignalCost | None, k: np.ndarray, *,
                  block: int = KV_BLOCK) -> np.ndarray:
    """int64[traj] signal tokens of each trajectory stopped at `k` (module docstring).

    `block`: the KV-cache block size whose partial last block a probe recomputes (`KV_BLOCK`;
    1 charges none).
    """
    T = ms.num_trajectories
    if cost is None:
        return np.zeros(T, dtype=np.int64)
    per = np.full(ms.L.shape, cost.prefill + cost.flops_tokens + cost.decoded, dtype=np.int64)
    if cost.recorded is not None and cost.recorded in ms.signals:
        dec = np.rint(np.asarray(ms.signals[cost.recorded])).astype(np.int64)
        per = cost.prefill + cost.flops_tokens + dec
    if cost.forks:
        per = per + partial_block(ms, block)
    if cost.at is not None:
        per = per * (np.asarray(ms.signals[cost.at]) != 0)
    if strategy != "dee":
        return per[:, 0].copy()
    k = np.asarray(k, dtype=np.int64)
    last = np.minimum(k, ms.n.astype(np.int64) - 1) if cost.paid == "asked" else k - 1
    j = np.arange(ms.L.shape[1])[None, :]
    mask = (j >= cost.first) & (j <= last[:, None])
    if cost.max_decisions is not None:
        mask &= np.cumsum(mask, axis=1) <= cost.max_decisions
    return (per * mask).sum(axis=1).astype(np.int64)
