"""Checks made at job start, before any engine or actor exists (issue 25, items 4 and 6)."""

import errno
import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from otbench.probe.grading import GraderError, check_gradable
from otbench.probe.stp import _lock
from otbench.probe.stp._journal import Journal, JournalError


class _Q:
    def __init__(self, task, reference, qid="q1", dataset="MATH500"):
        self.task, self.reference, self.id, self.dataset = task, reference, qid, dataset


def test_minimal_grader_refuses_what_it_cannot_grade_naming_the_question():
    check_gradable("minimal", [_Q("math", " 42 "), _Q("math", "-7")])
    with pytest.raises(GraderError, match=r"question MATH500/q2: grader 'minimal' needs an integer reference, "
                                          r"got '\\\\frac\{1\}\{2\}'"):
        check_gradable("minimal", [_Q("math", "3"), _Q("math", "\\frac{1}{2}", "q2")])
    with pytest.raises(GraderError, match=r"question GPQA/g: grader 'minimal' grades math questions .* "
                                          r"not task 'choice'"):
        check_gradable("minimal", [_Q("choice", "A", "g", "GPQA")])
    with pytest.raises(GraderError, match="task 'essay' is not one of math, choice, code"):
        check_gradable("otbench", [_Q("essay", "x")])
    assert "\n" not in str(GraderError("a\nb"))


def test_full_grader_needs_math_verify(monkeypatch):
    import importlib.util
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == "math_verify" else real(n, *a))
    with pytest.raises(GraderError, match="grader 'otbench' needs math-verify"):
        check_gradable("otbench", [_Q("math", "1/2")])


def test_a_job_its_grader_cannot_grade_is_refused_before_the_engine_starts(tmp_path: Path):
    from otbench.cli import main

    data = tmp_path / "math500.jsonl"
    data.write_text(json.dumps({"problem": "Half of one?", "answer": "\\frac{1}{2}", "unique_id": "h"}) + "\n")
    job = tmp_path / "job.toml"
    job.write_text(f'[model]\npath = "{tmp_path / "no-such-model"}"\nfamily = "qwen3-thinking"\nid = "m"\n'
                   f'[engine]\nkind = "transformers"\n[data]\nsource = "file"\nbenchmark = "MATH500"\n'
                   f'path = "{data}"\n[grader]\nkind = "minimal"\n')
    r = CliRunner().invoke(main, ["probe", "run", "--config", str(job), "--out", str(tmp_path / "out")])
    assert r.exit_code == 2 and "Traceback" not in r.output, r.output
    err = r.stderr.strip().splitlines()
    assert err[-1].endswith("question MATH500/h: grader 'minimal' needs an integer reference, got "
                            "'\\\\frac{1}{2}'; install the probe extra (math-verify) for the full grader")
    assert not any("starting the" in x or "no-such-model" in x for x in err)   # checked before the model
    assert not (tmp_path / "out").exists()


def _old_bwrap(tmp_path: Path) -> Path:
    """A stand-in for Ubuntu 22.04's bubblewrap: it reports 0.6.1 and knows no --disable-userns."""
    d = tmp_path / "old-bwrap"
    d.mkdir()
    b = d / "bwrap"
    b.write_text('#!/bin/sh\nif [ "$1" = --version ]; then echo "bubblewrap 0.6.1"; exit 0; fi\n'
                 'echo "bwrap: Unknown option --disable-userns" >&2\nexit 1\n')
    b.chmod(0o755)
    return d


def test_an_old_bubblewrap_is_refused_naming_its_version(tmp_path: Path, monkeypatch):
    from otbench.probe.grading._sandbox import sandbox_status

    d = _old_bwrap(tmp_path)
    why = sandbox_status(str(d / "bwrap"))
    assert why.startswith("bubblewrap 0.6.1 (") and "older than 0.8.0 and has no --disable-userns" in why
    assert "\n" not in why
    monkeypatch.setenv("PATH", f"{d}{os.pathsep}{os.environ['PATH']}")
    sandbox_status.cache_clear()
    try:
        with pytest.raises(GraderError, match=r"question LCB/c1 is graded by running code in the sandbox, "
                                              r"which does not work here: bubblewrap 0\.6\.1"):
            check_gradable("otbench", [_Q("math", "1/2"), _Q("code", "", "c1", "LCB")])
        check_gradable("otbench", [_Q("math", "1/2")])        # no code question: no sandbox needed
    finally:
        sandbox_status.cache_clear()


