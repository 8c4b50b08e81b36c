"""The field's own termination methods, restated on recorded boundaries.

Each method decides at the set's step boundaries (the position grid `k`),
from the optional field signals of `otbench.analysis.measurement`
(``answer``, ``answer_conf``, ``hesitation``, ``answer_tokens``; their
definitions travel in the set's provenance), and declares what its signal
costs per decision (`_cost.SignalCost`) so OTBench can score it net of that
cost. Sources are restated from their code, never copied:

* `DynasorCoT` (DEE, ``dynasor-cot``): hao-ai-lab/Dynasor, commit 0d2f1b9,
  ``dynasor/core/cot.py``, on *its own* probe as the probe stage records it
  (``probe.field_probes = ["dynasor"]``; `otbench.probe.grading._peers`
  restates the probe). Every `chunk_size` tokens (lines 58-67) a side probe
  is decoded on the prompt *before* that chunk (lines 69-76: the suffix
  "... Oh, I suddenly got the answer to the whole problem, **Final Answer**
  \\[ \\boxed{" of line 43, 20 tokens at temperature 0.6, top-p 0.95);
  after the chunk, thinking ends when the last `threshold` probe answers are
  all non-empty, one class of ``eqaul_group`` under ``math_equal`` and none
  of their texts holds a word of ``uncertain_words`` as a substring (line 5;
  lines 121-135, ``dynasor/core/evaluator.py`` lines 745-762). Restated: a
  boundary plays a chunk; at boundary `k` stop when bit `θ - 1` of
  ``dynasor_window[k - 1]`` is set and ``dynasor_uncertain`` is 0 at
  `k - θ .. k - 1` (`measurement.dynasor_own_stop`; `θ` = ``threshold``
  <= 16; the effort levels of lines 8-19 use 2, 3, 5 and 8). Cost: the
  recorded ``dynasor_tokens`` of every probe before the stop (``paid =
  "before_stop"``): the suffix's prefill plus the tokens the probe decoded.
* `Deer` (DEE, ``deer``): iie-ycx/DEER, commit c9dd19f, ``vllm-deer.py``,
  on its own trial answer (``probe.field_probes = ["deer"]``). At each
  reasoning transition ("Wait", line 248) a trial answer is decoded after
  "\\n**Final Answer**\\n\\boxed" (line 252; at most
  ``prob_check_max_tokens`` = 20 tokens, line 179, stopped at the stop
  strings of line 269) and its confidence is the arithmetic mean of the
  probabilities of its tokens 1..N-1 (``policy`` avg1, the default of line
  167; lines 100-149); thinking ends when the confidence is strictly above
  ``threshold`` (line 636, default 0.95, line 169); only the first
  ``max_judge_steps`` = 10 transitions are checked (lines 166, 396); with
  ``no_thinking`` = 0 (line 162) nothing is checked before thinking starts.
  Restated: a boundary plays a transition; at `1 <= k <= max_judge` stop
  when ``deer_conf > θ`` (`measurement.deer_own_stop`). Cost per check: the
  recorded ``deer_tokens`` (the prompt's prefill plus the N tokens DEER's
  request decodes).
* `DynasorCoTSTP` (``dynasor-cot-stp``) and `DeerSTP` (``deer-stp``): the
  same rules read on otbench's own STP answer probe instead (``answer``,
  ``hesitation``, ``answer_conf``: thinking closed, up to ``answer_limit``
  tokens, whole hesitation words up to the answer's close, answers compared
  by key, confidence over the tokens inside the braces) and charged that
  probe's recorded ``answer_tokens``. They are *not* the sources' methods --
  the suffix says so -- and are kept because every probe set records their
  signals, while the sources' own probes are recorded only when a job asks.
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
* `DeepConfExit` (DEE, ``deepconf-exit``): facebookresearch/deepconf,
  commit 675529d, on its own signal (``probe.field_probes = ["deepconf"]``:
  ``deepconf_min_conf``, read from the think request's top-20
  log-probabilities; `otbench.probe.grading._deepconf` restates it). Online
  (``deepconf/wrapper.py`` lines 172-253), `warmup_traces` = 16 traces of the
  question are sampled in full, the threshold is the ``100 -
  confidence_percentile`` percentile of their lowest group confidences
  (line 208, NumPy's linear percentile; ``confidence_percentile`` = 90 by
  default, line 76), and every further trace is ended by the logits
  processor at the first token whose full-window group mean falls below it
  (``processors.py`` lines 43-55). Restated: `θ` = ``confidence_percentile``;
  `fit` takes each model's train-split trajectories as its warm-up traces
  (their ``deepconf_min_conf`` at the last position) and the threshold is
  ``np.percentile(those, 100 - θ)``. The source's warm-up ``min_conf``
  (``utils.py`` ``process_output``, lines 282-303) is taken over the whole
  output, the answer included, and each token's confidence averages every
  log-probability vLLM returns (``compute_confidence``, lines 41-50: the 20
  requested, 21 when the sampled token is not among them), rounded to 3
  decimals (lines 49, 61); ``fit`` reads that value from
  ``deepconf_warmup_conf`` where the set records it (the probe does with
  ``probe.field_probes = ["deepconf"]``), else the thinking-only, top-20
  ``deepconf_min_conf`` at the end --
  otbench's departure, named in the result's ``config.warmup`` (the
  answer's windows can only lower the source's value; a 21st, lower
  log-probability can only raise a token's confidence).
  At boundary `k` stop when
  `measurement.deepconf_stop` holds (the window full and the lowest group
  confidence of the first `L(k)` tokens below the threshold: the step in
  which the processor would have ended the trace). Cost: none beyond the
  trajectory (its own tokens' log-probabilities). Where it departs, the
  name says so: DeepConf *discards* a trace it ends (it is dropped from the
  confidence-weighted vote, ``wrapper.py`` lines 318-321) and answers from
  the traces that survive; OTBench scores one trajectory at a time, so
  here the trace is answered at the stop (an early exit, hence ``-exit``);
  the threshold comes from the model's train split, not from 16 warm-up
  traces of the same question; the stop lands on the boundary that ends
  the step, up to one step after the processor's token.
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
    WINDOW_BITS,
    MeasurementSet,
    consistency_stop,
    deepconf_stop,
    deer_own_stop,
    deer_stop,
    dynasor_own_stop,
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
WARMUP_SIGNAL = "deepconf_warmup_conf"
"""DeepConf's warm-up min_conf as its source computes it (`measurement.PEER_SIGNAL_DEFINITIONS`)."""


