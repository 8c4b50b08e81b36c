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
    # `otbench plan --pilot` reaches the analysis's width prediction only through `plan_precision`
    assert "cli/_plan.py" in users
    src = (Path(__file__).resolve().parent.parent / "cli" / "_plan.py").read_text(encoding="utf-8")
    for name in ("predict_precision", "otbench.analysis", "pilot_for_job", "candidate_hours"):
        assert name not in src, name


_PLAN_JOB = """
[model]
name = "qwen3-4b-thinking-2507"
[engine]
kind = "vllm"
max_model_len = 65536
[data]
source = "sums"
n = 4
[probe]
R = 4
P = 8
b = 256
thinking_limit = 32768
answer_limit = 4096
"""


def test_plan_precision_is_what_the_plan_command_prints_and_writes(tmp_path):
    import json
    import re

    from click.testing import CliRunner

    from otbench.analysis.measurement import simulate
    from otbench.cli import main
    from otbench.probe.plan import parse_targets, plan_job
    from otbench.probe.stp import load_job
    from otbench.workflows import plan_precision

    save(simulate("small", 1), tmp_path / "pilot")
    (tmp_path / "job.toml").write_text(_PLAN_JOB)
    counts = {"AIME": 90, "MATH500": 500}
    res = CliRunner().invoke(main, ["plan", str(tmp_path / "job.toml"), "--pilot", str(tmp_path / "pilot"),
                                    "--questions", "AIME=90,MATH500=500", "--target", "OR:0.5pp",
                                    "--json", str(tmp_path / "plan.json")])
    assert res.exit_code == 0, res.output
    job = load_job(tmp_path / "job.toml")
    plan = plan_job(job, pilot=tmp_path / "pilot", device_name="h200", questions=counts)
    got = plan_precision(job, plan, tmp_path / "pilot", targets=parse_targets("OR:0.5pp"), questions=counts)
    # the JSON block is the command's, to the byte; the printed block differs only in its run time
    assert json.loads(json.dumps(got.block)) == json.loads((tmp_path / "plan.json").read_text())["precision"]
    assert got.block["with_more_questions"]["half_widths"]["or"] <= 0.005
    seconds = re.compile(r", [0-9.]+ s\)")
    printed = [seconds.sub("", ln) for ln in res.output.splitlines()]
    assert [seconds.sub("", ln) for ln in got.lines] == printed[-len(got.lines):]
    assert got.note and got.note.startswith("precision: model 'qwen3-4b-thinking-2507' not in the pilot")
    # a pilot without the job's groups: nothing predicted, the reason as data (the command refuses
    # --target on it, and prints the note without one)
    none = plan_precision(job, plan_job(job, questions={"NOPE": 10}), tmp_path / "pilot",
                          questions={"NOPE": 10})
    assert none.block is None and none.lines == [f"note: {none.note}"]
    assert none.note == ("precision: the pilot has no trajectories in the job's groups (NOPE); "
                         "no widths predicted")


def test_certify_effort_refuses_a_map_of_another_set_or_level(synthetic_dir):
    from otbench.workflows import certify_effort

    d, ms = synthetic_dir
    with pytest.raises(OnlineControlError, match="computed on another set"):
        certify_effort(d, ms, {"content_hash": "x" * 64, "levels": {"low": {}}, "cells": []}, "low")
    from otbench.analysis.measurement import content_hash

    with pytest.raises(OnlineControlError, match="--certify high: no such level"):
        certify_effort(d, ms, {"content_hash": content_hash(ms), "levels": {"low": {}}, "cells": []}, "high")
