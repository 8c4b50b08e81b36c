"""Content keys of probe work units: a hash of everything a unit's result depends on.

The journal (`_resume`) stores each completed unit under its key, so a unit is
reused only when every input that shapes its result is unchanged; a changed
input gives a new key and the unit is probed again, never served stale. A
key is sha256 over canonical JSON of two parts:

* the run part (`run_key_material`, shared by every unit of a run): the
  record schema `UNIT_SCHEMA` and otbench version; the model weights'
  fingerprint (`model_fingerprint`, the "model revision" by content, so a
  moved folder still matches and a re-downloaded "main" that changed does
  not); the engine kind, library versions, device and every engine setting
  that can change numbers; the tokenizer hash; the family (chat format,
  markers, defaults); the boundary rule, `b`, `P`, the thinking and answer
  limits; the sampling parameters; the resolved grader; the seed scheme;
* the unit part (`unit_key`): model id, the question (every field: text,
  reference, options, tests, ...), the trajectory index, its trajectory seed
  and the prompt token ids.

Left out on purpose, because they do not change a unit's result: the
model folder's path, `R` and the number of questions (growing either reuses
the units already probed), `units_per_batch`, worker counts, and engine
resource knobs (`max_model_len`, `kv_cache_gib`, `gpu_memory_utilization`,
`max_num_seqs`). Caveat: vLLM does not promise bit-identical floats across
batch compositions, so on vLLM a resumed or multi-worker run equals an
uninterrupted one in seeds and sampled tokens, while its signals may differ
in the last bits (the transformers engine runs every request alone and is
exact). Bump `UNIT_SCHEMA` whenever the probe loop's semantics change.
"""

import dataclasses
import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from otbench.files import sha256_file, write_text_atomic
from otbench.errors import ArgumentError

UNIT_SCHEMA = "otbench.unit/3"   # 2: thinking and its own answer sampled in one request;
                                 # 3: field signals and the own-context signal per position

# EngineConfig fields that only size resources: they never change a unit's
# result, so changing them (e.g. a smaller KV cache after an OOM) keeps resume working.
RESOURCE_ONLY = frozenset({"model", "max_model_len", "kv_cache_gib", "gpu_memory_utilization",
                           "max_num_seqs",
                           # a served model's address and client knobs: a restarted or moved server
                           # serves the same units (what it is goes in through `engine_info`)
                           "base_url", "served_model", "api_key_env", "max_concurrency",
                           "request_timeout_s", "retry_s"})


def _canon(obj: Any) -> bytes:
    # Canonical JSON: sorted keys, no whitespace; floats as repr (exact round trip).
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True,
                      allow_nan=False).encode()


def _read_memo(memo: Path) -> dict:
    try:
        data = json.loads(memo.read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}                       # a missing or damaged memo only costs re-hashing


def _write_memo(memo: Path, data: dict) -> None:
    try:
        write_text_atomic(memo, json.dumps(data, sort_keys=True))
    except OSError:
        pass                            # read-only cache: correct, just slower next time


def model_fingerprint(path: str | os.PathLike, *, memo: str | os.PathLike | None = None) -> str:
    """sha256 over (name, size, sha256) of every regular file at the top of model folder `path`.

    The top level holds what the loaders read (config, tokenizer, weight
    shards); subfolders (e.g. a duplicate `original/` checkpoint) are left
    out. Symlinks are followed (Hugging Face snapshot folders link to blobs).
    Hashing 40 GB of shards takes about a minute, so each file's hash is
    memoized in `memo` (JSON) under its real path, size, mtime and inode,
    and recomputed when any of these changes.

    Args:
      path: a local model folder.
      memo: memo file, or None to hash every file every time.
    """
    root = Path(path)
    if not root.is_dir():
        raise ArgumentError(f"`path` must be a model folder, got {str(root)!r}.")
    memo_path = Path(memo) if memo is not None else None
    cache = _read_memo(memo_path) if memo_path is not None else {}
    changed = False
    entries = []
    for p in sorted(root.iterdir(), key=lambda q: q.name):
        if p.name.startswith(".") or not p.is_file():
            continue
        st = p.stat()
        real = os.path.realpath(p)
        stamp = [st.st_size, st.st_mtime_ns, st.st_ino]
        hit = cache.get(real)
        if isinstance(hit, dict) and hit.get("stamp") == stamp and isinstance(hit.get("sha256"), str):
            digest = hit["sha256"]
        else:
            digest = sha256_file(p)
            cache[real] = {"stamp": stamp, "sha256": digest}
            changed = True
        entries.append([p.name, st.st_size, digest])
    if memo_path is not None and changed:
        _write_memo(memo_path, cache)
    return hashlib.sha256(_canon(["otbench.model-fingerprint/1", entries])).hexdigest()


def run_key_material(job, *, fingerprint: str, tokenizer_hash: str, engine_info: Mapping[str, Any],
                     grader: str, otbench_version: str) -> dict[str, Any]:
    """The run part of every unit key (see module docstring), as a JSON-ready dict."""
    engine = {k: v for k, v in job.engine.as_dict().items() if k not in RESOURCE_ONLY}
    return {
        "schema": UNIT_SCHEMA,
        "otbench": otbench_version,
        "model_fingerprint": fingerprint,
        "engine": engine,
        "engine_info": {k: v for k, v in engine_info.items() if k != "config"},
        "tokenizer_hash": tokenizer_hash,
        "family": job.family.as_dict(),
        "boundary": job.boundary,
        "b": job.b, "P": job.P,
        "thinking_limit": job.thinking_limit, "answer_limit": job.answer_limit,
        "sampling": job.sampling.as_dict(),
        "grader": grader,
        "hesitation_words": list(getattr(job, "hesitation_words", ())),
        "seeds": "otbench.seed/1",
        # only when asked: every other job's run digest (and so its units' keys) stays as it was
        **({"field_probes": list(job.field_probes)} if getattr(job, "field_probes", ()) else {}),
        **({"deepconf_window": int(job.deepconf_window)} if "deepconf" in getattr(job, "field_probes", ())
           else {}),
    }


def run_digest(material: Mapping[str, Any]) -> str:
    """sha256 of `run_key_material` (hashed once per run)."""
    return hashlib.sha256(_canon(dict(material))).hexdigest()


def _question_fields(q) -> Any:
    if dataclasses.is_dataclass(q):
        d = dataclasses.asdict(q)
        if d.get("prompt", 0) is None:
            del d["prompt"]          # no own prompt: keys read as before the field existed
        return d
    return {k: getattr(q, k) for k in ("group", "dataset", "id", "task", "text", "reference")}


def unit_key(run: str, *, model: str, question, trajectory: int, think_seed: int,
             prompt: Sequence[int]) -> str:
    """Key of one (question, trajectory) unit: sha256 of the run digest and the unit's inputs."""
    part = {"run": run, "model": model, "question": _question_fields(question),
            "trajectory": int(trajectory), "think_seed": int(think_seed),
            "prompt": [int(t) for t in prompt]}
    return hashlib.sha256(_canon(part)).hexdigest()
