"""The CPU kernels of the frontier bootstrap (`_cpu`): plain twins, the NumPy units and the JAX path.

The twins are written from the SPEC §5 definitions (every cap, every
position, exact-reward DP over all action combinations), not from the
kernels: a drawn occurrence's DR / FB unit sums over its drawn trajectories
(with repetition), every DEE draw is a unit. Inputs are ragged single cells
with the SPEC §2 edge cases: ties, flat curves, zero-length steps (leading
ones too), `n = 0`, one-trajectory questions, unequal `R` and `P`, slots
without an occurrence and replicates without any.
"""

import jax
import numpy as np
import pytest
from _sets import ragged_set as _ragged_set
from hypothesis import given, settings
from hypothesis import strategies as st
from otbench.analysis import build_layout
from otbench.analysis.frontier import _cpu, _dp, _units
from otbench.analysis.frontier._budgets import budget_grid
from otbench.analysis.frontier._pipeline import (
    CellInfo,
    Pipeline,
    cell_infos,
    occurrences,
)
from otbench.analysis.resampling import _draws as bd

STRATS = ("dr", "fb", "dee")


# -- inputs ---------------------------------------------------------------------------------

@st.composite
def cells(draw, max_q=4, max_r=4, max_n=6, max_p=5):
    """[question][trajectory] -> (P, L list, C list) of one ragged cell."""
    qs = []
    for _ in range(draw(st.integers(1, max_q))):
        p = draw(st.integers(1, max_p))
        traj = []
        for _ in range(draw(st.integers(1, max_r))):
            n = draw(st.integers(0, max_n))
            steps = draw(st.lists(st.sampled_from([0, 0, 1, 2, 5, 9]), min_size=n, max_size=n))
            L = np.r_[0, np.cumsum(steps, dtype=np.int64)].tolist()
            if draw(st.booleans()):
                C = [draw(st.integers(0, p))] * (n + 1)                 # flat curve
            else:
                C = draw(st.lists(st.integers(0, p), min_size=n + 1, max_size=n + 1))
            traj.append((p, L, C))
        qs.append(traj)
    return qs


@st.composite
def draws_of(draw, qs, max_rep=3):
    """int[rep, slot, draw] cell-local rows: per slot a drawn question (or none) and R_q rows."""
    R = [len(q) for q in qs]
    qoff = np.r_[0, np.cumsum(R)]
    S, D = draw(st.integers(1, 5)), max(R)
    reps = draw(st.integers(1, max_rep))
    out = np.full((reps, S, D), -1, dtype=np.int64)
    for b in range(reps):
        for s in range(S):
            if draw(st.integers(0, 4)) == 0:
                continue                                       # the model lacks this question
            q = draw(st.integers(0, len(qs) - 1))
            for d in range(R[q]):
                out[b, s, d] = qoff[q] + draw(st.integers(0, R[q] - 1))
    return out


def cell_info(qs, slots) -> CellInfo:
    flat = [t for q in qs for t in q]
    k = max(len(L) for _, L, _ in flat)
    L = np.array([Lt + [Lt[-1]] * (k - len(Lt)) for _, Lt, _ in flat], dtype=np.int64)
    C = np.array([Ct + [Ct[-1]] * (k - len(Ct)) for _, _, Ct in flat], dtype=np.int64)
    n = np.array([len(Lt) - 1 for _, Lt, _ in flat], dtype=np.int64)
    P = np.array([p for p, _, _ in flat], dtype=np.int64)
    question = np.repeat(np.arange(len(qs)), [len(q) for q in qs])
    d = _units.cell_data(L, C, n, P, question)
    return CellInfo(data=d, events=_units.fb_events(d), row0=0, local_q=question.astype(np.int64),
                    model=0, slots=(0, slots))


# -- plain twins ----------------------------------------------------------------------------

def plain_units(qs, loc, strategy):
    """Unpruned [(cost, reward)] units of one replicate, straight from SPEC §5."""
    flat = [t for q in qs for t in q]
    units = []
    for slot in loc:
        drawn = [flat[t] for t in slot if t >= 0]
        if not drawn:
            continue
        if strategy == "dee":
            units += [[(L[k], C[k]) for k in range(len(L))] for _, L, C in drawn]
        elif strategy == "dr":
            zero = sum(C[max(k for k in range(len(L)) if L[k] == 0)] for _, L, C in drawn)
            units.append([(0, zero), (sum(L[-1] for _, L, _ in drawn),
                                      sum(C[-1] for _, _, C in drawn))])
        else:
            acts = []
            for cap in sorted({x for _, L, _ in drawn for x in L}):
                pos = [max(k for k in range(len(L)) if L[k] <= cap) for _, L, _ in drawn]
                acts.append((sum(L[k] for k, (_, L, _) in zip(pos, drawn)),
                             sum(C[k] for k, (_, _, C) in zip(pos, drawn))))
            units.append(acts)
    return units


