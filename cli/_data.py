"""`otbench import`, `otbench export`, `otbench validate`: moving measurement sets in and out."""

import click

from ._common import data_errors, load_set, synthetic_banner


@click.command("import")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--out", required=True, type=click.Path(file_okay=False),
              help="Directory to write the measurement set to.")
@click.option("--synthetic", is_flag=True, help="Mark the imported data as synthetic.")
@click.option("--overwrite", is_flag=True, help="Replace an existing set at --out.")
def import_cmd(file: str, out: str, synthetic: bool, overwrite: bool) -> None:
    """Import a JSONL file of trajectories (one per line) as a measurement set.

    Keys: model, group, question, trajectory, probes, L, C, y; optional:
    dataset, split, finished, question_text, signals. Any bad line stops the
    import with `FILE:LINE: rule` and exit status 2; nothing is written.
    """
    from otbench.analysis import save
    from otbench.analysis.measurement import import_jsonl

    with data_errors():
        ms = import_jsonl(file, synthetic=synthetic)
        manifest = save(ms, out, overwrite=overwrite)
    c = manifest["counts"]
    click.echo(f"{synthetic_banner(ms.synthetic)}imported {c['trajectories']} trajectories, "
               f"{c['questions']} questions, {c['cells']} cells -> {out}")


@click.command("export")
@click.argument("directory", type=click.Path(file_okay=False))
@click.option("--out", required=True, type=click.Path(dir_okay=False),
              help="JSONL file to write (the format `otbench import` reads).")
def export_cmd(directory: str, out: str) -> None:
    """Export a measurement set as canonical JSONL (exact inverse of import)."""
    from otbench.analysis.measurement import export_jsonl

    ms = load_set(directory)
    count = export_jsonl(ms, out)
    click.echo(f"{synthetic_banner(ms.synthetic)}exported {count} trajectories -> {out}")


@click.command("validate")
@click.argument("directory", type=click.Path(file_okay=False))
def validate_cmd(directory: str) -> None:
    """Check a measurement set (checksums, every SPEC §2 rule) and print a summary."""
    import numpy as np

    from otbench.analysis.measurement import verify_tables

    ms = load_set(directory)
    with data_errors():
        verify_tables(directory)       # the token and probe tables too (a load checks trajectories)
    s = ms.summary()
    click.echo(synthetic_banner(ms.synthetic) + f"{directory}: valid measurement set")
    click.echo(f"  trajectories {s['trajectories']}, questions {s['questions']}, cells {s['cells']} "
               f"({s['models']} models x {s['groups']} groups), max steps {s['max_steps']}")
    click.echo(f"  thinking tokens {s['thinking_tokens']} "
               f"(mean {s['thinking_tokens'] / max(s['trajectories'], 1):.1f} per trajectory)")
    click.echo(f"  signals: {', '.join(s['signals']) or 'none'}")
    # Unequal R is valid (every analysis handles it) but worth knowing about.
    unequal = []
    for c in range(ms.num_cells):
        rows = ms.cell_rows(c)
        counts = np.bincount(ms.question[rows])
        counts = counts[counts > 0]
        if counts.size and counts.min() != counts.max():
            m, g = ms.cell_name(c)
            unequal.append(f"{m}/{g} (R {counts.min()}..{counts.max()})")
    if unequal:
        click.echo(f"  unequal trajectory counts per question in {len(unequal)} cells: " + "; ".join(unequal))
    else:
        click.echo("  every question of a cell has the same number of trajectories")
