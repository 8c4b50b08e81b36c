"""The field methods' *own* probe signals: Dynasor-CoT's probe and DEER's trial answer.

otbench's field signals (``answer``, ``answer_conf``, ``hesitation``,
``answer_tokens``; `._field`) read otbench's own STP answer probe. These six
optional ``signal.*`` columns read each method's own probe, decoded and read
exactly as its source does (`otbench.probe.grading._peers` restates the
sources, with repository, commit and lines); the probe stage records them
when the job lists the method under ``probe.field_probes``, and the stop
rules `dynasor_own_stop` / `deer_own_stop` (`._field_rules`) read them.

`add_peer_signals` draws them for a *synthetic* set (a seeded stream of its
own, so every other array, and the otbench field signals, stay
bit-identical), and marks them synthetic in the provenance. Model of the
draw, per trajectory, walking positions in order (an empty step repeats the
previous position, as the same prefix gives the same probe):

* a Dynasor answer: empty with probability 0.15 at `k = 0` and 0.05 after
  (class -1); else the graded-correct class 0 with probability `C(k) / P`,
  else a wrong class (the previous wrong one with probability 0.6, a fresh
  one in 1..3 otherwise), then renumbered by first appearance as the probe
  numbers them; ``dynasor_window`` is then the mask of the windows ending at
  each position whose classes are equal and non-negative (equal classes are
  equal answers), `window_masks`;
* ``dynasor_uncertain``: 1 with probability `0.1 + 0.5 (1 - C/P)`;
* ``dynasor_tokens``: 20 decoded tokens (the probe has no stop string) plus
  the suffix's prefill, `DYNASOR_SUFFIX_TOKENS`;
* ``deer_conf``: `sigmoid(1.5 + 3 (C/P - 1/2) + ε)`, `ε ~ N(0, 1)`;
* ``deer_tokens``: `min(20, 3 + Poisson(4))` decoded tokens plus the prompt's
  prefill, `DEER_PROMPT_TOKENS`;
* ``deepconf_min_conf`` (its own stream, `DEEPCONF_STREAM`): per trajectory a
  level `12 + N(0, 1)`; a step's group confidence `level + 3 (C/P - 1/2) +
  N(0, 0.7²)`; while `L(k) < 2048` (DeepConf's window) the token-weighted mean
  of the steps so far, after that the lowest step value since the window
  filled (floored at 0, as a confidence is);
* ``thinkbrake_check`` and ``thinkbrake_margin`` (their own stream,
  `THINKBRAKE_STREAM`): a boundary `k >= 1` ends with ``.\\n\\n`` with
  probability 0.4 (an empty step repeats the previous position); at a check the
  margin is the set's one-context ``margin`` minus `0.5 |N(0, 1)|` (a sampled
  token is at most as likely as the top one) plus `N(0, 0.3²)` (the end token
  read after ``.\\n`` instead), 0 elsewhere;
* ``deepconf_warmup_conf`` (its own stream, `DEEPCONF_WARMUP_STREAM`): per
  trajectory ``deepconf_min_conf`` at `n` minus `|N(0, 0.3²)|` (a model in
  which the answer's windows, which can only lower the lowest group
  confidence, outweigh the 21st log-probability, which can only raise a
  token's), floored at 0 and rounded to 3 decimals as ``utils.py``
  rounds, the same at every position.
"""

import dataclasses
from typing import Any

import numpy as np

from . import _libm
from ._field import synthetic_stream
from ._types import MeasurementSet

GENERATOR = "otbench.peer-signals/1"
STREAM = 37          # mixed into the seed: a stream separate from the simulator's and the field signals'
DYNASOR_SUFFIX_TOKENS = 24   # the synthetic suffix prefill (a real set records the tokenizer's count)
DEER_PROMPT_TOKENS = 8
PEER_CAP = 20