def _need(ms: MeasurementSet, names: tuple[str, ...], who: str, own: str | None = None) -> None:
    missing = [s for s in names if s not in ms.signals]
    if missing:
        how = (f"its own probe, recorded when the probe job lists \"{own}\" in probe.field_probes"
               if own else "otbench's field signals")
        raise ArgumentError(f"{who} needs the per-position signals {', '.join(missing)} ({how}); the "
                            f"set records: {', '.join(sorted(ms.signals)) or 'none'}")


def _window_grid(lo: int, n: int, top: int = 16) -> list[float]:
    """`n` (at most `top - lo + 1`) distinct integer windows spread over `lo..top`."""
    return sorted({float(round(x)) for x in np.linspace(lo, top, max(1, min(n, top - lo + 1)))})


class DynasorCoT:
    """Dynasor-CoT on its own probe: the last `θ` probe answers agree and none is uncertain (module docstring)."""

    name = "dynasor-cot"
    strategy = "dee"
    summary = ("Dynasor-CoT on its own probe: the last theta probe answers agree, none uncertain "
               "(signals dynasor_window, dynasor_uncertain)")
    online = "side"
    signals = ("dynasor_window", "dynasor_uncertain")
    thetas = (2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 12.0, 16.0)

    def theta_grid(self, n: int) -> list[float]:
        return _window_grid(2, n, WINDOW_BITS)

    signal_cost = SignalCost(decoded=PROBE_CAP + DYNASOR_SUFFIX_TOKENS, recorded="dynasor_tokens",
                             paid="before_stop", first=0,
                             note="Dynasor's own probe (its suffix's prefill + the tokens it decoded, "
                                  "recorded in dynasor_tokens) on the prefix before each chunk")

    _own = "dynasor"                        # the probe.field_probes entry that records its signals
    _rule = staticmethod(dynasor_own_stop)

    def fit(self, train: MeasurementSet, validation: MeasurementSet) -> None:
        _need(train, self.signals, self.name, own=self._own)

    def stop(self, view, theta: float) -> np.ndarray:
        # The decision is stated once (measurement._field_rules) for OTBench and the online
        # controller; `signals` are (agreement, certainty) in the rule's argument order.
        if int(theta) < 1 or view.k < int(theta):
            return np.zeros(len(view), dtype=bool)
        return self._rule(view.history(self.signals[0]), view.history(self.signals[1]), view.k, theta)

    def config(self) -> dict[str, Any]:
        return {"source": "hao-ai-lab/Dynasor dynasor/core/cot.py", "theta": "probe window",
                "probe": "its own (signal.dynasor_window, signal.dynasor_uncertain)"}


