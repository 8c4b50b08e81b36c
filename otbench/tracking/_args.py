"""`--log TRACKER --log-args k=v,k=v`: which tracker, and the arguments of its run.

The argument string follows lm-eval's `--wandb_args` habit, restated from
lm-evaluation-harness `lm_eval/utils.py` (`simple_parse_args_string`,
`handle_arg_string`): split on commas, drop empty pieces, split each piece at
its first `=`, and read `true`/`false` as booleans, digit strings as integers,
other numbers as floats, anything else as text. Where otbench departs: a piece
without `=` or with an empty key, a key given twice, and a key the tracker
does not take are refused in one line naming the piece (lm-eval fails with a
Python unpacking error on the first, keeps the last value of the second and
passes the third to `wandb.init`).
"""

from typing import Any

from otbench.errors import OtbenchError

TRACKERS = ("wandb", "trackio", "mlflow")

# The keys each tracker's run takes (the names of its own init arguments, plus `project`
# and `name` everywhere); `tags` is a `;`-separated list (a comma separates arguments).
KEYS = {
    "wandb": ("project", "name", "entity", "group", "job_type", "tags", "notes", "mode", "dir",
              "id", "resume"),
    "trackio": ("project", "name", "group", "space_id", "server_url", "dataset_id", "resume"),
    "mlflow": ("project", "name", "tracking_uri", "tags", "description"),
}


class TrackingError(OtbenchError, ValueError):
    """A bad `--log` / `--log-args` value, a tracker that is not installed, or a failed log."""


def _value(text: str) -> Any:
    if text.lower() == "true":
        return True
    if text.lower() == "false":
        return False
    if text.isnumeric():
        return int(text)
    try:
        return float(text)
    except ValueError:
        return text


def parse_log_args(tracker: str, text: str | None) -> dict[str, Any]:
    """The run arguments of `tracker` from `k=v,k=v` (lm-eval's `--wandb_args` form)."""
    if tracker not in TRACKERS:
        raise TrackingError(f"`log` must be one of {', '.join(TRACKERS)}, got {tracker!r}")
    out: dict[str, Any] = {}
    for piece in (p for p in (text or "").strip().split(",") if p):
        key, eq, value = piece.partition("=")
        key = key.strip()
        if not eq or not key:
            raise TrackingError(f"`log_args` piece {piece!r} is not key=value")
        if key in out:
            raise TrackingError(f"`log_args` gives {key!r} twice")
        if key not in KEYS[tracker]:
            raise TrackingError(f"`log_args` key {key!r} is not one {tracker} takes "
                                f"({', '.join(KEYS[tracker])})")
        out[key] = _value(value.strip())
    return out