def plain_best(units, budgets):
    """Largest total reward of one action per unit with total cost <= each budget (exact DP)."""
    best = {0: 0}                                   # total reward -> least total cost
    for u in units:
        nxt = {}
        for r0, c0 in best.items():
            for c, r in u:
                if r0 + r not in nxt or c0 + c < nxt[r0 + r]:
                    nxt[r0 + r] = c0 + c
        best = nxt
    return [max(r for r, c in best.items() if c <= b) for b in budgets]


def plain_prune(acts):
    """SPEC §5 pruning: per cost the best reward, then rewards strictly rising with cost."""
    out = []
    for c, r in sorted(acts, key=lambda a: (a[0], -a[1])):
        if not out or (c > out[-1][0] and r > out[-1][1]):
            out.append((c, r))
    return out


def unit_multiset(u_off, cost, reward):
    return sorted(tuple(zip(cost[u_off[j]:u_off[j + 1]].tolist(), reward[u_off[j]:u_off[j + 1]].tolist()))
                  for j in range(u_off.shape[0] - 1))


# -- properties -----------------------------------------------------------------------------

@settings(max_examples=80)
@given(st.data())
def test_units_equal_plain_twin_and_numpy_units(data):
    qs = data.draw(cells())
    loc = data.draw(draws_of(qs))
    info = cell_info(qs, loc.shape[1])
    cc = _cpu.cpu_cell(info.data, info.events)
    occ = occurrences(info, loc)
    for s in STRATS:
        got = _cpu.occurrence_units(s, cc, info.local_q, loc)
        acts = _units.actions(s, info.data, occ, info.events if s == "fb" else None)
        base_np = acts.base_total()
        for b, (base, u_off, cost, rew) in enumerate(got):
            plain = [plain_prune(u) for u in plain_units(qs, loc[b], s)]
            assert base == sum(u[0][1] for u in plain), (s, b)
            want = sorted(tuple((c, r - u[0][1]) for c, r in u[1:]) for u in plain if len(u) > 1)
            assert unit_multiset(u_off, cost, rew) == want, (s, b)
            # The NumPy units of `_units` (the JAX path's input) are the same multiset.
            sel = np.flatnonzero(acts.unit_problem == b)
            np_units = sorted(tuple(zip(acts.cost[acts.offsets[j] + 1:acts.offsets[j + 1]].tolist(),
                                        acts.reward[acts.offsets[j] + 1:acts.offsets[j + 1]].tolist()))
                              for j in sel if acts.offsets[j + 1] - acts.offsets[j] > 1)
            assert np_units == want and base_np[b] == base, (s, b)


@settings(max_examples=80)
@given(st.data(), st.sampled_from([np.int32, np.int64]))
def test_frontier_batch_equals_plain_dp(data, dtype):
    qs = data.draw(cells())
    loc = data.draw(draws_of(qs))
    info = cell_info(qs, loc.shape[1])
    cc = _cpu.cpu_cell(info.data, info.events)
    tot = _cpu.totals_batch(cc, loc)
    extra = data.draw(st.lists(st.integers(0, 60), min_size=3, max_size=3))
    bud = np.array([[0, *extra, int(t), int(t) + 1000] for t in tot["tokens"]], dtype=np.int64)
    for s in STRATS:
        got = _cpu.frontier_batch(s, cc, info.local_q, loc, bud, dtype)
        for b in range(loc.shape[0]):
            units = plain_units(qs, loc[b], s)
            assert got[b].tolist() == plain_best(units, bud[b].tolist()), (s, b)
    flat = [t for q in qs for t in q]
    for b in range(loc.shape[0]):
        rows = [t for t in loc[b].reshape(-1) if t >= 0]
        assert tot["tokens"][b] == sum(flat[t][1][-1] for t in rows)
        assert tot["probes"][b] == sum(flat[t][0] for t in rows)
        assert tot["endpoint"][b] == sum(flat[t][2][-1] for t in rows)


@st.composite
def unit_lists(draw):
    """Ragged pruned units (strictly rising cost and offset reward >= 1), possibly none."""
    units = []
    for _ in range(draw(st.integers(0, 7))):
        k = draw(st.integers(1, 9))                 # 1..9 actions: every fused-pass remainder
        dc = draw(st.lists(st.integers(1, 40), min_size=k, max_size=k))
        dr = draw(st.lists(st.integers(1, 6), min_size=k, max_size=k))
        units.append(list(zip(np.cumsum(dc).tolist(), np.cumsum(dr).tolist())))
    return units


