"""Batch grading in worker processes: input order, worker-count invariance, crash and overrun handling,
and the argument validation of the grading entry point."""

import os
import threading
import time

import pytest
from otbench.probe.grading._grade import GradeConfig, GradeRequest, grade, make_request
from otbench.probe.grading._pool import Grader, grade_many
from otbench.probe.grading._sandbox import SandboxLimits, sandbox_status
from otbench.probe.grading._types import CodeTest, Grade, Status

_WHY = sandbox_status()
needs_sandbox = pytest.mark.skipif(bool(_WHY) and not os.environ.get("CI"),
                                   reason=f"sandbox unavailable here: {_WHY}")
# Room for a loaded two-core CI machine (see test_sandbox.py); the slow programs
# below outlast it or are stopped by the pool first.
LIMITS = SandboxLimits(wall_s=2.5, cpu_s=3, total_wall_s=10.0)
CONFIG = GradeConfig(limits=LIMITS)


def _batch() -> list[GradeRequest]:
    """A mixed batch whose grades are known by construction (index i -> status)."""
    reqs = []
    for i in range(12):
        if i % 3 == 0:
            reqs.append(GradeRequest("math", str(i), rf"\boxed{{{i if i % 2 == 0 else i + 1}}}"))
        elif i % 3 == 1:
            reqs.append(GradeRequest("choice", "ABCD"[i % 4], f"Answer: {'ABCD'[(i // 2) % 4]}"))
        else:
            reqs.append(GradeRequest("choice", "A", "no letter here" if i % 2 else "</think>"))
    return reqs


def _expected(reqs):
    # The in-process grader is the twin of the pool.
    return [grade(r.task, r.reference, r.response) for r in reqs]


@pytest.fixture(scope="module")
def pool():
    with Grader(2, config=CONFIG) as g:
        yield g


def test_pool_matches_in_process_and_keeps_order(pool):
    reqs = _batch()
    want = _expected(reqs)
    assert pool.grade_many(reqs) == want
    # Reversed input gives reversed output: results follow input order, not completion.
    assert pool.grade_many(reqs[::-1]) == want[::-1]
    # Sanity of the construction itself: some right, some wrong.
    assert {g.status for g in want} >= {Status.OK, Status.WRONG_ANSWER, Status.NO_ANSWER}


def test_worker_count_does_not_change_results():
    reqs = _batch()
    with Grader(1, config=CONFIG) as one, Grader(2, config=CONFIG) as three:
        assert one.grade_many(reqs) == three.grade_many(reqs) == Grader(0).grade_many(reqs)


def test_dict_requests_and_empty_batch(pool):
    assert pool.grade_many([]) == []
    got = pool.grade_many([{"task": "choice", "reference": "B", "response": "Answer: B"}])
    assert got == [Grade(True, Status.OK, "")]


def test_bad_request_names_its_index(pool):
    with pytest.raises(ValueError, match=r"request 1: `task` must be one of 'math', 'choice', 'code', "
                                         r"got 'essay'\."):
        pool.grade_many([GradeRequest("choice", "A", "A"), {"task": "essay", "reference": "",
                                                            "response": ""}])
    with pytest.raises(ValueError, match=r"request 0: unknown keys \['answer'\]\."):
        pool.grade_many([{"task": "math", "reference": "1", "response": "", "answer": "1"}])


@needs_sandbox
def test_overrunning_request_is_timeout_and_worker_replaced():
    # The parent's hard deadline (0.5 s) fires before the sandbox's own limit.
    slow = GradeRequest("code", "", "```python\nimport time\ntime.sleep(5)\n```",
                        (CodeTest("", "x"),))
    fine = GradeRequest("choice", "C", "Answer: C")
    with Grader(1, config=CONFIG, request_timeout_s=0.5) as g:
        t = time.monotonic()
        got = g.grade_many([slow, fine])
        assert time.monotonic() - t < 10
    assert got[0].status is Status.TIMEOUT and not got[0].correct
    assert got[1] == Grade(True, Status.OK, "")


def test_worker_start_up_is_not_counted_against_the_deadline():
    # A fresh worker spends a second or more importing (spawn); the request's
    # clock starts when the worker says it is ready, so a tight deadline holds.
    with Grader(2, request_timeout_s=0.3) as g:
        got = g.grade_many([GradeRequest("choice", "C", "Answer: C")] * 4)
    assert got == [Grade(True, Status.OK, "")] * 4


@needs_sandbox
def test_dead_worker_is_grader_error_and_batch_completes():
    slow = GradeRequest("code", "", "```python\nimport time\ntime.sleep(3)\n```", (CodeTest("", "x"),))
    fine = GradeRequest("choice", "A", "Answer: A")
    with Grader(1, config=CONFIG) as g:
        g.grade_many([fine])  # start the worker
        victim = g._slots[0].proc

        def kill_soon():
            time.sleep(0.5)
            victim.kill()

        th = threading.Thread(target=kill_soon)
        th.start()
        got = g.grade_many([slow, fine, fine])
        th.join()
    assert got[0].status is Status.GRADER_ERROR and not got[0].correct
    assert got[1:] == [Grade(True, Status.OK, "")] * 2


