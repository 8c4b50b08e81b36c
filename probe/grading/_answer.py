"""The answer part of a response: the text after the thinking ends (docs/rules.md-§3.4)."""

# Qwen3 / DeepSeek-R1 close thinking with `</think>`; GPT-OSS (harmony format)
# switches from the analysis channel to the final channel.
THINKING_END = ("</think>", "<|channel|>final<|message|>")
THINKING_START = ("<think>", "<|channel|>analysis")
# Harmony tokens that may trail the final message.
_ANSWER_END = ("<|return|>", "<|end|>")


def answer_part(response: str, *, thinking_end=THINKING_END, thinking_start=THINKING_START) -> str | None:
    """The text a grader may read, or None when the thinking never ended.

    * a thinking-end marker present: the text after its last occurrence
      (whatever the thinking said is never read as an answer);
    * no end marker but a start marker: the thinking was cut off, there is no
      answer (None);
    * neither: the whole response is the answer (e.g. a probe continuation,
      which starts after the marker the probe itself appended).

    >>> answer_part("<think>maybe \\\\boxed{1}</think>so \\\\boxed{2}")
    'so \\\\boxed{2}'
    >>> answer_part("<think>still thinking") is None
    True
    """
    cut = -1
    for marker in thinking_end:
        i = response.rfind(marker)
        if i >= 0:
            cut = max(cut, i + len(marker))
    if cut >= 0:
        text = response[cut:]
    elif any(m in response for m in thinking_start):
        return None
    else:
        text = response
    for marker in _ANSWER_END:
        i = text.find(marker)
        if i >= 0:
            text = text[:i]
    return text
