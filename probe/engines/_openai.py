"""The served-model engine: the probe over an OpenAI-compatible completions server.

Every request of the probe (the think phase, the answer probes, the
ThinkBrake signals, the readout log-probabilities) is one `POST
/v1/completions` whose `prompt` is a list of token ids, so the server never
re-tokenizes what the probe built. The request fields used are those of
vLLM's `CompletionRequest` (vLLM 0.32, `entrypoints/openai/completion/
protocol.py`): `prompt` (token ids), `n`, `seed`, `max_tokens`,
`temperature`, `top_p`, `top_k`, `min_p`, `presence_penalty`,
`frequency_penalty`, `repetition_penalty` (all sent, so a server's
generation-config defaults never apply), `stop_token_ids`, `ignore_eos`,
`return_token_ids` (the sampled ids, stop id included, as in-process),
`logprobs` + `logprob_token_ids` + `return_tokens_as_token_ids` (the
log-probabilities of chosen ids, keyed `token_id:N`), `logit_bias` (the
signal's exclusion of the thinking-end token) and `vllm_xargs` (a request's
`GenRequest.extra_args`, which vLLM maps onto `SamplingParams.extra_args`).
The tokenizer check uses vLLM's `POST /tokenize` and `POST /detokenize`.

The model's tokenizer and config are read from a local folder (the job's
`[model]`, resolved as for the in-process engines); the engine refuses to
start, in one line, when the server cannot serve STP exactly (`check_server`):
its tokenizer differs from the local one, it ignores token-id prompts,
returns no token ids or no log-probabilities of chosen ids, reports
post-processed instead of raw log-probabilities, or does not give sample `j`
of a seeded request the seed `seed + j` (then each sample is sent as a
request of its own with that seed; only a server whose single seeded
requests are not reproducible is refused).

Requests run on a pool of threads, at most `engine.max_concurrency` in flight;
each is retried with exponential backoff on 429, 5xx, refused or dropped
connections and timeouts for up to `engine.retry_s` seconds. A retried
request is the same request (same seed), and units are committed by the
probe's journal alone, so a retry never duplicates a committed unit.
"""


import json
import os
from collections.abc import Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

from otbench.probe.config import Sampling

from ._http import Client, ServerError, _printable, _Retryable
from ._interface import (
    Completion,
    EngineBase,
    EngineConfig,
    EngineStartError,
    GenRequest,
    Signal,
    SignalRequest,
    StreamBase,
)
from ._openai_checks import cache_counters, check_server
from ._openai_wire import (
    _choices,
    check_xargs,
    completions,
    first_logprobs,
    generation_body,
    logprob_body,
    prompt_returned_means,
    prompt_top_means,
    signal_of,
)
from otbench.errors import ArgumentError

# vLLM's server writes a log-probability below this as this (`max(logprob, -9999.0)`).
LOGPROB_FLOOR = -9999.0


# -- the engine --------------------------------------------------------------------------------

def _local_config(folder: str) -> dict:
    try:
        cfg = json.loads((Path(folder) / "config.json").read_text())
    except (OSError, ValueError) as e:
        raise EngineStartError(f"{folder}: cannot read the model's config.json ({e})") from None
    return cfg if isinstance(cfg, dict) else {}


def _vocab_rows(cfg: dict, folder: str) -> int:
    for c in (cfg, cfg.get("text_config") or {}):
        v = c.get("vocab_size")
        if isinstance(v, int) and v > 0:
            return v
    raise EngineStartError(f"{folder}/config.json: no vocab_size (needed for the probe's vocabulary)")


