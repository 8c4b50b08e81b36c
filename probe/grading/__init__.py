"""Grading (docs/rules.md): math, multiple-choice and sandboxed code; worker pools; the probe loop's grading seam."""

from ._batch import (
    GRADERS,
    GradeBatch,
    GradeItem,
    GraderError,
    check_gradable,
    last_boxed,
    open_grader,
    resolve_grader,
)
from ._choice import ANSWER_FORMS, LETTERS, extract_choice, shuffle_options
from ._code import extract_code
from ._deepconf import (
    DEEPCONF_TOPK,
    DEEPCONF_WINDOW,
    GroupConfidence,
    deepconf_min_confs,
    deepconf_stop_token,
    token_confidence,
    warmup_confidence,
    warmup_min_conf,
)
from ._field import (
    HESITATION_WORDS,
    ProbeSignals,
    answer_key,
    answer_location,
    hesitates,
    hesitation_pattern,
    number_answers,
    probe_signals,
)
from ._grade import GradeConfig, GradeRequest, grade, grade_request, make_request
from ._peers import (
    DEER_MAX_TOKENS,
    DEER_PROMPT,
    DEER_SAMPLING,
    DEER_STOPS,
    DYNASOR_MAX_TOKENS,
    DYNASOR_SAMPLING,
    DYNASOR_SUFFIX,
    DYNASOR_UNCERTAIN_WORDS,
    DYNASOR_WINDOW_BITS,
    DeerTrial,
    DynasorProbe,
    deer_confidence,
    deer_cut,
    deer_trial,
    dynasor_agreement,
    dynasor_math_equal,
    dynasor_obtain_answer,
    dynasor_probe,
    dynasor_uncertain,
    dynasor_windows,
)
from ._pool import Grader, grade_many
from ._sandbox import SandboxLimits, sandbox_status
from ._thinkbrake import (
    CHECK_TEXT,
    close_ids,
    close_table,
    ends_with_check,
    thinkbrake_margin,
)
from ._types import TASKS, CodeTest, Grade, Status

__all__ = [
    "ANSWER_FORMS", "GRADERS", "HESITATION_WORDS", "LETTERS", "TASKS", "ProbeSignals",
    "answer_key", "answer_location", "hesitates", "hesitation_pattern", "number_answers", "probe_signals",
    "CodeTest", "Grade", "GradeBatch", "GradeConfig", "GradeItem", "GradeRequest", "Grader", "GraderError",
    "SandboxLimits", "Status",
    "check_gradable", "extract_choice", "extract_code", "last_boxed", "grade", "grade_many", "grade_request", "make_request", "open_grader",
    "resolve_grader",
    "sandbox_status", "shuffle_options",
    # the field methods' own probes, read as their sources read them (`_peers`)
    "DEER_MAX_TOKENS", "DEER_PROMPT", "DEER_SAMPLING", "DEER_STOPS", "DYNASOR_MAX_TOKENS",
    "DYNASOR_SAMPLING", "DYNASOR_SUFFIX", "DYNASOR_UNCERTAIN_WORDS", "DeerTrial", "DynasorProbe",
    "deer_confidence", "deer_cut", "deer_trial", "dynasor_agreement", "dynasor_math_equal",
    "dynasor_obtain_answer", "dynasor_probe", "dynasor_uncertain", "dynasor_windows", "DYNASOR_WINDOW_BITS",
    # DeepConf's confidence, read from the sampled tokens' log-probabilities (`_deepconf`)
    "DEEPCONF_TOPK", "DEEPCONF_WINDOW", "GroupConfidence", "deepconf_min_confs", "deepconf_stop_token",
    "warmup_confidence", "warmup_min_conf",
    # ThinkBrake's check and its two forks, read as its source reads them (`_thinkbrake`)
    "CHECK_TEXT", "close_ids", "close_table", "ends_with_check", "thinkbrake_margin",
    "token_confidence",
]
