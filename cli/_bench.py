"""`otbench split` and `otbench bench run|list|compare`: OTBench splits and method evaluation (docs/rules.md)."""

from pathlib import Path

import click

from ._common import argument_errors, result_path, write_result
from ._numbers import Count, Seed, reals
from ._tracking import add_leaderboard, log_options, track

def _errors():
    """Bad data, bad arguments and interface violations (`MethodError`): one line, exit 2."""
    return argument_errors()


def _numbers(value: str, what: str, *, spelled: bool = False) -> list[float]:
    out = reals(value, what, spelled=spelled)
    if not out:
        raise click.BadParameter("expected at least one number", param_hint=what)
    return out


def _load(directory: Path):
    """(set, stored question features or None) of a measurement set directory."""
    from otbench.analysis import load, load_table, read_manifest
    from otbench.analysis.bench import read_question_features

    ms = load(directory)
    stored = None
    if "question_features" in read_manifest(directory).get("tables", {}):
        stored = read_question_features(load_table(directory, "question_features"))
    return ms, stored


# -- otbench split ---------------------------------------------------------------------

@click.command("split")
@click.argument("directory", type=click.Path(path_type=Path))
@click.option("--seed", type=Seed(), default=None,
              help="Split seed (default 20260721, recorded in the set).")
@click.option("--ratios", default=None,
              help="train,validation,test ratios, normalized to sum 1 (default 0.6,0.2,0.2).")
@click.option("--from-file", "from_file", type=click.Path(dir_okay=False, path_type=Path),
              default=None, help="Apply a frozen split file instead of the seeded split.")
@click.option("--write-file", "write_file", type=click.Path(dir_okay=False, path_type=Path),
              default=None, help="Also freeze the resulting assignment to this split file.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Write the split set here instead of rewriting DIRECTORY in place.")
@click.option("--overwrite", is_flag=True, help="Replace an existing set at --out.")
def split_cmd(directory: Path, seed: int | None, ratios: str | None, from_file: Path | None,
              write_file: Path | None, out: Path | None, overwrite: bool) -> None:
    """Assign the question-level train/validation/test split of the set in DIRECTORY (docs/rules.md).

    Stratified by benchmark group and deterministic: a pure function of the
    seed, the ratios and each group's question ids. The split is stored in
    the set (its extra tables are kept); a split file overrides it.
    """
    from otbench.analysis import load_table, read_manifest, save
    from otbench.analysis.bench import (
        DEFAULT_RATIOS,
        DEFAULT_SEED,
        apply_split_file,
        assign_splits,
        ratios_iv,
        write_split_file,
    )
    from otbench.analysis.measurement import SPLITS

    if from_file is not None and (seed is not None or ratios is not None):
        raise click.UsageError("--from-file replaces the seeded split; drop --seed/--ratios")
    r = DEFAULT_RATIOS if ratios is None else _numbers(ratios, "'--ratios'")
    try:
        ratios_iv(r)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="'--ratios'") from None
    with _errors():
        from otbench.analysis import load

        ms = load(directory)
        if from_file is not None:
            ms = apply_split_file(ms, from_file)
        else:
            ms = assign_splits(ms, seed=DEFAULT_SEED if seed is None else seed, ratios=r)
        tables = {name: load_table(directory, name)
                  for name in sorted(read_manifest(directory).get("tables", {}))}
        target = directory if out is None else out
        from otbench.files import output_rules

        # In place (no --out) is this command's one write onto its input, on purpose.
        with output_rules(in_place=[directory] if out is None else []):
            save(ms, target, overwrite=overwrite or out is None, extra_tables=tables)
        if write_file is not None:
            write_split_file(ms, write_file)
    info = ms.provenance["split"]
    how = (f"from {info['file']}" if info["scheme"] == "file"
           else f"seed {info['seed']}, ratios {'/'.join(f'{x:g}' for x in info['ratios'])}")
    click.echo(f"split ({how}) -> {target}")
    click.echo(f"{'group':24s}  " + "  ".join(f"{s:>10s}" for s in SPLITS))
    for g, counts in info["counts"].items():
        click.echo(f"{g:24s}  " + "  ".join(f"{c:10d}" for c in counts))
    if write_file is not None:
        click.echo(f"wrote {write_file}")


