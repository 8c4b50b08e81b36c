"""The three trackers, each loaded only when asked for: W&B, Trackio, MLflow.

Each logs one `Record` as one run: the config (the command, its arguments and
the provenance), the headline scalars (W&B: the run summary; Trackio and
MLflow: step 0), the tables and the figures. Each returns one line saying
where the run went.
"""

import json
import os
from typing import Any

from ._args import TrackingError
from ._record import Record

PROJECT = "otbench"


def _import(tracker: str):
    import importlib

    try:
        return importlib.import_module(tracker)
    except ImportError:
        package = {"mlflow": "mlflow-skinny (or mlflow)"}.get(tracker, tracker)
        raise TrackingError(f"`--log {tracker}` needs the {package} package "
                            f"(pip install 'otbench[track]')") from None


def available(tracker: str) -> None:
    """Refuse, before any work, a tracker whose library is not installed."""
    import importlib.util

    if importlib.util.find_spec(tracker) is None:
        _import(tracker)


REACH_S = 10.0
"""Seconds a tracker's store has to answer the check before the work (`preflight`)."""


def preflight(tracker: str, args: dict[str, Any]) -> None:
    """Refuse, before any work, a tracker run that could not be logged after it.

    The library is imported (not only found: a broken install fails here); W&B online and a
    Trackio `server_url` must answer within `REACH_S` seconds; and MLflow's store
    (`tracking_uri`, else `MLFLOW_TRACKING_URI`, else MLflow's default) is opened and asked
    for one experiment within `REACH_S` seconds: a server that does not answer, a store whose
    backend is not installed (MLflow's default SQLite store needs SQLAlchemy, which
    mlflow-skinny leaves out) or a path that cannot be written is one line now, not a hang
    or a failure once the work is done. MLflow's own retries are bounded too (its
    `MLFLOW_HTTP_REQUEST_*` settings, where the user set none), so a server that goes away
    during the work costs seconds at the end, not minutes.
    """
    mod = _import(tracker)
    if tracker == "mlflow":
        _mlflow_preflight(mod, args)
    elif tracker == "wandb":
        # online (W&B's default) logs to its server: that server must answer first
        mode = str(args.get("mode") or os.environ.get("WANDB_MODE") or "online")
        if mode not in ("offline", "disabled", "dryrun"):
            base = os.environ.get("WANDB_BASE_URL") or str(mod.Settings().base_url)
            _deadline(f"wandb server {base}", lambda: _reach(base),
                      "start it, or log offline: --log-args mode=offline")
    elif tracker == "trackio" and args.get("server_url"):
        url = str(args["server_url"])
        _deadline(f"trackio server {url}", lambda: _reach(url), "name a reachable server_url")


def _deadline(what: str, fn, fix: str = "name a usable tracking_uri in --log-args") -> None:
    """`fn()` in a daemon thread, refused when it fails or has not returned after `REACH_S`."""
    import threading

    box: list[BaseException | None] = []

    def run() -> None:
        try:
            fn()
            box.append(None)
        except BaseException as e:  # noqa: BLE001  (reported below, in one line)
            box.append(e)

    t = threading.Thread(target=run, name="otbench-tracker-check", daemon=True)
    t.start()
    t.join(REACH_S)
    if not box:
        raise TrackingError(f"{what}: no answer within {REACH_S:.0f} s; nothing was run ({fix})")
    e = box[0]
    if e is not None:
        msg = " ".join(str(e).split())[:300]
        raise TrackingError(f"{what}: cannot be used ({type(e).__name__}: {msg}); nothing "
                            f"was run ({fix})")


def _reach(uri: str) -> None:
    """An HTTP answer (any status) from the server at `uri`."""
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(urllib.request.Request(uri, method="GET"),  # noqa: S310
                                    timeout=REACH_S):
            pass
    except urllib.error.HTTPError:
        pass                        # it answered: a server is there (auth is MLflow's to check)


