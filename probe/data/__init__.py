"""Questions of a probe job: benchmark files and datasets, embedded offline data (SPEC §3)."""

from ._benchmarks import (
                          BENCHMARKS,
                          GROUPS,
                          DatasetError,
                          Question,
                          arithmetic_questions,
                          champ_questions,
                          load_benchmark,
                          load_group,
                          load_hub,
)
from ._questions import load_questions, sum_questions

__all__ = ["BENCHMARKS", "GROUPS", "DatasetError", "Question", "arithmetic_questions",
           "champ_questions", "load_benchmark", "load_group", "load_hub", "load_questions",
           "sum_questions"]
