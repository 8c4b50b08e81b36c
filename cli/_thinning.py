"""`otbench thinning` (exact probe thinning, trajectory thinning) and `otbench sweep` (SPEC §7)."""

import csv
import io
from pathlib import Path

import click

from ._common import argument_errors, progress_bar, progress_callback


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
    try:
        return tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise click.BadParameter(f"expected comma-separated integers, got {value!r}",
                                 param_hint=name) from None


_PROBES = click.option("--probes", default=None,
                       help="Probe counts m for exact thinning ('' to skip; default: those of "
                            "4,8,12,16 below the set's P, and P).")
_TRAJ = click.option("--trajectories", default=None,
                     help="Trajectory counts r per (model, question) ('' to skip; default: those "
                          "of 2,4,8,16 below the set's largest R, and R).")
_DRAWS = click.option("--draws", type=int, default=2000, show_default=True,
                      help="Subsamples per trajectory count.")
_SEED = click.option("--seed", type=int, default=20260721, show_default=True,
                     help="Seed of the random streams (recorded in the output).")


@click.command("thinning")
@click.argument("directory", type=click.Path(path_type=Path))
@_PROBES
@_TRAJ
@_DRAWS
@_SEED
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the otbench.thinning/1 document (fractions, not %).")
def thinning_cmd(directory: Path, probes: str, trajectories: str, draws: int, seed: int,
                 json_out: Path | None) -> None:
    """Exact probe thinning and trajectory thinning of the set in DIRECTORY."""
    from otbench.analysis.measurement import load
    from otbench.analysis.resampling import format_thinning, thinning

    from ._common import write_json

    with argument_errors():
        ms = load(directory)
        p, t = _counts(probes, "'--probes'", ms), _counts(trajectories, "'--trajectories'", ms)
        doc = thinning(ms, probes=p, trajectories=t, draws=draws, seed=seed)
    click.echo(format_thinning(doc), nl=False)
    if json_out is not None:
        write_json(doc, str(json_out), of=ms)
        click.echo(f"wrote {json_out}")


def csv_cell(v):
    """A text cell a spreadsheet would run as a formula (`=`, `+`, `-`, `@`, tab, CR) gets a
    leading `'` so it shows as text; numbers are written as they are."""
    if isinstance(v, str) and v[:1] in ("=", "+", "-", "@", "\t", "\r"):
        try:
            float(v)
        except ValueError:
            return "'" + v
    return v


def _write_csv(path: Path, rows: list[dict]) -> None:
    from otbench.analysis.measurement import write_text_atomic

    buf = io.StringIO(newline="")
    w = csv.DictWriter(buf, fieldnames=[csv_cell(k) for k in rows[0]] if rows else [])
    w.writeheader()
    w.writerows([{csv_cell(k): csv_cell(v) for k, v in r.items()} for r in rows])
    write_text_atomic(path, buf.getvalue())


@click.command("sweep")
@click.argument("directory", type=click.Path(path_type=Path))
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="Output folder: sweep.json and one CSV per table.")
@_PROBES
@_TRAJ
@_DRAWS
@_SEED
@click.option("--replicates", type=int, default=10_000, show_default=True,
              help="Bootstrap replicates.")
@click.option("--frontiers", is_flag=True, help="Re-solve the frontiers in every replicate.")
@click.option("--grid", type=int, default=None,
              help="Frontier budget points i/(N-1); implies --frontiers (default 101).")
@click.option("--batch", type=int, default=None, help="Bootstrap replicates per vectorized call.")
@click.option("--workers", type=int, default=None, help="Worker processes for frontier units.")
@click.option("--checkpoint-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Bootstrap checkpoints (orbax).")
@click.option("--checkpoint-every", type=int, default=10, show_default=True,
              help="Batches between checkpoints.")
@click.option("--resume", is_flag=True, help="Continue the bootstrap checkpoint.")
def sweep_cmd(directory: Path, out_dir: Path, probes: str, trajectories: str, draws: int, seed: int,
              replicates: int, frontiers: bool, grid: int | None, batch: int | None,
              workers: int | None, checkpoint_dir: Path | None, checkpoint_every: int,
              resume: bool) -> None:
    """Sensitivity sweep of the set in DIRECTORY: bootstrap, probe and trajectory thinning.

    Writes OUT/sweep.json (otbench.sweep/1: the bootstrap and thinning
    documents) and OUT/<table>.csv for every table (fractions, not %).
    """
    from otbench.analysis.measurement import load
    from otbench.analysis.resampling import sweep, sweep_tables

    from ._common import write_json

    with argument_errors():
        ms = load(directory)
        p, t = _counts(probes, "'--probes'", ms), _counts(trajectories, "'--trajectories'", ms)
        with progress_bar(replicates, "bootstrap replicates") as bar:
            doc = sweep(ms, probes=p, trajectories=t, draws=draws, replicates=replicates, seed=seed,
                        frontiers=frontiers or grid is not None, grid=101 if grid is None else grid,
                        batch=batch, workers=workers, checkpoint_dir=checkpoint_dir,
                        checkpoint_every=checkpoint_every, resume=resume,
                        progress=progress_callback(bar))
    out_dir.mkdir(parents=True, exist_ok=True)
    write_json(doc, str(out_dir / "sweep.json"), of=ms)
    tables = sweep_tables(doc)
    for name, rows in tables.items():
        _write_csv(out_dir / f"{name}.csv", rows)
    click.echo(f"wrote {out_dir / 'sweep.json'} and {len(tables)} tables: {', '.join(sorted(tables))}")
