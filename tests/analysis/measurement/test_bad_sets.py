"""The 'silently wrong' cases of a measurement set: each is refused with one pinned line."""

import hashlib
import json
import shutil
import unicodedata

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from _bad_input import small_set, write_jsonl
from otbench.analysis.measurement import (
    MeasurementSetError,
    export_jsonl,
    import_jsonl,
    load,
    save,
)


def _rec(**kw):
    r = {"model": "m", "group": "g", "question": "q", "trajectory": 0, "probes": 2,
         "L": [0, 5], "C": [0, 1], "y": 1}
    r.update(kw)
    return r


def _edit_manifest(d, fn):
    m = json.loads((d / "manifest.json").read_text())
    fn(m)
    (d / "manifest.json").write_text(json.dumps(m))


@pytest.fixture
def saved(tmp_path):
    d = tmp_path / "S"
    save(small_set(synthetic=True), d)
    return d


def test_synthetic_survives_export_and_import(tmp_path, saved):
    export_jsonl(load(saved), tmp_path / "s.jsonl")
    assert import_jsonl(tmp_path / "s.jsonl").synthetic is True
    lines = (tmp_path / "s.jsonl").read_text().splitlines()
    lines[1] = lines[1].replace('"synthetic": true', '"synthetic": false')
    (tmp_path / "mixed.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(MeasurementSetError, match=r"mixed\.jsonl:2: synthetic is false but true "
                                                  r"on line 1; a file is synthetic or not"):
        import_jsonl(tmp_path / "mixed.jsonl")


def test_editing_the_synthetic_flag_breaks_the_hash(saved):
    _edit_manifest(saved, lambda m: m.update(synthetic=False))
    with pytest.raises(MeasurementSetError, match=r"manifest\.json: content hash does not match "
                                                  r"the trajectories \(or the synthetic flag"):
        load(saved)


def test_synthetic_must_be_a_boolean(saved):
    _edit_manifest(saved, lambda m: m.update(synthetic="false"))
    with pytest.raises(MeasurementSetError, match=r"'synthetic' must be true or false, got \"false\""):
        load(saved)


def test_manifest_paths_are_confined_to_the_set(tmp_path, saved):
    (tmp_path / "outside").mkdir()
    first = json.loads((saved / "manifest.json").read_text())["files"][0]["path"]
    shutil.copy(saved / first, tmp_path / "outside" / "x.parquet")
    for bad in ("../outside/x.parquet", str(tmp_path / "outside" / "x.parquet"),
                "trajectories/../../outside/x.parquet"):
        _edit_manifest(saved, lambda m, bad=bad: m["files"][0].update(path=bad))
        with pytest.raises(MeasurementSetError, match=r"files\[0\] path .* must be a relative "
                                                      r"'trajectories/...parquet' path inside"):
            load(saved)


@pytest.mark.parametrize("files,rule", [
    ({"a": 1}, r"'files' must be a list of \{path, rows, sha256\}"),
    ([1], r"files\[0\] must be \{path: str, rows: int >= 0, sha256: str\}"),
    ([{"path": 3, "rows": 1, "sha256": "x"}], r"files\[0\] must be"),
    ([{"path": "trajectories/a.parquet", "rows": True, "sha256": "x"}], r"files\[0\] must be"),
])
def test_files_of_the_wrong_shape(saved, files, rule):
    _edit_manifest(saved, lambda m: m.update(files=files))
    with pytest.raises(MeasurementSetError, match=rule):
        load(saved)


def test_wrong_counts_are_refused(saved):
    _edit_manifest(saved, lambda m: m["counts"].update(trajectories=7))
    with pytest.raises(MeasurementSetError, match=r"counts do not match the trajectories "
                                                  r"\(trajectories differ\)"):
        load(saved)


def _rewrite_int64(d, column, fn):
    m = json.loads((d / "manifest.json").read_text())
    f = d / m["files"][0]["path"]
    t = pq.read_table(f)
    vals = fn(t.column(column).to_numpy().astype(np.int64))
    t = t.set_column(t.schema.get_field_index(column), pa.field(column, pa.int64()), pa.array(vals))
    pq.write_table(t, f)
    m["files"][0]["sha256"] = hashlib.sha256(f.read_bytes()).hexdigest()
    (d / "manifest.json").write_text(json.dumps(m))


def test_int64_trajectory_does_not_wrap(saved):
    _rewrite_int64(saved, "trajectory", lambda v: np.where(np.arange(v.size) == 1, v[0] + 2**32, v))
    with pytest.raises(MeasurementSetError, match=r"part-0\.parquet: row 1: trajectory must fit in "
                                                  r"int32 \(<= 2147483647\), got 4294967296"):
        load(saved)


def test_int64_probes_do_not_wrap(saved):
    _rewrite_int64(saved, "probes", lambda v: v + 2**32)
    with pytest.raises(MeasurementSetError, match=r"row 0: probes must be at most 65535, "
                                                  r"got 4294967298"):
        load(saved)


@pytest.mark.parametrize("key,value,rule", [
    ("probes", 2147483647, r"x\.jsonl:1: probes must be at most 65535, got 2147483647"),
    ("probes", -10**30, r"x\.jsonl:1: not accepted JSON \(integer with 31 digits is beyond int64\)"),
    ("trajectory", 10**18, r"x\.jsonl:1: trajectory=1000000000000000000 is beyond int32"),
    ("trajectory", -10**18, r"x\.jsonl:1: trajectory=-1000000000000000000 is beyond int32"),
])
def test_out_of_range_integers(tmp_path, key, value, rule):
    write_jsonl(tmp_path / "x.jsonl", [_rec(**{key: value})])
    with pytest.raises(MeasurementSetError, match=rule):
        import_jsonl(tmp_path / "x.jsonl")


def test_nfc_nfd_twins_are_refused(tmp_path):
    nfc, nfd = (unicodedata.normalize(f, "modèle") for f in ("NFC", "NFD"))
    write_jsonl(tmp_path / "x.jsonl", [_rec(model=nfc), _rec(model=nfd)])
    with pytest.raises(MeasurementSetError, match=r"x\.jsonl:2: model 'mode\\u0300le' differs from "
                                                  r"'mod\\xe8le' at .*x\.jsonl:1 only in Unicode "
                                                  r"normalisation \(NFC/NFD\)"):
        import_jsonl(tmp_path / "x.jsonl")


def test_long_names_get_bounded_partition_folders(tmp_path):
    write_jsonl(tmp_path / "x.jsonl", [_rec(model="é" * 200), _rec(model="é" * 201)])
    ms = import_jsonl(tmp_path / "x.jsonl")
    save(ms, tmp_path / "S")
    back = load(tmp_path / "S")
    assert back.models == ms.models
    names = [p.name for p in (tmp_path / "S" / "trajectories").iterdir()]
    assert len(set(names)) == 2 and all(len(n.encode()) < 255 for n in names)
