"""What a stored measurement set gives its online replay: its trajectories, family, engine and grader.

A set is data anyone can edit: it never chooses where a credential goes (`engine_config_of`),
and one made without a probe run is refused before any engine starts (`check_replayable`).
Split from `_replay` (the replay and its comparison) by role: these read the stored run.
"""

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np


@dataclasses.dataclass(frozen=True)
class Trajectory:
    """One stored trajectory to replay: ids, seeds and its step ends `L(0..n)`."""

    question: str
    trajectory: int
    prompt: tuple[int, ...]
    thinking: tuple[int, ...]
    L: tuple[int, ...]
    seed_think: int
    seed_answer: int



def set_trajectories(directory, ms: Any, rows: Sequence[int]) -> list[Trajectory]:
    """The stored ids and seeds of `ms`'s trajectories `rows`, from the set's `tokens` table."""
    from otbench.analysis.measurement import MeasurementSetError, load_table
    from otbench.probe.config import derive_seed

    tab = load_table(directory, "tokens").to_pydict()
    index = {(g, q, int(r)): i for i, (g, q, r) in enumerate(zip(tab["group"], tab["question"], tab["trajectory"]))}
    out = []
    for row in rows:
        g = ms.groups[int(ms.cell_group[int(ms.cell[row])])]
        q = ms.question_id[int(ms.question[row])]
        r = int(ms.trajectory[row])
        i = index.get((g, q, r))
        if i is None:
            raise MeasurementSetError(str(directory), f"tokens table has no row for ({g}, {q}, trajectory {r})")
        n = int(ms.n[row])
        L = tuple(int(x) for x in ms.L[row, :n + 1])
        sa = tab["seed_answer"][i]
        if sa is None:      # the probe needed no answer request; the seed it would have used
            sa = derive_seed(tab["model"][i], tab["dataset"][i], q, r, "answer")
        out.append(Trajectory(q, r, tuple(tab["prompt"][i]), tuple(tab["thinking"][i]), L,
                              int(tab["seed_think"][i]), int(sa)))
    return out


def grade_rows(ms: Any, rows: Sequence[int], texts: Sequence[str], grader: str) -> tuple[str, np.ndarray]:
    """(grader name, bool[len(rows)]): each online answer text graded against its row's question."""
    from otbench.probe.data import load_questions
    from otbench.probe.grading import GradeItem, open_grader

    questions = {(q.group, q.id): q for q in load_questions(ms.provenance["data"])}
    name, grade, close = open_grader(grader)
    try:
        items = []
        for row, text in zip(rows, texts):
            g = ms.groups[int(ms.cell_group[int(ms.cell[row])])]
            q = questions[(g, ms.question_id[int(ms.question[row])])]
            items.append(GradeItem(q.task, q.reference, text, q))
        return name, np.array([bool(c) for c, _ in grade(items)], dtype=bool)
    finally:
        close()


RECORDED = "recorded"
"""`--base-url recorded`: the set's recorded server address, used without credentials."""


