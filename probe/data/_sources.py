"""A job's data sources: several local files or Hugging Face datasets, pooled into reporting groups.

A job lists its sources under `[[data.sources]]`; each is read with one
schema (`_schemas`) and its questions join the schema's group, so AIME
2024 + 2025 + 2026 are one group from three sources::

    [data]
    seed = 0                                  # GPQA option-shuffling seed (recorded)
    # limit = 5                               # first 5 questions of each group (`probe run --limit`)

    [[data.sources]]
    benchmark = "AIME2024"                    # a built-in schema ...
    hub = "Maxwell-Jia/AIME_2024"             # ... read from the Hub (the `hub` extra) ...
    split = "train"
    revision = "<commit>"                     # pin it: hub datasets change
    [[data.sources]]
    benchmark = "AIME2025"
    path = "aime2025.jsonl"                   # ... or from a local .jsonl / .parquet / .csv file
    [[data.sources]]
    benchmark = "LiveCodeBench"
    hub = "livecodebench/code_generation_lite"
    release_version = "release_v6"            # the Hub config; or, with `path`, a folder of the
    contest_date = ["2025-01-01", "2025-04-30"]   # release files test.jsonl, test2.jsonl, ...

Hub sources go through `datasets.load_dataset(hub, config, split=,
revision=)`; with `HF_HUB_OFFLINE=1` set, `datasets` reads only its local
cache. LiveCodeBench's hub repository is a script dataset, which
`datasets` >= 4 refuses; its release files are read instead: a hub source
with `release_version` downloads exactly those files (`huggingface_hub`,
at `revision`, offline from the cache with `HF_HUB_OFFLINE=1`) and records
the commit it read, so the set names the exact data even when `revision`
was a branch. A local folder written by `Dataset.save_to_disk` is read with
`load_from_disk` (`split` picks one of a `DatasetDict`).

LiveCodeBench: `release_version` follows LiveCodeBench's naming:
`release_vN` is cumulative (files 1..N), `vN` one release, `vI_vJ` releases
I..J, `release_latest` all; file 1 is `test.jsonl`, file k is `testk.jsonl`.
`contest_date = [first, last]` keeps the problems whose contest day (the
date part of `contest_date`) lies in the window, both days included.

What was read is recorded (`DataRecord`): per source its location, content
hash (sha256 of the local file(s); the `datasets` fingerprint and the
revision of a hub dataset), rows read, questions kept and how many ids were
made from the problem text.
"""

import dataclasses
import datetime
import hashlib
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from otbench.descriptors import BENCHMARK_SPECS

from ._benchmarks import (
    TEXT_ID_PREFIX,
    DatasetError,
    Question,
    _rows,
    map_unique,
)
from ._schemas import schema_mapper

EMBEDDED_SOURCES = tuple(s.name for s in BENCHMARK_SPECS.declared() if s.embedded)
"""The built-in offline sources (`embedded = ...`): seeded generators and the CHAMP problems of
`champ-dataset` (`otbench.probe.data._embedded`); `otbench.descriptors.embedded_sources()` adds
installed ones."""

_RELEASE = re.compile(r"\A(?:release_v(\d+)|release_latest|v(\d+)(?:_v(\d+))?)\Z")


@dataclasses.dataclass(frozen=True)
class DataRecord:
    """What a job's sources gave: one entry per source (location, hash, counts) and the limit applied."""

    sources: tuple[dict[str, Any], ...]
    limit: int | None

    def as_dict(self) -> dict[str, Any]:
        return {"sources": [dict(s) for s in self.sources], "limit": self.limit}


def release_files(folder: Path, version: str) -> list[Path]:
    """The LiveCodeBench release files of `version` in `folder` (see the module docstring)."""
    m = _RELEASE.match(version)
    if m is None:
        raise DatasetError(f"{folder}: release_version {version!r} is not release_vN, release_latest, "
                           "vN or vI_vJ")

    def name(k: int) -> Path:
        return folder / ("test.jsonl" if k == 1 else f"test{k}.jsonl")

    present = sorted(int(p.stem[4:] or 1) for p in folder.glob("test*.jsonl")
                      if re.fullmatch(r"test\d*", p.stem))
    cumulative, single, upto = m.groups()
    if version == "release_latest":
        ks = present
    elif cumulative:
        ks = list(range(1, int(cumulative) + 1))
    else:
        ks = list(range(int(single), int(upto or single) + 1))
    missing = [name(k) for k in ks if k not in present]
    if not ks or missing:
        raise DatasetError(f"{missing[0] if missing else folder}: no such file "
                           f"(release_version {version!r})")
    return [name(k) for k in ks]


