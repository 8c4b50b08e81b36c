"""The raw-token tables of a probe set: stored thinking ids and the boundary masks recorded with them.

One reader shared by `otbench probe resegment` and the report's step-length
figure, so both segment exactly as the probe did (docs/rules.md).
"""

from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np

from ._segment import boundary_mask


class StoredThinking(NamedTuple):
    """Stored thinking ids and the boundary masks recorded with them."""

    ids: np.ndarray        # int64[tokens] thinking ids of all trajectories, concatenated
    off: np.ndarray        # int64[traj + 1] row offsets into `ids`
    boundary: np.ndarray   # int64[ids] recorded boundary vocabulary
    mask: np.ndarray       # bool[vocab] boundary token mask
    ends_nl: np.ndarray    # bool[vocab] tokens ending in a line feed
    starts_nl: np.ndarray  # bool[vocab] tokens starting with a line feed
    rule: str              # the recorded boundary rule ("vocab" or "vocab+span")
    span: tuple[np.ndarray, np.ndarray] | None  # the span masks when the rule uses them


def stored_thinking(table, prov: Mapping[str, Any]) -> StoredThinking:
    """Flatten a `tokens` table's `thinking` column and build the masks its provenance records.

    Shared by `resegment` and the report's step-length figure so both segment
    exactly as the probe did. `prov` must hold `boundary_ids`.
    """
    th = table.column("thinking").combine_chunks()
    ids = np.asarray(th.flatten().to_numpy(zero_copy_only=False), dtype=np.int64)
    off = th.offsets.to_numpy().astype(np.int64)
    off = off - off[0]
    boundary = np.asarray(prov["boundary_ids"], dtype=np.int64)
    nl_end = np.asarray(prov.get("newline_end_ids", []), dtype=np.int64)
    nl_start = np.asarray(prov.get("newline_start_ids", []), dtype=np.int64)
    size = int(max(ids.max(initial=-1), boundary.max(initial=-1), nl_end.max(initial=-1),
                   nl_start.max(initial=-1))) + 1
    ends_nl, starts_nl = boundary_mask(size, nl_end), boundary_mask(size, nl_start)
    rule = prov.get("boundary_rule", "vocab")
    return StoredThinking(ids=ids, off=off, boundary=boundary, mask=boundary_mask(size, boundary),
                          ends_nl=ends_nl, starts_nl=starts_nl, rule=rule,
                          span=(ends_nl, starts_nl) if rule == "vocab+span" else None)
