"""The calibrated simulator: determinism, shapes, SPEC §2 invariants, calibration to SPEC §4, CLI."""

import json

import numpy as np
import otbench.analysis as oa
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from otbench.analysis.measurement._simulate import GENERATOR, THINKING_LIMIT, simulate
from otbench.cli import main

GROUPS = ("AIME", "GPQA-Diamond", "LiveCodeBench", "MATH500")


# -- an independent OR / AD calculation (SPEC §4), checked against a Python loop ---
def or_ad_numpy(ms) -> tuple[np.ndarray, np.ndarray]:
    """float64[traj] OR and AD as fractions; earliest maximizer over valid positions only."""
    t = np.arange(ms.num_trajectories)
    acc = np.where(ms.valid(), ms.C / ms.probes[:, None], -1.0)  # invalid never wins
    k_star = acc.argmax(axis=1)  # argmax returns the first maximizer: the tie rule
    L_n = ms.L[t, ms.n].astype(np.float64)
    OR = np.where(L_n > 0, (L_n - ms.L[t, k_star]) / np.maximum(L_n, 1.0), 0.0)
    return OR, acc[t, k_star] - acc[t, ms.n]


def or_ad_loop(L, C, P):
    """One trajectory, straight from the definitions (lists `L`, `C` of length n+1)."""
    acc = [c / P for c in C]
    best = max(acc)
    k_star = next(k for k, a in enumerate(acc) if a == best)
    OR = 0.0 if L[-1] == 0 else (L[-1] - L[k_star]) / L[-1]
    return OR, acc[k_star] - acc[-1]


def cell_means(ms, x: np.ndarray) -> np.ndarray:
    """float64[cell]: mean over trajectories per question, then over the cell's questions."""
    key = ms.cell.astype(np.int64) * ms.num_questions + ms.question
    keys, inv = np.unique(key, return_inverse=True)
    per_question = np.bincount(inv, x) / np.bincount(inv)
    cell = keys // ms.num_questions
    return np.bincount(cell, per_question) / np.bincount(cell)


def grid(ms, x: np.ndarray) -> np.ndarray:
    """float64[model, group] of cell means (every scale has the full model x group grid)."""
    out = np.full((len(ms.models), len(ms.groups)), np.nan)
    out[ms.cell_model, ms.cell_group] = cell_means(ms, x)
    return out


@pytest.fixture(scope="module")
def tiny():
    return simulate("tiny", 0)


@pytest.fixture(scope="module")
def small():
    return simulate("small", 0)


@pytest.fixture(scope="module")
def paper():
    return simulate("paper", 0)


def test_or_ad_numpy_matches_loop(tiny, small):
    # Hand cases: a flat curve (k* = 0, OR = 1), a tie (earliest wins), n = 0,
    # a zero-length step at the maximum, a late drop.
    cases = [([0, 5, 9], [2, 2, 2], 1.0, 0.0), ([0, 4, 8, 10], [1, 3, 3, 2], 0.6, 0.25),
             ([0], [3], 0.0, 0.0), ([0, 4, 4, 8], [0, 1, 4, 4], 0.5, 0.0),
             ([0, 2, 6, 8], [0, 4, 1, 0], 0.75, 1.0)]
    for L, C, OR, AD in cases:
        assert or_ad_loop(L, C, 4) == pytest.approx((OR, AD), abs=1e-12)
    for ms in (tiny, small):
        OR, AD = or_ad_numpy(ms)
        for t in range(ms.num_trajectories):
            k = ms.n[t] + 1
            want = or_ad_loop(ms.L[t, :k].tolist(), ms.C[t, :k].tolist(), int(ms.probes[t]))
            # Same float operations in a different order: equal to rounding.
            assert (OR[t], AD[t]) == pytest.approx(want, abs=1e-12)


# -- argument validation -------------------------------------------------------
@pytest.mark.parametrize("scale, seed, match", [
    ("huge", 0, r"^`scale` must be one of tiny\|small\|paper, got 'huge'$"),
    (None, 0, r"^`scale` must be one of tiny\|small\|paper, got None$"),
    ("tiny", -1, r"^`seed` must be a non-negative integer, got -1$"),
    ("tiny", 1.0, r"^`seed` must be a non-negative integer, got 1.0$"),
    ("tiny", True, r"^`seed` must be a non-negative integer, got True$"),
    ("tiny", "3", r"^`seed` must be a non-negative integer, got '3'$"),
])
def test_bad_arguments(scale, seed, match):
    with pytest.raises(ValueError, match=match):
        simulate(scale, seed)


def test_numpy_integer_seed_is_accepted(tiny):
    assert oa.content_hash(simulate("tiny", np.int64(0))) == oa.content_hash(tiny)


# -- determinism -----------------------------------------------------------------
def test_same_seed_same_set(tiny, small):
    again = simulate("tiny", 0)
    assert oa.content_hash(again) == oa.content_hash(tiny)
    for name in ("L", "C", "n", "y", "finished", "probes"):
        np.testing.assert_array_equal(getattr(again, name), getattr(tiny, name))
    np.testing.assert_array_equal(again.signals["margin"], tiny.signals["margin"])  # bit-identical
    assert json.dumps(again.provenance, sort_keys=True) == json.dumps(tiny.provenance, sort_keys=True)
    assert oa.content_hash(simulate("small", 0)) == oa.content_hash(small)


