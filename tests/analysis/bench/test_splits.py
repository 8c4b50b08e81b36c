"""Question-level splits (SPEC §6.1): determinism, stratification, split files, messages, CLI."""

import hashlib
import json
import random
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from otbench.analysis import (
    MeasurementSetError,
    from_ragged,
    load,
    ragged,
    save,
    simulate,
)
from otbench.analysis.bench._splits import (
    DEFAULT_RATIOS,
    DEFAULT_SEED,
    apply_split_file,
    assign_splits,
    question_splits,
    ratios_iv,
    read_split_file,
    split_counts,
    split_key,
    split_questions,
    write_split_file,
)

ROOT = Path(__file__).resolve().parents[3]


# -- twins ---------------------------------------------------------------------------

def counts_twin(N, ratios):
    """Largest remainder on exact quotas, then the at-least-one rule, written as loops."""
    r = [Fraction(str(x)) if isinstance(x, float) else Fraction(x) for x in ratios]
    r = [x / sum(r) for x in r]
    quota = [N * x for x in r]
    c = [int(q) for q in quota]                          # floor: quotas are >= 0
    rems = [(quota[j] - c[j], -j) for j in range(3)]
    for _ in range(N - sum(c)):
        j = -max(rems)[1]
        c[j] += 1
        rems[j] = (Fraction(-1), -j)
    pos = [j for j in range(3) if r[j] > 0]
    while N >= len(pos) and any(c[j] == 0 for j in pos):
        big = max(range(3), key=lambda j: (c[j], -j))
        c[big] -= 1
        c[[j for j in pos if c[j] == 0][0]] += 1
    return tuple(c)


def key_twin(seed, group, qid):
    b = b""
    for p in (b"otbench/split/v1", str(seed).encode(), group.encode(), qid.encode()):
        b += len(p).to_bytes(4, "big") + p
    return hashlib.sha256(b).digest()


def build(rows, split=None):
    """A set from (model, group, question, trajectory) rows with simple curves."""
    m, g, q, s = (list(c) for c in zip(*rows))
    L = [[0, 3, 5] for _ in rows]
    C = [[0, 1, 1] for _ in rows]
    return from_ragged(model=m, group=g, question=q, trajectory=np.asarray(s),
                       probes=np.full(len(rows), 2), L=ragged(L, np.int64),
                       C=ragged(C, np.int64), y=np.zeros(len(rows)), split=split)


def grid_rows(models=("a", "b"), groups=(("G1", 7), ("G2", 5)), R=2):
    return [(mm, g, f"{g}-q{i}", s) for mm in models for g, nq in groups
            for i in range(nq) for s in range(R)]


def by_question(ms):
    qs = question_splits(ms)
    return {(ms.groups[ms.question_group[q]], ms.question_id[q]): int(qs[q])
            for q in np.unique(ms.question)}


# -- counts --------------------------------------------------------------------------

@pytest.mark.parametrize("n, ratios, expected", [
    (90, DEFAULT_RATIOS, (54, 18, 18)),       # AIME: exact quotas
    (500, DEFAULT_RATIOS, (300, 100, 100)),   # MATH500
    (198, DEFAULT_RATIOS, (119, 40, 39)),     # GPQA: .8 > .6 = .6, tie to validation
    (175, DEFAULT_RATIOS, (105, 35, 35)),     # LiveCodeBench
    (21, DEFAULT_RATIOS, (13, 4, 4)),         # 12.6/4.2/4.2: the one extra to train
    (4, DEFAULT_RATIOS, (2, 1, 1)),
    (3, DEFAULT_RATIOS, (1, 1, 1)),           # 2/1/0 by remainders; test takes one from train
    (2, DEFAULT_RATIOS, (1, 1, 0)),           # too few for all three splits
    (1, DEFAULT_RATIOS, (1, 0, 0)),
    (0, DEFAULT_RATIOS, (0, 0, 0)),
    (5, (1, 0, 0), (5, 0, 0)),                # a zero ratio never receives a question
    (3, (0.5, 0, 0.5), (2, 0, 1)),            # tie of remainders goes to the earlier split
    (10, (60, 20, 20), (6, 2, 2)),            # ratios are normalized
])
def test_split_counts_table(n, ratios, expected):
    assert split_counts(n, ratios) == expected


