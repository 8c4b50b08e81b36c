"""The one-line start: lm-eval-style arguments mapped onto the job table of a probe job TOML.

    otbench probe run --model vllm --model-args pretrained=Qwen/Qwen3-4B-Thinking-2507,revision=abc123 \\
        --tasks math500,aime24 --limit 50 --R 8 --P 16 --out DIR

`oneline_table` builds the same nested table a job TOML parses into, and
`job_from_dict` validates it, so a one-line run *is* a TOML job;
`job_toml` writes that table as TOML (`--write-job FILE`), and loading the
file gives the same job. `--model` is the engine kind (`vllm`,
`transformers`, `openai`: the records of `otbench.descriptors.ENGINE_SPECS`);
`--model-args` are `KEY=VALUE` pairs (`MODEL_ARGS` says where each goes); `--tasks` are names of the task
registry (`probe.data.TASKS`), each `NAME` or `NAME=PATH`; `--gen-kwargs`
override the family's sampling (`temperature`, `top_p`, `top_k`,
`presence_penalty`) and limits (`thinking_limit`, `answer_limit`). Relative paths are made absolute against the current
folder, so the written job means the same from wherever it is loaded.
"""

import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from otbench.probe.config import find_model
from otbench.probe.data import TASKS, task_source

from otbench.descriptors import ENGINE_SPECS
from otbench.errors import ArgumentError

from ._job import JobError
from ._job_keys import oneline

# --model-args key -> (job table, key, value type), from the job key table (each key's own name
# and its lm-eval / vLLM aliases); `pretrained` is handled apart (name or path).
MODEL_ARGS: dict[str, tuple[str, str, type]] = oneline("model-args")
"""Every `--model-args` key but `pretrained` (a model entry, a Hugging Face id or a local folder;
`tokenizer` is its alias for `--model openai`, after lm-eval's local-completions)."""

GEN_KWARGS: dict[str, tuple[str, type]] = {
    name: (table, kind) for name, (table, _, kind) in
    sorted(oneline("gen-kwargs").items(), key=lambda kv: kv[1][0] != "sampling")}
"""`--gen-kwargs` keys -> the job table they go to (the family's defaults otherwise)."""


def parse_pairs(text: str, where: str) -> dict[str, str]:
    """`a=1,b=two` -> {"a": "1", "b": "two"}; a key given twice or a pair without `=` is refused."""
    out: dict[str, str] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        key, eq, value = part.partition("=")
        key = key.strip()
        if not eq or not key:
            raise JobError(f"{where}: {part!r} is not KEY=VALUE")
        if key in out:
            raise JobError(f"{where}: {key} is given twice")
        out[key] = value.strip()
    return out


def _typed(value: str, kind: type, where: str):
    if kind is str:
        if not value:
            raise JobError(f"{where} must not be empty")
        return value
    if kind is bool:
        low = value.lower()
        if low not in ("true", "false", "1", "0"):
            raise JobError(f"{where} must be true or false, got {value!r}")
        return low in ("true", "1")
    try:
        v = int(value) if kind is int else float(value)
    except ValueError:
        raise JobError(f"{where} must be {'an integer' if kind is int else 'a number'}, got {value!r}") from None
    if kind is float and not math.isfinite(v):
        raise JobError(f"{where} must be a finite number, got {value!r}")
    return v


def _absolute(path: str, cwd: Path) -> str:
    p = Path(os.path.expanduser(path))
    return str(p if p.is_absolute() else (cwd / p).resolve())


