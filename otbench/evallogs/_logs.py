"""`read_log`: every reply of an evaluation log, through the reader of its format.

The one place that knows every format's reader (`_read` for lm-eval, lighteval and chat rows,
`_inspect` for inspect-ai's `.eval` archives, `_eee` for Every Eval Ever records), so the readers
share the reply record (`_reply`) without importing one another.
"""

import dataclasses
from collections.abc import Mapping
from pathlib import Path

from ._eee import eee_replies
from ._inspect import inspect_replies
from ._read import (LOG_FORMATS, _open, chat_replies, detect_format, lighteval_names, lighteval_replies,
                    lighteval_task, lm_eval_names, lm_eval_replies, rows)
from ._reply import EvalLogError, Reply


def read_log(path: str | Path, fmt: str | None = None, *, metric: str | None = None,
             task: str | None = None, model: str | None = None, count_tokens=None,
             notes: list[str] | None = None) -> list[Reply]:
    """Every reply of an evaluation log (format detected when `fmt` is None; see the module docstring).

    `metric` names the source verdict to read (lm-eval's metric, lighteval's metric key,
    inspect-ai's scorer); `task` / `model` override the names read from the file;
    `count_tokens` (lm-eval): reads each reply's length limit (`lm_eval_replies`); `notes`:
    a list that receives what the reading left out and why (inspect-ai's errored samples).
    """
    p = Path(path)
    _open(p).close()        # missing, a FIFO or a device: one line before any library reads it
    fmt = fmt or detect_format(p)
    if fmt not in LOG_FORMATS:
        raise EvalLogError(f"{p}: format {fmt!r} is not one of {', '.join(LOG_FORMATS)}")
    if fmt == "inspect-ai":
        out = inspect_replies(p, scorer=metric, notes=notes)
    else:
        out = []
        lm_task, lm_model = lm_eval_names(p)
        for loc, row in rows(p):
            if not isinstance(row, Mapping):
                raise EvalLogError(f"{loc}: expected a JSON object, got {type(row).__name__}")
            if fmt == "lm-eval":
                out.extend(lm_eval_replies(row, loc, task=lm_task, model=lm_model, metric=metric,
                                           count_tokens=count_tokens))
            elif fmt == "lighteval":
                out.extend(lighteval_replies(row, loc, model=lighteval_names(p), metric=metric,
                                             task=lighteval_task(p)))
            elif fmt == "eee":
                out.extend(eee_replies(row, loc))
            else:
                out.extend(chat_replies(row, loc, task=p.stem))
    if task is not None or model is not None:
        out = [dataclasses.replace(r, task=task or r.task, model=model or r.model) for r in out]
    return out
