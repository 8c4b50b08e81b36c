"""The offline sources (`embedded = name` in a job's `[data]`): questions made or packaged here, no file.

Each is one `BenchmarkSpec` with `embedded=True` whose `loader` names a function of
this form: `(n, seed, group) -> list[Question]` with `n` the questions asked for
(None: the source's default), `seed` the source's seed and `group` its reporting
group (None: the spec's). A function whose questions do not depend on the seed says
so (`seeded = False`), and the data record then carries no seed.
"""

from ._benchmarks import Question, champ_questions
from ._sums import arithmetic_questions, sum_questions

DEFAULT_N = 8
"""Questions a seeded generator makes when the source gives no `n`."""


def sums(n: int | None, seed: int, group: str | None) -> list[Question]:
    """Seeded "What is a + b?" questions (`sum_questions`)."""
    return sum_questions(n or DEFAULT_N, seed=seed, **({"group": group} if group else {}))


def arithmetic(n: int | None, seed: int, group: str | None) -> list[Question]:
    """Seeded `a op b op c` questions (`arithmetic_questions`)."""
    return arithmetic_questions(n or DEFAULT_N, seed=seed, **({"group": group} if group else {}))


def champ(n: int | None, seed: int, group: str | None) -> list[Question]:
    """The first `n` (all with None) CHAMP problems with a numeric answer (`champ_questions`)."""
    qs = champ_questions(group or "CHAMP")
    return qs[:n] if n else qs


champ.seeded = False
