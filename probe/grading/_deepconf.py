"""DeepConf's own signal, read from the sampled tokens' log-probabilities.

Restated from facebookresearch/deepconf, commit 675529d (read, not copied):

* **token confidence** (``deepconf/processors.py`` lines 29-34,
  ``ConfPerReqLogitsProcessor.compute_conf``): at each decoded position, the
  negated mean of the log-probabilities of the `k` most probable tokens of
  the model's distribution there, ``k = conf_topk = 20``
  (``deepconf/wrapper.py`` line 232, with ``logprobs = 20`` at lines 116,
  196 and 226). Engines return that mean per decoded token
  (`GenRequest.top_logprobs`, `Completion.top_mean`) from the raw
  log-softmax, as the processor reads the logits it is handed;
* **group confidence** (``processors.py`` lines 43-51): a running sum over
  the last ``conf_group_size`` token confidences (a deque of that length:
  add the new one, drop the oldest once full), divided by the deque's
  length; ``conf_group_size = window_size = 2048`` (``wrapper.py`` lines 80
  and 231). The processor ends the trace at the first token where the
  deque is full and that mean is below the threshold (line 51);
* **a trace's lowest group confidence** ``min_conf`` (``deepconf/utils.py``
  lines 53-62 and 301): the minimum of the sliding means of full windows;
  for a trace shorter than one window, the mean of all its confidences
  (0 for no token). The warm-up threshold is a percentile of these
  (``wrapper.py`` line 208).

**warm-up min_conf** (``utils.py`` ``process_output``, lines 282-303): what
the online threshold is a percentile of (``wrapper.py`` line 208) is read over
a warm-up trace's *whole* output (thinking, end marker, answer and the stop
token vLLM keeps), with a token's confidence computed differently from the
processor's: ``compute_confidence`` (lines 41-50) negates the mean of *every*
log-probability vLLM returns for the token with ``logprobs = 20`` (wrapper.py
line 196): the 20 largest, plus the sampled token's own when it is not among
them (21 values then), rounded to 3 decimals; ``compute_least_grouped``
(lines 53-62) takes the sliding means of ``window`` of them, each a fresh
``sum`` rounded to 3 decimals, or, for fewer tokens, their unrounded mean
(0 for none, line 290); ``min_conf`` is the lowest (line 301).
`warmup_confidence` / `warmup_min_conf` restate these, NumPy's rounding
included (``round`` of a NumPy float is `numpy.round`).

The probe records, per position `k`, `min_conf` of the trajectory's first
`L(k)` thinking tokens (``deepconf_min_conf``): read at `k`, it says whether
DeepConf's processor would have ended the trace inside the step just played
(`L(k) >= window` and the value below the threshold), and at the last
position it is the trajectory's `min_conf` that a threshold is fitted on.
The window means are the processor's running sums (so the online decision
and the recorded one are the same floating-point numbers); `utils.py`
recomputes each window's sum and rounds to 3 decimals (lines 49, 61), a
difference of at most 5e-4 that otbench does not reproduce.
"""

from collections import deque
from collections.abc import Sequence

from otbench.errors import ArgumentError

DEEPCONF_TOPK = 20
"""`conf_topk`: the most probable tokens a token confidence averages over (wrapper.py line 232)."""
DEEPCONF_WINDOW = 2048
"""`window_size` / `conf_group_size`: tokens of a group confidence (wrapper.py lines 80, 231)."""


def token_confidence(top_mean: Sequence[float]) -> list[float]:
    """DeepConf's token confidences from the per-token means of the top-`k` log-probabilities."""
    return [-float(m) for m in top_mean]


