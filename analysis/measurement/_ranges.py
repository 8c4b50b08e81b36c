"""The range table of the recorded signal columns: one rule per column, applied wherever a set is
built (import, load and `validate`, the probe, the simulator), so an out-of-range value is one
line naming its row, never a silently wrong analysis.

Columns not in the table (`margin`, a user's own signals) are only required to be numbers
without NaN (`_build`); `answer_conf` 20.1 or a positive log-probability is refused here.
"""

import numpy as np

# name -> (low, high, integer-valued, what it is); a `logp_` prefix covers every log-probability.
SIGNAL_RANGES: dict[str, tuple[float, float, bool, str]] = {
    "answer": (-1, np.inf, True, "an answer id: -1 (none extracted) or an integer >= 0"),
    "answer_conf": (0.0, 1.0, False, "a mean token probability in [0, 1]"),
    "answer_tokens": (0, np.inf, True, "a count of decoded tokens: an integer >= 0"),
    "hesitation": (0, 1, True, "binary: 0 or 1"),
    "prompt_tokens": (0, np.inf, True, "a count of prompt tokens: an integer >= 0"),
    "thinkbrake_check": (0, 1, True, "binary: 0 or 1"),
    "deepconf_min_conf": (0.0, np.inf, False, "a DeepConf confidence (a mean of negated "
                          "log-probabilities): a finite number >= 0"),
    "deepconf_warmup_conf": (0.0, np.inf, False, "a DeepConf confidence (a mean of negated "
                             "log-probabilities): a finite number >= 0"),
}
LOGP = (-np.inf, 0.0, False, "a log-probability: at most 0")


def signal_range(name: str) -> tuple[float, float, bool, str] | None:
    """The rule of signal `name`, or None when the table has none."""
    return SIGNAL_RANGES.get(name) or (LOGP if name.startswith("logp_") else None)


def out_of_range(name: str, values: np.ndarray) -> np.ndarray | None:
    """bool mask of the entries of `values` outside `name`'s range (None: no rule for it)."""
    rule = signal_range(name)
    if rule is None:
        return None
    low, high, integer, _ = rule
    v = np.asarray(values, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        bad = (v < low) | (v > high) | (v == np.inf)
        if integer:
            bad |= ~np.isfinite(v) | (v != np.floor(v))
    return bad & ~np.isnan(v)                # NaN has its own rule
