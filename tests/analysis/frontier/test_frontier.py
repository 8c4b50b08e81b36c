"""Exactness of the oracle frontiers (SPEC §5): references, brute force, MILP, properties, transforms."""

import itertools
from fractions import Fraction

import jax
import numpy as np
import pytest
from _sets import build_set
from hypothesis import given, settings
from hypothesis import strategies as st
from otbench.analysis.frontier import _dp, _units
from otbench.analysis.frontier._budgets import budget_grid, budgets, summarize
from otbench.analysis.frontier._frontiers import (
    Cell,
    FrontierHierarchyError,
    check_hierarchy,
    frontiers,
)
from otbench.analysis.frontier._replicates import frontier_replicates

STRATS = ("dr", "fb", "dee")


# -- building sets --------------------------------------------------------------

def build(trajs, synthetic=True):
    return build_set(trajs, synthetic=synthetic, y=False)

def random_trajs(rng, models=2, groups=(3, 2), R=(1, 4), P=(1, 4), nmax=5, steps=(0, 1, 2, 3, 7)):
    out = []
    for m in range(models):
        for g, Q in enumerate(groups):
            for q in range(Q):
                p = int(rng.integers(P[0], P[1] + 1))
                for s in range(int(rng.integers(R[0], R[1] + 1))):
                    n = int(rng.integers(0, nmax + 1))
                    L = np.r_[0, np.cumsum(rng.choice(steps, n))].tolist()
                    C = rng.integers(0, p + 1, n + 1).tolist()
                    out.append((f"m{m}", f"g{g}", f"q{q}", s, p, L, C))
    return out


@st.composite
def trajectory_sets(draw, max_models=2, max_groups=2, max_q=3, max_r=4, max_n=5, max_p=4):
    """Ragged sets with the edge cases of SPEC §2: ties, flat curves, zero-length
    steps, identical caps, one-trajectory questions, all-n=0 questions, unequal R and P."""
    trajs = []
    for m in range(draw(st.integers(1, max_models))):
        for g in range(draw(st.integers(1, max_groups))):
            for q in range(draw(st.integers(1, max_q))):
                p = draw(st.integers(1, max_p))
                all_zero = draw(st.booleans()) and draw(st.booleans())   # ~1/4: every n = 0
                prev = None
                for s in range(draw(st.integers(1, max_r))):
                    if prev is not None and draw(st.booleans()):
                        L = list(prev)                    # identical caps
                    else:
                        n = 0 if all_zero else draw(st.integers(0, max_n))
                        steps = draw(st.lists(st.sampled_from([0, 0, 1, 2, 5]), min_size=n, max_size=n))
                        L = np.r_[0, np.cumsum(steps, dtype=np.int64)].tolist()
                    if draw(st.booleans()):
                        C = [draw(st.integers(0, p))] * len(L)           # flat curve
                    else:
                        C = draw(st.lists(st.integers(0, p), min_size=len(L), max_size=len(L)))
                    prev = L
                    trajs.append((f"m{m}", f"g{g}", f"q{q}", s, p, L, C))
    return trajs


# -- plain references (straight from the SPEC §5 definitions) ------------------------------

def questions_of(ms, c):
    """[question][trajectory] -> (L list, C list) of cell c, from the ragged values."""
    out = {}
    for t in ms.cell_rows(c):
        n = int(ms.n[t])
        out.setdefault(int(ms.question[t]), []).append(
            (ms.L[t, :n + 1].tolist(), ms.C[t, :n + 1].tolist()))
    return [out[q] for q in sorted(out)]


def ref_actions(qs, strategy):
    """Unpruned actions [(cost, reward)] of every unit."""
    units = []
    if strategy == "dee":
        for q in qs:
            for L, C in q:
                units.append([(L[k], C[k]) for k in range(len(L))])
    elif strategy == "dr":
        for q in qs:
            # No thinking retained: the latest position with L = 0 (k = 0 unless
            # the trajectory starts with zero-length steps; see _units).
            zero = sum(C[max(k for k in range(len(L)) if L[k] == 0)] for L, C in q)
            units.append([(0, zero), (sum(L[-1] for L, _ in q), sum(C[-1] for _, C in q))])
    else:
        for q in qs:
            acts = {}
            for cap in sorted({x for L, _ in q for x in L}):
                pos = tuple(max(k for k in range(len(L)) if L[k] <= cap) for L, _ in q)
                acts[pos] = (sum(L[k] for k, (L, _) in zip(pos, q)),
                             sum(C[k] for k, (_, C) in zip(pos, q)))
            units.append(list(acts.values()))
    return units


