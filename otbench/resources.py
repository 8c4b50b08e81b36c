"""Memory and time estimated from a call's arguments before anything is allocated.

A number a user types (`--grid`, `--draws`, `--theta-grid`, `--replicates`,
`--batch`) sizes arrays and loops. Each library entry point that takes one
states a linear cost model of it, `fixed + per_unit * value` bytes and
`per_unit_ops * value` element operations, and calls `check_budget` before
its first allocation. A call over budget is refused with the estimate, what
is available and the largest value that fits, never started and killed by
the operating system minutes later.

Available memory is the least of: the system's `MemAvailable`, the room left
under this process's address-space limit (`RLIMIT_AS`, what `ulimit -v` sets),
and the room left in its cgroup (`memory.max - memory.current`). Time is a
bound in element operations (`MAX_OPS`, about an hour at `OPS_PER_SECOND`);
the model counts the work of the inner loops, so a refused call would have
run for at least that long on a fast machine.

This module imports nothing beyond the standard library (no JAX, no NumPy),
so the measurement contract and the probe may use it too.
"""

from __future__ import annotations

import contextlib
import os

from .errors import ResourceLimitError

GIB = 1 << 30
OPS_PER_SECOND = 1e9
"""Element operations per second assumed by the time bound (a fast core; the
kernels run fewer, so a refused call is slower than the message says)."""
MAX_OPS = 3600 * OPS_PER_SECOND
"""The time bound: about an hour of element operations at `OPS_PER_SECOND`."""
HEADROOM = 0.8
"""Fraction of the available memory a call may plan to use (the rest is the
interpreter, JAX's own buffers and the estimate's error)."""


def _meminfo() -> int | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, AttributeError):
        return None


def _address_space_room() -> int | None:
    """Bytes left under RLIMIT_AS (limit minus this process's virtual size), None if unlimited."""
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    except (ImportError, OSError, ValueError):
        return None
    if soft == resource.RLIM_INFINITY or soft < 0:
        return None
    size = 0
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmSize:"):
                    size = int(line.split()[1]) * 1024
                    break
    except (OSError, ValueError, IndexError):
        pass
    return max(soft - size, 0)


def _cgroup_room() -> int | None:
    """Bytes left in this process's cgroup v2 (memory.max - memory.current), None if unbounded."""
    try:
        with open("/proc/self/cgroup") as f:
            rel = next((ln.split(":", 2)[2].strip() for ln in f if ln.startswith("0::")), None)
        if rel is None:
            return None
        base = os.path.join("/sys/fs/cgroup", rel.lstrip("/"))
        with open(os.path.join(base, "memory.max")) as f:
            limit = f.read().strip()
        if limit == "max":
            return None
        with open(os.path.join(base, "memory.current")) as f:
            current = int(f.read().strip())
        return max(int(limit) - current, 0)
    except (OSError, ValueError, StopIteration):
        return None


def available_memory() -> int | None:
    """Bytes this process can still allocate: the least of the system, RLIMIT_AS and cgroup room."""
    known = [x for x in (_meminfo(), _address_space_room(), _cgroup_room()) if x is not None]
    return min(known) if known else None


def _num(x: float) -> str:
    return f"{int(x):,}"


