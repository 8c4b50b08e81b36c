"""The embedded seeded questions: `sums` (one-digit sums and differences) and `arithmetic`
(`a op b op c` with exact integer answers), drawn from a seed.

SmolLM2-135M rarely answers them right away (asked for the answer with no
reasoning it tends to repeat an operand) but often writes the right result
while reasoning ("3 + 4 = 7") and then wanders on, so its STP curves rise
and fall: a small real instance of what the probe measures. Every draw is SHA-256 of
(namespace, seed, question, slot), `otbench/sums/v1` or `otbench/arith/v1`: identical on any
machine.
"""

import hashlib

from ._benchmarks import Question
from otbench.errors import ArgumentError


def _draw(namespace: str, seed: int, *key) -> int:
    h = hashlib.sha256("\0".join(map(str, (namespace, seed, *key))).encode()).digest()
    return int.from_bytes(h[:8], "big")


QUESTION_BYTES = 1024
"""Memory per generated question (its `Question`, texts and id; about 500 bytes measured, and
the prompt built from it)."""
QUESTION_OPS = 1e5
"""Element operations per generated question (its SHA-256 draws: about 90 us measured)."""


def check_question_budget(n: int) -> None:
    """Refuse `n` seeded questions that do not fit the resource budget (memory, an hour's work),
    before any is drawn: a count of 10**18 ran until the machine's memory was gone."""
    from otbench.resources import check_budget

    check_budget(f"{n:,} seeded questions", "`n`", n, per_unit=QUESTION_BYTES,
                 per_unit_ops=QUESTION_OPS, unit="question")


def seeded_operands(n: int, *, seed: int, namespace: str) -> list[tuple[int, int, int, int]]:
    """`(i, a, b, c)` for questions `i = 0 .. n-1`: operands `a, b` in 1..9 and a free draw `c`.

    Each number is SHA-256 of `(namespace, seed, i, slot)`, so a question
    depends only on its namespace, seed and index: identical on any machine.
    The embedded sums (`otbench/sums/v1`) and the horizon jobs' choice sums
    (`otbench/choice-sums/v1`) both draw here.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ArgumentError(f"`n` must be a non-negative integer, got {n!r}.")
    check_question_budget(n)
    return [(i, 1 + _draw(namespace, seed, i, 0) % 9, 1 + _draw(namespace, seed, i, 1) % 9,
             _draw(namespace, seed, i, 2)) for i in range(n)]


def sum_questions(n: int, *, seed: int = 0, group: str = "SUMS") -> list:
    """`n` seeded questions "What is a + b?" / "What is a - b?" (operands 1..9, exact answers).

    >>> [q.text for q in sum_questions(2, seed=0)] == [q.text for q in sum_questions(2, seed=0)]
    True
    """
    out = []
    for i, a, b, c in seeded_operands(n, seed=seed, namespace="otbench/sums/v1"):
        if c % 2:
            text, value = f"What is {a} + {b}?", a + b
        else:
            a, b = max(a, b), min(a, b)
            text, value = f"What is {a} - {b}?", a - b
        out.append(Question(group, "sums", f"sums-{seed}-{i}", "math", text, str(value)))
    return out


def arithmetic_questions(n: int, *, seed: int = 0, group: str = "ARITH") -> list[Question]:
    """`n` seeded arithmetic questions `a op b op c` with exact integer answers.

    Operands 2..99, operators from + - x with the usual precedence. Every
    draw is SHA-256 of ("otbench/arith/v1", seed, question, slot), so the
    questions are identical on any machine and Python version.

    >>> arithmetic_questions(1, seed=0)[0].reference == str(eval(
    ...     arithmetic_questions(1, seed=0)[0].text[8:-1].replace("×", "*").replace("−", "-")))
    True
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ArgumentError(f"`n` must be a non-negative integer, got {n!r}.")
    check_question_budget(n)
    ops = [("+", "+"), ("−", "-"), ("×", "*")]
    out = []
    for i in range(n):
        a, b, c = (2 + _draw("otbench/arith/v1", seed, i, k) % 98 for k in range(3))
        (s1, p1), (s2, p2) = (ops[_draw("otbench/arith/v1", seed, i, 3 + k) % 3] for k in range(2))
        value = _eval3(a, p1, b, p2, c)
        out.append(Question(group, "arithmetic", f"arith-{seed}-{i}", "math",
                            f"What is {a} {s1} {b} {s2} {c}?", str(value)))
    return out


def _eval3(a: int, p1: str, b: int, p2: str, c: int) -> int:
    """a p1 b p2 c with * before + and - (left to right otherwise)."""
    f = {"+": lambda x, y: x + y, "-": lambda x, y: x - y, "*": lambda x, y: x * y}
    if p2 == "*" and p1 != "*":
        return f[p1](a, b * c)
    return f[p2](f[p1](a, b), c)