class GroupConfidence:
    """The processor's running group confidence (processors.py lines 43-51), one token at a time.

    ``push(conf)`` adds a token's confidence and returns the group mean;
    ``full`` says whether the window holds `window` tokens (only then may the
    processor stop); ``low`` is the trace's `min_conf` so far (module
    docstring).
    """

    __slots__ = ("window", "_q", "_sum", "_total", "_count", "low")

    def __init__(self, window: int = DEEPCONF_WINDOW):
        if int(window) < 1:
            raise ArgumentError(f"a DeepConf window holds at least one token, got {window}")
        self.window = int(window)
        self._q: deque = deque()
        self._sum = 0.0          # the processor's `conf_grouped`
        self._total = 0.0        # all confidences so far (the short-trace mean of utils.py line 56)
        self._count = 0
        self.low = float("inf")  # lowest full-window mean so far

    @property
    def full(self) -> bool:
        return len(self._q) >= self.window

    def push(self, conf: float) -> float:
        conf = float(conf)
        if len(self._q) < self.window:
            self._q.append(conf)
            self._sum += conf
        else:
            self._sum -= self._q.popleft()
            self._q.append(conf)
            self._sum += conf
        self._total += conf
        self._count += 1
        mean = self._sum / len(self._q)
        if self.full and mean < self.low:
            self.low = mean
        return mean

    def min_conf(self) -> float:
        """`min_conf` of the tokens pushed so far: the lowest full-window mean, else their mean (0 for none)."""
        if self._count >= self.window:
            return self.low
        return self._total / self._count if self._count else 0.0


def deepconf_min_confs(confidence: Sequence[float], L: Sequence[int],
                       window: int = DEEPCONF_WINDOW) -> tuple[float, ...]:
    """float per position: `min_conf` of the first `L[k]` token confidences (``deepconf_min_conf``).

    `L` is non-decreasing (the trajectory's retained tokens per position) and
    at most ``len(confidence)``.
    """
    g = GroupConfidence(window)
    out, t = [], 0
    for Lk in L:
        Lk = int(Lk)
        if Lk < t or Lk > len(confidence):
            raise ArgumentError(f"positions must retain 0..{len(confidence)} tokens in order, got {Lk} "
                             f"after {t}")
        while t < Lk:
            g.push(confidence[t])
            t += 1
        out.append(g.min_conf())
    return tuple(out)


def deepconf_stop_token(confidence: Sequence[float], threshold: float,
                        window: int = DEEPCONF_WINDOW) -> int | None:
    """The 1-based count of tokens after which DeepConf's processor ends the trace, None if it never does.

    The processor reads token `t`'s logits, pushes its confidence, and when
    the window is full and the mean is below `threshold` forces the end of
    the sequence as token `t`'s sample (processors.py lines 51-54): `t - 1`
    tokens were kept. Returned here is `t` (the confidences read), which is
    what `deepconf_min_confs` positions count.
    """
    g = GroupConfidence(window)
    for t, c in enumerate(confidence, start=1):
        mean = g.push(c)
        if g.full and mean < float(threshold):
            return t
    return None


def warmup_confidence(returned_mean: Sequence[float]) -> list[float]:
    """DeepConf's warm-up token confidences (``utils.py`` ``compute_confidence``, lines 41-50): minus
    the mean of every log-probability returned for each token (`Completion.prompt_returned_mean`),
    rounded to 3 decimals as NumPy rounds."""
    import numpy as np

    return [float(np.round(-np.float64(m), 3)) for m in returned_mean]


def warmup_min_conf(confs: Sequence[float], window: int = DEEPCONF_WINDOW) -> float:
    """``min_conf`` of a warm-up trace (``utils.py`` lines 53-62, 290, 301): the lowest sliding mean
    of `window` confidences, each a fresh left-to-right sum rounded to 3 decimals; for a shorter
    trace the unrounded mean of all; 0 for none.

    >>> warmup_min_conf([1.0, 2.0, 4.0], window=2), warmup_min_conf([1.0, 2.0], window=4)
    (1.5, 1.5)
    """
    import numpy as np

    w = int(window)
    if w < 1:
        raise ArgumentError(f"a DeepConf window holds at least one token, got {window}")
    c = [float(x) for x in confs]
    if not c:
        return 0.0
    if len(c) < w:
        return sum(c) / len(c)
    return min(float(np.round(sum(c[i:i + w]) / w, 3)) for i in range(len(c) - w + 1))
