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
def data_errors(*also: type[Exception]):
    """Turn `MeasurementSetError`, `FileExistsError` and `also` raised inside into `DataError`.

    The message is folded onto one line: it names the file, row and rule, and
    a traceback would add nothing for a bad input.
    """
    from otbench.analysis import MeasurementSetError

    try:
        yield
    except (MeasurementSetError, FileExistsError, *also) as e:
        raise DataError(" ".join(str(e).split())) from None


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


def synthetic_banner(synthetic: bool) -> str:
    return "SYNTHETIC DATA (simulated, not model outputs)\n" if synthetic else ""