@given(st.integers(0, 400), st.lists(st.integers(0, 9), min_size=3, max_size=3)
       .filter(lambda r: sum(r) > 0))
def test_split_counts_match_twin(n, ratios):
    got = split_counts(n, ratios)
    assert got == counts_twin(n, ratios)
    assert sum(got) == n
    total = sum(ratios)
    positive = sum(1 for x in ratios if x > 0)
    for c, x in zip(got, ratios):
        if x == 0:
            assert c == 0
        elif n >= positive:
            assert c >= 1
    if n >= 3 * positive:   # the at-least-one rule cannot have moved anything
        assert all(abs(c - n * Fraction(x, total)) < 1 for c, x in zip(got, ratios))


# -- the assignment -------------------------------------------------------------------

def test_key_is_documented_sha256():
    assert split_key(7, "AIME", "AIME2024-001") == key_twin(7, "AIME", "AIME2024-001")
    # length prefixes keep field boundaries apart
    assert split_key(1, "ab", "c") != split_key(1, "a", "bc")


def test_split_questions_is_the_key_order_twin():
    groups = ["A"] * 9 + ["B"] * 4
    ids = [f"q{i}" for i in range(13)]
    got = split_questions(groups, ids, seed=3)
    for g in ("A", "B"):
        idx = [i for i in range(13) if groups[i] == g]
        order = sorted(idx, key=lambda i: key_twin(3, g, ids[i]))
        c = counts_twin(len(idx), DEFAULT_RATIOS)
        want = [0] * c[0] + [1] * c[1] + [2] * c[2]
        assert [int(got[i]) for i in order] == want


@settings(max_examples=25)
@given(st.lists(st.tuples(st.sampled_from(["G1", "G2", "G3"]), st.text(min_size=1, max_size=4)),
                min_size=1, max_size=30, unique=True),
       st.integers(0, 2**40), st.randoms(use_true_random=False))
def test_split_questions_invariant_to_order(pairs, seed, rnd):
    g, q = zip(*pairs)
    base = dict(zip(pairs, split_questions(g, q, seed=seed).tolist()))
    shuffled = list(pairs)
    rnd.shuffle(shuffled)
    g2, q2 = zip(*shuffled)
    assert dict(zip(shuffled, split_questions(g2, q2, seed=seed).tolist())) == base


def test_independent_of_models_rows_and_input_order():
    rows = grid_rows()
    full = assign_splits(build(rows), seed=11)
    shuffled = list(rows)
    random.Random(0).shuffle(shuffled)
    other = assign_splits(build(shuffled), seed=11)
    one_model = assign_splits(build([r for r in rows if r[0] == "b" and r[3] == 0]), seed=11)
    assert by_question(full) == by_question(other) == by_question(one_model)


def test_every_trajectory_and_model_of_a_question_share_its_split():
    ms = assign_splits(simulate("small", 1))
    assert np.all(ms.split >= 0)
    for q in np.unique(ms.question):
        assert np.unique(ms.split[ms.question == q]).size == 1


def test_stratified_counts_per_group_and_provenance():
    ms = assign_splits(simulate("small", 0), seed=5, ratios=(0.5, 0.25, 0.25))
    info = ms.provenance["split"]
    assert info["scheme"] == "otbench.split/1" and info["seed"] == 5
    assert info["ratios"] == [0.5, 0.25, 0.25]
    qs = question_splits(ms)
    for gi, g in enumerate(ms.groups):
        s = qs[ms.question_group == gi]
        got = [int((s == j).sum()) for j in range(3)]
        assert got == list(split_counts(s.size, (0.5, 0.25, 0.25))) == info["counts"][g]


def test_seed_matters_and_is_reproducible():
    ms = simulate("small", 0)
    a = assign_splits(ms, seed=1)
    assert np.array_equal(a.split, assign_splits(ms, seed=1).split)
    assert not np.array_equal(a.split, assign_splits(ms, seed=2).split)
    assert assign_splits(ms).provenance["split"]["seed"] == DEFAULT_SEED == 20260721


