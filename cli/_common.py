"""Shared CLI plumbing: turn data errors into one-line messages with exit status 2."""

import contextlib
import json
import os
import sys
import uuid
from pathlib import Path

import click


class DataError(click.ClickException):
    """A bad-input error: printed as one line (no `Error:` prefix, no traceback), exit 2."""

    exit_code = 2

    def show(self, file=None) -> None:
        click.echo(self.format_message(), file=file or sys.stderr)


@contextlib.contextmanager
def data_errors():
    """Convert `MeasurementSetError` (and missing files) raised inside into `DataError`."""
    from otbench.analysis import MeasurementSetError

    try:
        yield
    except MeasurementSetError as e:
        raise DataError(str(e)) from None
    except FileExistsError as e:
        raise DataError(str(e)) from None


def load_set(path: str):
    """Load a measurement set or exit 2 with the loader's one-line message."""
    from otbench.analysis import load

    with data_errors():
        return load(path)


def write_json(obj, path: str) -> None:
    """Write JSON atomically (indent 2, sorted keys, no NaN)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.parent / f".{p.name}.tmp-{uuid.uuid4().hex}"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(obj, f, indent=2, sort_keys=True, allow_nan=False, ensure_ascii=False)
            f.write("\n")
        os.replace(tmp, p)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def synthetic_banner(synthetic: bool) -> str:
    return "SYNTHETIC DATA (simulated, not model outputs)\n" if synthetic else ""
