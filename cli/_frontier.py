"""`otbench frontier`: exact oracle frontiers of DR, FB and DEE (docs/rules.md)."""

from pathlib import Path

import click

from ._common import data_errors, memory_guard, write_result
from ._numbers import count_error, real_error


def _parse_grid(value: str):
    """`N` (points i / (N-1)) or comma-separated budgets in [0, 1]."""
    text = value.strip()
    if "," not in text and text.lstrip("+-").isdigit():     # N points (or digits refused)
        why = count_error(text)
        if why is None:
            return int(text)
        items = []
    else:
        items = [x for x in text.split(",") if x.strip()]
        why = next((w for w in map(real_error, items) if w is not None), None)
    if why is not None:
        raise click.BadParameter(f"expected a number of points or comma-separated budgets: {why}",
                                 param_hint="'--grid'")
    return [float(x) for x in items]


def _pct(x) -> str:
    return "never" if x is None else f"{100 * x:.1f}%"


def format_frontiers(res) -> str:
    """A short table: per strategy β_match, ceiling F(1), β_sat; the hierarchy line."""
    lines = []
    if res.synthetic:
        lines.append("SYNTHETIC DATA (simulated, not model outputs)")
    lines.append(f"oracle frontiers: {len(res.cells)} cells, {len(res.grid)} budgets "
                 f"(beta {float(res.grid[0]):g}..{float(res.grid[-1]):g}), "
                 f"A_full = {100 * res.a_full:.2f}%")
    lines.append(f"{'strategy':8s}  {'beta_match':>10s}  {'ceiling':>8s}  {'beta_sat':>8s}")
    for s, f in res.strategies.items():
        lines.append(f"{s.upper():8s}  {_pct(f.beta_match):>10s}  {100 * f.ceiling:7.2f}%  "
                     f"{_pct(f.beta_sat):>8s}")
    names = [s.upper() for s in res.strategies]
    if len(names) > 1:
        # `frontiers` raises FrontierHierarchyError otherwise, so reaching here means it held.
        lines.append(f"hierarchy {' <= '.join(names)}: holds in every cell at all "
                     f"{len(res.grid)} budgets and beta = 1")
    else:
        lines.append("hierarchy: needs at least two strategies")
    return "\n".join(lines) + "\n"


@click.command("frontier")
@click.argument("directory", type=click.Path(path_type=Path))
@click.option("--strategies", default="dr,fb,dee", show_default=True,
              help="Comma-separated subset of dr, fb, dee.")
@click.option("--grid", "grid", default="1001", show_default=True,
              help="Number of budget points i/(N-1), or comma-separated budgets in [0, 1].")
@click.option("--pareto", "pareto_out", type=click.Path(dir_okay=False, path_type=Path),
              default=None, help="Write every cell's exact Pareto set (Parquet: strategy, "
                                 "model, group, cost, reward).")
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path),
              default=None, help="Where to write the otbench.frontier/1 document (fractions, "
                                 "not %; default DIRECTORY/results/frontier.json).")
def frontier_cmd(directory: Path, strategies: str, grid: str, pareto_out: Path | None,
                 json_out: Path | None) -> None:
    """Exact oracle Pareto frontiers of every cell of the set in DIRECTORY (docs/rules.md)."""
    # Lazy: JAX loads only when the command runs, not for `otbench --help`.
    from otbench.analysis import load
    from otbench.analysis.frontier import budget_grid, frontiers, strategies_iv

    from otbench.errors import ResourceLimitError
    from otbench.resources import reuse_freed_memory

    grid_value = _parse_grid(grid)
    for check, value, hint in ((budget_grid, grid_value, "'--grid'"),
                               (strategies_iv, strategies, "'--strategies'")):
        with data_errors(prefix="Error: "):          # a memory refusal is not a usage error
            try:
                check(value)
            except ResourceLimitError:
                raise
            except ValueError as e:
                raise click.BadParameter(str(e), param_hint=hint) from None
    # Loading a set and its frontiers build and drop arrays of tens of MB: reuse their pages.
    with data_errors(ValueError), reuse_freed_memory():
        ms = load(directory)
        memory_guard(ms, "frontier")
        res = frontiers(ms, strategies=strategies, grid=grid_value, pareto=pareto_out is not None)
    click.echo(format_frontiers(res), nl=False)
    click.echo(f"wrote {write_result(res.to_json(), directory, 'frontier.json', json_out)}")
    if pareto_out is not None:
        import pyarrow.parquet as pq

        table = res.pareto_table()
        from otbench.files import atomic_path

        with atomic_path(pareto_out) as tmp:
            pq.write_table(table, tmp)
        click.echo(f"wrote {pareto_out} ({table.num_rows} Pareto points)")