def ref_prune(acts):
    best = {}
    for c, r in acts:
        if r not in best or c < best[r]:
            best[r] = c
    out = []
    for c, r in sorted(((c, r) for r, c in best.items()), key=lambda x: (x[0], -x[1])):
        if not out or r > out[-1][1]:
            out.append((c, r))
    return out


def ref_dp(units):
    """NumPy reference DP with plain loops: exact-reward min cost, then Pareto points."""
    total = sum(max(r for _, r in u) for u in units)
    INF = np.iinfo(np.int64).max
    f = np.full(total + 1, INF, dtype=np.int64)
    f[0] = 0
    for u in units:
        new = np.full_like(f, INF)
        for r0 in range(total + 1):
            if f[r0] == INF:
                continue
            for c, r in u:
                if f[r0] + c < new[r0 + r]:
                    new[r0 + r] = f[r0] + c
        f = new
    pts, best = [], INF
    for r in range(total, -1, -1):
        if f[r] < best:
            best = int(f[r])
            pts.append((best, r))
    return pts[::-1]                     # cost and reward strictly increasing


def best_reward(points, budget):
    """Largest reward among (cost, reward) points with cost <= budget (exact)."""
    return max(r for c, r in points if c <= budget)


def pareto_of(points):
    pts, best = [], None
    for c, r in sorted(points, key=lambda x: (x[0], -x[1])):
        if best is None or r > best:
            pts.append((c, r))
            best = r
    return pts


# -- exactness ------------------------------------------------------------------------

def check_against_reference(ms, res, grid):
    for i, cell in enumerate(res.cells):
        qs = questions_of(ms, cell.index)
        T = sum(L[-1] for q in qs for L, _ in q)
        assert cell.total_tokens == T
        for s in res.strategies:
            pts = ref_dp([ref_prune(u) for u in ref_actions(qs, s)])
            f = res.strategies[s]
            cost, reward = f.pareto[i]
            assert list(zip(cost.tolist(), reward.tolist())) == pts, (s, cell)
            want = [best_reward(pts, b * T) for b in grid]
            assert f.reward[i].tolist() == want, (s, cell)
            assert f.reward_one[i] == best_reward(pts, T)


@settings(max_examples=40)
@given(trajectory_sets())
def test_frontier_matches_reference_dp(trajs):
    ms = build(trajs)
    grid = budget_grid(11)
    res = frontiers(ms, grid=11, pareto=True)        # also runs the hierarchy check
    check_against_reference(ms, res, grid)


@settings(max_examples=25)
@given(trajectory_sets(max_models=1, max_groups=1, max_q=3, max_r=3, max_n=4))
def test_kernel_many_tiles_lanes_and_blocks(trajs):
    # Tiny tiles, lanes and blocks exercise tile growth, multi-chunk units and
    # block boundaries that the default sizes never reach on small inputs.
    ms = build(trajs)
    qs = questions_of(ms, 0)
    d = _units.cell_data(ms.L, ms.C, ms.n, ms.probes, ms.question)
    for s in STRATS:
        acts = _units.actions(s, d, d.point())
        pts = ref_dp([ref_prune(u) for u in ref_actions(qs, s)])
        base = int(acts.base_total()[0])
        # g[r] = least cost reaching a total reward >= base + r, up to the maximum.
        want = [min(c for c, rr in pts if rr >= base + r) for r in range(pts[-1][1] - base + 1)]
        for tile, lanes, block, slots in ((2, 1, 1, 1), (4, 2, 3, 2), (8, 4, 5, 3)):
            g = _dp.solve(acts, tile=tile, lanes=lanes, block=block, slots=slots)[0]
            assert g.tolist() == want, (s, tile)


def test_pruned_actions_match_reference():
    rng = np.random.default_rng(3)
    ms = build(random_trajs(rng, models=1, groups=(4,)))
    qs = questions_of(ms, 0)
    d = _units.cell_data(ms.L, ms.C, ms.n, ms.probes, ms.question)
    for s in STRATS:
        a = _units.actions(s, d, d.point())
        ref = [ref_prune(u) for u in ref_actions(qs, s)]
        got = [list(zip(a.cost[a.offsets[u]:a.offsets[u + 1]].tolist(),
                        (a.reward[a.offsets[u]:a.offsets[u + 1]] + a.base[u]).tolist()))
               for u in range(a.num_units)]
        assert got == ref, s


