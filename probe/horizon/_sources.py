"""Multiple-choice items and scripted reasoning policies of horizon jobs (docs/rules.md).

Sources (`[data] source`):

* ``choice-sums``: seeded four-choice one-digit sums ("What is 3 + 4?"): the
  correct value and three distractors, options shuffled per item with the
  recorded seed (`_grading_choice.shuffle_options`); offline, for demos and
  the SmolLM2 benchmark;
* ``positive-control``: the scripted positive control of the second paper:
  balanced four-choice items whose question carries no answer information
  (generic option labels; gold letter `LETTERS[i % 4]`, a deterministic
  balanced key);
* ``file``: a benchmark file through `_datasets.load_benchmark` (GPQA-Diamond).

Scripted policies (`[[arm]] script`), tokenized once with the model's
tokenizer (scripted text, not model output, so encoding it is fine):

* ``reveal-late``: neutral reasoning whose line "candidate answer: X" (X the
  gold letter) starts after the first 64 tokens (and well before 512);
* ``reveal-early``: the same line first, then the same neutral reasoning.

Both are cut to the arm's thinking limit and never finish by themselves.
"""

from collections.abc import Mapping, Sequence
from typing import Any

from otbench.probe.grading import LETTERS, shuffle_options
from otbench.errors import ArgumentError

REVEAL_AFTER = 64
_FILLER = ("Let me restate the task. There are four labels and I have to pick one of them. "
           "I will go through the labels one at a time and think about each of them. "
           "Nothing in the question itself points to a label, so I keep reading my notes. ")


def choice_sum_questions(n: int, *, seed: int = 0, group: str = "CHOICE-SUMS") -> list:
    """`n` seeded four-choice questions "What is a + b?" (operands 1..9).

    Distractors are the value plus/minus 1 and plus/minus 2, three of them
    chosen by the seed; the option order comes from `shuffle_options`.

    >>> q = choice_sum_questions(1, seed=0)[0]
    >>> q.options[LETTERS.index(q.reference)] == str(eval(q.text[8:-1]))
    True
    """
    from otbench.probe.data import Question, seeded_operands

    out = []
    for i, a, b, c in seeded_operands(n, seed=seed, namespace="otbench/choice-sums/v1"):
        v = a + b
        near = [v - 2, v - 1, v + 1, v + 2]
        skip = c % 4
        distract = [near[k] for k in range(4) if k != skip]
        qid = f"choice-sums-{seed}-{i}"
        sh = shuffle_options([str(v)] + [str(d) for d in distract], 0, seed=seed, question_id=qid)
        out.append(Question(group, "choice-sums", qid, "choice", f"What is {a} + {b}?", sh.reference,
                            options=sh.options, shuffle_seed=seed))
    return out


def positive_control_questions(n: int = 96, *, group: str = "POSITIVE-CONTROL") -> list:
    """`n` uninformative four-choice items with balanced gold letters A, B, C, D, A, ..."""
    from otbench.probe.data import Question

    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ArgumentError(f"`n` must be a non-negative integer, got {n!r}.")
    opts = tuple(f"label {c}" for c in LETTERS[:4])
    return [Question(group, "positive-control", f"pc-{i}", "choice",
                     "Pick the correct label. The question itself does not say which one it is.",
                     LETTERS[i % 4], options=opts) for i in range(n)]


def load_choice_questions(data: Mapping[str, Any]) -> list:
    """The multiple-choice items named by a horizon job's [data] table."""
    source = data.get("source", "choice-sums")
    n = data.get("n")
    seed = int(data.get("seed", 0))
    if source == "choice-sums":
        qs = choice_sum_questions(n or 24, seed=seed)
    elif source == "positive-control":
        qs = positive_control_questions(n or 96)
    elif source == "file":
        from otbench.probe.data import load_benchmark
        qs = load_benchmark(data["benchmark"], data["path"], seed=seed)
        qs = qs[:n] if n else qs
    else:
        raise ArgumentError(f"unknown data.source {source!r}")
    bad = [q.id for q in qs if q.task != "choice"]
    if bad:
        raise ArgumentError(f"horizon jobs read multiple-choice items; {bad[0]!r} is a {qs[0].task!r} item")
    return qs


def _encode(tokenizer, text: str) -> list[int]:
    return [int(t) for t in tokenizer.encode(text, add_special_tokens=False)]


def scripted_thinking(tokenizer, script: str, gold: str, length: int) -> list[int]:
    """Token ids of a scripted reasoning of exactly `length` tokens (module docstring).

    Raises ValueError when `length` cannot hold the late reveal (it needs
    more than `REVEAL_AFTER` filler tokens plus the reveal line).
    """
    reveal = _encode(tokenizer, f"\n\ncandidate answer: {gold}\n\n")
    filler = _encode(tokenizer, _FILLER)
    head: list[int] = []
    while len(head) <= REVEAL_AFTER:
        head.extend(filler)
    tail: list[int] = []
    while len(head) + len(reveal) + len(tail) < length + len(reveal):
        tail.extend(filler)
    if script == "reveal-late":
        ids = head + reveal + tail
        if len(head) + len(reveal) > length:
            raise ArgumentError(f"a reveal-late script needs more than {len(head) + len(reveal)} tokens, "
                                f"got a limit of {length}")
    elif script == "reveal-early":
        ids = reveal + head + reveal + tail
    else:
        raise ArgumentError(f"unknown script {script!r}")
    return ids[:length]


def reveal_position(tokenizer, ids: Sequence[int], gold: str) -> int | None:
    """Token index where the decoded reasoning first shows "candidate answer: <gold>", or None."""
    target = f"candidate answer: {gold}"
    for k in range(len(ids) + 1):
        if target in tokenizer.decode(list(ids[:k])):
            return k
    return None
