"""Shared CLI plumbing: turn data errors into one-line messages with exit status 2."""

import contextlib
import json
import os
import sys

import click


class DataError(click.ClickException):
    """A bad-input error: printed as one line (no `Error:` prefix, no traceback), exit 2."""

    exit_code = 2

    def show(self, file=None) -> None:
        click.echo(self.format_message(), file=file or sys.stderr)


@contextlib.contextmanager
def data_errors(*also: type[Exception], prefix: str = ""):
    """The CLI's one error path: `MeasurementSetError`, `FileExistsError` and `also` become `DataError`.

    The message is folded onto one line: it names the file, row and rule, and
    a traceback would add nothing for a bad input. Data errors start with the
    file they name; argument errors (an `_iv` validator's `ValueError`) are
    shown with `prefix="Error: "`.
    """
    from otbench.analysis.measurement import MeasurementSetError

    try:
        yield
    except (MeasurementSetError, FileExistsError, *also) as e:
        raise DataError(prefix + one_line(e)) from None


def one_line(e: BaseException) -> str:
    """The message of `e` on one line; an OS error reads `PATH: reason` like a data error."""
    if isinstance(e, OSError) and e.strerror and e.filename is not None:
        return " ".join(f"{e.filename}: {e.strerror.lower()}".split())
    return " ".join(str(e).split())


class GuardedGroup(click.Group):
    """The command group: errors of the file system and of the data that escape a command
    (a read-only target, a refused output, a full disk) still end as one line, exit 2."""

    def invoke(self, ctx):
        from otbench.analysis.measurement import MeasurementSetError

        try:
            return super().invoke(ctx)
        except (MeasurementSetError, OSError) as e:
            raise DataError(one_line(e)) from None


def argument_errors(*also: type[Exception]):
    """`data_errors` for commands whose validators raise `ValueError`: `Error: <rule>`, exit 2."""
    return data_errors(ValueError, *also, prefix="Error: ")


def progress_bar(total: int, label: str):
    """A progress bar on stderr when it is a terminal, else a null context yielding None."""
    if not sys.stderr.isatty():
        return contextlib.nullcontext(None)
    return click.progressbar(length=total, label=label, file=sys.stderr, show_eta=True,
                             show_pos=True)


def progress_callback(bar):
    """`progress(done)` for long library calls that advances `bar` (None: no bar)."""
    state = {"done": 0}

    def update(done: int) -> None:
        if bar is not None:
            bar.update(done - state["done"])
        state["done"] = done

    return update


def load_set(path: str):
    """Load a measurement set or exit 2 with the loader's one-line message."""
    from otbench.analysis import load

    with data_errors():
        return load(path)


def write_json(obj, path, *, of=None) -> None:
    """Write JSON atomically (indent 2, sorted keys; NaN is a bug, so it raises).

    `of`: the measurement set a result was computed from; its content hash is
    recorded as `content_hash`, which binds the result to that set (the
    report refuses a result of another set).
    """
    from otbench.analysis.measurement import content_hash, write_text_atomic

    if of is not None and isinstance(obj, dict):
        obj = {**obj, "content_hash": content_hash(of)}
    text = json.dumps(obj, indent=2, sort_keys=True, allow_nan=False, ensure_ascii=False)
    write_text_atomic(path, text + "\n")


def synthetic_banner(synthetic: bool) -> str:
    return "SYNTHETIC DATA (simulated, not model outputs)\n" if synthetic else ""


def available_memory() -> int | None:
    """Bytes of memory available now (MemAvailable), or None where it cannot be read."""
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


def frontier_state_bytes(ms) -> tuple[int, str]:
    """The largest per-cell frontier DP state (bytes) and the cell it belongs to.

    The exact DP's state spans every attainable reward of a cell: one int32
    entry per probe of each trajectory, rounded up to a power of two
    (`analysis/frontier/_dp.py`, cost model). It dominates the frontier's
    memory, so it is what is estimated before anything is allocated.
    """
    import numpy as np

    per_cell = np.bincount(ms.cell, weights=ms.probes.astype(np.float64), minlength=ms.num_cells)
    c = int(np.argmax(per_cell))
    entries = 1 << int(per_cell[c] + 1).bit_length()
    m, g = ms.cell_name(c)
    return 4 * entries, f"{m}/{g}"


def memory_guard(ms, what: str, copies: int = 1) -> None:
    """Refuse, with the numbers, a frontier computation whose state exceeds available memory."""
    state, cell = frontier_state_bytes(ms)
    need, avail = state * max(int(copies), 1), available_memory()
    if avail is not None and need > avail:
        gib = 1 << 30
        per = f" x {copies} replicates in flight (--batch)" if copies > 1 else ""
        raise DataError(f"{what}: needs about {need / gib:.1f} GiB for the frontier state of cell "
                        f"{cell} ({state / gib:.2f} GiB{per}), but {avail / gib:.1f} GiB is "
                        f"available; use a set with fewer probes or trajectories per cell"
                        + (", or a smaller --batch" if copies > 1 else ""))
