"""Build and validate a `MeasurementSet` from ragged per-trajectory columns (docs/rules.md).

This is the one validation path: the JSONL importer, the Parquet loader, the
simulator and the probe all end here, so every reader enforces the same rules
with the same messages.
"""

import unicodedata
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from otbench.errors import MeasurementSetError

from ._ranges import out_of_range, signal_range
from ._padding import PaddedSignals, pad_ragged, unpad
from ._rows import SPLITS
from ._types import MeasurementSet
from otbench.errors import ArgumentError

INT32_MAX = np.iinfo(np.int32).max
# P bounds every per-probe array (frontier states, thinning levels): beyond
# this a valid-looking set asks for tens of GiB downstream.
MAX_PROBES = 65_535


def default_where(row: int) -> str:
    return f"row {row}"


def ragged(rows: Sequence[Sequence[float]], dtype) -> tuple[np.ndarray, np.ndarray]:
    """(flat values, int64 offsets[rows + 1]) from a list of lists."""
    lengths = np.fromiter((len(r) for r in rows), dtype=np.int64, count=len(rows))
    offsets = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    if offsets[-1] == 0:
        return np.zeros(0, dtype=dtype), offsets
    flat = np.concatenate([np.asarray(r, dtype=dtype) for r in rows if len(r)])
    return flat, offsets


def _first(bad: np.ndarray) -> int | None:
    idx = np.flatnonzero(bad)
    return int(idx[0]) if idx.size else None


