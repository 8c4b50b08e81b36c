"""Request bodies and answer parsing of the served-model engine (pure functions, no I/O).

The fields are those of vLLM 0.32's `CompletionRequest` (see `_openai`'s
module docstring); every answer is checked for the shape the probe needs,
and a malformed one is a one-line `ServerError`.
"""

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from otbench.probe.config import Sampling

from ._http import ServerError
from ._interface import (
    Completion,
    GenRequest,
    Signal,
)
from otbench.errors import ArgumentError

# OpenAI's (and vLLM's server's) logit-bias range: vLLM clamps a bias to [-100, 100].
_EXCLUDE_BIAS = -100.0


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
            raise ArgumentError(f"extra_args[{k!r}] = {v!r} cannot be sent as vllm_xargs (values must be "
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
    if r.thinking_token_budget is not None:
        # vLLM's completion request field (`entrypoints/openai/completion/protocol.py`); the server
        # needs its own --reasoning-config, which the client cannot see.
        body["thinking_token_budget"] = int(r.thinking_token_budget)
    if r.logprobs:
        # The sampled token's raw log-probability per position (`token_logprobs`); raw as the
        # server's --logprobs-mode raw_logprobs gives it (`check_server` insists on that mode).
        body["logprobs"] = 0
    if r.prompt_top_logprobs > 0:
        body["prompt_logprobs"] = int(r.prompt_top_logprobs)
    if r.top_logprobs > 0:
        # `top_logprobs` per position too: the N most probable ids (and the sampled one, merged into
        # the same object when it is among them), keyed token_id:N.
        body["logprobs"] = int(r.top_logprobs)
        body["return_tokens_as_token_ids"] = True
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


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _logprob(v: Any) -> bool:
    """A log-probability: a finite number <= 0 (a probability is at most 1)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v <= 0


def _choices(resp: Any, where: str) -> list[dict]:
    """The answer's choices: objects with distinct integer indices 0..n-1, in index order."""
    ch = resp.get("choices") if isinstance(resp, dict) else None
    if not isinstance(ch, list) or not ch:
        raise ServerError(f"{where}: the answer has no choices")
    if not all(isinstance(c, dict) for c in ch):
        raise ServerError(f"{where}: the answer's choices are not all objects")
    idx = [c.get("index", 0 if len(ch) == 1 else None) for c in ch]
    if not all(_int(i) for i in idx) or sorted(idx) != list(range(len(ch))):
        raise ServerError(f"{where}: the answer's choice indices {idx[:8]} are not the distinct "
                          f"integers 0..{len(ch) - 1}")
    return [c for _, c in sorted(zip(idx, ch), key=lambda x: x[0])]


def _token_ids(choice: dict, where: str, vocab: int | None = None) -> list[int]:
    ids = choice.get("token_ids")
    if not isinstance(ids, list):
        raise ServerError(f"{where}: the answer has no token ids (the server ignores return_token_ids)")
    bad = next((t for t in ids if not _int(t) or t < 0 or (vocab is not None and t >= vocab)), None)
    if bad is not None or (ids and not all(_int(t) for t in ids)):
        raise ServerError(f"{where}: the answer's token id {bad!r} is not an integer in the "
                          f"vocabulary [0, {vocab if vocab is not None else 'vocab'})")
    return list(ids)


def first_logprobs(choice: dict, where: str, vocab: int | None = None) -> dict[int, float]:
    """{token id: log-probability} at the first generated position (`token_id:N` keys)."""
    lp = choice.get("logprobs")
    top = lp.get("top_logprobs") if isinstance(lp, dict) else None
    if not isinstance(top, list) or not top or not isinstance(top[0], dict):
        raise ServerError(f"{where}: the answer has no log-probabilities")
    out = {}
    for k, v in top[0].items():
        m = re.fullmatch(r"token_id:([0-9]{1,12})", str(k))
        if m is None:
            raise ServerError(f"{where}: log-probabilities keyed {str(k)[:40]!r}, not token_id:N "
                              "(the server ignores return_tokens_as_token_ids)")
        t = int(m.group(1))
        if vocab is not None and t >= vocab:
            raise ServerError(f"{where}: a log-probability of token {t}, outside the vocabulary "
                              f"[0, {vocab})")
        if not _logprob(v):
            raise ServerError(f"{where}: the log-probability of token {t} is {v!r}, not a finite "
                              "number <= 0")
        out[t] = float(v)
    return out


def _token_logprobs(choice: dict, n: int, where: str) -> tuple[float, ...]:
    lp = choice.get("logprobs")
    vals = lp.get("token_logprobs") if isinstance(lp, dict) else None
    if not isinstance(vals, list) or len(vals) < n:
        raise ServerError(f"{where}: the answer lacks a log-probability per decoded token "
                          "(asked with logprobs = 0)")
    bad = next((v for v in vals[:n] if not _logprob(v)), "ok")
    if bad != "ok":
        raise ServerError(f"{where}: the answer lacks a log-probability per decoded token "
                          f"(one is {bad!r}, not a finite number <= 0)")
    return tuple(float(v) for v in vals[:n])


def _top_means(choice: dict, n: int, k: int, where: str) -> tuple[float, ...]:
    """Per decoded position, the mean of the `k` largest of its `top_logprobs` values."""
    lp = choice.get("logprobs")
    tops = lp.get("top_logprobs") if isinstance(lp, dict) else None
    if not isinstance(tops, list) or len(tops) < n:
        raise ServerError(f"{where}: the answer lacks the top log-probabilities of each decoded token "
                          f"(asked with logprobs = {k})")
    out = []
    for pos in tops[:n]:
        vals = list(pos.values()) if isinstance(pos, dict) else None
        if vals is None or len(vals) < k or not all(_logprob(v) for v in vals):
            raise ServerError(f"{where}: a position's top log-probabilities are not {k} or more finite "
                              "numbers <= 0")
        top = sorted((float(v) for v in vals), reverse=True)[:k]
        out.append(sum(top) / k)
    return tuple(out)


def prompt_top_means(choice: dict, n_prompt: int, k: int, where: str) -> tuple[float, ...]:
    """Per prompt token after the first, the mean of the `k` largest of its ``prompt_logprobs``
    (vLLM's server: a list, None first, then {token id: {"logprob": ...}} per prompt token)."""
    pl = choice.get("prompt_logprobs")
    if not isinstance(pl, list) or len(pl) < n_prompt:
        raise ServerError(f"{where}: the answer lacks the prompt log-probabilities asked for "
                          f"(prompt_logprobs = {k})")
    out = []
    for pos in pl[1:n_prompt]:
        vals = [v.get("logprob") if isinstance(v, dict) else v for v in pos.values()] \
            if isinstance(pos, dict) else None
        if vals is None or len(vals) < k or not all(_logprob(v) for v in vals):
            raise ServerError(f"{where}: a prompt position's log-probabilities are not {k} or more "
                              "finite numbers <= 0")
        out.append(sum(sorted((float(v) for v in vals), reverse=True)[:k]) / k)
    return tuple(out)


def prompt_returned_means(choice: dict, n_prompt: int, where: str) -> tuple[float, ...]:
    """Per prompt token after the first, the mean of every value of its ``prompt_logprobs`` entry
    (the token's own and the top k, one key when it is among them; `Completion.prompt_returned_mean`),
    in the server's order. The entries are checked by `prompt_top_means`, which reads them first."""
    import numpy as np

    out = []
    for pos in choice["prompt_logprobs"][1:n_prompt]:
        vals = [float(v.get("logprob") if isinstance(v, dict) else v) for v in pos.values()]
        out.append(float(np.mean(np.asarray(vals, dtype=np.float64))))
    return tuple(out)


def completions(choices: Sequence[dict], stops: set[int], eos: set[int], where: str, *,
                logprobs: bool = False, vocab: int | None = None,
                max_tokens: int | None = None, top_logprobs: int = 0) -> list[Completion]:
    """`Completion`s of a generation answer, with the in-process engine's stop rule (`VLLMEngine._completions`);
    `logprobs`: each decoded token's log-probability too (`GenRequest.logprobs`). Every id is
    an integer in `[0, vocab)`, and no choice holds more than `max_tokens` tokens."""
    out = []
    for c in choices:
        ids = tuple(_token_ids(c, where, vocab))
        if max_tokens is not None and len(ids) > max_tokens:
            raise ServerError(f"{where}: a choice holds {len(ids)} tokens, more than the "
                              f"max_tokens {max_tokens} asked")
        stop = None
        if c.get("finish_reason") == "stop":
            if ids and (ids[-1] in stops or ids[-1] in eos):
                stop, ids = ids[-1], ids[:-1]
            else:
                sr = c.get("stop_reason")
                # vLLM names the stop id that ended a choice, else a stop string or None: an id
                # is a token of the vocabulary (the run stores it as an int32 column; 2**40
                # ended a finished run in an overflow), anything else an unattributed stop (-1)
                if _int(sr) and not 0 <= sr < (vocab if vocab is not None else 2 ** 31):
                    raise ServerError(f"{where}: the answer's stop_reason {sr} is not a token id in "
                                      f"the vocabulary [0, {vocab if vocab is not None else 2 ** 31})")
                stop = int(sr) if _int(sr) else -1
        out.append(Completion(ids, stop, _token_logprobs(c, len(ids), where) if logprobs else None,
                              _top_means(c, len(ids), top_logprobs, where) if top_logprobs > 0 else None))
    return out


def signal_of(choice: dict, token_id: int, where: str, vocab: int | None = None) -> Signal:
    ids = _token_ids(choice, where, vocab)
    if not ids:
        raise ServerError(f"{where}: a signal request generated no token")
    if len(ids) > 1:
        raise ServerError(f"{where}: a signal request (max_tokens 1) generated {len(ids)} tokens")
    other = ids[0]
    if other == token_id:
        raise ServerError(f"{where}: the signal token stayed the greedy choice under a {_EXCLUDE_BIAS:g} "
                          "logit bias (the server's limit); the most likely other token is undefined here")
    lp = first_logprobs(choice, where, vocab)
    if token_id not in lp or other not in lp:
        raise ServerError(f"{where}: the answer lacks the log-probability of token {token_id} or {other}")
    return Signal(lp[token_id], lp[other], other)
