"""Measurement sets as Hugging Face dataset repositories: a folder `hf upload`
(or `huggingface_hub.upload_folder`) publishes as it is, and `datasets.load_dataset` reads.

Layout of a Hub folder (`export_hub`)::

    DIR/README.md                                   the dataset card: YAML `configs` (one per
                                                    table), licence, tags; the text carries the
                                                    provenance and, where it applies, the
                                                    synthetic flag
    DIR/manifest.json                               the set's manifest (content hash, checksums,
                                                    provenance): DIR is itself a measurement set
    DIR/trajectories/train-00000-of-00001.parquet   every trajectory, one row each, in the set's
                                                    order (the columns of the set's files)
    DIR/<table>/train-00000-of-00001.parquet        each extra table (the probe's `tokens`, ...)
    DIR/.otbench-written.json                       otbench's record of what it wrote there

One file per table, in the set's row order, so that the rows `datasets`
returns rebuild the very same set (`from_table`: equal content hash), and the
shard name is the one the Hub's own converter writes. `load` reads DIR as any
set, and `hf://datasets/ORG/NAME[@REVISION]` from the local Hugging Face cache
(`hub_path`): nothing is downloaded.
"""

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from otbench.files import atomic_dir, sha256_file

from ._build import MeasurementSetError
from ._columns import set_from_columns
from ._hub_id import HUB_PREFIX, hub_path  # noqa: F401  (re-exported: the Hub's half of a set's address)
from ._io import MANIFEST, TRAJ_DIR, _check_column, _within_int64, write_manifest
from ._rows import REQUIRED, SIGNAL_PREFIX, cell_table
from ._types import MeasurementSet
from otbench.errors import ArgumentError

CARD = "README.md"
SHARD = "train-00000-of-00001.parquet"
# The Hub's licence field takes an identifier of its list ("apache-2.0", "cc-by-4.0", "mit",
# "other", "unknown", ...): lower-case letters, digits, dots and dashes.
_LICENSE = re.compile(r"[a-z0-9][a-z0-9.\-]*")


def export_hub(ms: MeasurementSet, path: str | os.PathLike, *,
               tables: Mapping[str, pa.Table] | None = None, license: str = "unknown",
               name: str | None = None, overwrite: bool | None = None) -> dict[str, Any]:
    """Write `ms` (and its extra `tables`) to the folder `path` as a dataset repository.

    The folder is written atomically under otbench's output rule: a non-empty
    folder otbench did not write is refused unless `overwrite` (and then its
    files are kept); writing it again replaces only what otbench wrote there.
    Returns the manifest.

    Args:
      license: the card's licence identifier (the Hub's list); "unknown" (the
        default) says that the exporter stated none.
      name: the card's title (default: the folder's name).
    """
    if not isinstance(license, str) or not _LICENSE.fullmatch(license):
        raise MeasurementSetError("license", f"must be a licence identifier such as "
                                             f"'apache-2.0', 'cc-by-4.0' or 'unknown', "
                                             f"got {license!r}")
    path = Path(path)
    title = name or path.resolve().name or "otbench measurement set"
    rows = np.concatenate([ms.cell_rows(c) for c in range(ms.num_cells)] or
                          [np.zeros(0, np.int64)])
    with atomic_dir(path, overwrite=overwrite) as tmp:
        rel = f"{TRAJ_DIR}/{SHARD}"
        (tmp / TRAJ_DIR).mkdir()
        pq.write_table(cell_table(ms, rows), tmp / rel, compression="zstd")
        files = [{"path": rel, "rows": int(rows.size), "sha256": sha256_file(tmp / rel)}]
        extras = {}
        for tname, table in sorted((tables or {}).items()):
            if tname in (TRAJ_DIR, MANIFEST, CARD) or "/" in tname or tname.startswith("."):
                raise ArgumentError(f"extra table name {tname!r} is reserved or not a plain name")
            trel = f"{tname}/{SHARD}"
            (tmp / tname).mkdir()
            pq.write_table(table, tmp / trel, compression="zstd")
            extras[tname] = {"path": trel, "rows": table.num_rows,
                             "sha256": sha256_file(tmp / trel)}
        manifest = write_manifest(tmp, ms, files, extras)
        (tmp / CARD).write_text(dataset_card(manifest, license=license, title=title),
                                encoding="utf-8")
    return manifest


