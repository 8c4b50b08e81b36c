"""The device model of `otbench plan`: what one engine step costs on a GPU.

Decode is memory-bandwidth bound: every step of a batch of `B` sequences
reads the weights once and each sequence's KV cache, so one decoded token
costs `W / B + kv * c` bytes (`W` weight bytes, `kv` KV bytes per token of
context, `c` the token's context length) at a fraction `efficiency` of the
device's peak bandwidth. Prefill is compute bound: `2 * active parameters`
FLOPs per prompt token the prefix cache did not serve, at a fraction of the
peak dense BF16 rate. Nothing here imports an engine, torch or JAX.

Numbers and where they come from:

* devices: the vendors' datasheets (HBM capacity, peak HBM bandwidth, peak
  dense BF16 tensor throughput without sparsity);
* models: the resource notes of the frozen model entries (artifacts/models:
  weight bytes, parameters, KV bytes per token = layers x KV heads x head
  dim x 2 (K and V) x 2 bytes); a local model folder's `config.json` and
  weight files otherwise (`read_architecture`).
"""

import dataclasses
import json
from pathlib import Path
from typing import Any

from otbench.errors import OtbenchError

GIB = 1 << 30


class PlanError(OtbenchError, ValueError):
    """A plan cannot be made as asked (unknown device or model, a bad pilot); one line."""


@dataclasses.dataclass(frozen=True)
class Device:
    """One accelerator: memory (bytes), peak memory bandwidth (bytes/s), peak dense BF16 FLOP/s."""

    name: str
    memory: float
    bandwidth: float
    flops: float


DEVICES = {
    "h200": Device("NVIDIA H200 (SXM, 141 GB HBM3e)", 141e9, 4.8e12, 989e12),
    "h100": Device("NVIDIA H100 (SXM, 80 GB HBM3)", 80e9, 3.35e12, 989e12),
    "a100-80gb": Device("NVIDIA A100 (SXM, 80 GB HBM2e)", 80e9, 2.039e12, 312e12),
    "l40s": Device("NVIDIA L40S (48 GB GDDR6)", 48e9, 0.864e12, 362e12),
    # No datasheet fits every host: a stated reference machine. Two channels of DDR5-4800
    # (4,800 MT/s x 8 bytes x 2 = 76.8 GB/s, the JEDEC transfer rate) and 1 TFLOP/s of BF16
    # matrix throughput (an assumption). vLLM on CPU holds its KV cache in the job's
    # engine.kv_cache_gib (VLLM_CPU_KVCACHE_SPACE), not in a share of this memory.
    "cpu": Device("CPU (reference host: 2 x DDR5-4800, 76.8 GB/s, 1 TFLOP/s BF16; an assumption, "
                  "calibrate with --calibrate)", 64e9, 76.8e9, 1e12),
}
"""Peak figures from the vendors' datasheets (dense BF16, no sparsity); "cpu" is a stated reference
host, not a datasheet (calibrate it on a run of the machine: `--calibrate`)."""


@dataclasses.dataclass(frozen=True)
class Architecture:
    """What the device model needs of a model.

    Attributes:
      weight_bytes: bytes read per decode step (MoE: all experts; a large
        batch touches every expert).
      active_params: parameters a token passes through (prefill FLOPs).
      kv_bytes: KV-cache bytes per token of context (bfloat16 cache).
      source: where the numbers come from.
    """

    weight_bytes: float
    active_params: float
    kv_bytes: float
    source: str


def _entry(weights_gib: float, active_b: float, kv_kib: float, name: str) -> Architecture:
    return Architecture(weights_gib * GIB, active_b * 1e9, kv_kib * 1024,
                        f"model entry {name} (artifacts/models resource notes)")


ARCHITECTURES = {
    "qwen3-4b-thinking-2507": _entry(7.5, 4.0, 144, "qwen3-4b-thinking-2507"),
    "qwen3-30b-a3b-thinking-2507": _entry(56.9, 3.3, 96, "qwen3-30b-a3b-thinking-2507"),
    "deepseek-r1-distill-qwen-7b": _entry(14.2, 7.6, 56, "deepseek-r1-distill-qwen-7b"),
    "deepseek-r1-distill-qwen-14b": _entry(27.5, 14.8, 192, "deepseek-r1-distill-qwen-14b"),
    "deepseek-r1-distill-qwen-32b": _entry(61.0, 32.8, 256, "deepseek-r1-distill-qwen-32b"),
    # Half of GPT-OSS's 24 layers attend within a 128-token window: past it, only the
    # 12 full-attention layers grow the cache (12 x 8 x 64 x 2 x 2 bytes = 24 KiB/token).
    "gpt-oss-20b": _entry(12.8, 3.6, 24, "gpt-oss-20b"),
    # SmolLM2-135M: 30 layers x 3 KV heads x head dim 64.
    "smollm2-135m-instruct": _entry(0.25, 0.135, 22.5, "smollm2-135m-instruct"),
}
"""Architectures of the frozen model entries, from their `[resources]` notes."""


