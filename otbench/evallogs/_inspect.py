"""inspect-ai `.eval` logs: one `Reply` per sample, read with `inspect_ai.log.read_eval_log`.

Every status inspect-ai writes a log with is read (`EvalStatus` in `inspect_ai/log/_log.py`:
`started`, `success`, `cancelled`, `error`). A log that stopped early (an error, a
cancellation, a run still going or killed) holds the samples it finished; a sample that ended
in an error (`EvalSample.error`) or has no model output (`output.choices` empty) has no reply
to read and is left out, and what was left out is said in the `notes` the caller passes,
never silently.
"""

from pathlib import Path

from ._read import _LENGTH_STOPS, _open, _verdict
from ._reply import EvalLogError, Reply, split_reasoning

INSPECT_STATUSES = ("started", "success", "cancelled", "error")
"""inspect-ai's `EvalStatus` values, every one read."""


def _first_line(error) -> str:
    text = str(getattr(error, "message", None) or error or "").strip()
    line = (text.splitlines() or ["no message"])[0][:200]
    return "".join(c if c.isprintable() else "?" for c in line)      # the provider's text, shown


def inspect_replies(path: str | Path, *, scorer: str | None = None,
                    notes: list[str] | None = None) -> list[Reply]:
    """The replies of an inspect-ai `.eval` log, read with `inspect_ai.log.read_eval_log`;
    `notes` receives a line for a log that did not end in `success` and for samples left out."""
    if Path(path).suffix == ".eval":
        from ._archive import check_archive

        check_archive(Path(path), _open, EvalLogError)      # before inspect-ai unpacks a member
    try:
        from inspect_ai.log import read_eval_log
    except ImportError:
        raise EvalLogError(f"{path}: reading inspect-ai logs needs inspect-ai (pip install inspect-ai)") from None
    try:
        log = read_eval_log(str(path))
    except Exception as e:  # noqa: BLE001  (the library's own error, one line)
        raise EvalLogError(f"{path}: not an inspect-ai log ({type(e).__name__}: {e})") from None
    samples = list(log.samples or [])
    kept = [s for s in samples if s.error is None and s.output is not None and s.output.choices]
    said = notes if notes is not None else []
    if log.status != "success":
        why = f" ({_first_line(log.error)})" if getattr(log, "error", None) is not None else ""
        said.append(f"{path}: the log's status is {log.status!r}{why}: the evaluation did not finish; "
                    f"its {len(kept)} samples with a reply are read")
    if len(kept) < len(samples):
        ids = {id(s) for s in kept}
        gone = [f"{s.id} epoch {s.epoch}" for s in samples if id(s) not in ids]
        said.append(f"{path}: {len(gone)} of {len(samples)} samples have no reply (an error or no model "
                    f"output) and are left out: {', '.join(gone[:5])}{', ...' if len(gone) > 5 else ''}")
    return [_reply(path, log, s, scorer) for s in kept]


def _reply(path, log, s, scorer: str | None) -> Reply:
    from inspect_ai.model import ContentReasoning, ContentText
    from inspect_ai.scorer import value_to_float

    loc = f"{path}:sample {s.id} epoch {s.epoch}"
    scores = s.scores or {}
    if scorer is not None and scorer not in scores:
        raise EvalLogError(f"{loc}: no scorer '{scorer}' (it has: {', '.join(scores) or 'none'})")
    name = scorer or next(iter(scores), None)
    sc = scores.get(name) if name else None
    verdict = None if sc is None else _verdict(value_to_float()(sc.value), loc, f"scores.{name}")
    out_msg = s.output.message
    reasoning, parts = None, []
    if not isinstance(out_msg.content, str):
        for c in out_msg.content:
            if isinstance(c, ContentReasoning) and not c.redacted:
                reasoning = (reasoning or "") + c.reasoning
            elif isinstance(c, ContentText):
                parts.append(c.text)
    completion = s.output.completion
    if reasoning is not None:
        thinking, finished, answer = reasoning, bool("".join(parts).strip()), "".join(parts)
    else:
        thinking, finished, answer = split_reasoning(completion)
    q = s.input if isinstance(s.input, str) else next(
        (m.text for m in reversed(s.input) if getattr(m, "role", None) == "user"), None)
    target = s.target if isinstance(s.target, str) else (s.target[0] if s.target else None)
    stop = s.output.stop_reason
    return Reply(loc, "inspect-ai", log.eval.task, log.eval.model, str(s.id), q, s.epoch - 1,
                 completion, thinking, finished, answer,
                 None if stop is None else stop in _LENGTH_STOPS, verdict, name,
                 None if sc is None else sc.answer, target, None)
