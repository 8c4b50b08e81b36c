"""The field signals of one decoded probe answer, as `SIGNAL_DEFINITIONS` defines them (one place, swappable).

`probe_signals` turns one answer probe (its decoded text, its answer ids
and their log-probabilities) into the per-position values the field
methods read (``otbench.analysis.measurement.SIGNAL_DEFINITIONS``):

* ``answer``: the extracted answer (`answer_key`; None = nothing
  extracted). The recorded column numbers answers per trajectory (0 = the
  graded-correct one, -1 = none); the rules only compare ids for equality
  and ``>= 0``, so the online controller numbers keys by first appearance
  (`AnswerIds`) and grades afterwards;
* ``answer_conf``: the mean token probability of the decoded answer span
  (DEER's avg1): the mean of `exp(logp)` over the answer's decoded ids
  (its stop id excluded), 0 for an empty answer;
* ``hesitation``: 1 when the decoded text contains one of
  `HESITATION_WORDS` as a whole word (any case), else 0;
* ``answer_tokens``: the ids the probe decoded, its stop id included (a
  sampled token, as the probe counts generated tokens).

The probe stage records the same signals; when it grows a shared helper,
this module is the one place the controller's definition is swapped.
"""

import math
import re
from collections.abc import Sequence
from typing import NamedTuple

from otbench.probe.grading import extract_choice, extract_code, last_boxed

HESITATION_WORDS = ("wait", "hold", "but", "okay", "no", "hmm")
"""Dynasor-CoT's ``uncertain_words`` (hao-ai-lab/Dynasor ``dynasor/core/cot.py`` line 5)."""


def answer_key(text: str, task: str = "math", n_options: int = 4) -> str | None:
    """The extracted answer of a probe's decoded text (answer prefix included), normalized; None if none.

    math: the last ``\\boxed{...}`` without spaces and one ``$`` each side;
    choice: the chosen letter (`extract_choice`); code: the last Python
    block with trailing spaces stripped per line.
    """
    if task == "choice":
        return extract_choice(text, n_options)
    if task == "code":
        code = extract_code(text)
        return None if code is None else "\n".join(ln.rstrip() for ln in code.strip().splitlines())
    box = last_boxed(text)
    if box is None:
        return None
    key = "".join(box.split()).removeprefix("$").removesuffix("$")
    return key or None


def hesitates(text: str, words: Sequence[str] = HESITATION_WORDS) -> bool:
    """Whether `text` contains one of `words` as a whole word (case-insensitive)."""
    if not words:
        return False
    pat = r"\b(?:" + "|".join(re.escape(w) for w in words) + r")\b"
    return re.search(pat, text, flags=re.IGNORECASE) is not None


class ProbeSignals(NamedTuple):
    """One position's field signals before per-trajectory numbering (`answer` is the key)."""

    answer: str | None
    answer_conf: float
    hesitation: int
    answer_tokens: int


def probe_signals(text: str, answer_ids: Sequence[int], stopped: bool, logprobs: Sequence[float] | None,
                  *, task: str = "math", n_options: int = 4,
                  words: Sequence[str] = HESITATION_WORDS) -> ProbeSignals:
    """The field signals of one probe (module docstring).

    `text`: its decoded text, answer prefix included; `answer_ids`: the
    decoded ids without the stop id; `stopped`: whether a stop id ended it;
    `logprobs`: the log-probability of each of `answer_ids` (None: not read;
    the confidence is then NaN).
    """
    if logprobs is None:
        conf = float("nan")
    elif len(answer_ids) == 0:
        conf = 0.0
    else:
        if len(logprobs) != len(answer_ids):
            raise ValueError(f"{len(logprobs)} log-probabilities for {len(answer_ids)} answer ids")
        conf = math.fsum(math.exp(float(x)) for x in logprobs) / len(logprobs)
    return ProbeSignals(answer_key(text, task, n_options), conf, int(hesitates(text, words)),
                        len(answer_ids) + int(bool(stopped)))


class AnswerIds:
    """Per-trajectory answer ids: equal keys get equal ids, by first appearance from 1; None -> -1.

    (The recorded column reserves 0 for the graded-correct answer; online
    nothing is graded yet, and only equality and ``>= 0`` enter the rules.)
    """

    def __init__(self) -> None:
        self._ids: dict[str, int] = {}

    def __call__(self, key: str | None) -> int:
        if key is None:
            return -1
        return self._ids.setdefault(key, len(self._ids) + 1)
