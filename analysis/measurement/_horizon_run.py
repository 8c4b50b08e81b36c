"""A matched-horizon run on disk and as dense arrays (docs/rules.md): the contract between `otbench horizon run` and `analyze`.

Run directory (written by `otbench.probe.horizon._run`)::

    DIR/horizon.json          manifest: schema, configuration, arms, horizons,
                              closure ids, option spellings, provenance, counts,
                              sha256 of both tables
    DIR/trajectories.parquet  one row per (arm, item, replicate): prompt and
                              reasoning ids, terminal length `L`, natural
                              termination, the natural answer and its grade
    DIR/readouts.parquet      one row per candidate-logit readout (`kind`):
                              "stop"     the reasoning cut at horizon `B`
                                         (the complete block when `L <= B`),
                              "terminal" the complete block replayed,
                              "matched"  the upper arm cut at the lower arm
                                         `variant`'s terminal length,
                              "control"  a length-matched prefix control
                                         (`variant`: random, swap, shuffle);
                              in a readout `context` ("policy": the arm's
                              own prompt; "common": the common arm's prompt)

A readout row stores `logp`, the log-probability of each option letter at
the first answer position (log-sum-exp over the letter's one-token
spellings; `-inf` for a letter without one), in option order A, B, ...;
every score (`M`, `q`, argmax, log loss, Brier) is computed from it by
`_horizon_kernels.readout_scores`. The greedy generated-answer continuation
(`cont_*` columns) is the behavioural check; a malformed answer is a parse
failure and counts as wrong.

`load_run` reads a run into `HorizonRun`: arrays indexed `[arm, item, rep]`
(and `[..., horizon]`), padded where an arm lacks a replicate (`obs` False)
or a readout is absent (`avail` False), never with a silent zero.
"""

import dataclasses
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from otbench.errors import OtbenchError
from otbench.files import arrow_file, atomic_dir, open_regular, read_json, sha256_file, sha256_stream

from ._build import MeasurementSetError

RUN_SCHEMA = "otbench.horizon-run/1"
MANIFEST = "horizon.json"
TRAJ_FILE = "trajectories.parquet"
READ_FILE = "readouts.parquet"
CONTEXTS = ("policy", "common")
KINDS = ("stop", "terminal", "matched", "control")
CONTROLS = ("random", "swap", "shuffle")
LETTERS = "ABCDEFGHIJ"

_I32_LIST = pa.list_(pa.int32())
TRAJ_COLUMNS: dict[str, pa.DataType] = {
    "model": pa.string(), "arm": pa.string(), "group": pa.string(), "dataset": pa.string(),
    "question": pa.string(), "replicate": pa.int32(), "seed": pa.int64(),
    "gold": pa.string(), "n_options": pa.int32(), "scripted": pa.bool_(),
    "prompt": _I32_LIST, "thinking": _I32_LIST, "L": pa.int32(), "finished": pa.bool_(),
    "stop_id": pa.int32(), "answer": _I32_LIST, "answer_letter": pa.string(),
    "y": pa.int8(), "y_status": pa.string(),
}
"""Columns of ``trajectories.parquet``; `answer_letter` is null when the natural answer
does not parse (then `y = 0` and `y_status` says why)."""
READ_COLUMNS: dict[str, pa.DataType] = {
    "arm": pa.string(), "group": pa.string(), "question": pa.string(), "replicate": pa.int32(),
    "context": pa.string(), "kind": pa.string(), "variant": pa.string(), "B": pa.int32(),
    "length": pa.int32(), "terminal": pa.bool_(), "logp": pa.list_(pa.float64()),
    "M": pa.float64(), "argmax": pa.string(), "correct": pa.bool_(),
    "cont": _I32_LIST, "cont_letter": pa.string(), "cont_correct": pa.bool_(),
    "cont_status": pa.string(), "donor": pa.string(), "input_sha256": pa.string(),
}
"""Columns of ``readouts.parquet``; `cont*` are null when continuations were off,
`donor` names the swap control's source trajectory ("group/question/arm/replicate")."""


class HorizonDataError(OtbenchError, ValueError):
    """A run directory that breaks the format; the message names the file, row and rule."""


