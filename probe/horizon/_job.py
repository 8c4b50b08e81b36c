"""A matched-horizon job: one frozen configuration, read from TOML (docs/rules.md).

Example (`otbench horizon run --config job.toml --out DIR`; the [model],
[engine] and [sampling] tables are those of a probe job, `_job`)::

    [model]
    name = "smollm2-135m-instruct"

    [engine]
    kind = "transformers"

    [data]
    source = "choice-sums"         # "choice-sums" | "positive-control" | "file" (GPQA-Diamond)
    n = 24
    seed = 0

    [horizon]
    replicates = 2                 # generation replicates per item and arm (shared seeds)
    thinking_limit = 512           # horizons must not exceed it
    answer_limit = 16              # natural answers and greedy continuations
    horizons = [0, 64, 128, 256, 512]
    checkpoints = [0, 64, 128, 192, 256, 320, 384, 448, 512]   # dense readouts
    contexts = ["policy", "common"]
    common_arm = "base"            # whose prompt every arm is read under in "common"
    closure = "neutral"            # a name in CLOSURES or in [closures]
    continuation = true            # greedy generated-answer check (<= 16 tokens)
    # answer_prefix = "\n\nThe correct option is"   # default: the family's answer prefix
    # control_arm = "base"; control_horizons = [64, 128, 256]; controls = ["random", "swap", "shuffle"]
    # seed = 0                     # seeds of the controls (random tokens, shuffles, swap donors)

    [[arm]]
    name = "base"
    [[arm]]
    name = "concise"
    instruction = "Keep the reasoning short and commit to an answer early."
    # effort = "low"               # GPT-OSS: replaces the "Reasoning: ..." line of the system message
    # script = "reveal-late"       # scripted reasoning instead of generation (positive control)

    [[matched]]                    # matched horizon chosen by one arm (its terminal length)
    lower = "concise"
    upper = "base"

    # [stp_logit]                  # candidate-logit STP of a stored measurement set
    # set = "runs/gpqa"            # its positions are read out; written to OUT/stp_logit
"""

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from otbench.probe.config import Family
from otbench.probe.stp import (
    HORIZON_RULES,
    JobError,
    ProbeJob,
    check_tables,
    job_from_dict,
    load_toml_job,
)

CLOSURES = {
    # The papers' neutral closure: only the family's thinking-end marker.
    "neutral": "",
    # A limited-time sentence (our wording) before the marker.
    "limited-time": "\n\nI am out of time, so I will stop reasoning here and answer from the "
                    "thinking so far.\n",
    # A paraphrased, answer-announcing closure (our wording).
    "paraphrase": "\n\nFrom the reasoning so far, my answer is:\n",
}
"""Built-in closures: text inserted between the stopped reasoning and the family's
thinking-end marker (token ids encoded once; the reasoning is never re-encoded).
A job may define more (or other wordings, e.g. a model vendor's documented
sentence) in a [closures] table."""
SCRIPTS = ("reveal-late", "reveal-early")
DATA_SOURCES = ("choice-sums", "positive-control", "file")
EFFORTS = ("low", "medium", "high")
DEFAULT_CHECKPOINTS = tuple(range(0, 513, 64))


@dataclasses.dataclass(frozen=True)
class Arm:
    """One generation condition.

    Attributes:
      name: the arm's id in the run.
      instruction: text appended (after a blank line) to the task instruction.
      effort: GPT-OSS reasoning effort ("low" | "medium" | "high") or None.
      script: a scripted reasoning policy (`_horizon_sources.SCRIPTS`) or None.
      thinking_limit: this arm's reasoning limit (default: the job's).
    """

    name: str
    instruction: str = ""
    effort: str | None = None
    script: str | None = None
    thinking_limit: int | None = None


@dataclasses.dataclass(frozen=True)
class HorizonJob:
    """Everything that determines a horizon run (see the module docstring)."""

    base: ProbeJob                       # model, family, engine, sampling
    data: Mapping[str, Any]
    arms: tuple[Arm, ...]
    replicates: int
    thinking_limit: int
    answer_limit: int
    horizons: tuple[int, ...]
    checkpoints: tuple[int, ...]
    contexts: tuple[str, ...]
    common_arm: str
    closure: str
    closure_text: str
    continuation: bool
    answer_prefix: str | None
    control_arm: str | None
    control_horizons: tuple[int, ...]
    controls: tuple[str, ...]
    matched: tuple[tuple[str, str], ...]
    seed: int
    stp_logit_set: str | None
    batch: int

    @property
    def family(self) -> Family:
        return self.base.family

    @property
    def read_horizons(self) -> tuple[int, ...]:
        """Every horizon with a "stop" readout: the horizons, checkpoints and control horizons."""
        return tuple(sorted(set(self.horizons) | set(self.checkpoints) | set(self.control_horizons)))

    def arm(self, name: str) -> Arm:
        return next(a for a in self.arms if a.name == name)

    def as_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["base"] = self.base.as_dict()
        d["data"] = dict(self.data)
        return d


