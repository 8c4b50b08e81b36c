"""How long an lm-eval reply was: lm-eval records no finish reason, so the audit counts tokens.

`lm_eval_results_model` finds the model folder of the run beside its samples; `token_counter`
counts a reply's tokens with that folder's tokenizer (`lm_eval_replies` compares the count
with the record's `max_gen_toks`).
"""

import json
from collections.abc import Mapping
from pathlib import Path

from ._read import _DATE, EvalLogError


def lm_eval_results_model(path: str | Path) -> str | None:
    """The local model folder an lm-eval samples file was written for, or None.

    lm-eval writes `results_<date>.json` beside the samples with the run's `config.model_args`
    (`pretrained=...`, as a string or a mapping); the folder counts only where it exists here.
    """
    p = Path(path)
    stamp = _DATE.search(p.stem)
    names = sorted(p.parent.glob("results_*.json"))
    if stamp:
        names = [n for n in names if stamp.group(0).lstrip("_") in n.name] or names
    for name in names:
        try:
            cfg = json.loads(name.read_text(encoding="utf-8")).get("config", {})
        except (OSError, ValueError, AttributeError):
            continue
        args = cfg.get("model_args") if isinstance(cfg, Mapping) else None
        if isinstance(args, str):
            args = dict(kv.split("=", 1) for kv in args.split(",") if "=" in kv)
        folder = args.get("pretrained") if isinstance(args, Mapping) else None
        if isinstance(folder, str) and Path(folder).is_dir():
            return folder
    return None


def token_counter(folder: str | Path):
    """`text -> tokens` by the tokenizer in `folder` (local files only), without special tokens."""
    try:
        from transformers import AutoTokenizer
    except ImportError:
        raise EvalLogError(f"{folder}: counting reply tokens needs the transformers library "
                           "(pip install transformers)") from None
    try:
        tok = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    except (OSError, ValueError) as e:
        raise EvalLogError(f"{folder}: no tokenizer could be read there ({str(e).splitlines()[0][:160]})") from None
    return lambda text: len(tok.encode(text, add_special_tokens=False))