class Readouts(NamedTuple):
    """Candidate-logit readouts on a grid; leading axes as documented where used.

    Attributes:
      avail: bool: the readout exists.
      logp: float64[..., option]: per-option log-probabilities (`-inf`: none).
      length: int64: reasoning tokens replayed.
      terminal: bool: a completed reasoning block was replayed.
      cont_avail: bool: a greedy continuation exists.
      cont_correct: bool: the continuation parsed to the gold letter.
      cont_parsed: bool: the continuation parsed to some letter.
    """

    avail: np.ndarray
    logp: np.ndarray
    length: np.ndarray
    terminal: np.ndarray
    cont_avail: np.ndarray
    cont_correct: np.ndarray
    cont_parsed: np.ndarray


@dataclasses.dataclass(frozen=True)
class HorizonRun:
    """A matched-horizon run as dense arrays (see the module docstring).

    Attributes:
      manifest: the run's ``horizon.json``.
      arms: arm names (axis `arm`), in manifest order.
      groups: benchmark groups; `item_group` int64[item] indexes them.
      items: (group, question) per item, sorted.
      R: largest replicate count (axis `rep`).
      horizons: the sorted `B` of the "stop" readouts (axis `horizon`).
      control_horizons: the sorted `B` of the "control" readouts.
      gold: int64[item] gold option index; `n_options` int64[item].
      obs: bool[arm, item, rep] the trajectory exists.
      L: int64[arm, item, rep] terminal reasoning length (0 where absent).
      finished: bool[arm, item, rep] ended by itself (not at the limit).
      y: int8[arm, item, rep] natural answer correct (parse failure: 0).
      parsed: bool[arm, item, rep] the natural answer parsed to a letter.
      letter: int64[arm, item, rep] that letter's option index (-1: none).
      stop: context -> Readouts[arm, item, rep, horizon].
      terminal: context -> Readouts[arm, item, rep].
      matched: lower arm -> (upper arm, Readouts[item, rep]) (common context).
      control: variant -> Readouts[arm, item, rep, control_horizon] (policy context).
    """

    manifest: dict[str, Any]
    arms: tuple[str, ...]
    groups: tuple[str, ...]
    items: tuple[tuple[str, str], ...]
    item_group: np.ndarray
    R: int
    horizons: tuple[int, ...]
    control_horizons: tuple[int, ...]
    gold: np.ndarray
    n_options: np.ndarray
    obs: np.ndarray
    L: np.ndarray
    finished: np.ndarray
    y: np.ndarray
    parsed: np.ndarray
    letter: np.ndarray
    stop: dict[str, Readouts]
    terminal: dict[str, Readouts]
    matched: dict[str, tuple[str, Readouts]]
    control: dict[str, Readouts]

    @property
    def options(self) -> int:
        """Largest option count (the `option` axis of `logp`)."""
        return int(self.n_options.max()) if self.n_options.size else 0

    @property
    def valid(self) -> np.ndarray:
        """bool[item, option]: option `o` exists for item `i`."""
        return np.arange(self.options)[None, :] < self.n_options[:, None]

    def arm(self, name: str) -> int:
        if name not in self.arms:
            raise HorizonDataError(f"arm {name!r} is not in the run (arms: {', '.join(self.arms)})")
        return self.arms.index(name)


def _read_table(path: Path, columns: Mapping[str, pa.DataType],
                sha256: tuple[str, str] | None = None) -> pa.Table:
    """The table at `path`, opened once (`open_regular`: a FIFO, device or folder is named for
    what it is), its columns checked; `sha256`: (manifest key, digest) its bytes must match."""
    with open_regular(path, what="a Parquet table",
                      fail=lambda why: HorizonDataError(f"{path}: {why}")) as f:
        if sha256 is not None and sha256_stream(f) != sha256[1]:
            raise HorizonDataError(f"{path}: sha256 differs from the manifest's {sha256[0]} "
                                   f"(the file changed after the run)")
        f.seek(0)
        try:
            with arrow_file(f) as src, pq.ParquetFile(src) as pf:
                t = pf.read()
        except Exception as e:   # pyarrow raises several types for a bad file
            raise HorizonDataError(f"{path}: not a readable Parquet file ({e})") from None
    for name, typ in columns.items():
        if name not in t.column_names:
            raise HorizonDataError(f"{path}: missing column {name!r}")
        if t.schema.field(name).type != typ:
            raise HorizonDataError(f"{path}: column {name!r} must be {typ}, got "
                                   f"{t.schema.field(name).type}")
    return t


