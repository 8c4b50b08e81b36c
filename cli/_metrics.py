"""`otbench metrics`: the overthinking metrics of a measurement set (SPEC §4)."""

from pathlib import Path

import click

from ._common import data_errors, write_json


@click.command("metrics")
@click.argument("directory", type=click.Path(path_type=Path))
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path),
              default=None, help="Also write the full result as JSON (fractions, not %).")
def metrics_cmd(directory: Path, json_out: Path | None) -> None:
    """Print OR / AD / accuracy tables of the measurement set in DIRECTORY."""
    # Lazy: JAX loads only when the command runs, not for `otbench --help`.
    from otbench.analysis.measurement import load
    from otbench.analysis.overthinking import format_metrics, metrics

    with data_errors(ValueError):  # ValueError: a set without rows
        ms = load(directory)
        result = metrics(ms)
    click.echo(format_metrics(result), nl=False)
    if json_out is not None:
        write_json(result, json_out, of=ms)
        click.echo(f"wrote {json_out}")
