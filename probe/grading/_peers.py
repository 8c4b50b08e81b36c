"""The field methods' own probes, read as their sources read them: Dynasor-CoT's probe and DEER's trial answer.

otbench's STP answer probe (thinking closed, up to ``answer_limit`` tokens;
`probe_signals`) is otbench's signal. Dynasor-CoT and DEER each decode a
probe of their own, inside the thinking; this module states those probes
(prompt suffix, decode length, sampling, stops) and how each source reads
the decoded text and log-probabilities. The probe stage issues them per
position when the job asks (``probe.field_probes``); the stop rules that read
the recorded signals are `otbench.analysis.measurement.dynasor_own_stop` /
`deer_own_stop`.

**Dynasor-CoT** -- hao-ai-lab/Dynasor, commit
0d2f1b93a60e031cfc7fb43843d2b736b225960c, ``dynasor/core/cot.py``:

* the probe prompt is the prompt so far (inside the thinking) followed by the
  suffix of line 43 (`DYNASOR_SUFFIX`), decoded for at most 20 tokens
  (line 75) at temperature 0.6, top-p 0.95 (lines 72, 76), with no stop
  strings: it ends at end-of-sequence or after 20 tokens;
* its answer (`dynasor_obtain_answer`, lines 23-33) is the text before the
  first ``}`` that closes no ``{`` of the probe text, "" when there is none;
* it is *uncertain* (`dynasor_uncertain`, lines 121-124) when any of
  ``uncertain_words`` (line 5) is a substring of the lower-cased probe text:
  "polynomial" holds "no", a "Wait" after the box counts;
* answers agree by `eqaul_group` (``dynasor/core/evaluator.py`` lines
  749-762): classes built in order, each answer joining the first class whose
  representative it `math_equal`s (`_dynasor_equal`); a window agrees when
  that gives one class, i.e. every later answer math-equals the window's
  first; with `count_not_empty` (lines 745-746) all must be non-empty
  (cot.py lines 130-135).

**DEER** -- iie-ycx/DEER, commit c9dd19fbffa27f841cfe47502d015b63811b4d1b,
``vllm-deer.py``:

* the trial answer's prompt is the sequence so far followed by
  `DEER_PROMPT` (line 252; GPQA's other wording, line 254, is not used),
  decoded for at most ``prob_check_max_tokens`` = 20 tokens (line 179) with
  ``SamplingParams(max_tokens, stop=pred_prob_stop_tokens, logprobs=1)``
  (lines 432-437): vLLM's default temperature 1.0 and top-p 1.0 (the
  temperature line is commented out), the stop strings of line 269
  (`DEER_STOPS`) and end-of-sequence;
* its confidence (`deer_confidence`, ``calculate_average_max_prob_from_logprobs``
  lines 100-149, policy ``avg1``, line 167) is the arithmetic mean of the
  probabilities of tokens ``1 .. N-1`` of the ``N`` decoded tokens: the first
  (the ``{`` after ``\\boxed``) skipped, the token that completes the stop
  string (the closing brace) included. ``N < 1`` gives 0.0 (line 113);
  ``N = 1`` divides by zero in the source (the question ends in error);
  otbench records 0.0, which never exceeds a threshold.

otbench decodes both in token space: the suffix is tokenized on its own and
appended to the retained prefix's ids (the source appends text and
re-tokenizes the whole; the prefix cache then serves the prefix). A stop
string is found the way vLLM finds it: at the first decoded token whose text
(decoded after the prompt) contains it; the tokens after it are not DEER's
(the request decodes all 20 without stops, so the end-of-sequence token's
probability is known too, and is cut here).
"""

import math
from collections.abc import Callable, Sequence
from typing import NamedTuple

from ._dynasor_equal import math_equal
from otbench.errors import ArgumentError

dynasor_math_equal = math_equal
"""Dynasor-CoT's answer equivalence (`math_equal` of ``dynasor/core/evaluator.py``; `_dynasor_equal`)."""

__all__ = ["DEER_MAX_TOKENS", "DEER_PROMPT", "DEER_SAMPLING", "DEER_STOPS", "DYNASOR_MAX_TOKENS",
           "DYNASOR_SAMPLING", "DYNASOR_SUFFIX", "DYNASOR_UNCERTAIN_WORDS", "DeerTrial", "DynasorProbe",
           "DYNASOR_WINDOW_BITS", "deer_confidence", "deer_cut", "deer_trial", "dynasor_agreement",
           "dynasor_math_equal", "dynasor_windows",
           "dynasor_obtain_answer", "dynasor_probe", "dynasor_uncertain"]

