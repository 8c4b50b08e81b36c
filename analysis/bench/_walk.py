"""Map a method's decisions to stopping positions: DR/FB per unit, DEE by an online walk (docs/rules.md).

Every function returns int64[traj] positions `k` with `0 <= k <= n` of the
evaluated split's trajectories; the evaluator reads cost `L(k)` and reward
`C(k)` there. Decisions are checked here (shape, dtype, values) and a
violation raises `MethodError` naming the method and the rule.
"""

from typing import Any

import numpy as np
from otbench.analysis.measurement import MeasurementSet

from otbench.analysis.methods import Method, MethodError, OnlineView, UnitTable


def _decisions(out: Any, size: int, label: str, call: str, what: str) -> np.ndarray:
    try:
        a = np.asarray(out)
    except Exception as e:  # noqa: BLE001 -- any failure to convert is the method's
        raise MethodError(f"method {label}: {call} returned {type(out).__name__} ({e})") from None
    if a.shape != (size,):
        raise MethodError(f"method {label}: {call} returned shape {a.shape}, expected ({size},) "
                          f"({what})")
    return a


def zero_positions(L: np.ndarray) -> np.ndarray:
    """int64[traj] latest position with `L = 0` (the DR zero action, see `_units`)."""
    return (np.asarray(L) == 0).sum(axis=1).astype(np.int64) - 1


def dr_positions(test: MeasurementSet, unit: np.ndarray, units: UnitTable, m: Method,
                 theta: float) -> np.ndarray:
    """Think (k = n) or not (latest `L = 0`) per unit, from the method's ``route``."""
    label = m.label
    d = _decisions(m.call("route(units, theta)", m.decide, units, theta),
                   len(units), label, "route(units, theta)",
                   "one think/no-think decision per unit")
    if d.dtype != np.bool_:
        raise MethodError(f"method {label}: route(units, theta) must return booleans, got dtype {d.dtype}")
    return np.where(d[unit], test.n.astype(np.int64), zero_positions(test.L))


def fb_positions(test: MeasurementSet, unit: np.ndarray, units: UnitTable, m: Method,
                 theta: float) -> np.ndarray:
    """Latest `k` with `L(k) <= cap` per trajectory, from the method's ``budget``."""
    label = m.label
    cap = _decisions(m.call("budget(units, theta)", m.decide, units, theta),
                     len(units), label, "budget(units, theta)",
                     "one token cap per unit")
    if cap.dtype == np.bool_ or not np.issubdtype(cap.dtype, np.number):
        raise MethodError(f"method {label}: budget(units, theta) must return numbers, got dtype {cap.dtype}")
    cap = cap.astype(np.float64)
    if np.any(np.isnan(cap)) or np.any(cap < 0):
        bad = float(cap[np.isnan(cap) | (cap < 0)][0])
        raise MethodError(f"method {label}: budget(units, theta) caps must be >= 0 (inf = no cap), "
                          f"got {bad}")
    # L is non-decreasing and its padding repeats L(n), so the count of
    # positions under the cap, minus one, is the latest such position (at
    # most n once clipped); L(0) = 0 <= cap makes it >= 0.
    k = (test.L <= cap[unit][:, None]).sum(axis=1).astype(np.int64) - 1
    return np.minimum(k, test.n.astype(np.int64))


