"""`otbench metrics`: the overthinking metrics of a measurement set (docs/rules.md)."""

from pathlib import Path

import click

from ._common import data_errors, write_result


@click.command("metrics")
@click.argument("directory", type=click.Path(path_type=Path))
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path),
              default=None, help="Where to write the otbench.metrics/1 document (fractions, "
                                 "not %; default DIRECTORY/results/metrics.json).")
def metrics_cmd(directory: Path, json_out: Path | None) -> None:
    """Print OR / AD / accuracy tables of the measurement set in DIRECTORY."""
    # Lazy: JAX loads only when the command runs, not for `otbench --help`.
    from otbench.analysis.measurement import load
    from otbench.analysis.overthinking import format_metrics, metrics

    with data_errors(ValueError):  # ValueError: a set without rows
        ms = load(directory)
        result = metrics(ms)
    click.echo(format_metrics(result), nl=False)
    click.echo(f"wrote {write_result(result, directory, 'metrics.json', json_out)}")
