"""How long an lm-eval reply was: lm-eval records no finish reason, so the audit counts tokens.

`lm_eval_results_model` finds the model folder of the run beside its samples, `lm_eval_model_name`
the model's name as the run recorded it; `token_counter`
counts a reply's tokens with that folder's tokenizer (`lm_eval_replies` compares the count
with the record's `max_gen_toks`).
"""

import re
from collections.abc import Mapping
from pathlib import Path

from ._reply import EvalLogError

_DATE = re.compile(r"_\d{4}-\d{2}-\d{2}T[0-9\-.:]+$")

RESULTS_LIMIT = 1 << 28
"""Bytes of an lm-eval results file read beside its samples (lm-eval writes a few MiB)."""


def _results_docs(path: str | Path):
    """The results documents lm-eval wrote beside a samples file: `results_<date>.json` of the
    samples' own date first (every one when none has it)."""
    p = Path(path)
    stamp = _DATE.search(p.stem)
    names = sorted(p.parent.glob("results_*.json"))
    if stamp:
        names = [n for n in names if stamp.group(0).lstrip("_") in n.name] or names
    for name in names:
        doc = _results(name)
        if isinstance(doc, Mapping):
            yield doc


def _model_args(doc: Mapping) -> Mapping:
    cfg = doc.get("config", {})
    args = cfg.get("model_args") if isinstance(cfg, Mapping) else None
    if isinstance(args, str):
        args = dict(kv.split("=", 1) for kv in args.split(",") if "=" in kv)
    return args if isinstance(args, Mapping) else {}


def lm_eval_results_model(path: str | Path) -> str | None:
    """The local model folder an lm-eval samples file was written for, or None.

    lm-eval writes `results_<date>.json` beside the samples with the run's `config.model_args`
    (`pretrained=...`, as a string or a mapping); the folder counts only where it exists here.
    """
    for doc in _results_docs(path):
        folder = _model_args(doc).get("pretrained")
        if isinstance(folder, str) and Path(folder).is_dir():
            return folder
    return None


def lm_eval_model_name(path: str | Path) -> str | None:
    """The model an lm-eval samples file was written for, as its run recorded it, or None.

    lm-eval's results file beside the samples holds `model_name` (its
    `GeneralConfigTracker`: the `pretrained=` argument, or the model type) and
    `config.model_args`; the samples' folder is only that name sanitised (`/` as `__`).
    """
    for doc in _results_docs(path):
        for name in (doc.get("model_name"), _model_args(doc).get("pretrained")):
            if isinstance(name, str) and name.strip() and len(name) <= 1000:
                return name.strip()
    return None


def _results(path: Path):
    """The results document beside a log, read as the log itself is: a regular file (a FIFO,
    device or folder is one line, never a hang or an endless read), at most `RESULTS_LIMIT`
    bytes, through the one guarded JSON reader (depth, numbers, keys)."""
    from otbench.files import loads_json, read_regular

    raw = read_regular(path, RESULTS_LIMIT, what="an lm-eval results file",
                       fail=lambda why: EvalLogError(f"{path}: {why}"))
    return loads_json(raw, str(path))


def token_counter(folder: str | Path):
    """`text -> tokens` by the tokenizer in `folder` (local files only), without special tokens."""
    tok = _tokenizer(folder, "counting reply tokens")
    return lambda text: len(tok.encode(text, add_special_tokens=False))


def token_decoder(folder: str | Path):
    """`ids -> text` by the tokenizer in `folder` (local files only), special tokens left out.

    For `otbench export --format eee --tokenizer DIR`: a probe set stores token ids only.
    """
    tok = _tokenizer(folder, "decoding token ids")
    return lambda ids: tok.decode(list(ids), skip_special_tokens=True)


def _tokenizer(folder: str | Path, what: str):
    try:
        from transformers import AutoTokenizer
    except ImportError:
        raise EvalLogError(f"{folder}: {what} needs the transformers library "
                           "(pip install transformers)") from None
    try:
        tok = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    except (OSError, ValueError) as e:
        raise EvalLogError(f"{folder}: no tokenizer could be read there ({str(e).splitlines()[0][:160]})") from None
    return tok
