"""The field's per-probe signals from one decoded probe: answer key, answer span, confidence, hesitation.

One helper shared by every stage that decodes an answer probe and records
the optional field signals (`otbench.analysis.measurement.SIGNAL_DEFINITIONS`):
the probe stage (offline, on its recorded probes) and an online controller
(on its side requests). Both call `probe_signals` on the same inputs (the
probe's decoded ids, their raw log-probabilities, the family's answer
prefix, a decoder), so the signal means the same thing in both.

Pinned here (and in the definitions):

* the answer and its key (`answer_key`): what the grader extracts -- math:
  the last well-formed ``\\boxed`` (the math grader's rule, `boxed_candidates`),
  its content with all whitespace and one pair of ``$`` removed; choice: the
  letter (`extract_choice`); code: the last Python block
  (`extract_code`), each line's end whitespace and blank lines dropped.
  Equal keys are equal answers; a graded-correct answer is always id 0
  (`number_answers`), so the grader's own equivalence decides the one
  answer that matters;
* the answer span: the decoded tokens covering the answer's characters
  (math: the box's content, between its braces; choice: the letter; code:
  the block's body); the *close*: the token holding the answer's last
  character (math: the closing brace). `answer_tokens` counts the decoded
  tokens through the close (what a trial answer stopped at its answer
  decodes), `answer_conf` is the mean probability over the span, and
  `hesitation` reads the decoded text through the close;
* no answer extracted: the span is every decoded token, `answer_tokens`
  every decoded token plus the stop token when one ended the probe;
* hesitation words: whole words (``\\b`` on both sides), case-insensitive
  (`hesitates`): "No," and "WAIT" count, "not", "hmmm" and "button" do not.

Token positions come from decoding prefixes of the probe (`char_ends`), so
a character is attributed to the token whose decoding first contains it
(byte-level tokenizers split a character across tokens: its last token
holds it).
"""

import math
import re
from collections.abc import Callable, Sequence
from typing import NamedTuple

from otbench.analysis.measurement import HESITATION_WORDS

from ._choice import answer_letters
from ._code import PYTHON_TAGS, fenced_blocks
from ._math import boxed_spans
from otbench.errors import ArgumentError

__all__ = ["HESITATION_WORDS", "ProbeSignals", "answer_key", "answer_location", "hesitates",
           "hesitation_pattern", "number_answers", "probe_signals"]


class ProbeSignals(NamedTuple):
    """One probe's field signals (before numbering: `key` is the answer's key, None when none)."""

    key: str | None
    conf: float
    hesitation: bool
    tokens: int


def hesitation_pattern(words: Sequence[str] = HESITATION_WORDS) -> "re.Pattern[str]":
    """The whole-word, case-insensitive pattern of `words` (each a non-empty word, no spaces)."""
    ws = [str(w) for w in words]
    if not ws or any(not w or not re.fullmatch(r"\w+(?:['-]\w+)*", w) for w in ws):
        raise ArgumentError(f"hesitation words must be a non-empty list of words, got {list(words)!r}")
    return re.compile(r"\b(?:" + "|".join(re.escape(w) for w in ws) + r")\b", re.IGNORECASE)


_DEFAULT = hesitation_pattern()


def hesitates(text: str, words: "Sequence[str] | re.Pattern[str]" = HESITATION_WORDS) -> bool:
    """Whether `text` contains one of `words` as a whole word (case-insensitive).

    >>> hesitates("No, wait.")
    True
    >>> hesitates("nothing to button up")
    False
    """
    pat = words if isinstance(words, re.Pattern) else (
        _DEFAULT if tuple(words) == HESITATION_WORDS else hesitation_pattern(words))
    return pat.search(text) is not None


def _math_location(text: str) -> tuple[int, int, int, str] | None:
    """(content start, content end, close end, key) of the last well-formed box (`boxed_spans`)."""
    spans = boxed_spans(text)
    found = spans[-1] if spans else None
    if found is None:
        return None
    s, e, close = found
    key = "".join(text[s:e].split())
    if len(key) >= 2 and key[0] == "$" and key[-1] == "$":
        key = key[1:-1]
    return s, e, close, key


def _choice_location(text: str, n_options: int) -> tuple[int, int, int, str] | None:
    from ._choice import LETTERS

    letters = LETTERS[:n_options]
    valid = [(pos, letter) for pos, letter, _ in answer_letters(text) if letter in letters]
    if not valid:
        return None
    pos, letter = valid[-1]
    at = text.find(letter, pos)
    if at < 0:                      # the "alone" form is reported at 0 of the stripped text
        at = text.rfind(letter)
    return at, at + 1, at + 1, letter


