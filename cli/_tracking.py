"""`--log wandb|trackio|mlflow` and `--log-args k=v,...` on the commands that log a run.

`log_options` adds both options and refuses a bad value, a tracker that is
not installed or a store that does not answer (`otbench.tracking.preflight`)
before the command's work starts; the command then calls
`track` with a function building its `otbench.tracking.Record`, which runs
only when a tracker was asked for.
"""

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from otbench.tracking import add_bootstrap, add_frontier, add_leaderboard, add_metrics

from ._common import DataError, data_errors

__all__ = ["add_bootstrap", "add_frontier", "add_leaderboard", "add_metrics", "log_options",
           "track"]

_META = "otbench.log"


def log_options(f: Callable) -> Callable:
    """Add `--log TRACKER` and `--log-args K=V,...` to a command (innermost decorator)."""
    from otbench.tracking import TRACKERS

    @functools.wraps(f)
    def run(*args, log: str | None = None, log_args: str | None = None, **kwargs):
        if log is None and log_args is not None:
            raise DataError("--log-args needs --log TRACKER")
        if log is not None:
            from otbench.tracking import available, parse_log_args, preflight

            with data_errors(prefix="Error: "):
                parsed = parse_log_args(log, log_args)
                available(log)
            with data_errors():
                preflight(log, parsed)      # the store answers before the work, not after
            click.get_current_context().meta[_META] = (log, parsed)
        return f(*args, **kwargs)

    run = click.option(
        "--log-args", "log_args", default=None, metavar="K=V,...",
        help="The tracker run's arguments, lm-eval's --wandb_args form: project=...,name=... "
             "(wandb also entity, group, tags=a;b, mode, dir; mlflow tracking_uri).")(run)
    return click.option(
        "--log", "log", type=click.Choice(TRACKERS), default=None,
        help="Also log this run (config, provenance, headline tables and figures) to a tracker: "
             "wandb, trackio or mlflow (pip install 'otbench[track]').")(run)


def _plain(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    return value


def track(build: Callable[[Any], None], ms=None) -> None:
    """Log this command's run when `--log` was given: `build(record)` fills the headline
    scalars, tables and figures of a record that already holds the command's arguments and
    the provenance (the set's, with its content hash, and this otbench's). `ms`: the set,
    or the folder it was written to (loaded only when logging)."""
    ctx = click.get_current_context()
    spec = ctx.meta.get(_META)
    if spec is None:
        return
    if isinstance(ms, (str, Path)):
        from ._common import load_set

        ms = load_set(str(ms))
    from otbench.files import provenance
    from otbench.tracking import Record, log_record

    config = {k: _plain(v) for k, v in ctx.params.items() if k not in ("log", "log_args")}
    prov: dict[str, Any] = {"otbench": provenance(("jax", "numpy", spec[0]))}
    if ms is not None:
        from otbench.analysis.measurement import content_hash

        config["content_hash"] = content_hash(ms)
        config["synthetic"] = bool(ms.synthetic)
        prov["set"] = dict(ms.provenance)
    rec = Record(command=ctx.command_path.partition(" ")[2] or ctx.info_name, config=config,
                 provenance=prov)
    build(rec)
    import contextlib
    import sys

    # The trackers talk on stdout; it carries the command's own output (paths, tables).
    with data_errors(), contextlib.redirect_stdout(sys.stderr):
        where = log_record(spec[0], spec[1], rec)
    click.echo(f"logged {len(rec.scalars)} values, {len(rec.tables)} tables and "
               f"{len(rec.figures)} figures: {where}", err=True)


def _csv_rows(path: Path) -> list[dict[str, Any]]:
    """A report table's rows (its `#` lines are notes, such as the synthetic banner); numbers
    become floats, empty cells None."""
    import math

    from otbench.files import csv_records

    # note lines blanked, not dropped: a refusal's line number is the file's
    lines = ["" if ln.startswith("#") else ln for ln in path.read_text(encoding="utf-8").splitlines()]
    records = (r for r in csv_records("\n".join(lines) + "\n",
                                      lambda line, why: DataError(f"{path}, line {line}: {why}"))
               if r)
    header = next(records, [])
    out = []
    for cells in records:
        rec: dict[str, Any] = {}
        for k, v in zip(header, cells):
            try:
                x = float(v)
                rec[k] = x if math.isfinite(x) else None
            except (TypeError, ValueError):
                rec[k] = v if v != "" else None
        out.append(rec)
    return out


def report_record(rec, index: Path) -> None:
    """A report's run: OR / AD and β_match from its data/ (scalars and tables), every table of
    report.json from its CSV (the leaderboard is table19_otbench), every figure's PNG."""
    import json

    folder = Path(index).parent
    data = folder / "data"
    if (data / "metrics.json").is_file():
        add_metrics(rec, json.loads((data / "metrics.json").read_text(encoding="utf-8")))
    if (data / "frontier.json").is_file():
        add_frontier(rec, json.loads((data / "frontier.json").read_text(encoding="utf-8")))
    doc = json.loads((folder / "report.json").read_text(encoding="utf-8"))
    for t in doc.get("tables", []):
        rec.add_rows(t["name"], _csv_rows(folder / t["csv"]))
    for f in doc.get("figures", []):
        png = next((p for p in f.get("files", [f.get("file")]) if p and p.endswith(".png")), None)
        if png is not None:
            rec.figures[f["name"]] = folder / png


def probe_record(rec, summary) -> None:
    """A probe run's run: the set's counts, the engine's throughput and times, and OR / AD of
    the set it wrote (computed here, as `otbench metrics` does)."""
    from otbench.analysis import metrics
    from otbench.analysis.measurement import load

    from otbench.tracking import key

    rec.add_scalars({key("counts", k): v for k, v in summary.manifest["counts"].items()})
    r = summary.run
    rec.add_scalars({key("run", part, k): r[part][k] for part in ("think", "probe")
                     for k in ("generated", "tokens_per_s") if k in r.get(part, {})})
    rec.add_scalars({key("run", k): r.get(k) for k in ("engine_start_s", "total_s",
                                                       "cache_hit_rate")})
    add_metrics(rec, metrics(load(summary.out)))