def engine_config_of(prov: Mapping[str, Any], logits_processors: Sequence[str], *,
                     server: Mapping[str, Any] | None = None) -> Any:
    """The set's recorded engine settings, with the model located and the controller loaded.

    A set is data anyone can edit, so it never chooses where a credential goes: its
    recorded `base_url` and `api_key_env` are dropped. A served engine's address comes
    from `server` (the user's command: ``{"base_url": URL, "api_key_env": VAR}``), or,
    with ``base_url = "recorded"`` (the user's explicit consent), is the recorded one,
    reached without any credential.
    """
    from otbench.probe.config import embedded_model_dir
    from otbench.descriptors import ENGINE_SPECS
    from otbench.probe.engines import EngineConfig

    from .._request import OnlineControlError

    engine = prov.get("engine", {})
    cfg = dict(engine.get("config", {})) if isinstance(engine, Mapping) and isinstance(
        engine.get("config", {}), Mapping) else {}
    known = {f.name for f in dataclasses.fields(EngineConfig)}
    cfg = {k: (tuple(v) if isinstance(v, list) else v) for k, v in cfg.items() if k in known}
    recorded_url = cfg.pop("base_url", None)
    cfg.pop("api_key_env", None)
    asked = dict(server or {})
    url, key_env = asked.get("base_url"), asked.get("api_key_env")
    kind = cfg.get("kind")
    if isinstance(kind, str) and kind in ENGINE_SPECS and ENGINE_SPECS[kind].served:
        if not url:
            raise OnlineControlError(
                f"the set was probed on a served engine (recorded at {recorded_url!r}); name the "
                f"server with --base-url URL (and --api-key-env VAR for its key), or pass "
                f"--base-url {RECORDED} to reach the recorded address without credentials "
                "(a set's recorded address is never sent a key)")
        if url == RECORDED:
            if key_env:
                raise OnlineControlError("--api-key-env needs --base-url URL: the recorded "
                                         "address of a set is never sent a key")
            url = recorded_url
        cfg["base_url"], cfg["api_key_env"] = url, key_env
    elif url or key_env:
        raise OnlineControlError(f"--base-url/--api-key-env: the set was probed by an in-process "
                                 f"engine ({cfg.get('kind', 'vllm')!r}), not a served one")
    weights = str(prov.get("model", {}).get("weights", ""))
    model = str(embedded_model_dir(weights.split(":", 1)[1], log=lambda *_: None)) \
        if weights.startswith("embedded:") else weights
    cfg["model"] = model
    cfg["logits_processors"] = tuple(logits_processors)
    return EngineConfig(**cfg)


def set_family(prov: Mapping[str, Any]) -> Any:
    """The chat family the set was probed with, refused in one line when this otbench has another
    version of it: the server's processor loads the family by name, and otbench's close at a cut
    is the family's."""
    from otbench.probe.config import load_family

    from .._request import OnlineControlError

    fam = load_family(prov["family"]["name"])
    if fam.version != prov["family"].get("version"):
        raise OnlineControlError(f"the set was probed with family {fam.name} version "
                                 f"{prov['family'].get('version')}; this otbench has version {fam.version}")
    return fam


def batch_invariance(prov: Mapping[str, Any], replay_config: Any) -> dict[str, Any]:
    """Whether vLLM's batch-invariant kernels (`EngineConfig.batch_invariant`) were on in the stored run
    and in the replay (None: not recorded). Without them in both, a seeded replay batched otherwise
    may leave the stored tokens, and the certificate names such a divergence as its own kind."""
    def on(cfg: Any) -> bool | None:
        if cfg is None:
            return None
        if not isinstance(cfg, Mapping):
            cfg = getattr(cfg, "as_dict", lambda: {})()
        return bool(cfg.get("batch_invariant", False)) if isinstance(cfg, Mapping) else None

    engine = prov.get("engine")
    stored = on(engine.get("config") if isinstance(engine, Mapping) else None)
    replay = on(replay_config)
    return {"stored": stored, "replay": replay, "both": bool(stored and replay)}


def replay_config(engine: Any, config: Any) -> Any:
    """The replay engine's configuration: the one started here, else what the engine reports."""
    if config is not None:
        return config
    info = engine.info() if hasattr(engine, "info") else {}
    return info.get("config") if isinstance(info, Mapping) else None


def check_replayable(directory, ms: Any) -> None:
    """Refuse, in one line, a set that cannot be replayed online (no probe provenance, synthetic)."""
    from .._request import OnlineControlError

    prov = ms.provenance
    if ms.synthetic or not all(isinstance(prov.get(k), Mapping) for k in ("family", "sampling", "engine")):
        raise OnlineControlError(f"{directory}: online replay needs a probe run (`otbench probe run`: its "
                                 "family, sampling, engine and token tables); this set "
                                 + ("is synthetic" if ms.synthetic else "has no probe provenance"))
