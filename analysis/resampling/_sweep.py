"""Sensitivity sweep: bootstrap and both thinning analyses as one job, flat tables for CSV (docs/rules.md)."""

from collections.abc import Callable, Sequence
from typing import Any

from otbench.analysis.measurement import MeasurementSet

from otbench.files import csv_text

from ._bootstrap import PERCENTILES, REPLICATES, SEED, bootstrap
from ._replicates import BOOT_METRICS
from ._thinning import DRAWS, THINNING_METRICS, thinning

SCHEMA = "otbench.sweep/1"


def sweep(ms: MeasurementSet, *, probes: Sequence[int] | None = None,
          trajectories: Sequence[int] | None = None, draws: int = DRAWS,
          replicates: int = REPLICATES, seed: int = SEED, frontiers: bool = False,
          grid: int | Sequence[Any] = 101, batch: int | None = None, workers: int | None = None,
          checkpoint_dir: Any = None, checkpoint_every: int = 10, resume: bool = False,
          percentiles: Sequence[float] = PERCENTILES,
          progress: Callable[[int], None] | None = None) -> dict[str, Any]:
    """Bootstrap (optionally with frontiers), probe thinning and trajectory thinning of `ms`.

    Arguments are those of `bootstrap` and `thinning` (one seed for both).
    Returns `{"schema": "otbench.sweep/1", "bootstrap": <otbench.bootstrap/1>,
    "thinning": <otbench.thinning/1>}`; `sweep_tables` flattens it.
    """
    boot = bootstrap(ms, replicates=replicates, seed=seed, frontiers=frontiers, grid=grid,
                     batch=batch, workers=workers, checkpoint_dir=checkpoint_dir,
                     checkpoint_every=checkpoint_every, resume=resume, percentiles=percentiles,
                     progress=progress)
    thin = thinning(ms, probes=probes, trajectories=trajectories, draws=draws, seed=seed,
                    percentiles=percentiles)
    return {"schema": SCHEMA, "synthetic": bool(ms.synthetic), "bootstrap": boot.to_json(),
            "thinning": thin}


def sweep_tables(doc: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """One flat table (list of rows) per reported table of a `sweep` document.

    Tables: `bootstrap_<metric>` (model, group, lo, hi, estimate; "Avg." rows
    and columns as in Tables 4-6), with frontiers `bootstrap_frontiers`
    (strategy, beta, lo, median, hi) and `bootstrap_frontier_summary`
    (strategy, quantity, lo, hi), `probe_thinning` (probes, model, group,
    or, ad, retention) and `trajectory_thinning` (trajectories, or_lo, or_hi,
    mean_or, ad_lo, ad_hi, mean_ad). Values are fractions; None is empty.
    """
    out: dict[str, list[dict[str, Any]]] = {}
    b = doc["bootstrap"]
    est = {(c["model"], c["group"]): c["estimate"] for c in b["cells"]}
    by_model, by_group = (b["estimate"].get(k, {}) for k in ("by_model", "by_group"))
    for k in BOOT_METRICS:
        rows = [{"model": c["model"], "group": c["group"], "lo": c[k][0], "hi": c[k][1],
                 "estimate": est[(c["model"], c["group"])][k]} for c in b["cells"]]
        rows += [{"model": m, "group": "Avg.", "lo": v[k][0], "hi": v[k][1],
                  "estimate": by_model.get(m, {}).get(k)} for m, v in b["by_model"].items()]
        rows += [{"model": "Avg.", "group": g, "lo": v[k][0], "hi": v[k][1],
                  "estimate": by_group.get(g, {}).get(k)} for g, v in b["by_group"].items()]
        rows.append({"model": "Avg.", "group": "Avg.", "lo": b["macro"][k][0], "hi": b["macro"][k][1],
                     "estimate": b["estimate"]["macro"][k]})
        out[f"bootstrap_{k}"] = rows
    f = b.get("frontiers")
    if f is not None:
        out["bootstrap_frontiers"] = [
            {"strategy": s, "beta": beta, "lo": f[s]["lo"][i], "median": f[s]["median"][i],
             "hi": f[s]["hi"][i]}
            for s in ("dr", "fb", "dee") if s in f for i, beta in enumerate(f["grid"])]
        summary = [{"strategy": "all", "quantity": "a_full", "lo": f["a_full"][0], "hi": f["a_full"][1]}]
        summary += [{"strategy": s, "quantity": q, "lo": f[s][q][0], "hi": f[s][q][1]}
                    for s in ("dr", "fb", "dee") if s in f for q in ("beta_match", "ceiling", "beta_sat")]
        out["bootstrap_frontier_summary"] = summary
    t = doc["thinning"]
    rows = []
    for m, e in t["probes"].items():
        rows += [dict(probes=int(m), model=c["model"], group=c["group"],
                      **{k: c[k] for k in THINNING_METRICS}) for c in e["cells"]]
        rows += [dict(probes=int(m), model=mo, group="Avg.", **v) for mo, v in e["by_model"].items()]
        rows += [dict(probes=int(m), model="Avg.", group=g, **v) for g, v in e["by_group"].items()]
        rows.append(dict(probes=int(m), model="Avg.", group="Avg.",
                         **{k: e[k] for k in THINNING_METRICS}))
    out["probe_thinning"] = rows
    out["trajectory_thinning"] = [
        {"trajectories": int(r), "or_lo": e["or"][0], "or_hi": e["or"][1], "mean_or": e["mean_or"],
         "ad_lo": e["ad"][0], "ad_hi": e["ad"][1], "mean_ad": e["mean_ad"]}
        for r, e in t["trajectories"].items()]
    return out


def sweep_unit(table: str, column: str) -> str | None:
    """The unit of a column of a `sweep_tables` table (None: a label)."""
    if column in ("model", "group", "strategy", "quantity"):
        return None
    if column in ("probes", "trajectories"):
        return "count"
    if table == "bootstrap_tokens":
        return "tokens"
    return "fraction"


def sweep_header(table: str, column: str) -> str:
    """A column's header with its unit, as in the CSV files: ``lo (fraction)``."""
    unit = sweep_unit(table, column)
    return column if unit is None else f"{column} ({unit})"


def sweep_csv(table: str, rows: list[dict[str, Any]]) -> str:
    """One `sweep_tables` table as CSV text (units in the headers; None is empty)."""
    names = list(rows[0]) if rows else []
    return csv_text([sweep_header(table, c) for c in names], ([r[c] for c in names] for r in rows))