def tiny_sets():
    """Cells small enough to enumerate every combination of unpruned actions."""
    rng = np.random.default_rng(11)
    for seed in range(12):
        yield build(random_trajs(rng, models=1, groups=(2,), R=(1, 3), P=(1, 3), nmax=3,
                                 steps=(0, 1, 3)))


def test_brute_force_enumeration():
    grid = budget_grid(21)
    for ms in tiny_sets():
        res = frontiers(ms, grid=21, pareto=True)
        qs = questions_of(ms, 0)
        T = res.cells[0].total_tokens
        for s in STRATS:
            units = ref_actions(qs, s)                     # unpruned: independent of pruning
            combos = [(sum(c for c, _ in pick), sum(r for _, r in pick))
                      for pick in itertools.product(*units)]
            f = res.strategies[s]
            assert f.reward[0].tolist() == [best_reward(combos, b * T) for b in grid], s
            cost, reward = f.pareto[0]
            assert list(zip(cost.tolist(), reward.tolist())) == pareto_of(combos), s


def test_milp_every_budget():
    """An independent exact solver: the multiple-choice knapsack as a MILP."""
    from scipy.optimize import Bounds, LinearConstraint, milp

    rng = np.random.default_rng(5)
    grid = budget_grid(11)
    for rep in range(6):
        ms = build(random_trajs(rng, models=1, groups=(3,), R=(1, 4), P=(1, 4), nmax=5))
        res = frontiers(ms, grid=11)
        qs = questions_of(ms, 0)
        T = res.cells[0].total_tokens
        for s in STRATS:
            units = ref_actions(qs, s)
            cost = np.asarray([c for u in units for c, _ in u], dtype=float)
            rew = np.asarray([r for u in units for _, r in u], dtype=float)
            A = np.zeros((len(units), cost.size))
            j = 0
            for u, acts in enumerate(units):
                A[u, j:j + len(acts)] = 1
                j += len(acts)
            want = []
            for b in grid:
                B = (b.numerator * T) // b.denominator          # integer costs: c <= βT iff c <= floor(βT)
                r = milp(-rew, integrality=np.ones(cost.size), bounds=Bounds(0, 1),
                         constraints=[LinearConstraint(A, 1, 1), LinearConstraint(cost[None], 0, B)])
                assert r.success
                x = np.round(r.x).astype(np.int64)
                assert int(x @ cost.astype(np.int64)) <= B      # feasible in exact integers
                want.append(int(x @ rew.astype(np.int64)))
            assert res.strategies[s].reward[0].tolist() == want, (rep, s)


# -- hand-calculated cases -----------------------------------------------------------------

def hand_set():
    # t0 starts with a zero-length step on which C drops; t1 is short.
    # T = 3 + 4 = 7, probes 2 + 2 = 4 per position pair, endpoint C = 1 + 2 = 3.
    return build([("m", "g", "q", 0, 2, [0, 0, 3], [2, 0, 1]),
                  ("m", "g", "q", 1, 2, [0, 4], [0, 2])])


def test_hand_example():
    # By hand (provenance: the SPEC §5 definitions):
    # DEE units: t0 {(0,2)} (cost-0 reward 2 dominates), t1 {(0,0),(4,2)}.
    # DR: zero = latest L=0 positions (t0 k=1: 0, t1 k=0: 0) -> (0,0); full (7,3).
    # FB caps {0,3,4}: (0,0), (3,1), (7,3).
    ms = hand_set()
    res = frontiers(ms, grid=[0, Fraction(3, 7) - Fraction(1, 10**9), Fraction(3, 7),
                              Fraction(4, 7), 1], pareto=True)
    assert res.strategies["dr"].reward[0].tolist() == [0, 0, 0, 0, 3]
    assert res.strategies["fb"].reward[0].tolist() == [0, 0, 1, 1, 3]   # exact tie at 3/7
    assert res.strategies["dee"].reward[0].tolist() == [2, 2, 2, 4, 4]
    assert res.a_full == 0.75
    dee = res.strategies["dee"]
    assert dee.ceiling == 1.0
    assert dee.beta_sat == dee.beta_match == float(Fraction(4, 7))
    assert res.strategies["fb"].beta_match == 1.0 and res.strategies["dr"].ceiling == 0.75
    assert [p.tolist() for p in res.strategies["fb"].pareto[0]] == [[0, 3, 7], [0, 1, 3]]
    # On the default grid the first budget with cost 4 allowed is ceil(4/7 * 1000) / 1000.
    d = frontiers(ms).strategies["dee"]
    assert d.beta_sat == 0.572 and d.beta_match == 0.572


