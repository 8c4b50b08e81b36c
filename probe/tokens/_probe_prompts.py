"""Probe prompts built by copying token ids (docs/rules.md): a family compiled for one tokenizer.

At position `k` the probe prompt is::

    prompt ids + thinking[:L(k)]            (copied, never re-encoded)
               with thinking[L(k)-1] -> its one-newline token (families whose
               separator is a line feed, when the vocabulary has it) or its
               content ids, when it is a boundary token
    + separator ids                          (unless the retained text ends with a line feed)
    + thinking-end ids + answer-prefix ids   (fixed per family and tokenizer)

and the ThinkBrake signal is read at the position where the thinking-end
marker would start (the same ids without the marker and answer prefix).
"""

import dataclasses
from collections.abc import Sequence

from otbench.probe.config import Family

from otbench.errors import OtbenchError

from ._vocab import Vocabulary
from otbench.errors import ArgumentError


class FormatError(OtbenchError, ValueError):
    """The family does not fit the tokenizer (a marker that is not one token, ...)."""


def _encode(tokenizer, text: str) -> tuple[int, ...]:
    return tuple(int(t) for t in tokenizer.encode(text, add_special_tokens=False)) if text else ()


def _single(tokenizer, text: str, what: str) -> int:
    ids = _encode(tokenizer, text)
    if len(ids) != 1:
        raise FormatError(f"{what} {text!r} must be a single token of this tokenizer, "
                          f"got {len(ids)} ids {list(ids)}")
    return ids[0]