def _replaceable_run(path: Path) -> bool:
    if not any(path.iterdir()):
        return True
    try:
        return read_manifest(path).get("schema") == RUN_SCHEMA
    except HorizonDataError:
        return False


def _run_foreign(path: Path) -> list[str]:
    """Entries of the run at `path` that are not the run's own tables and manifest."""
    return sorted(e.name for e in path.iterdir() if e.name not in (MANIFEST, TRAJ_FILE, READ_FILE)
                  and ".tmp-" not in e.name)


def read_manifest(path: str | os.PathLike) -> dict[str, Any]:
    """The manifest of the run in `path` (schema checked)."""
    p = Path(path) / MANIFEST
    if not p.exists():          # a FIFO or device there is read_json's to refuse by name
        raise HorizonDataError(f"{p}: no such file (not a horizon run directory)")
    try:
        doc = read_json(p)
    except MeasurementSetError as e:
        raise HorizonDataError(str(e)) from None
    if not isinstance(doc, dict) or doc.get("schema") != RUN_SCHEMA:
        got = doc.get("schema") if isinstance(doc, dict) else None
        raise HorizonDataError(f"{p}: schema must be {RUN_SCHEMA!r}, got {got!r}")
    _manifest_shape(p, doc)
    return doc


def _manifest_shape(p: Path, man: Mapping[str, Any]) -> None:
    """Types of the manifest keys the analysis reads (a tampered manifest is one line)."""
    def bad(rule: str):
        raise HorizonDataError(f"{p}: {rule}")

    def count(v: Any) -> bool:
        return type(v) is int and v >= 0

    arms = man.get("arms", [])
    if not isinstance(arms, list) or not all(
            isinstance(a, dict) and isinstance(a.get("name"), str) and a["name"] for a in arms):
        bad(f"'arms' must be a list of objects with a non-empty string 'name', got "
            f"{json.dumps(arms)[:60]}")
    names = [a["name"] for a in arms]
    if len(set(names)) != len(names):
        bad("'arms' names an arm twice")
    if "replicates" in man and not (count(man["replicates"]) and man["replicates"] >= 1):
        bad(f"'replicates' must be an integer >= 1, got {json.dumps(man['replicates'])[:60]}")
    for key in ("horizons",):
        if key in man and not (isinstance(man[key], list) and all(count(b) for b in man[key])):
            bad(f"'{key}' must be a list of integers >= 0, got {json.dumps(man[key])[:60]}")
    matched = man.get("matched", [])
    if not isinstance(matched, list) or not all(
            isinstance(m, dict) and m.get("lower") in names and m.get("upper") in names
            for m in matched):
        bad("'matched' must be a list of {lower, upper} naming arms of the run")
    if man.get("common_arm") is not None and man["common_arm"] not in names:
        bad(f"'common_arm' {json.dumps(man['common_arm'])[:60]} is not an arm of the run")
    if "synthetic" in man and not isinstance(man["synthetic"], bool):
        bad("'synthetic' must be true or false")
    counts = man.get("counts")
    if counts is not None and not (isinstance(counts, dict) and all(
            count(counts.get(k)) for k in ("trajectories", "readouts"))):
        bad("'counts' must be {trajectories: int >= 0, readouts: int >= 0}")
    for key in ("trajectories_sha256", "readouts_sha256"):
        if man.get(key) is not None and not isinstance(man[key], str):
            bad(f"'{key}' must be a string")


def _logp_matrix(col: list, where, O: int) -> np.ndarray:
    out = np.full((len(col), O), -np.inf, dtype=np.float64)
    for j, v in enumerate(col):
        if v is None or len(v) > O:
            raise HorizonDataError(f"{where(j)}: `logp` must list one value per option")
        out[j, :len(v)] = np.asarray(v, dtype=np.float64)
    return out


def _empty(shape: tuple[int, ...], O: int) -> Readouts:
    return Readouts(avail=np.zeros(shape, bool), logp=np.full(shape + (O,), -np.inf),
                    length=np.zeros(shape, np.int64), terminal=np.zeros(shape, bool),
                    cont_avail=np.zeros(shape, bool), cont_correct=np.zeros(shape, bool),
                    cont_parsed=np.zeros(shape, bool))