def test_different_seeds_differ(tiny):
    hashes = {oa.content_hash(simulate("tiny", s)) for s in range(4)}
    assert len(hashes) == 4
    assert oa.content_hash(simulate("tiny", 1)) != oa.content_hash(tiny)


# -- shapes and counts ------------------------------------------------------------
def r_counts(ms) -> np.ndarray:
    """int[(model, question)] trajectories per occurring (cell, question)."""
    key = ms.cell.astype(np.int64) * ms.num_questions + ms.question
    return np.unique(key, return_counts=True)[1]


def test_tiny_shape(tiny):
    assert len(tiny.models) == 2 and tiny.groups == ("AIME", "GPQA-Diamond")
    assert tiny.num_cells == 4 and tiny.num_questions == 8
    assert set(r_counts(tiny).tolist()) == {3, 4}  # unequal R, both values present
    assert np.all(tiny.probes == 4)
    assert tiny.num_trajectories == r_counts(tiny).sum()


def test_small_shape(small):
    assert len(small.models) == 3 and small.groups == GROUPS
    assert small.num_cells == 12 and small.num_questions == 81
    assert np.all(r_counts(small) == 8) and np.all(small.probes == 8)
    assert small.num_trajectories == 3 * 81 * 8


def test_paper_shape(paper):
    assert paper.num_trajectories == 92_448  # SPEC §1
    assert len(paper.models) == 6 and paper.groups == GROUPS and paper.num_cells == 24
    assert paper.num_questions == 963 and np.all(r_counts(paper) == 16)
    assert np.all(paper.probes == 16)
    per_dataset = dict(zip(*np.unique(paper.question_dataset, return_counts=True)))
    assert per_dataset == {"AIME2024": 30, "AIME2025": 30, "AIME2026": 30, "MATH500": 500,
                           "GPQA-Diamond": 198, "LiveCodeBench": 175}
    aime = paper.groups.index("AIME")
    assert {d for d, g in zip(paper.question_dataset, paper.question_group) if g == aime} == \
        {"AIME2024", "AIME2025", "AIME2026"}
    assert paper.num_positions == THINKING_LIMIT // 256 + 1  # capped trajectories reach 128 steps