PEER_SIGNAL_DEFINITIONS = {
    "dynasor_answer": "class of the answer of Dynasor-CoT's own probe at this position "
                      "(hao-ai-lab/Dynasor cot.py: the prompt so far inside the thinking + its "
                      "suffix '... Oh, I suddenly got the answer to the whole problem, **Final "
                      "Answer**\\n\\n\\[ \\boxed{', 20 tokens at temperature 0.6, top-p 0.95, no stop "
                      "string; the answer is the text before the first unmatched '}'), numbered per "
                      "trajectory by Dynasor's eqaul_group (an answer joins the first earlier class "
                      "whose representative it math_equal's; 0, 1, ... by first appearance), -1 when "
                      "the answer is empty",
    "dynasor_window": "which Dynasor windows ending at this position agree, as a bit mask: bit w-1 "
                      "(w = 1..16) is set when the w probe answers at positions k-w+1..k are all "
                      "non-empty and each later one math_equal's the window's first, i.e. "
                      "eqaul_group gives them one class and count_not_empty is w; a window of w "
                      "probes before position k agrees exactly when bit w-1 of dynasor_window[k-1] "
                      "is set (it reads no position after k-1)",
    "dynasor_uncertain": "1 when a word of Dynasor's uncertain_words (wait, hold, but, okay, no, "
                         "hmm) is a substring of the lower-cased text of that probe (all of it: "
                         "'polynomial' and a 'Wait' after the box count), else 0",
    "dynasor_tokens": "the cost of that probe: its decoded tokens (an end-of-sequence token counted) "
                      "plus its uncached prefill, the suffix's tokens (the prefix so far is what the "
                      "method's own run already holds in its prefix cache)",
    "deer_conf": "DEER's confidence of its own trial answer at this position (iie-ycx/DEER "
                 "vllm-deer.py: the prompt so far inside the thinking + '\\n**Final Answer**\\n\\boxed', "
                 "at most 20 tokens at temperature 1.0, top-p 1.0, stopped at its stop strings "
                 "(' }', '}\\n', '}.', '}}', ')}', ...) or end-of-sequence): the arithmetic mean of the "
                 "model's probabilities of decoded tokens 1..N-1 (the first, the '{', skipped; the "
                 "token completing the stop string included); 0 when fewer than two were decoded",
    "deer_tokens": "the cost of that trial answer: its N decoded tokens (as DEER's request stops) "
                   "plus its uncached prefill, the answer prompt's tokens",
    "deepconf_min_conf": "DeepConf's lowest group confidence of the first L(k) thinking tokens "
                         "(facebookresearch/deepconf: a token's confidence is minus the mean of the "
                         "20 largest raw log-probabilities of the distribution it was sampled from, "
                         "processors.py compute_conf; a group confidence is the processor's running "
                         "mean over the last `window` of them, processors.py lines 43-51; this is the "
                         "lowest over full windows, or the mean of all of them while fewer than "
                         "`window` tokens exist, utils.py compute_least_grouped and min_conf), read "
                         "from the trajectory's own sampled tokens (no extra decode); the window is "
                         "the provenance's deepconf.window",
    "thinkbrake_check": "1 where ThinkBrake checks: the thinking so far (thinking[:L(k)]) ends with "
                        "the text '.\\n\\n' (ssangjun706/ThinkBrake thinkbrake/func/handler.py lines "
                        "58-63: every chunk stops at '.\\n\\n' or the thinking-end token), else 0",
    "thinkbrake_margin": "ThinkBrake's margin at a check (handler.py lines 83-112), with text the "
                         "thinking so far without its '.\\n\\n': the log-probability of the one "
                         "token sampled (the run's sampling parameters) after text + '.\\n\\n' "
                         "minus the log-probability of the thinking-end token read after text + "
                         "'.\\n'; 0 where thinkbrake_check is 0",
    "deepconf_warmup_conf": "DeepConf's warm-up min_conf of the whole trajectory, the same at every "
                            "position (facebookresearch/deepconf utils.py process_output, lines "
                            "282-303: over every output token, the answer included; a token's "
                            "confidence is minus the mean of every log-probability vLLM returns for "
                            "it, the 20 requested (wrapper.py line 196) and the sampled token's when "
                            "it is not among them, 21, rounded to 3 decimals, compute_confidence "
                            "lines 41-50; the lowest sliding mean of `window` of them, each rounded "
                            "to 3 decimals, or their mean when fewer, compute_least_grouped lines "
                            "53-62): what the source's threshold is a percentile of (wrapper.py line 208)",
}
PEER_SIGNALS = tuple(PEER_SIGNAL_DEFINITIONS)
DYNASOR_SIGNALS = ("dynasor_answer", "dynasor_window", "dynasor_uncertain", "dynasor_tokens")
WINDOW_BITS = 16
"""The longest window a ``dynasor_window`` mask answers for (its bits 0..15)."""
DEER_SIGNALS = ("deer_conf", "deer_tokens")
DEEPCONF_SIGNALS = ("deepconf_min_conf",)
DEEPCONF_STREAM = 42     # its own stream: adding it leaves the other peer signals bit-identical
DEEPCONF_WINDOW = 2048   # DeepConf's window_size (wrapper.py line 80)
THINKBRAKE_SIGNALS = ("thinkbrake_check", "thinkbrake_margin")
THINKBRAKE_STREAM = 58   # its own stream: adding it leaves the other peer signals bit-identical
DEEPCONF_WARMUP_SIGNALS = ("deepconf_warmup_conf",)
DEEPCONF_WARMUP_STREAM = 59


