"""`otbench horizon ...`: matched-horizon readouts of stopped reasoning (docs/rules.md)."""

import sys
from pathlib import Path

import click

from ._common import DataError, data_errors, synthetic_banner, write_json
from ._numbers import Count, Seed, counts


@click.group("horizon")
def horizon_group() -> None:
    """Matched-horizon readouts: fixed-horizon stops, candidate-logit answers, paired contrasts (docs/rules.md)."""


@horizon_group.command("run")
@click.option("--config", "config", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="Horizon job TOML (model, engine, data, horizon, arm, matched, closures).")
@click.option("--out", "out", required=True, type=click.Path(path_type=Path),
              help="Run directory (horizon.json, trajectories.parquet, readouts.parquet).")
@click.option("--overwrite", is_flag=True, help="Replace an existing OUT.")
@click.option("--progress/--no-progress", default=True, help="Progress lines on stderr.")
def run_cmd(config: Path, out: Path, overwrite: bool, progress: bool) -> None:
    """Generate the arms' trajectories, stop them at every horizon and read the answers out."""
    from otbench.probe.horizon import load_horizon_job, run_horizon

    from otbench.errors import OtbenchError

    try:
        job = load_horizon_job(config)
    except OtbenchError as e:
        raise DataError(str(e)) from None
    with data_errors(ValueError):
        summary = run_horizon(job, out, overwrite=overwrite, progress=progress)
    m, r = summary.manifest, summary.run
    click.echo(synthetic_banner(bool(m.get("synthetic"))), nl=False)
    click.echo(f"wrote {summary.out}: {m['counts']['trajectories']} trajectories "
               f"({len(m['arms'])} arms x {m['replicates']} replicates), {m['counts']['readouts']} "
               f"readouts of {r['readout_inputs']} distinct inputs, {r['continuations']} continuations")
    missing = [repr(" " + lt if f == "space" else lt) for lt, f in m["spellings"]["missing"]]
    if missing:
        click.echo(f"  no one-token spelling: {', '.join(missing)} (recorded in horizon.json)")
    click.echo(f"  total {r['total_s']:.1f} s (details in {summary.out / 'run.json'})")


def _ints(value: str | None) -> list[int] | None:
    if value is None:
        return None
    out = counts(value, "'--horizons'")
    if not out or any(b < 0 for b in out):
        raise click.BadParameter(f"expected comma-separated integers >= 0, got {value!r}",
                                 param_hint="'--horizons'")
    return out


@horizon_group.command("analyze")
@click.argument("directory", type=click.Path(path_type=Path))
@click.option("--arms", "arms", multiple=True,
              help="A contrast 'A,B' (A minus B, paired within item and replicate); repeatable "
                   "(the simultaneous family band covers all of them).")
@click.option("--horizons", "horizons", default=None,
              help="Comma-separated horizons B (default: every horizon read out in the run).")
@click.option("--replicates", default=10_000, show_default=True, type=Count(min=1),
              help="Bootstrap draws (every scheme).")
@click.option("--seed", default=0, show_default=True, type=Seed(),
              help="Bootstrap / sign-flip seed (recorded).")
@click.option("--two-way/--no-two-way", default=True, show_default=True,
              help="Also the two-way item x replicate bootstrap of the contrasts (sensitivity).")
@click.option("--scheme", type=click.Choice(["item", "nested"]), default="item", show_default=True,
              help="Primary resampling: items, or items then each selected item's paired replicates "
                   "(designs with item-specific replicates).")
@click.option("--direct", "direct", multiple=True,
              help="A direct contrast 'A,B' from the same draws, outside the family band; repeatable.")
@click.option("--diagonal", "diagonal", multiple=True,
              help="Arms and the horizons they announce, 'X:512,Y:2048': the matching-number statistic; "
                   "repeatable.")
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the otbench.horizon/1 document (e.g. SETDIR/results/horizon.json for the "
                   "report).")
def analyze_cmd(directory: Path, arms: tuple[str, ...], horizons: str | None, replicates: int,
                seed: int, two_way: bool, scheme: str, direct: tuple[str, ...], diagonal: tuple[str, ...],
                json_out: Path | None) -> None:
    """Survival, accuracies, paired contrasts, strata, scores and controls of the run in DIRECTORY."""
    from otbench.analysis import horizon as tabs
    from otbench.analysis.horizon import analyze

    hs = _ints(horizons)
    with data_errors():
        doc = analyze(directory, contrasts=list(arms), horizons=hs, replicates=replicates, seed=seed,
                      two_way=two_way, scheme=scheme, direct=list(direct), diagonal=list(diagonal))
    click.echo(synthetic_banner(doc["run"]["synthetic"]), nl=False)
    click.echo(f"{directory}: model {doc['run']['model']}, arms {', '.join(doc['run']['arms'])}; "
               f"{replicates:,} {scheme}-bootstrap draws, seed {seed}; rates in %, contrasts in pp\n")
    tables = [tabs.calibration_table(doc)]
    if arms or direct:
        for rd in ("policy", "common", "continuation", "completion"):
            t = tabs.contrast_table(doc, rd)
            if t[2]:
                tables.append(t)
        tables += [tabs.strata_table(doc, "policy"), tabs.diagonal_table(doc), tabs.length_table(doc),
                   tabs.scores_table(doc)]
    tables += [tabs.matched_table(doc), tabs.sensitivity_table(doc), tabs.controls_table(doc),
               tabs.agreement_table(doc)]
    for t in tables:
        if t[2]:
            click.echo(tabs.format_text(t))
    if json_out is not None:
        write_json(doc, str(json_out))


if __name__ == "__main__":  # pragma: no cover - vLLM workers re-import entry modules
    horizon_group(sys.argv[1:])
