"""Hostile programs are contained by the sandbox and graded wrong; the host is unharmed (SPEC §3.4).

Every hostile action targets only things this test creates (canary files and
directories under pytest's tmp_path, a loopback listener, an environment
variable) and every run is bounded by small time limits. Where a hostile
program would be graded *correct* if the sandbox leaked, the test's expected
output is exactly what a leak would print.
"""

import os
import secrets
import socket
import threading
import time

import pytest
from otbench.probe.grading._grade import GradeConfig, grade
from otbench.probe.grading._sandbox import SandboxLimits, run_tests, sandbox_status
from otbench.probe.grading._types import Status

_WHY = sandbox_status()
pytestmark = pytest.mark.skipif(bool(_WHY) and not os.environ.get("CI"),
                                reason=f"sandbox unavailable here: {_WHY}")

# 256 MiB for each of the program's 7 processes, shared from one box budget. The
# clocks leave room for a loaded two-core CI machine: at 1.5 s, interpreter
# start-up under load once turned a memory verdict into a time limit.
LIMITS = SandboxLimits(wall_s=4.0, cpu_s=4, total_wall_s=20.0, memory_bytes=7 * (256 << 20),
                       processes=8, output_bytes=1 << 20)
CONFIG = GradeConfig(limits=LIMITS)


def run(code: str, expected: str = "42", stdin: str = ""):
    """Grade `code` on one test; also return the wall time it took."""
    t = time.monotonic()
    g = grade("code", "", f"```python\n{code}\n```", tests=[{"input": stdin, "output": expected}],
              config=CONFIG)
    return g, time.monotonic() - t


def _nobody_pids() -> set[int]:
    """Live processes of the sandbox's host uid (65534 when the tests run as root).

    Zombies are not counted: bwrap's init is reaped by whoever adopts it (the
    host's init, or a grading worker, which is a child subreaper).
    """
    pids = set()
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/status") as f:
                    fields = dict(line.split(":", 1) for line in f if ":" in line)
            except OSError:
                continue
            if fields.get("Uid", "").split()[:1] == ["65534"] and not fields["State"].strip().startswith("Z"):
                pids.add(int(d))
    return pids


@pytest.fixture
def no_leftovers():
    """After the test, no sandbox process may survive (checked when running as root)."""
    before = _nobody_pids()
    yield
    if os.geteuid() != 0:
        return
    deadline = time.monotonic() + 3.0
    while _nobody_pids() - before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not (_nobody_pids() - before), "sandbox processes survived the run"


def test_infinite_loop_times_out(no_leftovers):
    g, dt = run("while True:\n    pass")
    assert (g.correct, g.status) == (False, Status.TIMEOUT)
    assert dt < LIMITS.wall_s + 3.0


def test_sleeping_program_hits_wall_clock(no_leftovers):
    # No CPU used: only the wall-clock limit can stop it.
    g, dt = run("import time\ntime.sleep(60)\nprint(42)")
    assert (g.correct, g.status) == (False, Status.TIMEOUT)
    assert dt < LIMITS.wall_s + 3.0


def test_fork_bomb_is_contained(no_leftovers):
    g, dt = run("import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass")
    assert not g.correct and g.status in (Status.TIMEOUT, Status.RUNTIME_ERROR)
    assert dt < LIMITS.wall_s + 3.0


def test_process_count_is_limited(no_leftovers):
    # Forks succeed up to the limit and then fail: the limit, not a ban, stops them.
    code = ("import os, time\nn = 0\nfor _ in range(200):\n    try:\n        pid = os.fork()\n"
            "    except OSError:\n        break\n    if pid == 0:\n        time.sleep(5)\n        os._exit(0)\n"
            "    n += 1\nprint(n)\n")
    r = run_tests(code, [""], mode="stdin", limits=LIMITS)
    assert not r.error and r.outcomes[0].kind == "exit"
    n = int(r.outcomes[0].output)
    assert 0 < n < LIMITS.processes


def test_rm_rf_outside_the_sandbox_leaves_canary(tmp_path, no_leftovers):
    canary = tmp_path / "canary"
    canary.mkdir()
    (canary / "keep.txt").write_text("still here")
    code = (f"import shutil, subprocess\nshutil.rmtree({str(canary)!r}, ignore_errors=True)\n"
            f"subprocess.run(['rm', '-rf', {str(canary)!r}])\n"
            f"open({str(canary / 'keep.txt')!r}, 'w').write('gone')\n")
    g, _ = run(code)
    assert not g.correct and g.status is Status.RUNTIME_ERROR  # the write raised: no such file
    assert (canary / "keep.txt").read_text() == "still here"


