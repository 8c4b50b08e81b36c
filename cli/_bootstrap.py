"""`otbench bootstrap`: two-stage paired bootstrap intervals, optionally of the frontiers (docs/rules.md)."""

from pathlib import Path

import click

from ._numbers import SEED_DIGITS, Count
from ._tracking import add_bootstrap, log_options, track


@click.command("bootstrap")
@click.argument("directory", type=click.Path(path_type=Path))
@click.option("--replicates", type=Count(), default=10_000, show_default=True,
              help="Bootstrap replicates.")
@click.option("--seed", type=Count(digits=SEED_DIGITS), default=20260721, show_default=True,
              help="Seed of the replicate streams (recorded in the output).")
@click.option("--frontiers", is_flag=True,
              help="Also re-solve the exact DR / FB / DEE frontiers of every cell per replicate.")
@click.option("--grid", default=101, show_default=True, type=Count(),
              help="Frontier budget points i/(N-1) (with --frontiers).")
@click.option("--batch", type=Count(), default=None,
              help="Replicates per vectorized call (bounds memory; never changes a result). "
                   "Default: otbench.analysis.resampling.default_batch (1000; with --frontiers 16 on "
                   "CPU, 1024 on an accelerator).")
@click.option("--workers", type=Count(), default=None,
              help="Worker processes building frontier units (default: 0 on CPU, cores - 1 otherwise).")
@click.option("--checkpoint-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Write orbax checkpoints here.")
@click.option("--checkpoint-every", type=Count(), default=10, show_default=True,
              help="Batches between checkpoints.")
@click.option("--resume", is_flag=True,
              help="Continue the checkpoint in --checkpoint-dir (same data and settings).")
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Where to write the otbench.bootstrap/1 document (fractions, not %; "
                   "default DIRECTORY/results/bootstrap.json).")
@log_options
def bootstrap_cmd(directory: Path, replicates: int, seed: int, frontiers: bool, grid: int,
                  batch: int | None, workers: int | None, checkpoint_dir: Path | None,
                  checkpoint_every: int, resume: bool, json_out: Path | None) -> None:
    """Percentile intervals of OR, AD, accuracies and tokens for the set in DIRECTORY.

    Prints the interval matrices in the layout of the paper's Tables 4-6
    (models x groups with Avg. row and column); with --frontiers also the
    intervals of beta_match, the ceilings and beta_sat. Progress goes to
    stderr: a bar on a terminal, else a line at least every 30 s.
    """
    # Lazy: JAX and orbax load only when the command runs, not for `otbench --help`.
    from otbench.analysis.measurement import load
    from otbench.analysis.resampling import bootstrap, default_batch, format_bootstrap

    from ._common import (
        argument_errors,
        memory_guard,
        progress_bar,
        progress_callback,
        write_result,
    )

    with argument_errors():
        ms = load(directory)
        if frontiers:
            memory_guard(ms, "bootstrap --frontiers", batch or default_batch(True))
        with progress_bar(replicates, "bootstrap replicates") as bar:
            result = bootstrap(ms, replicates=replicates, seed=seed, frontiers=frontiers, grid=grid,
                               batch=batch, workers=workers, checkpoint_dir=checkpoint_dir,
                               checkpoint_every=checkpoint_every, resume=resume,
                               progress=progress_callback(bar))
    click.echo(format_bootstrap(result), nl=False)
    doc = result.to_json()
    click.echo(f"wrote {write_result(doc, directory, 'bootstrap.json', json_out)}")
    track(lambda rec: add_bootstrap(rec, doc), ms)
