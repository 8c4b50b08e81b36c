"""One reply of an evaluation log, and the split of its text into thinking and answer.

The record every reader of `otbench.evallogs` returns (`_read`, `_eee`), in a module of its own
so that the format readers share it without importing each other.
"""

import dataclasses

from otbench.errors import OtbenchError

MARKERS = (("<think>", "</think>"), ("<|begin_of_thought|>", "<|end_of_thought|>"))
"""(open, close) reasoning markers recognized in text, tried in order."""


class EvalLogError(OtbenchError, ValueError):
    """An evaluation log cannot be read; the message names the file, the row and the field."""


@dataclasses.dataclass(frozen=True)
class Reply:
    """One model reply of an evaluation log, as its source recorded and judged it.

    Attributes:
      loc: where it was read (`FILE:LINE`, `FILE:row N`, `FILE:sample ID epoch E`).
      source: the log's format (`LOG_FORMATS`).
      task, model: the source's task and model names.
      question_id, question_text: the question (either may be missing, not both).
      sample: the reply's index among the question's replies (repeats, epochs).
      text: the whole reply.
      thinking: the reasoning (the whole reply when it has no markers).
      finished: the thinking was closed (None: the reply has no reasoning markers).
      answer: the text after the thinking (None when it was never closed).
      length_stop: the source says the reply hit its length limit (None: not recorded).
      verdict: the source's own verdict of this reply (None: it gives none per reply).
      metric: what `verdict` is (`exact_match (strict-match)`, `match`, ...).
      extracted: the answer the source extracted, if it records one.
      reference: the source's reference answer, if it records one.
      prompt: the prompt the source sent, if it records it.
      filter: lm-eval's filter name (None elsewhere).
    """

    loc: str
    source: str
    task: str
    model: str
    question_id: str | None
    question_text: str | None
    sample: int
    text: str
    thinking: str
    finished: bool | None
    answer: str | None
    length_stop: bool | None = None
    verdict: float | None = None
    metric: str | None = None
    extracted: str | None = None
    reference: str | None = None
    prompt: str | None = None
    filter: str | None = None

    @property
    def cut(self) -> bool:
        """The reply never closed its thinking or hit the source's length limit."""
        return self.finished is False or bool(self.length_stop)


def split_reasoning(text: str) -> tuple[str, bool | None, str | None]:
    """(thinking, finished, final answer) of a completion that may hold reasoning markers."""
    for start, end in MARKERS:
        if end in text:
            head, _, tail = text.rpartition(end)
            return _after_open(head, start), True, tail
        if start in text:
            return _after_open(text, start), False, None
    return text, None, None


def split_reply(text: str, prompt: str | None) -> tuple[str, bool | None, str | None]:
    """`split_reasoning` of a reply whose prompt may have opened the thinking itself.

    Templates of reasoning models often end the prompt with `<think>\n`: the reply
    then holds only the close (or none, when it was cut). A reply with no marker
    after such a prompt is thinking that never closed, not a plain reply.
    """
    if prompt is not None:
        tail = prompt.rstrip()
        for start, end in MARKERS:
            if tail.endswith(start) and start not in text and end not in text:
                return split_reasoning(start + text)
    return split_reasoning(text)


def _after_open(text: str, start: str) -> str:
    # The thinking begins after the opening marker (and the line feed templates put after it).
    if start in text:
        text = text.split(start, 1)[1]
        return text.removeprefix("\n")
    return text
