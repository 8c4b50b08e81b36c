"""Unit results -> the measurement set and its raw-token tables (SPEC §2).

The set goes through `otbench.analysis.measurement._build.from_ragged` (the one
validation path every reader uses) and `otbench.analysis.measurement._io.save`, with two
extra tables:

* `tokens`: one row per trajectory: prompt, thinking and original-answer
  ids, how the thinking ended, the original answer's grade, seeds, and the
  signal's other token per position;
* `probes`: one row per answer probe: position, retained length, seed,
  sample index, answer ids, correctness and grade status.

Rows of both tables are sorted by (model, group, question, trajectory[,
position, sample]) so the bytes do not depend on the order units finished.
"""

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from ._loop import SIGNALS, UnitResult

_I32_LIST = pa.list_(pa.int32())


def _sorted(results: Sequence[UnitResult]) -> list[UnitResult]:
    return sorted(results, key=lambda u: (u.group, u.question, u.trajectory))


def measurement_set(results: Sequence[UnitResult], *, model: str, P: int,
                    question_text: Mapping[tuple[str, str], str] | None = None,
                    provenance: Mapping[str, Any] | None = None):
    """A validated `MeasurementSet` from unit results (any order).

    Signals: `logp_end`, `logp_other` and `margin = logp_other - logp_end`
    per position (SPEC §6.3).
    """
    from otbench.analysis.measurement import from_ragged, ragged

    rs = _sorted(results)
    signals = {
        "logp_end": ragged([u.logp_end for u in rs], np.float64),
        "logp_other": ragged([u.logp_other for u in rs], np.float64),
        "margin": ragged([[o - e for o, e in zip(u.logp_other, u.logp_end)] for u in rs], np.float64),
    }
    assert tuple(sorted(signals)) == tuple(sorted(SIGNALS))
    qt = question_text or {}
    return from_ragged(
        model=[model] * len(rs), group=[u.group for u in rs], question=[u.question for u in rs],
        trajectory=np.array([u.trajectory for u in rs], dtype=np.int64),
        probes=np.full(len(rs), P, dtype=np.int64),
        L=ragged([u.L for u in rs], np.int64), C=ragged([u.C for u in rs], np.int64),
        y=np.array([u.y for u in rs], dtype=np.int64),
        finished=np.array([u.finished for u in rs], dtype=bool),
        n=np.array([u.n for u in rs], dtype=np.int64),
        dataset=[u.dataset for u in rs],
        question_text=[qt.get((u.group, u.question)) for u in rs],
        signals=signals, synthetic=False, provenance=dict(provenance or {}),
    )


def token_tables(results: Sequence[UnitResult], *, model: str) -> dict[str, pa.Table]:
    """The `tokens` and `probes` extra tables (see module docstring)."""
    rs = _sorted(results)
    tokens = pa.table({
        "model": pa.array([model] * len(rs), pa.string()),
        "group": pa.array([u.group for u in rs], pa.string()),
        "dataset": pa.array([u.dataset for u in rs], pa.string()),
        "question": pa.array([u.question for u in rs], pa.string()),
        "trajectory": pa.array([u.trajectory for u in rs], pa.int32()),
        "prompt": pa.array([list(u.prompt) for u in rs], _I32_LIST),
        "thinking": pa.array([list(u.thinking) for u in rs], _I32_LIST),
        "finished": pa.array([u.finished for u in rs], pa.bool_()),
        "stop_id": pa.array([u.stop_id for u in rs], pa.int32()),
        "answer": pa.array([list(u.answer) for u in rs], _I32_LIST),
        "y": pa.array([u.y for u in rs], pa.int8()),
        "y_status": pa.array([u.y_status for u in rs], pa.string()),
        "L": pa.array([list(u.L) for u in rs], _I32_LIST),
        "signal_other_id": pa.array([list(u.other_id) for u in rs], _I32_LIST),
        "seed_think": pa.array([u.seeds["think"] for u in rs], pa.int64()),
        "seed_answer": pa.array([u.seeds["answer"] for u in rs], pa.int64()),
    })
    cols: dict[str, list] = {k: [] for k in ("model", "group", "question", "trajectory", "position",
                                             "L", "seed", "sample", "tokens", "correct", "status")}
    for u in rs:
        for k, (toks, stats) in enumerate(zip(u.probe_tokens, u.probe_status)):
            for j, (t, s) in enumerate(zip(toks, stats)):
                cols["model"].append(model)
                cols["group"].append(u.group)
                cols["question"].append(u.question)
                cols["trajectory"].append(u.trajectory)
                cols["position"].append(k)
                cols["L"].append(u.L[k])
                cols["seed"].append(u.seeds["probe"][k])
                cols["sample"].append(j)
                cols["tokens"].append(list(t))
                cols["correct"].append(s == "ok")
                cols["status"].append(s)
    types = {"model": pa.string(), "group": pa.string(), "question": pa.string(),
             "trajectory": pa.int32(), "position": pa.int32(), "L": pa.int32(), "seed": pa.int64(),
             "sample": pa.int32(), "tokens": _I32_LIST, "correct": pa.bool_(), "status": pa.string()}
    probes = pa.table({k: pa.array(v, types[k]) for k, v in cols.items()})
    return {"tokens": tokens, "probes": probes}