def _mlflow_preflight(mlflow, args: dict[str, Any]) -> None:
    from urllib.parse import urlsplit

    # (seconds of silence per request, not a whole upload's time: a figure still uploads)
    for name, value in (("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "2"),
                        ("MLFLOW_HTTP_REQUEST_TIMEOUT", "30")):
        os.environ.setdefault(name, value)
    try:
        uri = str(args["tracking_uri"]) if "tracking_uri" in args else mlflow.get_tracking_uri()
    except Exception as e:  # noqa: BLE001  (the library's own error, one line)
        raise TrackingError(f"mlflow: no tracking store ({type(e).__name__}: {e})") from None
    what = f"mlflow tracking store {uri}"
    if urlsplit(uri).scheme in ("http", "https"):
        _deadline(what, lambda: _reach(uri))
    _deadline(what, lambda: mlflow.MlflowClient(tracking_uri=uri).search_experiments(max_results=1))


def _config(rec: Record) -> dict[str, Any]:
    return {"command": rec.command, "args": rec.config, "provenance": rec.provenance}


def log_record(tracker: str, args: dict[str, Any], rec: Record) -> str:
    """Log `rec` as one run of `tracker` (`args` from `parse_log_args`); where it went."""
    log = {"wandb": _wandb, "trackio": _trackio, "mlflow": _mlflow}[tracker]
    mod = _import(tracker)
    try:
        return log(mod, dict(args), rec)
    except TrackingError:
        raise
    except Exception as e:          # the tracker's own failure (no network, bad project, ...)
        raise TrackingError(f"{tracker}: logging the run failed: {type(e).__name__}: {e}") \
            from None


def _wandb(wandb, args: dict[str, Any], rec: Record) -> str:
    init = {"project": PROJECT, "name": None, **args}
    if isinstance(init.get("tags"), str):
        init["tags"] = [t for t in init["tags"].split(";") if t]
    # console off: the run must not capture otbench's stdout (commands print paths there).
    run = wandb.init(config=_config(rec), settings=wandb.Settings(console="off"), **init)
    try:
        for k, v in rec.scalars.items():
            run.summary[k] = v
        media = {f"tables/{n}": wandb.Table(columns=cols, data=rows)
                 for n, (cols, rows) in rec.tables.items()}
        media |= {f"figures/{n}": wandb.Image(str(p)) for n, p in rec.figures.items()}
        if media:
            run.log(media)
        where = run.url or os.path.dirname(run.dir)
    finally:
        run.finish()
    return f"wandb run {run.id} -> {where}"


def _trackio(trackio, args: dict[str, Any], rec: Record) -> str:
    init = {"project": PROJECT, "name": None, **args}
    run = trackio.init(config=_config(rec), auto_log_cpu=False, auto_log_gpu=False, **init)
    try:
        values: dict[str, Any] = dict(rec.scalars)
        values |= {f"tables/{n}": trackio.Table(columns=cols, data=rows)
                   for n, (cols, rows) in rec.tables.items()}
        values |= {f"figures/{n}": trackio.Image(p) for n, p in rec.figures.items()}
        trackio.log(values, step=0)
    finally:
        trackio.finish()
    return f"trackio run {run.name} in project {init['project']}"


def _mlflow(mlflow, args: dict[str, Any], rec: Record) -> str:
    if "tracking_uri" in args:
        mlflow.set_tracking_uri(str(args["tracking_uri"]))
    mlflow.set_experiment(str(args.get("project", PROJECT)))
    with mlflow.start_run(run_name=args.get("name"), description=args.get("description")) as run:
        mlflow.log_params({f"args.{k}": _param(v) for k, v in rec.config.items()}
                          | {"command": rec.command})
        mlflow.log_dict(_config(rec), "config.json")
        mlflow.log_dict(rec.provenance, "provenance.json")
        if rec.scalars:
            mlflow.log_metrics(rec.scalars, step=0)
        for n, (cols, rows) in rec.tables.items():
            mlflow.log_table({c: [r[i] for r in rows] for i, c in enumerate(cols)},
                             artifact_file=f"tables/{n}.json")
        for p in rec.figures.values():
            mlflow.log_artifact(os.fspath(p), "figures")
    return f"mlflow run {run.info.run_id} -> {mlflow.get_tracking_uri()}"


def _param(value: Any) -> str:
    """An MLflow parameter: text (JSON for lists and dicts), at most MLflow's 6000 characters."""
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text[:6000]
