"""The one atomic writer and the one provenance builder (issue 12)."""

import json

import pytest
from otbench.analysis.measurement import save, simulate

from otbench.files import LEDGER, atomic_dir, atomic_path, provenance, write_text_atomic


def _siblings(path):
    """Hidden entries beside `path` other than otbench's ledger: temporaries left behind."""
    return sorted(p.name for p in path.parent.iterdir() if p.name.startswith(".")
                  and p.name != LEDGER)


def test_atomic_dir_replaces_only_when_complete(tmp_path):
    out = tmp_path / "out"
    with atomic_dir(out) as tmp:
        (tmp / "a.txt").write_text("one")
    assert (out / "a.txt").read_text() == "one"
    with pytest.raises(RuntimeError):
        with atomic_dir(out) as tmp:
            (tmp / "a.txt").write_text("two")
            assert (out / "a.txt").read_text() == "one"     # the old output is valid meanwhile
            raise RuntimeError("killed half-way")
    assert (out / "a.txt").read_text() == "one"
    assert _siblings(out) == []                              # no temporary folder left behind
    with atomic_dir(out) as tmp:
        (tmp / "b.txt").write_text("three")
    assert sorted(p.name for p in out.iterdir()) == [LEDGER, "b.txt"] and _siblings(out) == []


def test_atomic_path_and_text(tmp_path):
    f = tmp_path / "sub" / "x.json"
    write_text_atomic(f, "{}\n")
    assert f.read_text() == "{}\n"
    with pytest.raises(KeyboardInterrupt):
        with atomic_path(f) as tmp:
            tmp.write_text("partial")
            raise KeyboardInterrupt
    assert f.read_text() == "{}\n" and _siblings(f) == []


def test_save_leaves_no_temporary_on_failure(tmp_path, monkeypatch):
    import pyarrow.parquet as pq

    def boom(*a, **k):
        raise OSError("disk full")
    monkeypatch.setattr(pq, "write_table", boom)
    with pytest.raises(OSError, match="disk full"):
        save(simulate("tiny", seed=0), tmp_path / "set")
    assert list(tmp_path.iterdir()) == []


def test_one_provenance_key_set(tmp_path):
    p = provenance(("numpy", "jax"), stage="x")
    assert set(p) == {"code", "hardware", "libraries", "stage"}
    assert set(p["code"]) == {"otbench", "git"}
    assert set(p["hardware"]) == {"machine", "system", "cpus", "python"}
    assert set(p["libraries"]) == {"jax", "numpy"} and p["libraries"]["numpy"]
    man = save(simulate("tiny", seed=0), tmp_path / "set")
    assert set(man["writer"]) == {"code", "hardware", "libraries"}
    assert json.loads((tmp_path / "set" / "manifest.json").read_text())["writer"] == man["writer"]
