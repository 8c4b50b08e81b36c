"""Evaluation logs of other frameworks (lm-eval, lighteval, inspect-ai, chat, Every Eval Ever): replies and verdicts.

Pure Python (no JAX, no engine): the probe's trace import and the log audit
(`otbench audit-log`) both read logs here, so both see one reading of each
source. See `docs/guides/import-traces.md` and `docs/guides/audit-log.md`.
"""

from ._extract import (
    FALLBACK,
    GSM8K_IGNORE,
    PRESETS,
    Extraction,
    ExtractionError,
    exact_match,
    extraction,
)
from ._read import (
    LABEL_FIELDS,
    LOG_FORMATS,
    QUESTION_ID,
    QUESTION_TEXT,
    REASONING_FIELDS,
    chat_replies,
    detect_format,
    groups,
    lighteval_names,
    lighteval_task,
    lighteval_replies,
    lm_eval_names,
    lm_eval_replies,
    row_format,
    rows,
)
from ._eee import eee_replies
from ._reply import MARKERS, EvalLogError, Reply, split_reasoning, split_reply
from ._logs import read_log
from ._inspect import INSPECT_STATUSES, inspect_replies
from ._lengths import lm_eval_model_name, lm_eval_results_model, token_counter, token_decoder

__all__ = [
    "FALLBACK", "GSM8K_IGNORE", "INSPECT_STATUSES", "LABEL_FIELDS", "LOG_FORMATS", "MARKERS", "PRESETS", "QUESTION_ID", "QUESTION_TEXT",
    "REASONING_FIELDS",
    "EvalLogError", "Extraction", "ExtractionError", "Reply",
    "chat_replies", "detect_format", "eee_replies", "exact_match", "extraction", "groups", "inspect_replies",
    "lighteval_names", "lighteval_replies", "lighteval_task", "lm_eval_model_name", "lm_eval_names", "lm_eval_replies",
    "lm_eval_results_model", "read_log", "row_format", "rows", "split_reasoning", "split_reply", "token_counter",
    "token_decoder",
]