class _Buffers:
    """The walker's memory, the only data an `OnlineView` can reach.

    Position `j` of a row is written when the walk reaches `j` with the row
    still active; the rest is NaN (signals) or -1 (tokens). The object holds
    no reference to the measurement set: `reveal` receives the source arrays
    from the walker's local scope.
    """

    def __init__(self, shape: tuple[int, int], names: tuple[str, ...]):
        self.sig = {name: np.full(shape, np.nan) for name in names}
        self.tok = np.full(shape, -1, dtype=np.int64)
        self.open = True

    def reveal(self, active: np.ndarray, k: int, L: np.ndarray,
               signals: dict[str, np.ndarray]) -> None:
        self.tok[active, k] = L[active, k]
        for name, buf in self.sig.items():
            buf[active, k] = signals[name][active, k]

    def read(self, name: str, rows: np.ndarray, k: int, history: bool) -> np.ndarray:
        if not self.open:
            raise MethodError("an OnlineView was used after its walk ended")
        if name == "":
            src = self.tok
        elif name in self.sig:
            src = self.sig[name]
        else:
            raise MethodError(f"no signal {name!r} in the set (recorded: "
                              f"{', '.join(self.sig) or 'none'})")
        out = src[rows, :k + 1] if history else src[rows, k]
        out = np.array(out, copy=True)
        out.setflags(write=False)
        return out

    def close(self) -> None:
        # A view kept past its walk must not reach this walk's data from a
        # later walk (another θ), where it would be the future.
        self.open = False
        self.sig = {}
        self.tok = np.zeros((0, 0), dtype=np.int64)


def dee_positions(test: MeasurementSet, unit: np.ndarray, units: UnitTable, m: Method,
                  theta: float, rows: np.ndarray | None = None) -> np.ndarray:
    """Walk the boundaries `k = 0, 1, ...` and ask the method's ``stop`` for the active trajectories.

    A trajectory is active at `k` while `k < n` and it has not stopped; at
    `k = n` it ends on its own. Only `rows` (default all) take part; the
    others keep position `n` (used by the batch-independence audit).
    """
    label = m.label
    T, K = test.L.shape
    n = test.n.astype(np.int64)
    pos = n.copy()
    live = n > 0
    if rows is not None:
        live &= np.isin(np.arange(T), rows)
    names = tuple(sorted(test.signals))
    signals = {name: np.asarray(test.signals[name]) for name in names}
    buf = _Buffers((T, K), names)
    try:
        for k in range(K):
            live &= n > k
            active = np.flatnonzero(live)
            if active.size == 0:
                break
            buf.reveal(active, k, test.L, signals)
            view = OnlineView(k, active, unit[active], units, test.L[active, k], names, buf.read)
            d = _decisions(m.call("stop(view, theta)", m.decide, view, theta),
                           active.size, label, "stop(view, theta)",
                           "one stop/continue decision per active trajectory")
            if d.dtype != np.bool_:
                raise MethodError(f"method {label}: stop(view, theta) must return booleans, "
                                  f"got dtype {d.dtype}")
            hit = active[d]
            pos[hit] = k
            live[hit] = False
    finally:
        buf.close()
    return pos


def audit_rows(T: int, count: int) -> np.ndarray:
    """Rows the batch-independence audit re-walks alone: evenly spaced, deterministic."""
    if count <= 0 or T == 0:
        return np.zeros(0, dtype=np.int64)
    return np.unique(np.linspace(0, T - 1, min(count, T)).round().astype(np.int64))


def check_independent(test: MeasurementSet, unit: np.ndarray, units: UnitTable, m: Method,
                      theta: float, batch_pos: np.ndarray, rows: np.ndarray) -> None:
    """Re-walk `rows` without the other trajectories; their stops must not change.

    A DEE decision may use only its own trajectory's past (docs/rules.md); a
    method that pools across the batch (e.g. normalizing by the batch's
    signals) would use other samples, so it is rejected.
    """
    if rows.size == 0:
        return
    label = m.label
    alone = dee_positions(test, unit, units, m, theta, rows=rows)
    diff = rows[alone[rows] != batch_pos[rows]]
    if diff.size:
        r = int(diff[0])
        raise MethodError(f"method {label}: decisions depend on the other trajectories of the "
                          f"batch (trajectory row {r} stops at k={int(batch_pos[r])} in the full "
                          f"walk but k={int(alone[r])} when walked with {rows.size} rows); a DEE "
                          "decision may use only its own row of the view")


POSITIONS = {"dr": dr_positions, "fb": fb_positions, "dee": dee_positions}


def positions(test: MeasurementSet, unit: np.ndarray, units: UnitTable, m: Method,
              theta: float) -> np.ndarray:
    """int64[traj] the stop of every trajectory of `test` under `m` at `theta` (its strategy's walk)."""
    return POSITIONS[m.strategy](test, unit, units, m, theta)
