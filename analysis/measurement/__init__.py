"""The measurement set: the contract between the probe stage and the analysis (docs/rules.md). No JAX.

Types and validation (`MeasurementSet`, `from_ragged`), Parquet storage with
checksums (`save`, `load`), JSONL import/export, the Hugging Face dataset
folder (`export_hub`, `from_table`, `hub_path`), the calibrated simulator,
token-space segmentation and the stored-token reader the probe and the report
share, and the on-disk form of matched-horizon runs. The file helpers every
stage shares (atomic writers, the JSON reader, provenance) live in
`otbench.files`, the error base in `otbench.errors`. Everything here is NumPy
and pyarrow only, so the probe can write sets without loading JAX.
"""

import importlib
from typing import TYPE_CHECKING, Any

from ._build import INT32_MAX, MeasurementSetError, from_dense, from_ragged, ragged
from ._io import content_hash, load, load_table, read_manifest, save
from ._tables import verify_tables
from ._tidy import Tidy, concat_columns, melt_columns
from ._types import SCHEMA, SPLITS, MeasurementSet

# Loaded on first use (PEP 562): a command that only loads a set (`otbench frontier`)
# skips the simulator, the signal and horizon-run modules, JSONL and the Hub reader
# (~0.1 s of imports, NumPy's random module among them). name -> private module
_LAZY = {
    **dict.fromkeys(("FIELD_SIGNALS", "HESITATION_WORDS", "PROMPT_DEFINITION", "SIGNAL_DEFINITIONS",
                     "add_field_signals"), "_field"),
    **dict.fromkeys(("consistency_stop", "deepconf_stop", "deer_asks", "deer_own_stop", "deer_stop",
                     "dynasor_own_stop", "dynasor_stop", "window_agrees"), "_field_rules"),
    **dict.fromkeys(("LETTERS", "HorizonDataError", "HorizonRun", "Readouts", "load_run",
                     "write_run"), "_horizon_run"),
    **dict.fromkeys(("EEE_SCHEMA_VERSION", "eee_records", "export_eee", "import_eee"), "_eee"),
    **dict.fromkeys(("export_hub", "from_table"), "_hub"), "hub_path": "_hub_id",
    **dict.fromkeys(("export_jsonl", "import_jsonl"), "_jsonl"),
    **dict.fromkeys(("DEEPCONF_SIGNALS", "DEER_SIGNALS", "DYNASOR_SIGNALS", "PEER_SIGNAL_DEFINITIONS", "THINKBRAKE_SIGNALS", "DEEPCONF_WARMUP_SIGNALS",
                     "PEER_SIGNALS", "WINDOW_BITS", "add_peer_signals", "window_masks"),
                    "_peer_signals"),
    **dict.fromkeys(("SPAN_RULES", "boundary_mask", "segment", "segment_flat",
                     "target_steps"), "_segment"),
    "simulate": "_simulate",
    **dict.fromkeys(("StoredThinking", "stored_thinking"), "_tokens"),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
        globals()[name] = value     # later lookups skip this hook
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


if TYPE_CHECKING:   # static tools see the names the hook provides
    from ._field import (  # noqa: F401
        FIELD_SIGNALS,
        HESITATION_WORDS,
        PROMPT_DEFINITION,
        SIGNAL_DEFINITIONS,
        add_field_signals,
    )
    from ._field_rules import (  # noqa: F401
        consistency_stop,
        deepconf_stop,
        deer_asks,
        deer_own_stop,
        deer_stop,
        dynasor_own_stop,
        dynasor_stop,
        window_agrees,
    )
    from ._horizon_run import LETTERS, HorizonDataError, HorizonRun, Readouts, load_run, write_run  # noqa: F401
    from ._eee import EEE_SCHEMA_VERSION, eee_records, export_eee, import_eee  # noqa: F401
    from ._hub import export_hub, from_table  # noqa: F401
    from ._hub_id import hub_path  # noqa: F401
    from ._jsonl import export_jsonl, import_jsonl  # noqa: F401
    from ._peer_signals import (  # noqa: F401
        DEEPCONF_SIGNALS,
        DEEPCONF_WARMUP_SIGNALS,
        DEER_SIGNALS,
        DYNASOR_SIGNALS,
        PEER_SIGNAL_DEFINITIONS,
        PEER_SIGNALS,
        THINKBRAKE_SIGNALS,
        WINDOW_BITS,
        add_peer_signals,
        window_masks,
    )
    from ._segment import SPAN_RULES, boundary_mask, segment, segment_flat, target_steps  # noqa: F401
    from ._simulate import simulate  # noqa: F401
    from ._tokens import StoredThinking, stored_thinking  # noqa: F401


def describe_columns() -> dict:
    """The stored tables' columns, as data for a reference page: ``set`` (the measurement
    set's required columns, name -> Arrow type), ``signal_prefix`` (the optional per-position
    signal columns' prefix) and ``horizon`` (the run directory's files, each name -> type)."""
    from . import _horizon_run as hr
    from ._rows import REQUIRED, SIGNAL_PREFIX

    return {"set": dict(REQUIRED), "signal_prefix": SIGNAL_PREFIX,
            "horizon": {"trajectories.parquet": dict(hr.TRAJ_COLUMNS),
                        "readouts.parquet": dict(hr.READ_COLUMNS)}}


__all__ = ["describe_columns", "DEEPCONF_SIGNALS", "deepconf_stop",
    "DEER_SIGNALS", "DYNASOR_SIGNALS", "FIELD_SIGNALS", "HESITATION_WORDS", "INT32_MAX", "LETTERS", "PEER_SIGNALS", "THINKBRAKE_SIGNALS", "DEEPCONF_WARMUP_SIGNALS", "WINDOW_BITS", "window_masks", "PEER_SIGNAL_DEFINITIONS", "PROMPT_DEFINITION", "SCHEMA", "SIGNAL_DEFINITIONS", "SPAN_RULES", "SPLITS",
    "HorizonDataError", "HorizonRun", "MeasurementSet", "MeasurementSetError", "Readouts",
    "StoredThinking", "Tidy",
    "add_field_signals", "add_peer_signals", "boundary_mask", "concat_columns", "consistency_stop", "content_hash",
    "deer_asks", "deer_own_stop", "deer_stop", "dynasor_own_stop", "dynasor_stop", "EEE_SCHEMA_VERSION",
    "eee_records", "export_eee", "export_hub", "export_jsonl", "from_dense", "from_ragged",
    "from_table", "hub_path",
    "import_eee", "import_jsonl", "load", "load_run", "load_table", "melt_columns", "ragged", "read_manifest", "save",
    "segment", "segment_flat", "simulate", "stored_thinking", "target_steps", "verify_tables",
    "window_agrees", "write_run",
]