def read_architecture(folder: str | Path, dtype: str = "bfloat16") -> Architecture:
    """A local Hugging Face model folder's architecture: `config.json` and its weight files' sizes.

    Dense models only (active parameters = weight bytes / bytes per parameter).
    """
    folder = Path(folder)
    cfg_path = folder / "config.json"
    try:
        cfg = json.loads(cfg_path.read_text())
    except (OSError, ValueError) as e:
        raise PlanError(f"{cfg_path}: cannot read the model's config ({e})") from None
    try:
        layers = int(cfg["num_hidden_layers"])
        heads = int(cfg["num_attention_heads"])
        kv_heads = int(cfg.get("num_key_value_heads") or heads)
        head_dim = int(cfg.get("head_dim") or int(cfg["hidden_size"]) // heads)
    except (KeyError, TypeError, ValueError) as e:
        raise PlanError(f"{cfg_path}: no {e} for the KV-cache size (num_hidden_layers, "
                        "num_attention_heads, hidden_size or head_dim)") from None
    weights = sum(p.stat().st_size for p in folder.iterdir()
                  if p.suffix in (".safetensors", ".gguf", ".bin") and p.is_file())
    if weights == 0:
        raise PlanError(f"{folder}: no weight files (*.safetensors, *.gguf, *.bin) to size the model")
    per = {"float32": 4, "bfloat16": 2, "float16": 2}.get(dtype, 2)
    return Architecture(float(weights), weights / per, layers * kv_heads * head_dim * 2 * per,
                        f"{cfg_path.name} and weight files of the local model folder")


def architecture(job) -> Architecture:
    """The job's model: its frozen entry's numbers, else its local folder's config."""
    entry = job.model_entry or {}
    name = entry.get("name") if isinstance(entry, dict) else None
    if name in ARCHITECTURES:
        return ARCHITECTURES[name]
    folder = job.engine.model
    if folder and (Path(folder) / "config.json").is_file():
        return read_architecture(folder, job.engine.dtype)
    raise PlanError(f"model {job.model!r}: no architecture known to the planner (a model entry of "
                    f"{', '.join(sorted(ARCHITECTURES))}, or a local model folder with config.json)")


@dataclasses.dataclass(frozen=True)
class Throughput:
    """The device model's settings (printed with every plan).

    Attributes:
      device: the accelerator; tp: GPUs per engine (tensor parallel: bandwidth,
        memory and FLOPs add, communication is not modelled).
      max_num_seqs: the scheduler's limit on sequences decoded per step; fewer
        run when the KV cache cannot hold that many (`batch_for`).
      block_size: tokens per KV block (None: vLLM's default for the device).
      efficiency: fraction of peak bandwidth decode reaches (low, central, high).
      prefill_efficiency: fraction of peak FLOP/s prefill reaches.
      memory_utilization: the engine's share of device memory (vLLM's
        gpu_memory_utilization).
      reserve: bytes kept for activations and graphs.
    """

    device: Device
    tp: int = 1
    max_num_seqs: int = 256
    efficiency: tuple[float, float, float] = (0.6, 0.75, 0.9)
    prefill_efficiency: float = 0.5
    memory_utilization: float = 0.9
    reserve: float = 4 * GIB
    kv_cache_bytes: float | None = None
    block_size: int | None = None

    @property
    def block(self) -> int:
        """Tokens per KV-cache block: vLLM's default, 16 on a GPU (`CacheConfig.block_size`) and 128
        on a CPU (vLLM 0.32 `platforms/cpu.py`, `check_and_update_config`, where the user set none)."""
        if self.block_size is not None:
            return int(self.block_size)
        return 128 if self.device.name.startswith("CPU") else 16

    def kv_capacity(self, arch: Architecture) -> float:
        """Tokens of context the KV cache holds (`kv_cache_bytes` when set: vLLM on CPU)."""
        if self.kv_cache_bytes is not None:
            return self.kv_cache_bytes / arch.kv_bytes
        free = self.tp * self.device.memory * self.memory_utilization - arch.weight_bytes - self.reserve
        if free <= 0:
            raise PlanError(f"the weights ({arch.weight_bytes / GIB:.1f} GiB) do not fit on "
                            f"{self.tp} x {self.device.name} at {self.memory_utilization:.0%} of memory")
        return free / arch.kv_bytes

    def batch_for(self, arch: Architecture, shape: tuple) -> float:
        """Sequences decoded at once: the scheduler's limit or the answers of the probe groups that the
        driver admits into the KV cache (`probe.stp.steady_batch`, the driver's own count), for
        groups of `shape` = (prompt, mean retained thinking, mean answer, P[, positions per
        trajectory, a trajectory's mean and full lengths]) tokens."""
        from otbench.probe.stp import steady_batch

        prompt, prefix, answer, P, *rest = shape
        positions, mean, full = (list(rest) + [1.0, 0.0, 0.0][len(rest):])[:3]
        return steady_batch(self.kv_capacity(arch), prompt=prompt, prefix=prefix, answer=answer, P=int(P),
                            block=self.block, max_num_seqs=self.max_num_seqs, positions=positions,
                            trajectory_tokens=mean, trajectory_full=full if full > mean else 0.0)

    def seconds(self, arch: Architecture, *, decoded: float, context: float, prefill: float,
                batch: float, efficiency: float) -> float:
        """Device-seconds (one engine, `tp` GPUs) for `decoded` tokens whose contexts sum to `context`
        tokens, plus `prefill` uncached prompt tokens."""
        bw = self.tp * self.device.bandwidth * efficiency
        decode = (decoded * arch.weight_bytes / batch + context * arch.kv_bytes) / bw
        fill = 2.0 * arch.active_params * prefill / (self.tp * self.device.flops * self.prefill_efficiency)
        return decode + fill

    def assumptions(self, arch: Architecture) -> list[str]:
        lo, mid, hi = self.efficiency
        return [
            f"device: {self.device.name} x {self.tp} per engine; peak {self.device.bandwidth / 1e12:.2f} TB/s, "
            f"{self.device.flops / 1e12:.0f} TFLOP/s dense BF16, {self.device.memory / 1e9:.0f} GB "
            + ("(a stated reference host)" if self.device.name.startswith("CPU") else "(datasheet)"),
            f"model: weights {arch.weight_bytes / GIB:.1f} GiB read per decode step, "
            f"{arch.active_params / 1e9:.2f} B active parameters, KV {arch.kv_bytes / 1024:.1f} KiB per "
            f"context token ({arch.source})",
            f"decode: memory-bandwidth bound, weights/B + KV x context bytes per token at {mid:.0%} of peak "
            f"bandwidth (range {lo:.0%}-{hi:.0%}); B = min(max_num_seqs {self.max_num_seqs}, the answers whose probe "
            f"groups the driver admits into the KV cache "
            + (f"of {self.kv_cache_bytes / GIB:g} GiB" if self.kv_cache_bytes is not None else
               f"at {self.memory_utilization:.0%} of memory less {self.reserve / GIB:.0f} GiB")
            + f", in {self.block}-token blocks)"
            + "; the P probes of a position share their prefix's whole blocks in memory, not in bandwidth "
            "(each reads its own KV)",
            f"prefill: 2 x active parameters FLOPs per prompt token the prefix cache misses, at "
            f"{self.prefill_efficiency:.0%} of peak FLOP/s (a trajectory's prefixes are read once, each "
            "position adds its new step and the end marker)",
            "not modelled: grading, engine start, communication between tensor-parallel GPUs, "
            "preemption (the driver admits so that the cache does not overflow; run.json counts any)",
        ]


def device(name: str) -> Device:
    key = name.lower()
    if key not in DEVICES:
        raise PlanError(f"--device {name!r}: one of {', '.join(DEVICES)}")
    return DEVICES[key]


def as_dict(t: Throughput) -> dict[str, Any]:
    return {"device": dataclasses.asdict(t.device), "tp": t.tp, "max_num_seqs": t.max_num_seqs,
            "block_size": t.block,
            "efficiency": list(t.efficiency), "prefill_efficiency": t.prefill_efficiency,
            "memory_utilization": t.memory_utilization, "reserve_bytes": t.reserve,
            **({"kv_cache_bytes": t.kv_cache_bytes} if t.kv_cache_bytes is not None else {})}