class DynasorCoTSTP(DynasorCoT):
    """Dynasor-CoT's rule on otbench's STP answer probe, not Dynasor's own (module docstring)."""

    name = "dynasor-cot-stp"
    summary = ("Dynasor-CoT's rule on otbench's STP answer probe, not Dynasor's own: the last theta "
               "answers agree, none hesitates (signals answer, hesitation)")
    signals = ("answer", "hesitation")
    signal_cost = SignalCost(prefill=DYNASOR_SUFFIX_TOKENS, decoded=PROBE_CAP,
                             recorded="answer_tokens", paid="before_stop", first=0,
                             note="otbench's STP answer probe (declared suffix prefill + its recorded "
                                  "answer_tokens) on the prefix before each chunk")
    _own = None
    _rule = staticmethod(dynasor_stop)

    def config(self) -> dict[str, Any]:
        return {"source": "hao-ai-lab/Dynasor dynasor/core/cot.py", "theta": "probe window",
                "probe": "otbench's STP answer probe (signal.answer, signal.hesitation), not Dynasor's"}


class Deer:
    """DEER on its own trial answer: stop at a transition whose confidence exceeds `θ` (module docstring)."""

    name = "deer"
    strategy = "dee"
    summary = ("DEER on its own trial answer: confidence > theta at one of the first 10 boundaries "
               "(signal deer_conf)")
    online = "side"
    signals = ("deer_conf",)
    thetas = (0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.925, 0.95, 0.975, 0.99, 1.0)
    theta_range = (0.5, 1.0)

    def __init__(self, max_judge_steps: int = 10):
        self.max_judge_steps = int(max_judge_steps)
        self.signal_cost = self._cost()

    def _cost(self) -> SignalCost:
        return SignalCost(decoded=PROBE_CAP + DEER_PROMPT_TOKENS, recorded="deer_tokens", paid="asked",
                          first=1, max_decisions=self.max_judge_steps,
                          note="DEER's own trial answer (its prompt's prefill + the tokens its request "
                               "decodes, recorded in deer_tokens) per checked transition")

    _own = "deer"
    _rule = staticmethod(deer_own_stop)

    def fit(self, train: MeasurementSet, validation: MeasurementSet) -> None:
        _need(train, self.signals, self.name, own=self._own)

    def stop(self, view, theta: float) -> np.ndarray:
        if not 1 <= view.k <= self.max_judge_steps:
            return np.zeros(len(view), dtype=bool)
        return self._rule(view.signal(self.signals[0]), view.k, theta, self.max_judge_steps)

    def config(self) -> dict[str, Any]:
        return {"source": "iie-ycx/DEER vllm-deer.py", "max_judge_steps": self.max_judge_steps,
                "policy": "avg1 of its own trial answer (signal.deer_conf)"}


class DeerSTP(Deer):
    """DEER's rule on otbench's STP answer probe's confidence, not DEER's trial answer (module docstring)."""

    name = "deer-stp"
    summary = ("DEER's rule on otbench's STP answer probe, not DEER's own trial answer: confidence "
               "> theta at one of the first 10 boundaries (signal answer_conf)")
    signals = ("answer_conf",)

    def _cost(self) -> SignalCost:
        return SignalCost(prefill=DEER_PROMPT_TOKENS, decoded=PROBE_CAP, recorded="answer_tokens",
                          paid="asked", first=1, max_decisions=self.max_judge_steps,
                          note="otbench's STP answer probe (declared prompt prefill + its recorded "
                               "answer_tokens) per checked transition")

    _own = None
    _rule = staticmethod(deer_stop)

    def config(self) -> dict[str, Any]:
        return {"source": "iie-ycx/DEER vllm-deer.py", "max_judge_steps": self.max_judge_steps,
                "policy": "avg1 over otbench's STP answer probe (signal.answer_conf), not DEER's"}


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


