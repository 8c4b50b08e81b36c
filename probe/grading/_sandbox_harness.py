"""Test runner executed INSIDE the bubblewrap sandbox (standalone: stdlib only, no otbench import).

It is copied into the sandbox's read-only box directory and started as
`python -I -S -B -X utf8 /box/harness.py`. It compiles `/box/solution.py` once,
then runs each test in a forked child with per-test limits and streams one
frame per test to its stdout, which the host reads:

    {"test": i, "kind": "exit"|"signal"|"timeout"|"memory"|"output_limit",
     "code": int, "nbytes": N}\n  followed by exactly N raw bytes of output

Each test's program runs as LiveCodeBench runs it: in a namespace holding
LiveCodeBench's import block (`_prelude`), with its recursion and int-digit
limits; stdin/stdout programs as `__main__` (a `SystemExit` of any code ends
the program normally), functional tests by calling `Solution().<fn_name>`
(or the module-level function) with one JSON argument per input line.

The host (probe/_sandbox.py) compares outputs itself and kills the sandbox at
the first failure, so this script never decides correctness. A first frame
`{"ready": true}` tells the host the sandbox started (absence = sandbox_error).

Threat model: this file contains the host from damage only together with the
sandbox around it (namespaces, read-only binds, rlimits); it does not try to
stop a program written to forge the frame protocol (a model's code does not
know it, and forging it could only change that program's own grade).
"""

import json
import os
import resource
import select
import signal
import sys
import time

# Exit codes the child uses to tell the harness how the program ended. A
# program could exit with these codes itself; that can only mislabel the
# status of a failing test (both are wrong), never turn a failure into a pass,
# because a pass also needs the expected output.
_EXIT_EXCEPTION = 101
_EXIT_MEMORY = 102
_EXIT_NO_FUNCTION = 103

# LiveCodeBench's grader runs every program after a fixed block of imports
# and a raised recursion limit (lcb_runner/evaluation/testing_util.py); the
# same names are made available here, so a solution that relies on them
# (`List` without `from typing import List`, `deque` without an import)
# behaves as it does there. First the star-imports, in LiveCodeBench's order
# (later ones win: `builtins` restores `open` after `io`), then the modules
# themselves bound by name (so `datetime` is the module, not the class).
LCB_STAR_IMPORTS = ("string", "re", "datetime", "collections", "heapq", "bisect", "copy", "math",
                    "random", "statistics", "itertools", "functools", "operator", "io", "sys",
                    "json", "builtins", "typing")
LCB_MODULES = ("string", "re", "datetime", "collections", "heapq", "bisect", "copy", "math",
               "random", "statistics", "itertools", "functools", "operator", "io", "sys", "json")
LCB_RECURSION_LIMIT = 50000
# LiveCodeBench's metric module raises the int->str digit limit in the
# process that runs the programs.
LCB_INT_MAX_STR_DIGITS = 50000


def _prelude(ns: dict) -> dict:
    """Fill `ns` as LiveCodeBench's import block would, and raise the interpreter limits."""
    import importlib

    for name in LCB_STAR_IMPORTS:
        mod = importlib.import_module(name)
        public = getattr(mod, "__all__", None)
        if public is None:
            public = [n for n in dir(mod) if not n.startswith("_")]
        for n in public:
            if hasattr(mod, n):
                ns[n] = getattr(mod, n)
    for name in LCB_MODULES:
        ns[name] = importlib.import_module(name)
    sys.setrecursionlimit(LCB_RECURSION_LIMIT)
    if hasattr(sys, "set_int_max_str_digits"):
        sys.set_int_max_str_digits(LCB_INT_MAX_STR_DIGITS)
    return ns


def _frame(out, header: dict, payload: bytes = b"") -> None:
    header = dict(header, nbytes=len(payload))
    out.write(json.dumps(header).encode() + b"\n" + payload)
    out.flush()


