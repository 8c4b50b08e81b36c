"""The child process of `_deadline`: symbolic comparisons of two texts, one JSON line each.

Started as ``python -m otbench.probe.grading._deadline_child`` by `_deadline._Worker`; reads
``[job, a, b]`` lines on stdin and answers ``["parsed", k]`` as each side is parsed, then
``[equal, reason]``. Its address space is capped at `_deadline.MEMORY_BYTES`.
"""

from otbench.probe.grading._deadline import MEMORY_BYTES


def serve() -> None:
    """The child's loop: one JSON request per line on stdin, JSON replies on stdout."""
    import json
    import os
    import resource
    import sys

    from otbench.probe.grading._dynasor_equal import symbolic_equal_here

    jobs = {"dynasor_symbolic": symbolic_equal_here}
    import sympy  # noqa: F401  imported before the deadline clock starts (the ready message)

    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        cap = MEMORY_BYTES if hard == resource.RLIM_INFINITY else min(MEMORY_BYTES, hard)
        resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    except (ValueError, OSError):
        pass
    # The protocol keeps a private copy of stdout; anything a library prints goes to stderr.
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    def send(msg) -> None:
        out.write(json.dumps(msg) + "\n")
        out.flush()

    send(["ready"])
    for line in sys.stdin:
        job, a, b = json.loads(line)
        try:
            send([bool(jobs[job](a, b, lambda k: send(["parsed", k]))), None])
        except MemoryError:
            send([False, "memory limit"])
        except RecursionError:
            send([False, "recursion limit"])


if __name__ == "__main__":
    serve()
