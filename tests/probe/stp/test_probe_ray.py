"""Multi-worker probing on Ray: two CPU actors on the tiny model equal a single-worker run (issue 6).

One local Ray instance for this module (starting Ray takes ~10 s here). The
Ray tests skip only where Ray is not installed and CI is not set; under CI
they must run, so a missing Ray fails there.
"""

import importlib.util
import os
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from otbench.probe.stp._loop import PhaseStats, RunStats
from otbench.probe.stp._ray import RayMissingError, check_agreement, merge_stats
from otbench.probe.stp._setup import EngineSetup
from test_probe_resume import (  # noqa: F401
    _job,
    _run,
    _same_set,
    _units_in,
    baseline,
    write_job,
)

needs_ray = pytest.mark.skipif(importlib.util.find_spec("ray") is None and not os.environ.get("CI"),
                               reason="ray is not installed (CI installs it and runs these tests)")


@pytest.fixture(scope="module")
def ray_session(otbench_cache):
    import ray

    with pytest.MonkeyPatch.context() as mp:
        # Workers inherit the environment at start: the test cache, and no usage reporting.
        mp.setenv("RAY_USAGE_STATS_ENABLED", "0")
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
        try:
            yield ray
        finally:
            ray.shutdown()


@needs_ray
def test_two_ray_workers_equal_one_worker(tmp_path: Path, ray_session, baseline, tiny_model):  # noqa: F811 (the fixture imported above)
    cfg, base_out, base_journal = baseline
    journal = tmp_path / "j"
    # A first, partial run (one trajectory per question) in this process ...
    _run(write_job(tmp_path / "r1.toml", tiny_model, R=1), tmp_path / "partial", journal=journal)
    done = _units_in(journal)
    # ... resumed with the full job on two Ray actors fed from the journal's queue.
    s = _run(cfg, tmp_path / "set", journal=journal, resume=True, workers=2)
    total = _units_in(base_journal)
    assert s.run["units"] == {"total": total, "probed": total - done, "reused": done}
    workers = s.run["workers"]
    assert [w["worker"] for w in workers] == [0, 1] and all(w["alive"] for w in workers)
    assert all(w["units"] > 0 for w in workers)                     # both engines did work
    assert sum(w["units"] for w in workers) == total - done
    assert len({w["pid"] for w in workers} | {os.getpid()}) == 3     # in two other processes
    assert s.run["think"]["requests"] == total - done                # stats merged from both
    _same_set(tmp_path / "set", base_out)
    assert ray_session.is_initialized()                              # a caller's Ray is left running


def _setup(**kw):
    base = dict(prompts=((1, 2),), tokenizer_hash="t", boundary_ids=(3,), newline_end_ids=(),
                newline_start_ids=(), fingerprint="f",
                info={"engine": "transformers", "torch": "2.13.0", "device": "cpu", "config": {"model": "/a"}})
    return EngineSetup(**(base | kw))


def test_workers_must_agree():
    where = {"host": "node-b"}
    same = _setup(info={"engine": "transformers", "torch": "2.13.0", "device": "cpu", "config": {"model": "/b"}})
    check_agreement([(_setup(), None, where), (same, None, where)])    # another path is fine
    for kw, field in [(dict(fingerprint="g"), "fingerprint"), (dict(prompts=((1, 3),)), "prompts"),
                      (dict(tokenizer_hash="u"), "tokenizer_hash"),
                      (dict(info={"engine": "transformers", "torch": "2.14.0", "device": "cpu"}), "info")]:
        with pytest.raises(RuntimeError, match=rf"worker 1 on node-b differs from worker 0 in '{field}': "
                                               r"every worker must load the same weights"):
            check_agreement([(_setup(), None, where), (_setup(**kw), None, where)])


def test_merge_stats():
    total, part = RunStats(), RunStats()
    part.think.add(2, 10, 7, 0.5)
    part.probe.add(3, 30, 9, 1.5)
    part.cache_queries, part.cache_hits, part.grading_seconds = 8, 6, 0.25
    merge_stats(total, part)
    merge_stats(total, part)
    assert total.think == PhaseStats(4, 20, 14, 1.0) and total.probe == PhaseStats(6, 60, 18, 3.0)
    assert (total.cache_queries, total.cache_hits, total.grading_seconds) == (16, 12, 0.5)
    # the cost cells (issue 26): per group and phase, cached prompt ids and engine-seconds too
    part2 = RunStats()
    c = part2.cell("MATH500", "signal")
    c.add(5, 50, 5, 0.1)
    c.cached_prompt_tokens, c.engine_seconds = 40, 0.05
    merge_stats(total, part2)
    merge_stats(total, part2)
    assert total.benchmarks["MATH500"]["signal"] == PhaseStats(10, 100, 10, 0.2, 80, 0.1)
    assert total.benchmarks["MATH500"]["think"] == PhaseStats()
    assert "benchmarks" not in total.as_dict()            # they travel in run.json's cost block