def test_writes_to_system_and_box_are_refused(no_leftovers):
    # /usr and the box holding the program are read-only; success would print 42.
    code = ("ok = 0\nfor p in ['/usr/otbench-canary', '/box/solution.py', '/otbench-canary']:\n"
            "    try:\n        open(p, 'w').write('x')\n        ok += 1\n    except OSError:\n        pass\n"
            "print(42 if ok else 0)\n")
    g, _ = run(code)
    assert (g.correct, g.status) == (False, Status.WRONG_ANSWER)
    assert not os.path.exists("/usr/otbench-canary")


def test_ten_gigabyte_allocation_is_refused(no_leftovers):
    # Success would print the length, which is the expected output.
    g, dt = run("x = bytearray(10 * 1024 ** 3)\nprint(len(x))", expected=str(10 * 1024 ** 3))
    assert (g.correct, g.status) == (False, Status.MEMORY_ERROR)
    assert dt < 5.0


# Every process of the program (the main one and 3 forks, the most `processes=5` allows
# besides the harness) grabs 16 MiB blocks until refused, holds them, and reports its total
# through a pipe; the main one prints the sum and how many got a 400 MiB block at once.
_GREEDY = """
import os, time
def grab():
    big = 0
    try:
        x = bytearray(400 << 20)
        big = 1
        del x
    except MemoryError:
        pass
    held = []
    while True:
        try:
            held.append(bytearray(16 << 20))
        except MemoryError:
            return big, len(held) * (16 << 20), held
r, w = os.pipe()
kids = []
for _ in range(3):
    pid = os.fork()
    if pid == 0:
        big, total, held = grab()
        os.write(w, f"{big} {total}\\n".encode())
        time.sleep(1.0)
        os._exit(0)
    kids.append(pid)
big, total, held = grab()
os.close(w)
lines = os.fdopen(r).read().split()
for pid in kids:
    os.waitpid(pid, 0)
nums = [int(x) for x in lines]
print(big + sum(nums[0::2]), total + sum(nums[1::2]), len(kids))
"""


def test_memory_is_bounded_for_the_box_as_a_whole(no_leftovers):
    """4 processes x 400 MiB in a 512 MiB box: none gets its block, and all of them together
    hold at most the box's budget (per-process limits alone would let each take 512 MiB)."""
    limits = SandboxLimits(wall_s=8.0, cpu_s=8, total_wall_s=20.0, memory_bytes=512 << 20,
                           processes=5, output_bytes=1 << 20)
    assert limits.process_memory_bytes == 128 << 20
    r = run_tests(_GREEDY, [""], mode="stdin", limits=limits)
    assert not r.error and r.outcomes and r.outcomes[0].kind == "exit", r
    big, total, kids = (int(x) for x in r.outcomes[0].output.split())
    assert kids == 3 and big == 0
    assert 0 < total <= limits.memory_bytes


def test_growing_memory_is_stopped(no_leftovers):
    g, _ = run("a = []\nwhile True:\n    a.append(bytearray(16 << 20))")
    assert not g.correct and g.status in (Status.MEMORY_ERROR, Status.RUNTIME_ERROR), g


@pytest.fixture
def listener():
    """A loopback TCP listener that records anything that reaches it (bounded lifetime)."""
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    srv.settimeout(0.1)
    got: list[bytes] = []
    stop = threading.Event()

    def serve():
        end = time.monotonic() + 30
        while not stop.is_set() and time.monotonic() < end:
            try:
                conn, _ = srv.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(1)
                try:
                    got.append(conn.recv(1024) or b"<connected>")
                except OSError:
                    got.append(b"<connected>")

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    yield srv.getsockname()[1], got
    stop.set()
    t.join()
    srv.close()


def test_no_network_to_host_loopback(listener, no_leftovers):
    port, got = listener
    code = (f"import socket\ns = socket.create_connection(('127.0.0.1', {port}), timeout=1)\n"
            "s.sendall(b'leak')\nprint('connected')\n")
    g, _ = run(code, expected="connected")
    assert (g.correct, g.status) == (False, Status.RUNTIME_ERROR)
    # UDP too: nothing may arrive; the program reports what it could do.
    code = (f"import socket\nu = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
            f"u.sendto(b'leak', ('127.0.0.1', {port}))\nprint('sent')\n")
    run(code, expected="")
    time.sleep(0.3)
    assert got == []


