"""`otbench.workflows`: the layer that joins the offline walk (analysis) and the online replay (probe).

The CLI's online commands are one call each into it (`cli/_online.py`); these tests call the
workflows directly, with the same one-line refusals the commands print, and pin the engine cap's
frontier table against the analysis frontier it is read from.
"""

import numpy as np
import pytest

from otbench.analysis import save
from otbench.analysis.bench import assign_splits
from otbench.probe.online import OnlineControlError
from otbench.workflows import ENGINE_BUDGET, certify, run_online

from _bad_input import small_set  # noqa: E402


@pytest.fixture
def synthetic_dir(tmp_path):
    d = tmp_path / "s"
    ms = assign_splits(small_set(synthetic=True))
    save(ms, d)
    return d, ms


def test_the_workflows_refuse_in_one_line_before_any_engine(synthetic_dir):
    d, ms = synthetic_dir
    with pytest.raises(OnlineControlError, match="apply to --method engine-budget only"):
        certify(d, ms, "thinkbrake", 0.5, runner="v2")
    with pytest.raises(OnlineControlError, match="certified, not run"):
        run_online(d, ms, ENGINE_BUDGET, 8)
    with pytest.raises(OnlineControlError, match="synthetic"):
        certify(d, ms, ENGINE_BUDGET, 8)
    with pytest.raises(OnlineControlError, match="synthetic"):
        certify(d, ms, None, 0.5)
    with pytest.raises(OnlineControlError, match="^--method no-such-method: "):
        run_online(d, ms, "no-such-method", 8)


def test_the_cap_frontier_table_is_the_analysis_frontier_on_its_grid(synthetic_dir):
    from otbench.analysis.frontier import frontiers
    from otbench.workflows._online import FB_GRID, _frontier_at, fb_frontier_points

    _, ms = synthetic_dir
    rows = np.arange(min(12, ms.num_trajectories))
    pts = fb_frontier_points(ms, rows)
    ref = frontiers(ms.take(rows), strategies="fb", grid=FB_GRID).strategies["fb"].macro
    assert len(pts) == FB_GRID and np.array_equal(np.asarray(pts), np.asarray(ref, dtype=float))
    at = _frontier_at(pts)
    assert at(0.4567) == {"beta": 0.456, "accuracy": pts[456], "grid": FB_GRID}
    assert at(2.0)["beta"] == 1.0 and at(-1.0)["beta"] == 0.0 and at(float("inf"))["beta"] == 0.0


def _importers_of(prefix: str, roots=("analysis", "probe", "otbench", "cli")) -> list[str]:
    import ast
    from pathlib import Path

    base = Path(__file__).resolve().parent.parent
    out = []
    for root in roots:
        for f in sorted((base / root).rglob("*.py")):
            if "workflows" in f.parts:
                continue
            for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
                names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                         else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
                if any(n == prefix or n.startswith(prefix + ".") for n in names):
                    out.append(f.relative_to(base).as_posix())
    return sorted(set(out))


def test_only_the_cli_sits_above_the_workflows():
    users = _importers_of("otbench.workflows")
    assert "cli/_online.py" in users and all(u.startswith("cli/") for u in users), users
    # and the online commands reach the replay and the offline walk only through it
    from pathlib import Path

    src = (Path(__file__).resolve().parent.parent / "cli" / "_online.py").read_text(encoding="utf-8")
    for name in ("certify_set", "certify_field", "certify_engine_cap", "stop_positions", "offline_point",
                 "frontiers"):
        assert name not in src, name


def test_certify_effort_refuses_a_map_of_another_set_or_level(synthetic_dir):
    from otbench.workflows import certify_effort

    d, ms = synthetic_dir
    with pytest.raises(OnlineControlError, match="computed on another set"):
        certify_effort(d, ms, {"content_hash": "x" * 64, "levels": {"low": {}}, "cells": []}, "low")
    from otbench.analysis.measurement import content_hash

    with pytest.raises(OnlineControlError, match="--certify high: no such level"):
        certify_effort(d, ms, {"content_hash": content_hash(ms), "levels": {"low": {}}, "cells": []}, "high")