def oneline_table(model: str, model_args: str, tasks: str, *, limit: int | None = None,
                  R: int | None = None, P: int | None = None, b: int | None = None,
                  gen_kwargs: str = "", data_seed: int | None = None,
                  cwd: str | os.PathLike | None = None) -> dict[str, Any]:
    """The job table (as a job TOML parses into) of a one-line start; see the module docstring."""
    cwd = Path(cwd) if cwd is not None else Path.cwd()
    if not isinstance(model, str) or model not in ENGINE_SPECS:
        raise JobError(f"--model must be one of {', '.join(ENGINE_SPECS)}, got {model!r}")
    args = parse_pairs(model_args, "--model-args")
    if "tokenizer" in args:
        if not ENGINE_SPECS[model].served:
            served = " or ".join(f"--model {k}" for k in ENGINE_SPECS if ENGINE_SPECS[k].served)
            raise JobError(f"--model-args tokenizer= is for {served} (the local tokenizer folder "
                           "or id); use pretrained=")
        if "pretrained" in args:
            raise JobError("--model-args: give pretrained= or tokenizer=, not both")
        args["pretrained"] = args.pop("tokenizer")
    if "pretrained" not in args:
        raise JobError("--model-args needs pretrained= (a model entry, a Hugging Face id or a local folder)")
    table: dict[str, Any] = {"model": {}, "engine": {"kind": model}}
    pre = args.pop("pretrained")
    if not pre:
        raise JobError("--model-args pretrained must not be empty")
    local = Path(os.path.expanduser(pre))
    if find_model(pre) is None and (local.is_dir() or pre.startswith((".", "/", "~"))):
        table["model"]["path"] = _absolute(pre, cwd)
    else:
        table["model"]["name"] = pre
    for key, value in args.items():
        if key not in MODEL_ARGS:
            raise JobError(f"--model-args: unknown key {key!r} (known: pretrained, "
                           f"{', '.join(sorted(MODEL_ARGS))})")
        t, k, kind = MODEL_ARGS[key]
        if k in table.setdefault(t, {}):
            raise JobError(f"--model-args: {key} sets {t}.{k}, which another key already set")
        table[t][k] = _typed(value, kind, f"--model-args {key}")
    # (engine keys of one kind only, and the keys a kind requires, are the job's own rules:
    # job_from_dict, from the kind's EngineSpec)

    names = [t.strip() for t in tasks.split(",") if t.strip()]
    if not names:
        raise JobError(f"--tasks needs at least one task name ({', '.join(TASKS)})")
    sources = []
    for spec in names:
        src = task_source(spec)
        if "path" in src:
            src["path"] = _absolute(src["path"], cwd)
        if src in sources:
            raise JobError(f"--tasks: {spec} is given twice")
        sources.append(src)
    table["data"] = {"sources": sources}
    if data_seed is not None:
        table["data"]["seed"] = data_seed
    if limit is not None:
        table["data"]["limit"] = limit
    probe = {k: v for k, v in (("R", R), ("P", P), ("b", b)) if v is not None}
    if probe:
        table["probe"] = probe
    gk = parse_pairs(gen_kwargs, "--gen-kwargs")
    for key, value in gk.items():
        if key not in GEN_KWARGS:
            raise JobError(f"--gen-kwargs: unknown key {key!r} (known: {', '.join(GEN_KWARGS)})")
        t, kind = GEN_KWARGS[key]
        table.setdefault(t, {})[key] = _typed(value, kind, f"--gen-kwargs {key}")
    _fit_context(table)
    return table


PROMPT_ROOM = 1024
"""Tokens left for the question prompt when the limits are fitted to a short model context."""
CONTEXT_KEYS = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length")
"""config.json keys of a model's own context length (Hugging Face configurations)."""


def model_context(model: Mapping[str, Any]) -> int | None:
    """The context length the model itself allows (its config.json), for a local folder or an embedded
    entry (converted once per machine); None when it cannot be read here (a hub id: the family's)."""
    import json

    folder = model.get("path")
    if folder is None:
        entry = find_model(model.get("name", ""))
        if entry is None or entry.source.get("kind") != "pypi-gguf":
            return None
        from otbench.probe.config import embedded_model_dir
        try:
            folder = embedded_model_dir(entry.name, log=lambda *_: None)
        except Exception:  # noqa: BLE001  -- the run reports a missing model in its own words
            return None
    try:
        cfg = json.loads((Path(folder) / "config.json").read_text())
    except (OSError, ValueError):
        return None
    cfg = cfg.get("text_config", cfg) if isinstance(cfg, dict) else {}
    return next((int(cfg[k]) for k in CONTEXT_KEYS if isinstance(cfg.get(k), int) and cfg[k] > 0), None)


