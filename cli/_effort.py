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
@click.option("--certify", "certify_level", default=None, metavar="LEVEL",
              help="Also run each cell's budget at LEVEL as the engine's own thinking cap (online "
                   "certify --method engine-budget on the cell's test trajectories; needs a probed "
                   "set and its engine) and write DIRECTORY/results/effort-certify.json.")
@click.option("--trajectories", type=Count(min=1), default=None,
              help="--certify: replay only the first N test trajectories of each cell.")
@click.option("--base-url", default=None, help="--certify on a served set: the server to replay on.")
@click.option("--api-key-env", default=None, help="--certify on a served set: the API key's variable.")
@click.option("--runner", "cap_runner", type=click.Choice(["v1", "v2"]), default=None,
              help="--certify on a served engine: its vLLM model runner.")
def effort_cmd(directory: Path, levels: dict, replicates: int, seed: int, confidence: float,
               fmt: str, out: Path | None, certify_level: str | None, trajectories: int | None,
               base_url: str | None, api_key_env: str | None, cap_runner: str | None) -> None:
    """Effort levels for the set in DIRECTORY: per model and benchmark group, the smallest
    thinking-token cap whose paired bootstrap interval lies within each level's delta of full
    thinking (docs/rules.md)."""
    from otbench.analysis.effort import effort_map, format_effort, render
    from otbench.analysis.measurement import load

    from otbench.files import write_text_atomic

    from ._common import argument_errors, result_path

    if certify_level is not None and certify_level not in levels:       # before any work
        raise click.BadParameter(f"no level {certify_level!r} (levels: {', '.join(levels)})",
                                 param_hint="'--certify'")
    if certify_level is not None:           # the certificate's path too, before the map and the engine
        from otbench.files import check_output

        with argument_errors():
            check_output(result_path(directory, "effort-certify.json"))
    with argument_errors():
        ms = load(directory)
        em = effort_map(ms, levels, replicates=replicates, seed=seed, confidence=confidence)
        path = result_path(directory, f"{_NAME[fmt]}.{_EXT[fmt]}", out)
        write_text_atomic(path, render(em, fmt))
    click.echo(format_effort(em), nl=False)
    click.echo(f"wrote {path}")
    if certify_level is None:
        return
    from otbench.probe.online import cap_line
    from otbench.workflows import certify_effort

    from ._common import write_result

    with argument_errors():
        doc = certify_effort(directory, ms, em.to_json(), certify_level, trajectories=trajectories,
                             server={"base_url": base_url, "api_key_env": api_key_env}, runner=cap_runner)
    cpath = write_result(doc, directory, "effort-certify.json")
    for c in doc["cells"]:
        head = f"{c['model']}/{c['group']} {certify_level} = {c['budget']} tokens: "
        click.echo(head + (cap_line(c["certificate"]) if c["certificate"] else c["why"]))
    click.echo(f"wrote {cpath}")
