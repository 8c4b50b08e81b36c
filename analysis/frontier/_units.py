"""Decision units and their pruned integer actions for the three oracle strategies (docs/rules.md).

A *decision unit* picks one *action*; an action has an integer cost (retained
thinking tokens summed over the unit's trajectories) and an integer reward
(correct probes summed likewise). Per strategy:

* DR (dynamic routing), unit = a question occurrence: every trajectory
  retains no thinking, or every trajectory thinks to its end (`k = n`).
* FB (fixed budget), unit = a question occurrence: a shared absolute cap
  `c` from the union of the occurrence's measured `L`; each trajectory stops
  at its latest position with `L(k) <= c`. Caps that select the same
  positions give the same (cost, reward) and collapse in the pruning.
* DEE (dynamic early exit), unit = one trajectory: any measured `k`.

Reading of "retains no thinking" (DR's zero action): each trajectory stops
at its *latest* position with `L(k) = 0`, i.e. DR's two actions are exactly
FB's smallest cap (0) and its largest cap. On data from the docs/rules.md
segmentation every step has at least one token, so this is `k = 0` as docs/rules.md
writes. On inputs that start with zero-length steps (valid under docs/rules.md),
`k = 0` read literally would not be an FB action -- FB's cap 0 moves such a
trajectory onto its zero-length step, whose `C` may be lower -- so the
feasible sets would not be nested and `F_DR <= F_FB` could fail on valid
input (tests/test_frontier.py shows a case). With this reading
`DR ⊆ FB ⊆ DEE` and the hierarchy docs/rules.md requires holds on every input.

Pruning (docs/rules.md): per unit keep, for each cost, the best reward, then only
actions whose reward strictly rises with cost. The result per unit is sorted
by cost with strictly increasing cost and reward; its first action has cost 0
(`L(0) = 0`), and its reward is the unit's *base* reward. The DP works with
rewards offset by the base (`reward - base`, in `0..top`), so its state spans
only the reward that tokens can buy.

Units are described by *occurrences* so that the point estimate and the
two-stage bootstrap (docs/rules.md) share one code path: an occurrence is a question
together with a multiplicity for each of that question's trajectories (how
often it was drawn). The point estimate has one occurrence per question with
all multiplicities 1. A trajectory drawn `m` times counts `m` times in its
occurrence's sums (FB, DR) or gives `m` DEE units.
"""

import dataclasses

import numpy as np
from otbench.errors import ArgumentError

STRATEGIES = ("dr", "fb", "dee")


@dataclasses.dataclass(frozen=True)
class Actions:
    """Pruned actions of a batch of DP problems (ragged; host-side int64).

    Problems are independent cells or bootstrap replicates of one cell.

    Attributes:
      unit_problem: int64[unit] the problem of each unit (non-decreasing).
      offsets: int64[unit + 1] action range of each unit in `cost`/`reward`.
      cost: int64[action] retained tokens; strictly increasing within a unit,
        the first action of a unit has cost 0.
      reward: int64[action] correct probes *minus the unit's base*; strictly
        increasing within a unit, 0 for the first action.
      base: int64[unit] reward of the unit's zero-cost action.
      num_problems: number of problems (some may have no units).
    """

    unit_problem: np.ndarray
    offsets: np.ndarray
    cost: np.ndarray
    reward: np.ndarray
    base: np.ndarray
    num_problems: int

    @property
    def num_units(self) -> int:
        return int(self.base.shape[0])

    @property
    def count(self) -> np.ndarray:
        """int64[unit] number of actions (>= 1)."""
        return np.diff(self.offsets)

    @property
    def top(self) -> np.ndarray:
        """int64[unit] largest offset reward of the unit (its last action)."""
        return self.reward[self.offsets[1:] - 1]

    def base_total(self) -> np.ndarray:
        """int64[problem] sum of the base rewards: the reward at zero cost."""
        return isum(self.unit_problem, self.base, self.num_problems)

    def top_total(self) -> np.ndarray:
        """int64[problem] largest reward tokens can buy beyond the base."""
        return isum(self.unit_problem, self.top, self.num_problems)


def isum(index: np.ndarray, values: np.ndarray, size: int) -> np.ndarray:
    """int64[size] exact sums of int64 `values` by `index` (bincount's float weights are not)."""
    out = np.zeros(size, dtype=np.int64)
    np.add.at(out, index, np.asarray(values, dtype=np.int64))
    return out