def test_a_code_job_with_an_old_bubblewrap_is_refused_before_the_engine_starts(tmp_path: Path, monkeypatch):
    from otbench.cli import main
    from otbench.probe.grading._sandbox import sandbox_status

    pytest.importorskip("math_verify")
    data = tmp_path / "lcb.jsonl"
    data.write_text(json.dumps({"question_id": "c1", "question_content": "Print 1.", "starter_code": "",
                                "public_test_cases": json.dumps([{"input": "", "output": "1\n",
                                                                  "testtype": "stdin"}])}) + "\n")
    job = tmp_path / "job.toml"
    job.write_text(f'[model]\npath = "{tmp_path / "no-such-model"}"\nfamily = "qwen3-thinking"\nid = "m"\n'
                   f'[engine]\nkind = "transformers"\n[data]\nsource = "file"\nbenchmark = "LiveCodeBench"\n'
                   f'path = "{data}"\n[grader]\nkind = "otbench"\n')
    monkeypatch.setenv("PATH", f"{_old_bwrap(tmp_path)}{os.pathsep}{os.environ['PATH']}")
    sandbox_status.cache_clear()
    try:
        r = CliRunner().invoke(main, ["probe", "run", "--config", str(job), "--out", str(tmp_path / "out")])
    finally:
        sandbox_status.cache_clear()
    assert r.exit_code == 2 and "Traceback" not in r.output, r.output
    err = r.stderr.strip().splitlines()
    assert "bubblewrap 0.6.1" in err[-1] and "--disable-userns" in err[-1], err
    assert not any("starting the" in x or "no-such-model" in x for x in err)
    assert not (tmp_path / "out").exists()


def _no_flock(monkeypatch):
    def refuse(fd, op):
        raise OSError(errno.ENOSYS, "Function not implemented")
    monkeypatch.setattr(_lock.fcntl, "flock", refuse)


def test_journal_lock_falls_back_to_an_owner_file_without_flock(tmp_path: Path, monkeypatch):
    _no_flock(monkeypatch)
    root = tmp_path / "j"
    j = Journal.open(root, resume=False)
    owner = json.loads((root / _lock.OWNER_FILE).read_text())
    assert owner["pid"] == os.getpid() and j._lock.kind == "owner file"
    with pytest.raises(JournalError, match=r"another run is writing this journal .*pid \d+\); this filesystem "
                                           r"has no flock, so the lock is the file lock.owner: delete it"):
        Journal.open(root, resume=True)
    j.close()
    assert not (root / _lock.OWNER_FILE).exists()
    # a lock left by a killed run on this host is taken over; one from another host is refused
    import socket
    (root / _lock.OWNER_FILE).write_text(json.dumps({"host": socket.gethostname(), "pid": 2 ** 22 + 12345}))
    Journal.open(root, resume=True).close()
    (root / _lock.OWNER_FILE).write_text(json.dumps({"host": "node-17", "pid": 1}))
    with pytest.raises(JournalError, match=r"\(node-17 pid 1\)"):
        Journal.open(root, resume=True)
    assert (root / _lock.OWNER_FILE).exists()                 # not ours: left as it is


def test_other_flock_errors_are_not_hidden(tmp_path: Path, monkeypatch):
    def broken(fd, op):
        raise OSError(errno.EIO, "I/O error")
    monkeypatch.setattr(_lock.fcntl, "flock", broken)
    with pytest.raises(OSError, match="I/O error"):
        Journal.open(tmp_path / "j", resume=False)


def test_workers_get_the_drivers_cache_and_offline_settings_but_no_credentials():
    from otbench.probe.stp._ray import worker_env

    env = {"HF_HUB_OFFLINE": "1", "HF_HOME": "/data/hf", "OTBENCH_CACHE": "/data/ot", "OTBENCH_X": "y",
           "VLLM_LOGGING_LEVEL": "INFO", "HF_TOKEN": "secret", "PATH": "/bin", "HOME": "/root"}
    assert worker_env(env) == {"HF_HOME": "/data/hf", "HF_HUB_OFFLINE": "1", "OTBENCH_CACHE": "/data/ot",
                               "OTBENCH_X": "y", "VLLM_LOGGING_LEVEL": "INFO"}


