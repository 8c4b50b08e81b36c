"""A probe job: one frozen configuration, read from TOML or built in code (docs/rules.md).

Example (`otbench probe run --config job.toml --out DIR`)::

    [model]
    name = "smollm2-135m-instruct"   # a frozen entry in artifacts/models/, or a Hugging Face id
                                     # ("Qwen/Qwen3-4B-Thinking-2507"), resolved through the HF cache
    # revision = "<commit hash>"     # hub models: pin the checkpoint (default: the entry's, else "main")
    # path = "/models/my-model"      # ... or a local Hugging Face directory
    # family = "generic-chat"        # required unless the name is an entry; overrides the entry's

    [engine]
    kind = "vllm"                    # an engine kind of otbench.descriptors.ENGINE_SPECS: or "transformers",
                                     # or "openai" (a served model: base_url, ...)
    dtype = "bfloat16"
    max_model_len = 2048             # default: the family's context limit
    block_size = 32

    [data]
    source = "sums"                  # "sums" | "arithmetic" | "champ" | "file"
    n = 8                            # questions (arithmetic: generated; others: the first n)
    seed = 0                         # generator seed (sums, arithmetic); GPQA option shuffling
    # limit = 5                      # first 5 questions of each group (`probe run --limit 5`)
    # benchmark = "MATH500"          # source = "file": see otbench.probe.data._benchmarks
    # path = "math500.jsonl"

    # Or several sources, pooled by group (otbench.probe.data._sources; schemas: ._schemas):
    # [[data.sources]]
    # benchmark = "AIME2025"         # built-in schema, or group + task + columns (a user schema)
    # path = "aime2025.jsonl"        # .jsonl / .parquet / .csv / saved dataset folder ...
    # hub = "MathArena/aime_2025"    # ... or a Hugging Face dataset (config, split, revision)
    # [[data.sources]]
    # embedded = "champ"             # offline: "sums" | "arithmetic" | "champ" (n, seed, group)

    [probe]
    R = 2                            # trajectories per question
    P = 4                            # answer probes per position
    b = 32                           # target tokens per step
    thinking_limit = 256             # defaults: the family's limits
    answer_limit = 16
    # units_per_batch = 32           # every key's default and meaning: the job TOML reference
    # units_in_flight = 256          # units in flight at once (default: sized to the engine)
    # requests_in_flight = 2048      # engine sequences of probe-phase requests (default: sized to the engine)
    # direct_answer = true           # also one answer per question to the no-thinking prompt
    # boundary = "vocab"             # segmentation rule (default: the model entry's; docs/rules.md)
    # hesitation_words = ["wait", "hold", "but", "okay", "no", "hmm"]   # the hesitation signal's words
    # field_probes = ["dynasor", "deer", "deepconf", "thinkbrake"]   # each field method's own signal (docs/rules.md)
    # deepconf_window = 2048         # DeepConf's group-confidence window (with "deepconf" above)

    [sampling]                       # optional overrides of the family's defaults
    temperature = 0.6

    [grader]
    kind = "auto"                    # "auto" | "otbench" | "minimal"

    # [trajectories]                 # probe traces you already have instead of sampling
    # path = "traces.jsonl"          # (or hub/config/split/revision), see probe.stp._imported
    # format = "otbench"             # "otbench" | "lm-eval" | "chat" (probe.data._traces)
    # per_question = 4               # keep the first N trajectories of each question
"""

import dataclasses
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from otbench.analysis.measurement import SPAN_RULES
from otbench.probe.config import Family, Sampling, find_model, list_entries, load_family
from otbench.probe.engines import EngineConfig
from otbench.probe.grading import DEEPCONF_WINDOW, GRADERS, hesitation_pattern

from otbench.descriptors import ENGINE_SPECS, file_benchmarks
from otbench.errors import OtbenchError
from otbench.files import read_regular

from ._field_probes import FIELD_PROBES, check_field_probes
from ._job_keys import STP_RULES, default
from ._toml_rules import check_tables