def test_missing_ray_is_a_clear_error(tmp_path: Path, monkeypatch):
    from otbench.cli._probe import probe_group
    from otbench.probe.stp._runner import run_job

    monkeypatch.setitem(sys.modules, "ray", None)                   # `import ray` fails
    with pytest.raises(RayMissingError, match=r"needs Ray: pip install 'ray>=2.40'"):
        run_job(_job(), tmp_path / "x", workers=2, progress=False, log=lambda m: None)
    cfg = tmp_path / "job.toml"
    cfg.write_text('[model]\npath = "/m"\nfamily = "qwen3-thinking"\n[data]\nsource = "sums"\nn = 1\n')
    r = CliRunner().invoke(probe_group, ["run", "--config", str(cfg), "--out", str(tmp_path / "y"),
                                         "--ray-address", "auto"])
    assert r.exit_code == 2 and "multi-worker probing (--workers > 1 or --ray-address) needs Ray" in r.output


def test_feeder_tops_up_and_hands_back_a_dead_workers_units():
    from otbench.probe.stp._ray import Feeder

    units = [(q, r) for q in range(4) for r in range(2)]
    f = Feeder(units, bounds=[2, 1], spare=1)
    assert f.top_up(0) == units[:3] and f.top_up(1) == units[3:5]     # bound + spare each
    assert f.top_up(0) == []                                         # full: nothing more to send
    f.done(0, [units[1]])
    assert f.top_up(0) == [units[5]]                                  # one left, one replaces it
    f.lost(1)                                                        # its units go back, in order
    assert list(f.queue) == [units[3], units[4], units[6], units[7]]
    assert not f.busy(1) and f.top_up(1) == []                        # a dead worker gets nothing
    f.done(0, [units[0], units[2], units[5]])
    assert f.top_up(0) == [units[3], units[4], units[6]] and f.busy(0)
    f.done(0, [units[3], units[4], units[6]])
    assert f.top_up(0) == [units[7]]
    f.done(0, [units[7]])
    assert not f.busy(0) and not f.queue


def test_worker_keeps_units_in_flight_across_calls(baseline, tiny_model):  # noqa: F811 (the fixture imported above)
    """`advance` returns as soon as a unit is done and keeps the others streaming (no Ray needed)."""
    from otbench.probe.config import load_instructions
    from otbench.probe.data import load_data
    from otbench.probe.stp._job import load_job
    from otbench.probe.stp._loop import probe_units
    from otbench.probe.stp._ray import Feeder, ProbeWorker

    job = load_job(baseline[0])
    questions, _ = load_data(job.data)
    w = ProbeWorker(job, questions, load_instructions(), "minimal", 0)
    try:
        w.bound = 3
        units = [(q, r) for q in range(len(questions)) for r in range(job.R)]
        index = {(q.group, q.id): k for k, q in enumerate(questions)}
        feed = Feeder(units, [w.bound], spare=1)              # the driver's side, as `RayExecutor.run`
        got, calls, kept, thinks = {}, 0, 0, 0
        while feed.busy(0):
            res, stats = w.advance(feed.top_up(0))
            calls += 1
            thinks += stats.think.requests                    # each call hands over its own counters
            assert res and w._stream.in_flight <= w.bound
            kept += w._stream.in_flight > 0                   # units still streaming between calls
            feed.done(0, [(index[u.group, u.question], u.trajectory) for u in res])
            for u in res:
                got[u.group, u.question, u.trajectory] = u
        todo = list(feed.queue)
        assert not todo and len(got) == len(units) and calls > 2 and kept > 0 and thinks == len(units)
        assert w._stream.in_flight == 0 and not w._backlog and w.advance([])[0] == []
        # the same results as one stream over all units on the same engine
        want = probe_units(w.engine, w.fmt, model=job.model, questions=questions, prompts=w.setup.prompts,
                           units=units, P=job.P, b=job.b, thinking_limit=job.thinking_limit,
                           answer_limit=job.answer_limit, sampling=job.sampling, grade_batch=w.grade,
                           tokenizer=w.tok)
        assert [got[questions[q].group, questions[q].id, r] for q, r in units] == want
    finally:
        w.close()


def test_gpu_less_workers_get_no_visible_gpu():
    from otbench.probe.stp._ray import actor_env

    env = {"HF_HUB_OFFLINE": "1", "OTBENCH_CACHE": "/c", "HF_TOKEN": "secret", "CUDA_VISIBLE_DEVICES": "0,1"}
    assert actor_env(0, env) == {"env_vars": {"CUDA_VISIBLE_DEVICES": "", "HF_HUB_OFFLINE": "1",
                                              "OTBENCH_CACHE": "/c"}}
    # a worker with GPUs gets Ray's own assignment (nothing set here)
    assert actor_env(2, env) == {"env_vars": {"HF_HUB_OFFLINE": "1", "OTBENCH_CACHE": "/c"}}


@needs_ray
def test_ray_leaves_a_gpu_less_actor_s_devices_and_actor_env_hides_them(ray_session):
    """Ray 2.60 itself: an actor with num_gpus=0 keeps the node's CUDA_VISIBLE_DEVICES (no override on
    zero ids); with `actor_env(0)` it sees none."""
    import ray
    from otbench.probe.stp._ray import actor_env

    @ray.remote(num_cpus=0, num_gpus=0)
    def seen():
        return os.environ.get("CUDA_VISIBLE_DEVICES")

    env = actor_env(0)
    plain = ray.get(seen.remote())
    hidden = ray.get(seen.options(runtime_env=env).remote())
    assert hidden == ""
    assert plain != "", f"Ray {ray.__version__} hides GPUs from num_gpus=0 tasks again: actor_env may be moot"
