"""Grade records: correctness plus the status that says why (docs/rules.md, STYLE "status, not silent zeros")."""

import enum
from typing import NamedTuple
from otbench.errors import ArgumentError


class Status(str, enum.Enum):
    """Why a response got its grade. Only `OK` is correct; every other status counts as wrong.

    The value (a short lowercase string) is what files and `otbench grade` store.
    """

    OK = "ok"                            # verified correct
    WRONG_ANSWER = "wrong_answer"        # an answer was extracted and checked: it differs
    NO_ANSWER = "no_answer"              # nothing to grade: no \boxed{}, no letter, no code block,
                                         # or the thinking never ended
    PARSE_ERROR = "parse_error"          # an answer was found but could not be parsed
                                         # (unparsable LaTeX, code with a SyntaxError)
    TIMEOUT = "timeout"                  # the verifier or the program ran out of time
    RUNTIME_ERROR = "runtime_error"      # the program raised, exited non-zero or was killed
    MEMORY_ERROR = "memory_error"        # the program hit its memory limit
    OUTPUT_LIMIT = "output_limit"        # the program printed more than allowed
    SANDBOX_ERROR = "sandbox_error"      # the sandbox could not run (the program never ran)
    REFERENCE_ERROR = "reference_error"  # the reference itself is unusable (fix the data)
    GRADER_ERROR = "grader_error"        # the grader failed unexpectedly (a crashed worker)


class Grade(NamedTuple):
    """The grade of one response.

    Attributes:
        correct: True exactly when `status is Status.OK`.
        status: why (see `Status`).
        detail: a short human note (e.g. "test 3 of 12: wrong output");
            deterministic for deterministic inputs, never used for scoring.
    """

    correct: bool
    status: Status
    detail: str = ""

    @classmethod
    def ok(cls, detail: str = "") -> "Grade":
        return cls(True, Status.OK, detail)

    @classmethod
    def wrong(cls, status: Status, detail: str = "") -> "Grade":
        if status is Status.OK:
            raise ArgumentError("`status` of a wrong grade must not be Status.OK.")
        return cls(False, status, detail)


class CodeTest(NamedTuple):
    """One code test: stdin text and expected stdout (or, for functional tests,
    one JSON value per line per argument and the expected return value as JSON)."""

    input: str
    output: str


TASKS = ("math", "choice", "code")