@needs_sandbox
def test_code_in_pool_leaves_no_zombies():
    # bwrap leaves its sandbox init unreaped; grading workers adopt and reap it.
    def zombie_bwraps():
        out = set()
        for d in os.listdir("/proc"):
            if d.isdigit():
                try:
                    with open(f"/proc/{d}/stat") as f:
                        fields = f.read().rsplit(")", 1)[1].split()
                    with open(f"/proc/{d}/comm") as f:
                        name = f.read().strip()
                except OSError:
                    continue
                if fields[0] == "Z" and name == "bwrap":
                    out.add(int(d))
        return out

    before = zombie_bwraps()
    ok = GradeRequest("code", "", "```python\nprint(input())\n```", (CodeTest("7", "7"),))
    with Grader(2, config=CONFIG) as g:
        assert all(x.correct for x in g.grade_many([ok] * 6))
        assert not (zombie_bwraps() - before)


@pytest.mark.parametrize("kwargs,match", [
    (dict(task="essay", reference="", response=""),
     r"`task` must be one of 'math', 'choice', 'code', got 'essay'\."),
    (dict(task="math", reference=3, response=""), r"`reference` must be a string, got int\."),
    (dict(task="math", reference="1", response=None), r"`response` must be a string, got NoneType\."),
    (dict(task="code", reference="", response="", tests=None),
     r"`tests` must be a sequence of \{'input': str, 'output': str\}, got NoneType\."),
    (dict(task="code", reference="", response="", tests=[]),
     r"`tests` must hold at least one test for a code task\."),
    (dict(task="code", reference="", response="", tests=[{"input": "1"}]),
     r"`tests\[0\]` must have keys 'input' and 'output'\."),
    (dict(task="code", reference="", response="", tests=[{"input": 1, "output": "1"}]),
     r"`tests\[0\]` input and output must be strings\."),
    (dict(task="code", reference="", response="", tests=["1"]),
     r"`tests\[0\]` must be a CodeTest or a mapping, got str\."),
    (dict(task="code", reference="", response="", tests=[{"input": "", "output": ""}], fn_name="1x"),
     r"`fn_name` must be a Python identifier, got '1x'\."),
    (dict(task="code", reference="", response="", tests=[{"input": "", "output": ""}],
          fn_name="__class__"),
     r"`fn_name` must be a plain name \(no leading double underscore: that reaches the "
     r"interpreter's own attributes\), got '__class__'\."),
    (dict(task="math", reference="1", response="", tests=[{"input": "", "output": ""}]),
     r"`tests` is only for code tasks, got tests for a math task\."),
    (dict(task="choice", reference="A", response="", fn_name="f"),
     r"`fn_name` is only for code tasks, got one for a choice task\."),
    (dict(task="choice", reference="A", response="", n_options=1),
     r"`n_options` must be an integer in 2\.\.10, got 1\."),
])
def test_request_validation_messages(kwargs, match):
    with pytest.raises(ValueError, match=match):
        make_request(**kwargs)


@pytest.mark.parametrize("workers,timeout,match", [
    (-1, None, r"`workers` must be a non-negative integer, got -1\."),
    (1, 0.0, r"`request_timeout_s` must be positive, got 0\.0\."),
])
def test_grader_validation_messages(workers, timeout, match):
    with pytest.raises(ValueError, match=match):
        Grader(workers, request_timeout_s=timeout)


def test_grade_many_function():
    assert grade_many([GradeRequest("choice", "D", "**D**")], workers=1) == [Grade(True, Status.OK, "")]


@pytest.mark.parametrize("kwargs,match", [
    (dict(math_timeout_s=0), r"`math_timeout_s` must be an integer >= 1, got 0\."),
    (dict(math_timeout_s=2.5), r"`math_timeout_s` must be an integer >= 1, got 2\.5\."),
    (dict(limits={}), r"`limits` must be a SandboxLimits, got dict\."),
    (dict(thinking_end=["</think>"]), r"`thinking_end` must be a tuple of non-empty strings, got \['</think>'\]\."),
    (dict(thinking_start=("",)), r"`thinking_start` must be a tuple of non-empty strings, got \(''\,\)\."),
])
def test_config_validation_messages(kwargs, match):
    with pytest.raises(ValueError, match=match):
        GradeConfig(**kwargs)


def test_custom_thinking_markers():
    # A family with its own markers: only text after the end marker counts.
    cfg = GradeConfig(thinking_end=("[/REASON]",), thinking_start=("[REASON]",))
    assert grade("choice", "A", "[REASON]Answer: B[/REASON]Answer: A", config=cfg).correct
    assert grade("choice", "A", "[REASON]Answer: A", config=cfg).status is Status.NO_ANSWER
