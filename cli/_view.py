"""`otbench view`: trajectories of a set read as a person reads them, in one self-contained HTML file."""

from pathlib import Path

import click

from ._common import data_errors, synthetic_banner
from ._numbers import Count

LIMIT = 20
"""The library's `DEFAULT_LIMIT`, restated for the help (importing the report would start JAX
before `--help`; tests/analysis/report/test_view.py keeps the two equal)."""


@click.command("view")
@click.argument("directory", type=click.Path(path_type=Path))
@click.option("--out", "out", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="The HTML file (one file: inline CSS and SVG, no network). An input, or a "
                   "path inside one, is refused always.")
@click.option("--model", default=None, help="Only this model id's trajectories.")
@click.option("--question", default=None, help="Only this question id's trajectories.")
@click.option("--trajectory", type=Count(min=0), default=None,
              help="Only trajectories with this index (of each question).")
@click.option("--limit", type=Count(min=1), default=LIMIT, show_default=True,
              help="At most this many trajectories (spread over models and questions); the page "
                   "says how many matching ones it left out.")
@click.option("--tokenizer", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="A local tokenizer folder (tokenizer.json) to read the set's token ids as text "
                   "(without it the page shows the cuts, answers' verdicts and signals, not the "
                   "text).")
def view_cmd(directory: Path, out: Path, model: str | None, question: str | None,
             trajectory: int | None, limit: int, tokenizer: Path | None) -> None:
    """Write the trajectories of the set in DIRECTORY to one HTML page --out.

    Each trajectory: its thinking text cut at every step, the P forced answers
    and their verdicts at each cut, the signals there, the accuracy curve and
    where each OTBench method stopped (docs/guides/reports.md). The page's path
    goes to stdout.
    """
    # Lazy: JAX loads only when the command runs.
    from otbench.analysis.measurement import load
    from otbench.analysis.report import write_view

    with data_errors(ValueError):
        ms = load(directory)
        path = write_view(ms, out, model=model, question=question, trajectory=trajectory,
                          limit=limit, tokenizer=tokenizer, set_dir=directory)
    click.echo(synthetic_banner(ms.synthetic), nl=False)
    click.echo(str(path))