def test_take_then_assign_equals_assign_then_take():
    ms = simulate("tiny", 0)
    rows = np.flatnonzero(ms.cell == 1)
    assert np.array_equal(assign_splits(ms.take(rows)).split, assign_splits(ms).take(rows).split)


def test_save_load_round_trip(tmp_path):
    ms = assign_splits(simulate("tiny", 0))
    save(ms, tmp_path / "s")
    back = load(tmp_path / "s")
    assert np.array_equal(back.split, ms.split)
    assert back.provenance["split"] == ms.provenance["split"]


def test_frozen_default_config_artifact():
    cfg = json.loads((ROOT / "artifacts/otbench/split-default.json").read_text())
    assert cfg["scheme"] == "otbench.split/1"
    assert cfg["seed"] == DEFAULT_SEED and tuple(cfg["ratios"]) == DEFAULT_RATIOS


# -- split files ----------------------------------------------------------------------

def test_split_file_round_trip_and_subsets(tmp_path):
    ms = assign_splits(simulate("tiny", 0), seed=9)
    doc = write_split_file(ms, tmp_path / "f.json")
    assert doc["seed"] == 9 and len(doc["questions"]) == ms.num_questions
    keys = [(e["group"], e["question"]) for e in doc["questions"]]
    assert keys == sorted(keys)
    again = apply_split_file(simulate("tiny", 0), tmp_path / "f.json")
    assert np.array_equal(again.split, ms.split)
    assert again.provenance["split"]["scheme"] == "file"
    assert again.provenance["split"]["sha256"] == hashlib.sha256(
        (tmp_path / "f.json").read_bytes()).hexdigest()
    # entries for questions the set lacks are ignored: a file serves subsets
    sub = simulate("tiny", 0).take(np.flatnonzero(ms.cell == 0))
    assert np.array_equal(apply_split_file(sub, tmp_path / "f.json").split,
                          ms.take(np.flatnonzero(ms.cell == 0)).split)


def test_split_file_overrides_seeded_split(tmp_path):
    ms = assign_splits(simulate("tiny", 0))
    doc = {"schema": "otbench.splits/1", "questions": [
        {"group": ms.groups[ms.question_group[q]], "question": ms.question_id[q], "split": "test"}
        for q in range(ms.num_questions)]}
    (tmp_path / "all_test.json").write_text(json.dumps(doc))
    assert np.all(apply_split_file(ms, tmp_path / "all_test.json").split == 2)


def _file(tmp_path, content):
    p = tmp_path / "s.json"
    p.write_text(content if isinstance(content, str) else json.dumps(content))
    return p


@pytest.mark.parametrize("content, msg", [
    ("{", r"s\.json: not valid JSON"),
    ({"schema": "x"}, r"schema must be 'otbench\.splits/1', got 'x'"),
    ({"schema": "otbench.splits/1"}, r"'questions' must be a list"),
    ({"schema": "otbench.splits/1", "questions": [{"group": "G"}]},
     r"questions\[0\]: entry must have string 'group', 'question' and 'split'"),
    ({"schema": "otbench.splits/1", "questions": [{"group": "G", "question": "q", "split": "dev"}]},
     r"questions\[0\]: split must be one of train, validation, test, got 'dev'"),
    ({"schema": "otbench.splits/1", "questions": [
        {"group": "G", "question": "q", "split": "test"},
        {"group": "G", "question": "q", "split": "train"}]},
     r"questions\[1\]: question 'q' of group 'G' is listed twice"),
])
def test_split_file_messages(tmp_path, content, msg):
    with pytest.raises(MeasurementSetError, match=msg):
        read_split_file(_file(tmp_path, content))


def test_split_file_missing_question_and_missing_file(tmp_path):
    ms = build(grid_rows(models=("a",), groups=(("G", 2),), R=1))
    p = _file(tmp_path, {"schema": "otbench.splits/1",
                         "questions": [{"group": "G", "question": "G-q0", "split": "train"}]})
    with pytest.raises(MeasurementSetError, match=r"no entry for question 'G-q1' of group 'G'"):
        apply_split_file(ms, p)
    with pytest.raises(MeasurementSetError, match=r"split file not found"):
        read_split_file(tmp_path / "missing.json")


