"""`otbench report`: tables and figures of a measurement set as an HTML report, PNG/PDF/SVG, CSV and LaTeX."""

from pathlib import Path

import click

from ._common import data_errors, synthetic_banner
from ._numbers import Count
from ._tracking import log_options, report_record, track


@click.command("report")
@click.argument("directory", type=click.Path(path_type=Path))
@click.option("--out", "out", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="Report folder (index.html, figures/, tables/). An earlier otbench output "
                   "there is rewritten (only the files otbench's ledger proves it wrote; your "
                   "files stay); any other non-empty folder is refused unless --overwrite; an "
                   "input, or a folder holding one, is refused always.")
@click.option("--bootstrap", "bootstrap", type=click.Path(dir_okay=False, path_type=Path),
              default=None, help="otbench.bootstrap/1 JSON (default: DIR/results/bootstrap.json "
                                 "when present).")
@click.option("--thinning", "thinning", type=click.Path(dir_okay=False, path_type=Path),
              default=None, help="otbench.thinning/1 JSON (default: DIR/results/thinning.json "
                                 "when present).")
@click.option("--otbench", "otbench", type=click.Path(dir_okay=False, path_type=Path),
              multiple=True, help="OTBench JSON (otbench.bench/1 or bench-compare/1); repeatable "
                                  "(default: DIR/results/otbench.json and bench-*.json).")
@click.option("--grid", "grid", type=Count(min=2), default=1001, show_default=True,
              help="Number of frontier budget points i/(N-1).")
@click.option("--results", "results", type=click.Path(file_okay=False, path_type=Path),
              default=None, help="Folder of cached results to read (default: DIR/results).")
@click.option("--format", "formats", default="png,pdf", show_default=True,
              help="Figure files, comma-separated from png, pdf, svg (the PNG is always "
                   "written: the page shows it).")
@log_options
def report_cmd(directory: Path, out: Path, bootstrap: Path | None, thinning: Path | None,
               otbench: tuple[Path, ...], grid: int, results: Path | None, formats: str) -> None:
    """Write the report of the measurement set in DIRECTORY to --out.

    Metrics and frontiers are computed here, or reused from DIR/results/
    (metrics.json, frontier.json) when they belong to the set; bootstrap,
    thinning and OTBench results are read from the given files or from
    DIR/results/. Progress goes to stderr, the report's path to stdout.
    """
    # Lazy: JAX and matplotlib load only when the command runs.
    from otbench.analysis.measurement import load
    from otbench.analysis.measurement import verify_tables
    from otbench.analysis.report import write_report

    def progress(line: str) -> None:
        click.echo(f"report: {line}", err=True)

    with data_errors(ValueError):
        ms = load(directory)           # load once, here, so a bad set fails before any work
        verify_tables(directory)       # the token and probe tables too (a load checks trajectories)
        if ms.synthetic:
            click.echo(synthetic_banner(True), nl=False, err=True)
        path = write_report(ms, out, set_dir=directory, bootstrap=bootstrap, thinning=thinning,
                            otbench=otbench, grid=grid, progress=progress, formats=formats,
                            results_dir=True if results is None else results)
    click.echo(synthetic_banner(ms.synthetic), nl=False)
    click.echo(str(path))
    track(lambda rec: report_record(rec, path), ms)