DYNASOR_SUFFIX = "... Oh, I suddenly got the answer to the whole problem, **Final Answer**\n\n\\[ \\boxed{"
"""Dynasor-CoT's probing suffix (``dynasor/core/cot.py`` line 43, `probeing_suffix`)."""
DYNASOR_MAX_TOKENS = 20
DYNASOR_SAMPLING = {"temperature": 0.6, "top_p": 0.95}
DYNASOR_UNCERTAIN_WORDS = ("wait", "hold", "but", "okay", "no", "hmm")
"""``uncertain_words`` of ``dynasor/core/cot.py`` line 5, matched as substrings (lines 121-124)."""

DEER_PROMPT = "\n**Final Answer**\n\\boxed"
"""DEER's answer prompt (``vllm-deer.py`` line 252, `answer_prompt_str`)."""
DEER_MAX_TOKENS = 20
DEER_SAMPLING = {"temperature": 1.0, "top_p": 1.0}
DEER_STOPS = (" }", "}\n", "}\n\n", "}.", "}.\n", "}\\", "}}", ")}", ")}.", ")}\n")
"""``pred_prob_stop_tokens`` of ``vllm-deer.py`` line 269 (stop *strings*)."""


def dynasor_obtain_answer(text: str) -> str:
    """`obtain_answer` (cot.py lines 23-33): the text before the first unmatched ``}``, else "".

    >>> dynasor_obtain_answer("\\\\frac{1}{2}} \\\\]")
    '\\\\frac{1}{2}'
    >>> dynasor_obtain_answer("42 and more")
    ''
    """
    depth = 0
    for i, c in enumerate(text):
        if c == "{":
            depth += 1
        elif c == "}":
            if not depth:
                return text[:i]
            depth -= 1
    return ""


def dynasor_uncertain(text: str, words: Sequence[str] = DYNASOR_UNCERTAIN_WORDS) -> bool:
    """cot.py lines 121-124: any of `words` is a substring of the lower-cased probe text.

    >>> dynasor_uncertain("x^2 + 1, a polynomial}")
    True
    >>> dynasor_uncertain("42} \\\\] Wait")
    True
    >>> dynasor_uncertain("42} \\\\]")
    False
    """
    low = text.lower()
    return any(w in low for w in words)


DYNASOR_WINDOW_BITS = 16
"""The longest Dynasor window (``threshold``) a recorded ``dynasor_window`` mask answers for."""


def dynasor_agreement(answers: Sequence[str], equal: Callable[[str, str], bool] = math_equal,
                      bits: int = DYNASOR_WINDOW_BITS) -> tuple[list[int], list[int]]:
    """Per position: (class id, window mask) of a trajectory's Dynasor answers, in order.

    * class id: `eqaul_group`'s classes (evaluator.py lines 749-762) built
      over the trajectory so far: an answer joins the first earlier class
      whose representative it `equal`s (``equal(answer, rep)``, the source's
      argument order), else opens the next class (0, 1, ...); -1 for an
      empty answer (never counted, `count_not_empty`). A position's id
      depends only on the answers up to it.
    * window mask ``m[j]``: bit ``w - 1`` (``1 <= w <= bits``) is set when
      the `w` answers ending at `j` (positions ``j - w + 1 .. j``) are all
      non-empty and each later one `equal`s the window's first. That is
      `eqaul_group` over the window giving one class (a second class, once
      opened, never closes, so one class means every later answer equals
      the first) with `count_not_empty` = `w` (cot.py lines 130-135): the
      window passes Dynasor's agreement and non-empty checks exactly when
      the bit is set -- exact even where `math_equal` is not transitive,
      which class ids are not. A mask reads only positions up to `j`, so a
      decision at `k` that reads ``m[k - 1]`` sees nothing after `k - 1`.

    >>> dynasor_agreement(["1/2", "0.5", "", "7", "7"])
    ([0, 0, -1, 1, 1], [1, 3, 0, 1, 3])
    """
    reps: list[str] = []
    ids = []
    for a in answers:
        if a == "":
            ids.append(-1)
            continue
        for i, rep in enumerate(reps):
            if equal(a, rep):
                ids.append(i)
                break
        else:
            reps.append(a)
            ids.append(len(reps) - 1)
    return ids, dynasor_windows(answers, equal, bits)


