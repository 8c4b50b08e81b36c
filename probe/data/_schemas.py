"""Row schemas of a job's data sources: the built-in benchmarks and user schemas mapping columns by name.

Built-in schemas are the row mappers of `_benchmarks` (MATH500, AIME2024,
AIME2025, AIME2026, GPQA-Diamond, LiveCodeBench; accepted column names in
its docstring). A *user schema* names the columns of any other file:

    [[data.sources]]
    path = "mine.csv"
    group = "MyBench"            # reporting group (required)
    dataset = "mine-v2"          # default: the group
    task = "math"                # "math" | "choice" | "code"
    columns = { id = "qid", problem = "prompt", answer = "gold" }

Columns per task (`id` is optional everywhere: without it a question's id
is `text_id` of its problem text):

| task | columns |
|---|---|
| math | `problem`, `answer` (string or integer) |
| choice | `problem`, `correct` (the right option), `incorrect` (a list of column names, or one column holding a list of strings); options are shuffled per question with the job's recorded `data.seed` (docs/rules.md) |
| code | `problem`, `tests` (a list of {input, output[, testtype]}, or JSON text, or LiveCodeBench's packed text), `fn_name` and `starter_code` (optional) |

Every error names the file, the row and the user's column.
"""

import dataclasses
from collections.abc import Mapping
from typing import Any

from otbench.probe.grading import shuffle_options

from ._benchmarks import (
    BENCHMARKS,
    DatasetError,
    Question,
    _decode_tests,
    _field,
    _lcb,
    _text,
    row_mapper,
    text_id,
)
from otbench.errors import ArgumentError

BUILTIN = tuple(BENCHMARKS)
"""Names of the built-in schemas (`benchmark = ...` in a source; one declared later is read from
`otbench.descriptors.BENCHMARK_SPECS` where a source is checked)."""

TASK_COLUMNS = {
    "math": ({"problem", "answer"}, {"id"}),
    "choice": ({"problem", "correct", "incorrect"}, {"id"}),
    "code": ({"problem", "tests"}, {"id", "fn_name", "starter_code"}),
}
"""task -> (required column keys, optional column keys) of a user schema."""


@dataclasses.dataclass(frozen=True)
class UserSchema:
    """A user schema: which column holds what (see the module docstring)."""

    group: str
    dataset: str
    task: str
    columns: Mapping[str, Any]

    def __post_init__(self):
        need, extra = TASK_COLUMNS[self.task]
        missing = sorted(need - set(self.columns))
        unknown = sorted(set(self.columns) - need - extra)
        if missing:
            raise ArgumentError(f"columns.{missing[0]} is required for task {self.task!r}")
        if unknown:
            raise ArgumentError(f"unknown key columns.{unknown[0]} for task {self.task!r} "
                                f"(expected {', '.join(sorted(need | extra))})")

    def _col(self, key: str) -> str:
        return self.columns[key]

    def _qid(self, row: Mapping, loc: str, text: str) -> str:
        if "id" not in self.columns:
            return text_id(text)
        v = _field(row, loc, (self._col("id"),), types=(str, int))
        v = str(v).strip()
        if not v:
            raise DatasetError(f"{loc}: field '{self._col('id')}' is empty")
        return v

    def map(self, row: Mapping, loc: str, *, seed: int = 0, **_) -> Question:
        """The `Question` of one row (errors: `LOCATION: rule`, naming the user's column)."""
        text = _text(row, loc, (self._col("problem"),))
        qid = self._qid(row, loc, text)
        if self.task == "math":
            answer = str(_field(row, loc, (self._col("answer"),), types=(str, int))).strip()
            if not answer:
                raise DatasetError(f"{loc}: field '{self._col('answer')}' is empty")
            return Question(self.group, self.dataset, qid, "math", text, answer)
        if self.task == "choice":
            return self._choice(row, loc, text, qid, seed)
        return self._code(row, loc, text, qid)

    def _choice(self, row, loc, text, qid, seed) -> Question:
        right = _text(row, loc, (self._col("correct"),))
        cols = self._col("incorrect")
        if isinstance(cols, str):
            wrong = _field(row, loc, (cols,), types=(list,))
            if not wrong or not all(isinstance(w, str) and w.strip() for w in wrong):
                raise DatasetError(f"{loc}: field '{cols}' must hold non-empty strings")
        else:
            wrong = [_text(row, loc, (c,)) for c in cols]
        opts = [o.strip() for o in [right, *wrong]]
        if len(set(opts)) != len(opts):
            raise DatasetError(f"{loc}: options must be distinct (two options read the same)")
        s = shuffle_options(opts, 0, seed=seed, question_id=qid)
        return Question(self.group, self.dataset, qid, "choice", text.strip(), s.reference,
                        options=s.options, shuffle_seed=s.seed)

    def _code(self, row, loc, text, qid) -> Question:
        tests_col = self._col("tests")
        if row.get(tests_col) is None:
            raise DatasetError(f"{loc}: missing field '{tests_col}'")
        # The LiveCodeBench mapper checks the tests; it reads them under its own names.
        shaped = {"question_id": qid, "question_content": text,
                  "tests": _decode_tests(row[tests_col], loc, tests_col)}
        for key in ("fn_name", "starter_code"):
            if key in self.columns:
                v = _field(row, loc, (self._col(key),), required=False)
                if v is not None:
                    shaped[key] = v
        q = _lcb(shaped, loc)
        return dataclasses.replace(q, group=self.group, dataset=self.dataset)


def schema_mapper(source: Mapping[str, Any]):
    """The row mapper of a validated source table: a built-in benchmark's or a `UserSchema.map`."""
    if "benchmark" in source:
        return row_mapper(source["benchmark"])
    return UserSchema(group=source["group"], dataset=source.get("dataset", source["group"]),
                      task=source["task"], columns=source["columns"]).map
