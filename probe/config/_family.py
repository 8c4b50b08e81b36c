"""Model families and model entries: frozen, versioned TOML files under `artifacts/` (docs/rules.md).

A *family* fixes the chat format, where the instruction goes, the
thinking-end marker, the answer-channel prefix, the sampling defaults and
the limits. A *model* entry names its family, repository and revision. Both
are plain data; `compile_format` turns a family into token-id sequences for
one tokenizer (`_probe_ids.ProbeFormat`).
"""

import dataclasses
import importlib.resources
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from otbench.errors import OtbenchError

FAMILY_SCHEMA = "otbench.family/1"
MODEL_SCHEMA = "otbench.model/1"
INSTRUCTIONS_SCHEMA = "otbench.instructions/1"
INSTRUCTION_PLACES = ("system", "user_prefix")


class ArtifactError(OtbenchError, ValueError):
    """A malformed family / model / instructions file; the message names the file and the key."""


@dataclasses.dataclass(frozen=True)
class Sampling:
    """Sampling parameters (docs/rules.md). `top_k = 0` and `presence_penalty = 0` mean off."""

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    presence_penalty: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class Limits:
    """Token limits: thinking (trajectory), answer (per probe) and context."""

    thinking: int = 32768
    answer: int = 4096
    context: int = 65536


@dataclasses.dataclass(frozen=True)
class Family:
    """A model family's chat format and defaults (one `artifacts/families/*.toml`).

    Attributes:
      instruction: "system" (own system turn) or "user_prefix" (prepended to
        the user message, joined by `user_prefix_join`).
      system, user, assistant: turn templates with `{system}` / `{user}`;
        `assistant` is the generation prompt (it opens the thinking for
        native thinking models).
      native_thinking: the model emits `thinking_end` itself; False for the
        generic chat family, whose whole reply is the trajectory.
      thinking_end: marker appended by the probe ("" for none).
      signal_token: the token whose next-token log-probability is the
        ThinkBrake signal (docs/rules.md).
      separator: inserted before the marker unless the retained text already
        ends with a line feed.
      answer_prefix: answer-channel opening after the marker (for the generic
        family, the answer-forcing suffix).
      answer_stop: strings that end an answer (each must be one token).
    """

    name: str
    version: int
    description: str
    instruction: str
    system: str
    user: str
    assistant: str
    user_prefix_join: str
    native_thinking: bool
    thinking_end: str
    signal_token: str
    separator: str
    answer_prefix: str
    answer_stop: tuple[str, ...]
    sampling: Sampling
    limits: Limits

    def render_prompt(self, instruction: str, question: str) -> str:
        """The prompt text up to and including the generation prompt.

        >>> fam = load_family("qwen3-thinking")
        >>> fam.render_prompt("Be brief.", "1+1?")
        '<|im_start|>system\\nBe brief.<|im_end|>\\n<|im_start|>user\\n1+1?<|im_end|>\\n<|im_start|>assistant\\n<think>\\n'
        """
        if self.instruction == "system":
            head = self.system.format(system=instruction)
            user = question
        else:
            # A fixed preamble (e.g. a BOS string) is kept; a system turn is not rendered.
            head = "" if "{system}" in self.system else self.system
            user = instruction + self.user_prefix_join + question if instruction else question
        return head + self.user.format(user=user) + self.assistant

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class ModelEntry:
    """A frozen model entry (one `artifacts/models/*.toml`).

    `boundary` is the tokenizer's segmentation rule (`_segment.SPAN_RULES`):
    "vocab" (docs/rules.md) unless its paragraph breaks span tokens.
    `tensor_parallel_size` is the GPUs per engine the entry needs on 80 GB
    GPUs at its family's context, and `memory_gib` the per-GPU estimate
    behind it (weights/TP + one full-context sequence's KV cache/TP + a
    reserve; `_hub.estimate_memory` recomputes it from the files at run time).
    """

    name: str
    version: int
    family: str
    repository: str
    revision: str
    dtype: str
    boundary: str = "vocab"
    source: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    tensor_parallel_size: int = 1
    memory_gib: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def artifacts_dir() -> Path:
    """The folder of the installed frozen artifacts (families, models, instructions)."""
    return Path(str(importlib.resources.files("otbench.artifacts")))


CONFIG_LIMIT = 1 << 20
"""Bytes a family, model or instructions file may hold (they are a few hundred)."""


def _read(path: Path, schema: str) -> dict[str, Any]:
    from otbench.files import read_regular_text

    text = read_regular_text(path, CONFIG_LIMIT, what="a config file (a small TOML table)",
                             fail=lambda why: ArtifactError(f"{path}: {why}"))
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ArtifactError(f"{path}: not valid TOML ({e})") from None
    if data.get("schema") != schema:
        raise ArtifactError(f"{path}: schema must be {schema!r}, got {data.get('schema')!r}")
    return data