def test_budget_comparison_is_exact_at_float_ties():
    # 0.57 * 100 is 56.99999999999999 in floats; exactly it is 57, so an action
    # of cost 57 is allowed at β = 0.57.
    ms = build([("m", "g", "q", 0, 2, [0, 57, 100], [0, 1, 2])])
    assert 0.57 * 100 < 57
    res = frontiers(ms, grid=[0.56, 0.57, 1.0])
    assert res.strategies["dee"].reward[0].tolist() == [0, 1, 2]
    assert res.strategies["fb"].reward[0].tolist() == [0, 1, 2]
    assert res.strategies["dr"].reward[0].tolist() == [0, 0, 2]


def test_literal_k0_reading_would_break_the_hierarchy():
    # Why DR's zero action is "latest L = 0 position": with k = 0 literally, DR
    # would get reward 2 at zero cost in the hand set, FB only 0 (its cap 0
    # moves t0 onto the zero-length step), and F_DR <= F_FB would fail.
    ms = hand_set()
    qs = questions_of(ms, 0)
    literal_zero = sum(C[0] for L, C in qs[0])
    fb_zero = frontiers(ms, grid=2).strategies["fb"].reward[0, 0]
    assert literal_zero == 2 and fb_zero == 0
    assert frontiers(ms, grid=2).strategies["dr"].reward[0, 0] == 0


def test_questions_with_only_n0_trajectories_and_single_question_cells():
    ms = build([("m", "g", "q", 0, 3, [0], [1]), ("m", "g", "q", 1, 3, [0], [2]),
                ("m", "h", "q", 0, 4, [0, 5], [0, 4])])
    res = frontiers(ms, grid=3, pareto=True)
    for s in STRATS:
        f = res.strategies[s]
        assert f.reward[0].tolist() == [3, 3, 3]           # T = 0: everything is free
        assert f.reward[1].tolist() == [0, 0, 4]
        assert [p.tolist() for p in f.pareto[0]] == [[0], [3]]
    assert res.cells[0].total_tokens == 0 and res.cells[0].total_probes == 6


# -- summaries -------------------------------------------------------------------------

def test_summaries_exact_against_fractions():
    rng = np.random.default_rng(7)
    ms = build(random_trajs(rng, models=3, groups=(2, 3, 1), R=(1, 3), P=(1, 5)))
    # Drop one cell so models have unequal group counts (the equal-weight chain matters).
    keep = np.flatnonzero(ms.cell != 0)
    ms = ms.take(keep)
    res = frontiers(ms, grid=51)
    cm = [c.model for c in res.cells]
    models = sorted(set(cm))

    def macro(vals):
        return sum(sum(Fraction(v) for v, m2 in zip(vals, cm) if m2 == m) / cm.count(m)
                   for m in models) / len(models)

    a_full = macro([Fraction(c.endpoint, c.total_probes) for c in res.cells])
    assert res.a_full == float(a_full)
    for s, f in res.strategies.items():
        F = [macro([Fraction(int(f.reward[i, j]), c.total_probes) for i, c in enumerate(res.cells)])
             for j in range(len(res.grid))]
        assert f.macro.tolist() == [float(x) for x in F]
        one = macro([Fraction(int(f.reward_one[i]), c.total_probes) for i, c in enumerate(res.cells)])
        assert f.ceiling == float(one)
        match = [b for b, x in zip(res.grid, F) if x >= a_full]
        assert f.beta_match == (float(match[0]) if match else None)
        sat = [b for b, x in zip(res.grid, F) if x == one]
        assert f.beta_sat == float(sat[0])