def test_no_host_abstract_unix_socket(no_leftovers):
    # Abstract unix sockets belong to the network namespace: the host's is unreachable.
    name = f"\0otbench-test-{secrets.token_hex(6)}"
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(name)
    srv.listen(1)
    srv.settimeout(0.5)
    try:
        code = (f"import socket\ns = socket.socket(socket.AF_UNIX)\ns.connect({name!r})\n"
                "print('connected')\n")
        g, _ = run(code, expected="connected")
        assert (g.correct, g.status) == (False, Status.RUNTIME_ERROR)
        with pytest.raises(OSError):
            srv.accept()
    finally:
        srv.close()


def test_home_files_are_unreadable(tmp_path, no_leftovers):
    home = tmp_path / "home"
    home.mkdir()
    secret = secrets.token_hex(16)
    (home / "secret.txt").write_text(secret)
    path = str(home / "secret.txt")
    # Direct path, via host PID 1's root, and via the home directory.
    for code in (f"print(open({path!r}).read())",
                 f"print(open('/proc/1/root' + {path!r}).read())",
                 "import os, glob\nfor p in glob.glob(os.path.expanduser('~') + '/**/secret.txt',"
                 " recursive=True):\n    print(open(p).read())"):
        g, _ = run(code, expected=secret)
        assert not g.correct, code


def test_environment_is_not_inherited(monkeypatch, no_leftovers):
    secret = secrets.token_hex(16)
    monkeypatch.setenv("OTBENCH_TEST_CANARY", secret)
    g, _ = run("import os\nprint(os.environ.get('OTBENCH_TEST_CANARY', 'none'))", expected=secret)
    assert (g.correct, g.status) == (False, Status.WRONG_ANSWER)


# Reads the environment of every process it can see (itself, the harness,
# anything else in /proc) and prints LEAK when the secret is in any of them.
LEAK_PROBE = """import os
found = 'abc123' in repr(dict(os.environ))
for p in os.listdir('/proc'):
    if p.isdigit():
        for part in ('environ', 'cmdline'):
            try:
                found |= b'abc123' in open(f'/proc/{p}/{part}', 'rb').read()
            except OSError:
                pass
print('LEAK' if found else 'SAFE')"""


def test_secret_in_the_graders_environment_does_not_leak(monkeypatch, no_leftovers):
    # The attack: graded correct exactly when the grader's variable is visible.
    monkeypatch.setenv("SECRET_TEST_TOKEN", "abc123")
    g, _ = run(LEAK_PROBE, expected="LEAK")
    assert (g.correct, g.status) == (False, Status.WRONG_ANSWER)
    # control: the probe really ran and saw nothing
    g, _ = run(LEAK_PROBE, expected="SAFE")
    assert g.correct, g


def test_the_harness_survives_a_kill(no_leftovers):
    # The harness is the box's PID 1: a program cannot kill it, so a program
    # that tries is graded on its own output, and the next test still runs.
    code = "import os, signal\nos.kill(1, signal.SIGKILL)\nos.kill(os.getppid(), signal.SIGKILL)\nprint(42)"
    g = grade("code", "", f"```python\n{code}\n```", tests=[{"input": "", "output": "42"}] * 2,
              config=CONFIG)
    assert g.correct, g


def test_output_flood_is_cut(no_leftovers):
    g, dt = run("while True:\n    print('x' * 1000)")
    assert not g.correct and g.status in (Status.OUTPUT_LIMIT, Status.TIMEOUT)
    assert dt < LIMITS.wall_s + 3.0


def test_sandbox_sees_no_host_processes(no_leftovers):
    # Its own PID namespace with the harness as PID 1: the program sees the
    # harness and itself, nothing else.
    code = ("import os\nps = sorted(int(p) for p in os.listdir('/proc') if p.isdigit())\n"
            "print(ps, open('/proc/1/cmdline', 'rb').read().split(b'\\0')[-2].decode())")
    r = run_tests(code, [""], mode="stdin", limits=LIMITS)
    assert not r.error
    assert r.outcomes[0].output.decode().split() == ["[1,", "2]", "/box/harness.py"]