def _get(data: Mapping, path: Path, key: str, typ, default=dataclasses.MISSING):
    cur: Any = data
    parts = key.split(".")
    for p in parts:
        if not isinstance(cur, Mapping) or p not in cur:
            if default is not dataclasses.MISSING:
                return default
            raise ArtifactError(f"{path}: missing key {key!r}")
        cur = cur[p]
    ok = isinstance(cur, typ) and not (typ in (int, float) and isinstance(cur, bool))
    if typ is float and isinstance(cur, int) and not isinstance(cur, bool):
        cur, ok = float(cur), True
    if not ok:
        raise ArtifactError(f"{path}: {key!r} must be {typ.__name__}, got {type(cur).__name__}")
    return cur


def _resolve(kind: str, name_or_path: str | Path) -> Path:
    p = Path(name_or_path)
    if p.suffix == ".toml" or p.is_file():
        return p
    return artifacts_dir() / kind / f"{name_or_path}.toml"


def family_from_dict(data: Mapping[str, Any], path: Path | str = "<family>") -> Family:
    """Validate a parsed family table (see `artifacts/families/*.toml`)."""
    path = Path(path)
    instruction = _get(data, path, "chat.instruction", str)
    if instruction not in INSTRUCTION_PLACES:
        raise ArtifactError(f"{path}: 'chat.instruction' must be one of "
                            f"{', '.join(INSTRUCTION_PLACES)}, got {instruction!r}")
    stop = _get(data, path, "answer.stop", list)
    if not stop or not all(isinstance(s, str) and s for s in stop):
        raise ArtifactError(f"{path}: 'answer.stop' must be a non-empty list of non-empty strings")
    sampling = Sampling(
        temperature=_get(data, path, "sampling.temperature", float),
        top_p=_get(data, path, "sampling.top_p", float),
        top_k=_get(data, path, "sampling.top_k", int),
        presence_penalty=_get(data, path, "sampling.presence_penalty", float),
    )
    limits = Limits(thinking=_get(data, path, "limits.thinking", int),
                    answer=_get(data, path, "limits.answer", int),
                    context=_get(data, path, "limits.context", int))
    fam = Family(
        name=_get(data, path, "name", str), version=_get(data, path, "version", int),
        description=_get(data, path, "description", str, ""),
        instruction=instruction,
        system=_get(data, path, "chat.system", str), user=_get(data, path, "chat.user", str),
        assistant=_get(data, path, "chat.assistant", str),
        user_prefix_join=_get(data, path, "chat.user_prefix_join", str, "\n\n"),
        native_thinking=_get(data, path, "thinking.native", bool),
        thinking_end=_get(data, path, "thinking.end", str),
        signal_token=_get(data, path, "thinking.signal_token", str),
        separator=_get(data, path, "thinking.separator", str),
        answer_prefix=_get(data, path, "answer.prefix", str),
        answer_stop=tuple(stop), sampling=sampling, limits=limits,
    )
    if "{user}" not in fam.user:
        raise ArtifactError(f"{path}: 'chat.user' must contain {{user}}")
    if fam.native_thinking and not fam.thinking_end:
        raise ArtifactError(f"{path}: a native thinking family needs 'thinking.end'")
    if not fam.signal_token:
        raise ArtifactError(f"{path}: 'thinking.signal_token' must not be empty")
    return fam


def load_family(name_or_path: str | Path) -> Family:
    """A family by name (`artifacts/families/<name>.toml`) or from a TOML file path."""
    path = _resolve("families", name_or_path)
    return family_from_dict(_read(path, FAMILY_SCHEMA), path)


def load_model(name_or_path: str | Path) -> ModelEntry:
    """A model entry by name (`artifacts/models/<name>.toml`) or from a TOML file path."""
    path = _resolve("models", name_or_path)
    data = _read(path, MODEL_SCHEMA)
    return ModelEntry(
        name=_get(data, path, "name", str), version=_get(data, path, "version", int),
        family=_get(data, path, "family", str), repository=_get(data, path, "repository", str),
        revision=_get(data, path, "revision", str), dtype=_get(data, path, "dtype", str, "bfloat16"),
        boundary=_get(data, path, "boundary", str, "vocab"),
        source=dict(_get(data, path, "source", dict, {})),
        tensor_parallel_size=_get(data, path, "resources.tensor_parallel_size", int, 1),
        memory_gib=_get(data, path, "resources.memory_gib", float, None),
    )


def load_instructions(path: str | Path | None = None) -> dict[str, str]:
    """task -> instruction text (`artifacts/prompts/instructions.toml` by default)."""
    p = Path(path) if path else artifacts_dir() / "prompts" / "instructions.toml"
    data = _read(p, INSTRUCTIONS_SCHEMA)
    return {task: _get(data, p, f"{task}.text", str) for task in ("math", "choice", "code")}


def find_model(name: str) -> ModelEntry | None:
    """The model entry named `name`, or whose repository is `name` (a Hugging Face id, any case); else None."""
    if (artifacts_dir() / "models" / f"{name}.toml").is_file():
        return load_model(name)
    for entry in list_entries("models"):
        m = load_model(entry)
        if m.repository.lower() == name.lower():
            return m
    return None


def list_entries(kind: str) -> list[str]:
    """Names of the frozen entries of `kind` ("families" or "models")."""
    return sorted(p.stem for p in (artifacts_dir() / kind).glob("*.toml"))
