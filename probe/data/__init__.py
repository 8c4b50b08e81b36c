"""Questions of a probe job: benchmark files and datasets, embedded offline data (docs/rules.md)."""

from ._benchmarks import (
                          BENCHMARKS,
                          GROUPS,
                          DatasetError,
                          Question,
                          champ_questions,
                          load_benchmark,
                          load_group,
                          load_hub,
)
from ._questions import load_data, load_questions
from ._schemas import BUILTIN as BUILTIN_SCHEMAS
from ._schemas import TASK_COLUMNS, UserSchema
from ._sources import EMBEDDED_SOURCES, DataRecord, load_source, load_sources, release_files
from ._sums import arithmetic_questions, check_question_budget, seeded_operands, sum_questions
from ._tasks import TASKS, Task, source_task, task_source
from ._traces import MARKERS, TRACE_FORMATS, TraceRecord, load_traces, read_traces, split_reasoning



def describe_trace_fields() -> dict:
    """The field names the trace readers look up (first found wins), as data for a reference
    page: ``question_id``, ``question_text``, ``reasoning`` and the reasoning ``markers``
    (open, close) pairs."""
    from . import _traces as tr

    return {"question_id": list(tr._QUESTION_ID), "question_text": list(tr._QUESTION_TEXT),
            "reasoning": list(tr._REASONING_FIELDS), "markers": [list(m) for m in tr.MARKERS]}


__all__ = ["describe_trace_fields", 
                          "BENCHMARKS",
                          "BUILTIN_SCHEMAS",
                          "EMBEDDED_SOURCES",
                          "GROUPS",
                          "MARKERS",
                          "TASK_COLUMNS",
                          "TRACE_FORMATS",
                          "DataRecord",
                          "DatasetError",
                          "Question",
                          "TraceRecord",
                          "UserSchema",
                          "arithmetic_questions",
                          "champ_questions",
                          "load_benchmark",
                          "load_data",
                          "load_group",
                          "load_hub",
                          "load_questions",
                          "load_source",
                          "load_sources",
                          "load_traces",
                          "read_traces",
                          "release_files",
                          "split_reasoning",
                          "check_question_budget", "seeded_operands", "sum_questions",
                          "TASKS", "Task", "source_task", "task_source",
]