def test_write_split_file_needs_an_assignment(tmp_path):
    with pytest.raises(ValueError, match=r"has no split; assign splits first"):
        write_split_file(simulate("tiny", 0), tmp_path / "x.json")


# -- argument messages -----------------------------------------------------------------

@pytest.mark.parametrize("ratios, msg", [
    ("60/20/20", r"`ratios` must be a sequence of 3 numbers"),
    ((0.5, 0.5), r"`ratios` must have 3 entries \(train, validation, test\), got 2"),
    ((1, "a", 1), r"`ratios` entries must be numbers, got 'a'"),
    ((1, True, 1), r"`ratios` entries must be numbers, got True"),
    ((1, float("inf"), 1), r"`ratios` entries must be finite, got inf"),
    ((1, -1, 1), r"`ratios` entries must be non-negative, got -1"),
    ((0, 0, 0), r"`ratios` must have a positive sum"),
])
def test_ratio_messages(ratios, msg):
    with pytest.raises(ValueError, match=msg):
        ratios_iv(ratios)


def test_ratios_are_exact_decimals():
    assert ratios_iv((0.6, 0.2, 0.2)) == (Fraction(3, 5), Fraction(1, 5), Fraction(1, 5))
    assert ratios_iv((60, 20, 20)) == ratios_iv((0.6, 0.2, 0.2))


@pytest.mark.parametrize("seed", [-1, 1.5, True, "1"])
def test_seed_message(seed):
    with pytest.raises(ValueError, match=r"`seed` must be a non-negative integer"):
        assign_splits(simulate("tiny", 0), seed=seed)


def test_other_messages():
    with pytest.raises(ValueError, match=r"`ms` must be a MeasurementSet, got dict"):
        assign_splits({})
    with pytest.raises(ValueError, match=r"`groups` and `question_ids` differ in length \(2 vs 1\)"):
        split_questions(["a", "a"], ["x"])
    with pytest.raises(ValueError, match=r"question 'x' of group 'a' appears more than once"):
        split_questions(["a", "a"], ["x", "x"])


# -- CLI ------------------------------------------------------------------------------

def test_cli_split_in_place_keeps_extra_tables(tmp_path):
    import pyarrow as pa
    from otbench.analysis import load_table
    from otbench.cli._bench import split_cmd

    ms = simulate("tiny", 0)
    extra = pa.table({"x": [1, 2, 3]})
    save(ms, tmp_path / "s", extra_tables={"tokens": extra})
    r = CliRunner().invoke(split_cmd, [str(tmp_path / "s"), "--seed", "4", "--ratios", "2,1,1",
                                       "--write-file", str(tmp_path / "f.json")])
    assert r.exit_code == 0, r.output
    assert "seed 4, ratios 0.5/0.25/0.25" in r.output and "GPQA-Diamond" in r.output
    back = load(tmp_path / "s")
    assert np.array_equal(back.split, assign_splits(ms, seed=4, ratios=(2, 1, 1)).split)
    assert load_table(tmp_path / "s", "tokens").equals(extra)
    # a frozen file reproduces it in another directory
    r = CliRunner().invoke(split_cmd, [str(tmp_path / "s"), "--from-file", str(tmp_path / "f.json"),
                                       "--out", str(tmp_path / "t")])
    assert r.exit_code == 0, r.output
    assert np.array_equal(load(tmp_path / "t").split, back.split)


def test_cli_split_errors(tmp_path):
    from otbench.cli._bench import split_cmd

    save(simulate("tiny", 0), tmp_path / "s")
    r = CliRunner().invoke(split_cmd, [str(tmp_path / "s"), "--ratios", "1,1"])
    assert r.exit_code == 2 and "`ratios` must have 3 entries" in r.output
    r = CliRunner().invoke(split_cmd, [str(tmp_path / "s"), "--from-file", "x.json", "--seed", "1"])
    assert r.exit_code == 2 and "--from-file replaces the seeded split" in r.output
    r = CliRunner().invoke(split_cmd, [str(tmp_path / "s"), "--from-file", str(tmp_path / "no.json")])
    assert r.exit_code == 2 and "split file not found" in r.output
    r = CliRunner().invoke(split_cmd, [str(tmp_path / "nothing")])
    assert r.exit_code == 2 and "not a directory" in r.output
