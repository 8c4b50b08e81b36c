"""`online certify` and `online run`: the offline walk (analysis) joined to the online replay (probe).

The analysis fits the method and walks the stored trajectories (`stop_positions`,
`offline_point`, the exact FB frontier); the probe stage replays them in an engine
(`certify_set`, `certify_field`, `certify_engine_cap`). Everything that crosses is data: rows,
stop positions, the fitted `Method`, and for the engine cap the frontier's points on a grid
(`fb_frontier_points`), read back by the certificate as a table.
"""

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

ENGINE_BUDGET = "engine-budget"
"""`online certify --method engine-budget`: the engine's own thinking cap (not a `Method`: it is
the engine's rule, scored against the fixed-budget point of budget forcing at the same θ)."""
FB_GRID = 1001
"""Points of the relative-budget grid the engine cap is placed on (0, 0.001, ..., 1)."""


def _offline(ms, method, theta: float, split: str):
    """(the set with its splits, rows of `split`, OTBench's stops there, the fitted `Method`)."""
    from otbench.analysis.bench import assign_splits, stop_positions

    if ms.split is None or not (ms.split >= 0).any():
        ms = assign_splits(ms)
    rows, k, fitted = stop_positions(ms, method, theta, split=split)
    return ms, rows, k, fitted


def _offline_signal(ms, asked: str | None) -> str:
    """The recorded signal the offline walk reads: `margin_own` (the online processor's context)
    when the set records it, else the probe's `margin`; `asked` overrides."""
    from otbench.probe.online import OnlineControlError

    sig = asked or ("margin_own" if "margin_own" in ms.signals else "margin")
    if sig not in ms.signals:
        raise OnlineControlError(f"--offline-signal {sig}: the set records no such signal "
                                 f"(it has {', '.join(sorted(ms.signals))})")
    return sig


def resolve_online(method: str | None):
    """The resolved method (the registry's default online method without a name) and how it runs
    online (`Method.online`: the logits processor or side requests); a method that does not run
    online is refused in one line."""
    from otbench.analysis.methods import DEFAULT_ONLINE, MethodError, resolve
    from otbench.probe.online import OnlineControlError

    spec = method or DEFAULT_ONLINE
    try:
        m = resolve(spec)
    except MethodError as e:
        raise OnlineControlError(f"--method {spec}: {e}") from None
    if m.online is None:
        raise OnlineControlError(f"--method {spec}: it does not run online (`otbench bench list` says "
                                 "how each method runs: in the logits processor or with side requests)")
    return m


def _on_signal(m, ms, asked: str | None):
    """`m` on the set's offline signal (`_offline_signal`) when it is a processor method reading the
    margin and taking a ``signal`` option, else `m` as it is."""
    from otbench.analysis.methods import MethodError, resolve
    from otbench.probe.online import OnlineControlError

    if m.online != "processor" or "margin" not in m.signals or not m.accepts("signal"):
        return m
    try:
        return resolve(m.config_spec, signal=_offline_signal(ms, asked))
    except MethodError as e:
        raise OnlineControlError(f"--method {m.name}: {e}") from None


def _field(set_dir: Path, ms, m, theta: float, split: str, grader: str, trajectories,
           thinking: str, server: Mapping[str, Any]) -> dict:
    """A side-request method: the offline point is computed here and handed over as data."""
    from otbench.analysis.bench import offline_point
    from otbench.probe.online import certify_field

    return certify_field(set_dir, ms, lambda sub: offline_point(sub, m, theta, split=split), method=m,
                         theta=theta, grader=grader, trajectories=trajectories, thinking=thinking,
                         server=dict(server))


def _processor(set_dir: Path, ms, m, theta: float, split: str, trajectories, **kw) -> dict:
    """`m` run in the logits processor on `split`: the offline walk fits it and gives its stops, and
    the fitted `Method` itself goes to the controller (`certify_set`)."""
    from otbench.probe.online import certify_set

    ms, rows, k, fitted = _offline(ms, m, theta, split)
    if trajectories is not None:
        rows, k = rows[:trajectories], k[:trajectories]
    return certify_set(set_dir, ms, rows, k, method=fitted, theta=theta, **kw)


def fb_frontier_points(ms, rows) -> list[float]:
    """The exact oracle FB frontier of `rows` (NumPy, no JAX; docs/rules.md): its macro accuracy at
    each point of the `FB_GRID`-point relative-budget grid."""
    import numpy as np

    from otbench.analysis.frontier import frontiers

    fr = frontiers(ms.take(np.asarray(rows)), strategies="fb", grid=FB_GRID)
    return [float(x) for x in fr.strategies["fb"].macro]


def _frontier_at(points: list[float]):
    """`beta -> {"beta", "accuracy", "grid"}`: the frontier at the largest grid point `<= beta`."""
    import math

    last = len(points) - 1

    def at(beta: float) -> dict:
        i = min(max(math.floor(beta * last + 1e-9), 0), last) if math.isfinite(beta) else 0
        return {"beta": i / last, "accuracy": points[i], "grid": len(points)}
    return at


