"""Frontier bootstrap (SPEC §5, §7): replicate frontiers equal `frontier_replicates` and the
point-estimate solver on explicit resampled sets; batching and worker processes change nothing."""

import jax
import numpy as np
import pytest
from _sets import build_set
from _sets import ragged_set as _ragged_set
from otbench.analysis import build_layout, frontiers, simulate
from otbench.analysis.frontier._budgets import budget_grid
from otbench.analysis.frontier._pipeline import Pipeline, cell_infos, occurrences
from otbench.analysis.frontier._replicates import frontier_replicates
from otbench.analysis.frontier._units import STRATEGIES
from otbench.analysis.resampling import _draws as bd
from otbench.analysis.resampling._bootstrap import bootstrap

GRID = 11


def build(trajs, synthetic=False):
    return build_set(trajs, synthetic=synthetic)

def ragged_set(seed=0):
    """2 models x 2 groups, unequal R and P, a missing (model, question), zero-length
    steps, n = 0, ties: the SPEC §2 edge cases."""
    return _ragged_set(seed, groups=(("g1", ("q1", "q2", "q3")), ("g2", ("q4", "q5", "q6"))))


def kernel_rows(ms, reps, seed):
    """int[rep, model, slot, draw] rows of the replicate kernel for replicates 0..reps-1."""
    layout, names = build_layout(ms)
    res = bd.resampling(ms, layout, names)
    mesh = jax.sharding.Mesh(np.asarray(jax.devices()[:1]), ("rep",))
    sh = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("rep"))
    rep = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
    table, _ = bd.fixed_point(np.zeros((5, ms.num_trajectories)), res, np.asarray(layout.seg))
    out = bd.replicate_kernel(res, sh, rep, rows=True)(
        jax.numpy.arange(reps, dtype=jax.numpy.uint64), jax.numpy.uint64(seed), res.tables,
        jax.numpy.asarray(table))
    return res, names, np.asarray(out.rows)


def test_occurrences_match_frontier_replicates_entry_point():
    ms = ragged_set(0)
    res, names, rows = kernel_rows(ms, 6, seed=1)
    infos = cell_infos(ms, names.cell_index, res.cell_model, res.cell_group, res.group_slots)
    with Pipeline(infos, budget_grid(GRID)) as p:
        got = p.finish(p.submit(rows))
    for k, s in enumerate(STRATEGIES):
        for c, info in enumerate(infos):
            f, n = info.slots
            ref = frontier_replicates(ms, int(names.cell_index[c]), s,
                                      draws=rows[:, info.model, f:f + n], grid=GRID)
            assert np.array_equal(got.reward[:, k, c], ref.reward), (s, c)
            assert np.array_equal(got.reward_one[:, k, c], ref.reward_one), (s, c)
            assert np.array_equal(got.tokens[:, c], ref.tokens)
            assert np.array_equal(got.probes[:, c], ref.probes)
            assert np.array_equal(got.endpoint[:, c], ref.endpoint)


def test_occurrence_multiplicities_count_every_draw():
    ms = ragged_set(1)
    res, names, rows = kernel_rows(ms, 3, seed=2)
    infos = cell_infos(ms, names.cell_index, res.cell_model, res.cell_group, res.group_slots)
    for info in infos:
        f, n = info.slots
        sub = rows[:, info.model, f:f + n]
        occ = occurrences(info, sub)
        assert occ.mult.sum() == int((sub >= 0).sum())
        assert occ.question.shape[0] == int((sub[:, :, 0] >= 0).sum())


def explicit(ms, drawn_by_cell):
    """One set in which every occurrence is its own question and every draw its own
    trajectory (SPEC §7's replicate written out), for all cells at once."""
    trajs = []
    for (m, g), occs in drawn_by_cell.items():
        for o, rows in enumerate(occs):
            for s, t in enumerate(rows):
                n = int(ms.n[t])
                trajs.append((m, g, f"o{o}", s, int(ms.probes[t]), ms.L[t, :n + 1].tolist(),
                              ms.C[t, :n + 1].tolist(), 0))
    return build(trajs)