def packed(units):
    u_off = np.r_[0, np.cumsum([len(u) for u in units])].astype(np.int64)
    cost = np.array([c for u in units for c, _ in u], dtype=np.int64)
    rew = np.array([r for u in units for _, r in u], dtype=np.int64)
    return u_off, cost, rew


@settings(max_examples=100)
@given(unit_lists(), st.lists(st.integers(0, 400), min_size=1, max_size=6),
       st.sampled_from([np.int32, np.int64]))
def test_solve_query_equals_plain_dp(units, budgets, dtype):
    u_off, cost, rew = packed(units)
    out = np.zeros(len(budgets), dtype=np.int64)
    _cpu.solve_query(u_off, cost, rew, np.array(budgets, dtype=np.int64), _cpu.sentinel(dtype), out)
    assert out.tolist() == plain_best([[(0, 0)] + u for u in units], budgets)


@pytest.mark.parametrize("seed", range(4))
def test_solve_query_equals_jax_dp(seed):
    """The JAX kernel (`_dp.solve`, the accelerator path) and the CPU kernel agree on random units."""
    rng = np.random.default_rng(seed)
    B = 3
    per, probs = [], []
    for b in range(B):
        for _ in range(int(rng.integers(0, 30))):
            k = int(rng.integers(1, 12))
            per.append(list(zip(np.cumsum(rng.integers(1, 500, k)).tolist(),
                                np.cumsum(rng.integers(1, 5, k)).tolist())))
            probs.append(b)
    acts_off = np.r_[0, np.cumsum([len(u) + 1 for u in per])].astype(np.int64)
    acts = _units.Actions(
        unit_problem=np.array(probs, dtype=np.int64),
        offsets=acts_off,
        cost=np.array([c for u in per for c, _ in [(0, 0)] + u], dtype=np.int64),
        reward=np.array([r for u in per for _, r in [(0, 0)] + u], dtype=np.int64),
        base=np.zeros(len(per), dtype=np.int64), num_problems=B)
    gs = _dp.solve(acts, batched=True, tile=8, block=4)
    for b in range(B):
        mine = [u for u, p in zip(per, probs) if p == b]
        u_off, cost, rew = packed(mine)
        top = int(sum(u[-1][1] for u in mine))
        budgets = np.unique(np.r_[0, rng.integers(0, int(cost.sum()) + 2, 20), gs[b]])
        out = np.zeros(budgets.shape[0], dtype=np.int64)
        _cpu.solve_query(u_off, cost, rew, budgets.astype(np.int64), _cpu.sentinel(np.int32), out)
        want = np.searchsorted(gs[b], budgets, side="right") - 1
        assert gs[b].shape[0] == top + 1 and out.tolist() == want.tolist(), b


# -- the pipeline: CPU engine against the JAX engine ------------------------------------------

def ragged_set(seed):
    return _ragged_set(seed, synthetic=True)


@pytest.mark.parametrize("seed,workers", [(0, 0), (1, 1)])
def test_cpu_engine_equals_jax_engine(seed, workers):
    ms = ragged_set(seed)
    layout, names = build_layout(ms)
    res = bd.resampling(ms, layout, names)
    mesh = jax.sharding.Mesh(np.asarray(jax.devices()[:1]), ("rep",))
    sh = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("rep"))
    rep = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
    table, _ = bd.fixed_point(np.zeros((5, ms.num_trajectories)), res, np.asarray(layout.seg))
    rows = np.asarray(bd.replicate_kernel(res, sh, rep, rows=True)(
        jax.numpy.arange(9, dtype=jax.numpy.uint64), jax.numpy.uint64(seed), res.tables,
        jax.numpy.asarray(table)).rows)
    infos = cell_infos(ms, names.cell_index, res.cell_model, res.cell_group, res.group_slots)
    out = {}
    for engine in ("cpu", "jax"):
        with Pipeline(infos, budget_grid(11), workers=workers, engine=engine) as p:
            assert p.engine == engine
            out[engine] = p.finish(p.submit(rows))
    for f in ("reward", "reward_one", "tokens", "probes", "endpoint"):
        assert np.array_equal(getattr(out["cpu"], f), getattr(out["jax"], f)), f


def test_engine_argument_rules():
    ms = ragged_set(0)
    layout, names = build_layout(ms)
    res = bd.resampling(ms, layout, names)
    infos = cell_infos(ms, names.cell_index, res.cell_model, res.cell_group, res.group_slots)
    with pytest.raises(ValueError, match="`engine` must be auto, cpu or jax"):
        Pipeline(infos, budget_grid(3), engine="gpu")
    with Pipeline(infos, budget_grid(3)) as p:      # a CPU-only mesh with numba: the CPU kernels
        assert p.engine == ("cpu" if _cpu.available() else "jax")
