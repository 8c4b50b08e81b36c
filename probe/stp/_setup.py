"""An engine made ready for a job: its model located, prompts encoded, vocabulary facts read (docs/rules.md).

Shared by the runner's local executor and the Ray workers (`_ray`), which
is why it is its own module: both build exactly the same `EngineSetup`, and
the driver checks that every worker's agrees before any unit is merged.
"""

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np
from otbench.probe.engines import EngineConfig
from otbench.probe.tokens import build_vocabulary, compile_format

from ._bounds import (
    FALLBACK_CAPACITY,
    default_requests,
    default_units,
    host_memory,
    thinking_bound,
)
from ._kv import DEFAULT_BLOCK
from ._direct import encode_prompts
from ._job import ProbeJob
from otbench.descriptors import ENGINE_SPECS
from otbench.errors import ArgumentError


@dataclasses.dataclass(frozen=True)
class EngineSetup:
    """What the run needs from an opened engine, as plain data (it crosses Ray to the driver).

    Attributes:
      prompts: prompt ids per question.
      tokenizer_hash, boundary_ids, newline_end_ids, newline_start_ids: the
        vocabulary facts recorded in the provenance.
      fingerprint: `_resume_keys.model_fingerprint` of the weights folder.
      info: `Engine.info()` (engine, library versions, device, config).
      vocab_size: rows of the model's output layer (the ids it can read and write).
    """

    prompts: tuple[tuple[int, ...], ...]
    tokenizer_hash: str
    boundary_ids: tuple[int, ...]
    newline_end_ids: tuple[int, ...]
    newline_start_ids: tuple[int, ...]
    fingerprint: str
    info: dict[str, Any]
    vocab_size: int = 0

    def agreement(self) -> dict[str, Any]:
        """Everything that must be equal across workers for their units to be interchangeable."""
        d = dataclasses.asdict(self)
        d["info"] = {k: v for k, v in self.info.items() if k != "config"}
        return d


def resolve_engine_config(job: ProbeJob, log) -> EngineConfig:
    """The job's engine settings with the model located: an embedded one converted (once per machine),
    a Hugging Face id resolved through the hub cache (its commit recorded as `revision`), a local
    folder checked. Raises `ModelNotFoundError` (one line) before any engine starts."""
    from otbench.probe.config import check_local_model, resolve_hub_model

    if job.embedded:
        from otbench.probe.config import embedded_model_dir
        return dataclasses.replace(job.engine, model=str(embedded_model_dir(job.embedded, log=log)))
    if job.hub is not None:
        repo, revision = job.hub
        log(f"resolving {repo} at {revision or 'main'} through the Hugging Face cache ...")
        # a served model (`EngineSpec.served`) needs only the tokenizer and configs here
        found = resolve_hub_model(repo, revision, weights=ENGINE_SPECS[job.engine.kind].needs_weights)
        return dataclasses.replace(job.engine, model=found.path, revision=found.commit)
    check_local_model(job.engine.model)
    return job.engine


def prepare(job: ProbeJob, engine_cfg: EngineConfig, engine, questions: Sequence,
            instructions: dict[str, str]):
    """(tokenizer, probe format, `EngineSetup`) for an opened engine; checks the context limit."""
    from otbench.probe.config import cache_dir

    from ._keys import model_fingerprint

    tok = engine.tokenizer()
    vocab = build_vocabulary(tok, engine.vocab_size())
    fmt = compile_format(job.family, tok, vocab, boundary_rule=job.boundary)
    prompts = encode_prompts(fmt, tok, questions, instructions)
    longest = max(map(len, prompts))
    need = longest + job.thinking_limit + len(fmt.separator_ids) + len(fmt.end_ids) \
        + len(fmt.answer_prefix_ids) + job.answer_limit + 1
    if need > engine_cfg.max_model_len:
        raise ArgumentError(f"engine.max_model_len {engine_cfg.max_model_len} is too small: the longest "
                            f"prompt ({longest} tokens) + thinking_limit + answer_limit needs {need}")
    setup = EngineSetup(
        prompts=tuple(tuple(p) for p in prompts), tokenizer_hash=vocab.tokenizer_hash,
        boundary_ids=tuple(vocab.boundary_ids.tolist()),
        newline_end_ids=tuple(np.flatnonzero(vocab.ends_newline).tolist()),
        newline_start_ids=tuple(np.flatnonzero(vocab.starts_newline).tolist()),
        fingerprint=model_fingerprint(engine_cfg.model, memo=cache_dir() / "fingerprints.json"),
        info=engine.info(), vocab_size=int(engine.vocab_size()))
    return tok, fmt, setup


def kv_cache(job: ProbeJob, engine) -> tuple[int, int] | None:
    """(tokens, block size) of the engine's KV cache, by which the driver admits every phase's sequences
    (`_kv.KVLedger`); None when the job sets `probe.requests_in_flight` (its number wins) or the
    engine reports no KV cache."""
    if job.requests_in_flight is not None:
        return None
    tokens = engine.kv_cache_tokens()
    if not tokens:
        return None
    block = getattr(engine, "kv_block_size", lambda: None)() or DEFAULT_BLOCK
    return int(tokens), int(block)


def _capacity(engine) -> int | None:
    cap = engine.capacity()
    return None if cap is None else int(cap)


def units_in_flight(job: ProbeJob, engine, prompts: Sequence[Sequence[int]] | None = None) -> int:
    """Units between admission and result at once: the job's `probe.units_in_flight`, else sized to the engine.

    A quarter of the engine's capacity (vLLM: its scheduler's `max_num_seqs`; `_bounds.default_units`),
    since a unit in its probe phase is (n+1)(P+1) engine sequences and the probe-phase sequences
    have their own bound (`requests_in_flight`), and all of them the KV cache's (`kv_cache`).
    Memory grows with these numbers, never with the run.
    """
    if job.units_in_flight is not None:
        return job.units_in_flight
    cap = _capacity(engine)
    return default_units(cap) if cap is not None else job.units_per_batch


def requests_in_flight(job: ProbeJob, engine, prompts: Sequence[Sequence[int]] | None = None) -> int:
    """Probe-phase engine sequences in flight at once: the job's `probe.requests_in_flight`, else twice
    the engine's capacity (`_bounds.default_requests`: the running batch and one waiting; the KV
    cache, `kv_cache`, then bounds all phases together)."""
    if job.requests_in_flight is not None:
        return job.requests_in_flight
    cap = _capacity(engine)
    return default_requests(cap if cap is not None else FALLBACK_CAPACITY)


def memory_line(job: ProbeJob, engine, prompts: Sequence[Sequence[int]]) -> str:
    """One line for the log: the in-flight bounds of this engine and their host-memory bound."""
    u, r = units_in_flight(job, engine, prompts), requests_in_flight(job, engine, prompts)
    kv = kv_cache(job, engine)
    longest = max(map(len, prompts), default=0)
    mem = host_memory(units=u, requests=r, prompt_tokens=longest,
                      thinking_limit=job.thinking_limit, answer_limit=job.answer_limit, P=job.P, b=job.b,
                      top_logprobs="deepconf" in getattr(job, "field_probes", ()))
    kv = "" if kv is None else (
        f"; every phase while it fits in the KV cache of {kv[0]:,} tokens in {kv[1]}-token blocks, "
        f"shared prefixes counted once (preemptions are counted in run.json)")
    return (f"in flight per engine: {u} units ({thinking_bound(u)} sampling their trajectory while the "
            f"engine is full), "
            f"{r} probe-phase sequences{kv}; {mem.line()}")