def _yaml(value: str) -> str:
    """A YAML scalar: a JSON string is one (quoted, escaped)."""
    return json.dumps(value, ensure_ascii=False)


def dataset_card(manifest: Mapping[str, Any], *, license: str, title: str) -> str:
    """The README.md of a Hub folder: YAML front matter (licence, tags, one `configs` entry
    per table) and a text with the counts, the synthetic flag and the provenance."""
    synthetic = bool(manifest["synthetic"])
    names = [TRAJ_DIR] + sorted(manifest.get("tables", {}))
    head = ["---", f"license: {_yaml(license)}", f"pretty_name: {_yaml(title)}", "tags:",
            "- otbench", "- overthinking", "- reasoning"]
    if synthetic:
        head.append("- synthetic")
    head.append("configs:")
    for t in names:
        head += [f"- config_name: {_yaml(t)}"] + (["  default: true"] if t == TRAJ_DIR else []) \
            + ["  data_files:", "  - split: train", f"    path: {_yaml(t + '/*.parquet')}"]
    head.append("---")
    c = manifest["counts"]
    body = [
        "", f"# {title}", "",
        ("**SYNTHETIC DATA**: these measurements were simulated (otbench's simulator or a set "
         "imported as synthetic), not produced by a model. `synthetic: true` in "
         "`manifest.json`; do not quote them as results." if synthetic else
         "Measured data (`synthetic: false` in `manifest.json`)."), "",
        "An otbench measurement set: one row per reasoning trajectory, with the "
        "Step-wise Truncation Probing measurements at every probe position -- `L` "
        "(thinking tokens before the position), `C` (probe answers correct, of "
        "`probes`), `y` (the full trajectory's verdict) and the per-position signals "
        "(`signal.*` columns). What each column means and the rules the rows obey: "
        "otbench's documentation, docs/rules.md and the measurement-set reference.", "",
        "| | |", "|---|---|",
        f"| trajectories | {c.get('trajectories')} |", f"| questions | {c.get('questions')} |",
        f"| models | {c.get('models')} |", f"| groups | {c.get('groups')} |",
        f"| cells (model x group) | {c.get('cells')} |",
        f"| signals | {', '.join(c.get('signals') or []) or 'none'} |",
        f"| tables | {', '.join(names)} |",
        f"| content hash | `{manifest['content_hash']}` |", "",
        "## Licence", "",
        (f"`{license}` (the `license` field above)." if license != "unknown" else
         "`unknown`: the exporter stated no licence. The questions and model outputs keep "
         "the licences of their sources."), "",
        "## Load it", "",
        "```python", "import datasets", "",
        "rows = datasets.load_dataset(\"ORG/NAME\", \"trajectories\", split=\"train\")", "",
        "import otbench.analysis as oa     # the set itself, checksums and content hash verified",
        "ms = oa.load(\"hf://datasets/ORG/NAME\")   # from the local Hugging Face cache "
        "(hf download ORG/NAME --repo-type dataset)",
        "```", "",
        "## Provenance", "",
        "Recorded by the stage that measured the set (`provenance`) and by the otbench "
        "version that wrote this folder (`writer`), as in `manifest.json`:", "",
        "```json",
        json.dumps({"provenance": manifest.get("provenance", {}),
                    "writer": manifest.get("writer", {})},
                   indent=2, sort_keys=True, ensure_ascii=False),
        "```", "",
    ]
    return "\n".join(head + body)


def from_table(table: pa.Table, *, synthetic: bool = False,
               provenance: Mapping[str, Any] | None = None) -> MeasurementSet:
    """The set of a trajectories table read by another route (e.g. `datasets.load_dataset` of
    a Hub folder: `ds.data.table`), checked by the same rules as `load`.

    `synthetic` and `provenance` come from the folder's manifest or card (the
    rows do not carry them); the content hash equals the original set's when
    the rows are the exported ones in their order.
    """
    where = "trajectories table"
    for col, typ in REQUIRED.items():
        _check_column(where, table, col, typ)
        table = _within_int64(where, table, col)
    names = {c[len(SIGNAL_PREFIX):] for c in table.column_names if c.startswith(SIGNAL_PREFIX)}
    for s in sorted(names):
        _check_column(where, table, SIGNAL_PREFIX + s, pa.list_(pa.float64()))
    return set_from_columns(table, names, synthetic=synthetic, provenance=provenance or {},
                            where=lambda i: f"{where}: row {i}")