def load_run(path: str | os.PathLike, *, verify: bool = True) -> HorizonRun:
    """Read and check a run directory (`verify`: the tables' sha256 against the manifest).

    Every row is checked as it is placed into the dense `[arm, item, replicate(, B)]`
    arrays; the first bad row raises `HorizonDataError` naming the file and row.
    """
    root = Path(path)
    man = read_manifest(root)
    def want(key: str) -> tuple[str, str] | None:
        return (key, man[key]) if verify and man.get(key) else None
    tt = _read_table(root / TRAJ_FILE, TRAJ_COLUMNS, want("trajectories_sha256")).to_pydict()
    rt = _read_table(root / READ_FILE, READ_COLUMNS, want("readouts_sha256")).to_pydict()
    arms = tuple(a["name"] for a in man.get("arms", []))
    if not arms:
        raise HorizonDataError(f"{root / MANIFEST}: no arms")
    nt = len(tt["arm"])
    counts = man.get("counts")
    if counts is not None:
        for key, name, rows in (("trajectories", TRAJ_FILE, nt), ("readouts", READ_FILE,
                                                                  len(rt["arm"]))):
            if counts[key] != rows:
                raise HorizonDataError(f"{root / MANIFEST}: counts.{key} is {counts[key]} but "
                                       f"{name} has {rows} rows")
    items = sorted({(g, q) for g, q in zip(tt["group"], tt["question"])})
    item_ix = {it: i for i, it in enumerate(items)}
    groups = tuple(sorted({g for g, _ in items}))
    R = (max(tt["replicate"]) + 1) if nt else 0
    if "replicates" in man and R > man["replicates"]:
        j = tt["replicate"].index(R - 1)
        raise HorizonDataError(f"{root / TRAJ_FILE}: row {j + 1}: replicate {R - 1} is beyond "
                               f"the manifest's {man['replicates']} replicates")
    A, I = len(arms), len(items)
    gold, nopt, obs, L, fin, y, parsed, letter = _trajectory_arrays(root, tt, arms, item_ix, A, I, R)
    O = int(nopt.max()) if I else 0
    stop_B, ctrl_B, stop, term, matched, matched_upper, control = _readout_arrays(
        root, rt, man, arms, item_ix, obs, L, A, I, R, O)
    return HorizonRun(
        manifest=man, arms=arms, groups=groups, items=tuple(items),
        item_group=np.asarray([groups.index(g) for g, _ in items], np.int64), R=R,
        horizons=tuple(int(b) for b in stop_B), control_horizons=tuple(int(b) for b in ctrl_B),
        gold=gold, n_options=nopt, obs=obs, L=L, finished=fin, y=y, parsed=parsed, letter=letter,
        stop=stop, terminal=term,
        matched={v: (matched_upper[v], m) for v, m in matched.items()}, control=control)


