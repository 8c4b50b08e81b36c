"""Answer extraction in the forms lm-evaluation-harness uses, restated from its code.

Restated from EleutherAI/lm-evaluation-harness at commit 4e7e0d47 (restated, not copied):

* `RegexFilter.apply` (`lm_eval/filters/extraction.py`, lines 15-62): for
  each response, `re.findall(pattern, resp)`; no match gives the fallback
  (default `"[invalid]"`); else the match at `group_select` (0: the first,
  -1: the last); when the pattern has several groups `findall` gives a
  tuple per match and the first non-empty group is kept (none: the
  fallback); the result is stripped. A response that is not a string is
  read as `""`.
* `TakeFirstFilter` (`lm_eval/filters/selection.py`, lines 12-23): the first
  filtered response of each document.
* The GSM8K filter lists: `strict-match` `#### (\\-?[0-9\\.\\,]+)`
  (`lm_eval/tasks/gsm8k/gsm8k.yaml`), the chain-of-thought strict match
  `The answer is (\\-?[0-9\\.\\,]+).` (`gsm8k-cot.yaml`, line 49) and
  `flexible-extract` `(-?[$0-9.,]{2,})|(-?[0-9]+)` with `group_select: -1`
  (`gsm8k-cot.yaml`, lines 53-55).
* `exact_match_hf_evaluate` (`lm_eval/api/metrics.py`, lines 210-243): each
  regex of `regexes_to_ignore` removed from prediction and reference in
  turn (`re.sub(s, "", x)`), then lower case (`ignore_case`), then
  `string.punctuation` deleted (`ignore_punctuation`), then digits deleted
  (`ignore_numbers`), then equality. GSM8K's metric list ignores `","`,
  `"\\$"`, `"(?s).*#### "` and `"\\.$"` with `ignore_case: true`.

otbench uses an extraction to read a source's own answer the way the source
read it (`docs/guides/import-traces.md`): the extracted text is what
otbench's grader then judges (as the content of a `\\boxed{}`).
"""

import dataclasses
import re
import string
from collections.abc import Mapping, Sequence
from typing import Any

from otbench.errors import OtbenchError

FALLBACK = "[invalid]"
"""`RegexFilter`'s default fallback: what a response with no match becomes."""


class ExtractionError(OtbenchError, ValueError):
    """An extraction setting is malformed; the message names the setting."""


@dataclasses.dataclass(frozen=True)
class Extraction:
    """One lm-eval `regex` filter followed by `take_first` (see the module docstring).

    Attributes:
      name: the filter's name as lm-eval calls it (`strict-match`, ...).
      pattern: the regular expression (`regex_pattern`).
      group_select: which match to keep (`group_select`; -1: the last).
      fallback: what a response without a match becomes.
    """

    name: str
    pattern: str
    group_select: int = 0
    fallback: str = FALLBACK

    def __post_init__(self):
        if not isinstance(self.pattern, str) or not self.pattern:
            raise ExtractionError(f"extraction {self.name!r}: 'regex' must be a non-empty pattern")
        try:
            re.compile(self.pattern)
        except re.error as e:
            raise ExtractionError(f"extraction {self.name!r}: 'regex' {self.pattern!r} does not "
                                  f"compile ({e})") from None
        if isinstance(self.group_select, bool) or not isinstance(self.group_select, int):
            raise ExtractionError(f"extraction {self.name!r}: 'group_select' must be an integer, "
                                  f"got {self.group_select!r}")

    def apply(self, response: Any) -> str:
        """The filtered answer of one response (lm-eval's `RegexFilter.filter_set`, one item)."""
        if not isinstance(response, str):
            response = ""
        found = re.findall(self.pattern, response)
        if not found:
            return self.fallback
        try:
            m = found[self.group_select]
        except IndexError:
            # lm-eval would raise here; a selection past the matches is no answer
            return self.fallback
        if isinstance(m, tuple):
            m = next((g for g in m if g), None)
            if m is None:
                return self.fallback
        return m.strip()

    def matched(self, response: Any) -> bool:
        """Whether the response holds an answer of this form (the result is not the fallback)."""
        return self.apply(response) != self.fallback


PRESETS: dict[str, Extraction] = {
    "strict-match": Extraction("strict-match", r"#### (\-?[0-9\.\,]+)"),
    "the-answer-is": Extraction("the-answer-is", r"The answer is (\-?[0-9\.\,]+)."),
    "flexible-extract": Extraction("flexible-extract", r"(-?[$0-9.,]{2,})|(-?[0-9]+)", -1),
}
"""lm-eval's GSM8K filters by name: `strict-match` (`#### N`), `the-answer-is` (the
chain-of-thought task's strict match, "The answer is N."), `flexible-extract` (the last
number)."""


def extraction(spec: Any) -> Extraction | None:
    """The `Extraction` of a setting: a preset name, or `{regex, group_select, fallback, name}`.

    None (no setting) keeps otbench's own rule (the final `\\boxed{}`).
    """
    if spec is None:
        return None
    if isinstance(spec, Extraction):
        return spec
    if isinstance(spec, str):
        if spec not in PRESETS:
            raise ExtractionError(f"extraction {spec!r} is not one of {', '.join(PRESETS)} "
                                  "(or give a table with 'regex')")
        return PRESETS[spec]
    if isinstance(spec, Mapping):
        unknown = sorted(set(spec) - {"regex", "group_select", "fallback", "name"})
        if unknown:
            raise ExtractionError(f"extraction: unknown key '{unknown[0]}' (keys: regex, "
                                  "group_select, fallback, name)")
        if "regex" not in spec:
            raise ExtractionError("extraction: a table needs 'regex'")
        return Extraction(str(spec.get("name", "regex")), spec["regex"],
                          spec.get("group_select", 0), spec.get("fallback", FALLBACK))
    raise ExtractionError(f"extraction must be a preset name or a table, got {type(spec).__name__}")


def exact_match(prediction: str, reference: str, *, regexes_to_ignore: Sequence[str] = (),
                ignore_case: bool = False, ignore_punctuation: bool = False,
                ignore_numbers: bool = False) -> bool:
    """lm-eval's `exact_match` of one prediction (see the module docstring for the order of steps)."""
    p, r = prediction, reference
    for s in regexes_to_ignore:
        p, r = re.sub(s, "", p), re.sub(s, "", r)
    if ignore_case:
        p, r = p.lower(), r.lower()
    if ignore_punctuation:
        table = str.maketrans("", "", string.punctuation)
        p, r = p.translate(table), r.translate(table)
    if ignore_numbers:
        table = str.maketrans("", "", string.digits)
        p, r = p.translate(table), r.translate(table)
    return p == r


GSM8K_IGNORE = (",", r"\$", "(?s).*#### ", r"\.$")
"""GSM8K's `regexes_to_ignore` (with `ignore_case: true`), `lm_eval/tasks/gsm8k/gsm8k.yaml`."""
