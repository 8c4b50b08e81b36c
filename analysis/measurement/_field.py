"""Optional per-position signals for the field's early-exit methods, and a synthetic generator.

Four optional ``signal.*`` columns; a set without them still loads (only
the methods that need them refuse it, naming the missing signal). Their
definitions travel in the set's provenance under ``"signals"``
(`SIGNAL_DEFINITIONS`), so a manifest says what each column means.

`add_field_signals` draws them for a *synthetic* set from its recorded
grades, from a seeded stream of its own (the simulator's draws are
untouched, so every existing simulated array is bit-identical), and marks
them synthetic in the provenance. Model of the draw, per trajectory, walking
positions in order (an empty step, `L(k) = L(k-1)`, repeats the previous
position's values: the same prefix gives the same probe):

* ``answer``: no answer is extracted with probability 0.10 at `k = 0` and
  0.02 after (id -1); else the correct answer (id 0) with probability
  `C(k) / P`; else a wrong answer, the previous wrong id with probability
  0.6 when the previous position was wrong, a fresh id in 1..3 otherwise;
* ``answer_conf``: `sigmoid(1 + 3 (C/P - 1/2) + 0.5 [same answer as k-1] + ε)`,
  `ε ~ N(0, 1)`; `sigmoid(-2 + ε)` when no answer was extracted;
* ``hesitation``: 1 with probability `0.05 + 0.4 (1 - C/P)`, else 0;
* ``answer_tokens``: `min(20, 2 + Poisson(5))` decoded tokens, 20 (the
  sources' cap) when no answer was extracted.
"""

import dataclasses
from typing import Any

import numpy as np

from . import _libm
from ._types import MeasurementSet
from otbench.errors import ArgumentError

GENERATOR = "otbench.field-signals/1"
STREAM = 27          # mixed into the seed: a stream separate from the simulator's
ANSWER_CAP = 20      # decoded-token cap of a probe / trial answer (Dynasor, DEER)

HESITATION_WORDS = ("wait", "hold", "but", "okay", "no", "hmm")
"""Dynasor-CoT's hesitation words (hao-ai-lab/Dynasor, `dynasor/core/cot.py`), the default list."""

SIGNAL_DEFINITIONS = {
    "answer": "id of the answer extracted from the position's first answer probe, numbered per "
              "trajectory (0 = the graded-correct answer), -1 when no answer was extracted; "
              "equal ids = equal answers (answer agreement, Dynasor-CoT / answer consistency). "
              "Extraction and equality: the grader's (math: the last balanced \\boxed{} content, "
              "whitespace and one pair of $ removed; choice: the letter; code: the last Python "
              "block, line ends stripped); every graded-correct answer is 0",
    "answer_conf": "mean token probability of the decoded answer span of that probe, in [0, 1] "
                   "(DEER's answer confidence, policy avg1): the model's raw next-token "
                   "probabilities (before temperature / top-k / top-p) of the decoded tokens "
                   "covering the extracted answer's characters (math: the boxed content; choice: "
                   "the letter; code: the block); all decoded tokens when no answer was "
                   "extracted; 0 when the probe decoded none",
    "hesitation": "1 when the probe's decoded text through the end of its answer (the whole "
                  "decoded text when none was extracted) contains a hesitation word as a whole "
                  "word, case-insensitive (Dynasor's list: wait, hold, but, okay, no, hmm, unless "
                  "the run lists others), else 0",
    "answer_tokens": "decoded tokens of that probe through the token that closes its answer (the "
                     "closing brace of the box, the letter, the block's end), all decoded tokens "
                     "(the stop token counted) when no answer was extracted: the recorded decode "
                     "cost of a per-position probe / trial answer stopped at its answer",
}
FIELD_SIGNALS = tuple(SIGNAL_DEFINITIONS)

PROMPT_DEFINITION = ("the trajectory's prompt length in tokens (the ids the think request was sent), "
                     "the same at every position: the net cost's partial KV block is (prompt_tokens "
                     "+ L(k)) mod block (docs/rules.md, what a decision costs); a set without it is "
                     "charged L(k) mod block")
"""The definition of the optional ``prompt_tokens`` signal the probe writes beside its others (its
reader: `otbench.analysis.methods.partial_block`)."""


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + _libm.exp(-x))


def synthetic_stream(ms: MeasurementSet, seed: int, stream: int, what: str) -> np.random.Generator:
    """The random stream of a synthetic signal draw: `seed` mixed with the draw's own `stream`;
    refuses a set that is not synthetic (`what` names the signals and where real ones come from)."""
    if not ms.synthetic:
        raise ArgumentError(f"{what} are drawn only for synthetic sets; a real set records "
                            f"them from the probe{'' if what == 'field signals' else ' (probe.field_probes)'}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ArgumentError(f"`seed` must be a non-negative integer, got {seed!r}")
    return np.random.default_rng(np.random.SeedSequence([int(seed), stream]))


def add_field_signals(ms: MeasurementSet, seed: int) -> MeasurementSet:
    """`ms` with the synthetic field signals added (module docstring); refuses a non-synthetic set."""
    rng = synthetic_stream(ms, seed, STREAM, "field signals")
    T, K = ms.L.shape
    acc = ms.C / np.maximum(ms.probes, 1)[:, None].astype(np.float64)
    ans = np.full((T, K), -1.0)
    conf = np.zeros((T, K))
    hes = np.zeros((T, K))
    tok = np.zeros((T, K))
    for k in range(K):
        a = acc[:, k]
        u, v, fresh = rng.random(T), rng.random(T), rng.integers(1, 4, size=T)
        eps, h, pois = rng.standard_normal(T), rng.random(T), rng.poisson(5.0, size=T)
        missing = u < (0.10 if k == 0 else 0.02)
        correct = rng.random(T) < a
        prev = ans[:, k - 1] if k else np.full(T, -1.0)
        keep_wrong = (prev > 0) & (v < 0.6)
        cur = np.where(correct, 0.0, np.where(keep_wrong, prev, fresh.astype(np.float64)))
        cur = np.where(missing, -1.0, cur)
        same = ((cur == prev) & (cur >= 0)).astype(np.float64)
        c = np.where(missing, _sigmoid(-2.0 + eps), _sigmoid(1.0 + 3.0 * (a - 0.5) + 0.5 * same + eps))
        hk = (h < 0.05 + 0.4 * (1.0 - a)).astype(np.float64)
        tk = np.where(missing, float(ANSWER_CAP), np.minimum(ANSWER_CAP, 2 + pois).astype(np.float64))
        if k:   # an empty step (and padding) repeats the previous position
            rep = ms.L[:, k] == ms.L[:, k - 1]
            cur = np.where(rep, prev, cur)
            c = np.where(rep, conf[:, k - 1], c)
            hk = np.where(rep, hes[:, k - 1], hk)
            tk = np.where(rep, tok[:, k - 1], tk)
        ans[:, k], conf[:, k], hes[:, k], tok[:, k] = cur, c, hk, tk
    signals = dict(ms.signals)
    signals.update(answer=ans, answer_conf=conf, hesitation=hes, answer_tokens=tok)
    prov: dict[str, Any] = dict(ms.provenance)
    prov["signals"] = {**dict(prov.get("signals", {})), **SIGNAL_DEFINITIONS}
    prov["field_signals"] = {"generator": GENERATOR, "seed": int(seed), "stream": STREAM,
                             "synthetic": "SYNTHETIC field signals drawn from the recorded grades; "
                                          "no probe was decoded"}
    return dataclasses.replace(ms, signals=signals, provenance=prov)
