"""The measurement-set contract: JSONL import/export, Parquet save/load, and every bad-input rule."""

import json
import sys

import numpy as np
import otbench.analysis as oa
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from otbench.analysis.measurement._jsonl import export_jsonl, import_jsonl
from otbench.cli import main

from otbench.files import sha256_file


def rec(**kw):
    base = {"model": "m", "group": "G", "question": "q1", "trajectory": 0, "probes": 4,
            "L": [0, 10, 20], "C": [0, 2, 4], "y": 1}
    base.update(kw)
    return base


def write_lines(path, lines):
    with open(path, "w", encoding="utf-8") as f:
        for line in lines:
            f.write(line if isinstance(line, str) else json.dumps(line))
            f.write("\n")
    return path


# -- bad input: one line `FILE:LINE: rule`, exit 2, nothing written ----------
# Each case: the lines of the file, the line number blamed, the pinned message.
BAD = [
    ("malformed JSON", [rec(), '{"model": "m",'], 2, r"malformed JSON \(Expecting"),
    ("missing key", [rec(), {k: v for k, v in rec().items() if k != "C"}], 2, r"missing key 'C'"),
    ("not an object", ["[1, 2, 3]"], 1, r"expected a JSON object, got array"),
    ("unknown key", [rec(extra=1)], 1, r"unknown key 'extra'"),
    ("non-monotone L", [rec(L=[0, 10, 5])], 1, r"L must be non-decreasing: L\[2\]=5 < L\[1\]=10"),
    ("L[0] != 0", [rec(L=[3, 10, 20])], 1, r"L\[0\] must be 0, got 3"),
    ("C above probes", [rec(C=[0, 5, 4])], 1, r"C\[1\]=5 is outside 0..4 \(probes\)"),
    ("C negative", [rec(C=[0, -1, 4])], 1, r"C\[1\]=-1 is outside 0..4 \(probes\)"),
    ("len(L) != len(C)", [rec(C=[0, 2])], 1, r"L and C have different lengths \(3 vs 2\)"),
    ("empty L", [rec(L=[], C=[])], 1, r"L is empty"),
    ("duplicate trajectory", [rec(), rec(question="q2"), rec()], 3,
     r"duplicate trajectory \(model 'm', group 'G', question 'q1', trajectory 0\); first seen at .*:1$"),
    ("mixed probes", [rec(), rec(trajectory=1, probes=8)], 2,
     r"probes 8 differs from 4 used by trajectory at .*:1 of question 'q1' \(model 'm'\)"),
    ("non-integer L", [rec(L=[0, 10.5, 20])], 1, r"L\[1\] must be an integer, got 10.5"),
    ("float-valued integer", [rec(C=[0, 2.0, 4])], 1, r"C\[1\] must be an integer, got 2.0"),
    ("beyond int32", [rec(L=[0, 10, 2**31])], 1, r"L\[2\]=2147483648 is beyond int32"),
    ("y not 0/1", [rec(y=2)], 1, r"y must be 0 or 1, got 2"),
    ("y string", [rec(y="1")], 1, r'y must be 0 or 1, got "1"'),
    ("probes zero", [rec(probes=0, C=[0, 0, 0])], 1, r"probes must be a positive integer, got 0"),
    ("negative trajectory", [rec(trajectory=-1)], 1, r"trajectory must be a non-negative integer, got -1"),
    ("model not a string", [rec(model=3)], 1, r"model must be a non-empty string, got 3"),
    ("bad split", [rec(split="dev")], 1, r"split must be one of train, validation, test or null, got \"dev\""),
    ("split differs in a question", [rec(split="train"), rec(trajectory=1, split="test")], 2,
     r"split 'test' differs from 'train' .*all trajectories of a question share a split"),
    ("signal length", [rec(signals={"margin": [0.1, 0.2]})], 1,
     r"signal 'margin' has 2 entries, expected 3 \(n\+1\)"),
    ("signal NaN", [rec(signals={"margin": [0.1, float("nan"), 0.3]})], 1,
     r"not accepted JSON \(NaN is not a JSON number \(numbers must be finite\)\)"),
    ("signals differ between lines", [rec(signals={"a": [0, 0, 0]}), rec(trajectory=1)], 2,
     r"signals \[\] differ from \['a'\] on line 1"),
    ("finished not bool", [rec(finished=1)], 1, r"finished must be true or false, got 1"),
]