# -- SPEC §2 invariants and the simulator's own promises --------------------------
def check_invariants(ms) -> None:
    t = np.arange(ms.num_trajectories)
    valid = ms.valid()
    L_n = ms.L[t, ms.n]
    assert np.all(ms.L[:, 0] == 0)
    assert np.all(np.diff(ms.L, axis=1) >= 0)
    assert np.all((ms.C >= 0) & (ms.C <= ms.probes[:, None]))
    # Padding repeats the last valid value (SPEC §2).
    for arr in (ms.L, ms.C, ms.signals["margin"]):
        np.testing.assert_array_equal(np.where(valid, arr, arr[t, ms.n][:, None]), arr)
    assert np.all(np.isfinite(ms.signals["margin"]))
    # Thinking limit: capped exactly when L(n) reaches it.
    assert L_n.max() <= THINKING_LIMIT
    np.testing.assert_array_equal(~ms.finished, L_n == THINKING_LIMIT)
    # Steps: n = 0 exactly when there is no thinking; otherwise at most the
    # b = 256 target max(1, floor(L/256 + 1/2)) (fewer when boundaries are scarce).
    np.testing.assert_array_equal(ms.n == 0, L_n == 0)
    target = np.maximum(1, (L_n + 128) // 256)
    assert np.all(ms.n[L_n > 0] <= target[L_n > 0]) and np.all(ms.n[L_n > 0] >= 1)
    assert set(np.unique(ms.y).tolist()) <= {0, 1}
    assert ms.synthetic and np.all(ms.split == -1)
    assert list(ms.signals) == ["margin"]
    assert all(m.startswith("sim/") for m in ms.models)
    assert all(q.startswith("[synthetic] ") for q in ms.question_text)
    assert ms.provenance["generator"] == GENERATOR
    json.dumps(ms.provenance)  # serializable for the manifest


def test_invariants_and_edge_cases(tiny, small):
    for ms in (tiny, small):
        check_invariants(ms)
        assert np.any(ms.n == 0) and np.any(~ms.finished)  # forced edge cases
    empty_steps = (np.diff(small.L, axis=1) == 0) & small.valid()[:, 1:]
    assert empty_steps.any()  # zero-length steps occur
    assert small.provenance["scale"] == "small" and small.provenance["seed"] == 0


@settings(max_examples=15)
@given(seed=st.integers(min_value=0, max_value=2**63))
def test_tiny_invariants_any_seed(seed):
    ms = simulate("tiny", seed)
    check_invariants(ms)
    assert set(r_counts(ms).tolist()) == {3, 4}
    assert np.any(ms.n == 0) and np.any(~ms.finished)


def test_paper_invariants(paper):
    check_invariants(paper)
    t = np.arange(paper.num_trajectories)
    L_n = paper.L[t, paper.n]
    assert 0 < np.sum(paper.n == 0) < 0.005 * paper.num_trajectories  # rare n = 0
    assert 0.001 < np.mean(~paper.finished) < 0.05                   # some hit the limit
    steps = paper.n > 0
    assert 250 < np.mean(L_n[steps] / paper.n[steps]) < 265          # steps average ~ b
    assert np.any((np.diff(paper.L, axis=1) == 0) & paper.valid()[:, 1:])


# -- calibration to the paper's aggregates (SPEC §4) ------------------------------
@pytest.mark.slow
def test_paper_calibration(paper):
    OR, AD = or_ad_numpy(paper)
    t = np.arange(paper.num_trajectories)
    or_g, ad_g = grid(paper, 100 * OR), grid(paper, 100 * AD)
    acc = grid(paper, 100.0 * paper.y)
    tokens = grid(paper, paper.L[t, paper.n].astype(np.float64))
    by_group = dict(zip(paper.groups, zip(or_g.mean(0), ad_g.mean(0))))
    # Ranges from the task brief around the paper's values (SPEC §4):
    # macro OR 64.3 %, AD 9.03 pp, MATH 78.8 % / 1.83 pp, GPQA 61.4 % / 16.98 pp,
    # original accuracy 71.78 %, 8,281 mean thinking tokens.
    assert 55 <= or_g.mean() <= 75
    assert 5 <= ad_g.mean() <= 13
    assert by_group["MATH500"][0] == max(o for o, _ in by_group.values()) and by_group["MATH500"][0] >= 72
    assert by_group["MATH500"][1] == min(a for _, a in by_group.values()) and by_group["MATH500"][1] <= 4
    assert by_group["GPQA-Diamond"][1] == max(a for _, a in by_group.values())
    assert 12 <= by_group["GPQA-Diamond"][1] <= 22
    assert 67 <= acc.mean() <= 77
    assert 7_500 <= tokens.mean() <= 9_000
    # Per-model spread like the paper's OR 41.1-74.4 %, AD 5.64-13.40 pp.
    assert or_g.mean(1).min() < 55 and or_g.mean(1).max() > 70
    assert ad_g.mean(1).min() < 8 and ad_g.mean(1).max() > 11


@pytest.mark.slow
def test_margin_is_informative_but_imperfect(paper):
    t = np.arange(paper.num_trajectories)
    valid = paper.valid()
    acc = paper.C / paper.probes[:, None]
    margin = paper.signals["margin"]
    k_star = np.where(valid, acc, -1.0).argmax(axis=1)
    before = (np.arange(paper.num_positions)[None, :] < k_star[:, None]) & valid
    after = ~before & valid
    assert margin[before].mean() > margin[after].mean() + 2.0
    # ThinkBrake-style rule (SPEC §6.2): stop at the first boundary with margin <= 3.
    hit = (margin <= 3.0) & valid
    stop = np.where(hit.any(axis=1), hit.argmax(axis=1), paper.n)
    cost = paper.L[t, stop].sum() / paper.L[t, paper.n].sum()
    rule, full, oracle = acc[t, stop].mean(), acc[t, paper.n].mean(), acc[t, k_star].mean()
    assert cost < 0.85 and rule >= full          # informative: saves tokens, keeps accuracy
    assert rule < oracle - 0.03                  # imperfect: well short of the oracle


# -- CLI ------------------------------------------------------------------------------
def test_cli_simulate(tmp_path):
    out = tmp_path / "sim"
    args = ["simulate", "--out", str(out), "--scale", "tiny", "--seed", "3"]
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 0, r.output
    assert "SYNTHETIC" in r.output and str(out) in r.output
    ms = oa.load(out)
    assert ms.synthetic and oa.read_manifest(out)["synthetic"] is True
    # The default split is assigned (so `otbench bench` runs at once) and said so.
    assert oa.content_hash(ms) == oa.content_hash(oa.assign_splits(simulate("tiny", 3)))
    assert f"{ms.num_trajectories} trajectories" in r.output
    assert "split: the default question split (seed 20260721, 60/20/20 % " in r.output
    assert (ms.split >= 0).all()
    r = CliRunner().invoke(main, ["simulate", "--out", str(tmp_path / "raw"), "--scale", "tiny",
                                  "--seed", "3", "--unsplit"])
    assert r.exit_code == 0 and "run `otbench split` before `otbench bench`" in r.output
    assert oa.content_hash(oa.load(tmp_path / "raw")) == oa.content_hash(simulate("tiny", 3))
    r = CliRunner().invoke(main, args)  # exists, no --overwrite
    assert r.exit_code == 2 and "already exists" in r.output
    r = CliRunner().invoke(main, args + ["--overwrite"])
    assert r.exit_code == 0, r.output


@pytest.mark.parametrize("extra", [["--scale", "huge"], ["--seed", "-1"]])
def test_cli_bad_options(tmp_path, extra):
    r = CliRunner().invoke(main, ["simulate", "--out", str(tmp_path / "x"), *extra])
    assert r.exit_code == 2
    assert not (tmp_path / "x").exists()
