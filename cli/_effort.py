"""`otbench effort`: per cell and effort level, the smallest thinking-token cap certified within δ
of full thinking (docs/rules.md, effort levels)."""

from pathlib import Path

import click

from ._numbers import SEED_DIGITS, Count, Real

_EXT = {"json": "json", "vllm-budgets": "json", "csv": "csv"}
_NAME = {"json": "effort", "vllm-budgets": "effort-vllm-budgets", "csv": "effort"}


def _levels(ctx, param, value: str):
    """Parse `--levels` at the option, so a bad one is click's one-line usage error."""
    from otbench.analysis.effort import parse_levels        # no JAX: the package is lazy

    try:
        return parse_levels(value)
    except ValueError as e:
        raise click.BadParameter(str(e).replace("`--levels` ", "").replace("`levels`: ", ""),
                                 ctx, param) from None


@click.command("effort")
@click.argument("directory", type=click.Path(path_type=Path))
@click.option("--levels", default="low=2,medium=1,high=0.5", show_default=True, callback=_levels,
              help="Comma-separated name=points: each level's delta, in accuracy points below "
                   "full thinking.")
@click.option("--replicates", type=Count(min=1), default=2000, show_default=True,
              help="Bootstrap replicates.")
@click.option("--seed", type=Count(min=0, digits=SEED_DIGITS), default=20260721, show_default=True,
              help="Seed of the replicate streams (recorded in the output).")
@click.option("--confidence", type=Real(0, 1, min_open=True, max_open=True), default=0.95,
              show_default=True, help="Level of the two-sided interval whose lower end is read.")
@click.option("--format", "fmt", type=click.Choice(list(_EXT)), default="json", show_default=True,
              help="json: the otbench.effort/1 map; vllm-budgets: a per-request "
                   "thinking_token_budget table; csv: one row per cell and level.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Where to write (default DIRECTORY/results/effort.json, "
                   "effort-vllm-budgets.json or effort.csv).")
def effort_cmd(directory: Path, levels: dict, replicates: int, seed: int, confidence: float,
               fmt: str, out: Path | None) -> None:
    """Effort levels for the set in DIRECTORY: per model and benchmark group, the smallest
    thinking-token cap whose paired bootstrap interval lies within each level's delta of full
    thinking (docs/rules.md)."""
    from otbench.analysis.effort import effort_map, format_effort, render
    from otbench.analysis.measurement import load

    from otbench.files import write_text_atomic

    from ._common import argument_errors, result_path

    with argument_errors():
        ms = load(directory)
        em = effort_map(ms, levels, replicates=replicates, seed=seed, confidence=confidence)
        path = result_path(directory, f"{_NAME[fmt]}.{_EXT[fmt]}", out)
        write_text_atomic(path, render(em, fmt))
    click.echo(format_effort(em), nl=False)
    click.echo(f"wrote {path}")