def release_names(version: str) -> list[str] | None:
    """File names of a LiveCodeBench `version` (None for `release_latest`: every `test*.jsonl`)."""
    m = _RELEASE.match(version)
    if m is None:
        raise DatasetError(f"release_version {version!r} is not release_vN, release_latest, vN or vI_vJ")
    cumulative, single, upto = m.groups()
    if version == "release_latest":
        return None
    ks = range(1, int(cumulative) + 1) if cumulative else range(int(single), int(upto or single) + 1)
    return ["test.jsonl" if k == 1 else f"test{k}.jsonl" for k in ks]


def _hub_release_files(src: Mapping[str, Any], record: dict) -> list[Path]:
    """The release files of a hub source with `release_version`, from the Hugging Face cache (or hub)."""
    version, rev = src["release_version"], src.get("revision") or "main"
    label = f"{src['hub']}@{rev}"
    try:
        import huggingface_hub.constants as constants
        from huggingface_hub import snapshot_download
    except ImportError:
        raise DatasetError(f"{label}: reading release files needs huggingface_hub (pip install huggingface_hub)"
                           ) from None
    names = release_names(version)
    offline = bool(getattr(constants, "HF_HUB_OFFLINE", False)) or os.environ.get("HF_HUB_OFFLINE") == "1"
    try:
        folder = Path(snapshot_download(src["hub"], repo_type="dataset", revision=rev, local_files_only=offline,
                                        allow_patterns=names or ["test*.jsonl"]))
    except Exception as e:   # noqa: BLE001 - the hub raises many types; one line for the user
        folder, why = None, f"could not be fetched ({type(e).__name__})"
    try:
        files = release_files(folder, version) if folder is not None else None
    except DatasetError:
        files, why = None, "not complete in the snapshot"
    if files is None:
        if offline:
            why = (f"not in the Hugging Face cache (HF_HUB_OFFLINE=1; download it first: hf download "
                   f"{src['hub']} --repo-type dataset --revision {rev}" + (f" {' '.join(names)}" if names else "")
                   + ")")
        raise DatasetError(f"{label}: release {version!r} is {why}")
    record.update(hub=src["hub"], release_version=version, revision=src.get("revision"),
                  commit=folder.name, files=[p.name for p in files], sha256=_sha256(files))
    return files


def _sha256(paths: Sequence[Path]) -> str:
    h = hashlib.sha256()
    for p in paths:
        with open(p, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 22), b""):
                h.update(chunk)
    return h.hexdigest()


def _import_datasets(label: str):
    try:
        import datasets
    except ImportError:
        raise DatasetError(f"{label}: reading Hugging Face datasets needs the `datasets` package: "
                           "pip install 'otbench[hub]'") from None
    return datasets


def _hub_rows(src: Mapping[str, Any], record: dict) -> Iterator[tuple[str, Any]]:
    config = src.get("release_version", src.get("config"))
    split = src.get("split", "test" if src.get("benchmark") == "LiveCodeBench" else "train")
    label = f"{src['hub']}[{config + '/' if config else ''}{split}]"
    datasets = _import_datasets(label)
    try:
        ds = datasets.load_dataset(src["hub"], config, split=split, revision=src.get("revision"))
    except Exception as e:   # noqa: BLE001 - datasets/hub raise many types; one line for the user
        offline = " (HF_HUB_OFFLINE=1: only the local cache is read)" \
            if os.environ.get("HF_HUB_OFFLINE") == "1" else ""
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        raise DatasetError(f"{label}: cannot load ({type(e).__name__}: {first}){offline}") from None
    record.update(hub=src["hub"], config=config, split=split, revision=src.get("revision"),
                  fingerprint=getattr(ds, "_fingerprint", None))
    for i, row in enumerate(ds, 1):
        yield f"{label}:row {i}", row


def _disk_rows(folder: Path, src: Mapping[str, Any], record: dict) -> Iterator[tuple[str, Any]]:
    datasets = _import_datasets(str(folder))
    try:
        ds = datasets.load_from_disk(str(folder))
    except Exception as e:   # noqa: BLE001
        raise DatasetError(f"{folder}: not a readable saved dataset ({type(e).__name__}: {e})") from None
    label = str(folder)
    if isinstance(ds, datasets.DatasetDict):
        split = src.get("split")
        if split not in ds:
            raise DatasetError(f"{folder}: split {split!r} not in the saved dataset "
                               f"(splits: {', '.join(ds)}); set `split`")
        ds, label = ds[split], f"{folder}[{split}]"
    record.update(path=str(folder), split=src.get("split"), fingerprint=getattr(ds, "_fingerprint", None))
    for i, row in enumerate(ds, 1):
        yield f"{label}:row {i}", row


