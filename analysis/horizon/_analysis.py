"""Matched-horizon analysis of a horizon run: the ``otbench.horizon/1`` document (docs/rules.md).

`analyze` runs, per benchmark group, the pieces defined in their modules:
the outcome definitions and the group's arrays (`_group`), calibration,
proper scores, controls, dense readouts and agreement (`_readouts`), fixed-
horizon paired contrasts with their sensitivities and termination strata
(`_contrasts`), and the matched-horizon effort comparison (`_matched`).

Every rate is a mean of item means (replicates averaged within item first),
with percentile intervals from an item bootstrap (`_inference`; default
10,000 draws, seed 0, recorded); one group's statistics share one set of
bootstrap weights per scheme, and a replicate never depends on the batch it
is computed in.
"""

import os
from collections.abc import Callable, Sequence
from typing import Any

from otbench.analysis.measurement import LETTERS, HorizonRun, load_run

from . import _inference as inf
from ._contrasts import contrasts as _contrasts
from ._contrasts import diagonal_rows as _diagonal
from ._contrasts import length_rows as _lengths
from ._group import SCHEMA, TAIL, Group, HorizonAnalysisError, settings_iv
from ._matched import matched as _matched
from ._readouts import agreement as _agreement
from ._readouts import calibration as _calibration
from ._readouts import controls as _controls
from ._readouts import dense as _dense
from ._readouts import score_rows as _score_rows

__all__ = ["HorizonAnalysisError", "analyze"]


def analyze(run: HorizonRun | str | os.PathLike, *, contrasts: Sequence = (),
            horizons: Sequence[int] | None = None, replicates: int = inf.REPLICATES,
            seed: int = inf.SEED, two_way: bool = True, batch: int = inf.BATCH,
            tail: float = TAIL, scheme: str = "item", direct: Sequence = (), diagonal: Sequence = (),
            progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """The matched-horizon analysis document (``otbench.horizon/1``) of a run.

    Args:
      run: a `HorizonRun` or a run directory.
      contrasts: pairs `(A, B)` (or "A,B" strings): the paired contrasts `A - B`.
      horizons: the fixed horizons `B` to report (default: every horizon read out).
      replicates, seed: item-bootstrap draws and their seed (recorded).
      two_way: also report the two-way item x replicate bootstrap of contrasts.
      batch: bootstrap replicates per kernel call (memory; never changes a result).
      tail: threshold of the correct-option probability tail share.
      scheme: "item" (default), or "nested" for designs with item-specific
        replicates: items resampled, then the paired replicate slots within
        each selected item (every primary interval and band; §A.8).
      direct: further contrasts from the same draws, outside the family band.
      diagonal: pairs of (arm, announced horizon), e.g. "X:512,Y:2048": the
        matching-number statistic (Table A7b).

    Values are fractions (rates) or nats (log loss); intervals are 2.5/97.5
    percentiles. Groups are analysed separately.
    """
    say = progress or (lambda s: None)
    if not isinstance(run, HorizonRun):
        run = load_run(run)
    st = settings_iv(run, contrasts, horizons, replicates, seed, two_way, batch, tail, scheme, direct,
                     diagonal)
    groups = []
    for g, name in enumerate(run.groups):
        say(f"group {name}: calibration")
        gr = Group(run, g, st)
        doc = {"group": name, "items": int(gr.sel.size), "calibration": _calibration(gr, st)}
        say(f"group {name}: contrasts")
        doc["contrasts"], doc["strata"], doc["mcnemar"] = _contrasts(gr, st)
        doc["diagonal"] = _diagonal(gr, st)
        doc["lengths"] = _lengths(gr, st)
        say(f"group {name}: proper scores, matched horizons, controls, dense readouts")
        doc["scores"], doc["score_contrasts"] = _score_rows(gr, st)
        doc["matched"] = _matched(gr, st)
        doc["controls"] = _controls(gr, st)
        doc["dense"] = _dense(gr, st)
        doc["agreement"] = _agreement(gr)
        groups.append(doc)
    man = run.manifest
    return {
        "schema": SCHEMA,
        "run": {"model": man.get("model"), "arms": list(run.arms), "common_arm": man.get("common_arm"),
                "closure": (man.get("closure") or {}).get("name"),
                "trajectories_sha256": man.get("trajectories_sha256"),
                "readouts_sha256": man.get("readouts_sha256"),
                "synthetic": bool(man.get("synthetic", False))},
        "settings": {"contrasts": [list(c) for c in st.contrasts], "horizons": list(st.horizons),
                     "replicates": st.replicates, "seed": st.seed, "scheme": st.scheme,
                     "two_way": st.two_way, "percentiles": [2.5, 97.5], "level": inf.LEVEL,
                     "tail": st.tail, "options": LETTERS[:run.options],
                     "direct": [list(c) for c in st.direct],
                     "diagonal": [[list(x) for x in d] for d in st.diagonal]},
        "groups": groups,
    }
