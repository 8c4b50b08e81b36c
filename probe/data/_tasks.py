"""The task registry: lm-eval-style names of the built-in benchmarks, each with its source and schema.

`otbench probe run --tasks math500,aime24,gpqa-diamond,livecodebench` (and
`otbench probe tasks`, which lists this table) names benchmarks, one per benchmark record
(`otbench.descriptors.BenchmarkSpec.task`), the way
lm-eval users do; each name stands for one `[[data.sources]]` table of a
probe job (`task_source`), so a one-line start and a job TOML are the same
job. A name alone reads the benchmark's default Hugging Face location
(`BenchmarkSpec.hub`; the `hub` extra); `NAME=PATH` reads a local file or
folder with the same schema instead. The offline sources (`sums`,
`arithmetic`, `champ`) need neither.
"""

import dataclasses
from collections.abc import Iterator, Mapping
from typing import Any

from otbench.descriptors import BENCHMARK_SPECS, BenchmarkSpec

from ._benchmarks import DatasetError


@dataclasses.dataclass(frozen=True)
class Task:
    """One registered task name.

    Attributes:
      name: the command-line name ("math500").
      benchmark: the built-in schema (`BUILTIN_SCHEMAS`), or None for an embedded source.
      embedded: the offline source ("sums", "arithmetic", "champ"), or None.
      hub, config, split: the default Hugging Face location (None: no default; pass NAME=PATH).
      group: the reporting group its questions join.
      kind: "math" | "choice" | "code" (how answers are graded).
    """

    name: str
    benchmark: str | None
    embedded: str | None
    hub: str | None
    config: str | None
    split: str | None
    group: str
    kind: str

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _task(spec: BenchmarkSpec) -> Task:
    hub, config, split = spec.hub or (None, None, None)
    return Task(spec.task, None if spec.embedded else spec.name, spec.name if spec.embedded else None,
                hub, config, split, spec.group, spec.grader)


class _Tasks(Mapping):
    """The task names of every benchmark record (`BENCHMARK_SPECS`), read when used: a benchmark
    declared after this import, or installed by a distribution, is a task too."""

    def _table(self) -> dict[str, Task]:
        return {t.name: t for t in (_task(BENCHMARK_SPECS[n]) for n in BENCHMARK_SPECS)}

    def __getitem__(self, name: str) -> Task:
        return self._table()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._table())

    def __len__(self) -> int:
        return len(self._table())


TASKS: Mapping[str, Task] = _Tasks()
"""Every task name `--tasks` accepts, in the order `otbench probe tasks` lists them."""


def task_source(spec: str) -> dict[str, Any]:
    """The `[[data.sources]]` table of one `--tasks` entry: `NAME` (its default source) or `NAME=PATH`."""
    name, eq, path = spec.partition("=")
    name = name.strip().lower()
    t = TASKS.get(name)
    if t is None:
        raise DatasetError(f"--tasks: unknown task {name!r} (known: {', '.join(TASKS)}; "
                           "`otbench probe tasks` lists them)")
    if t.embedded is not None:
        if eq:
            raise DatasetError(f"--tasks: {name} is an embedded source; it takes no =PATH")
        return {"embedded": t.embedded}
    if eq:
        if not path.strip():
            raise DatasetError(f"--tasks: {name}= needs a path after '='")
        return {"benchmark": t.benchmark, "path": path.strip()}
    if t.hub is None:
        raise DatasetError(f"--tasks: {name} has no default Hugging Face location; "
                           f"give a local file: {name}=PATH")
    src = {"benchmark": t.benchmark, "hub": t.hub}
    if t.config is not None:
        src["config"] = t.config
    if t.split is not None:
        src["split"] = t.split
    return src


def source_task(src: Mapping[str, Any]) -> str | None:
    """The `--tasks` entry that stands for `src` (`task_source`'s inverse), or None when none does."""
    for t in TASKS.values():
        for spec in ((t.name,) if t.embedded is not None or t.hub is not None else ()) + (
                (f"{t.name}={src['path']}",) if "path" in src else ()):
            try:
                if task_source(spec) == dict(src):
                    return spec
            except DatasetError:
                continue
    return None