def _source_rows(src: Mapping[str, Any], record: dict) -> Iterator[tuple[str, Any]]:
    if "hub" in src and "release_version" in src:
        for p in _hub_release_files(src, record):
            yield from _rows(str(p))
        return
    if "hub" in src:
        yield from _hub_rows(src, record)
        return
    path = Path(src["path"])
    if path.is_dir() and "release_version" in src:
        files = release_files(path, src["release_version"])
        record.update(path=str(path), release_version=src["release_version"],
                      files=[p.name for p in files], sha256=_sha256(files))
        for p in files:
            yield from _rows(str(p))
        return
    if path.is_dir():
        yield from _disk_rows(path, src, record)
        return
    if path.is_file():
        record.update(path=str(path), sha256=_sha256([path]))
    yield from _rows(str(path))


def _window(src: Mapping[str, Any]) -> tuple[str, str] | None:
    """The LiveCodeBench mapper's half-open window [first, last + 1 day) for an inclusive `contest_date`."""
    if "contest_date" not in src:
        return None
    first, last = src["contest_date"]
    after = datetime.date.fromisoformat(last) + datetime.timedelta(days=1)
    return first, after.isoformat()


def load_source(src: Mapping[str, Any], *, seed: int = 0) -> tuple[list[Question], dict[str, Any]]:
    """Questions of one validated source table and its record (see the module docstring)."""
    if "embedded" in src:
        return _embedded(src, seed)
    mapper = schema_mapper(src)
    record: dict[str, Any] = {"schema": src.get("benchmark", "user")}
    if "benchmark" not in src:
        record.update(group=src["group"], task=src["task"], columns=dict(src["columns"]))
    window = _window(src)
    if window is not None:
        record["contest_date"] = list(src["contest_date"])
    read = [0]

    def counted():
        for item in _source_rows(src, record):
            read[0] += 1
            yield item

    out = map_unique(mapper, counted(), seed=seed, contest_dates=window)
    rows = read[0]
    if src.get("n"):
        out = out[:src["n"]]
    record.update(rows=rows, questions=len(out),
                  ids_from_text=sum(q.id.split("-", 1)[-1].startswith(TEXT_ID_PREFIX)
                                    or q.id.startswith(TEXT_ID_PREFIX) for q in out))
    return out, record


def _embedded(src: Mapping[str, Any], seed: int) -> tuple[list[Question], dict[str, Any]]:
    """An embedded offline source: the questions its `BenchmarkSpec`'s loader makes (`_embedded`)."""
    kind, n = src["embedded"], src.get("n")
    seed = int(src.get("seed", seed))
    make = BENCHMARK_SPECS.targets.resolve(kind)
    qs = list(make(n, seed, src.get("group")))
    record = {"embedded": kind, "questions": len(qs)}
    if getattr(make, "seeded", True):
        record["seed"] = seed
    return qs, record


def first_per_group(questions: Sequence[Question], limit: int | None) -> list[Question]:
    """The first `limit` questions of each group, in order (all with None)."""
    if not limit:
        return list(questions)
    taken: dict[str, int] = {}
    out = []
    for q in questions:
        if taken.get(q.group, 0) < limit:
            taken[q.group] = taken.get(q.group, 0) + 1
            out.append(q)
    return out


def load_sources(sources: Sequence[Mapping[str, Any]], *, seed: int = 0,
                 limit: int | None = None) -> tuple[list[Question], DataRecord]:
    """Every source's questions, pooled by group (ids unique within a group), and their record."""
    out: list[Question] = []
    records = []
    seen: dict[tuple[str, str], str] = {}
    for src in sources:
        qs, rec = load_source(src, seed=seed)
        where = src.get("hub") or src.get("path") or f"embedded:{src.get('embedded')}"
        for q in qs:
            if (q.group, q.id) in seen:
                raise DatasetError(f"{where}: question id {q.id!r} of group {q.group} also in "
                                   f"{seen[q.group, q.id]}")
            seen[q.group, q.id] = where
        out.extend(qs)
        records.append(rec)
    return first_per_group(out, limit), DataRecord(tuple(records), limit)
