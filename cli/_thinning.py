"""`otbench thinning` (exact probe thinning, trajectory thinning) and `otbench sweep` (docs/rules.md)."""

from pathlib import Path

import click

from ._common import DataError, argument_errors, progress_bar, progress_callback, result_path, write_result
from ._numbers import SEED_DIGITS, Count, counts


def _counts(value: str | None, name: str, ms=None) -> tuple[int, ...]:
    """Comma-separated positive integers ('' = none; None = the defaults that fit the set `ms`)."""
    if value is None:
        from otbench.analysis.resampling import (
            PROBES,
            TRAJECTORIES,
            default_levels,
            max_trajectories,
        )
        if name == "'--probes'":
            return default_levels(ms, PROBES, int(ms.probes.min()))
        return default_levels(ms, TRAJECTORIES, max_trajectories(ms))
    text = value.strip()
    if not text:
        return ()
    return tuple(counts(text, name))


_PROBES = click.option("--probes", default=None,
                       help="Probe counts m for exact thinning ('' to skip; default: those of "
                            "4,8,12,16 below the set's P, and P).")
_TRAJ = click.option("--trajectories", default=None,
                     help="Trajectory counts r per (model, question) ('' to skip; default: those "
                          "of 2,4,8,16 below the set's largest R, and R).")
_DRAWS = click.option("--draws", type=Count(), default=2000, show_default=True,
                      help="Subsamples per trajectory count.")
_SEED = click.option("--seed", type=Count(digits=SEED_DIGITS), default=20260721, show_default=True,
                     help="Seed of the random streams (recorded in the output).")


@click.command("thinning")
@click.argument("directory", type=click.Path(path_type=Path))
@_PROBES
@_TRAJ
@_DRAWS
@_SEED
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Where to write the otbench.thinning/1 document (fractions, not %; "
                   "default DIRECTORY/results/thinning.json).")
def thinning_cmd(directory: Path, probes: str, trajectories: str, draws: int, seed: int,
                 json_out: Path | None) -> None:
    """Exact probe thinning and trajectory thinning of the set in DIRECTORY."""
    from otbench.analysis.measurement import load
    from otbench.analysis.resampling import format_thinning, thinning

    with argument_errors():
        ms = load(directory)
        p, t = _counts(probes, "'--probes'", ms), _counts(trajectories, "'--trajectories'", ms)
        doc = thinning(ms, probes=p, trajectories=t, draws=draws, seed=seed)
    click.echo(format_thinning(doc), nl=False)
    click.echo(f"wrote {write_result(doc, directory, 'thinning.json', json_out)}")


def _format_tables(tables: dict[str, list[dict]], max_rows: int = 40) -> str:
    """Every sweep table as aligned text (fractions as in the CSVs; long tables are cut)."""
    from otbench.analysis.resampling import sweep_header

    out = []
    for name, rows in tables.items():
        if not rows:
            continue
        names = list(rows[0])

        def cell(v):
            return "" if v is None else f"{v:.4g}" if isinstance(v, float) else str(v)

        shown = rows if len(rows) <= max_rows else rows[:max_rows]
        body = [[sweep_header(name, c) for c in names]] + [[cell(r[c]) for c in names] for r in shown]
        widths = [max(len(x[k]) for x in body) for k in range(len(names))]
        out.append(name)
        out += ["  ".join(v.rjust(wd) if i else v.ljust(wd) for i, (v, wd) in
                          enumerate(zip(x, widths))) for x in body]
        if len(rows) > max_rows:
            out.append(f"... {len(rows) - max_rows} more rows in {name}.csv")
        out.append("")
    return "\n".join(out) + "\n"


def _refuse_foreign_folder(folder: Path) -> None:
    """The sweep writes its tables into `folder`: an existing folder holding anything otbench did not
    write (a user's folder given as --out) is refused before the bootstrap runs, so a sweep never
    mixes its files into someone's data; a folder of otbench's own earlier outputs is reused."""
    from otbench.files import LEDGER, written_by_otbench

    if not folder.is_dir() or folder.is_symlink():
        return                              # new (or not a folder: check_output names it)
    foreign = sorted(e.name for e in folder.iterdir() if e.name != LEDGER and not written_by_otbench(e))
    if foreign:
        more = f" and {len(foreign) - 1} more" if len(foreign) > 1 else ""
        raise DataError(f"{folder}: exists and holds files otbench did not write ({foreign[0]!r}{more}); "
                        "give --out a new or empty folder")


