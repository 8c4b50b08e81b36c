"""`to_arrow()` / `to_pandas()` / `to_polars()` of every result type: long-form tables whose
values are the result's own arrays (checked element by element against them)."""

import numpy as np
import otbench.analysis as oa
import pyarrow as pa
import pyarrow.parquet as pq
import pytest


@pytest.fixture(scope="module")
def ms():
    return oa.assign_splits(oa.simulate("tiny", seed=2))


def _rows(table: pa.Table) -> list[dict]:
    return table.to_pylist()


def _same_frames(result):
    """pandas and polars (where installed) hold exactly the arrow table."""
    t = result.to_arrow()
    pd = pytest.importorskip("pandas")
    df = result.to_pandas()
    assert isinstance(df, pd.DataFrame) and list(df.columns) == t.column_names
    assert len(df) == t.num_rows
    pl = pytest.importorskip("polars")
    assert result.to_polars().equals(pl.from_arrow(t))


def test_measurement_set_is_the_stored_table(ms, tmp_path):
    oa.save(ms, tmp_path / "s")
    t = ms.to_arrow()
    stored = pa.concat_tables([pq.read_table(p) for p in
                               sorted((tmp_path / "s" / "trajectories").rglob("*.parquet"))])
    assert t.column_names == stored.column_names and t.num_rows == ms.num_trajectories
    assert sorted(map(str, t.to_pylist())) == sorted(map(str, stored.to_pylist()))
    for r, row in enumerate(_rows(t)):
        assert row["L"] == ms.L[r, : ms.n[r] + 1].tolist()      # no padding
    _same_frames(ms)


def test_frontier_tables(ms):
    fr = oa.frontiers(ms, grid=11)
    rows = _rows(fr.to_arrow())
    assert len(rows) == sum((len(fr.cells) + 1) * 11 for _ in fr.strategies)
    for row in rows:
        s = fr.strategies[row["strategy"]]
        j = int(round(row["beta"] * 10))
        if row["scope"] == "macro":
            assert row["model"] is None and row["acc"] == s.macro[j] and row["reward"] is None
        else:
            c = next(i for i, c in enumerate(fr.cells) if (c.model, c.group) == (row["model"], row["group"]))
            assert row["acc"] == s.acc[c, j] and row["reward"] == s.reward[c, j]
    one = _rows(fr.strategies["dee"].to_arrow())
    assert [(r["cell"], r["point"]) for r in one[:2]] == [(0, 0), (0, 1)]
    assert all(r["acc"] == fr.strategies["dee"].acc[r["cell"], r["point"]] for r in one)
    _same_frames(fr)


def test_bootstrap_tables(ms):
    b = oa.bootstrap(ms, replicates=40, frontiers=True, grid=5)
    rows = _rows(b.to_arrow())
    n = b.names
    assert len(rows) == len(oa.BOOT_METRICS) * (len(n.cells) + len(n.models) + len(n.groups) + 1)
    for row in rows:
        j = oa.BOOT_METRICS.index(row["metric"])
        if row["scope"] == "macro":
            est, reps = b.estimate_macro[j], b.macro[:, j]
        elif row["scope"] == "cell":
            c = n.cells.index((row["model"], row["group"]))
            est, reps = b.estimate_cell[j, c], b.cell[:, j, c]
        elif row["scope"] == "model":
            i = n.models.index(row["model"])
            est, reps = b.estimate_model[j, i], b.model[:, j, i]
        else:
            i = n.groups.index(row["group"])
            est, reps = b.estimate_group[j, i], b.group[:, j, i]
        lo, hi = oa.percentile(reps, b.percentiles)
        assert (row["estimate"], row["lo"], row["hi"]) == (est, lo, hi)
        assert row["defined"] == int(np.sum(~np.isnan(reps)))
    f = _rows(b.frontiers.to_arrow())
    assert len(f) == 40 * 3 * 5
    for row in f[:: 7]:
        k = b.frontiers.strategies.index(row["strategy"])
        assert row["macro"] == b.frontiers.macro[row["replicate"], k, int(round(row["beta"] * 4))]
    _same_frames(b)


def test_thinning_tables(ms):
    pt = oa.probe_thinning(ms, probes=(2, 4))
    rows = _rows(pt.to_arrow())
    assert {r["scope"] for r in rows} == {"cell", "model", "group", "macro"}
    for row in rows:
        m = pt.probes.index(row["probes"])
        j = ("or", "ad", "retention").index(row["metric"])
        if row["scope"] == "macro":
            assert row["value"] == pt.macro[m, j]
        elif row["scope"] == "cell":
            assert row["value"] == pt.cell[m, j, pt.names.cells.index((row["model"], row["group"]))]
    tt = oa.trajectory_thinning(ms, (2,), draws=6, seed=1)
    rows = _rows(tt.to_arrow())
    assert len(rows) == 6 * 2 * (len(tt.names.cells) + 1)
    macro = [r for r in rows if r["scope"] == "macro"]
    assert [r["value"] for r in macro] == tt.macro[0].reshape(-1).tolist()
    _same_frames(pt)
    _same_frames(tt)


def test_bench_and_leaderboard_tables(ms):
    res = oa.bench_evaluate(ms, "thinkbrake-onectx", theta_grid=3)
    rows = _rows(res.to_arrow())
    assert len(rows) == len(res.points) * (1 + len(res.cells))
    macro = [r for r in rows if r["scope"] == "macro"]
    assert [r["gap"] for r in macro] == [p.gap for p in res.points]
    assert all(0 <= r["gap"] <= 1 and r["method"] == "thinkbrake-onectx" for r in rows)   # fractions
    board = oa.leaderboard([res])
    assert board.to_arrow().column("method").to_pylist() == ["thinkbrake-onectx"]
    _same_frames(res)


def test_to_pandas_without_pandas_names_the_extra(ms, monkeypatch):
    import builtins

    real = builtins.__import__

    def no_pandas(name, *a, **k):
        if name == "pandas" or name.startswith("pandas."):
            raise ImportError("no pandas")
        return real(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_pandas)
    with pytest.raises(ImportError, match=r"to_pandas\(\) needs pandas: pip install 'otbench\[dataframes\]'"):
        ms.to_pandas()
    assert ms.to_arrow().num_rows == ms.num_trajectories      # arrow needs only pyarrow