class DeepConfExit:
    """DeepConf's online stop as an early exit: answered where it stops, not discarded (module docstring)."""

    name = "deepconf-exit"
    strategy = "dee"
    summary = ("DeepConf's online stop as an early exit, answered where it stops (DeepConf discards the "
               "trace): group confidence below the theta-percentile threshold of the train split "
               "(signal deepconf_min_conf)")
    online = "processor"
    signals = ("deepconf_min_conf",)
    thetas = (10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 95.0, 99.0)
    theta_range = (1.0, 99.0)
    signal_cost = SignalCost(note="DeepConf's confidence: the top-20 log-probabilities of the "
                                  "trajectory's own sampled tokens, no extra decode")

    def __init__(self) -> None:
        self.window: int | None = None
        self.warmup: str | None = None                 # the signal the warm-up min_confs come from
        self._warmup: dict[str, np.ndarray] = {}       # model -> sorted train min_confs
        self._online: float | None = None              # the threshold a logits processor was given

    # Online (`Method.online_parameters`): the processor has no train split, so it gets the
    # fitted threshold at θ and the window; θ itself travels unchanged.
    def online_parameters(self, model: str | None, theta: float) -> dict[str, Any]:
        return {"threshold": self.threshold(model, theta), "window": self.window}

    @classmethod
    def from_online(cls, params: dict[str, Any]) -> "DeepConfExit":
        out = cls()
        out.window, out._online = int(params["window"]), float(params["threshold"])
        return out

    def fit(self, train: MeasurementSet, validation: MeasurementSet) -> None:
        _need(train, self.signals, self.name, own="deepconf")
        rec = train.provenance.get("deepconf") if isinstance(train.provenance, dict) else None
        window = rec.get("window") if isinstance(rec, dict) else None
        if not isinstance(window, int) or isinstance(window, bool) or window < 1:
            raise ArgumentError(f"{self.name} needs the window its signal was read with (the set's "
                                f"provenance deepconf.window), got {window!r}")
        self.window = int(window)
        # The source's warm-up value where the set has it (whole output, every returned
        # log-probability, rounded: utils.py process_output); else otbench's thinking-only,
        # top-20 reading, a departure the result's config names.
        self.warmup = WARMUP_SIGNAL if WARMUP_SIGNAL in train.signals else "deepconf_min_conf"
        last = train.signals[self.warmup][np.arange(train.num_trajectories), train.n]
        model = np.asarray(train.cell_model)[train.cell]
        self._warmup = {m: np.sort(last[model == i]) for i, m in enumerate(train.models)
                        if np.any(model == i)}

    def threshold(self, model: str, theta: float) -> float:
        """The threshold of `model` at `θ` = confidence_percentile: ``np.percentile(warm-up min_confs, 100 - θ)``."""
        if self._online is not None:
            return self._online
        warm = self._warmup.get(model)
        if warm is None or not warm.size:
            raise ArgumentError(f"{self.name}: model {model!r} has no train-split trajectory to set its "
                                "threshold from (its warm-up traces)")
        return float(np.percentile(warm, 100.0 - float(theta)))

    def stop(self, view, theta: float) -> np.ndarray:
        if self.window is None:
            raise ArgumentError(f"{self.name} decides only after fit (its threshold comes from the "
                                "train split)")
        models = view.units.models
        per_model = {i: self.threshold(models[i], theta) for i in np.unique(view.units.model_index[view.unit])}
        thr = np.array([per_model[i] for i in view.units.model_index[view.unit]], dtype=np.float64)
        return deepconf_stop(view.signal(self.signals[0]), view.tokens, thr, self.window)

    def config(self) -> dict[str, Any]:
        return {"source": "facebookresearch/deepconf deepconf/processors.py, wrapper.py",
                "theta": "confidence_percentile (threshold = percentile 100 - theta of the train "
                         "split's lowest group confidences, per model)",
                "window": self.window, "top_k": 20,
                "warmup": (None if self.warmup is None else
                           "the source's: signal.deepconf_warmup_conf (whole output, every returned "
                           "log-probability)" if self.warmup == WARMUP_SIGNAL else
                           "otbench's departure: signal.deepconf_min_conf at the end (thinking "
                           "tokens only, the top-20 mean, unrounded; docs/rules.md)"),
                "departs": "answered at the stop (DeepConf discards the trace); threshold from the "
                           "train split, not 16 warm-up traces per question"}