def check_budget(what: str, name: str, value: int, *, per_unit: float, fixed: float = 0,
                 per_unit_ops: float = 0, fixed_ops: float = 0, minimum: int = 1, unit: str = "unit",
                 available: int | None = None, advice: str = "") -> None:
    """Refuse `value` of argument `name` when `fixed + per_unit * value` bytes do not fit.

    Args:
      what: the computation, for the message (e.g. "frontiers of 24 cells").
      name: the argument as the caller knows it (e.g. "`grid`").
      value: its value (a count).
      per_unit, fixed: the memory model in bytes.
      per_unit_ops, fixed_ops: the time model in element operations (0: no bound).
      unit: what one step of `value` counts, for the message (e.g. "draw").
      minimum: the argument's smallest legal value (the largest accepted is
        reported only when it is at least this).
      available: bytes available (default `available_memory()`; where that
        is unknown the memory bound is skipped).
      advice: appended to the message (e.g. "or use a smaller --batch").

    Raises:
      ResourceLimitError: one line with the estimate, the limit and the
      largest value that fits.
    """
    value = int(value)
    room = available_memory() if available is None else available
    largest, reasons = None, []
    if room is not None:
        budget = HEADROOM * room
        need = fixed + per_unit * value
        fit = int((budget - fixed) // per_unit) if per_unit > 0 else None
        if need > budget:
            reasons.append(f"about {need / GIB:.1f} GiB of memory ({_num(per_unit)} bytes per "
                           f"{unit}), but {room / GIB:.1f} GiB is available (a plan may use "
                           f"{HEADROOM:.0%})")
        largest = fit
    if per_unit_ops > 0:
        ops = fixed_ops + per_unit_ops * value
        fit = int((MAX_OPS - fixed_ops) // per_unit_ops)
        if ops > MAX_OPS:
            reasons.append(f"about {ops:.1e} element operations (over "
                           f"{ops / OPS_PER_SECOND / 3600:,.1f} h at {OPS_PER_SECOND:.0e}/s; "
                           f"the bound is 1 h)")
        largest = fit if largest is None else min(largest, fit)
    if not reasons:
        return
    if largest is not None and largest >= minimum:
        fit = f"the largest accepted {name} here is {_num(largest)}"
    else:
        fit = f"no {name} fits (the rest of the computation alone needs about {fixed / GIB:.1f} GiB)"
    raise ResourceLimitError(f"{what}: {name} = {_num(value)} needs {' and '.join(reasons)}; "
                             f"{fit}" + (f"; {advice}" if advice else ""))


MAX_WORKERS = 4096
"""The most worker processes a call may ask for: more than the cores of any one machine or the
engines of a cluster a run would use; a larger count is a typo, refused whether or not the
call would start that many."""


def check_workers(what: str, name: str, value: int, *, per_worker: float = 0,
                  started: int | None = None, advice: str = "") -> None:
    """Refuse `value` worker processes of argument `name`: over `MAX_WORKERS`, or (`per_worker`
    bytes each) the `started` of them (default all) that this call starts over the memory budget.

    `advice` is appended to a refusal of the memory budget (e.g. "or name a Ray cluster").

    Raises:
      ResourceLimitError: one line naming `name`, its value and the bound.
    """
    value = int(value)
    if value > MAX_WORKERS:
        raise ResourceLimitError(f"{what}: {name} = {_num(value)} worker processes; at most "
                                 f"{_num(MAX_WORKERS)} are accepted (more than any machine's "
                                 f"cores)")
    started = value if started is None else int(started)
    if per_worker > 0 and started > 1:
        check_budget(what, name, started, per_unit=per_worker, unit="worker", advice=advice)


__all__ = ["GIB", "HEADROOM", "MAX_OPS", "MAX_WORKERS", "OPS_PER_SECOND", "ResourceLimitError",
           "available_memory", "check_budget", "check_workers"]


@contextlib.contextmanager
def reuse_freed_memory():
    """Within the block, freed heap memory stays in the process for its next arrays (glibc only).

    glibc serves each large array from a fresh `mmap` and returns it to the
    system when freed, and trims the heap's top likewise, so a command that
    builds and drops arrays of tens of MB (loading a set: ragged columns,
    their padded copies, per-cell copies) faults every page in again. On the
    project's virtual machines those faults were a third of `otbench
    frontier`'s CPU time on a paper-scale set (1.1 s of 3.5 s). Serving
    large arrays from the heap and not trimming it reuses the pages already
    touched; the peak stays what the command needs (freed memory is reused,
    not added). On exit glibc's defaults are restored and the free memory is
    returned (`malloc_trim`), so a caller running commands in-process keeps
    its allocator as it was. Elsewhere (no glibc) the block runs unchanged.
    """
    libc = _glibc()
    if libc is None:
        yield
        return
    M_TRIM_THRESHOLD, M_MMAP_MAX = -1, -4
    libc.mallopt(M_TRIM_THRESHOLD, 2 ** 31 - 1)
    libc.mallopt(M_MMAP_MAX, 0)
    try:
        yield
    finally:
        libc.mallopt(M_MMAP_MAX, 65536)          # glibc's defaults
        libc.mallopt(M_TRIM_THRESHOLD, 128 * 1024)
        libc.malloc_trim(0)


def _glibc():
    import ctypes
    import sys

    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None)
        libc.mallopt, libc.malloc_trim       # noqa: B018 - glibc has both, musl neither
    except (OSError, AttributeError):
        return None
    return libc
