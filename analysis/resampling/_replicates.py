"""The bootstrap's replicate axis: the metrics it resamples, in order, and the percentile rule
of every interval drawn from replicates (NaN: undefined in a replicate; +inf: "never")."""

from collections.abc import Sequence

import numpy as np

from ._summaries import SUMMARY_METRICS

KERNEL_METRICS = ("or", "ad", "full_acc", "tokens", "endpoint_acc")
"""The metrics of the main replicate kernel (linear in the draws), in its sums' order."""
BOOT_METRICS = KERNEL_METRICS + SUMMARY_METRICS
"""Bootstrapped metrics (the keys of `overthinking.METRICS`, same order): the metric axis."""


def percentile(x: np.ndarray, q: Sequence[float]) -> np.ndarray:
    """Percentiles over axis 0, linear interpolation (`numpy.percentile`'s default).

    NaN marks an undefined replicate and is left out (per column); +inf is a
    value ("never"): an interpolation that touches it is +inf. A column
    without defined replicates gives NaN.

    Returns:
      float64[len(q), ...].
    """
    x = np.sort(np.asarray(x, dtype=np.float64), axis=0)           # NaN sorts last
    n = np.sum(~np.isnan(x), axis=0)
    out = []
    for p in q:
        h = (n - 1) * (p / 100.0)
        lo = np.floor(h).astype(np.int64)
        hi = np.ceil(h).astype(np.int64)
        t = h - lo
        a = np.take_along_axis(x, np.maximum(lo, 0)[None], axis=0)[0]
        b = np.take_along_axis(x, np.maximum(hi, 0)[None], axis=0)[0]
        with np.errstate(invalid="ignore"):
            v = np.where(t == 0, a, np.where(np.isinf(b), np.inf, a + (b - a) * t))
        out.append(np.where(n > 0, v, np.nan))
    return np.stack(out, axis=0)