def _ints(v: Any, where: str, *, positive: bool = False) -> tuple[int, ...]:
    if not isinstance(v, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in v):
        raise JobError(f"{where} must be a list of integers, got {v!r}")
    lo = 1 if positive else 0
    if any(x < lo for x in v):
        raise JobError(f"{where} must hold integers >= {lo}, got {v!r}")
    return tuple(sorted(set(v)))


def _pos(t: Mapping, key: str, where: str, default: int) -> int:
    v = t.get(key, default)
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise JobError(f"{where}.{key} must be a positive integer, got {v!r}")
    return v


def horizon_job_from_dict(cfg: Mapping[str, Any], *, base: Path | None = None) -> HorizonJob:
    """Validate a parsed horizon job (the TOML layout in the module docstring)."""
    check_tables(cfg, HORIZON_RULES, JobError)     # every table and key known
    h = dict(cfg.get("horizon", {}))
    think = _pos(h, "thinking_limit", "horizon", 512)
    answer = _pos(h, "answer_limit", "horizon", 16)
    probe_cfg = {k: cfg[k] for k in ("model", "engine", "sampling") if k in cfg}
    probe_cfg["probe"] = {"thinking_limit": think, "answer_limit": answer}
    pj = job_from_dict(probe_cfg, base=base)

    d = _data(cfg, base)
    arms = _arms(cfg.get("arm", [{"name": "base"}]), pj, think)
    names = [a.name for a in arms]

    horizons = _ints(h.get("horizons", [0, 64, 128, 256, 512]), "horizon.horizons")
    checkpoints = _ints(h.get("checkpoints", list(DEFAULT_CHECKPOINTS)), "horizon.checkpoints")
    ctl_h = _ints(h.get("control_horizons", [b for b in horizons if b > 0]), "horizon.control_horizons",
                  positive=True)
    for what, hs in (("horizons", horizons), ("checkpoints", checkpoints),
                     ("control_horizons", ctl_h)):
        if hs and hs[-1] > think:
            raise JobError(f"horizon.{what} must not exceed horizon.thinking_limit ({think}), "
                           f"got {hs[-1]}")
    if not horizons:
        raise JobError("horizon.horizons must not be empty")
    contexts = h.get("contexts", ["policy", "common"])
    if not isinstance(contexts, list) or not contexts or any(c not in ("policy", "common") for c in contexts):
        raise JobError(f"horizon.contexts must be a non-empty list of 'policy' / 'common', got {contexts!r}")
    common = h.get("common_arm", names[0])
    if common not in names:
        raise JobError(f"horizon.common_arm must name an arm ({', '.join(names)}), got {common!r}")
    closures = dict(CLOSURES)
    extra = cfg.get("closures", {})
    closures.update(extra)         # a table of strings: HORIZON_RULES["closures"]
    closure = h.get("closure", "neutral")
    if closure not in closures:
        raise JobError(f"horizon.closure must be one of {', '.join(sorted(closures))}, got {closure!r}")
    cont = h.get("continuation", True)
    if not isinstance(cont, bool):
        raise JobError(f"horizon.continuation must be true or false, got {cont!r}")
    prefix = h.get("answer_prefix")
    if prefix is not None and not isinstance(prefix, str):
        raise JobError("horizon.answer_prefix must be a string")
    if prefix is None and not pj.family.native_thinking:
        raise JobError(f"horizon.answer_prefix is required for the {pj.family.name!r} family (its "
                       "answer prefix is written for math answers), e.g. \"\\n\\nThe correct option is\"")
    ctl_arm = h.get("control_arm", names[0] if "controls" in h or "control_horizons" in h else None)
    if ctl_arm is not None and ctl_arm not in names:
        raise JobError(f"horizon.control_arm must name an arm ({', '.join(names)}), got {ctl_arm!r}")
    controls = h.get("controls", ["random", "swap", "shuffle"] if ctl_arm else [])
    if not isinstance(controls, list) or any(c not in ("random", "swap", "shuffle") for c in controls):
        raise JobError(f"horizon.controls must list 'random', 'swap', 'shuffle', got {controls!r}")
    seed = h.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise JobError(f"horizon.seed must be a non-negative integer, got {seed!r}")
    matched = _matched(cfg.get("matched", []), names, contexts)
    stp_set = _stp_set(cfg.get("stp_logit"), base)
    return HorizonJob(
        base=pj, data=d, arms=tuple(arms), replicates=_pos(h, "replicates", "horizon", 1),
        thinking_limit=think, answer_limit=answer, horizons=horizons, checkpoints=checkpoints,
        contexts=tuple(contexts), common_arm=common, closure=closure, closure_text=closures[closure],
        continuation=cont, answer_prefix=prefix, control_arm=ctl_arm,
        control_horizons=ctl_h if ctl_arm else (), controls=tuple(controls) if ctl_arm else (),
        matched=tuple(matched), seed=seed, stp_logit_set=stp_set,
        batch=_pos(h, "batch", "horizon", 64))


