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
