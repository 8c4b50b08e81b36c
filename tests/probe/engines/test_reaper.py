"""The engine watchdog (issue 39): a parent killed with SIGKILL leaves no engine process behind.

A real parent process starts the watchdog, then children the way vLLM starts its engine core (a
spawned multiprocessing child; one more that ignores SIGTERM, as a busy engine may); the parent is
killed with SIGKILL, and the children must be gone within the watchdog's interval and grace.
"""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the watchdog reads /proc")

PARENT = textwrap.dedent("""
    import multiprocessing as mp, signal, sys, time
    from otbench.probe.engines._reaper import watch_descendants

    def engine(stubborn):
        if stubborn:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        time.sleep(120)

    if __name__ == "__main__":
        dog = watch_descendants(interval=0.2, grace=1.0)
        ctx = mp.get_context("spawn")
        kids = [ctx.Process(target=engine, args=(s,)) for s in (False, True)]
        for k in kids:
            k.start()
        time.sleep(1.0)                        # the watchdog has seen them
        print(dog.pid, *[k.pid for k in kids], flush=True)
        time.sleep(120)
""")


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rsplit(b")", 1)[1].split()[0]
    except OSError:
        return False
    return state != b"Z"


def test_children_of_a_killed_parent_are_ended(tmp_path):
    script = tmp_path / "parent.py"
    script.write_text(PARENT)
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        dog, *kids = (int(x) for x in parent.stdout.readline().split())
        assert all(_alive(p) for p in [dog, *kids])
        parent.send_signal(signal.SIGKILL)
        parent.wait(10)
        end = time.monotonic() + 15
        while any(_alive(p) for p in kids) and time.monotonic() < end:
            time.sleep(0.1)
        assert not [p for p in kids if _alive(p)], "engine-like children outlived their killed parent"
        while _alive(dog) and time.monotonic() < end:
            time.sleep(0.1)
        assert not _alive(dog)
    finally:
        parent.kill()
        for p in locals().get("kids", []):
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass


def test_one_watchdog_per_process():
    from otbench.probe.engines._reaper import watch_descendants

    code = ("from otbench.probe.engines._reaper import watch_descendants as w\n"
            "a = w(); b = w(); print(a is not None, b is None)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["True", "True"], out.stderr
    assert callable(watch_descendants)
