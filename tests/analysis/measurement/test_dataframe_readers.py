"""A measurement set's folder is one table for pandas, polars, pyarrow.dataset and DuckDB.

Each reader is tested where it is installed (they are in the test extra);
sets written with the earlier Hive folder names (`model=<m>/group=<g>`)
still load, with the same content hash.
"""

import json
import shutil
from pathlib import Path
from urllib.parse import quote

import numpy as np
import otbench.analysis as oa
import pyarrow.dataset as ds
import pytest


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A simulated set with a slash in every model id and a group id that starts with `_`."""
    root = tmp_path_factory.mktemp("readers")
    oa.export_jsonl(oa.simulate("tiny", seed=5), root / "sim.jsonl")
    lines = [json.loads(line) for line in open(root / "sim.jsonl", encoding="utf-8")]
    with open(root / "renamed.jsonl", "w", encoding="utf-8") as f:
        for r in lines:
            f.write(json.dumps({**r, "group": "_" + r["group"]}) + "\n")
    ms = oa.import_jsonl(root / "renamed.jsonl")
    d = root / "set"
    oa.save(ms, d)
    return ms, d


def _expected(ms):
    """(model, group, question, trajectory) -> (n, sum of C), from the loaded arrays."""
    out = {}
    for t in range(ms.num_trajectories):
        m, g = ms.cell_name(int(ms.cell[t]))
        key = (m, g, ms.question_id[ms.question[t]], int(ms.trajectory[t]))
        out[key] = (int(ms.n[t]), int(ms.C[t, : ms.n[t] + 1].sum()))
    return out


def _check(records, ms):
    got = {(r["model"], r["group"], r["question"], int(r["trajectory"])):
           (int(r["n"]), int(sum(r["C"]))) for r in records}
    assert got == _expected(ms)


def test_layout_has_plain_folders(saved):
    ms, d = saved
    for f in json.loads((d / "manifest.json").read_text())["files"]:
        parts = Path(f["path"]).parts
        assert parts[0] == "trajectories" and parts[-1] == "part-0.parquet"
        assert not any("=" in p for p in parts)
        assert not any(p.startswith(("_", ".")) for p in parts)


def test_pyarrow_dataset_reads_the_folder(saved):
    ms, d = saved
    table = ds.dataset(d / "trajectories", format="parquet").to_table()
    assert table.schema.field("model").type == "string"
    _check(table.to_pylist(), ms)


def test_pandas_reads_the_folder(saved):
    pd = pytest.importorskip("pandas")
    ms, d = saved
    df = pd.read_parquet(d / "trajectories")
    assert list(df.columns[:4]) == ["model", "group", "dataset", "question"]
    _check(df.to_dict("records"), ms)


def test_polars_reads_the_folder(saved):
    pl = pytest.importorskip("polars")
    ms, d = saved
    df = pl.read_parquet(d / "trajectories")
    _check(df.to_dicts(), ms)


def test_duckdb_reads_the_folder(saved):
    duckdb = pytest.importorskip("duckdb")
    ms, d = saved
    rel = duckdb.sql(f"SELECT * FROM read_parquet('{d / 'trajectories'}/**/*.parquet')")
    cols = rel.columns
    _check([dict(zip(cols, row)) for row in rel.fetchall()], ms)
    [(count,)] = duckdb.sql(f"SELECT count(DISTINCT model) FROM '{d / 'trajectories'}/**/*.parquet'"
                            ).fetchall()
    assert count == len(ms.models)


def test_old_hive_layout_still_loads(saved, tmp_path):
    """A set written before the plain folders (`model=<m>/group=<g>`) loads unchanged."""
    ms, d = saved
    old = tmp_path / "old"
    shutil.copytree(d, old)
    manifest = json.loads((old / "manifest.json").read_text())
    for f in manifest["files"]:
        df = pd_free_read(old / f["path"])
        m, g = df["model"][0], df["group"][0]
        rel = f"trajectories/model={quote(m, safe='')}/group={quote(g, safe='')}/part-0.parquet"
        (old / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.move(old / f["path"], old / rel)
        f["path"] = rel
    for p in sorted((old / "trajectories").iterdir()):
        if "=" not in p.name:
            shutil.rmtree(p)
    (old / "manifest.json").write_text(json.dumps(manifest))
    back = oa.load(old)
    assert oa.content_hash(back) == manifest["content_hash"] == oa.content_hash(ms)
    np.testing.assert_array_equal(back.C, ms.C)


def pd_free_read(path):
    import pyarrow.parquet as pq
    return pq.read_table(path, columns=["model", "group"]).to_pydict()