def test_two_workers_with_a_missing_model_is_one_line_before_ray_starts(tmp_path: Path, monkeypatch):
    pytest.importorskip("ray")
    import ray

    from otbench.cli import main

    started = []
    monkeypatch.setattr(ray, "init", lambda *a, **k: started.append(1))
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    job = tmp_path / "job.toml"
    job.write_text(f'[model]\npath = "{tmp_path / "no-such-model"}"\nfamily = "qwen3-thinking"\nid = "m"\n'
                   '[engine]\nkind = "transformers"\n[data]\nsource = "sums"\nn = 2\n[grader]\nkind = "minimal"\n')
    r = CliRunner().invoke(main, ["probe", "run", "--config", str(job), "--out", str(tmp_path / "out"),
                                  "--workers", "2", "--no-progress"])
    assert r.exit_code == 2 and "Traceback" not in r.output, r.output
    assert "no-such-model" in r.stderr.strip().splitlines()[-1]
    assert not started and not (tmp_path / "out").exists()


def test_a_workers_own_start_error_reaches_the_driver_as_one_line(monkeypatch):
    from otbench.probe.config import ModelNotFoundError
    from otbench.probe.stp import _ray

    def fail(self, *a):
        raise ModelNotFoundError("m: no such model folder")
    monkeypatch.setattr(_ray.ProbeWorker, "_start", fail)
    w = _ray.ProbeWorker(None, [], {}, "minimal", 0)
    with pytest.raises(ModelNotFoundError, match="^m: no such model folder$"):
        w.describe()
    w.close()

    class FakeRay:
        class exceptions:
            class RayTaskError(Exception):
                def __init__(self, cause):
                    self.cause = cause
    err = ModelNotFoundError("one line")
    assert _ray._one_line(FakeRay, FakeRay.exceptions.RayTaskError(err)) is err
    other = FakeRay.exceptions.RayTaskError(KeyError("k"))
    assert _ray._one_line(FakeRay, other) is other


def test_progress_lines_carry_the_rates_while_running_and_end_plain(tmp_path: Path):
    import io

    from otbench.cli._common import LineProgress

    out = io.StringIO()
    with LineProgress(10, "probing", interval=3600, file=out) as p:
        p.update(4)
        p.set_postfix({"generated": "1234 tok/s"})
        p._line()
        p.update(6)
    first, last = out.getvalue().splitlines()
    assert first.startswith("probing: 4/10 (40%), ") and first.endswith(" s left (generated 1234 tok/s)")
    assert last.startswith("probing: 10/10 (100%), ") and last.endswith(" s (done)")


def test_progress_lines_show_tokens_per_second_before_the_first_unit_commits(tmp_path: Path, tiny_model,
                                                                           otbench_cache):
    """A timed line reads the run's counters as tokens arrive: at paper shape the first unit commits
    only after its whole probe phase, and a line of 0/N without rates looks stalled."""
    import io

    from otbench.cli._common import LineProgress
    from otbench.probe.stp._job import load_job
    from otbench.probe.stp._runner import run_job
    from test_probe_resume import write_job

    out, bars = io.StringIO(), []

    def factory(total):
        bar = LineProgress(total, "probing", interval=3600, file=out)
        bars.append(bar)
        return bar
    cfg = write_job(tmp_path / "job.toml", tiny_model, n=1, R=1)
    run_job(load_job(cfg), tmp_path / "set", progress=factory, log=lambda m: None)
    assert bars[0].live is not None
    bars[0].done = 0                       # as before the first commit: the counters still show
    bars[0]._t0 -= 1.0
    bars[0]._line()
    line = out.getvalue().splitlines()[-1]
    assert line.startswith("probing: 0/1 (0%), ") and "(generated " in line and " tok/s, think " in line
    assert float(line.split("(generated ")[1].split(" tok/s")[0]) > 0
