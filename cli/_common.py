"""Shared CLI plumbing: turn data errors into one-line messages with exit status 2."""

import contextlib
import json
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
        raise DataError(prefix + " ".join(str(e).split())) from None


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


def write_json(obj, path) -> None:
    """Write JSON atomically (indent 2, sorted keys; NaN is a bug, so it raises)."""
    from otbench.analysis.measurement import write_text_atomic

    text = json.dumps(obj, indent=2, sort_keys=True, allow_nan=False, ensure_ascii=False)
    write_text_atomic(path, text + "\n")


RESULTS_DIR = "results"


def result_path(directory, name: str, override=None):
    """Where a command writes its result: `--json` when given, else DIRECTORY/results/<name>.

    One layout for every analysis command, the one `otbench report DIRECTORY`
    reads (`otbench.analysis.report` looks in DIRECTORY/results/).
    """
    from pathlib import Path

    return Path(override) if override is not None else Path(directory) / RESULTS_DIR / name


def write_result(doc: dict, directory, name: str, override=None):
    """Write `doc` with the set's content hash inside to `result_path(...)`; returns the path.

    The hash (`content_hash`, from the set's manifest, which `load` has
    checked) binds the result to the exact data it was computed from.
    """
    from otbench.analysis.measurement import read_manifest

    path = result_path(directory, name, override)
    path.parent.mkdir(parents=True, exist_ok=True)
    with data_errors():
        content = read_manifest(directory)["content_hash"]
    write_json({**doc, "content_hash": content}, path)
    return path


def synthetic_banner(synthetic: bool) -> str:
    return "SYNTHETIC DATA (simulated, not model outputs)\n" if synthetic else ""