def _trajectory_arrays(root: Path, tt: dict, arms: tuple, item_ix: dict, A: int, I: int,
                       R: int) -> tuple[np.ndarray, ...]:
    """Dense per-trajectory arrays (gold, options, observed, L, finished, y, parsed, letter)."""
    nt = len(tt["arm"])
    gold = np.full(I, -1, np.int64)
    nopt = np.zeros(I, np.int64)
    obs = np.zeros((A, I, R), bool)
    L = np.zeros((A, I, R), np.int64)
    fin = np.zeros((A, I, R), bool)
    y = np.zeros((A, I, R), np.int8)
    parsed = np.zeros((A, I, R), bool)
    letter = np.full((A, I, R), -1, np.int64)
    tw = lambda j: f"{root / TRAJ_FILE}: row {j + 1}"  # noqa: E731
    for j in range(nt):
        if tt["arm"][j] not in arms:
            raise HorizonDataError(f"{tw(j)}: arm {tt['arm'][j]!r} is not in the manifest")
        a, i, r = arms.index(tt["arm"][j]), item_ix[(tt["group"][j], tt["question"][j])], tt["replicate"][j]
        if r < 0:
            raise HorizonDataError(f"{tw(j)}: replicate must be >= 0, got {r}")
        if obs[a, i, r]:
            raise HorizonDataError(f"{tw(j)}: duplicate (arm, group, question, replicate)")
        g = tt["gold"][j]
        n_o = tt["n_options"][j]
        if not 2 <= n_o <= len(LETTERS) or g is None or len(g) != 1 or g not in LETTERS[:n_o]:
            raise HorizonDataError(f"{tw(j)}: gold must be one of {LETTERS[:max(n_o, 0)]!r} with "
                                   f"2..{len(LETTERS)} options, got {g!r} with {n_o}")
        if gold[i] >= 0 and (gold[i] != LETTERS.index(g) or nopt[i] != n_o):
            raise HorizonDataError(f"{tw(j)}: gold or option count differs between rows of one item")
        gold[i], nopt[i] = LETTERS.index(g), n_o
        if tt["L"][j] != len(tt["thinking"][j]):
            raise HorizonDataError(f"{tw(j)}: L ({tt['L'][j]}) must equal the reasoning length "
                                   f"({len(tt['thinking'][j])})")
        obs[a, i, r] = True
        L[a, i, r] = tt["L"][j]
        fin[a, i, r] = bool(tt["finished"][j])
        y[a, i, r] = int(tt["y"][j])
        nat = tt["answer_letter"][j]
        if nat is not None:
            if nat not in LETTERS[:n_o]:
                raise HorizonDataError(f"{tw(j)}: answer_letter must be one of {LETTERS[:n_o]!r}, "
                                       f"got {nat!r}")
            parsed[a, i, r] = True
            letter[a, i, r] = LETTERS.index(nat)
        if int(tt["y"][j]) != int(nat is not None and LETTERS.index(nat) == gold[i]):
            raise HorizonDataError(f"{tw(j)}: y must be 1 exactly when answer_letter is the gold letter")
    return gold, nopt, obs, L, fin, y, parsed, letter


def _readout_arrays(root: Path, rt: dict, man: Mapping[str, Any], arms: tuple, item_ix: dict,
                    obs: np.ndarray, L: np.ndarray, A: int, I: int, R: int, O: int):
    """Dense readouts per context and kind: stop horizons, terminal, matched, controls."""
    rw = lambda j: f"{root / READ_FILE}: row {j + 1}"  # noqa: E731
    kinds = rt["kind"]
    stop_B = sorted({b for b, k in zip(rt["B"], kinds) if k == "stop"})
    ctrl_B = sorted({b for b, k in zip(rt["B"], kinds) if k == "control"})
    lowers = {v for v, k in zip(rt["variant"], kinds) if k == "matched"}
    matched_upper = {m["lower"]: m["upper"] for m in man.get("matched", [])}
    stop = {c: _empty((A, I, R, len(stop_B)), O) for c in CONTEXTS}
    term = {c: _empty((A, I, R), O) for c in CONTEXTS}
    matched = {v: _empty((I, R), O) for v in sorted(lowers)}
    control = {v: _empty((A, I, R, len(ctrl_B)), O) for v in CONTROLS
               if v in {vv for vv, k in zip(rt["variant"], kinds) if k == "control"}}
    logp = _logp_matrix(rt["logp"], rw, O)
    for j in range(len(kinds)):
        k, ctx = kinds[j], rt["context"][j]
        if k not in KINDS:
            raise HorizonDataError(f"{rw(j)}: kind must be one of {', '.join(KINDS)}, got {k!r}")
        if ctx not in CONTEXTS:
            raise HorizonDataError(f"{rw(j)}: context must be one of {', '.join(CONTEXTS)}, got {ctx!r}")
        key = (rt["group"][j], rt["question"][j])
        if rt["arm"][j] not in arms or key not in item_ix:
            raise HorizonDataError(f"{rw(j)}: no trajectory for this arm and item")
        a, i, r = arms.index(rt["arm"][j]), item_ix[key], rt["replicate"][j]
        if not 0 <= r < R or not obs[a, i, r]:
            raise HorizonDataError(f"{rw(j)}: no trajectory for replicate {r}")
        if k == "stop":
            dest, ix = stop[ctx], (a, i, r, stop_B.index(rt["B"][j]))
        elif k == "terminal":
            dest, ix = term[ctx], (a, i, r)
        elif k == "matched":
            v = rt["variant"][j]
            if matched_upper.get(v) != rt["arm"][j] or ctx != "common":
                raise HorizonDataError(f"{rw(j)}: a matched readout must read the manifest's upper arm "
                                       f"for lower arm {v!r} in the common context")
            dest, ix = matched[v], (i, r)
        else:
            v = rt["variant"][j]
            if v not in CONTROLS or ctx != "policy":
                raise HorizonDataError(f"{rw(j)}: a control must be one of {', '.join(CONTROLS)} in the "
                                       f"policy context, got {v!r} in {ctx!r}")
            dest, ix = control[v], (a, i, r, ctrl_B.index(rt["B"][j]))
        if dest.avail[ix]:
            raise HorizonDataError(f"{rw(j)}: duplicate readout")
        if rt["length"][j] > L[a, i, r] and k != "control":
            raise HorizonDataError(f"{rw(j)}: length {rt['length'][j]} exceeds the trajectory's L "
                                   f"{L[a, i, r]}")
        dest.avail[ix] = True
        dest.logp[ix] = logp[j]
        dest.length[ix] = rt["length"][j]
        dest.terminal[ix] = bool(rt["terminal"][j])
        if rt["cont_status"][j] is not None:
            dest.cont_avail[ix] = True
            dest.cont_correct[ix] = bool(rt["cont_correct"][j])
            dest.cont_parsed[ix] = rt["cont_letter"][j] is not None
    return stop_B, ctrl_B, stop, term, matched, matched_upper, control


