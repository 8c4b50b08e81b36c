"""What a started vLLM engine reports of its scheduler and KV cache (`VLLMEngine`'s optional capabilities).

The probe sizes its in-flight work by these (`probe.stp._kv`, `_bounds`) and writes the counters to
run.json; split from `_vllm` (the engine's start and requests) as one role: reading vLLM's own
configuration and metrics, never changing them. Read in vLLM 0.32.
"""

from typing import Any


class VLLMReports:
    """Mixed into `VLLMEngine`: reads `self._llm` (an `LLM`)."""

    _llm: Any

    def capacity(self) -> int:
        """Sequences the scheduler runs at once (`max_num_seqs`): the probe's units-in-flight default."""
        cfg = getattr(self._llm.llm_engine, "vllm_config", None)
        seqs = getattr(getattr(cfg, "scheduler_config", None), "max_num_seqs", None)
        return int(seqs) if seqs else 256

    def kv_cache_tokens(self) -> int | None:
        """Tokens the engine's KV cache holds, as its engine core sized it at start; None if not reported.

        vLLM 0.32: the core stores it in `cache_config.kv_cache_size_tokens`
        (`v1/core/kv_cache_utils.py`, `update_kv_cache_capacity`: group-aware, what vLLM logs as
        "KV cache size: N tokens") and sends it to the front end in its ready response
        (`v1/engine/core_client.py`, which sets the same field on the front end's config);
        without it, `num_gpu_blocks` x `block_size` (the same core-to-front-end copy).
        """
        cc = getattr(getattr(self._llm.llm_engine, "vllm_config", None), "cache_config", None)
        tokens = getattr(cc, "kv_cache_size_tokens", None)
        if tokens:
            return int(tokens)
        blocks, size = getattr(cc, "num_gpu_blocks", None), getattr(cc, "block_size", None)
        return int(blocks) * int(size) if blocks and size else None

    def kv_block_size(self) -> int | None:
        """Tokens per block of the engine's KV cache (`cache_config.block_size`: 16 on a GPU, 128 by
        default on a CPU), the unit in which its block manager holds a sequence (`probe.stp._kv`)."""
        cc = getattr(getattr(self._llm.llm_engine, "vllm_config", None), "cache_config", None)
        size = getattr(cc, "block_size", None)
        return int(size) if size else None

    def cache_stats(self) -> dict[str, int] | None:
        """Cumulative prefix-cache queries and hits (tokens) and the scheduler's preemptions, from vLLM's
        metrics snapshot (`LLM.get_metrics`; the counter `vllm:num_preemptions`, counted by
        `v1/metrics/loggers.py` from the engine core's PREEMPTED events)."""
        q = h = pre = 0
        for m in self._llm.get_metrics():
            if m.name == "vllm:prefix_cache_queries":
                q += int(m.value)
            elif m.name == "vllm:prefix_cache_hits":
                h += int(m.value)
            elif m.name == "vllm:num_preemptions":
                pre += int(m.value)
        return {"queries": q, "hits": h, "preemptions": pre}

    def model_runner(self) -> dict[str, Any]:
        """The model runner the engine core runs and its speculative tokens per step.

        vLLM 0.32 decides the runner from the same configuration in the front end and the core
        (`config/vllm.py`, `VllmConfig.use_v2_model_runner`, a property of the environment, Triton and
        the features asked for); the workers read it (`v1/worker/gpu_worker.py`, `cpu_worker.py`).
        Drafts per step: `VllmConfig.num_speculative_tokens`."""
        cfg = self._llm.llm_engine.vllm_config
        return {"runner": "v2" if bool(cfg.use_v2_model_runner) else "v1",
                "speculative_tokens": int(getattr(cfg, "num_speculative_tokens", 0) or 0)}