@pytest.mark.parametrize("name,lines,lineno,pattern", BAD, ids=[b[0] for b in BAD])
def test_import_rejects_bad_input(tmp_path, name, lines, lineno, pattern):
    src = write_lines(tmp_path / "in.jsonl", lines)
    out = tmp_path / "set"
    result = CliRunner().invoke(main, ["import", str(src), "--out", str(out)])
    assert result.exit_code == 2, result.output
    err = result.stderr.strip().splitlines()
    assert len(err) == 1, err  # one line, no traceback
    assert err[0].startswith(f"{src}:{lineno}: "), err[0]
    assert pytest.importorskip("re").search(pattern, err[0]), err[0]
    assert not out.exists()
    assert not list(tmp_path.glob(".set*"))  # no temporary leftovers either


def test_import_rejects_empty_file(tmp_path):
    src = write_lines(tmp_path / "in.jsonl", ["", "  "])
    result = CliRunner().invoke(main, ["import", str(src), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2
    assert result.stderr.strip() == f"{src}: empty file (no trajectories)"


def test_import_refuses_to_overwrite(tmp_path):
    src = write_lines(tmp_path / "in.jsonl", [rec()])
    out = tmp_path / "set"
    assert CliRunner().invoke(main, ["import", str(src), "--out", str(out)]).exit_code == 0
    result = CliRunner().invoke(main, ["import", str(src), "--out", str(out)])
    assert result.exit_code == 2
    assert "already exists" in result.stderr
    assert CliRunner().invoke(main, ["import", str(src), "--out", str(out), "--overwrite"]).exit_code == 0


# -- valid but unusual input is accepted --------------------------------------
def unusual_lines():
    return [
        rec(model="模型/α", group="GPQA", question="問1", trajectory=0, L=[0], C=[3], y=0),  # n = 0
        rec(model="模型/α", group="GPQA", question="問1", trajectory=5, L=[0, 7, 7, 7], C=[0, 1, 1, 4]),
        rec(model="模型/α", group="GPQA", question=42, trajectory=0, L=[0, 0, 9], C=[1, 1, 1],
            dataset="GPQA-Diamond", split="test", finished=False, question_text="Which?"),
        rec(model="b", group="MATH500", question="x", trajectory=2, L=[0, 3], C=[2, 2],
            signals=None),
    ]


def test_unusual_input_is_accepted_and_round_trips(tmp_path):
    lines = unusual_lines()
    lines[-1].pop("signals")
    src = write_lines(tmp_path / "in.jsonl", lines)
    ms = import_jsonl(src)
    assert ms.num_trajectories == 4
    assert sorted(ms.models) == ["b", "模型/α"]
    assert "42" in ms.question_id  # integer ids become their decimal string
    # Unequal R: question 問1 has 2 trajectories, question 42 one.
    assert sorted(np.bincount(ms.question).tolist()) == [1, 1, 2]
    oa.save(ms, tmp_path / "set")
    back = oa.load(tmp_path / "set")
    assert oa.content_hash(back) == oa.content_hash(ms)
    export_jsonl(back, tmp_path / "a.jsonl")
    again = import_jsonl(tmp_path / "a.jsonl")
    export_jsonl(again, tmp_path / "b.jsonl")
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()
    assert oa.content_hash(again) == oa.content_hash(ms)


def test_padding_repeats_last_value(tmp_path):
    src = write_lines(tmp_path / "in.jsonl", [
        rec(L=[0], C=[2]), rec(trajectory=1, L=[0, 4, 9, 9], C=[0, 1, 3, 2])])
    ms = import_jsonl(src)
    assert ms.L.tolist() == [[0, 0, 0, 0], [0, 4, 9, 9]]
    assert ms.C.tolist() == [[2, 2, 2, 2], [0, 1, 3, 2]]
    assert ms.n.tolist() == [0, 3]
    assert ms.L.dtype == np.int32 and ms.n.dtype == np.int32
    with pytest.raises(ValueError):
        ms.L[0, 0] = 1  # frozen arrays


def test_row_order_does_not_depend_on_input_order(tmp_path):
    lines = [rec(model=m, question=q, trajectory=t) for m in "ba" for q in ("q2", "q1") for t in (1, 0)]
    a = import_jsonl(write_lines(tmp_path / "a.jsonl", lines))
    b = import_jsonl(write_lines(tmp_path / "b.jsonl", lines[::-1]))
    assert oa.content_hash(a) == oa.content_hash(b)
    assert a.models == ("a", "b")
    assert a.trajectory.tolist() == [0, 1] * 4


# -- property: any valid ragged set survives save/load and export/import -------
@st.composite
def ragged_sets(draw):
    rows = []
    for m in range(draw(st.integers(1, 2))):
        for g in range(draw(st.integers(1, 2))):
            for q in range(draw(st.integers(1, 3))):
                P = draw(st.integers(1, 5))
                for t in range(draw(st.integers(1, 3))):
                    n = draw(st.integers(0, 5))
                    steps = draw(st.lists(st.integers(0, 4), min_size=n, max_size=n))
                    L = np.concatenate([[0], np.cumsum(steps)]).astype(int).tolist()
                    C = draw(st.lists(st.integers(0, P), min_size=n + 1, max_size=n + 1))
                    sig = draw(st.lists(st.floats(-5, 5, allow_nan=False), min_size=n + 1, max_size=n + 1))
                    rows.append(rec(model=f"m{m}", group=f"g{g}", question=f"q{q}", trajectory=t,
                                    probes=P, L=L, C=C, y=draw(st.integers(0, 1)),
                                    finished=draw(st.booleans()), signals={"s": sig}))
    return draw(st.permutations(rows))


@settings(max_examples=25)
@given(ragged_sets())
def test_round_trip_property(tmp_path_factory, rows):
    d = tmp_path_factory.mktemp("rt")
    ms = import_jsonl(write_lines(d / "in.jsonl", rows))
    oa.save(ms, d / "set")
    back = oa.load(d / "set")
    for name in ("L", "C", "n", "probes", "y", "finished", "trajectory", "cell", "question", "split"):
        np.testing.assert_array_equal(getattr(back, name), getattr(ms, name))
    np.testing.assert_array_equal(back.signals["s"], ms.signals["s"])
    export_jsonl(back, d / "out.jsonl")
    got = sorted(json.loads(line)["L"] for line in open(d / "out.jsonl"))
    assert got == sorted(r["L"] for r in rows)
    # Padding invariant of SPEC §2.
    k = np.arange(ms.num_positions)
    last = ms.L[np.arange(ms.num_trajectories), ms.n]
    assert np.all(np.where(k[None] > ms.n[:, None], ms.L == last[:, None], True))


# -- the Parquet loader names file, row and rule -------------------------------
@pytest.fixture
def saved(tmp_path):
    src = write_lines(tmp_path / "in.jsonl", [rec(trajectory=t) for t in range(3)])
    oa.save(import_jsonl(src), tmp_path / "set")
    return tmp_path / "set"


def part_file(d):
    return next((d / "trajectories").rglob("*.parquet"))


def rewrite(d, fn):
    """Edit the trajectory file and re-sign it, as a third-party writer might."""
    f = part_file(d)
    table = fn(pq.read_table(f))
    pq.write_table(table, f)
    manifest = json.loads((d / "manifest.json").read_text())
    manifest["files"][0]["sha256"] = sha256_file(f)
    (d / "manifest.json").write_text(json.dumps(manifest))


def test_load_detects_changed_file(saved):
    f = part_file(saved)
    table = pq.read_table(f)
    pq.write_table(table.slice(0, 2), f)
    with pytest.raises(oa.MeasurementSetError, match=r"part-0.parquet: sha256 does not match the manifest"):
        oa.load(saved)


def test_load_names_row_and_rule(saved):
    def bad_L(t):
        L = t.column("L").to_pylist()
        L[2] = [0, 30, 20]
        return t.set_column(t.column_names.index("L"), "L", pa.array(L, pa.list_(pa.int32())))
    rewrite(saved, bad_L)
    with pytest.raises(oa.MeasurementSetError,
                       match=r"part-0.parquet: row 2: L must be non-decreasing: L\[2\]=20 < L\[1\]=30$"):
        oa.load(saved)


def test_load_checks_n_and_partition(saved):
    rewrite(saved, lambda t: t.set_column(t.column_names.index("n"), "n", pa.array([2, 5, 2], pa.int32())))
    with pytest.raises(oa.MeasurementSetError, match=r"row 1: n is 5 but L has 3 entries \(expected n\+1\)"):
        oa.load(saved)


def test_load_checks_partition_values(saved):
    rewrite(saved, lambda t: t.set_column(0, "model", pa.array(["m", "m", "other"])))
    with pytest.raises(oa.MeasurementSetError, match=r"row 2: model 'other' does not match its folder 'm'"):
        oa.load(saved)


def test_load_checks_content_hash(saved):
    manifest = json.loads((saved / "manifest.json").read_text())
    manifest["content_hash"] = "0" * 64
    (saved / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(oa.MeasurementSetError, match="content hash does not match"):
        oa.load(saved)


def test_load_rejects_unlisted_file_and_missing_manifest(saved, tmp_path):
    extra = saved / "trajectories" / "x" / "y"
    extra.mkdir(parents=True)
    pq.write_table(pq.read_table(part_file(saved)), extra / "part-0.parquet")
    with pytest.raises(oa.MeasurementSetError, match="file is not listed in the manifest"):
        oa.load(saved)
    with pytest.raises(oa.MeasurementSetError, match="missing manifest"):
        oa.load(tmp_path)


def test_load_rejects_wrong_column_type(saved):
    rewrite(saved, lambda t: t.set_column(t.column_names.index("L"), "L",
                                          pa.array([["a"]] * 3, pa.list_(pa.string()))))
    with pytest.raises(oa.MeasurementSetError, match=r"column 'L' must be a list of integers, got list<.*string>"):
        oa.load(saved)


def test_validate_and_export_cli(saved, tmp_path):
    r = CliRunner().invoke(main, ["validate", str(saved)])
    assert r.exit_code == 0, r.output
    assert "valid measurement set" in r.output and "trajectories 3" in r.output
    out = tmp_path / "x.jsonl"
    r = CliRunner().invoke(main, ["export", str(saved), "--out", str(out)])
    assert r.exit_code == 0
    assert len(out.read_text().splitlines()) == 3
    r = CliRunner().invoke(main, ["validate", str(tmp_path / "nope")])
    assert r.exit_code == 2
    assert r.stderr.strip().endswith("not a directory (expected a measurement set)")


def test_save_is_deterministic(tmp_path):
    src = write_lines(tmp_path / "in.jsonl", unusual_lines()[:3])
    ms = import_jsonl(src)
    oa.save(ms, tmp_path / "a")
    oa.save(ms, tmp_path / "b")
    for f in (tmp_path / "a").rglob("*"):
        if f.is_file():
            assert f.read_bytes() == (tmp_path / "b" / f.relative_to(tmp_path / "a")).read_bytes()


def test_extra_tables_are_hashed(tmp_path):
    ms = import_jsonl(write_lines(tmp_path / "in.jsonl", [rec()]))
    tokens = pa.table({"trajectory": pa.array([0], pa.int32()), "ids": pa.array([[1, 2, 3]])})
    oa.save(ms, tmp_path / "s", extra_tables={"tokens": tokens})
    assert oa.load_table(tmp_path / "s", "tokens").equals(tokens)
    with pytest.raises(oa.MeasurementSetError, match="no table 'nope'"):
        oa.load_table(tmp_path / "s", "nope")


def test_analysis_does_not_import_torch():
    import subprocess
    code = "import sys, otbench.analysis, otbench.cli; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_content_hash_without_signals_covers_the_exact_part(tmp_path):
    # issue 24: the exact part (counts, L, C, y, names) is hashed without the float signals,
    # which may differ in their last bits between machines; the full hash covers them.
    from otbench.analysis.measurement import content_hash

    def h(name, **kw):
        ms = import_jsonl(write_lines(tmp_path / f"{name}.jsonl", [rec(**kw)]))
        return content_hash(ms), content_hash(ms, signals=False)

    base = h("a", signals={"margin": [0.5, -1.0, 2.0]})
    assert base == h("again", signals={"margin": [0.5, -1.0, 2.0]})
    last_bit = h("b", signals={"margin": [0.5, -1.0, float(np.nextafter(2.0, 3.0))]})
    assert last_bit[0] != base[0] and last_bit[1] == base[1]      # only the full hash sees it
    for other in (h("c", signals={"margin": [0.5, -1.0, 2.0]}, C=[0, 2, 3]),
                  h("d", signals={"margin": [0.5, -1.0, 2.0]}, y=0),
                  h("e", signals={"other": [0.5, -1.0, 2.0]}),           # another signal's name
                  h("f")):                                               # no signal at all
        assert other[0] != base[0] and other[1] != base[1]
    assert content_hash(import_jsonl(write_lines(tmp_path / "g.jsonl", [rec()]))) == h("g2")[0]
