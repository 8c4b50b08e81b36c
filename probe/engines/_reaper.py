"""A watchdog that ends an engine's processes when the otbench process dies without closing them.

vLLM runs its engine core (and, with several devices, its workers) in child
processes that outlive a parent killed with SIGKILL or by the OOM killer:
nothing in the parent runs then, so `Engine.close()` never does, and each
orphan keeps its model and KV cache (~3.5 GB for the demo's model on a CPU,
a GPU's memory on a GPU node) until someone finds it. The watchdog is a
small separate process started before the engine (`watch_descendants`): it
asks the kernel to signal it when its parent dies (``PR_SET_PDEATHSIG``), and
every `INTERVAL` seconds records the parent's live descendants with their
start times; once the parent is gone it sends SIGTERM, then SIGKILL after
`GRACE` seconds, to each recorded process still alive *with the same start
time* (a reused PID is never touched), and exits. A normal exit of the parent
closes its engine first, so the watchdog finds nothing left to end.
Linux only (``/proc``); elsewhere it is not started.
"""

import os
import subprocess
import sys

INTERVAL = 1.0
GRACE = 5.0

_started: set[int] = set()        # parent pids that have a watchdog (one per process)

# The watchdog's own code, run by a fresh interpreter (no fork of a threaded process).
_WATCHDOG = r"""
import ctypes, os, signal, sys, time
parent, interval, grace = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
me = os.getpid()
try:
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGUSR1, 0, 0, 0)   # PR_SET_PDEATHSIG
except Exception:
    pass
gone = False
def _dead(*_):
    global gone
    gone = True
signal.signal(signal.SIGUSR1, _dead)
signal.signal(signal.SIGINT, signal.SIG_IGN)       # a Ctrl-C to the terminal's group is the parent's

def stat(pid):
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            s = f.read().decode("ascii", "replace")
    except OSError:
        return None
    rest = s[s.rindex(")") + 2:].split()
    return int(rest[1]), rest[19]                   # ppid, start time (clock ticks since boot)

def descendants(root):
    kids = {}
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) not in (me, root):
            st = stat(int(name))
            if st is not None:
                kids.setdefault(st[0], []).append((int(name), st[1]))
    out, todo = {}, [root]
    while todo:
        for pid, start in kids.get(todo.pop(), ()):
            if pid not in out:
                out[pid] = start
                todo.append(pid)
    return out

seen = {}
while not gone and os.getppid() == parent:
    seen = descendants(parent)
    time.sleep(interval)
live = lambda: {p: s for p, s in seen.items() if (stat(p) or (None, None))[1] == s}
for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 0.0)):
    for pid in live():
        try:
            os.kill(pid, sig)
        except OSError:
            pass
    end = time.monotonic() + wait
    while live() and time.monotonic() < end:
        time.sleep(0.1)
"""


def watch_descendants(interval: float = INTERVAL, grace: float = GRACE) -> subprocess.Popen | None:
    """Start the watchdog of this process's descendants (module docstring), once per process.

    Returns the watchdog's `Popen` (None where it is not started: not Linux, or already running).
    """
    me = os.getpid()
    if not sys.platform.startswith("linux") or not os.path.isdir("/proc") or me in _started:
        return None
    proc = subprocess.Popen([sys.executable, "-S", "-c", _WATCHDOG, str(me), str(interval), str(grace)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, close_fds=True)
    _started.add(me)
    return proc