# -- otbench bench ---------------------------------------------------------------------

@click.group("bench")
def bench_cmd() -> None:
    """OTBench: evaluate termination methods against the oracle frontiers (docs/rules.md)."""


def _sweep(thetas: str | None, theta_grid: int | None) -> dict:
    if thetas is not None and theta_grid is not None:
        raise click.UsageError("pass at most one of --thetas and --theta-grid")
    return {"thetas": None if thetas is None else _numbers(thetas, "'--thetas'", spelled=True),
            "theta_grid": theta_grid}


def _plugins_importable() -> None:
    """A plug-in module in the current directory imports -- after every installed one: the
    directory goes last on `sys.path`, so a `pandas.py` there never shadows the library."""
    import os
    import sys

    if os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())


def _file_name(method: str) -> str:
    """A method name as a file-name part (plug-in names may hold any character)."""
    import re

    return re.sub(r"[^A-Za-z0-9._-]+", "_", method).strip("._") or "method"


@bench_cmd.command("run")
@click.argument("directory", type=click.Path(path_type=Path))
@click.option("--method", "method", default=None,
              help="A built-in name (see `otbench bench list`), module:object, or "
                   "path/to/file.py:object.")
@click.option("--stops", "stops", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Instead of --method: a CSV of another tool's stops "
                   "(question,trajectory,stop_token; optional model, group) scored like a method.")
@click.option("--thetas", default=None, help="Comma-separated theta values.")
@click.option("--theta-grid", "theta_grid", type=Count(min=1), default=None,
              help="Number of points of the method's own theta sweep (default 21).")
@click.option("--split", "split", type=click.Choice(["test", "validation"]), default="test",
              show_default=True, help="Split to report on (the method is fit on train).")
@click.option("--features", default=None,
              help="Question features for learned methods: hashed (default), stored:NAME "
                   "(the set's question_features table), or hashed+stored:NAME.")
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path),
              default=None, help="Where to write the otbench.bench/1 document "
                                 "(default DIRECTORY/results/bench-<method>.json).")
def run_cmd(directory: Path, method: str | None, stops: Path | None, thetas: str | None,
            theta_grid: int | None, split: str, features: str | None,
            json_out: Path | None) -> None:
    """Evaluate one method on the set in DIRECTORY against its strategy's oracle frontier.

    Prints the gross points (thinking tokens only, the papers' rule) and the
    net points (plus the signal's cost per decision) against the same frontier.
    """
    from otbench.analysis.bench import evaluate, format_result, read_stops, small_split_warning

    if (method is None) == (stops is None):
        raise click.UsageError("give exactly one of --method and --stops")
    if stops is not None and (thetas is not None or theta_grid is not None or features):
        raise click.UsageError("--stops has one operating point: no --thetas, --theta-grid "
                               "or --features")
    _plugins_importable()
    sweep = _sweep(thetas, theta_grid)
    with _errors():
        ms, stored = _load(directory)
        if stops is not None:
            method = read_stops(stops, ms, split)
        res = evaluate(ms, method, split=split, stored_features=stored,
                       options=None if features is None else {"features": features}, **sweep)
    click.echo(format_result(res), nl=False)
    warning = small_split_warning(res)
    if warning is not None:
        click.echo(f"warning: {warning}", err=True)
    path = write_result(res.to_json(), directory, f"bench-{_file_name(res.method)}.json", json_out)
    click.echo(f"wrote {path}")


@bench_cmd.command("list")
def list_cmd() -> None:
    """The registered methods, each with its strategy, summary and how it runs online."""
    from otbench.analysis.methods import builtin_methods

    with _errors():
        for m in builtin_methods():
            click.echo(m.line())
    click.echo("plug-ins: --method package.module:Object (see docs/guides/otbench.md)")


@bench_cmd.command("compare")
@click.argument("directory", type=click.Path(path_type=Path))
@click.option("--method", "methods", multiple=True,
              help="A method to rank (repeatable): a built-in name, module:object, or "
                   "path/to/file.py:object. Default: every built-in.")
@click.option("--theta-grid", "theta_grid", type=Count(min=1), default=None,
              help="Number of points of each method's theta sweep (default 21).")
