"""The NumPy frontier DP (`_host_dp`) against its plain twin, brute force and the JAX kernel.

`_host_dp.solve` is what `otbench frontier` runs; `frontiers` is covered end to
end in test_frontier.py. Here the kernel itself: on ragged measurement sets
(ties, flat curves, zero-length steps, n = 0, one-trajectory questions) for
every strategy, and on raw pruned action lists, in both state types.
"""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from otbench.analysis.frontier import _host_dp, _units
from test_frontier import STRATS, build, questions_of, ref_actions, ref_dp, ref_prune, trajectory_sets


def at_least(points, base, top):
    """g[r]: least cost of a (cost, reward) point with reward >= base + r, r = 0..top."""
    return [min(c for c, rr in points if rr >= base + r) for r in range(top + 1)]


def plain_numpy_dp(acts: _units.Actions) -> list[int]:
    """The plain twin: exact-reward DP over every level with one shift-and-min per action."""
    levels = int(acts.top_total()[0]) + 1
    INF = np.iinfo(np.int64).max // 4
    f = np.full(levels, INF, dtype=np.int64)
    f[0] = 0
    for u in range(acts.num_units):
        new = np.full(levels, INF, dtype=np.int64)
        for a in range(int(acts.offsets[u]), int(acts.offsets[u + 1])):
            r, c = int(acts.reward[a]), int(acts.cost[a])
            np.minimum(new[r:], f[:levels - r] + c, out=new[r:])
        f = new
    return np.minimum.accumulate(f[::-1])[::-1].tolist()     # exact reward -> at least


@settings(max_examples=60, deadline=None)
@given(trajectory_sets(max_models=1, max_groups=1, max_q=4, max_r=4, max_n=5))
def test_host_dp_matches_plain_dp_on_ragged_sets(trajs):
    ms = build(trajs)
    qs = questions_of(ms, 0)
    d = _units.cell_data(ms.L, ms.C, ms.n, ms.probes, ms.question)
    for s in STRATS:
        acts = _units.actions(s, d, d.point())
        base, top = int(acts.base_total()[0]), int(acts.top_total()[0])
        want = at_least(ref_dp([ref_prune(u) for u in ref_actions(qs, s)]), base, top)
        assert plain_numpy_dp(acts) == want, s
        for dtype in (np.int32, np.int64):
            assert _host_dp.solve(acts, dtype=dtype).tolist() == want, (s, dtype)


@st.composite
def pruned_units(draw, max_units=5, max_actions=4, max_reward=6, max_cost=40):
    """Raw units as `_units.prune_sorted` leaves them: costs and rewards strictly rising
    from (0, 0), including single-action units and units of equal actions."""
    units = []
    for _ in range(draw(st.integers(0, max_units))):
        k = draw(st.integers(0, max_actions))
        cost = sorted(draw(st.sets(st.integers(1, max_cost), min_size=k, max_size=k)))
        reward = sorted(draw(st.sets(st.integers(1, max_reward), min_size=k, max_size=k)))
        units.append([(0, 0)] + list(zip(cost, reward)))
        if units and draw(st.booleans()):
            units.append(list(units[-1]))            # a tie: the same unit twice
    return units


def as_actions(units) -> _units.Actions:
    counts = [len(u) for u in units]
    flat = [a for u in units for a in u]
    return _units.Actions(unit_problem=np.zeros(len(units), dtype=np.int64),
                          offsets=np.r_[0, np.cumsum(counts)].astype(np.int64),
                          cost=np.asarray([c for c, _ in flat], dtype=np.int64),
                          reward=np.asarray([r for _, r in flat], dtype=np.int64),
                          base=np.zeros(len(units), dtype=np.int64), num_problems=1)


@settings(max_examples=80, deadline=None)
@given(pruned_units())
def test_host_dp_matches_brute_force_on_action_lists(units):
    acts = as_actions(units)
    top = int(acts.top_total()[0])
    combos = [(sum(c for c, _ in pick), sum(r for _, r in pick)) for pick in itertools.product(*units)]
    want = at_least(combos, 0, top)
    assert plain_numpy_dp(acts) == want
    for dtype in (np.int32, np.int64):
        got = _host_dp.solve(acts, dtype=dtype)
        assert got.dtype == np.int64 and got.tolist() == want, dtype


def test_host_dp_solves_one_problem_of_a_batch_and_the_empty_problem():
    a = as_actions([[(0, 0), (3, 2)], [(0, 0), (1, 1), (4, 3)]])
    b = _units.Actions(unit_problem=np.asarray([0, 0, 2, 2]), offsets=np.r_[a.offsets, a.offsets[1:] + 5],
                       cost=np.r_[a.cost, a.cost], reward=np.r_[a.reward, a.reward],
                       base=np.zeros(4, dtype=np.int64), num_problems=3)
    want = _host_dp.solve(a).tolist()
    assert want == [0, 1, 3, 4, 7, 7]
    assert _host_dp.solve(b, 0).tolist() == want == _host_dp.solve(b, 2).tolist()
    assert _host_dp.solve(b, 1).tolist() == [0]              # a problem with no units


def test_host_dp_state_type_follows_the_total_cost():
    assert _host_dp.dtype_for(2 ** 30 - 1) == np.int32
    assert _host_dp.dtype_for(2 ** 30) == np.int64
    big = 2 ** 31 - 1
    a = as_actions([[(0, 0), (big, 1)], [(0, 0), (5, 2), (big, 3)]])
    assert _host_dp.solve(a).tolist() == [0, 5, 5, big, 2 * big]
    with pytest.raises(ValueError, match="int32 state cannot hold a total cost of 4294967294"):
        _host_dp.solve(a, dtype=np.int32)