def window_masks(classes: np.ndarray, bits: int = WINDOW_BITS) -> np.ndarray:
    """float[rows, K]: per position `j`, the mask of windows ending at `j` of equal non-negative classes.

    Bit ``w - 1`` is set when columns ``j - w + 1 .. j`` all hold the class of
    column ``j - w + 1`` and it is >= 0: the form ``dynasor_window`` takes
    for an equivalence numbering (equal classes, equal answers).
    """
    c = np.asarray(classes, dtype=np.float64)
    rows, K = c.shape
    out = np.zeros((rows, K), dtype=np.int64)
    run = np.zeros(rows, dtype=np.int64)      # equal non-negative classes ending at j
    for j in range(K):
        ok = c[:, j] >= 0
        same = ok & (c[:, j] == c[:, j - 1]) if j else np.zeros(rows, dtype=bool)
        run = np.where(same, run + 1, ok.astype(np.int64))
        out[:, j] = (np.int64(1) << np.minimum(run, bits)) - 1     # windows of 1..run agree
    return out.astype(np.float64)


def _first_appearance(classes: np.ndarray, n_classes: int) -> np.ndarray:
    """`classes` (values -1 .. n_classes - 1) renumbered per row 0, 1, ... by first appearance."""
    c = np.asarray(classes, dtype=np.float64)
    K = c.shape[1]
    first = np.stack([np.where((c == v).any(axis=1), (c == v).argmax(axis=1), K + v)
                      for v in range(n_classes)], axis=1)
    rank = np.argsort(np.argsort(first, axis=1, kind="stable"), axis=1, kind="stable")
    out = np.full_like(c, -1.0)
    for v in range(n_classes):
        out = np.where(c == v, rank[:, v:v + 1].astype(np.float64), out)
    return out


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + _libm.exp(-x))


def _synthetic_min_conf(ms: MeasurementSet, seed: int) -> np.ndarray:
    """float[T, K] a synthetic ``deepconf_min_conf`` (module docstring), from its own stream."""
    rng = synthetic_stream(ms, seed, DEEPCONF_STREAM, "DeepConf confidence")
    T, K = ms.L.shape
    acc = ms.C / np.maximum(ms.probes, 1)[:, None].astype(np.float64)
    level = 12.0 + rng.normal(0.0, 1.0, size=T)            # a trajectory's own scale
    total = np.zeros(T)                                      # sum of the step means over tokens
    low = np.full(T, np.inf)
    out = np.zeros((T, K))
    prev_L = np.zeros(T)
    for k in range(K):
        step = level + 3.0 * (acc[:, k] - 0.5) + rng.normal(0.0, 0.7, size=T)
        Lk = ms.L[:, k].astype(np.float64)
        grown = Lk > prev_L
        total = total + np.where(grown, step * (Lk - prev_L), 0.0)
        full = Lk >= DEEPCONF_WINDOW
        low = np.where(grown & full, np.minimum(low, np.maximum(step, 0.0)), low)
        mean = np.divide(total, Lk, out=np.zeros(T), where=Lk > 0)
        cur = np.where(full & np.isfinite(low), low, np.maximum(mean, 0.0))
        out[:, k] = cur if not k else np.where(grown, cur, out[:, k - 1])
        prev_L = np.maximum(prev_L, Lk)
    return out