def _code_location(text: str) -> tuple[int, int, int, str] | None:
    py = [code for lang, code in fenced_blocks(text) if lang in PYTHON_TAGS]
    if not py:
        return None
    body = py[-1].rstrip("\n")
    at = text.rfind(body) if body else -1
    key = "\n".join(line.rstrip() for line in py[-1].splitlines() if line.strip())
    if at < 0:
        return None
    return at, at + len(body), at + len(body), key


def answer_location(task: str, text: str, *, n_options: int = 4) -> tuple[int, int, int, str] | None:
    """Where the grader's answer is in `text`: (start, end, close end, key) in characters, or None.

    `[start, end)` is the answer's span (see the module docstring), `close
    end` the character just past the one that closes it; `key` compares
    answers (equal keys, equal answers).
    """
    if task == "math":
        return _math_location(text)
    if task == "choice":
        return _choice_location(text, n_options)
    if task == "code":
        return _code_location(text)
    raise ArgumentError(f"unknown task {task!r}")


def answer_key(task: str, text: str, *, n_options: int = 4) -> str | None:
    """The key of the answer the grader extracts from `text` (`answer_location`), None when none."""
    loc = answer_location(task, text, n_options=n_options)
    return None if loc is None else loc[3]


def number_answers(keys: Sequence[str | None], correct: Sequence[bool]) -> list[int]:
    """Per-trajectory answer ids: 0 for a graded-correct answer, -1 for none, else 1, 2, ... by first
    appearance of each key (equal keys, equal ids).

    >>> number_answers(["7", None, "3", "7", "5", "3"], [False, False, False, False, True, False])
    [1, -1, 2, 1, 0, 2]
    """
    ids: dict[str, int] = {}
    out = []
    for key, ok in zip(keys, correct, strict=True):
        if ok:
            out.append(0)
        elif key is None:
            out.append(-1)
        else:
            out.append(ids.setdefault(key, len(ids) + 1))
    return out


def char_ends(decode: Callable[[list[int]], str], prefix: Sequence[int], ids: Sequence[int]
              ) -> Callable[[int], int]:
    """`f(i)`: characters of `decode(prefix + ids[:i])` (memoised; for the binary searches below)."""
    memo: dict[int, int] = {}
    pre, toks = list(prefix), list(ids)

    def f(i: int) -> int:
        if i not in memo:
            memo[i] = len(decode(pre + toks[:i]))
        return memo[i]
    return f


def _first(n: int, pred: Callable[[int], bool]) -> int:
    """The smallest `i` in `0..n` with `pred(i)` (`pred` monotone; n when none)."""
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi) // 2
        if pred(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


def probe_signals(task: str, ids: Sequence[int], logprobs: Sequence[float] | None, *,
                  prefix: Sequence[int], decode: Callable[[list[int]], str], stopped: bool,
                  words: "Sequence[str] | re.Pattern[str]" = HESITATION_WORDS, n_options: int = 4,
                  text: str | None = None) -> ProbeSignals:
    """The field signals of one answer probe (module docstring).

    Args:
      task: the question's task ("math", "choice", "code").
      ids: the probe's decoded ids (without the stop id).
      logprobs: the raw log-probability of each of `ids` (None: `conf` is NaN,
        for a caller that records no confidence).
      prefix: the ids before `ids` that the grader reads with them (the
        family's answer prefix); the answer may start there (a prefix ending
        in ``\\boxed{``).
      decode: ids -> text, as the grader's text is decoded (special tokens
        skipped).
      stopped: a stop id ended the probe (it counts as decoded when no
        answer was extracted).
      text: `decode(prefix + ids)` when the caller has it already.
    """
    if logprobs is not None and len(logprobs) != len(ids):
        raise ArgumentError(f"{len(logprobs)} log-probabilities for {len(ids)} decoded tokens")
    full = decode(list(prefix) + list(ids)) if text is None else text
    f = char_ends(decode, prefix, ids)
    n = len(ids)
    pre = f(0)
    loc = answer_location(task, full, n_options=n_options)
    if loc is None:
        span = (0, n)
        tokens = n + int(bool(stopped))
        read = full[pre:]
        key = None
    else:
        s, e, close, key = loc
        # token i holds character c when f(i) <= c < f(i + 1)
        start = 0 if s < pre else _first(n, lambda i: f(i + 1) > s)
        end = 0 if e <= pre else _first(n, lambda i: f(i) >= e)
        tokens = 0 if close <= pre else _first(n, lambda i: f(i) >= close)
        span = (start, max(start, end))
        read = full[pre:close]
    if logprobs is None:
        conf = float("nan")
    else:
        lo, hi = span
        vals = [math.exp(float(x)) for x in logprobs[lo:hi]]
        conf = float(sum(vals) / len(vals)) if vals else 0.0
    return ProbeSignals(key, conf, hesitates(read, words), int(tokens))
