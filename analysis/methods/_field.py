"""The field's own termination methods, restated on recorded boundaries (issue 27).

Each method decides at the set's step boundaries (the position grid `k`),
from the optional field signals of `otbench.analysis.measurement`
(``answer``, ``answer_conf``, ``hesitation``, ``answer_tokens``; their
definitions travel in the set's provenance), and declares what its signal
costs per decision (`_cost.SignalCost`) so OTBench can score it net of that
cost. Sources are restated from their code, never copied:

* `DynasorCoT` (DEE, ``dynasor-cot``): hao-ai-lab/Dynasor, commit 0d2f1b9,
  ``dynasor/core/cot.py``. Every `chunk_size` tokens (lines 58-67) a side
  probe is decoded on the prompt *before* that chunk (lines 69-76: the
  suffix "... Oh, I suddenly got the answer to the whole problem, **Final
  Answer** \\[ \\boxed{" of line 43, at most 20 tokens); after the chunk,
  thinking ends when the last `threshold` probe answers are all non-empty,
  all equivalent, and none of their texts contains a word of
  ``uncertain_words`` (line 5; the test at lines 121-134, with
  ``eqaul_group`` / ``count_not_empty`` of ``dynasor/core/evaluator.py``
  lines 745-762). Restated: a boundary plays a chunk; at boundary `k` stop
  when the answers at `k - θ .. k - 1` are all extracted (``answer >= 0``)
  and equal and their ``hesitation`` is 0 (`θ` = ``threshold``, the window;
  the effort levels of lines 8-19 use 2, 3, 5 and 8). Cost: one probe per
  boundary before the stop (``paid = "before_stop"``): the suffix prefill
  plus the recorded decoded answer tokens.
* `Deer` (DEE, ``deer``): iie-ycx/DEER, commit c9dd19f, ``vllm-deer.py``.
  At each reasoning transition ("Wait", line 248) a trial answer is decoded
  after "\\n**Final Answer**\\n\\boxed" (line 252; at most
  ``prob_check_max_tokens`` = 20 tokens, line 179) and its confidence is the
  arithmetic mean (``policy`` avg1, the default of line 167), geometric mean
  or minimum of its token probabilities (lines 100-147); thinking ends when
  the confidence is strictly above ``threshold`` (line 636, default 0.95,
  line 169); only the first ``max_judge_steps`` = 10 transitions are
  checked (lines 166, 396); with ``no_thinking`` = 0 (line 162) nothing is
  checked before thinking starts. Restated: a boundary plays a transition;
  at `1 <= k <= max_judge` stop when ``answer_conf > θ``. Cost per check:
  the answer-prompt prefill plus the recorded decoded answer tokens.
* `BudgetForcing` (FB, ``budget-forcing``): simplescaling/s1, commit
  77272c6, ``README.md`` "vLLM with budget forcing": one thinking-token cap
  ``MAX_TOKENS_THINKING`` for every prompt (line 87), thinking decoded with
  ``max_tokens`` set to it (lines 114-121), then the answer is forced
  (line 146; "Final Answer:" appended at the cut as in
  ``eval/lm-evaluation-harness/lm_eval/models/vllm_causallms.py`` line
  254). Restated: the same cap `θ` tokens for every question, each
  trajectory stopping at its latest boundary with `L <= θ`; no signal.
  (s1's other direction, suppressing the end of thinking with "Wait",
  lines 89 and 127-141, would need tokens that were never generated, so
  it cannot be replayed on recorded trajectories.)
* `AnswerConsistency` (DEE, ``answer-consistency``):
  launchnlp/reasoning_earlystop (answer convergence: stop once the answer
  has not changed for `θ` boundaries; restated from the rule as the issue
  states it -- no snapshot of that repository's code was available to cite
  by line). Restated: probes from `k = 1`; stop
  at `k` when the answers at `k - θ .. k` are extracted and equal (`θ`
  unchanged transitions, `k - θ >= 1`). Cost: one probe per boundary asked.
"""

from typing import Any

import numpy as np
from otbench.analysis.measurement import (
    MeasurementSet,
    consistency_stop,
    deer_stop,
    dynasor_stop,
)

from ._cost import SignalCost
from otbench.errors import ArgumentError

# Declared prefill tokens of the two probe prompts (the suffix text only: the
# prefix is served by the prefix cache). Counted by the word-piece length of
# the suffixes of Dynasor line 43 and DEER line 252; declared, not measured.
DYNASOR_SUFFIX_TOKENS = 24
DEER_PROMPT_TOKENS = 8
PROBE_CAP = 20


def _need(ms: MeasurementSet, names: tuple[str, ...], who: str) -> None:
    missing = [s for s in names if s not in ms.signals]
    if missing:
        raise ArgumentError(f"{who} needs the per-position signals {', '.join(missing)} (issue 27 "
                            f"field signals); the set records: {', '.join(sorted(ms.signals)) or 'none'}")


def _window_grid(lo: int, n: int, top: int = 16) -> list[float]:
    """`n` (at most `top - lo + 1`) distinct integer windows spread over `lo..top`."""
    return sorted({float(round(x)) for x in np.linspace(lo, top, max(1, min(n, top - lo + 1)))})