def test_replicate_summaries_equal_point_solver_on_explicit_sets():
    ms = simulate("tiny", seed=4)
    r = bootstrap(ms, replicates=3, seed=8, frontiers=True, grid=GRID, batch=2)
    res, names, rows = kernel_rows(ms, 3, seed=8)
    f = r.frontiers
    for b in range(3):
        drawn = {}
        for c, (m, g) in enumerate(names.cells):
            mi, gi = res.cell_model[c], res.cell_group[c]
            first, n = res.group_slots[gi]
            sub = rows[b, mi, first:first + n]
            drawn[(m, g)] = [d[d >= 0].tolist() for d in sub if d[0] >= 0]
        want = frontiers(explicit(ms, drawn), grid=GRID)
        assert [(c.model, c.group) for c in want.cells] == list(names.cells)
        assert f.a_full[b] == want.a_full
        for k, s in enumerate(STRATEGIES):
            w = want.strategies[s]
            assert np.array_equal(f.reward[b, k], w.reward), (b, s)
            assert np.array_equal(f.reward_one[b, k], w.reward_one)
            assert f.macro[b, k].tolist() == w.macro.tolist()
            assert f.ceiling[b, k] == w.ceiling
            assert ((np.isnan(f.beta_match[b, k]) and w.beta_match is None)
                    or f.beta_match[b, k] == w.beta_match)
            assert ((np.isnan(f.beta_sat[b, k]) and w.beta_sat is None)
                    or f.beta_sat[b, k] == w.beta_sat)
        assert np.array_equal(f.tokens[b], [c.total_tokens for c in want.cells])


@pytest.mark.filterwarnings("ignore:some cells have no drawn question")
def test_frontier_batches_and_workers_change_nothing():
    ms = ragged_set(3)
    a = bootstrap(ms, replicates=7, seed=5, frontiers=True, grid=GRID, batch=7)
    b = bootstrap(ms, replicates=7, seed=5, frontiers=True, grid=GRID, batch=3)
    c = bootstrap(ms, replicates=7, seed=5, frontiers=True, grid=GRID, batch=4, workers=1)
    for name in ("reward", "reward_one", "tokens", "probes", "endpoint", "macro", "a_full",
                 "ceiling", "beta_match", "beta_sat"):
        x = getattr(a.frontiers, name)
        assert np.array_equal(x, getattr(b.frontiers, name), equal_nan=True), name
        assert np.array_equal(x, getattr(c.frontiers, name), equal_nan=True), name
    # The metrics of a run with frontiers are those of a run without.
    plain = bootstrap(ms, replicates=7, seed=5)
    assert np.array_equal(plain.cell, a.cell, equal_nan=True)


def test_hierarchy_holds_in_every_replicate_and_json():
    ms = simulate("tiny", seed=1)
    r = bootstrap(ms, replicates=6, frontiers=True, batch=3)
    f = r.frontiers
    assert np.all(f.reward[:, 0] <= f.reward[:, 1]) and np.all(f.reward[:, 1] <= f.reward[:, 2])
    assert np.all(f.macro[:, 0] <= f.macro[:, 1]) and np.all(f.macro[:, 1] <= f.macro[:, 2])
    doc = r.to_json()["frontiers"]
    assert len(doc["grid"]) == 101 and doc["grid"][0] == 0.0 and doc["grid"][-1] == 1.0
    for s in STRATEGIES:
        assert len(doc[s]["lo"]) == 101
        assert all(lo <= med <= hi for lo, med, hi in zip(doc[s]["lo"], doc[s]["median"], doc[s]["hi"]))
        assert set(doc[s]) >= {"lo", "hi", "median", "beta_match", "ceiling", "beta_sat", "cells"}
        assert len(doc[s]["cells"]) == len(r.names.cells)


@pytest.mark.parametrize("grid", [2, [0.0, 0.35, 1.0]])
def test_explicit_grids(grid):
    ms = ragged_set(5)
    r = bootstrap(ms, replicates=2, frontiers=True, grid=grid, batch=2)
    assert r.frontiers.reward.shape[-1] == (2 if grid == 2 else 3)