DATA_SOURCES = ("sums", "arithmetic", "champ", "file")


class JobError(OtbenchError, ValueError):
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
      hub: (repository, revision) of a Hugging Face model resolved through the
        hub cache at run start (`_hub.resolve_hub_model`), or None.
      data: the question source table (see the module docstring).
      R, P, b: trajectories per question, probes per position, target step length.
      thinking_limit, answer_limit: token limits (trajectory, each answer).
      sampling: sampling parameters for trajectories and probes (docs/rules.md:
        probes use the model's own parameters).
      grader: "auto" | "otbench" | "minimal".
      units_per_batch: work units (question x trajectory) a Ray worker holds
        in its backlog beyond its units in flight, so a finished unit is
        replaced without a round trip to the driver (and the in-flight bound
        of an engine that reports no capacity).
      units_in_flight: units between admission and result at once in one
        engine (None: sized to the engine, `_setup.units_in_flight`).
      requests_in_flight: engine sequences (a request of n samples counts n)
        of probes, signals and forced answers in flight at once in one engine
        (None: sized to the engine, `_setup.requests_in_flight`); with the
        units' think requests this bounds the engine's queue and host memory.
      direct_answer: also sample one answer per question to the no-thinking
        prompt (the set's `direct` table; docs/rules.md, beside `P(0)`).
      boundary: segmentation rule, "vocab" (docs/rules.md) or "vocab+span".
      hesitation_words: the words of the `hesitation` field signal (whole
        words, case-insensitive; default Dynasor-CoT's list).
      field_probes: field methods whose own probes are also decoded at every
        position ("dynasor", "deer"; `_field_probes`), recorded as the
        ``dynasor_*`` / ``deer_*`` signals; () (the default): none.
      trajectories: the `[trajectories]` table (probe imported traces instead
        of sampling, `_imported`), or None.
      replay: the imported trajectories resolved to token ids; set by the
        runner (`_imported.import_trajectories`), empty in a job as read.
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
    grader: str = default("grader", "kind")
    units_per_batch: int = default("probe", "units_per_batch")
    boundary: str = "vocab"
    model_entry: Mapping[str, Any] | None = None
    trajectories: Mapping[str, Any] | None = None
    replay: tuple = ()
    units_in_flight: int | None = None
    requests_in_flight: int | None = None
    hub: tuple[str, str | None] | None = None
    direct_answer: bool = default("probe", "direct_answer")
    hesitation_words: tuple[str, ...] = default("probe", "hesitation_words")
    field_probes: tuple[str, ...] = ()
    deepconf_window: int = DEEPCONF_WINDOW

    def as_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(dataclasses.replace(self, replay=()))
        d.pop("replay")
        if not d["field_probes"]:       # a job without them reads as it always did
            d.pop("field_probes")
        if "deepconf" not in self.field_probes:
            d.pop("deepconf_window")
        d["data"] = dict(self.data)
        return d


def _pos_int(table: Mapping, key: str, where: str, default=None) -> int:
    v = table.get(key, default)
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise JobError(f"{where}.{key} must be a positive integer, got {v!r}")
    return v


def job_from_dict(cfg: Mapping[str, Any], *, base: Path | None = None) -> ProbeJob:
    """Validate a parsed job table (the TOML layout in the module docstring)."""
    check_tables(cfg, STP_RULES, JobError)     # every table and key known, of its type
    model_id, family, entry, embedded, path, hub = _model_iv(dict(cfg.get("model", {})), base)
    e = dict(cfg.get("engine", {}))
    e.setdefault("max_model_len", family.limits.context)
    if entry is not None:
        e.setdefault("tensor_parallel_size", entry.tensor_parallel_size)
    engine = _engine_iv(e, path)

    d = _data_iv(dict(cfg.get("data", {"source": default("data", "source")})), base)

    p = dict(cfg.get("probe", {}))
    R, P, b = (_pos_int(p, k, "probe", default("probe", k)) for k in ("R", "P", "b"))
    think = _pos_int(p, "thinking_limit", "probe", family.limits.thinking)
    answer = _pos_int(p, "answer_limit", "probe", family.limits.answer)
    upb = _pos_int(p, "units_per_batch", "probe", default("probe", "units_per_batch"))
    uif = _pos_int(p, "units_in_flight", "probe") if "units_in_flight" in p else None
    rif = _pos_int(p, "requests_in_flight", "probe") if "requests_in_flight" in p else None
    direct = p.get("direct_answer", default("probe", "direct_answer"))
    if not isinstance(direct, bool):
        raise JobError(f"probe.direct_answer must be true or false, got {direct!r}")
    words = p.get("hesitation_words", list(default("probe", "hesitation_words")))
    try:
        hesitation_pattern(words if isinstance(words, list) else [])
    except ValueError:
        raise JobError(f"probe.hesitation_words must be a non-empty list of words, got {words!r}") from None
    try:
        fp = check_field_probes(p.get("field_probes", []))
    except ValueError:
        raise JobError(f"probe.field_probes must list distinct names of {', '.join(FIELD_PROBES)}, "
                       f"got {p.get('field_probes')!r}") from None
    dwin = _pos_int(p, "deepconf_window", "probe", default=DEEPCONF_WINDOW)
    if "deepconf_window" in p and "deepconf" not in fp:
        raise JobError("probe.deepconf_window applies only when probe.field_probes lists \"deepconf\"")
    boundary = p.get("boundary", entry.boundary if entry else "vocab")
    if boundary not in SPAN_RULES:
        raise JobError(f"probe.boundary must be one of {', '.join(SPAN_RULES)}, got {boundary!r}")

    s = dict(cfg.get("sampling", {}))
    base_s = family.sampling.as_dict()
    base_s.update(s)
    sampling = _sampling_iv(base_s)

    g = dict(cfg.get("grader", {}))
    grader = g.get("kind", default("grader", "kind"))
    if grader not in GRADERS:
        raise JobError(f"grader.kind must be one of {', '.join(GRADERS)}, got {grader!r}")
    if think + max(answer, 64 if fp else 0) + 8 > engine.max_model_len:    # field probes: suffix + 20
        raise JobError(f"engine.max_model_len ({engine.max_model_len}) must exceed "
                       f"probe.thinking_limit + probe.answer_limit ({think} + {answer}) plus the prompt")
    traj = None
    if "trajectories" in cfg:
        if "R" in p:
            raise JobError("probe.R does not apply with [trajectories] (the records are the "
                           "trajectories; trajectories.per_question keeps the first N of each question)")
        traj = _trajectories_iv(cfg["trajectories"], base, _resolve)
    return ProbeJob(model=model_id, family=family, engine=engine, embedded=embedded, hub=hub, data=d,
                    R=R, P=P, b=b, thinking_limit=think, answer_limit=answer, sampling=sampling,
                    grader=grader, units_per_batch=upb, units_in_flight=uif, requests_in_flight=rif,
                    boundary=boundary,
                    direct_answer=direct, hesitation_words=tuple(str(w) for w in words), field_probes=fp, deepconf_window=dwin,
                    model_entry=entry.as_dict() if entry else None,
                    trajectories=traj)


def _engine_iv(e: dict[str, Any], path: str) -> EngineConfig:
    """The `[engine]` table (with its defaults set), checked against its kind's `EngineSpec`:
    a key that some kinds declare as their own (`EngineSpec.keys`) only with one of them, and
    every key the kind requires (`EngineSpec.required`)."""
    kind = e.pop("kind", default("engine", "kind"))
    if not isinstance(kind, str) or kind not in ENGINE_SPECS:
        raise JobError(f"engine.kind must be one of {', '.join(ENGINE_SPECS)}, got {kind!r}")
    engine = EngineConfig(kind=kind, model=path, **e)
    # the declared kinds and the chosen one (an installed kind's own keys are not job keys
    # unless the key table defines them, so only a chosen installed record is read)
    declared = ENGINE_SPECS.declared()
    specs = [*declared, *([] if any(s.kind == kind for s in declared) else [ENGINE_SPECS[kind]])]
    owners = {key: [s.kind for s in specs if key in s.keys] for key in e}
    wrong = sorted(key for key, kinds in owners.items() if kinds and kind not in kinds)
    if wrong:
        only = " or ".join(f"engine.kind = {k!r}" for k in owners[wrong[0]])
        raise JobError(f"engine.{wrong[0]} applies to {only} only")
    for key, example in ENGINE_SPECS[kind].required:
        if not getattr(engine, key):
            raise JobError(f"engine.{key} is required for engine.kind = {kind!r} (e.g. {example})")
    return engine


def _resolve(path: str, base: Path | None) -> str:
    return str(base / path) if base is not None and not Path(path).is_absolute() else path


def _trajectories_iv(t: Mapping[str, Any], base, resolve) -> dict:
    """The `[trajectories]` table, checked (`resolve` makes a relative path absolute)."""
    from otbench.probe.data import TRACE_FORMATS

    t = dict(t)          # keys and their types: STP_RULES["trajectories"]
    if ("path" in t) == ("hub" in t):
        raise JobError("[trajectories] needs exactly one of `path` (a local file or saved dataset) "
                       "or `hub` (a Hugging Face dataset id)")
    if t.get("format", "otbench") not in TRACE_FORMATS:
        raise JobError(f"trajectories.format must be one of {', '.join(TRACE_FORMATS)}, "
                       f"got {t['format']!r}")
    t.setdefault("format", "otbench")
    if "path" in t:
        t["path"] = resolve(t["path"], base)
    return t


def _data_iv(d: dict, base: Path | None) -> dict:
    """The [data] table, checked: one `source`, or a list of `[[data.sources]]` (`probe.data._sources`)."""
    if "limit" in d:
        _pos_int(d, "limit", "data")
    if "seed" in d and (isinstance(d["seed"], bool) or not isinstance(d["seed"], int)):
        raise JobError(f"data.seed must be an integer, got {d['seed']!r}")
    if "sources" in d:
        extra = sorted(set(d) - {"sources", "seed", "limit"})
        if extra:
            raise JobError(f"data.{extra[0]} cannot be combined with [[data.sources]] "
                           "(set it on each source)")
        if not isinstance(d["sources"], list) or not d["sources"]:
            raise JobError("data.sources must be a non-empty list of tables ([[data.sources]])")
        d["sources"] = [_source_iv(dict(s) if isinstance(s, Mapping) else s, f"data.sources[{i}]", base)
                        for i, s in enumerate(d["sources"])]
        return d
    if d.get("source") not in DATA_SOURCES:
        raise JobError(f"data.source must be one of {', '.join(DATA_SOURCES)}, got {d.get('source')!r}")
    if "n" in d:
        _pos_int(d, "n", "data")
    if d["source"] == "file":
        for k in ("benchmark", "path"):
            if not isinstance(d.get(k), str):
                raise JobError(f"data.{k} is required for data.source = 'file'")
        d["path"] = _resolve(d["path"], base)
    return d


_SOURCE_KEYS = {"benchmark", "embedded", "path", "hub", "config", "split", "revision",
                "release_version", "contest_date", "group", "dataset", "task", "columns", "n", "seed"}


def _source_iv(s, where: str, base: Path | None) -> dict:
    """One `[[data.sources]]` table: where the rows are, and which schema reads them."""
    from otbench.descriptors import embedded_sources
    from otbench.probe.data import TASK_COLUMNS, UserSchema

    if not isinstance(s, dict):
        raise JobError(f"{where} must be a table, got {type(s).__name__}")
    for k in s:
        if k not in _SOURCE_KEYS:
            raise JobError(f"unknown key {where}.{k} (expected one of {', '.join(sorted(_SOURCE_KEYS))})")
    for k in ("benchmark", "embedded", "path", "hub", "config", "split", "revision", "release_version",
              "group", "dataset", "task"):
        if k in s and (not isinstance(s[k], str) or not s[k]):
            raise JobError(f"{where}.{k} must be a non-empty string, got {s[k]!r}")
    if "n" in s:
        _pos_int(s, "n", where)
    if "embedded" in s:
        if s["embedded"] not in embedded_sources():
            raise JobError(f"{where}.embedded must be one of {', '.join(embedded_sources())}, "
                           f"got {s['embedded']!r}")
        extra = sorted(set(s) - {"embedded", "n", "seed", "group"})
        if extra:
            raise JobError(f"{where}.{extra[0]} does not apply to an embedded source")
        return s
    if ("path" in s) == ("hub" in s):
        raise JobError(f"{where} needs exactly one of `path` (a local file or folder) or `hub` "
                       "(a Hugging Face dataset id)")
    if "path" in s:
        s["path"] = _resolve(s["path"], base)
        for k in ("config", "revision"):
            if k in s:
                raise JobError(f"{where}.{k} applies to `hub` sources only")
    if "benchmark" in s:
        if s["benchmark"] not in file_benchmarks():
            raise JobError(f"{where}.benchmark must be one of {', '.join(file_benchmarks())}, "
                           f"got {s['benchmark']!r} (or give a user schema: group, task, columns)")
        for k in ("group", "dataset", "task", "columns"):
            if k in s:
                raise JobError(f"{where}.{k} is for user schemas; a built-in benchmark sets it")
    else:
        _user_schema_iv(s, where, TASK_COLUMNS, UserSchema)
    lcb = s.get("benchmark") == "LiveCodeBench"
    if "release_version" in s and not lcb:
        raise JobError(f"{where}.release_version applies to benchmark = 'LiveCodeBench' only")
    if "release_version" in s and "config" in s:
        raise JobError(f"{where}: set release_version or config, not both (the release is the config)")
    if "contest_date" in s:
        if not lcb:
            raise JobError(f"{where}.contest_date applies to benchmark = 'LiveCodeBench' only")
        _date_window_iv(s["contest_date"], f"{where}.contest_date")
    return s


def _user_schema_iv(s: dict, where: str, task_columns, user_schema) -> None:
    for k in ("group", "task", "columns"):
        if k not in s:
            raise JobError(f"{where} needs `benchmark` (one of the built-in schemas) or a user schema "
                           f"(group, task, columns); missing {k}")
    if s["task"] not in task_columns:
        raise JobError(f"{where}.task must be one of {', '.join(task_columns)}, got {s['task']!r}")
    cols = s["columns"]
    if not isinstance(cols, Mapping):
        raise JobError(f"{where}.columns must be a table of column names")
    for k, v in cols.items():
        ok = isinstance(v, str) and v or (k == "incorrect" and isinstance(v, list) and v
                                          and all(isinstance(c, str) and c for c in v))
        if not ok:
            raise JobError(f"{where}.columns.{k} must be a column name, got {v!r}")
    try:
        user_schema(group=s["group"], dataset=s.get("dataset", s["group"]), task=s["task"], columns=cols)
    except ValueError as e:
        raise JobError(f"{where}.{e}") from None


def _date_window_iv(v, where: str) -> None:
    import datetime

    if not (isinstance(v, list) and len(v) == 2 and all(isinstance(x, str) for x in v)):
        raise JobError(f"{where} must be [first, last] ISO dates, e.g. [\"2025-01-01\", \"2025-04-30\"]")
    try:
        first, last = (datetime.date.fromisoformat(x) for x in v)
    except ValueError:
        raise JobError(f"{where} must be [first, last] ISO dates (YYYY-MM-DD), got {v!r}") from None
    if first > last:
        raise JobError(f"{where}: the first day {v[0]} is after the last {v[1]}")


def _no_family(name: str | None, local: bool) -> str:
    """Why [model] needs `family`, in the words that fit: an id the local Hugging Face cache does
    not hold is most likely mistyped, so that is said first (offline: the cache only)."""
    families = ", ".join(list_entries("families"))
    if name is None or local or "/" not in name:
        return f"model.family is required for a model that is not a model entry ({families})"
    try:
        from huggingface_hub import constants
        cached = (Path(constants.HF_HUB_CACHE) / f"models--{name.replace('/', '--')}").is_dir()
    except ImportError:
        cached = True                   # cannot tell: say only what is missing
    if not cached:
        return (f"model.name {name!r} was not found: it is not a model entry and not in the local "
                f"Hugging Face cache (check the id; to probe it, give model.family, one of "
                f"{families}, and it is downloaded when the run starts)")
    return (f"model.name {name!r} is not a model entry, so model.family is required (the chat "
            f"format: one of {families})")


def _model_iv(m: dict, base: Path | None):
    """(model id, family, entry, embedded name, local path, hub (repository, revision)) of [model]."""
    name, entry = m.get("name"), None
    if name is None and "path" not in m:
        raise JobError("[model] needs `name` (a model entry or a Hugging Face id) or `path` "
                       "(a local model directory)")
    if name is not None:
        if not isinstance(name, str) or not name:
            raise JobError(f"model.name must be a model entry name or a Hugging Face id, got {name!r}")
        entry = find_model(name)
        if entry is None and "/" not in name and "path" not in m:
            raise JobError(f"model.name {name!r} is neither a model entry ({', '.join(list_entries('models'))}) "
                           "nor a Hugging Face id (owner/name)")
    fam_name = m.get("family") or (entry.family if entry is not None else None)
    if fam_name is None:
        raise JobError(_no_family(name, "path" in m))
    family = load_family(fam_name)
    if "path" in m:
        path = str(Path(m["path"]) if base is None or Path(m["path"]).is_absolute() else base / m["path"])
        model_id = str(m.get("id") or name or Path(path).name)
        return model_id, family, entry, None, path, None
    if entry is not None and entry.source.get("kind") == "pypi-gguf":
        return str(m.get("id") or entry.name), family, entry, entry.name, "", None
    repo = entry.repository if entry is not None else name
    revision = m.get("revision", entry.revision if entry is not None else None)
    if revision is not None and (not isinstance(revision, str) or not revision):
        raise JobError(f"model.revision must be a commit hash, branch or tag, got {revision!r}")
    model_id = str(m.get("id") or (entry.name if entry is not None else name))
    return model_id, family, entry, None, "", (repo, revision)


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


JOB_LIMIT = 1 << 24
"""Bytes a job file may hold (they are a few kilobytes; the questions live in data files)."""


def load_toml_job(path: str | Path, build):
    """Read a job TOML and validate it with `build(cfg, base=folder)`; errors name the file."""
    path = Path(path)
    # `read_regular`: a FIFO or device named as the job is one line, not a hang.
    raw = read_regular(path, JOB_LIMIT, what="a job file (a TOML table)",
                       fail=lambda why: JobError(f"{path}: {why}"))
    try:
        cfg = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise JobError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    except tomllib.TOMLDecodeError as e:
        raise JobError(f"{path}: not valid TOML ({' '.join(str(e).split())})") from None
    except RecursionError:      # the parser recurses per inline table / array level
        raise JobError(f"{path}: not accepted TOML (nested too deep to parse)") from None
    try:
        return build(cfg, base=path.parent)
    except JobError as e:
        raise JobError(f"{path}: {e}") from None


def load_job(path: str | Path, *, limit: int | None = None) -> ProbeJob:
    """Read and validate a job TOML file (relative paths resolve against its folder).

    `limit` (`probe run --limit N`) sets `data.limit`: the first N questions of each group.
    """
    job = load_toml_job(path, job_from_dict)
    if limit is not None:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise JobError(f"--limit must be a positive integer, got {limit!r}")
        job = dataclasses.replace(job, data={**job.data, "limit": limit})
    return job
