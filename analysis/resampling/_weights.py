"""The bootstrap's draw as multiplicities: how often each trajectory is drawn per replicate.

The same two-stage paired draw as `bootstrap` (docs/rules.md "The
bootstrap"; `_draws.occurrence_items`, SplitMix64 counter-based): replicate
`i` of seed `s` draws here exactly the trajectories it draws there, so a
statistic computed from these multiplicities is paired with every interval
`otbench bootstrap` prints for the same seed. A caller that needs sums over
the drawn trajectories of arbitrary per-trajectory values (an accuracy at
each of many token caps, say) reads them as `weights @ values`.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
from otbench.analysis.measurement import MeasurementSet
from otbench.analysis.overthinking import build_layout
from otbench.errors import ArgumentError

from ._draws import Tables, occurrence_items, resampling

WEIGHT_BATCH = 32
"""Replicates drawn per jitted call (bounds the drawn rows in flight; never changes a weight)."""


def replicate_weights(ms: MeasurementSet, replicates: int, seed: int,
                      batch: int = WEIGHT_BATCH) -> np.ndarray:
    """int[replicates, traj] multiplicity of every trajectory in each bootstrap replicate.

    Replicate `i` is replicate `i` of `bootstrap(ms, seed=seed)`: per group the
    questions drawn with replacement (one draw shared by every model), then
    each drawn (model, question)'s trajectories with replacement. The dtype is
    int16 when no multiplicity can reach 2**15 (at most `Q_g x R` draws of one
    trajectory), else int32.
    """
    if not isinstance(replicates, (int, np.integer)) or isinstance(replicates, bool) or replicates < 1:
        raise ArgumentError(f"`replicates` must be an integer >= 1, got {replicates!r}")
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool) or not 0 <= seed < 2**64:
        raise ArgumentError(f"`seed` must be an integer in [0, 2**64), got {seed!r}")
    T = ms.num_trajectories
    layout, names = build_layout(ms)
    res = resampling(ms, layout, names)
    most = max([n for _, n in res.group_slots], default=1) * res.rmax
    dtype = np.int16 if most < 2**15 else np.int32
    out = np.zeros((int(replicates), T), dtype=dtype)
    kernel = _counts_kernel(res.slots, res.models, res.rmax, res.words_per_replicate, T,
                            np.dtype(dtype).name)
    seed_d = jnp.asarray(int(seed), dtype=jnp.uint64)
    B = max(1, min(int(batch), int(replicates)))
    for start in range(0, int(replicates), B):
        k = min(B, int(replicates) - start)
        reps = np.arange(start, start + B, dtype=np.uint64)         # padded: one compiled shape
        out[start:start + k] = np.asarray(kernel(jnp.asarray(reps), seed_d, res.tables))[:k]
    return out


@functools.cache
def _counts_kernel(slots: int, models: int, rmax: int, words_per_replicate: int, T: int,
                   dtype: str):
    statics = dict(slots=slots, models=models, rmax=rmax, words_per_replicate=words_per_replicate)

    def _counts(rep, seed, t: Tables):
        _, items = occurrence_items(rep, seed, t, **statics)
        rows = t.rows[items].reshape(-1)          # global row of every draw, -1 for none
        # A draw of no row lands on the extra slot T, dropped below.
        return jnp.zeros(T + 1, dtype=dtype).at[jnp.where(rows >= 0, rows, T)].add(1)[:T]

    return jax.jit(jax.vmap(_counts, in_axes=(0, None, None)))
