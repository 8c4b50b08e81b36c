"""Batch grading in a pool of worker processes, results in input order (docs/rules.md).

Processes, never threads: math-verify's timeouts use SIGALRM, which only a
process's main thread receives. Each worker grades one request at a time; the
parent enforces a hard per-request deadline on top of the graders' own
limits, and a worker that dies or overruns is replaced, its request graded
`grader_error` / `timeout` (wrong, never dropped: the denominator never shrinks).
"""

import multiprocessing
import os
import time
from multiprocessing.connection import wait
from typing import Iterable, Sequence

from ._grade import GradeConfig, GradeRequest, grade_request, make_request
from ._types import Grade, Status
from otbench.errors import ArgumentError


def _become_subreaper() -> None:
    # bwrap's outer process exits without reaping the sandbox's init, which is
    # then adopted by the nearest subreaper (else the host's PID 1, which in a
    # container may never reap). The worker adopts and reaps them itself.
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        pass


def _reap() -> None:
    """Reap adopted zombies; between requests the worker has no child of its own."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _worker(conn, config: GradeConfig) -> None:
    """Worker main loop: send `_READY` once, then receive (index, request), send (index, Grade); None stops."""
    _become_subreaper()
    conn.send(_READY)
    while True:
        try:
            msg = conn.recv()
        except EOFError:
            return
        if msg is None:
            return
        index, req = msg
        try:
            g = grade_request(req, config)
        except Exception as e:  # a grader bug must not lose the request
            g = Grade.wrong(Status.GRADER_ERROR, f"{type(e).__name__}: {e}"[:200])
        _reap()
        conn.send((index, g))


# A started worker says so first; a request's deadline counts from then, so a
# worker still importing (spawn, a loaded machine) does not eat its time.
_READY = "ready"
_STARTUP_S = 120.0


class _Slot:
    def __init__(self, ctx, config: GradeConfig):
        self.conn, child = ctx.Pipe(duplex=True)
        self.proc = ctx.Process(target=_worker, args=(child, config), daemon=True)
        self.proc.start()
        child.close()
        self.index: int | None = None
        self.deadline = 0.0
        self.ready = False

    def stop(self, kill: bool) -> None:
        if not kill:
            try:
                self.conn.send(None)
            except OSError:
                kill = True
        if kill:
            self.proc.kill()
        self.proc.join(timeout=None if kill else 5)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join()
        self.conn.close()


WORKER_BYTES = 256 << 20
"""The memory floor assumed per grading worker (an interpreter with math-verify imported: about
125 MiB measured, and a code response's sandbox); a budget refusal, not a measurement."""


class Grader:
    """A reusable pool of grading worker processes.

    Args:
        workers: number of worker processes (default: CPU count, at most 8);
            0 grades in the calling process (main thread only, for debugging).
        config: grader settings, sent to each worker once.
        request_timeout_s: hard wall-clock limit per request in the parent;
            default (None): per request, a generous bound of the graders' own
            limits: 6 math-verify calls, plus for code the sandbox's run
            bound for its number of tests and its self-test, plus 30 s.

    Use as a context manager, or call `close()`.

    >>> with Grader(workers=1) as g:
    ...     [x.status.value for x in g.grade_many([GradeRequest("choice", "A", "Answer: A")])]
    ['ok']
    """

    def __init__(self, workers: int | None = None, *, config: GradeConfig = GradeConfig(),
                 request_timeout_s: float | None = None):
        if workers is None:
            workers = min(os.cpu_count() or 1, 8)
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 0:
            raise ArgumentError(f"`workers` must be a non-negative integer, got {workers!r}.")
        from otbench.resources import check_workers

        check_workers("grading", "`workers`", workers)
        if request_timeout_s is not None and not request_timeout_s > 0:
            raise ArgumentError(f"`request_timeout_s` must be positive, got {request_timeout_s!r}.")
        self.workers = workers
        self.config = config
        self.request_timeout_s = None if request_timeout_s is None else float(request_timeout_s)
        # spawn: safe even when the caller holds CUDA contexts or threads.
        self._ctx = multiprocessing.get_context("spawn")
        self._slots: list[_Slot] = []

    def deadline_s(self, req: GradeRequest) -> float:
        """The parent's hard limit for one request (see `request_timeout_s`)."""
        if self.request_timeout_s is not None:
            return self.request_timeout_s
        code = 0.0
        if req.task == "code":
            # the run itself, and the once-per-worker sandbox self-test (20 s cap)
            code = self.config.limits.run_deadline_s(len(req.tests)) + 20.0
        return 6 * self.config.math_timeout_s + code + 30.0

    def __enter__(self) -> "Grader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Stop the worker processes (idempotent)."""
        for s in self._slots:
            s.stop(kill=False)
        self._slots = []

    def _collect(self, s: _Slot, ready: list, req: GradeRequest) -> Grade | None:
        """The grade of `s`'s request if it is settled (result, dead worker, deadline), else None."""
        if s.conn in ready:
            try:
                msg = s.conn.recv()
            except (EOFError, OSError):
                msg = None
            if msg == _READY:  # the worker has started: the request's clock starts now
                s.ready = True
                s.deadline = time.monotonic() + self.deadline_s(req)
                return None
            if msg is not None:
                idx, got = msg
                assert idx == s.index
                return got
        if s.proc.sentinel in ready or s.conn in ready:
            return Grade.wrong(Status.GRADER_ERROR, f"grading worker died (exit code {s.proc.exitcode})")
        if time.monotonic() >= s.deadline:
            return Grade.wrong(Status.TIMEOUT, f"grading took longer than {self.deadline_s(req):g} s")
        return None

    def grade_many(self, requests: Iterable[GradeRequest | dict]) -> list[Grade]:
        """Grade every request; `result[i]` is the grade of `requests[i]`.

        Requests may be `GradeRequest`s or dicts of `grade`'s arguments
        (`task`, `reference`, `response`, optional `tests`, `fn_name`,
        `n_options`); all are validated before any grading starts.
        The result does not depend on the number of workers or on the order
        in which workers finish (only on the inputs, and for limits measured
        in time, on the machine's speed).
        """
        reqs = [_as_request(i, r) for i, r in enumerate(requests)]
        if self.workers == 0:
            return [grade_request(r, self.config) for r in reqs]
        results: list[Grade | None] = [None] * len(reqs)
        pending = list(range(len(reqs)))[::-1]  # pop() from the end = input order
        from otbench.resources import check_workers

        check_workers(f"grading {len(reqs):,} responses", "`workers`", self.workers,
                      per_worker=WORKER_BYTES, started=min(self.workers, len(reqs)))
        while len(self._slots) < min(self.workers, len(reqs)):
            self._slots.append(_Slot(self._ctx, self.config))
        busy = 0
        try:
            while pending or busy:
                for s in self._slots:
                    if s.index is None and pending:
                        i = pending.pop()
                        s.conn.send((i, reqs[i]))
                        s.index = i
                        s.deadline = time.monotonic() + self.deadline_s(reqs[i]) + (
                            0.0 if s.ready else _STARTUP_S)
                        busy += 1
                now = time.monotonic()
                waiting = [s for s in self._slots if s.index is not None]
                timeout = max(0.0, min(s.deadline for s in waiting) - now)
                ready = wait([s.conn for s in waiting] + [s.proc.sentinel for s in waiting], timeout)
                for k, s in enumerate(self._slots):
                    if s.index is None:
                        continue
                    got = self._collect(s, ready, reqs[s.index])
                    if got is None:
                        continue
                    results[s.index] = got
                    busy -= 1
                    s.index = None
                    if got.status is Status.GRADER_ERROR or (
                            got.status is Status.TIMEOUT and s.proc.is_alive()
                            and time.monotonic() >= s.deadline):
                        s.stop(kill=True)
                        self._slots[k] = _Slot(self._ctx, self.config)
        except BaseException:
            # Interrupted mid-batch: never leave workers holding half a batch.
            for s in self._slots:
                s.stop(kill=True)
            self._slots = []
            raise
        return results  # type: ignore[return-value]


def _as_request(i: int, r) -> GradeRequest:
    try:
        if isinstance(r, GradeRequest):
            return make_request(r.task, r.reference, r.response, tests=r.tests or None,
                                fn_name=r.fn_name, n_options=r.n_options)
        if isinstance(r, dict):
            kw = dict(r)
            unknown = set(kw) - set(GradeRequest._fields)
            if unknown:
                raise ArgumentError(f"unknown keys {sorted(unknown)}.")
            return make_request(kw.pop("task", None), kw.pop("reference", None),
                                kw.pop("response", None), **kw)
        raise ArgumentError(f"expected a GradeRequest or a dict, got {type(r).__name__}.")
    except ValueError as e:
        raise ArgumentError(f"request {i}: {e}") from None


def grade_many(requests: Sequence[GradeRequest | dict], *, workers: int | None = None,
               config: GradeConfig = GradeConfig()) -> list[Grade]:
    """Grade a batch in a temporary `Grader` (see `Grader.grade_many`)."""
    with Grader(workers, config=config) as g:
        return g.grade_many(requests)
