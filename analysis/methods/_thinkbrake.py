"""ThinkBrake as its code has it (``thinkbrake``; docs/rules.md, "ThinkBrake's own rule").

Restated from ssangjun706/ThinkBrake, commit 8cc7ed4, ``thinkbrake/func/handler.py``,
``run_thinkbrake_step`` (lines 8-134):

* the thinking is decoded in chunks, each stopped at the first ``.\\n\\n`` or the
  thinking-end token (lines 58-63); a chunk that ends on the end token ends the
  thinking (lines 72-74), one that ends at its token budget continues (lines
  76-78). So ThinkBrake checks *only* where a ``.\\n\\n`` occurs;
* at a check the state is the text so far *without* the ``.\\n\\n`` (the stop
  string is not part of the chunk), and it forks twice (line 83): fork 0 appends
  the ``.\\n\\n`` and decodes one token with the run's own sampling parameters,
  reading that token's log-probability (lines 84-92, 104-106:
  ``output_token_logprobs[-1]``); fork 1 appends ``.\\n`` and the end token
  (``closing_token`` = ``prefix_token + eot_token``, line 38; ``prefix_token`` is
  ``.\\n`` for both handlers, lines 323 and 370) and decodes nothing, reading the
  end token's log-probability as an input token (lines 94-102, 108-110:
  ``input_token_logprobs[-1]``). Two contexts: the sampled token is read after
  ``.\\n\\n``, the end token after ``.\\n``;
* it stops when ``sampled - end <= threshold`` (line 112): it appends ``.\\n``,
  the end token and ``\\n\\n`` (``closing_sequence``, line 39) and decodes the
  answer (lines 117-118, 127-132); else it appends the ``.\\n\\n`` and goes on
  (line 120).

Restated on recorded boundaries: at boundary `k < n` where the thinking so far
ends with ``.\\n\\n`` (signal ``thinkbrake_check`` = 1) stop when
``thinkbrake_margin <= θ`` (the sampled token's log-probability after the text
+ ``.\\n\\n`` minus the end token's after the text + ``.\\n``). Nothing is learned;
the train split places the default `θ` sweep. Cost per check: the one decoded
token of fork 0 plus the prefill of the appended texts (``.\\n\\n`` on fork 0,
``.\\n`` and the end token on fork 1: declared 3 tokens, one each in the
Qwen3 and DeepSeek-R1 vocabularies), plus the prefix's partial KV block
(`_cost`); positions that are not checks cost nothing.

A set without the two signals is refused in one line: they need ThinkBrake's own
two forks, which the probe sends only when the job lists ``probe.field_probes =
["thinkbrake"]`` (its ``margin`` reads one context, the rule `ThinkBrakeOneContext`
scores); a synthetic set draws them (`otbench.analysis.measurement.add_peer_signals`).
"""

from typing import Any

import numpy as np
from otbench.analysis.measurement import MeasurementSet
from otbench.errors import ArgumentError

from ._baselines import _grid_between
from ._cost import SignalCost

CHECK_SIGNAL = "thinkbrake_check"
MARGIN_SIGNAL = "thinkbrake_margin"
PREFILL_TOKENS = 3       # '.\n\n' on fork 0; '.\n' and the end token on fork 1 (declared)
SOURCE_THRESHOLDS = (0.1, 0.25, 1.0, 2.5, 5.0)
"""The thresholds the source's published runs use (its ``outputs/*/thinkbrake/threshold_*``)."""


class ThinkBrake:
    """ThinkBrake's own rule: at a ``.\\n\\n``, stop when sampled-token minus end-token log-prob `<= θ`."""

    name = "thinkbrake"
    strategy = "dee"
    summary = ("ThinkBrake as its code has it: at a '.\\n\\n' boundary, stop when the sampled "
               "token's log-prob minus the end token's (read after '.\\n') is <= theta "
               "(signals thinkbrake_check, thinkbrake_margin)")
    online = None            # the online controller does not send ThinkBrake's two forks
    signals = (CHECK_SIGNAL, MARGIN_SIGNAL)
    signal_cost = SignalCost(prefill=PREFILL_TOKENS, decoded=1, paid="asked", at=CHECK_SIGNAL,
                             note="ThinkBrake's two forks per '.\\n\\n' check: one sampled token + "
                                  "the prefill of '.\\n\\n', '.\\n' and the end token")

    def __init__(self) -> None:
        self._train: np.ndarray | None = None

    def fit(self, train: MeasurementSet, validation: MeasurementSet) -> None:
        missing = [s for s in self.signals if s not in train.signals]
        if missing:
            raise ArgumentError(
                f"{self.name} needs the per-position signals {', '.join(missing)} (ThinkBrake's own "
                f"two-context read at '.\\n\\n', docs/rules.md; the probe records it with "
                f"probe.field_probes = [\"thinkbrake\"], "
                f"thinkbrake-onectx reads its one-context margin); the set records: "
                f"{', '.join(sorted(train.signals)) or 'none'}")
        can_stop = np.arange(train.num_positions)[None, :] < train.n[:, None]
        checked = can_stop & (np.asarray(train.signals[CHECK_SIGNAL]) != 0)
        self._train = np.asarray(train.signals[MARGIN_SIGNAL])[checked]

    def theta_grid(self, n: int) -> list[float]:
        m = self._train
        if m is None or m.size == 0:
            return list(SOURCE_THRESHOLDS)[:n] if n <= len(SOURCE_THRESHOLDS) \
                else np.linspace(-5.0, 10.0, n).tolist()
        return _grid_between(float(m.min()) - 1.0, float(m.max()) + 1.0, m, n)

    def stop(self, view, theta: float) -> np.ndarray:
        return thinkbrake_stop(view.signal(CHECK_SIGNAL), view.signal(MARGIN_SIGNAL), theta)

    def config(self) -> dict[str, Any]:
        return {"source": "ssangjun706/ThinkBrake thinkbrake/func/handler.py (commit 8cc7ed4)",
                "checks": "only where the thinking so far ends with '.\\n\\n'",
                "signals": list(self.signals)}


def thinkbrake_stop(check: np.ndarray, margin: np.ndarray, theta: float) -> np.ndarray:
    """bool[rows]: ThinkBrake stops here (a ``.\\n\\n`` check whose margin is `<= θ`, handler.py line 112)."""
    return (np.asarray(check) != 0) & (np.asarray(margin, dtype=np.float64) <= float(theta))