def dynasor_windows(answers: Sequence[str], equal: Callable[[str, str], bool] = math_equal,
                    bits: int = DYNASOR_WINDOW_BITS) -> list[int]:
    """The window masks of `dynasor_agreement` alone (``m[j]`` for every position `j`).

    >>> dynasor_windows(["7", "7", "7", "8"], equal=lambda a, b: a == b)
    [1, 3, 7, 1]
    """
    out = []
    for j in range(len(answers)):
        mask = 0
        for w in range(1, min(int(bits), j + 1) + 1):
            first = answers[j - w + 1]
            if first == "":
                break       # every longer window holds this empty answer too
            if all(answers[i] != "" and (answers[i] == first or equal(answers[i], first))
                   for i in range(j - w + 2, j + 1)):
                mask |= 1 << (w - 1)
        out.append(mask)
    return out


class DynasorProbe(NamedTuple):
    """One position's Dynasor probe: its text, answer, certainty and decoded tokens (stop counted)."""

    text: str
    answer: str
    uncertain: bool
    decoded: int


def dynasor_probe(ids: Sequence[int], stopped: bool, *, decode: Callable[[list[int]], str],
                  context: Sequence[int] = (), words: Sequence[str] = DYNASOR_UNCERTAIN_WORDS) -> DynasorProbe:
    """Read one Dynasor probe: `ids` decoded after `context` (the suffix's last ids, so a leading
    space decodes as the server streams it), its answer and certainty; `stopped`: an
    end-of-sequence id ended it (a decoded token, not part of the text)."""
    pre = len(decode(list(context)))
    text = decode(list(context) + list(ids))[pre:]
    return DynasorProbe(text, dynasor_obtain_answer(text), dynasor_uncertain(text, words),
                        len(ids) + int(bool(stopped)))


def deer_cut(ids: Sequence[int], *, decode: Callable[[list[int]], str], eos: Sequence[int],
             context: Sequence[int] = (), stops: Sequence[str] = DEER_STOPS,
             limit: int = DEER_MAX_TOKENS) -> int:
    """How many of `ids` (decoded with no stops) DEER's request decodes: through the first token that
    is an end-of-sequence id or whose text (after `context`) completes a stop string, at most `limit`.

    >>> toks = {1: "{", 2: "4", 3: "2", 4: "}", 5: "\\n", 6: "x"}
    >>> dec = lambda seq: "".join(toks[t] for t in seq)
    >>> deer_cut([1, 2, 3, 4, 5, 6], decode=dec, eos=[9])     # "}\\n" completes at the newline
    5
    """
    ids = list(ids)[:limit]
    eos = {int(t) for t in eos}
    pre = len(decode(list(context)))
    for i, t in enumerate(ids):
        if int(t) in eos:
            return i + 1
        text = decode(list(context) + ids[:i + 1])[pre:]
        if any(s in text for s in stops):
            return i + 1
    return len(ids)


def deer_confidence(logprobs: Sequence[float]) -> float:
    """DEER's ``avg1`` confidence (lines 100-149): the mean probability of tokens 1..N-1.

    0.0 for fewer than two tokens (see the module docstring).

    >>> round(deer_confidence([math.log(p) for p in (0.9, 0.8, 0.6, 0.99)]), 4)
    0.7967
    """
    if len(logprobs) < 2:
        return 0.0
    vals = [math.exp(float(x)) for x in logprobs[1:]]
    return float(sum(vals) / len(vals))


class DeerTrial(NamedTuple):
    """One position's DEER trial answer: its decoded tokens (as DEER stops) and their confidence."""

    decoded: int
    conf: float


def deer_trial(ids: Sequence[int], logprobs: Sequence[float], *, decode: Callable[[list[int]], str],
               eos: Sequence[int], context: Sequence[int] = ()) -> DeerTrial:
    """Read one DEER trial answer decoded without stops: cut it as DEER's request stops (`deer_cut`)
    and average its probabilities (`deer_confidence`)."""
    if len(logprobs) != len(ids):
        raise ArgumentError(f"{len(logprobs)} log-probabilities for {len(ids)} decoded tokens")
    n = deer_cut(ids, decode=decode, eos=eos, context=context)
    return DeerTrial(n, deer_confidence(list(logprobs)[:n]))