@click.option("--split", "split", type=click.Choice(["test", "validation"]), default="test",
              show_default=True)
@click.option("--features", default=None, help="Question features for the learned built-ins.")
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path),
              default=None, help="Also write one otbench.bench-compare/1 document here (the "
                                 "per-method otbench.bench/1 results always go to "
                                 "DIRECTORY/results/bench-<method>.json).")
@click.option("--leaderboard", "board_out", type=click.Path(file_okay=False, path_type=Path),
              default=None, help="Folder for leaderboard.md, .csv and .json "
                                 "(default DIRECTORY/results).")
@click.option("--replicates", "replicates", type=Count(min=0, max=1_000_000), default=2000,
              show_default=True,
              help="Bootstrap replicates of the leaderboard's 95% intervals (rank within the "
                   "strategy, gap area behind the best method, each method's own gap area with "
                   "its oracle frontier re-solved per replicate; two-stage paired draw at the "
                   "recorded seed 20260721, docs/rules.md); 0: no intervals.")
@log_options
def compare_cmd(directory: Path, methods: tuple[str, ...], theta_grid: int | None, split: str,
                features: str | None, json_out: Path | None, board_out: Path | None,
                replicates: int) -> None:
    """Rank built-in and plug-in methods on the set in DIRECTORY, per strategy: a leaderboard.

    Writes the leaderboard as Markdown, CSV and JSON, and each method's
    otbench.bench/1 result where `otbench report DIRECTORY` finds it.
    """
    from otbench.analysis.bench import compare_json, evaluate, leaderboard, leaderboard_block, methods_for

    from otbench.files import check_output, refuse_same_output, write_text_atomic

    _plugins_importable()
    specs = list(methods)
    folder = board_out if board_out is not None else result_path(directory, "")
    boards = [folder / name for name in ("leaderboard.json", "leaderboard.csv", "leaderboard.md")]
    with argument_errors():                     # refused before the methods run, not after
        for path in boards:
            check_output(path)
        # --json is one more output of the same command: never onto the leaderboard's files
        refuse_same_output(*boards, json_out)
    if len(set(specs)) != len(specs):
        raise click.BadParameter("a method is given twice", param_hint="'--method'")
    results = []
    with _errors():
        ms, stored = _load(directory)
        # each method resolved once; by default every registered one whose signals the set records
        chosen, skipped = methods_for(ms, specs or None, features=features)
        for name, why in skipped:
            click.echo(f"skipped {name}: {why} (`otbench simulate --field-signals --peer-signals` draws "
                       "synthetic ones)", err=True)
        for m in chosen:
            results.append(evaluate(ms, m, split=split, theta_grid=theta_grid, stored_features=stored))
        board = leaderboard(results, ms if replicates else None, replicates=max(1, replicates))
    names = [_file_name(r.method) for r in results]
    if len(set(names)) != len(names):
        raise click.UsageError("two methods share a name; give each plug-in its own `name`")
    with argument_errors():      # the methods' result files too, known once they ran; before any write
        refuse_same_output(*boards, *(result_path(directory, f"bench-{n}.json") for n in names), json_out)
    click.echo(board.format(), nl=False)         # its warnings included
    # Each result carries its leaderboard row (rank, intervals, warnings): the report shows them.
    blocks = [leaderboard_block(board, r.method) for r in results]
    for r, n, b in zip(results, names, blocks):
        write_result({**r.to_json(), "leaderboard": b}, directory, f"bench-{n}.json")
    click.echo(f"wrote {len(results)} results to {result_path(directory, 'bench-*.json')}")
    write_result(board.to_json(), directory, "leaderboard.json", folder / "leaderboard.json")
    write_text_atomic(folder / "leaderboard.csv", board.to_csv())
    write_text_atomic(folder / "leaderboard.md", board.to_markdown())
    click.echo(f"wrote {folder / 'leaderboard'}.md, .csv, .json")
    if json_out is not None:
        doc = compare_json(results)
        for d, b in zip(doc["results"], blocks):
            d["leaderboard"] = b
        write_result(doc, directory, "", json_out)
        click.echo(f"wrote {json_out}")
    track(lambda rec: add_leaderboard(rec, board.to_json()), ms)