def prune_sorted(unit: np.ndarray, cost: np.ndarray, reward: np.ndarray,
                 num_units: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Remove dominated candidate actions (docs/rules.md), without sorting.

    Args:
      unit: int64[cand] unit of each candidate, non-decreasing; every unit
        `0..num_units-1` has at least one candidate.
      cost: int64[cand] non-negative, non-decreasing within a unit.
      reward: int64[cand] non-negative.

    Returns:
      (offsets int64[unit + 1], cost, reward) of the kept actions: per unit,
      cost and reward strictly increasing.
    """
    n = unit.shape[0]
    if n == 0:
        return np.zeros(num_units + 1, dtype=np.int64), cost[:0], reward[:0]
    # 1. One candidate per (unit, cost) run, with the run's best reward.
    start = np.ones(n, dtype=bool)
    start[1:] = (unit[1:] != unit[:-1]) | (cost[1:] != cost[:-1])
    idx = np.flatnonzero(start)
    u, c = unit[idx], cost[idx]
    r = np.maximum.reduceat(reward, idx)
    # 2. Keep a run only if its reward beats every cheaper run of its unit.
    # Offsetting by unit * big makes one global running maximum restart at
    # every unit (units ascend and big exceeds any reward).
    big = int(r.max()) + 1
    key = u * big + r
    keep = np.ones(key.shape[0], dtype=bool)
    keep[1:] = key[1:] > np.maximum.accumulate(key)[:-1]
    u, c, r = u[keep], c[keep], r[keep]
    offsets = np.zeros(num_units + 1, dtype=np.int64)
    np.cumsum(np.bincount(u, minlength=num_units), out=offsets[1:])
    return offsets, c, r


def _finish(unit_problem: np.ndarray, offsets: np.ndarray, cost: np.ndarray,
            reward: np.ndarray, num_problems: int) -> Actions:
    first = offsets[:-1]
    # Every unit has a zero-cost action because L(0) = 0 (SPEC §2); the DP's
    # identity action relies on it.
    assert np.all(cost[first] == 0), "a unit without a zero-cost action"
    base = reward[first]
    return Actions(unit_problem=unit_problem, offsets=offsets, cost=cost,
                   reward=reward - np.repeat(base, np.diff(offsets)), base=base,
                   num_problems=num_problems)


@dataclasses.dataclass(frozen=True)
class Occurrences:
    """Question occurrences of a batch of problems over one cell's rows.

    Attributes:
      problem: int64[occ] problem of each occurrence (non-decreasing).
      question: int64[occ] local question index (into `CellData.qoff`).
      mult: int64[sum of R over occurrences] multiplicity of each row of the
        occurrence's question, in the question's row order, concatenated.
      num_problems: number of problems.
    """

    problem: np.ndarray
    question: np.ndarray
    mult: np.ndarray
    num_problems: int


@dataclasses.dataclass(frozen=True)
class CellData:
    """One cell's rows, trimmed to the cell's own width (host-side int64).

    Attributes:
      L, C: int64[traj, pos] as in `MeasurementSet`, padded to the cell's max n.
      n: int64[traj] number of steps.
      probes: int64[traj] probes per position.
      qoff: int64[question + 1] row range of each local question (rows are
        sorted by question, docs/rules.md).
      question: int64[question] global question index of each local question.
    """

    L: np.ndarray
    C: np.ndarray
    n: np.ndarray
    probes: np.ndarray
    qoff: np.ndarray
    question: np.ndarray

    @property
    def num_questions(self) -> int:
        return int(self.question.shape[0])

    def point(self) -> Occurrences:
        """One problem: every question once, every trajectory once."""
        Q = self.num_questions
        return Occurrences(problem=np.zeros(Q, dtype=np.int64),
                           question=np.arange(Q, dtype=np.int64),
                           mult=np.ones(self.L.shape[0], dtype=np.int64),
                           num_problems=1)


def cell_data(L: np.ndarray, C: np.ndarray, n: np.ndarray, probes: np.ndarray,
              question: np.ndarray) -> CellData:
    """`CellData` from one cell's rows (sorted by question, as in `MeasurementSet`)."""
    k = int(n.max()) + 1 if n.size else 1
    q = np.asarray(question, dtype=np.int64)
    starts = np.flatnonzero(np.r_[True, q[1:] != q[:-1]]) if q.size else np.zeros(0, np.int64)
    qoff = np.r_[starts, q.size].astype(np.int64)
    return CellData(L=np.ascontiguousarray(L[:, :k], dtype=np.int64),
                    C=np.ascontiguousarray(C[:, :k], dtype=np.int64),
                    n=np.asarray(n, dtype=np.int64),
                    probes=np.asarray(probes, dtype=np.int64),
                    qoff=qoff, question=q[starts])


def occurrence_rows(cell: CellData, occ: Occurrences) -> tuple[np.ndarray, np.ndarray]:
    """(row int64[item], occurrence int64[item]) of every (occurrence, row) item."""
    R = np.diff(cell.qoff)[occ.question]
    o = np.repeat(np.arange(occ.question.shape[0]), R)
    first = np.repeat(cell.qoff[occ.question] - (np.cumsum(R) - R), R)
    return first + np.arange(o.shape[0]), o


def totals(cell: CellData, occ: Occurrences) -> dict[str, np.ndarray]:
    """Per problem int64 totals: full-thinking tokens `T`, probes, endpoint reward.

    Every drawn trajectory counts with its multiplicity (docs/rules.md: budgets are
    normalized by the replicate's own full-thinking cost).
    """
    rows, o = occurrence_rows(cell, occ)
    p = occ.problem[o]
    m = occ.mult

    def tot(v):
        return isum(p, m * v[rows], occ.num_problems)

    return {"tokens": tot(cell.L[:, -1]), "probes": tot(cell.probes),
            "endpoint": tot(cell.C[:, -1])}


def dee_actions(cell: CellData, occ: Occurrences) -> Actions:
    """DEE: every drawn trajectory is a unit; actions are its positions."""
    rows, o = occurrence_rows(cell, occ)
    keep = occ.mult > 0
    rows = np.repeat(rows[keep], occ.mult[keep])     # a draw of m is m units
    prob = np.repeat(occ.problem[o][keep], occ.mult[keep])
    U = rows.shape[0]
    # Candidates are the measured positions k <= n (padding only repeats the
    # endpoint). L is non-decreasing along k, so they are already sorted by
    # (unit, cost).
    valid = np.arange(cell.L.shape[1])[None, :] <= cell.n[rows][:, None]
    unit = np.repeat(np.arange(U, dtype=np.int64), cell.n[rows] + 1)
    off, c, r = prune_sorted(unit, cell.L[rows][valid], cell.C[rows][valid], U)
    return _finish(prob, off, c, r, occ.num_problems)


def _zero_position_reward(cell: CellData) -> np.ndarray:
    """int64[traj] C at the latest position with L = 0 (see the module docstring)."""
    k0 = (cell.L == 0).sum(axis=1) - 1      # L is non-decreasing: the zeros lead
    return cell.C[np.arange(cell.L.shape[0]), k0]


def dr_actions(cell: CellData, occ: Occurrences) -> Actions:
    """DR: each occurrence all-zero (no thinking) or all-full (`k = n`)."""
    rows, o = occurrence_rows(cell, occ)
    O = occ.question.shape[0]
    m = occ.mult

    def s(v):
        return isum(o, m * v[rows], O)

    zero_r = s(_zero_position_reward(cell))
    full_c, full_r = s(cell.L[:, -1]), s(cell.C[:, -1])
    unit = np.repeat(np.arange(O, dtype=np.int64), 2)
    cost = np.stack([np.zeros(O, dtype=np.int64), full_c], axis=1).reshape(-1)
    reward = np.stack([zero_r, full_r], axis=1).reshape(-1)
    off, c, r = prune_sorted(unit, cost, reward, O)
    return _finish(occ.problem, off, c, r, occ.num_problems)


@dataclasses.dataclass(frozen=True)
class _FBEvents:
    """Per question, every (row, k >= 1) step event sorted by its L value.

    Attributes:
      eoff: int64[question + 1] event range of each question.
      row: int64[event] row of the event.
      value: int64[event] L at the event's position (the cap that reaches it).
      dL, dC: int64[event] change of the row's retained tokens and correct
        probes when the cap reaches the event.
    """

    eoff: np.ndarray
    row: np.ndarray
    value: np.ndarray
    dL: np.ndarray
    dC: np.ndarray


def fb_events(cell: CellData) -> _FBEvents:
    """Sort each question's step events by L once; every occurrence reuses the order."""
    Q = cell.num_questions
    T, K = cell.L.shape
    # Only measured steps (k < n) can change a sum: past `n` the padding repeats the
    # endpoint. One flat index per measured step, in (row, k) order, not the whole
    # padded width (~5x the steps on a paper-scale set).
    steps = np.maximum(cell.n, 0) if K > 1 else np.zeros(T, dtype=np.int64)
    first = np.arange(T, dtype=np.int64) * K - (np.cumsum(steps) - steps)
    at = np.repeat(first, steps) + np.arange(int(steps.sum()), dtype=np.int64)
    Lf, Cf = cell.L.reshape(-1), cell.C.reshape(-1)
    dL_all = Lf[at + 1] - Lf[at]
    dC_all = Cf[at + 1] - Cf[at]
    # An event with dL = dC = 0 (zero-length steps whose C does not change) changes
    # no sum: the caps it would add have the state of an earlier cap, which stays a
    # candidate. Zero-length steps that change C are kept: the latest position under
    # the cap moves onto them.
    keep = (dL_all != 0) | (dC_all != 0)
    at, dL_ev, dC_ev = at[keep], dL_all[keep], dC_all[keep]
    row = at // K
    value = Lf[at + 1]
    q = np.repeat(np.arange(Q, dtype=np.int64), np.diff(cell.qoff))[row]
    # Rows are sorted by question and each row's L is non-decreasing, so the
    # keys arrive as sorted runs, which a stable (merge) sort exploits; ties
    # keep (row, k) order, so the result is deterministic.
    order = np.argsort(q * (int(cell.L[:, -1].max(initial=0)) + 1) + value, kind="stable")
    eoff = np.zeros(Q + 1, dtype=np.int64)
    np.cumsum(np.bincount(q, minlength=Q), out=eoff[1:])
    return _FBEvents(eoff=eoff, row=row[order], value=value[order],
                     dL=dL_ev[order], dC=dC_ev[order])


def fb_actions(cell: CellData, occ: Occurrences, events: _FBEvents | None = None) -> Actions:
    """FB: each occurrence picks a shared cap; trajectories stop at their latest k under it.

    The cost and reward at cap `c` are the base (all at `k = 0`) plus the sum
    of the changes of every event with `L <= c`, weighted by the row's
    multiplicity: a cumulative sum over the question's events in `L` order,
    read at the last event of each distinct `L`. The cap 0 is a candidate
    (it is in the union of measured `L`: `L(0) = 0`); it includes the events
    of zero-length leading steps. No sorting per occurrence: the order comes
    from `fb_events`, so bootstrap replicates cost one pass over the events.
    """
    ev = fb_events(cell) if events is None else events
    rows, o = occurrence_rows(cell, occ)
    O = occ.question.shape[0]
    m = occ.mult
    R = np.diff(cell.qoff)[occ.question]
    base_r = isum(o, m * cell.C[rows, 0], O)
    E = np.diff(ev.eoff)[occ.question]                 # events per occurrence
    # Items of occurrence o: its base candidate, then its question's events
    # in L order, so the items are sorted by (occurrence, L) and the base
    # precedes the events with L = 0 (the cap 0 includes them).
    ioff = np.cumsum(E + 1) - (E + 1)
    n_items = int((E + 1).sum())
    eo = np.repeat(np.arange(O, dtype=np.int64), E)
    j = np.arange(eo.shape[0]) - np.repeat(np.cumsum(E) - E, E)   # event rank in occurrence
    eidx = ev.eoff[occ.question][eo] + j
    erow = ev.row[eidx]
    # Multiplicity of the event's row: `m` holds each occurrence's rows
    # contiguously in the question's row order.
    w = m[(np.cumsum(R) - R)[eo] + (erow - cell.qoff[occ.question][eo])]
    item_o = np.repeat(np.arange(O, dtype=np.int64), E + 1)
    value = np.zeros(n_items, dtype=np.int64)
    d_cost = np.zeros(n_items, dtype=np.int64)
    d_rew = np.zeros(n_items, dtype=np.int64)
    d_rew[ioff] = base_r
    at = ioff[eo] + 1 + j
    value[at] = ev.value[eidx]
    d_cost[at] = w * ev.dL[eidx]
    d_rew[at] = w * ev.dC[eidx]
    cum_c = _segment_cumsum(d_cost, item_o)
    cum_r = _segment_cumsum(d_rew, item_o)
    last = np.ones(n_items, dtype=bool)
    last[:-1] = (item_o[1:] != item_o[:-1]) | (value[1:] != value[:-1])
    # Costs are sums of non-negative changes in L order: non-decreasing.
    off, c, r = prune_sorted(item_o[last], cum_c[last], cum_r[last], O)
    return _finish(occ.problem, off, c, r, occ.num_problems)


def _segment_cumsum(x: np.ndarray, seg: np.ndarray) -> np.ndarray:
    """Inclusive cumulative sums of int64 `x` restarting at each new `seg` (sorted)."""
    cs = np.cumsum(x)
    if x.shape[0] == 0:
        return cs
    start = np.r_[True, seg[1:] != seg[:-1]]
    first = np.flatnonzero(start)
    before = np.r_[0, cs][first]                      # total before each segment
    return cs - np.repeat(before, np.diff(np.r_[first, x.shape[0]]))


def actions(strategy: str, cell: CellData, occ: Occurrences, events: _FBEvents | None = None) -> Actions:
    """Pruned actions of `strategy` for the occurrences `occ` of `cell`."""
    if strategy == "dr":
        return dr_actions(cell, occ)
    if strategy == "fb":
        return fb_actions(cell, occ, events)
    if strategy == "dee":
        return dee_actions(cell, occ)
    raise ArgumentError(f"`strategy` must be one of {', '.join(STRATEGIES)}, got {strategy!r}")