class OpenAIEngine(EngineBase):
    """`Engine` over an OpenAI-compatible completions server (vLLM's; see the module docstring)."""

    name = "openai"

    def __init__(self, config: EngineConfig, *, client: Client | None = None):
        if not config.base_url:
            raise EngineStartError("engine.base_url is required for engine.kind = 'openai' "
                                   "(e.g. \"http://127.0.0.1:8000\")")
        if not config.model:
            raise EngineStartError("engine.kind = 'openai' needs a local folder with the model's "
                                   "tokenizer and config.json ([model] path, name or embedded entry)")
        key = None
        if config.api_key_env:
            key = os.environ.get(config.api_key_env)
            if not key:
                raise EngineStartError(f"engine.api_key_env names ${config.api_key_env}, which is not set "
                                       "(the key itself never goes into the job)")
            if not _printable(key):
                raise EngineStartError(f"${config.api_key_env} holds a control character (CR/LF?) "
                                       "or a non-ASCII character; refused (the key is not shown)")
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from transformers import AutoTokenizer

        self.config = config
        self._client = client or Client(config.base_url, api_key=key, timeout_s=config.request_timeout_s,
                                        retry_s=config.retry_s)
        try:
            self._tok = AutoTokenizer.from_pretrained(config.model, local_files_only=True,
                                                      revision=None, trust_remote_code=False)
        except (OSError, ValueError) as e:
            raise EngineStartError(f"{config.model}: no loadable tokenizer "
                                   f"({' '.join(str(e).split())[:200]})") from None
        cfg = _local_config(config.model)
        self._vocab = _vocab_rows(cfg, config.model)
        self._eos = {int(self._tok.eos_token_id)} if self._tok.eos_token_id is not None else set()
        e = cfg.get("eos_token_id")
        self._eos.update([e] if isinstance(e, int) else [x for x in (e or []) if isinstance(x, int)])
        self._pool = ThreadPoolExecutor(max_workers=config.max_concurrency, thread_name_prefix="otbench-http")
        try:
            self._server = check_server(self._client, config, self._tok, vocab=self._vocab)
        except BaseException:
            self.close()
            raise
        self.model = self._server["model"]

    # -- Engine ----------------------------------------------------------------------------
    def tokenizer(self):
        return self._tok

    def vocab_size(self) -> int:
        return self._vocab

    def capacity(self) -> int:
        """Requests in flight at once (`engine.max_concurrency`): the probe's units-in-flight default."""
        return int(self.config.max_concurrency)

    def stream(self, sampling: Sampling) -> "OpenAIStream":
        return OpenAIStream(self, sampling)

    def _run_all(self, requests: Sequence, sampling: Sampling) -> list:
        s = self.stream(sampling)
        for i, r in enumerate(requests):
            s.submit(i, r)
        out: dict[int, Any] = {}
        while s.in_flight():
            out.update(s.poll())
        return [out[i] for i in range(len(requests))]

    def generate(self, requests: Sequence[GenRequest], sampling: Sampling) -> list[list[Completion]]:
        return self._run_all(list(requests), sampling)

    def signals(self, contexts: Sequence[Sequence[int]], token_id: int) -> list[Signal]:
        return self._run_all([SignalRequest(c, int(token_id)) for c in contexts], Sampling(0.0, 1.0, 0, 0.0))

    def choice_logprobs(self, contexts: Sequence[Sequence[int]],
                        token_ids: Sequence[int]) -> list[list[float]]:
        """Next-token raw log-probabilities of `token_ids` after each context (one request per context)."""
        want = [int(t) for t in token_ids]

        def one(ctx):
            where = f"{self._client.base_url}/v1/completions"
            lp = first_logprobs(_choices(self._post(logprob_body(self.model, ctx, want)), where)[0], where,
                                self._vocab)
            missing = [t for t in want if t not in lp]
            if missing:
                raise ServerError(f"{where}: no log-probability of token {missing[0]}")
            return [lp[t] for t in want]
        return list(self._pool.map(one, [list(c) for c in contexts]))

    def _post(self, body: dict) -> Any:
        return self._client.request("POST", "/v1/completions", body)

    def _generate_one(self, r: GenRequest, sampling: Sampling) -> list[Completion]:
        where = f"{self._client.base_url}/v1/completions"
        ch = _choices(self._post(generation_body(self.model, r, sampling)), where)
        if len(ch) != r.n:
            raise ServerError(f"{where}: asked for n = {r.n} samples, got {len(ch)}")
        comps = completions(ch, {int(s) for s in r.stop_ids}, self._eos, where, logprobs=r.logprobs,
                            vocab=self._vocab, max_tokens=int(r.max_tokens), top_logprobs=int(r.top_logprobs))
        if r.prompt_top_logprobs > 0:
            top = prompt_top_means(ch[0], len(r.prompt), int(r.prompt_top_logprobs), where)
            back = prompt_returned_means(ch[0], len(r.prompt), where)
            comps = [c._replace(prompt_top_mean=top, prompt_returned_mean=back) for c in comps]
        return comps

    def _signal_one(self, r: SignalRequest) -> Signal:
        where = f"{self._client.base_url}/v1/completions"
        t = int(r.token_id)
        return signal_of(_choices(self._post(logprob_body(self.model, r.context, [t], exclude=t)), where)[0],
                         t, where, self._vocab)

    def cache_stats(self) -> dict[str, int] | None:
        """The server's cumulative prefix-cache counters (`/metrics`; shared with its other clients), or None.

        A counter that is not a whole number in [0, 2**63) is a `ServerError` (`cache_counters`)."""
        try:
            text = self._metrics()
        except ServerError:
            return None
        return cache_counters(text, f"{self._client.base_url}/metrics")

    def _metrics(self) -> str:
        try:
            status, data, _ = self._client._once("GET", "/metrics", None)
        except _Retryable as e:
            raise ServerError(str(e)) from None
        if status != 200:
            raise ServerError(f"/metrics: HTTP {status}")
        return data.decode("utf-8", "replace")

    def info(self) -> dict[str, Any]:
        # base_url is in `config` (a resource: a moved server still serves the same units);
        # what the server is (its library, version, served name, sample seeding) is here.
        return {"engine": "openai", "served": True, "server": dict(self._server), "device": "server",
                "config": {k: v for k, v in self.config.as_dict().items()}}

    def retries(self) -> int:
        return self._client.retries

    def close(self) -> None:
        pool, self._pool = getattr(self, "_pool", None), None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
        client = getattr(self, "_client", None)
        if client is not None:
            client.close()