class DynasorCoT:
    """Dynasor-CoT: stop when the last `θ` probe answers agree and none hesitates (module docstring)."""

    name = "dynasor-cot"
    strategy = "dee"
    summary = "Dynasor-CoT: the last theta probe answers agree, none hesitates (signals answer, hesitation)"
    online = "side"
    signals = ("answer", "hesitation")
    thetas = (2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 12.0, 16.0)

    def theta_grid(self, n: int) -> list[float]:
        return _window_grid(2, n)

    signal_cost = SignalCost(prefill=DYNASOR_SUFFIX_TOKENS, decoded=PROBE_CAP,
                             recorded="answer_tokens", paid="before_stop", first=0,
                             note="a side probe (suffix prefill + <= 20 decoded tokens) on the "
                                  "prefix before each chunk")

    def fit(self, train: MeasurementSet, validation: MeasurementSet) -> None:
        _need(train, self.signals, self.name)

    def stop(self, view, theta: float) -> np.ndarray:
        # The decision is stated once (measurement._field_rules) for OTBench and the online controller.
        if int(theta) < 1 or view.k < int(theta):
            return np.zeros(len(view), dtype=bool)
        return dynasor_stop(view.history("answer"), view.history("hesitation"), view.k, theta)

    def config(self) -> dict[str, Any]:
        return {"source": "hao-ai-lab/Dynasor dynasor/core/cot.py", "theta": "probe window"}


class Deer:
    """DEER: stop at a transition whose trial-answer confidence exceeds `θ` (module docstring)."""

    name = "deer"
    strategy = "dee"
    summary = ("DEER: trial-answer confidence > theta at one of the first 10 boundaries "
               "(signal answer_conf)")
    online = "side"
    signals = ("answer_conf",)
    thetas = (0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.925, 0.95, 0.975, 0.99, 1.0)
    theta_range = (0.5, 1.0)

    def __init__(self, max_judge_steps: int = 10):
        self.max_judge_steps = int(max_judge_steps)
        self.signal_cost = SignalCost(prefill=DEER_PROMPT_TOKENS, decoded=PROBE_CAP,
                                      recorded="answer_tokens", paid="asked", first=1,
                                      max_decisions=self.max_judge_steps,
                                      note="a trial answer (prompt prefill + <= 20 decoded "
                                           "tokens) per checked transition")

    def fit(self, train: MeasurementSet, validation: MeasurementSet) -> None:
        _need(train, self.signals, self.name)

    def stop(self, view, theta: float) -> np.ndarray:
        if not 1 <= view.k <= self.max_judge_steps:
            return np.zeros(len(view), dtype=bool)
        return deer_stop(view.signal("answer_conf"), view.k, theta, self.max_judge_steps)

    def config(self) -> dict[str, Any]:
        return {"source": "iie-ycx/DEER vllm-deer.py", "max_judge_steps": self.max_judge_steps,
                "policy": "avg1 (as recorded in signal.answer_conf)"}


class BudgetForcing:
    """s1 budget forcing: the same thinking-token cap `θ` for every question."""

    name = "budget-forcing"
    strategy = "fb"
    summary = "s1 budget forcing: the same cap of theta thinking tokens for all"
    online = "side"
    signal_cost = SignalCost(note="a fixed cap: no signal")

    def __init__(self) -> None:
        self._top: float | None = None

    def fit(self, train: MeasurementSet, validation: MeasurementSet) -> None:
        L_end = train.L[np.arange(train.num_trajectories), train.n]
        self._top = float(L_end.max()) if L_end.size else 0.0

    def theta_grid(self, n: int) -> list[float]:
        top = self._top if self._top else 1024.0
        if n <= 2:
            return [0.0, np.inf][:n]
        mids = np.geomspace(min(64.0, top), top, n - 2).round().tolist()
        return sorted({0.0, *mids}) + [np.inf]

    def budget(self, units, theta: float) -> np.ndarray:
        return np.full(len(units), float(theta))

    def config(self) -> dict[str, Any]:
        return {"source": "simplescaling/s1 budget forcing"}


class AnswerConsistency:
    """Answer convergence: stop once the probe answer has not changed for `θ` boundaries."""

    name = "answer-consistency"
    strategy = "dee"
    summary = "answer convergence: the probe answer unchanged for theta boundaries (signal answer)"
    online = "side"
    signals = ("answer",)
    thetas = (1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 12.0, 16.0)

    def theta_grid(self, n: int) -> list[float]:
        return _window_grid(1, n)

    signal_cost = SignalCost(prefill=DYNASOR_SUFFIX_TOKENS, decoded=PROBE_CAP,
                             recorded="answer_tokens", paid="asked", first=1,
                             note="an answer probe (suffix prefill + decoded answer) per boundary")

    def fit(self, train: MeasurementSet, validation: MeasurementSet) -> None:
        _need(train, self.signals, self.name)

    def stop(self, view, theta: float) -> np.ndarray:
        if int(theta) < 1 or view.k - int(theta) < 1:
            return np.zeros(len(view), dtype=bool)
        return consistency_stop(view.history("answer"), view.k, theta)

    def config(self) -> dict[str, Any]:
        return {"source": "launchnlp/reasoning_earlystop", "theta": "unchanged boundaries"}