def test_summarize_batch_axes_match_single():
    rng = np.random.default_rng(2)
    grid = budget_grid(5)
    reward = rng.integers(0, 50, (3, 4, 5)).cumsum(axis=-1)
    one = reward[..., -1] + rng.integers(0, 2, (3, 4))
    endpoint = rng.integers(0, 60, (3, 4))
    probes = rng.integers(60, 90, (3, 4))
    cm = np.array([0, 0, 1, 2])
    batch = summarize(grid, reward, one, endpoint, probes, cm)
    for b in range(3):
        single = summarize(grid, reward[b], one[b], endpoint[b], probes[b], cm)
        assert np.array_equal(batch.macro[b], single.macro)
        for k in ("a_full", "ceiling", "beta_match", "beta_sat"):
            assert np.array_equal(getattr(batch, k)[b], getattr(single, k), equal_nan=True)


def test_hierarchy_check_raises_with_cell_and_beta():
    cells = [Cell(0, "m0", "g0", 10, 4, 2), Cell(1, "m1", "g1", 10, 4, 2)]
    grid = budget_grid(3)
    ok = np.array([[0, 1, 2], [0, 1, 2]])
    check_hierarchy({"dr": ok, "fb": ok, "dee": ok}, {s: ok[:, -1] for s in STRATS}, grid, cells)
    bad = ok.copy()
    bad[1, 1] = 5
    with pytest.raises(FrontierHierarchyError,
                       match=r"cell \(m1, g1\) at beta = 0.5: FB reward 5 > DEE reward 1"):
        check_hierarchy({"dr": ok, "fb": bad, "dee": ok}, {s: ok[:, -1] for s in STRATS}, grid, cells)
    with pytest.raises(FrontierHierarchyError, match=r"cell \(m0, g0\) at beta = 1: DR reward 3"):
        check_hierarchy({"dr": ok, "fb": ok}, {"dr": np.array([3, 2]), "fb": ok[:, -1]}, grid, cells)


# -- invariance and transformations -------------------------------------------------------

@settings(max_examples=20)
@given(trajectory_sets(), st.randoms(use_true_random=False))
def test_invariant_to_question_and_trajectory_order(trajs, rnd):
    ms = build(trajs)
    qnames = sorted({t[2] for t in trajs})
    relabel = dict(zip(qnames, rnd.sample(qnames, len(qnames))))
    perm = []
    for t in trajs:
        perm.append((t[0], t[1], "x" + relabel[t[2]], rnd.randrange(10**6) * 100 + t[3], *t[4:]))
    rnd.shuffle(perm)
    a = frontiers(ms, grid=11, pareto=True)
    b = frontiers(build(perm), grid=11, pareto=True)
    for s in STRATS:
        assert np.array_equal(a.strategies[s].reward, b.strategies[s].reward)
        for (c1, r1), (c2, r2) in zip(a.strategies[s].pareto, b.strategies[s].pareto):
            assert np.array_equal(c1, c2) and np.array_equal(r1, r2)


def small_plan(seed, tile=4, min_cap=0):
    rng = np.random.default_rng(seed)
    ms = build(random_trajs(rng, models=1, groups=(4,), R=(2, 4), P=(3, 6), nmax=6))
    d = _units.cell_data(ms.L, ms.C, ms.n, ms.probes, ms.question)
    a = _units.actions("dee", d, d.point())
    return a, _dp.plan(a, tile=tile, lanes=2, block=4, slots=3, min_cap=min_cap, min_front=16)


def test_jit_and_eager_identical():
    a, p = small_plan(0, min_cap=64)
    assert len(p.blocks) > 1
    jitted = np.asarray(_dp.run(p))
    state = _dp.DPState(jax.numpy.asarray(_dp.initial_state(None, p.front, p.cap, p.dtype)))
    with jax.disable_jit():
        for start, stop in p.blocks:
            b = _dp.block_inputs(p, start, stop)
            blk = _dp.UnitBlock(b.cost[0], b.reward[0], b.first[0], b.chunks[0], b.tiles)
            state = _dp.scan_units(state, blk, front=p.front, tile=p.tile)
    assert np.array_equal(np.asarray(state.buf), jitted)
    assert jitted[p.front + int(a.top_total()[0]) + 1:].min() == _dp.SENTINEL32


