"""Question sources of a probe job: embedded offline data or benchmark files (`_datasets`).

`sums` are the embedded demo's questions: one-digit sums and differences.
SmolLM2-135M rarely answers them right away (asked for the answer with no
reasoning it tends to repeat an operand) but often writes the right result
while reasoning ("3 + 4 = 7") and then wanders on, so its STP curves rise
and fall: a small real instance of what the probe measures. Every draw is SHA-256 of
("otbench/sums/v1", seed, question, slot): identical on any machine.
"""

import hashlib
from collections.abc import Mapping
from typing import Any


def _draw(seed: int, *key) -> int:
    h = hashlib.sha256("\0".join(map(str, ("otbench/sums/v1", seed, *key))).encode()).digest()
    return int.from_bytes(h[:8], "big")


def sum_questions(n: int, *, seed: int = 0, group: str = "SUMS") -> list:
    """`n` seeded questions "What is a + b?" / "What is a - b?" (operands 1..9, exact answers).

    >>> [q.text for q in sum_questions(2, seed=0)] == [q.text for q in sum_questions(2, seed=0)]
    True
    """
    from ._benchmarks import Question

    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"`n` must be a non-negative integer, got {n!r}.")
    out = []
    for i in range(n):
        a, b = 1 + _draw(seed, i, 0) % 9, 1 + _draw(seed, i, 1) % 9
        if _draw(seed, i, 2) % 2:
            text, value = f"What is {a} + {b}?", a + b
        else:
            a, b = max(a, b), min(a, b)
            text, value = f"What is {a} - {b}?", a - b
        out.append(Question(group, "sums", f"sums-{seed}-{i}", "math", text, str(value)))
    return out


def load_questions(data: Mapping[str, Any]) -> list:
    """The questions named by a job's [data] table (see `_job`)."""
    return load_data(data)[0]


def load_data(data: Mapping[str, Any]):
    """(questions, record) of a job's [data] table: `[[data.sources]]` (`_sources`) or one `source`.

    `data.limit` keeps the first `limit` questions of each group; the record
    (`_sources.DataRecord`) says what each source gave.
    """
    from . import _benchmarks as _datasets
    from ._sources import DataRecord, first_per_group, load_sources

    seed = int(data.get("seed", 0))
    limit = data.get("limit")
    if "sources" in data:
        return load_sources(data["sources"], seed=seed, limit=limit)
    source = data.get("source", "arithmetic")
    n = data.get("n")
    if source == "sums":
        qs = sum_questions(n or 8, seed=seed)
    elif source == "arithmetic":
        qs = _datasets.arithmetic_questions(n or 8, seed=seed)
    elif source == "champ":
        qs = _datasets.champ_questions(**({"group": data["group"]} if "group" in data else {}))
        qs = qs[:n] if n else qs
    elif source == "file":
        qs = _datasets.load_benchmark(data["benchmark"], data["path"], seed=seed)
        qs = qs[:n] if n else qs
    else:
        raise ValueError(f"unknown data.source {source!r}")
    record = {"source": source, "questions": len(qs)}
    return first_per_group(qs, limit), DataRecord((record,), limit)