def _child(spec: dict, code_obj, index: int, out_path: str) -> None:
    """Run one test in this forked child; never returns."""
    try:
        os.setpgid(0, 0)
        # The harness is not dumpable (its frame pipe stays private); the
        # test's own process is, so the program may read its /proc/self.
        try:
            import ctypes

            ctypes.CDLL(None).prctl(4, 1, 0, 0, 0)  # PR_SET_DUMPABLE = 4
        except Exception:
            pass
        lim = spec["limits"]
        cpu = int(lim["cpu_s"])
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
        resource.setrlimit(resource.RLIMIT_AS, (lim["memory_bytes"], lim["memory_bytes"]))
        resource.setrlimit(resource.RLIMIT_FSIZE, (lim["output_bytes"] + 1, lim["output_bytes"] + 1))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        stdin_fd = os.open(f"/box/in/{index}", os.O_RDONLY)
        os.dup2(stdin_fd, 0)
        os.close(stdin_fd)
        out_fd = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        null_fd = os.open("/dev/null", os.O_WRONLY)
        functional = spec["mode"] == "functional"
        # Stdin/stdout tests: the program's stdout is the answer. Functional
        # tests: the return value is the answer; prints go to /dev/null.
        os.dup2(null_fd if functional else out_fd, 1)
        os.dup2(null_fd, 2)
        os.close(null_fd)
        # Close every other inherited descriptor (the frame pipe above all);
        # functional tests keep `out_fd` for the return value.
        if functional:
            os.closerange(3, out_fd)
            os.closerange(out_fd + 1, 1 << 16)
        else:
            os.closerange(3, 1 << 16)
        sys.stdin = open(0, "r", encoding="utf-8", closefd=False)
        sys.stdout = open(1, "w", encoding="utf-8", closefd=False)
        sys.stderr = open(2, "w", encoding="utf-8", closefd=False)
    except BaseException:
        os._exit(_EXIT_EXCEPTION)
    try:
        # After the stdio set-up, so `stdin` / `stdout` from `sys` are the test's.
        ns = _prelude({"__name__": "solution" if functional else "__main__",
                       "__builtins__": __builtins__})
        if not functional:
            exec(code_obj, ns)
            sys.stdout.flush()
            os._exit(0)
        exec(code_obj, ns)
        name = spec["fn_name"]
        target = None
        if isinstance(ns.get("Solution"), type):
            target = getattr(ns["Solution"](), name, None)
        if target is None:
            target = ns.get(name)
        if not callable(target):
            os._exit(_EXIT_NO_FUNCTION)
        with open(f"/box/in/{index}", encoding="utf-8") as f:
            args = [json.loads(line) for line in f.read().split("\n") if line.strip()]
        result = target(*args)
        text = json.dumps(result)
        os.write(out_fd, text.encode())
        os._exit(0)
    except SystemExit:
        # Stdin/stdout tests: LiveCodeBench swallows SystemExit whatever its
        # code and compares what was printed. Functional tests: leaving
        # before returning a value is an error.
        if not functional:
            sys.stdout.flush()
            os._exit(0)
        os._exit(_EXIT_EXCEPTION)
    except MemoryError:
        os._exit(_EXIT_MEMORY)
    except BaseException:
        os._exit(_EXIT_EXCEPTION)


def _end_leftovers(pid: int) -> None:
    """Kill what the test left running and reap it, so nothing leaks into the next test.

    As the box's PID 1 (bwrap --as-pid-1) the harness signals every other
    process in the box (kill(-1) spares the caller) and reaps them all,
    orphans included; otherwise only the test's process group.
    """
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass
    if os.getpid() != 1:
        return
    try:
        os.kill(-1, signal.SIGKILL)
    except OSError:
        pass
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return
        except InterruptedError:
            continue


def main() -> None:
    # `-S` skips `site`, which is what defines the `exit()` / `quit()` builtins
    # that contest solutions often call.
    import builtins

    builtins.exit = builtins.quit = sys.exit
    out = os.fdopen(os.dup(1), "wb")
    devnull = os.open("/dev/null", os.O_WRONLY)
    os.dup2(devnull, 1)
    # Non-dumpable: the program (same uid) cannot open /proc/<harness>/fd/*.
    try:
        import ctypes

        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 4
    except Exception:
        pass
    with open("/box/spec.json", encoding="utf-8") as f:
        spec = json.load(f)
    lim = spec["limits"]
    resource.setrlimit(resource.RLIMIT_NPROC, (lim["processes"], lim["processes"]))
    with open("/box/solution.py", encoding="utf-8") as f:
        source = f.read()
    _frame(out, {"ready": True})
    try:
        code_obj = compile(source, "solution.py", "exec")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        # The host compiled it; an older interpreter in here may not.
        _frame(out, {"test": 0, "kind": "exit", "code": _EXIT_EXCEPTION})
        return
    # Import the block's modules once here; each test's child then only binds names.
    for name in {*LCB_STAR_IMPORTS, *LCB_MODULES}:
        __import__(name)
    out_path = "/tmp/.otbench-out"
    for i in range(spec["tests"]):
        start = time.monotonic()
        pid = os.fork()
        if pid == 0:
            _child(spec, code_obj, i, out_path)
        pidfd = os.pidfd_open(pid)
        ready, _, _ = select.select([pidfd], [], [], lim["wall_s"])
        if not ready:
            try:
                os.killpg(pid, signal.SIGKILL)
            except OSError:
                pass
            os.waitpid(pid, 0)
            _frame(out, {"test": i, "kind": "timeout", "code": -9})
            return
        _, status = os.waitpid(pid, 0)
        os.close(pidfd)
        # Leftover processes the program started must not leak into the next test.
        _end_leftovers(pid)
        if os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            kind = {signal.SIGXCPU: "timeout", signal.SIGXFSZ: "output_limit"}.get(sig, "signal")
            if sig == signal.SIGKILL and time.monotonic() - start >= lim["cpu_s"]:
                kind = "timeout"  # the hard CPU limit ends with SIGKILL
            _frame(out, {"test": i, "kind": kind, "code": -sig})
            return
        code = os.WEXITSTATUS(status)
        if code == _EXIT_MEMORY:
            _frame(out, {"test": i, "kind": "memory", "code": code})
            return
        size = os.path.getsize(out_path) if os.path.exists(out_path) else 0
        if size > lim["output_bytes"]:
            _frame(out, {"test": i, "kind": "output_limit", "code": code})
            return
        payload = b""
        if size:
            with open(out_path, "rb") as f:
                payload = f.read(lim["output_bytes"] + 1)
        os.unlink(out_path) if os.path.exists(out_path) else None
        _frame(out, {"test": i, "kind": "exit", "code": code}, payload)
        if code != 0:
            return


if __name__ == "__main__":
    main()