def test_no_recompilation_for_same_padded_shape():
    a1, p1 = small_plan(1, min_cap=64)
    a2, p2 = small_plan(2, min_cap=64)
    assert (p1.slots, p1.cap, p1.front, p1.block) == (p2.slots, p2.cap, p2.front, p2.block)
    assert a1.num_units != a2.num_units                   # different cells, same padded shape
    fn = _dp._compiled(p1.front, p1.tile, False)
    _dp.run(p1)
    size = fn._cache_size()
    out = np.asarray(_dp.run(p2))
    assert fn._cache_size() == size
    d = p2.front
    assert np.array_equal(out[d:d + int(a2.top_total()[0]) + 1],
                          _dp.solve(a2, tile=8, lanes=1, block=2)[0])


def test_vmap_over_cells_equals_separate_solves():
    rng = np.random.default_rng(9)
    ms = build(random_trajs(rng, models=2, groups=(3, 2)))
    for s in STRATS:
        per, datas = [], []
        for c in np.unique(ms.cell):
            rows = ms.cell_rows(int(c))
            d = _units.cell_data(ms.L[rows], ms.C[rows], ms.n[rows], ms.probes[rows], ms.question[rows])
            per.append(_dp.solve(_units.actions(s, d, d.point()))[0])
            datas.append(_units.actions(s, d, d.point()))
        # Stack the cells as one batch of problems and vmap the kernel over it.
        batch = _units.Actions(
            unit_problem=np.concatenate([np.full(a.num_units, i) for i, a in enumerate(datas)]),
            offsets=np.r_[0, np.cumsum(np.concatenate([a.count for a in datas]))],
            cost=np.concatenate([a.cost for a in datas]),
            reward=np.concatenate([a.reward for a in datas]),
            base=np.concatenate([a.base for a in datas]), num_problems=len(datas))
        together = _dp.solve(batch, batched=True, tile=4, block=3, slots=4)
        assert all(np.array_equal(x, y) for x, y in zip(per, together)), s


# -- bootstrap entry point -------------------------------------------------------------------

def explicit(ms, cell, occurrences):
    """A one-cell set in which every occurrence is its own question and every
    draw its own trajectory: the explicit repetition a replicate stands for."""
    trajs = []
    for o, rows in enumerate(occurrences):
        for s, t in enumerate(rows):
            n = int(ms.n[t])
            trajs.append(("m", "g", f"o{o}", s, int(ms.probes[t]), ms.L[t, :n + 1].tolist(),
                          ms.C[t, :n + 1].tolist()))
    return build(trajs)


def replicate_set():
    rng = np.random.default_rng(21)
    return build(random_trajs(rng, models=1, groups=(4,), R=(1, 4), P=(1, 4), nmax=4))


def test_weights_equal_explicit_repetition():
    ms = replicate_set()
    rows = ms.cell_rows(0)
    qs = [rows[ms.question[rows] == q] for q in np.unique(ms.question[rows])]
    rng = np.random.default_rng(0)
    for s in STRATS:
        units = len(rows) if s == "dee" else len(qs)
        w = rng.integers(0, 3, (4, units))
        w[:, 0] = np.maximum(w[:, 0], 1)
        rep = frontier_replicates(ms, 0, s, weights=w, grid=11)
        for b in range(w.shape[0]):
            if s == "dee":
                occ = [[t] for t in np.repeat(rows, w[b])]   # every draw its own unit
            else:
                occ = [q for q, k in zip(qs, w[b]) for _ in range(k)]
            want = frontiers(explicit(ms, 0, occ), strategies=[s], grid=11).strategies[s]
            assert rep.reward[b].tolist() == want.reward[0].tolist(), (s, b)
            assert rep.reward_one[b] == want.reward_one[0]
            assert rep.tokens[b] == sum(int(ms.L[t, -1]) for o in occ for t in o)


def two_stage_draws(ms, rng, reps):
    """SPEC §7: resample questions, then R trajectories within each occurrence."""
    rows = ms.cell_rows(0)
    qs = [rows[ms.question[rows] == q] for q in np.unique(ms.question[rows])]
    Rmax = max(len(q) for q in qs)
    out = np.full((reps, len(qs), Rmax), -1, dtype=np.int64)
    for b in range(reps):
        for o, qi in enumerate(rng.integers(0, len(qs), len(qs))):
            out[b, o, :len(qs[qi])] = rng.choice(qs[qi], len(qs[qi]))
    return out