def _engine_cap(set_dir: Path, ms, theta: float, grader: str, trajectories, start, end,
                server: Mapping[str, Any], runner: str | None, cell: int | None = None) -> dict:
    from otbench.analysis.methods import BudgetForcing
    from otbench.probe.online import certify_engine_cap, check_replayable

    check_replayable(set_dir, ms)
    ms, rows, k, fixed = _offline(ms, BudgetForcing(), theta, "test")
    if cell is not None:                  # one (model, group) cell: an effort level's budget is per cell
        keep = np.asarray(ms.cell)[rows] == cell
        rows, k = rows[keep], k[keep]
    if trajectories is not None:
        rows, k = rows[:trajectories], k[:trajectories]
    cert = certify_engine_cap(set_dir, ms, rows, k, theta=theta, grader=grader, start=start, end=end,
                              server=dict(server), frontier=_frontier_at(fb_frontier_points(ms, rows)),
                              offline=fixed.name, runner=runner)
    return {"schema": "otbench.online-certify-cap/2", **cert}


def certify(set_dir: Path, ms, method: str | None, theta: float, *, grader: str = "auto",
            trajectories: int | None = None, thinking: str = "generate", offline_signal: str | None = None,
            server: Mapping[str, Any] | None = None, reasoning_start: str | None = None,
            reasoning_end: str | None = None, runner: str | None = None) -> dict:
    """`otbench online certify`: the certificate document of `method` at `theta` on SET's test split.

    `method` is a registered method's name (the logits processor or side requests, as it declares),
    or `ENGINE_BUDGET` (the engine's own cap; `reasoning_start`, `reasoning_end`, `runner` apply to it
    alone). Refusals are `OnlineControlError` (one line)."""
    from otbench.probe.online import OnlineControlError, check_replayable

    server = dict(server or {})
    if method == ENGINE_BUDGET:
        return _engine_cap(set_dir, ms, theta, grader, trajectories, reasoning_start, reasoning_end,
                           server, runner)
    if reasoning_start is not None or reasoning_end is not None or runner is not None:
        raise OnlineControlError(f"--reasoning-start/--reasoning-end/--runner apply to --method {ENGINE_BUDGET} "
                                 "only")
    m = resolve_online(method)
    check_replayable(set_dir, ms)
    if m.online == "side":
        cert = _field(set_dir, ms, m, theta, "test", grader, trajectories, thinking, server)
    else:
        cert = _processor(set_dir, ms, _on_signal(m, ms, offline_signal), theta, "test", trajectories,
                          grader=grader, server=server)
    return {"schema": "otbench.online-certify/2", **cert}


def run_online(set_dir: Path, ms, method: str | None, theta: float, *, split: str = "test",
               grader: str = "auto", trajectories: int | None = None, thinking: str = "generate",
               server: Mapping[str, Any] | None = None) -> dict:
    """`otbench online run`: the method run online over SET's `split`, one record per trajectory."""
    from otbench.probe.online import OnlineControlError, check_replayable

    if method == ENGINE_BUDGET:
        raise OnlineControlError(f"--method {ENGINE_BUDGET}: the engine's own cap is certified, not "
                                 f"run (otbench online certify SET --method {ENGINE_BUDGET} --theta T)")
    m = resolve_online(method)
    check_replayable(set_dir, ms)
    server = dict(server or {})
    if m.online == "side":
        rec = _field(set_dir, ms, m, theta, split, grader, trajectories, thinking, server)
    else:
        rec = _processor(set_dir, ms, m, theta, split, trajectories, grader=grader, shift=False, server=server)
    keep = ("method", "theta", "grader", "online", "sampling", "trajectories", "online_acc",
            "online_rel_cost", "per_trajectory") + (("online_net_rel_cost", "side", "thinking", "controller")
                                                    if m.online == "side" else ())
    return {"schema": "otbench.online-run/1", "split": split, **{k2: rec[k2] for k2 in keep}}


def certify_effort(set_dir: Path, ms, effort: Mapping[str, Any], level: str, *, grader: str = "auto",
                   trajectories: int | None = None, server: Mapping[str, Any] | None = None,
                   runner: str | None = None) -> dict:
    """`otbench effort --certify LEVEL`: each cell's budget at `level` run as the engine's own cap
    (`online certify --method engine-budget` on that cell's test trajectories), so the operator sees
    what the engine does at the budget the map chose. `effort`: the `otbench.effort/1` document of
    this set (its content hash must be the set's). A cell without a budget at `level` is listed, not run.
    """
    from otbench.analysis.measurement import content_hash
    from otbench.probe.online import OnlineControlError

    if effort.get("content_hash") != content_hash(ms):
        raise OnlineControlError(f"{set_dir}: the effort map was computed on another set (content hash "
                                 "differs); run otbench effort on this set first")
    if level not in effort.get("levels", {}):
        raise OnlineControlError(f"--certify {level}: no such level in the map (levels: "
                                 f"{', '.join(effort.get('levels', {}))})")
    cells = {tuple(map(str, ms.cell_name(c))): c for c in range(ms.num_cells)}
    out = []
    for c in effort["cells"]:
        lv = next(x for x in c["levels"] if x["level"] == level)
        rec = {"model": c["model"], "group": c["group"], "level": level, "budget": lv["budget"]}
        if lv["budget"] is None:
            rec["certificate"] = None
            rec["why"] = "no budget meets δ at this level"
        else:
            rec["certificate"] = _engine_cap(set_dir, ms, float(lv["budget"]), grader, trajectories, None,
                                             None, dict(server or {}), runner,
                                             cell=cells[(c["model"], c["group"])])
        out.append(rec)
    return {"schema": "otbench.effort-certify/1", "level": level, "content_hash": effort["content_hash"],
            "cells": out}