@click.command("sweep")
@click.argument("directory", type=click.Path(path_type=Path))
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Output folder for sweep.json and one CSV per table (default: "
                   "DIRECTORY/results/sweep.json and the tables in DIRECTORY/results/sweep/).")
@_PROBES
@_TRAJ
@_DRAWS
@_SEED
@click.option("--replicates", type=Count(), default=10_000, show_default=True,
              help="Bootstrap replicates.")
@click.option("--frontiers", is_flag=True, help="Re-solve the frontiers in every replicate.")
@click.option("--grid", type=Count(), default=None,
              help="Frontier budget points i/(N-1); implies --frontiers (default 101).")
@click.option("--batch", type=Count(), default=None, help="Bootstrap replicates per vectorized call.")
@click.option("--workers", type=Count(), default=None, help="Worker processes for frontier units.")
@click.option("--checkpoint-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Bootstrap checkpoints (orbax).")
@click.option("--checkpoint-every", type=Count(), default=10, show_default=True,
              help="Batches between checkpoints.")
@click.option("--resume", is_flag=True, help="Continue the bootstrap checkpoint.")
def sweep_cmd(directory: Path, out_dir: Path, probes: str, trajectories: str, draws: int, seed: int,
              replicates: int, frontiers: bool, grid: int | None, batch: int | None,
              workers: int | None, checkpoint_dir: Path | None, checkpoint_every: int,
              resume: bool) -> None:
    """Sensitivity sweep of the set in DIRECTORY: bootstrap, probe and trajectory thinning.

    Writes OUT/sweep.json (otbench.sweep/1: the bootstrap and thinning
    documents) and OUT/<table>.csv for every table (fractions, not %; the
    unit of every column is in its header), and prints the tables.
    """
    from otbench.analysis.measurement import load
    from otbench.analysis.resampling import BOOT_METRICS, sweep, sweep_csv, sweep_tables

    from otbench.files import check_output, write_text_atomic

    tables_dir = out_dir if out_dir is not None else result_path(directory, "sweep")
    json_path = result_path(directory, "sweep.json", None if out_dir is None else out_dir / "sweep.json")
    with argument_errors():
        ms = load(directory)
        p, t = _counts(probes, "'--probes'", ms), _counts(trajectories, "'--trajectories'", ms)
        names = [f"bootstrap_{k}" for k in BOOT_METRICS] + ["probe_thinning",
                                                            "trajectory_thinning"]
        if frontiers or grid is not None:
            names += ["bootstrap_frontiers", "bootstrap_frontier_summary"]
        _refuse_foreign_folder(tables_dir)
        for target in [json_path] + [tables_dir / f"{name}.csv" for name in names]:
            check_output(target)            # refused before the bootstrap runs, not after
        with progress_bar(replicates, "bootstrap replicates") as bar:
            doc = sweep(ms, probes=p, trajectories=t, draws=draws, replicates=replicates, seed=seed,
                        frontiers=frontiers or grid is not None, grid=101 if grid is None else grid,
                        batch=batch, workers=workers, checkpoint_dir=checkpoint_dir,
                        checkpoint_every=checkpoint_every, resume=resume,
                        progress=progress_callback(bar))
    path = write_result(doc, directory, "sweep.json",
                        None if out_dir is None else out_dir / "sweep.json")
    tables = sweep_tables(doc)
    for name, rows in tables.items():
        write_text_atomic(tables_dir / f"{name}.csv", sweep_csv(name, rows))
    click.echo(_format_tables(tables), nl=False)
    click.echo(f"wrote {path} and {len(tables)} tables in {tables_dir}: "
               f"{', '.join(sorted(tables))}")