def test_two_stage_draws_equal_explicit_repetition_and_batches():
    ms = replicate_set()
    draws = two_stage_draws(ms, np.random.default_rng(4), 5)
    for s in STRATS:
        full = frontier_replicates(ms, 0, s, draws=draws, grid=11)
        for b in range(draws.shape[0]):
            occ = [d[d >= 0] for d in draws[b]]
            want = frontiers(explicit(ms, 0, occ), strategies=[s], grid=11).strategies[s]
            assert full.reward[b].tolist() == want.reward[0].tolist(), (s, b)
        # vmap over replicates equals a loop, whatever the batch size.
        for batch in (1, 2):
            part = frontier_replicates(ms, 0, s, draws=draws, grid=11, batch=batch)
            assert np.array_equal(part.reward, full.reward)
            assert np.array_equal(part.reward_one, full.reward_one)


# -- validation messages ---------------------------------------------------------------------

@pytest.mark.parametrize("grid, msg", [
    (1, r"`grid` must be at least 2 points, got 1"),
    ([], r"`grid` must not be empty"),
    ([0.5, 0.2], r"`grid` values must be strictly increasing"),
    ([0.0, 1.5], r"`grid` values must lie in \[0, 1\], got 0.0..1.5"),
    ([0.0, float("nan")], r"`grid` values must be finite numbers, got nan"),
    ("abc", r"`grid` must be a number of points or a sequence of budgets, got 'abc'"),
])
def test_grid_messages(grid, msg):
    with pytest.raises(ValueError, match=msg):
        budget_grid(grid)


def test_grid_values_are_exact_decimals():
    assert budget_grid([0, 0.35, 1]) == (Fraction(0), Fraction(7, 20), Fraction(1))
    assert budget_grid(5)[1] == Fraction(1, 4)


@pytest.mark.parametrize("strategies, msg", [
    ("dr,xx", r"`strategies` must be among dr, fb, dee, got 'xx'"),
    ([], r"`strategies` must name at least one of dr, fb, dee"),
    (["dr", "dr"], r"`strategies` must not repeat a strategy, got dr, dr"),
])
def test_strategy_messages(strategies, msg):
    with pytest.raises(ValueError, match=msg):
        frontiers(hand_set(), strategies=strategies)


def test_strategies_reported_in_hierarchy_order():
    assert list(frontiers(hand_set(), strategies="dee,dr", grid=2).strategies) == ["dr", "dee"]


def test_replicate_messages():
    ms = replicate_set()
    Q = len(np.unique(ms.question))
    T = ms.num_trajectories
    cases = [
        (dict(), r"pass exactly one of `draws` and `weights`"),
        (dict(weights=np.ones((2, Q + 1), dtype=int)),
         rf"`weights` must be integer \[rep, {Q}\] \(questions of the cell\), got shape \(2, {Q + 1}\)"),
        (dict(weights=-np.ones((2, Q), dtype=int)), r"`weights` must be non-negative"),
        (dict(weights=np.zeros((2, Q), dtype=int)), r"every replicate must draw at least one unit"),
        (dict(draws=np.zeros((2, 3), dtype=int)),
         r"`draws` must be an integer array \[rep, occurrence, draw\]"),
        (dict(draws=np.full((1, 1, 1), -2)), r"`draws` must hold rows of the set or -1"),
        (dict(draws=np.full((1, 1, 1), T + 5)), r"`draws` must hold rows of cell 0 \(or -1 for no draw\)"),
        (dict(draws=np.array([[[0, T - 1]]])),
         r"every occurrence in `draws` must draw rows of a single question"),
        (dict(draws=np.full((1, 2, 2), -1)), r"every replicate must draw at least one unit"),
    ]
    for kw, msg in cases:
        with pytest.raises(ValueError, match=msg):
            frontier_replicates(ms, 0, "fb", **kw)
    with pytest.raises(ValueError, match=r"`strategy` must be one of dr, fb, dee, got 'x'"):
        frontier_replicates(ms, 0, "x", weights=np.ones((1, Q), dtype=int))
    with pytest.raises(ValueError, match=r"`cell` must index a cell with trajectories, got 3"):
        frontier_replicates(ms, 3, "dr", weights=np.ones((1, Q), dtype=int))
    with pytest.raises(ValueError, match=r"`batch` must be a positive integer, got 0"):
        frontier_replicates(ms, 0, "dr", weights=np.ones((1, Q), dtype=int), batch=0)


# -- sizes, dtypes and module defaults ------------------------------------------------------

