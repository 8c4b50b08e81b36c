"""Runs in the experiment tracker: `--log wandb|trackio|mlflow` with `--log-args k=v,...`.

`probe run`, `bench compare`, `bootstrap` and `report` log one run each: the
command's arguments and the provenance as the run's config, the headline
numbers as scalars (OR / AD, β_match, the leaderboard's gap areas and shares
with their intervals where present), the headline tables, and the figures.
The tracker's library is imported only when asked for (the `track` extra);
the values come from the result documents the command wrote.
"""

from ._args import KEYS, TRACKERS, TrackingError, parse_log_args
from ._backends import available, log_record, preflight
from ._record import Record, add_bootstrap, add_frontier, add_leaderboard, add_metrics, key

__all__ = [
    "KEYS", "TRACKERS", "Record", "TrackingError", "add_bootstrap", "add_frontier",
    "add_leaderboard", "add_metrics", "available", "key", "log_record", "parse_log_args",
    "preflight",
]
