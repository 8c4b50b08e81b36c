"""`otbench audit-log`: censoring in an evaluation log's scores, read with the horizon readouts (no probing)."""

from pathlib import Path

import click

from ._common import data_errors
from ._numbers import Count, Seed

FORMATS = ("lm-eval", "lighteval", "inspect-ai", "chat")


@click.command("audit-log")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--format", "fmt", type=click.Choice(FORMATS), default=None,
              help="The log's framework (default: read from the file: .eval is inspect-ai, "
                   "else the first row's fields).")
@click.option("--metric", default=None,
              help="The source verdict to read: lm-eval's metric, lighteval's metric key, "
                   "inspect-ai's scorer (default: the first the log names).")
@click.option("--out", "out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Folder for audit.json, censoring.csv, bounds.csv and figures/audit_censoring.png.")
@click.option("--replicates", type=Count(min=0), default=10_000, show_default=True,
              help="Item-bootstrap draws of every interval.")
@click.option("--seed", type=Seed(), default=0, show_default=True,
              help="Seed of the bootstrap draws (recorded).")
def audit_cmd(file: Path, fmt: str | None, metric: str | None, out: Path | None, replicates: int,
              seed: int) -> None:
    """Audit FILE (an lm-eval, lighteval, inspect-ai or chat log) for censored replies.

    Per task and model: the share of replies that never closed their thinking
    or hit the length limit, accuracy among finished and censored replies, and
    the reported score's terminal-aware reading with its worst/best-case
    bounds (docs/guides/audit-log.md). The source's verdicts are used as they are.
    """
    # Lazy: JAX and matplotlib load only when the command runs.
    from otbench.analysis.horizon import (
        audit_line,
        audit_replies,
        bounds_table,
        censoring_table,
        format_text,
    )

    from otbench.evallogs import read_log

    with data_errors():
        doc = audit_replies(read_log(file, fmt, metric=metric), source=str(file), replicates=replicates,
                            seed=seed)
    click.echo(format_text(censoring_table(doc)))
    click.echo(format_text(bounds_table(doc)))
    for row in doc["groups"]:
        click.echo(audit_line(row))
    if out is not None:
        from otbench.analysis.report import write_audit

        with data_errors():
            written = write_audit(doc, out)
        click.echo(f"wrote {', '.join(str(p) for p in written)}")
