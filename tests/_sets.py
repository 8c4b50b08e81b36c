"""Small measurement sets for tests, built from tuples (one builder for every test module)."""

import numpy as np
from otbench.analysis import from_ragged, ragged


def build_set(trajs, synthetic=False, y=True, splits=None):
    """A set from `[(model, group, question, trajectory, probes, L, C[, y])]` tuples.

    Without an eighth field (or with `y=False`) every original answer is wrong (`y = 0`).
    """
    cols = list(zip(*trajs))
    ys = np.asarray(cols[7]) if y and len(cols) > 7 else np.zeros(len(trajs), dtype=np.int64)
    return from_ragged(model=list(cols[0]), group=list(cols[1]), question=list(cols[2]),
                       trajectory=np.asarray(cols[3]), probes=np.asarray(cols[4]),
                       L=ragged(list(cols[5]), np.int64), C=ragged(list(cols[6]), np.int64),
                       y=ys, synthetic=synthetic, split=splits)


def ragged_set(seed=0, *, groups=(("g1", ("q1", "q2", "q3")), ("g2", ("q4", "q5"))), max_r=3,
               jumps=(0, 1, 7, 30), flat=None, random_y=False, synthetic=False):
    """A random set with the SPEC §2 edge cases: 2 models x `groups`, R from 1 to `max_r`,
    P from 1 to 4, model b lacks question q2, n = 0, zero-length steps (`jumps` holds 0),
    ties; with `flat` that share of curves is flat, with `random_y` original answers are
    drawn (else all wrong). One builder for the bootstrap, frontier and kernel tests."""
    rng = np.random.default_rng(seed)
    trajs = []
    for m in ("a", "b"):
        for g, qs in groups:
            for q in qs:
                if m == "b" and q == "q2":
                    continue
                P = int(rng.integers(1, 5))
                for s in range(int(rng.integers(1, max_r + 1))):
                    n = int(rng.integers(0, 5))
                    L = np.r_[0, np.cumsum(rng.choice(list(jumps), n))].tolist()
                    if flat is not None and rng.random() < flat:
                        C = [int(rng.integers(0, P + 1))] * (n + 1)
                    else:
                        C = rng.integers(0, P + 1, n + 1).tolist()
                    trajs.append((m, g, q, s, P, L, C, int(rng.integers(0, 2)) if random_y else 0))
    return build_set(trajs, synthetic=synthetic)