def _data(cfg: Mapping[str, Any], base: Path | None) -> dict[str, Any]:
    """The [data] table: a multiple-choice source (relative file paths resolve against `base`)."""
    d = dict(cfg.get("data", {"source": "choice-sums"}))
    if d.get("source") not in DATA_SOURCES:
        raise JobError(f"data.source must be one of {', '.join(DATA_SOURCES)}, got {d.get('source')!r}")
    if "n" in d:
        _pos(d, "n", "data", 1)
    if d["source"] == "file":
        for k in ("benchmark", "path"):
            if not isinstance(d.get(k), str):
                raise JobError(f"data.{k} is required for data.source = 'file'")
        if base is not None and not Path(d["path"]).is_absolute():
            d["path"] = str(base / d["path"])

    return d


def _arms(raw_arms, pj: ProbeJob, think: int) -> list[Arm]:
    """The [[arm]] blocks: unique names, a known effort / script, limits within the job's."""
    if not isinstance(raw_arms, list) or not raw_arms:
        raise JobError("[[arm]] must list at least one arm")
    arms = []
    for j, a in enumerate(raw_arms):
        where = f"arm[{j}]"
        name = a.get("name")
        if not isinstance(name, str) or not name or "," in name:
            raise JobError(f"{where}.name must be a non-empty string without commas, got {name!r}")
        instr = a.get("instruction", "")
        if not isinstance(instr, str):
            raise JobError(f"{where}.instruction must be a string")
        effort = a.get("effort")
        if effort is not None and effort not in EFFORTS:
            raise JobError(f"{where}.effort must be one of {', '.join(EFFORTS)}, got {effort!r}")
        if effort is not None and "Reasoning: " not in pj.family.system:
            raise JobError(f"{where}.effort needs a family whose system message has a 'Reasoning: ' "
                           f"line (GPT-OSS); {pj.family.name!r} has none")
        script = a.get("script")
        if script is not None and script not in SCRIPTS:
            raise JobError(f"{where}.script must be one of {', '.join(SCRIPTS)}, got {script!r}")
        lim = a.get("thinking_limit")
        if lim is not None:
            lim = _pos(a, "thinking_limit", where, 1)
            if lim > think:
                raise JobError(f"{where}.thinking_limit ({lim}) must not exceed horizon.thinking_limit "
                               f"({think})")
        arms.append(Arm(name, instr, effort, script, lim))
    names = [a.name for a in arms]
    if len(set(names)) != len(names):
        raise JobError(f"arm names must be unique, got {names}")

    return arms


def _matched(raw, names: Sequence[str], contexts: Sequence[str]) -> list[tuple[str, str]]:
    """The [[matched]] blocks: (lower arm, upper arm), each arm the lower of at most one."""
    matched = []
    for j, m in enumerate(raw):
        lo, up = m.get("lower"), m.get("upper")
        if lo not in names or up not in names or lo == up or set(m) - {"lower", "upper"}:
            raise JobError(f"matched[{j}] must name two different arms as lower and upper, got {m!r}")
        if "common" not in contexts:
            raise JobError("[[matched]] readouts use the common context: add 'common' to horizon.contexts")
        matched.append((lo, up))
    if len({lo for lo, _ in matched}) != len(matched):
        raise JobError("each arm may be the lower arm of one [[matched]] block")
    return matched


def _stp_set(stp, base: Path | None) -> str | None:
    """The [stp_logit] table's measurement-set folder, or None."""
    if stp is None:
        return None
    if not isinstance(stp, dict) or not isinstance(stp.get("set"), str) or set(stp) - {"set"}:
        raise JobError("[stp_logit] needs `set`, the directory of a stored measurement set")
    return stp["set"] if base is None or Path(stp["set"]).is_absolute() else str(base / stp["set"])


def load_horizon_job(path: str | Path) -> HorizonJob:
    """Read and validate a horizon job TOML file (relative paths resolve against its folder)."""
    return load_toml_job(path, horizon_job_from_dict)