def _segment_first(bad_flat: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row: (has a bad element, flat index of its first bad element)."""
    rows = offsets.shape[0] - 1
    has = np.zeros(rows, dtype=bool)
    first = np.zeros(rows, dtype=np.int64)
    idx = np.flatnonzero(bad_flat)
    if idx.size:
        row_of = np.searchsorted(offsets, idx, side="right") - 1
        # idx is sorted, so the first occurrence of each row is its first bad element.
        uniq, pos = np.unique(row_of, return_index=True)
        has[uniq] = True
        first[uniq] = idx[pos]
    return has, first


class _Index(NamedTuple):
    """Name tables and per-row indices of the validated columns (canonical sorted order)."""

    models: tuple[str, ...]
    groups: tuple[str, ...]
    qkeys: list[tuple[int, str]]           # (group index, question id), sorted
    cell_pairs: list[tuple[int, int]]      # (model index, group index), sorted
    mi: np.ndarray                         # int64[T] model index per row
    gi: np.ndarray                         # int64[T] group index per row
    qi: np.ndarray                         # int64[T] question index per row
    ci: np.ndarray                         # int64[T] cell index per row


def from_ragged(
    *,
    model: Sequence[str],
    group: Sequence[str],
    question: Sequence[str],
    trajectory: np.ndarray,
    probes: np.ndarray,
    L: tuple[np.ndarray, np.ndarray],
    C: tuple[np.ndarray, np.ndarray],
    y: np.ndarray,
    finished: np.ndarray | None = None,
    n: np.ndarray | None = None,
    dataset: Sequence[str | None] | None = None,
    split: Sequence[str | None] | None = None,
    question_text: Sequence[str | None] | None = None,
    signals: Mapping[str, tuple[np.ndarray, np.ndarray]] | None = None,
    synthetic: bool = False,
    provenance: Mapping[str, Any] | None = None,
    where: Callable[[int], str] = default_where,
) -> MeasurementSet:
    """Validate ragged columns (one entry per trajectory) and build a `MeasurementSet`.

    Ragged columns (`L`, `C`, each signal) are `(flat values, offsets)` pairs
    as returned by `ragged`. `where(i)` names input row `i` in error messages
    (for example ``"runs.jsonl:12"``). Raises `MeasurementSetError` at the
    first offending row (in input order) with the rule it breaks; nothing is
    ever fixed silently.

    Optional columns default to: `finished` True, `n` = len(L) - 1, `dataset`
    = the group, `split` unassigned, `question_text` None.
    """
    T = len(model)
    trajectory = np.asarray(trajectory, dtype=np.int64)
    probes = np.asarray(probes, dtype=np.int64)
    y = np.asarray(y, dtype=np.int64)
    L = (np.asarray(L[0], dtype=np.int64), np.asarray(L[1], dtype=np.int64))
    C = (np.asarray(C[0], dtype=np.int64), np.asarray(C[1], dtype=np.int64))
    for col, arr in (("group", group), ("question", question), ("trajectory", trajectory),
                     ("probes", probes), ("y", y), ("L", np.diff(L[1])), ("C", np.diff(C[1]))):
        if len(arr) != T:
            raise ArgumentError(f"column `{col}` has {len(arr)} entries, expected {T}")

    checks: list[tuple[np.ndarray, Callable[[int], str]]] = []
    _row_rules(checks, trajectory, probes, y, L, C, n)
    sig_dense = _signal_rules(checks, dict(signals or {}), np.diff(L[1]))
    split_idx = _split_rule(checks, split, T)
    _raise_first(checks, where)

    _name_rules(model, group, question, where)
    ix = _index(model, group, question)
    cross: list[tuple[np.ndarray, Callable[[int], str]]] = []
    _duplicate_rule(cross, ix, model, group, question, trajectory, where)
    _consistency_rules(cross, ix, model, group, question, probes, dataset, split, question_text,
                       where)
    _raise_first(cross, where)
    return _assemble(ix, trajectory, probes, y, L, C, sig_dense, split_idx, finished, dataset,
                     question_text, synthetic, provenance)


def _row_rules(checks, trajectory, probes, y, L, C, n) -> None:
    """Per-row rules of docs/rules.md, each as (bad rows, message builder); the first bad row wins."""
    L_flat, L_off = L
    C_flat, C_off = C
    L_len, C_len = np.diff(L_off), np.diff(C_off)
    T = L_len.size

    def rule(bad: np.ndarray, msg: Callable[[int], str]) -> None:
        checks.append((np.asarray(bad, dtype=bool), msg))

    rule(L_len == 0, lambda i: "L is empty (it needs n+1 >= 1 entries, starting with 0)")
    rule(L_len != C_len,
         lambda i: f"L and C have different lengths ({L_len[i]} vs {C_len[i]})")
    if n is not None:
        n_arr = np.asarray(n, dtype=np.int64)
        rule(n_arr != L_len - 1,
             lambda i: f"n is {n_arr[i]} but L has {L_len[i]} entries (expected n+1)")
    # Ranges are checked on int64 before anything is narrowed to int32.
    rule(trajectory < 0, lambda i: f"trajectory must be a non-negative integer, got {trajectory[i]}")
    rule(trajectory > INT32_MAX,
         lambda i: f"trajectory must fit in int32 (<= {INT32_MAX}), got {trajectory[i]}")
    rule(probes < 1, lambda i: f"probes must be a positive integer, got {probes[i]}")
    rule(probes > MAX_PROBES, lambda i: f"probes must be at most {MAX_PROBES}, got {probes[i]}")
    rule((y != 0) & (y != 1), lambda i: f"y must be 0 or 1, got {y[i]}")

    starts = L_off[:-1]
    nonempty = L_len > 0
    first_L = np.where(nonempty, L_flat[np.minimum(starts, max(L_flat.size - 1, 0))]
                       if L_flat.size else 0, 0)
    rule(nonempty & (first_L != 0), lambda i: f"L[0] must be 0, got {first_L[i]}")

    # Non-decreasing: compare each element with its predecessor inside the row.
    dec = np.zeros(L_flat.shape[0], dtype=bool)
    if L_flat.size > 1:
        dec[1:] = L_flat[1:] < L_flat[:-1]
        dec[starts[nonempty]] = False
    has_dec, first_dec = _segment_first(dec, L_off)

    def dec_msg(i):
        j = first_dec[i]
        k = j - L_off[i]
        return f"L must be non-decreasing: L[{k}]={L_flat[j]} < L[{k - 1}]={L_flat[j - 1]}"
    rule(has_dec, dec_msg)
    rule(np.zeros(T, dtype=bool) if not L_flat.size else
         _segment_first(L_flat > INT32_MAX, L_off)[0],
         lambda i: f"L values must fit in int32 (<= {INT32_MAX})")

    same_len = L_len == C_len
    if C_flat.size:
        p_of = np.repeat(probes, C_len)
        bad_c = (C_flat < 0) | (C_flat > p_of)
        bad_c &= np.repeat(same_len, C_len)
        has_c, first_c = _segment_first(bad_c, C_off)
    else:
        has_c, first_c = np.zeros(T, dtype=bool), np.zeros(T, dtype=np.int64)
    rule(has_c, lambda i: (f"C[{first_c[i] - C_off[i]}]={C_flat[first_c[i]]} is outside "
                           f"0..{probes[i]} (probes)"))


def _signal_rules(checks, signals, L_len) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Signals have n+1 entries per row and no NaN; returns them as float64 (flat, offsets)."""
    sig_dense: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for name in sorted(signals):
        s_flat, s_off = signals[name]
        s_flat = np.asarray(s_flat, dtype=np.float64)
        s_off = np.asarray(s_off, dtype=np.int64)
        s_len = np.diff(s_off)
        checks.append((np.asarray(s_len != L_len, dtype=bool), lambda i, s_len=s_len, name=name:
                       f"signal '{name}' has {s_len[i]} entries, expected {L_len[i]} (n+1)"))
        checks.append((np.asarray(_segment_first(np.isnan(s_flat), s_off)[0], dtype=bool),
                       lambda i, name=name: f"signal '{name}' contains NaN"))
        bad = out_of_range(name, s_flat)
        if bad is not None:                # the range table (`_ranges`)
            has, first = _segment_first(bad, s_off)
            checks.append((np.asarray(has, dtype=bool), lambda i, name=name, first=first, s_off=s_off,
                           s_flat=s_flat: f"signal '{name}'[{first[i] - s_off[i]}] = "
                                          f"{s_flat[first[i]]:g} is outside its range "
                                          f"({signal_range(name)[3]})"))
        sig_dense[name] = (s_flat, s_off)
    return sig_dense


def _split_rule(checks, split, T: int) -> np.ndarray:
    """Split names must be one of SPLITS or null; returns the int64[T] split index (-1 = none)."""
    split_idx = np.full(T, -1, dtype=np.int64)
    if split is not None:
        lookup = {s: j for j, s in enumerate(SPLITS)}
        bad_split = np.zeros(T, dtype=bool)
        for i, s in enumerate(split):
            if s is None:
                continue
            j = lookup.get(s)
            if j is None:
                bad_split[i] = True
            else:
                split_idx[i] = j
        checks.append((bad_split, lambda i: (f"split must be one of {', '.join(SPLITS)} or null, "
                                             f"got {split[i]!r}")))
    return split_idx


def _name_problem(col: str, name: str) -> str | None:
    """Why `name` cannot be a model, group or question name, or None.

    Names are printed (tables, reports, terminals) and models and groups name
    the set's folders: an empty name would write `trajectories//AIME/`, a
    control character (NUL, ESC of a terminal escape sequence, a line break)
    would forge or garble what is printed. A question id that is an absolute
    path or climbs with `..` is refused too (ids such as MATH500's
    `test/algebra/1.json` stay valid).
    """
    if not name.strip():
        return f"{col} name is empty"
    bad = next((ch for ch in name if unicodedata.category(ch) == "Cc"), None)
    if bad is not None:
        return (f"{col} {ascii(name)[:80]} holds the control character U+{ord(bad):04X} "
                f"(names are printed and name folders)")
    steps = name.replace("\\", "/").split("/")
    if col == "question" and (name.startswith(("/", "\\")) or ".." in steps):
        return f"question id {name[:80]!r} is a path out of its folder (absolute or with '..')"
    return None


def _name_rules(model, group, question, where) -> None:
    """Names are valid Unicode, printable, and no two differ only in normalisation (NFC vs NFD).

    Twins would be two cells or questions that print identically; refusing
    them (rather than normalising) keeps every stored name as given.
    """
    for col, names in (("model", model), ("group", group), ("question", question)):
        seen: dict[str, tuple[str, int]] = {}
        firsts: dict[str, int] = {}
        for i, name in enumerate(names):
            firsts.setdefault(name, i)
        for name, i in firsts.items():
            if not isinstance(name, str):
                continue
            try:
                name.encode("utf-8")
            except UnicodeEncodeError:
                raise MeasurementSetError(where(i), f"{col} {name!r} is not valid Unicode "
                                                    f"(lone surrogate)") from None
            problem = _name_problem(col, name)
            if problem is not None:
                raise MeasurementSetError(where(i), problem)
            key = unicodedata.normalize("NFC", name)
            first = seen.setdefault(key, (name, i))
            if first[0] != name:
                raise MeasurementSetError(where(i), (
                    f"{col} {ascii(name)} differs from {ascii(first[0])} at {where(first[1])} only in "
                    f"Unicode normalisation (NFC/NFD); spell it one way"))


def _index(model, group, question) -> _Index:
    """Sorted name tables and the model / group / question / cell index of every row."""
    T = len(model)
    models = tuple(sorted(set(model)))
    groups = tuple(sorted(set(group)))
    m_idx = {m: j for j, m in enumerate(models)}
    g_idx = {g: j for j, g in enumerate(groups)}
    mi = np.fromiter((m_idx[m] for m in model), dtype=np.int64, count=T)
    gi = np.fromiter((g_idx[g] for g in group), dtype=np.int64, count=T)
    qkeys = sorted(set(zip(gi.tolist(), question)))
    q_idx = {k: j for j, k in enumerate(qkeys)}
    qi = np.fromiter((q_idx[k] for k in zip(gi.tolist(), question)), dtype=np.int64, count=T)
    cell_pairs = sorted(set(zip(mi.tolist(), gi.tolist())))
    c_idx = {k: j for j, k in enumerate(cell_pairs)}
    ci = np.fromiter((c_idx[k] for k in zip(mi.tolist(), gi.tolist())), dtype=np.int64, count=T)
    return _Index(models, groups, qkeys, cell_pairs, mi, gi, qi, ci)


def _duplicate_rule(cross, ix: _Index, model, group, question, trajectory, where) -> None:
    """One row per (model, question, trajectory); reported at the later row."""
    T = len(model)
    mi, qi = ix.mi, ix.qi
    order_in = np.lexsort((np.arange(T), trajectory, qi, mi))  # input order breaks ties
    key = np.stack([mi, qi, trajectory], axis=1)[order_in]
    dup = np.zeros(T, dtype=bool)
    if T > 1:
        same = np.all(key[1:] == key[:-1], axis=1)
        dup[order_in[1:][same]] = True
    first_of: dict = {}
    if dup.any():
        # Earliest input row of each duplicated key, for the message.
        for i in range(T):
            first_of.setdefault((mi[i], qi[i], trajectory[i]), i)
    cross.append((dup, lambda i: (
        f"duplicate trajectory (model {model[i]!r}, group {group[i]!r}, question "
        f"{question[i]!r}, trajectory {trajectory[i]}); first seen at "
        f"{where(first_of[(mi[i], qi[i], trajectory[i])])}")))


def _consistency_rules(cross, ix: _Index, model, group, question, probes, dataset, split,
                       question_text, where) -> None:
    """Values shared by a question (probes per model, dataset, split, text) agree across rows."""
    T = len(model)

    def consistency(values, key_rows, bad_msg) -> None:
        # First value seen per key in input order; later rows must agree.
        bad = np.zeros(T, dtype=bool)
        first_val: dict = {}
        first_row: dict = {}
        for i in range(T):
            v = values[i]
            if v is None:
                continue
            k = key_rows[i]
            if k not in first_val:
                first_val[k], first_row[k] = v, i
            elif first_val[k] != v:
                bad[i] = True
        cross.append((bad, lambda i: bad_msg(i, first_val[key_rows[i]], first_row[key_rows[i]])))

    mq = list(zip(ix.mi.tolist(), ix.qi.tolist()))
    consistency(probes.tolist(), mq, lambda i, v, r: (
        f"probes {probes[i]} differs from {v} used by trajectory at {where(r)} of "
        f"question {question[i]!r} (model {model[i]!r}); probes must not mix within a question"))
    qlist = ix.qi.tolist()
    if dataset is not None:
        consistency(list(dataset), qlist, lambda i, v, r: (
            f"dataset {dataset[i]!r} differs from {v!r} recorded for question "
            f"{question[i]!r} of group {group[i]!r} at {where(r)}"))
    if split is not None:
        consistency(list(split), qlist, lambda i, v, r: (
            f"split {split[i]!r} differs from {v!r} recorded for question {question[i]!r} "
            f"of group {group[i]!r} at {where(r)}; all trajectories of a question share a split"))
    if question_text is not None:
        consistency(list(question_text), qlist, lambda i, v, r: (
            f"question_text differs from the text recorded for question {question[i]!r} "
            f"of group {group[i]!r} at {where(r)}"))


def _question_tables(ix: _Index, dataset, question_text) -> tuple[tuple, tuple]:
    """Per-question dataset (default: the group) and text, from the first row that has one."""
    Q = len(ix.qkeys)
    q_dataset: list[str | None] = [None] * Q
    q_text: list[str | None] = [None] * Q
    for i in range(ix.qi.size):
        q = ix.qi[i]
        if q_dataset[q] is None and dataset is not None and dataset[i] is not None:
            q_dataset[q] = dataset[i]
        if q_text[q] is None and question_text is not None and question_text[i] is not None:
            q_text[q] = question_text[i]
    q_dataset = [d if d is not None else ix.groups[ix.qkeys[q][0]] for q, d in enumerate(q_dataset)]
    return tuple(q_dataset), tuple(q_text)


def _assemble(ix: _Index, trajectory, probes, y, L, C, sig_dense, split_idx, finished, dataset,
              question_text, synthetic, provenance) -> MeasurementSet:
    """Dense padded arrays in canonical order (cell, question, trajectory)."""
    T = ix.qi.size
    L_len = np.diff(L[1])
    order = np.lexsort((trajectory, ix.qi, ix.ci))
    lengths = L_len[order]
    K = int(L_len.max()) if T else 1
    L_dense = pad_ragged(L[0], L[1], K, np.int32, order=order)
    C_dense = pad_ragged(C[0], C[1], K, np.int32, order=order)
    sig = PaddedSignals(sig_dense, K, order)     # padded when first read
    q_dataset, q_text = _question_tables(ix, dataset, question_text)
    fin = (np.ones(T, dtype=bool) if finished is None
           else np.asarray(finished, dtype=bool))
    return MeasurementSet(
        L=L_dense, C=C_dense,
        n=(lengths - 1).astype(np.int32),
        probes=probes[order].astype(np.int32),
        y=y[order].astype(np.int8),
        finished=fin[order],
        trajectory=trajectory[order].astype(np.int32),
        cell=ix.ci[order].astype(np.int32),
        question=ix.qi[order].astype(np.int32),
        split=split_idx[order].astype(np.int8),
        signals=sig,
        models=ix.models, groups=ix.groups,
        cell_model=np.array([m for m, _ in ix.cell_pairs], dtype=np.int32).reshape(-1),
        cell_group=np.array([g for _, g in ix.cell_pairs], dtype=np.int32).reshape(-1),
        question_group=np.array([g for g, _ in ix.qkeys], dtype=np.int32).reshape(-1),
        question_id=tuple(q for _, q in ix.qkeys),
        question_dataset=q_dataset,
        question_text=q_text,
        synthetic=bool(synthetic),
        provenance=dict(provenance or {}),
    )


def _raise_first(checks, where) -> None:
    best: tuple[int, int] | None = None
    for r, (bad, _) in enumerate(checks):
        i = _first(bad)
        if i is not None and (best is None or i < best[0]):
            best = (i, r)
    if best is not None:
        i, r = best
        raise MeasurementSetError(where(i), checks[r][1](i))


def from_dense(
    *, models: Sequence[str], groups: Sequence[str], cell_model: np.ndarray,
    cell_group: np.ndarray, question_group: np.ndarray, question_id: Sequence[str],
    L: np.ndarray, C: np.ndarray, n: np.ndarray, probes: np.ndarray, y: np.ndarray,
    cell: np.ndarray, question: np.ndarray, trajectory: np.ndarray,
    finished: np.ndarray | None = None, split: np.ndarray | None = None,
    question_dataset: Sequence[str] | None = None,
    question_text: Sequence[str | None] | None = None,
    signals: Mapping[str, np.ndarray] | None = None,
    synthetic: bool = False, provenance: Mapping[str, Any] | None = None,
) -> MeasurementSet:
    """Build from dense padded arrays (the simulator's path), validating like every reader.

    Values past `n` are ignored and re-padded; the result is identical to
    building the same trajectories from ragged columns.
    """
    n = np.asarray(n, dtype=np.int64)
    cm = np.asarray(cell_model)[cell]
    cg = np.asarray(cell_group)[cell]
    qg = np.asarray(question_group)[question]
    if np.any(qg != cg):
        raise ArgumentError("question_group of a row's question differs from its cell's group")
    qd = question_dataset
    qt = question_text
    sp = None if split is None else [None if s < 0 else SPLITS[s] for s in np.asarray(split).tolist()]
    return from_ragged(
        model=[models[m] for m in cm.tolist()],
        group=[groups[g] for g in cg.tolist()],
        question=[question_id[q] for q in np.asarray(question).tolist()],
        trajectory=trajectory, probes=probes,
        L=unpad(np.asarray(L), n), C=unpad(np.asarray(C), n), n=n, y=y,
        finished=finished,
        dataset=None if qd is None else [qd[q] for q in np.asarray(question).tolist()],
        split=sp,
        question_text=None if qt is None else [qt[q] for q in np.asarray(question).tolist()],
        signals={k: unpad(np.asarray(v), n) for k, v in (signals or {}).items()},
        synthetic=synthetic, provenance=provenance,
    )