def _fit_context(table: dict[str, Any]) -> None:
    """Without `max_model_len`, a model whose own context is shorter than its family's runs at its own,
    with the family's limits cut to fit (docs/guides/scale.md, the one-line start): answers at most an
    eighth of the context, thinking what is left after the answer and `PROMPT_ROOM` prompt tokens.
    Limits given with --gen-kwargs are kept (the job's own check refuses them if they do not fit)."""
    from otbench.probe.config import load_family

    if "max_model_len" in table["engine"]:
        return
    ctx = model_context(table["model"])
    if ctx is None:
        return
    entry = find_model(table["model"].get("name", ""))
    family = table["model"].get("family") or (entry.family if entry is not None else None)
    if family is None:
        return
    limits = load_family(family).limits
    if ctx >= limits.context:
        return
    table["engine"]["max_model_len"] = ctx
    probe = table.setdefault("probe", {})
    probe.setdefault("answer_limit", min(limits.answer, ctx // 8))
    probe.setdefault("thinking_limit", max(1, min(limits.thinking, ctx - probe["answer_limit"] - PROMPT_ROOM)))


# -- TOML writing (the subset a job uses: tables of scalars and string lists, arrays of tables) --

def _toml_key(k: str) -> str:
    import re
    return k if re.fullmatch(r"[A-Za-z0-9_-]+", k) else _toml_str(k)


def _toml_str(s: str) -> str:
    out = []
    for ch in s:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            raise JobError(f"cannot write the non-finite number {v!r} into a job")
        return repr(v)
    if isinstance(v, str):
        return _toml_str(v)
    if isinstance(v, (list, tuple)) and not any(isinstance(x, Mapping) for x in v):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, Mapping):
        return "{ " + ", ".join(f"{_toml_key(k)} = {_toml_value(x)}" for k, x in v.items()) + " }"
    raise JobError(f"cannot write {type(v).__name__} {v!r} into a job")


def job_toml(table: Mapping[str, Any], *, header: str = "") -> str:
    """`table` (a job table) as TOML text; `tomllib.loads` of it gives `table` back."""
    lines = [f"# {h}" for h in header.splitlines()] + ([""] if header else [])
    for name, t in table.items():
        scalars = {k: v for k, v in t.items()
                   if not (isinstance(v, list) and v and all(isinstance(x, Mapping) for x in v))}
        arrays = {k: v for k, v in t.items() if k not in scalars}
        lines.append(f"[{_toml_key(name)}]")
        lines.extend(f"{_toml_key(k)} = {_toml_value(v)}" for k, v in scalars.items())
        lines.append("")
        for k, entries in arrays.items():
            for e in entries:
                lines.append(f"[[{_toml_key(name)}.{_toml_key(k)}]]")
                lines.extend(f"{_toml_key(kk)} = {_toml_value(vv)}" for kk, vv in e.items())
                lines.append("")
    return "\n".join(lines)


def oneline_job(model: str, model_args: str, tasks: str, *, for_job_file: bool = False, **kw):
    """(job table, validated `ProbeJob`) of a one-line start (`oneline_table`, then `job_from_dict`);
    `for_job_file`: the table will be written as a job file (`check_job_text`, before the model
    is resolved: resolving may convert its weights first)."""
    from ._job import job_from_dict

    table = oneline_table(model, model_args, tasks, **kw)
    if for_job_file:
        check_job_text(table)
    return table, job_from_dict(table)


def check_job_text(table: Mapping[str, Any], where: str = "") -> None:
    """Every key and text of a job table is valid UTF-8 (a job file is UTF-8 TOML): a value
    given as bytes that are not UTF-8 (a command line in another encoding reaches Python as
    lone surrogates) is refused naming its key, before anything is written."""
    for key, value in table.items():
        name = f"{where}.{key}" if where else str(key)
        items = value if isinstance(value, (list, tuple)) else [value]
        for k, v in enumerate(items):
            at = f"{name}[{k}]" if isinstance(value, (list, tuple)) else name
            if isinstance(v, Mapping):
                check_job_text(v, at)
                continue
            for text in (str(key), v) if isinstance(v, str) else (str(key),):
                try:
                    text.encode("utf-8")
                except UnicodeEncodeError:
                    raise ArgumentError(f"--write-job: the job's {at} = {ascii(text)} is not valid UTF-8 "
                                        "(from --model-args, --tasks or --gen-kwargs); a job file is UTF-8 "
                                        "text: give the value in UTF-8") from None


def check_job_path(path: str | os.PathLike, *, overwrite: bool = False) -> Path:
    """The `--write-job` path's own rules, checked before any work (resolving the model of a
    one-line start may convert its weights first): a UTF-8 path, not an existing file unless
    `overwrite`."""
    path = Path(path)
    try:    # the file names itself in its header, which is UTF-8 text
        str(path).encode("utf-8")
    except UnicodeEncodeError:
        raise ArgumentError(f"--write-job {ascii(str(path))}: the path is not valid UTF-8 (the job file "
                            "names itself in its header); give a UTF-8 path") from None
    if path.exists() and not overwrite:
        raise FileExistsError(f"{path}: already exists (pass --overwrite)")
    return path


def write_job_file(table: Mapping[str, Any], path: str | os.PathLike, *, overwrite: bool = False) -> Path:
    """Write a one-line start's job table to `path` as TOML (`--write-job`), atomically, never onto an input."""
    from otbench.files import refuse_input, write_text_atomic

    path = check_job_path(path, overwrite=overwrite)
    check_job_text(table)
    refuse_input(path, *(s["path"] for s in table.get("data", {}).get("sources", ()) if "path" in s),
                 *([table["model"]["path"]] if "path" in table.get("model", {}) else []))
    write_text_atomic(path, job_toml(table, header=(
        "Written by `otbench probe run --write-job`; the same job again:\n"
        f"  otbench probe run --config {path.name} --out DIR")))
    return path