def _synthetic_thinkbrake(ms: MeasurementSet, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(check, margin) float[T, K]: synthetic ThinkBrake signals (module docstring), own stream."""
    rng = synthetic_stream(ms, seed, THINKBRAKE_STREAM, "ThinkBrake checks")
    T, K = ms.L.shape
    base = np.asarray(ms.signals["margin"], dtype=np.float64) if "margin" in ms.signals \
        else np.zeros((T, K))
    check, margin = np.zeros((T, K)), np.zeros((T, K))
    for k in range(1, K):
        hit = rng.random(T) < 0.4
        shift = -0.5 * np.abs(rng.standard_normal(T)) + 0.3 * rng.standard_normal(T)
        ck, mk = hit.astype(np.float64), np.where(hit, base[:, k] + shift, 0.0)
        rep = ms.L[:, k] == ms.L[:, k - 1]
        check[:, k] = np.where(rep, check[:, k - 1], ck)
        margin[:, k] = np.where(rep, margin[:, k - 1], mk)
    return check, margin


def _synthetic_warmup(ms: MeasurementSet, seed: int, min_conf: np.ndarray) -> np.ndarray:
    """float[T, K] a synthetic ``deepconf_warmup_conf`` (module docstring), its own stream."""
    rng = synthetic_stream(ms, seed, DEEPCONF_WARMUP_STREAM, "DeepConf warm-up confidence")
    T, K = ms.L.shape
    end = min_conf[np.arange(T), ms.n]
    warm = np.round(np.maximum(end - np.abs(rng.normal(0.0, 0.3, size=T)), 0.0), 3)
    return np.repeat(warm[:, None], K, axis=1)


def add_peer_signals(ms: MeasurementSet, seed: int) -> MeasurementSet:
    """`ms` with the synthetic peer-probe signals added (module docstring); refuses a non-synthetic set.

    Only the positions up to each trajectory's `n` are meaningful (the padding repeats the last).
    """
    rng = synthetic_stream(ms, seed, STREAM, "peer-probe signals")
    T, K = ms.L.shape
    acc = ms.C / np.maximum(ms.probes, 1)[:, None].astype(np.float64)
    ans = np.full((T, K), -1.0)
    unc = np.zeros((T, K))
    conf = np.zeros((T, K))
    dtok = np.zeros((T, K))
    for k in range(K):
        a = acc[:, k]
        u, v, fresh = rng.random(T), rng.random(T), rng.integers(1, 4, size=T)
        correct, h, eps, pois = rng.random(T) < a, rng.random(T), rng.standard_normal(T), rng.poisson(4.0, size=T)
        empty = u < (0.15 if k == 0 else 0.05)
        prev = ans[:, k - 1] if k else np.full(T, -1.0)
        keep = (prev > 0) & (v < 0.6)
        cur = np.where(empty, -1.0, np.where(correct, 0.0, np.where(keep, prev, fresh.astype(np.float64))))
        uk = (h < 0.1 + 0.5 * (1.0 - a)).astype(np.float64)
        ck = _sigmoid(1.5 + 3.0 * (a - 0.5) + eps)
        tk = np.minimum(PEER_CAP, 3 + pois).astype(np.float64)
        if k:   # an empty step (and padding) repeats the previous position
            rep = ms.L[:, k] == ms.L[:, k - 1]
            cur, uk = np.where(rep, prev, cur), np.where(rep, unc[:, k - 1], uk)
            ck, tk = np.where(rep, conf[:, k - 1], ck), np.where(rep, dtok[:, k - 1], tk)
        ans[:, k], unc[:, k], conf[:, k], dtok[:, k] = cur, uk, ck, tk
    ans = _first_appearance(ans, 4)
    signals = dict(ms.signals)
    signals.update(dynasor_answer=ans, dynasor_window=window_masks(ans), dynasor_uncertain=unc,
                   dynasor_tokens=np.full((T, K), float(PEER_CAP + DYNASOR_SUFFIX_TOKENS)),
                   deer_conf=conf, deer_tokens=dtok + DEER_PROMPT_TOKENS)
    signals.update(deepconf_min_conf=_synthetic_min_conf(ms, seed))
    signals.update(deepconf_warmup_conf=_synthetic_warmup(ms, seed, signals["deepconf_min_conf"]))
    check, tb_margin = _synthetic_thinkbrake(ms, seed)
    signals.update(thinkbrake_check=check, thinkbrake_margin=tb_margin)
    prov: dict[str, Any] = dict(ms.provenance)
    prov["signals"] = {**dict(prov.get("signals", {})), **PEER_SIGNAL_DEFINITIONS}
    prov["deepconf"] = {"window": DEEPCONF_WINDOW, "top_k": 20}
    prov["peer_signals"] = {"generator": GENERATOR, "seed": int(seed), "stream": STREAM,
                            "synthetic": "SYNTHETIC peer-probe signals drawn from the recorded grades; "
                                         "no probe was decoded"}
    return dataclasses.replace(ms, signals=signals, provenance=prov)
