"""`otbench import`, `otbench export`, `otbench validate`: moving measurement sets in and out."""

import click

from ._common import DataError, data_errors, load_set, synthetic_banner


@click.command("import")
@click.argument("file", type=click.Path())
@click.option("--out", required=True, type=click.Path(file_okay=False),
              help="Directory to write the measurement set to.")
@click.option("--synthetic", is_flag=True, help="Mark the imported data as synthetic.")
@click.option("--format", "fmt", type=click.Choice(["jsonl", "eee"]), default="jsonl",
              show_default=True,
              help="FILE's format: otbench's JSONL, or Every Eval Ever instance-level records "
                   "written by `otbench export --format eee` (docs/guides/eee.md).")
@click.option("--overwrite", is_flag=True, help="Replace an existing set at --out.")
def import_cmd(file: str, out: str, synthetic: bool, fmt: str, overwrite: bool) -> None:
    """Import a JSONL file of trajectories (one per line) as a measurement set.

    Keys: model, group, question, trajectory, probes, L, C, y; optional:
    dataset, split, finished, question_text, signals. Any bad line stops the
    import with `FILE:LINE: rule` and exit status 2; nothing is written.

    FILE may also be a set's Hub folder (`otbench export --hub-dir`) or its
    Hub id in the local Hugging Face cache, `hf://datasets/ORG/NAME[@REVISION]`:
    the set is verified (checksums, content hash) and written to --out with
    its extra tables; --synthetic does not apply (the set says what it is).

    With --format eee, FILE holds Every Eval Ever instance-level records (one
    per line) as `otbench export --format eee` writes them: each record's
    verdict (`evaluation.is_correct`) is kept as the trajectory's y.
    """
    from otbench.analysis import save
    from otbench.analysis.measurement import hub_path, import_eee, import_jsonl, load, load_table
    from otbench.analysis.measurement import read_manifest

    with data_errors():
        folder = hub_path(file)
        if fmt == "eee":
            ms = import_eee(file, synthetic=synthetic)
            manifest = save(ms, out, overwrite=overwrite)
        elif folder.is_dir():
            ms = load(folder)
            tables = {t: load_table(folder, t) for t in read_manifest(folder).get("tables", {})}
            manifest = save(ms, out, overwrite=overwrite, extra_tables=tables)
        else:
            ms = import_jsonl(file, synthetic=synthetic)
            manifest = save(ms, out, overwrite=overwrite)
    c = manifest["counts"]
    click.echo(f"{synthetic_banner(ms.synthetic)}imported {c['trajectories']} trajectories, "
               f"{c['questions']} questions, {c['cells']} cells -> {out}")


@click.command("export")
@click.argument("directory", type=click.Path(file_okay=False))
@click.option("--out", type=click.Path(dir_okay=False),
              help="JSONL file to write (the format `otbench import` reads).")
@click.option("--format", "fmt", type=click.Choice(["jsonl", "eee"]), default="jsonl",
              show_default=True,
              help="--out's format: otbench's JSONL, or Every Eval Ever instance-level records "
                   "(schema 0.2.1; docs/guides/eee.md), which `otbench import --format eee` reads.")
@click.option("--tokenizer", type=click.Path(exists=True, file_okay=False), default=None,
              help="With --format eee: the model's tokenizer folder; a set the probe wrote (its "
                   "tokens table) then has each record's thinking and answer as text.")
@click.option("--hub-dir", "hub_dir", type=click.Path(file_okay=False),
              help="Folder to write as a Hugging Face dataset repository: Parquet per table, "
                   "manifest.json and a README.md dataset card (`datasets.load_dataset(DIR, "
                   "'trajectories')` reads it; `hf upload` publishes it as is).")
@click.option("--license", "license_", default="unknown", show_default=True,
              help="The dataset card's licence identifier (--hub-dir), e.g. cc-by-4.0.")
def export_cmd(directory: str, out: str | None, fmt: str, tokenizer: str | None, hub_dir: str | None,
               license_: str) -> None:
    """Export a measurement set as canonical JSONL (exact inverse of import), as Every Eval
    Ever records (--format eee) and/or as a Hugging Face dataset folder (--hub-dir)."""
    from otbench.analysis.measurement import (
        export_eee,
        export_hub,
        export_jsonl,
        hub_path,
        load_table,
        read_manifest,
    )

    if out is None and hub_dir is None:
        raise DataError("export needs --out FILE (JSONL), --hub-dir DIR (Hub folder), or both")
    if fmt == "eee" and out is None:
        raise DataError("--format eee is the format of --out FILE; give --out")
    if tokenizer is not None and fmt != "eee":
        raise DataError("--tokenizer applies to --format eee (the JSONL export holds no text)")
    ms = load_set(directory)
    banner = synthetic_banner(ms.synthetic)
    if out is not None:
        with data_errors():
            if fmt == "eee":        # a probe set's token ids give each record its token_usage
                tokens = (load_table(directory, "tokens")
                          if "tokens" in read_manifest(directory).get("tables", {}) else None)
                decode = None
                if tokenizer is not None:
                    from otbench.evallogs import token_decoder

                    if tokens is None:
                        raise DataError(f"{directory}: --tokenizer needs the set's tokens table "
                                        f"(a set the probe wrote has one; this one has none)")
                    decode = token_decoder(tokenizer)
                count = export_eee(ms, out, tokens=tokens, decode=decode)
            else:
                count = export_jsonl(ms, out)
        what = "Every Eval Ever records (schema 0.2.1)" if fmt == "eee" else "trajectories"
        click.echo(f"{banner}exported {count} {what} -> {out}")
    if hub_dir is not None:
        with data_errors():
            folder = hub_path(directory)
            tables = {t: load_table(folder, t) for t in read_manifest(folder).get("tables", {})}
            export_hub(ms, hub_dir, tables=tables, license=license_)
        click.echo(f"{banner}exported {ms.num_trajectories} trajectories and "
                   f"{len(tables)} extra tables as a Hub dataset folder -> {hub_dir}")


@click.command("validate")
@click.argument("directory", type=click.Path(file_okay=False))
def validate_cmd(directory: str) -> None:
    """Check a measurement set (checksums, every docs/rules.md rule) and print a summary."""
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
