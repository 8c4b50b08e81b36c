"""The net operating points of a method: thinking tokens plus what its signal costs (docs/rules.md).

Same exact arithmetic as the gross points (`_evaluate`, `_areas`): per cell
the net cost is the integer `B_g + S_g` (`S_g` the signal tokens of the
cell's trajectories at the method's stops, `_cost.signal_tokens`), the
accuracy is unchanged, the oracle frontier (unchanged: it needs no signal)
is read at the net cost, and the curve, areas and macro chain are computed
exactly as for the gross points. Net relative cost may exceed 1 (a signal
can cost more than the thinking it saves); areas stay over `[0, 1]`, where
a point beyond 1 adds nothing.

A decision that sends a probe request is also charged the prefix's partial
last KV block (``(prompt + L(j)) mod block``, `methods.partial_block`), which
vLLM's prefix cache does not share; ``block`` is `methods.KV_BLOCK` (16) unless
given.
"""

from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import numpy as np
from otbench.analysis.methods import KV_BLOCK, PROMPT_SIGNAL, Method, signal_tokens

from ._areas import cell_areas, frac, nondominated, share
from ._macro import area_summary, frontier_at
from ._macro import chain as macro_chain

NET_COST = ("retained thinking tokens L(k) plus the signal's declared / recorded cost per "
            "decision (prefill, decoded probe tokens, helper FLOPs as reasoning-model tokens, and "
            "for a probe request the prefix's partial last KV block)")


def net_block(test: Any, m: Method, sweep: Sequence[float], cells: Sequence[Any],
              ks: Sequence[np.ndarray], cost: np.ndarray, reward: np.ndarray,
              weights: Sequence[Fraction], block: int = KV_BLOCK) -> dict[str, Any]:
    """The ``net`` section of a bench result (module docstring); JSON data."""
    declared = m.signal_cost
    sig = np.zeros_like(cost)
    for i, k in enumerate(ks):
        s = signal_tokens(test, m.strategy, declared, k, block=block)
        for c, ct in enumerate(cells):
            sig[i, c] = int(s[ct.rows].sum())
    net = cost + sig

    def chain(per: Sequence[Fraction]) -> Fraction:
        return macro_chain(weights, per)

    per_cell, areas, cell_out = [], [], []
    for c, ct in enumerate(cells):
        front = [frontier_at(ct.pareto, net[i, c]) for i in range(len(sweep))]
        ntraj = ct.rows.size
        vals = ([frac(net[i, c], ntraj) for i in range(len(sweep))],
                [frac(net[i, c], ct.tokens) for i in range(len(sweep))],
                [frac(reward[i, c], ct.probes) for i in range(len(sweep))],
                [frac(front[i], ct.probes) for i in range(len(sweep))],
                [frac(sig[i, c], ntraj) for i in range(len(sweep))])
        keep = nondominated(vals[1], vals[2])
        per_cell.append(vals)
        areas.append(cell_areas(net[:, c], reward[:, c], keep, ct.pareto, ct.tokens,
                                ct.probes, ct.zero))
        a = areas[-1]
        cell_out.append({"model": ct.model, "group": ct.group,
                         "signal_tokens": [int(x) for x in sig[:, c]],
                         "gap_area_full": float(a.gap_full),
                         "realized_share": share(a.realized, a.gain)})
    macro = [[chain([per_cell[c][j][i] for c in range(len(cells))]) for i in range(len(sweep))]
             for j in range(5)]
    keep = nondominated(macro[1], macro[2])
    points = [{"theta": None if np.isinf(th) else float(th), "cost": float(macro[0][i]),
               "signal_cost": float(macro[4][i]), "rel_cost": float(macro[1][i]),
               "acc": float(macro[2][i]), "frontier_acc": float(macro[3][i]),
               "gap": float(macro[3][i] - macro[2][i]), "nondominated": bool(keep[i])}
              for i, th in enumerate(sweep)]
    cfg = declared.to_json(declared.recorded in test.signals if declared.recorded else None) \
        if declared is not None else {"note": "undeclared: counted as 0"}
    if declared is not None and declared.forks:
        cfg["kv_block"] = int(block)
        cfg["partial_block_prefix"] = ("prompt_tokens + L(j)" if PROMPT_SIGNAL in test.signals
                                       else "L(j): the set records no prompt_tokens")
    return {"token_cost": NET_COST, "signal_cost": cfg, "points": points,
            "summary": {**area_summary(weights, areas), "curve_points": int(sum(keep))},
            "cells": cell_out}
