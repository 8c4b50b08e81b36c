"""Multiple-choice grading (GPQA-style): seeded option shuffling and letter extraction (docs/rules.md)."""

import hashlib
import re
from typing import NamedTuple, Sequence

from ._types import Grade, Status
from otbench.errors import ArgumentError

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
        raise ArgumentError(f"`options` must hold 2..{len(LETTERS)} options, got {len(options)}.")
    if not 0 <= correct < len(options):
        raise ArgumentError(f"`correct` must index `options` (0..{len(options) - 1}), got {correct}.")
    order = shuffle_order(len(options), seed=seed, question_id=question_id)
    return Shuffled(tuple(options[i] for i in order), LETTERS[order.index(correct)], order, int(seed))


# -- answer forms ----------------------------------------------------------------
#
# The letter is read only from an answer field of the answer part (SPEC §3.4);
# the forms below are the only ones accepted, and everything else, however
# suggestive ("the data in D) we", "correct one is C, but wait"), is unparsed.
# Every pattern is matched at a known position with bounded repetition only,
# so extraction is linear in the length of the answer (no backtracking blow-up).

# The field name "answer" (any case), not the start of a longer word
# ("answered"); letters before it are allowed, so a harmony final message
# decoded without its special tokens ("...finalAnswer: C") still reads.
_FIELD = re.compile(r"answer(?![A-Za-z])", re.IGNORECASE)
# What may follow the field name before the letter: closing emphasis, " is",
# a colon or dash, opening emphasis, a few spaces and at most two line
# breaks, an "option"/"choice" word. All bounded.
_FIELD_TAIL = re.compile(
    r"(?:\*\*|__)?"
    r"(?P<is>[ \t]{1,4}is)?"
    r"[ \t]{0,4}(?P<colon>[:\-])?"
    r"(?:\*\*|__)?"
    r"[ \t]{0,4}(?:\n[ \t]{0,4}){0,2}"
    r"(?:(?i:option|choice)[ \t]{1,4})?", re.ASCII)
# The letter itself, with up to three wrappers ("(", "**", "$", "\\boxed{",
# "\\text{"); a capital only, not followed by a word character, an
# apostrophe or "=" ("I'm", "C=O" are no answers).
_LETTER = re.compile(
    r"(?:\*\*|__|\(|\[|\$|\\boxed\{|\\text(?:bf)?\{|\\mathrm\{){0,3}"
    r"(?P<letter>[A-Z])(?![A-Za-z0-9_'\u2019=])")
# A boxed letter anywhere in the answer part: \boxed{C}, \boxed{(C)},
# \boxed{\text{C}}, \boxed{\textbf{(C)}}.
_BOXED = re.compile(
    r"\\boxed[ \t]{0,4}\{[ \t]{0,4}(?:\\(?:text|textbf|mathrm)\{[ \t]{0,4})?"
    r"\(?(?P<letter>[A-Z])\)?[ \t]{0,4}\}?[ \t]{0,4}\}")
# The whole answer part is the letter, bare or decorated: "C", "(C)", "**C**", "C.".
_ALONE = re.compile(r"(?:\*\*|__|\(|\[|\$){0,3}(?P<letter>[A-Z])(?:\*\*|__|\)|\]|\$|\.){0,3}")

ANSWER_FORMS = (
    ("field", "an answer field: `Answer: C`, `**Answer:** C`, `Final answer: (C)`, "
              "`The answer is C`, `Answer: option C`, `Answer: $\\boxed{C}$`"),
    ("boxed", "a boxed letter: `\\boxed{C}`, `\\boxed{(C)}`, `\\boxed{\\text{C}}`"),
    ("alone", "the whole answer is the letter: `C`, `(C)`, `**C**`, `C.`"),
)
"""The accepted answer forms (name, description); anything else is unparsed."""


def _field_letters(answer: str):
    """(position, letter) of every answer field (see `ANSWER_FORMS`)."""
    for m in _FIELD.finditer(answer):
        t = _FIELD_TAIL.match(answer, m.end())
        if not (t.group("is") or t.group("colon")):
            continue  # "answer" must be followed by "is", ":" or "-" ("to answer this, C ...")
        x = _LETTER.match(answer, t.end())
        if x:
            yield m.start(), x.group("letter")


def answer_letters(answer: str) -> list[tuple[int, str, str]]:
    """Every accepted-form letter in `answer` as (position, letter, form), in text order."""
    found = [(pos, letter, "field") for pos, letter in _field_letters(answer)]
    found += [(m.start(), m.group("letter"), "boxed") for m in _BOXED.finditer(answer)]
    body = answer.strip()
    m = _ALONE.fullmatch(body)
    if m:
        found.append((0, m.group("letter"), "alone"))
    return sorted(found)


def extract_choice(answer: str, n_options: int = 4) -> str | None:
    """The chosen letter in the answer part of a response, or None (unparsed).

    Read only from the answer part (never the thinking; see `answer_part`),
    and only from the accepted forms (`ANSWER_FORMS`): an answer field
    (`Answer: C`), a boxed letter (`\\boxed{C}`), or an answer that is the
    letter alone. The letter must be a capital naming one of the
    `n_options` options (a lowercase `answer: c` is unparsed, as in
    simple-evals, where it never equals the reference). When several
    accepted forms occur, the last one in the text wins (a model that
    corrects itself ends with its final choice); a form naming a letter
    outside the options does not count.

    >>> extract_choice("The C=O stretch is weak, so")
    >>> extract_choice("Thus **Answer: C**")
    'C'
    """
    letters = LETTERS[:n_options]
    valid = [letter for _, letter, _ in answer_letters(answer) if letter in letters]
    return valid[-1] if valid else None


def grade_choice(answer: str, reference: str, *, n_options: int = 4) -> Grade:
    """Grade the answer part of a multiple-choice response against the reference letter.

    Returns `ok`, `wrong_answer`, `no_answer` (unparsed: no accepted answer
    form, see `ANSWER_FORMS`), or
    `reference_error` (the reference is not one of the option letters).
    """
    ref = reference.strip().upper()
    if len(ref) != 1 or ref not in LETTERS[:n_options]:
        return Grade.wrong(Status.REFERENCE_ERROR,
                           f"reference must be one letter {LETTERS[0]}..{LETTERS[n_options - 1]}, "
                           f"got {reference!r}")
    got = extract_choice(answer, n_options)
    if got is None:
        return Grade.wrong(Status.NO_ANSWER, "unparsed: no accepted answer form "
                                             "(Answer: X, \\boxed{X}, the letter alone) after the thinking")
    if got == ref:
        return Grade.ok()
    return Grade.wrong(Status.WRONG_ANSWER, f"chose {got}, reference {ref}")
