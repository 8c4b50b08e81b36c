"""`otbench metrics`: the overthinking metrics of a measurement set (SPEC §4)."""

import json
from pathlib import Path

import click


@click.command("metrics")
@click.argument("directory", type=click.Path(path_type=Path))
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path),
              default=None, help="Also write the full result as JSON (fractions, not %).")
def metrics_cmd(directory: Path, json_out: Path | None) -> None:
    """Print OR / AD / accuracy tables of the measurement set in DIRECTORY."""
    # Lazy: JAX loads only when the command runs, not for `otbench --help`.
    from otbench.analysis._build import MeasurementSetError
    from otbench.analysis._io import load
    from otbench.analysis._metrics import format_metrics, metrics

    try:
        ms = load(directory)
        result = metrics(ms)   # raises ValueError only for a set without rows
    except (MeasurementSetError, ValueError) as e:
        # One line naming the file and the rule; a traceback adds nothing.
        click.echo("Error: " + " ".join(str(e).split()), err=True)
        raise click.exceptions.Exit(2) from None
    click.echo(format_metrics(result), nl=False)
    if json_out is not None:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        with open(json_out, "w", encoding="utf-8") as f:
            # allow_nan=False: a NaN that escaped the null conversion is a bug.
            json.dump(result, f, indent=2, sort_keys=True, allow_nan=False)
            f.write("\n")
        click.echo(f"wrote {json_out}")