class OpenAIStream(StreamBase):
    """`Stream` over the engine's thread pool: a request is sent when submitted, its result kept when done.

    Greedy requests with `n > 1`, and every `n > 1` request on a server that
    does not seed sample `j` with `seed + j`, go as `n` single-sample
    requests with seeds `seed + j` (the in-process engines' convention).
    """

    def __init__(self, engine: OpenAIEngine, sampling: Sampling):
        self._e, self._sampling = engine, sampling
        self._split_all = not engine._server.get("seed_plus_j", True)
        self._futures: dict[Future, tuple[Any, int]] = {}
        self._parts: dict[Any, list] = {}
        self._kind: dict[Any, bool] = {}

    def in_flight(self) -> int:
        return len(self._parts)

    def submit(self, tag: Any, request: "GenRequest | SignalRequest") -> None:
        if tag in self._parts:
            raise ArgumentError(f"tag {tag!r} is already in flight")
        pool = self._e._pool
        if pool is None:
            raise ServerError("the openai engine is closed")
        if not isinstance(request, GenRequest):
            self._parts[tag], self._kind[tag] = [None], False
            self._futures[pool.submit(self._e._signal_one, request)] = (tag, 0)
            return
        if request.extra_args is not None:
            check_xargs(request.extra_args)           # refuse now, not in a worker thread
        sampling = request.sampling or self._sampling
        split = request.n > 1 and (sampling.temperature == 0.0 or self._split_all)
        pieces = [request._replace(n=1, seed=int(request.seed) + j) for j in range(request.n)] \
            if split else [request]
        self._parts[tag], self._kind[tag] = [None] * len(pieces), True
        for j, r in enumerate(pieces):
            self._futures[pool.submit(self._e._generate_one, r, sampling)] = (tag, j)

    def poll(self) -> list[tuple[Any, Any]]:
        if not self._futures:
            return []
        finished, _ = wait(list(self._futures), timeout=0.2, return_when=FIRST_COMPLETED)
        done = []
        for f in finished:
            tag, j = self._futures.pop(f)
            parts = self._parts.get(tag)
            if parts is None:
                continue
            parts[j] = f.result()              # a request that failed for good raises here
            if all(p is not None for p in parts):
                del self._parts[tag]
                gen = self._kind.pop(tag)
                done.append((tag, [c for p in parts for c in p] if gen else parts[0]))
        return done