@dataclasses.dataclass(frozen=True)
class ProbeFormat:
    """A family's fixed id sequences for one tokenizer.

    Attributes:
      end_ids: the thinking-end marker (empty for the generic family).
      separator_ids: ids inserted before the marker when needed.
      answer_prefix_ids: answer-channel opening / answer-forcing suffix.
      signal_id: the ThinkBrake token (docs/rules.md).
      think_stop_ids: ids that end a trajectory naturally (the marker's first
        token for native thinking families, the end-of-turn ids otherwise).
      answer_stop_ids: ids that end an answer.
    """

    family: Family
    vocab: Vocabulary
    end_ids: tuple[int, ...]
    separator_ids: tuple[int, ...]
    answer_prefix_ids: tuple[int, ...]
    signal_id: int
    think_stop_ids: tuple[int, ...]
    answer_stop_ids: tuple[int, ...]
    boundary_rule: str = "vocab"

    @property
    def closes_on_newline(self) -> bool:
        """The family puts one line feed before its marker (separator "\\n": Qwen3, DeepSeek-R1).

        Then a boundary token closes as the single token of its text up to one
        line feed when the vocabulary has it (`.\\n\\n` -> `.\\n`, the
        tokenizer's own way to end a line, after which no separator is
        needed) instead of its content ids plus a separate `\\n`: the same
        text, tokenized as the model would write it. Families with another
        separator keep the content ids, so their probe text is unchanged
        (GPT-OSS ends the analysis message right after the text; the generic
        family's answer-forcing suffix follows a blank line).
        """
        return self.family.separator == "\n"

    @property
    def span(self) -> tuple | None:
        """The (ends_newline, starts_newline) tables under "vocab+span", else None."""
        if self.boundary_rule == "vocab+span":
            return (self.vocab.ends_newline, self.vocab.starts_newline)
        return None

    def is_span_end(self, thinking: Sequence[int], length: int) -> bool:
        """Whether the block ending at `length` ends by a double LF spanning two tokens."""
        return (self.boundary_rule == "vocab+span" and length >= 2
                and bool(self.vocab.ends_newline[int(thinking[length - 2])])
                and bool(self.vocab.starts_newline[int(thinking[length - 1])]))

    # -- prompts ---------------------------------------------------------------
    def retained(self, prompt: Sequence[int], thinking: Sequence[int], length: int) -> list[int]:
        """prompt + thinking[:length], the last boundary token replaced by its content ids.

        A block that ends by a spanning double LF ("vocab+span" rule) ends on
        a token that starts with a line feed; its content (the text before
        its first line feed) is empty, so it is dropped.
        """
        if not 0 <= length <= len(thinking):
            raise ArgumentError(f"`length` must be in 0..{len(thinking)}, got {length}")
        ids = list(prompt)
        if length == 0:
            return ids
        ids.extend(thinking[: length - 1])
        last = int(thinking[length - 1])
        if self.vocab.mask[last]:
            one = self.vocab.content_newline.get(last) if self.closes_on_newline else None
            if one is not None:
                ids.append(one)
            else:
                ids.extend(self.vocab.content[last])
        elif self.is_span_end(thinking, length):
            pass
        else:
            ids.append(last)
        return ids

    def _needs_separator(self, ids: Sequence[int]) -> bool:
        return bool(self.separator_ids) and not (ids and self.vocab.ends_newline[int(ids[-1])])

    def signal_context(self, prompt: Sequence[int], thinking: Sequence[int], length: int) -> list[int]:
        """The ids after which the thinking-end marker would come (the signal is read here).

        For the generic family (no marker) the separator belongs to the
        answer-forcing suffix, so the context is the retained text alone.
        """
        ids = self.retained(prompt, thinking, length)
        if self.end_ids and self._needs_separator(ids):
            ids.extend(self.separator_ids)
        return ids

    def probe_prompt(self, prompt: Sequence[int], thinking: Sequence[int], length: int) -> list[int]:
        """The full probe prompt at retained length `length` (see module docstring)."""
        ids = self.retained(prompt, thinking, length)
        if self._needs_separator(ids):
            ids.extend(self.separator_ids)
        ids.extend(self.end_ids)
        ids.extend(self.answer_prefix_ids)
        return ids

    def answer_context(self, prompt: Sequence[int], thinking: Sequence[int], finished: bool) -> list[int]:
        """The context of the trajectory's own (original) answer.

        A native thinking trajectory that ended by itself continues exactly as
        generated: its stop token is the marker's first id, so the context is
        prompt + thinking + marker + answer prefix with nothing replaced. A
        trajectory cut at the thinking limit gets the forced answer of the
        full-length probe (`probe_prompt` at `len(thinking)`).
        """
        if finished and self.family.native_thinking:
            return list(prompt) + list(thinking) + list(self.end_ids) + list(self.answer_prefix_ids)
        return self.probe_prompt(prompt, thinking, len(thinking))


def compile_format(family: Family, tokenizer, vocab: Vocabulary, *,
                   boundary_rule: str = "vocab") -> ProbeFormat:
    """Encode the family's fixed strings once with `tokenizer` and check they fit.

    `boundary_rule` is "vocab" (docs/rules.md) or "vocab+span" (`_segment.SPAN_RULES`).
    """
    if boundary_rule not in ("vocab", "vocab+span"):
        raise ArgumentError(f"`boundary_rule` must be 'vocab' or 'vocab+span', got {boundary_rule!r}.")
    end_ids = _encode(tokenizer, family.thinking_end)
    signal_id = _single(tokenizer, family.signal_token, "the signal token")
    answer_stop = tuple(_single(tokenizer, s, "the answer stop string") for s in family.answer_stop)
    if family.native_thinking:
        if not end_ids or end_ids[0] != signal_id:
            raise FormatError(f"the thinking-end marker {family.thinking_end!r} must start with the "
                              f"signal token {family.signal_token!r}")
        think_stop = (end_ids[0],)
    else:
        think_stop = answer_stop
    return ProbeFormat(
        family=family, vocab=vocab, end_ids=end_ids,
        separator_ids=_encode(tokenizer, family.separator),
        answer_prefix_ids=_encode(tokenizer, family.answer_prefix),
        signal_id=signal_id, think_stop_ids=think_stop, answer_stop_ids=answer_stop,
        boundary_rule=boundary_rule,
    )