def _table(rows: list[dict[str, Any]], columns: Mapping[str, pa.DataType], what: str) -> pa.Table:
    for j, row in enumerate(rows):
        extra = set(row) - set(columns)
        if extra:
            raise HorizonDataError(f"{what} row {j + 1}: unknown columns {sorted(extra)}")
    return pa.table({k: pa.array([r.get(k) for r in rows], typ) for k, typ in columns.items()})


def write_run(path: str | os.PathLike, manifest: Mapping[str, Any], trajectories: list[dict[str, Any]],
              readouts: list[dict[str, Any]], *, overwrite: bool = False) -> dict[str, Any]:
    """Write a run directory atomically (temporary sibling, then rename); return the manifest written.

    Rows are sorted -- trajectories by (arm, group, question, replicate),
    readouts by (arm, group, question, replicate, context, kind, variant, B)
    -- so the bytes do not depend on the order results arrived in; the
    manifest gets the schema and both tables' sha256.
    """

    out = Path(path)
    if out.exists() and not overwrite:
        raise FileExistsError(f"{out}: already exists (pass `overwrite` to replace it)")
    arm_order = {a["name"]: k for k, a in enumerate(manifest.get("arms", []))}
    tkey = lambda r: (arm_order.get(r["arm"], 1 << 30), r["group"], r["question"], r["replicate"])  # noqa: E731
    rkey = lambda r: (arm_order.get(r["arm"], 1 << 30), r["group"], r["question"], r["replicate"],  # noqa: E731
                      r["context"], r["kind"], r.get("variant") or "", r["B"])
    tt = _table(sorted(trajectories, key=tkey), TRAJ_COLUMNS, TRAJ_FILE)
    rt = _table(sorted(readouts, key=rkey), READ_COLUMNS, READ_FILE)
    # --overwrite replaces only an earlier run (or an empty folder), never a folder of yours,
    # and keeps what the old run holds besides the run (results/, notes, run.json).
    with atomic_dir(out, replace=_replaceable_run if overwrite else None,
                    keep=_run_foreign) as tmp:
        pq.write_table(tt, tmp / TRAJ_FILE)
        pq.write_table(rt, tmp / READ_FILE)
        man = dict(manifest)
        man["schema"] = RUN_SCHEMA
        man["trajectories_sha256"] = sha256_file(tmp / TRAJ_FILE)
        man["readouts_sha256"] = sha256_file(tmp / READ_FILE)
        man["counts"] = {"trajectories": tt.num_rows, "readouts": rt.num_rows}
        (tmp / MANIFEST).write_text(json.dumps(man, indent=2, sort_keys=True, allow_nan=False) + "\n")
    return man
