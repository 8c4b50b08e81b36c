"""Question sources of a probe job: one `source` of [data], or its `[[data.sources]]` (`_sources`)."""

from collections.abc import Mapping
from typing import Any

from . import _benchmarks as _datasets
from ._sources import DataRecord, first_per_group, load_sources
from ._sums import arithmetic_questions, sum_questions
from otbench.errors import ArgumentError


def load_questions(data: Mapping[str, Any]) -> list:
    """The questions named by a job's [data] table (see `_job`)."""
    return load_data(data)[0]


def load_data(data: Mapping[str, Any]):
    """(questions, record) of a job's [data] table: `[[data.sources]]` (`_sources`) or one `source`.

    `data.limit` keeps the first `limit` questions of each group; the record
    (`_sources.DataRecord`) says what each source gave.
    """
    seed = int(data.get("seed", 0))
    limit = data.get("limit")
    if "sources" in data:
        return load_sources(data["sources"], seed=seed, limit=limit)
    source = data.get("source", "arithmetic")
    n = data.get("n")
    if source == "sums":
        qs = sum_questions(n or 8, seed=seed)
    elif source == "arithmetic":
        qs = arithmetic_questions(n or 8, seed=seed)
    elif source == "champ":
        qs = _datasets.champ_questions(**({"group": data["group"]} if "group" in data else {}))
        qs = qs[:n] if n else qs
    elif source == "file":
        qs = _datasets.load_benchmark(data["benchmark"], data["path"], seed=seed)
        qs = qs[:n] if n else qs
    else:
        raise ArgumentError(f"unknown data.source {source!r}")
    record = {"source": source, "questions": len(qs)}
    return first_per_group(qs, limit), DataRecord((record,), limit)
