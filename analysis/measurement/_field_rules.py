"""The field methods' stop decisions on the field signals, stated once for OTBench and the online controller.

Plain NumPy (no JAX), so both the analysis (`otbench.analysis.bench`'s
`DynasorCoT`, `Deer`, `AnswerConsistency`, which walk recorded positions)
and the probe's online controller (`otbench.probe.online`, which decides
while the model generates) call the same functions; the sources each rule
restates are cited in `otbench.analysis.bench._field`.

Every function decides at position `k` for a batch of rows. A history
argument is ``[rows, >= k + 1]``: the signal at positions `0..k` of each
row (columns after `k` are ignored, and so is column `k` where the rule
does not read it -- Dynasor-CoT decides on the probes *before* the chunk,
so online its probe at `k` may still be in flight). The windows `θ` are
integers (a float θ is truncated, as the offline θ grid is integral).
"""

import numpy as np

from otbench.errors import ArgumentError

from ._peer_signals import WINDOW_BITS


def window_agrees(answers: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """bool[rows]: the answers at columns `lo..hi` (inclusive) are all extracted (>= 0) and equal."""
    win = np.asarray(answers)[:, lo:hi + 1]
    return np.all(win >= 0, axis=1) & np.all(win == win[:, :1], axis=1)


def dynasor_stop(answers: np.ndarray, hesitation: np.ndarray, k: int, window: float) -> np.ndarray:
    """Dynasor-CoT at `k`: the answers at `k - w .. k - 1` agree and none of those probes hesitates.

    `w = int(window)`; no stop while `k < w` (or `w < 1`).
    """
    w, k = int(window), int(k)
    rows = np.asarray(answers).shape[0]
    if w < 1 or k < w:
        return np.zeros(rows, dtype=bool)
    certain = np.all(np.asarray(hesitation)[:, k - w:k] == 0, axis=1)
    return window_agrees(answers, k - w, k - 1) & certain


def deer_stop(confidence: np.ndarray, k: int, theta: float, max_judge_steps: int) -> np.ndarray:
    """DEER at `k`: a checked transition (`1 <= k <= max_judge_steps`) whose trial-answer confidence is `> θ`.

    `confidence`: float[rows], the confidence at position `k`.
    """
    conf = np.asarray(confidence, dtype=np.float64)
    if not 1 <= int(k) <= int(max_judge_steps):
        return np.zeros(conf.shape[0], dtype=bool)
    return conf > theta


def consistency_stop(answers: np.ndarray, k: int, window: float) -> np.ndarray:
    """Answer consistency at `k`: the answers at `k - w .. k` are extracted and equal, `k - w >= 1`."""
    w, k = int(window), int(k)
    rows = np.asarray(answers).shape[0]
    if w < 1 or k - w < 1:
        return np.zeros(rows, dtype=bool)
    return window_agrees(answers, k - w, k)


def deer_asks(k: int, max_judge_steps: int) -> bool:
    """Whether DEER checks position `k` at all (its trial answer is decoded there)."""
    return 1 <= int(k) <= int(max_judge_steps)


def dynasor_own_stop(window: np.ndarray, uncertain: np.ndarray, k: int, threshold: float) -> np.ndarray:
    """Dynasor-CoT at `k` on its own probes (``dynasor_window``, ``dynasor_uncertain``): stop when the
    probes at `k - w .. k - 1` agree and are all certain.

    hao-ai-lab/Dynasor, commit 0d2f1b9, ``dynasor/core/cot.py`` lines 58-135:
    the probe of chunk `i` is decoded on the prompt *before* that chunk (lines
    69-76); after the chunk, thinking ends when the last ``threshold`` probe
    answers are one class of ``eqaul_group`` and all non-empty (lines 132-133,
    ``dynasor/core/evaluator.py`` lines 745-762) and none of their texts holds
    an uncertain word as a substring (lines 121-124, 134). A boundary plays a
    chunk, so the window at `k` is `k - w .. k - 1`: it agrees exactly when
    bit ``w - 1`` of ``window[k - 1]`` is set (the signal's definition, which
    reads no position after `k - 1`). `w = int(threshold)`; no stop while
    `k < w` (fewer than ``threshold`` probes: ``sum(probe_certain_count)`` <
    threshold) or `w < 1`; a window longer than the recorded masks
    (`WINDOW_BITS`) is refused.
    """
    w, k = int(threshold), int(k)
    rows = np.asarray(window).shape[0]
    if w > WINDOW_BITS:
        raise ArgumentError(f"a Dynasor window of {w} probes is longer than the recorded masks "
                            f"answer for ({WINDOW_BITS})")
    if w < 1 or k < w:
        return np.zeros(rows, dtype=bool)
    mask = np.rint(np.asarray(window, dtype=np.float64)[:, k - 1]).astype(np.int64)
    certain = np.all(np.asarray(uncertain)[:, k - w:k] == 0, axis=1)
    return ((mask >> (w - 1)) & 1).astype(bool) & certain


def deer_own_stop(confidence: np.ndarray, k: int, theta: float, max_judge_steps: int) -> np.ndarray:
    """DEER at `k` on its own trial answer (``deer_conf``): a checked transition whose confidence is `> θ`.

    iie-ycx/DEER, commit c9dd19f, ``vllm-deer.py``: a trial answer is decoded
    after each thinking chunk while ``thinking_steps < max_judge_steps``
    (lines 396-409, 621; the chunk before the first transition counts:
    ``no_thinking`` = 0, line 162, checks nothing before it), and thinking ends
    when ``pred_prob > threshold`` (line 636, strict). `confidence`: float[rows],
    ``deer_conf`` at position `k` (0 where DEER's average has no tokens).
    """
    conf = np.asarray(confidence, dtype=np.float64)
    if not deer_asks(k, max_judge_steps):
        return np.zeros(conf.shape[0], dtype=bool)
    return conf > theta


def deepconf_stop(min_conf: np.ndarray, tokens: np.ndarray, threshold: np.ndarray | float,
                  window: int) -> np.ndarray:
    """DeepConf at `k` (``deepconf_min_conf``): the processor would have ended the trace in the step just played.

    facebookresearch/deepconf, commit 675529d, ``deepconf/processors.py``
    lines 43-55: after each decoded token the group mean of the last
    ``conf_group_size`` token confidences is compared with the threshold, and
    only once that many tokens exist; below it, the end of the sequence is
    forced. Restated at boundaries: the lowest full-window mean of the first
    `L(k)` tokens, ``min_conf[k]``, is below `threshold` and `L(k) >= window`
    (so some window ending inside the steps so far -- at the first such `k`,
    inside step `k` -- was below it). `min_conf`, `tokens`: float[rows] at
    `k`; `threshold`: per row or one value (strict ``<``, as line 51).
    """
    low = np.asarray(min_conf, dtype=np.float64)
    full = np.asarray(tokens) >= int(window)
    return full & (low < np.asarray(threshold, dtype=np.float64))