def test_int64_state_for_totals_past_2_30():
    big = 2 ** 31 - 1                   # the largest L the measurement set admits (int32)
    ms = build([("m", "g", "q", 0, 2, [0, 2 ** 30, big], [0, 1, 2]),
                ("m", "g", "q", 1, 2, [0, 5, big], [1, 0, 2]),
                ("m", "g", "r", 0, 3, [0, big], [3, 0])])
    res = frontiers(ms, grid=11, pareto=True)
    assert _dp.dtype_for(res.cells[0].total_tokens) == np.int64
    check_against_reference(ms, res, budget_grid(11))


def test_budgets_exact_with_python_integers_when_int64_would_overflow():
    grid = budget_grid([0, 0.123456789012345, 1])
    T = np.array([3 * (2 ** 31 - 1), 7], dtype=np.int64)
    got = budgets(grid, T)
    want = [[(b.numerator * int(t)) // b.denominator for b in grid] for t in T]
    assert got.tolist() == want
    assert grid[1].numerator * int(T[0]) > 2 ** 63          # the int64 product would overflow


def test_result_independent_of_tile_lanes_and_block(monkeypatch):
    rng = np.random.default_rng(13)
    ms = build(random_trajs(rng, models=2, groups=(3, 2), R=(1, 5), P=(1, 5), nmax=6))
    want = frontiers(ms, grid=21, pareto=True)
    monkeypatch.setattr(_dp, "TILE", 4)
    monkeypatch.setattr(_dp, "LANES", 2)
    monkeypatch.setattr(_dp, "BLOCK", 3)
    monkeypatch.setattr(_dp, "SLOTS", 2)
    got = frontiers(ms, grid=21, pareto=True)
    for s in STRATS:
        assert np.array_equal(got.strategies[s].reward, want.strategies[s].reward)
        for (c1, r1), (c2, r2) in zip(got.strategies[s].pareto, want.strategies[s].pareto):
            assert np.array_equal(c1, c2) and np.array_equal(r1, r2)


@settings(max_examples=10)
@given(trajectory_sets(max_models=1, max_groups=1, max_q=3, max_r=3, max_n=4),
       st.integers(0, 2 ** 32 - 1))
def test_random_draws_equal_explicit_repetition(trajs, seed):
    ms = build(trajs)
    draws = two_stage_draws(ms, np.random.default_rng(seed), 3)
    for s in STRATS:
        rep = frontier_replicates(ms, 0, s, draws=draws, grid=6)
        for b in range(draws.shape[0]):
            occ = [d[d >= 0] for d in draws[b]]
            want = frontiers(explicit(ms, 0, occ), strategies=[s], grid=6).strategies[s]
            assert rep.reward[b].tolist() == want.reward[0].tolist(), (s, b)


def test_macro_frontier_chains_models_of_groups_on_an_incomplete_grid():
    """SPEC §5: equal weights over models of equal-weighted groups, not the plain cell mean."""
    rng = np.random.default_rng(11)
    full = build(random_trajs(rng, models=2, groups=(2, 2), R=(1, 3), P=(2, 4)))
    res_full = frontiers(full, grid=11)
    # one cell missing: model 0 keeps one group, model 1 keeps two
    part = full.take(np.flatnonzero(full.cell != 0))
    res = frontiers(part, grid=11)
    assert res.to_json()["weighting"].startswith("equal weights over models of equal-weighted groups")
    for r in (res_full, res):
        cm = [c.model for c in r.cells]
        for s, f in r.strategies.items():
            acc = [[Fraction(int(f.reward[i, j]), c.total_probes) for i, c in enumerate(r.cells)]
                   for j in range(len(r.grid))]
            per_model = [[sum(a for a, m in zip(row, cm) if m == mm) / cm.count(mm)
                          for mm in sorted(set(cm))] for row in acc]
            chain = [float(sum(pm) / len(pm)) for pm in per_model]
            plain = [float(sum(row) / len(row)) for row in acc]
            assert f.macro.tolist() == chain
            if r is res_full:
                assert chain == plain                  # full grid: the same number
    f = res.strategies["dee"]
    plain = [float(sum(Fraction(int(f.reward[i, j]), c.total_probes)
                       for i, c in enumerate(res.cells)) / len(res.cells))
             for j in range(len(res.grid))]
    assert f.macro.tolist() != plain                   # incomplete grid: the chain differs
