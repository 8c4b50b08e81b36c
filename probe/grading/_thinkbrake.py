"""ThinkBrake's own check, read as its source reads it: where it checks and its two forks.

Restated from ssangjun706/ThinkBrake, commit 8cc7ed4, ``thinkbrake/func/handler.py``,
``run_thinkbrake_step``:

* the thinking is decoded in chunks, each stopped at the first ``.\\n\\n`` or the
  thinking-end token (lines 58-63); the stop string is not part of the chunk,
  so at a check the text so far lacks its ``.\\n\\n`` (lines 67, 83-84);
* a check forks the state twice (line 83). Fork 0 appends the ``.\\n\\n`` and
  decodes one token with the run's own sampling parameters
  (``probe_sampling_params``, line 37; lines 84-92), reading the sampled
  token's log-probability (``output_token_logprobs[-1]``, lines 104-106). Fork 1
  appends ``closing_token`` = ``prefix_token + eot_token`` (line 38; ``.\\n``
  and ``</think>`` in the DeepSeek and Qwen3 handlers, lines 323-325 and
  370-372) and decodes nothing, reading the end token's log-probability as
  an input token (``input_token_logprobs[-1]``, lines 94-102, 108-110);
* the margin is the first minus the second; the run stops when it is
  ``<= threshold`` (line 112), else appends the ``.\\n\\n`` and goes on (line 120).

On a recorded trajectory (`otbench.probe.stp` with ``probe.field_probes =
["thinkbrake"]``) the check is at every position whose thinking so far,
``thinking[:L(k)]``, ends with the text ``.\\n\\n`` (`ends_with_check`): the
trajectory continued there as ThinkBrake's run continues when it does not
stop. Fork 0 is a one-token request on prompt + ``thinking[:L(k)]`` (the
model's own ids, the ``.\\n\\n`` included, as every otbench probe works in
token space; the source re-tokenizes the text), sampled with the run's
sampling parameters; fork 1 reads the end token after prompt +
``thinking[:L(k) - 1]`` + the tokenizer's ids of the last token's text
without its final line feed (`close_ids`): the same text, the text so far
+ ``.\\n``. Both log-probabilities are the model's raw log-softmax, as every
otbench signal (``SIGNAL_DEFINITIONS``); what sglang returns for the sampled
token under a temperature is not restated here.
"""

from collections.abc import Sequence

CHECK_TEXT = ".\n\n"
"""The stop string of ThinkBrake's chunks (handler.py line 61): where it checks."""
TAIL_TOKENS = 16
"""At most this many last tokens are read to find the check text (each holds at least one
character of it unless it decodes to nothing)."""


def ends_with_check(forms: Sequence[str], thinking: Sequence[int], length: int) -> bool:
    """Whether the text of ``thinking[:length]`` ends with ``.\\n\\n`` (`CHECK_TEXT`), read from the
    decoded forms of its last tokens (`forms[id]`, `otbench.probe.tokens.Vocabulary.forms`).

    >>> forms = ["a", ".", "\\n\\n", ".\\n\\n", "\\n"]
    >>> [ends_with_check(forms, [0, 1, 2], 3), ends_with_check(forms, [0, 3], 2),
    ...  ends_with_check(forms, [0, 2], 2), ends_with_check(forms, [3, 4], 2), ends_with_check(forms, [], 0)]
    [True, True, False, False, False]
    """
    text, i = "", int(length)
    while i > 0 and len(text) < len(CHECK_TEXT) and length - i < TAIL_TOKENS:
        i -= 1
        t = int(thinking[i])
        text = (forms[t] if 0 <= t < len(forms) else "") + text
    return text.endswith(CHECK_TEXT)


def close_table(tokenizer, forms: Sequence[str]) -> dict[int, tuple[int, ...]]:
    """id -> the tokenizer's ids of its form without the final line feed, for every id whose form ends
    with one: the last token of a checked prefix, rewritten so the text ends with ``.\\n`` (fork 1)."""
    ids = [i for i, f in enumerate(forms) if f.endswith("\n")]
    texts = [forms[i][:-1] for i in ids]
    # one batch call (a fast tokenizer encodes the vocabulary's few thousand such forms at once)
    enc = tokenizer(texts, add_special_tokens=False)["input_ids"] if texts else []
    return {i: tuple(int(x) for x in e) for i, e in zip(ids, enc)}


def close_ids(prefix: Sequence[int], thinking: Sequence[int], length: int,
              table: dict[int, tuple[int, ...]]) -> list[int]:
    """The context of fork 1: `prefix` (the prompt) + ``thinking[:length - 1]`` + the last token's
    ids without its final line feed (`close_table`), after which the end token's log-probability
    is read. `length` is a check (`ends_with_check`), so that token's form ends with a line feed."""
    last = int(thinking[length - 1])
    return list(prefix) + list(thinking[:length - 1]) + list(table[last])


def thinkbrake_margin(sampled_logprob: float, end_logprob: float) -> float:
    """handler.py line 112's left side: the sampled token's log-probability after ``.\\n\\n`` minus
    the end token's after ``.\\n`` (ThinkBrake stops when it is ``<= threshold``)."""
    return float(sampled_logprob) - float(end_logprob)
