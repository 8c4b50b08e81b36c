"""Multiple-choice grading (GPQA-style): seeded option shuffling and letter extraction (SPEC §3.4)."""

import hashlib
import re
from typing import NamedTuple, Sequence

from ._types import Grade, Status

LETTERS = "ABCDEFGHIJ"
_SHUFFLE_DOMAIN = b"otbench/choice-shuffle/v1"


def _shuffle_key(seed: int, question_id: str, index: int) -> bytes:
    # Length-prefixed fields so that ("1", "23") and ("12", "3") never collide.
    parts = [_SHUFFLE_DOMAIN, str(int(seed)).encode(), question_id.encode("utf-8"), str(index).encode()]
    return hashlib.sha256(b"".join(len(p).to_bytes(4, "big") + p for p in parts)).digest()


def shuffle_order(n: int, *, seed: int, question_id: str) -> tuple[int, ...]:
    """The seeded option order: position j shows original option `order[j]`.

    Derivation (documented so any implementation can reproduce it): option i
    gets the key SHA-256(len-prefixed "otbench/choice-shuffle/v1", str(seed),
    question_id as UTF-8, str(i)) with each field preceded by its byte length
    as 4 big-endian bytes; options are sorted by key. Sorting by independent
    uniform 256-bit keys is a uniformly random permutation, depends on nothing
    but (seed, question_id, n), and needs no RNG whose stream could change
    between library versions.
    """
    return tuple(sorted(range(n), key=lambda i: _shuffle_key(seed, question_id, i)))


class Shuffled(NamedTuple):
    """Options in the order shown to the model.

    Attributes:
        options: the shuffled option texts; letter `LETTERS[j]` labels `options[j]`.
        reference: the letter of the correct option after shuffling.
        order: `options[j] == original[order[j]]`.
        seed: the seed used (recorded with the question).
    """

    options: tuple[str, ...]
    reference: str
    order: tuple[int, ...]
    seed: int


def shuffle_options(options: Sequence[str], correct: int, *, seed: int, question_id: str) -> Shuffled:
    """Shuffle `options` (the correct one at index `correct`) with the seeded order.

    >>> s = shuffle_options(["right", "w1", "w2", "w3"], 0, seed=0, question_id="q1")
    >>> s.options[LETTERS.index(s.reference)]
    'right'
    """
    if not 2 <= len(options) <= len(LETTERS):
        raise ValueError(f"`options` must hold 2..{len(LETTERS)} options, got {len(options)}.")
    if not 0 <= correct < len(options):
        raise ValueError(f"`correct` must index `options` (0..{len(options) - 1}), got {correct}.")
    order = shuffle_order(len(options), seed=seed, question_id=question_id)
    return Shuffled(tuple(options[i] for i in order), LETTERS[order.index(correct)], order, int(seed))


def _patterns(letters: str) -> list[re.Pattern]:
    L = f"[{letters}]"
    low = f"[{letters.lower()}]"
    # Most to least explicit; within a pattern the LAST match wins (a model
    # that corrects itself ends with its final choice).
    return [
        # \boxed{C}, \boxed{\text{C}}
        re.compile(rf"\\boxed\s*\{{\s*(?:\\text(?:bf)?\{{\s*)?\(?({L})\)?\s*\}}?\s*\}}"),
        # an answer field: "Answer: C", "answer is (C)", "**Final Answer:** **C**", "Answer - C.";
        # a lowercase letter only when nothing but punctuation follows on its
        # line ("answer: c", but not "the answer is a bit unclear")
        re.compile(rf"answer(?:\s+is)?\s*(?:\*\*)?\s*[:\-]?\s*(?:\*\*)?\s*[:\-]?\s*"
                   rf"(?:option\s+|choice\s+)?[\(\[]?\s*(?:\*\*)?"
                   rf"((?-i:{L})(?![A-Za-z0-9])|(?-i:{low})(?=[ \t.)\]*]*$))",
                   re.IGNORECASE | re.MULTILINE),
        # the whole answer is just the letter: "C", "(C)", "**C**", "C.", "C) text"
        re.compile(rf"\A\s*(?:\*\*)?[\(\[]?({L})[\)\]]?(?:\*\*)?(?:[.)\]:]|\s*\Z|\s+[-:)]|\s*$)",
                   re.MULTILINE),
        # a marked letter anywhere: "(C)", "**C**", "[C]"
        re.compile(rf"\(({L})\)|\*\*({L})\*\*|\[({L})\]"),
        # a standalone capital letter; "A" followed by a lowercase word is the
        # article ("A good choice"), not an option
        re.compile(rf"(?<![A-Za-z0-9_\\])(?:(?!A\s+[a-z])({L}))(?![A-Za-z0-9_])"),
    ]


def extract_choice(answer: str, n_options: int = 4) -> str | None:
    """The chosen letter in the answer part of a response, or None.

    Read only from the answer part (never the thinking; see `answer_part`).
    Tries, in order: a boxed letter; an answer field (`Answer: C`,
    `answer is (C)`, `**Answer:** C`); a bare letter as the whole answer;
    a marked letter (`(C)`, `**C**`); the last standalone letter mentioned.
    Within the first rule that matches, the last match wins.
    """
    letters = LETTERS[:n_options]
    for pat in _patterns(letters):
        found = [next(g for g in m.groups() if g) for m in pat.finditer(answer)]
        if found:
            return found[-1].upper()
    return None


def grade_choice(answer: str, reference: str, *, n_options: int = 4) -> Grade:
    """Grade the answer part of a multiple-choice response against the reference letter.

    Returns `ok`, `wrong_answer`, `no_answer` (no letter found), or
    `reference_error` (the reference is not one of the option letters).
    """
    ref = reference.strip().upper()
    if len(ref) != 1 or ref not in LETTERS[:n_options]:
        return Grade.wrong(Status.REFERENCE_ERROR,
                           f"reference must be one letter {LETTERS[0]}..{LETTERS[n_options - 1]}, "
                           f"got {reference!r}")
    got = extract_choice(answer, n_options)
    if got is None:
        return Grade.wrong(Status.NO_ANSWER, "no option letter after the thinking")
    if got == ref:
        return Grade.ok()
    return Grade.wrong(Status.WRONG_ANSWER, f"chose {got}, reference {ref}")
