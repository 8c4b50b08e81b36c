"""Symbolic comparisons of model answers in a child process with a hard deadline.

Dynasor's answer equivalence runs sympy (parsing, `simplify`, `N`) on what a
model wrote, in the probe's grading thread and in the online controller. sympy
has no time limit of its own and a thread cannot be stopped, so one answer
such as ``9^{9^{9^{9}}}`` or a large `simplify` would stall the whole probe.
Here each comparison runs in one long-lived child process (spawned, so it
a fresh interpreter sharing nothing with the caller); the caller waits at most the
deadline, and a child that overruns or dies is killed and replaced on the
next call. The comparison then counts as *not equal* -- a failure, never a
crash -- and its reason is counted (`failures`) and logged.

The child runs only the comparison function named in `_child` on two strings:
no callable crosses the pipe. It reports when it has parsed each side, so an
overrun is pinned on the side whose parse took the time (`costly`): a hostile
answer costs one deadline, and later comparisons with it are made as strings. Its address space is capped (`MEMORY_BYTES`) so a
huge intermediate fails inside the child instead of exhausting the machine.
"""

import atexit
import collections
import logging
import json
import os
import select
import subprocess
import sys
import threading
import time

__all__ = ["DEADLINE_S", "compare", "failures"]

DEADLINE_S = 5.0
"""Wall-clock seconds one symbolic comparison may take (the math grader's default, docs/rules.md)."""

MEMORY_BYTES = 4 << 30
_STARTUP_S = 120.0
_COSTLY_MAX = 4096
_log = logging.getLogger("otbench.grading")


class _Worker:
    def __init__(self):
        self._lock = threading.Lock()
        self._proc = None
        self._buf = b""
        self._pid = None
        self.failures: collections.Counter = collections.Counter()
        self.costly: set[str] = set()

    def _start(self) -> None:
        # A fresh interpreter rather than multiprocessing: nothing of the caller's __main__ (a
        # script, a notebook, an engine's threads) is re-imported or inherited.
        self._proc = subprocess.Popen([sys.executable, "-m", "otbench.probe.grading._deadline_child"],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, close_fds=True)
        self._pid, self._buf = os.getpid(), b""
        if self._read(time.monotonic() + _STARTUP_S) != ["ready"]:
            self._stop()
            raise OSError("the symbolic-comparison process did not start")

    def _read(self, end: float):
        """The child's next message, or None at the deadline or its end."""
        fd = self._proc.stdout.fileno()
        while b"\n" not in self._buf:
            left = end - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, 65536)
            if not chunk:
                return None
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        try:
            msg = json.loads(line)
        except ValueError:
            return None
        return msg if isinstance(msg, list) and msg else None

    def _stop(self) -> None:
        if self._proc is not None:
            if self._proc.poll() is None:
                self._proc.kill()
            self._proc.wait(5)
            for f in (self._proc.stdin, self._proc.stdout):
                f.close()
        self._proc = None

    def close(self) -> None:
        with self._lock:
            if self._pid == os.getpid():
                self._stop()

    def _wait(self, a: str, b: str, deadline_s: float) -> tuple[bool, str | None]:
        end, parsed = time.monotonic() + deadline_s, 0
        while (msg := self._read(end)) is not None:
            if msg[0] != "parsed":
                return msg[0], msg[1]
            parsed = msg[1]
        dead = self._proc.poll() is not None
        self._stop()
        if dead:
            return False, "the comparison process died"
        if parsed < 2:  # the overrun was one side's parse: that text is not parsed again
            self.costly.add((a, b)[parsed])
            if len(self.costly) > _COSTLY_MAX:
                self.costly.pop()
        return False, f"over the {deadline_s:g} s deadline"

    def call(self, job: str, a: str, b: str, deadline_s: float) -> bool:
        with self._lock:
            if a in self.costly or b in self.costly:
                return False
            if self._pid != os.getpid():  # a forked copy must not share the parent's pipes
                self._proc = None
            try:
                if self._proc is None or self._proc.poll() is not None:
                    self._start()
                self._proc.stdin.write((json.dumps([job, a, b]) + "\n").encode())
                self._proc.stdin.flush()
                ok, reason = self._wait(a, b, deadline_s)
            except OSError as e:  # BrokenPipeError included
                ok, reason = False, f"the comparison process failed ({e})"
                self._stop()
        if reason is not None:
            self.failures[reason] += 1
            _log.warning("symbolic comparison of %.60r and %.60r counted as unequal: %s", a, b, reason)
        return ok


_WORKER = _Worker()
atexit.register(_WORKER.close)


def compare(job: str, a: str, b: str, deadline_s: float = DEADLINE_S) -> bool:
    """The child's `job` on (a, b), False if it overruns `deadline_s` or fails (module docstring)."""
    return _WORKER.call(job, a, b, deadline_s)


def failures() -> dict[str, int]:
    """How many comparisons in this process were counted unequal, by reason (deadline, memory, ...)."""
    return dict(_WORKER.failures)
