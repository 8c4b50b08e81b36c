"""`otbench audit-log`: censoring in an evaluation log's scores, read with the horizon readouts (no probing)."""

from pathlib import Path

import click

from ._common import data_errors
from ._numbers import Count, Seed

FORMATS = ("lm-eval", "lighteval", "inspect-ai", "chat", "eee")


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
@click.option("--tokenizer", type=click.Path(exists=True, file_okay=False, path_type=Path), default=None,
              help="lm-eval: a local tokenizer folder; a reply of at least its record's max_gen_toks "
                   "tokens hit the length limit (lm-eval records no finish reason; default: the "
                   "results file's pretrained= folder where it exists here).")
def audit_cmd(file: Path, fmt: str | None, metric: str | None, out: Path | None, replicates: int,
              seed: int, tokenizer: Path | None) -> None:
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

    from otbench.evallogs import detect_format, lm_eval_results_model, read_log, token_counter

    with data_errors():
        kind = fmt or detect_format(file)
        count, counted_by = None, None
        if kind == "lm-eval":
            counted_by = str(tokenizer) if tokenizer is not None else lm_eval_results_model(file)
            count = token_counter(counted_by) if counted_by else None
        elif tokenizer is not None:
            from otbench.evallogs import EvalLogError

            raise EvalLogError(f"{file}: --tokenizer applies to lm-eval logs (the other formats record "
                               "their stop reason)")
        notes: list[str] = []
        doc = audit_replies(read_log(file, kind, metric=metric, count_tokens=count, notes=notes),
                            source=str(file), replicates=replicates, seed=seed)
        if notes:
            doc["notes"] = notes
    doc["length_limit"] = ({"read": "re-encoded reply tokens >= the record's max_gen_toks",
                            "tokenizer": counted_by} if count is not None else None)
    for note in notes:
        click.echo(f"note: {note}")
    if count is None and kind == "lm-eval":
        click.echo("length limit: not recorded (lm-eval writes no finish reason; --tokenizer DIR counts "
                   "each reply's tokens against its max_gen_toks)")
    elif count is not None:
        click.echo(f"length limit: each reply's tokens counted with the tokenizer in {counted_by} against "
                   "its record's max_gen_toks")
    click.echo(format_text(censoring_table(doc)))
    click.echo(format_text(bounds_table(doc)))
    for row in doc["groups"]:
        click.echo(audit_line(row))
    if out is not None:
        from otbench.analysis.report import write_audit

        with data_errors():
            written = write_audit(doc, out)
        click.echo(f"wrote {', '.join(str(p) for p in written)}")
