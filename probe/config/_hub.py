"""Models by name: Hugging Face ids through the hub cache, local folders checked, memory estimated.

A job names its model as a local folder (`model.path`), a model entry
(`artifacts/models/<name>.toml`) or a Hugging Face id ("Qwen/Qwen3-4B-Thinking-2507",
matched to an entry when one has that repository). Ids resolve through the
Hugging Face cache to a snapshot folder at a revision; with
`HF_HUB_OFFLINE=1` only the cache is read, else missing files are
downloaded. The folder is what the engine loads and what is fingerprinted
by content; the resolved commit is recorded in the provenance.

Everything is checked before any engine starts or any journal is created,
so a wrong path or id costs one line and leaves nothing behind.

`estimate_memory` sizes a job on a GPU from the model's own files: weights
(the safetensors bytes, split over tensor-parallel ranks) plus the KV cache
of one full-context sequence (vLLM refuses to start without room for it),
from `config.json` (layers, KV heads, head size, KV dtype).
"""

import json
import os
from pathlib import Path
from typing import Any, NamedTuple

from otbench.errors import OtbenchError
from otbench.errors import ArgumentError


class ModelNotFoundError(OtbenchError, ValueError):
    """The job's model cannot be found; the message (one line) says where it looked and what to do."""


class ResolvedModel(NamedTuple):
    """A model the engine can load: its local folder and, for hub ids, the repository and commit."""

    path: str
    repository: str | None = None
    commit: str | None = None


def check_local_model(path: str | os.PathLike) -> ResolvedModel:
    """A local Hugging Face model folder, or `ModelNotFoundError` naming what is missing."""
    p = Path(path)
    if not p.is_dir():
        raise ModelNotFoundError(f"model.path {p}: no such folder (a local Hugging Face model folder, "
                                 "or use model.name with a Hugging Face id or a model entry)")
    if not (p / "config.json").is_file():
        raise ModelNotFoundError(f"model.path {p}: not a Hugging Face model folder (no config.json)")
    return ResolvedModel(str(p))


def resolve_hub_model(repository: str, revision: str | None, *, weights: bool = True) -> ResolvedModel:
    """The snapshot folder of `repository` at `revision` (a commit, branch or tag; None: "main").

    Offline (`HF_HUB_OFFLINE=1`) only the cache is read; online, missing
    files are downloaded into the cache (weights, tokenizer, configs).
    `weights=False`: the tokenizer and configs only (a served model's
    weights are on its server).
    """
    try:
        import huggingface_hub.constants as constants
        from huggingface_hub import snapshot_download
    except ImportError:
        raise ModelNotFoundError(f"model {repository!r}: resolving Hugging Face ids needs huggingface_hub "
                                 "(installed with the probe stack)") from None
    rev = revision or "main"
    offline = bool(getattr(constants, "HF_HUB_OFFLINE", False)) or os.environ.get("HF_HUB_OFFLINE") == "1"
    try:
        folder = snapshot_download(repository, revision=rev, local_files_only=offline,
                                   allow_patterns=["*.json", "*.model", "*.txt", "*.tiktoken", "*.jinja"]
                                   + (["*.safetensors"] if weights else []))
    except Exception as e:  # the hub raises many types (validation, not cached, HTTP); all mean "not found"
        where = ("is not in the Hugging Face cache (HF_HUB_OFFLINE=1; download it first: "
                 f"hf download {repository} --revision {rev})") if offline else \
            f"could not be fetched from the Hugging Face hub ({type(e).__name__})"
        raise ModelNotFoundError(f"model {repository!r} at revision {rev!r} {where}") from None
    return ResolvedModel(folder, repository, Path(folder).name)


def _kv_bytes_per_token(cfg: dict[str, Any]) -> int:
    text = cfg.get("text_config", cfg)
    layers = int(text["num_hidden_layers"])
    heads = int(text["num_attention_heads"])
    kv = int(text.get("num_key_value_heads") or heads)
    head_dim = int(text.get("head_dim") or int(text["hidden_size"]) // heads)
    width = {"float32": 4}.get(str(text.get("torch_dtype") or text.get("dtype") or "bfloat16"), 2)
    return 2 * layers * kv * head_dim * width          # K and V


class MemoryEstimate(NamedTuple):
    """Per-GPU GiB a job needs: weights/TP + one full-context sequence's KV cache/TP + a fixed reserve."""

    weights_gib: float
    kv_gib: float
    reserve_gib: float

    @property
    def total_gib(self) -> float:
        return self.weights_gib + self.kv_gib + self.reserve_gib


RESERVE_GIB = 4.0
"""Activations, CUDA graphs and the CUDA context per GPU (vLLM's profile run; a round upper figure)."""


def estimate_memory(model_dir: str | os.PathLike, *, max_model_len: int,
                    tensor_parallel_size: int = 1) -> MemoryEstimate | None:
    """`MemoryEstimate` from the folder's safetensors sizes and config.json; None when they are absent."""
    d = Path(model_dir)
    try:
        cfg = json.loads((d / "config.json").read_text())
        kv = _kv_bytes_per_token(cfg)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    weights = sum(f.stat().st_size for f in d.glob("*.safetensors"))
    if weights == 0:
        return None
    tp = max(1, int(tensor_parallel_size))
    gib = float(1 << 30)
    return MemoryEstimate(weights / tp / gib, kv * max_model_len / tp / gib, RESERVE_GIB)


def check_fits(est: MemoryEstimate, *, gpu_gib: float, utilization: float, tensor_parallel_size: int,
               max_model_len: int) -> None:
    """Refuse (ValueError, one line with the numbers) a job whose estimate exceeds the engine's share of a GPU."""
    budget = gpu_gib * utilization
    if est.total_gib > budget:
        raise ArgumentError(
            f"the model does not fit: per GPU it needs ~{est.total_gib:.1f} GiB (weights "
            f"{est.weights_gib:.1f} + KV cache of one {max_model_len}-token sequence {est.kv_gib:.1f} + "
            f"reserve {est.reserve_gib:.0f}) at tensor_parallel_size {tensor_parallel_size}, but "
            f"gpu_memory_utilization {utilization:g} x {gpu_gib:.1f} GiB gives {budget:.1f} GiB; raise "
            "engine.tensor_parallel_size or lower engine.max_model_len")
