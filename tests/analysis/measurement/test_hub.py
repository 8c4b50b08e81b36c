"""A measurement set as a Hugging Face dataset folder, read back by the real `datasets` library.

Round trips: set -> `export_hub` folder -> `datasets.load_dataset(DIR, table)` -> `from_table`
-> the same content hash; the folder -> `load` (it is a set); a Hub id in a local Hugging Face
cache -> `load` / `otbench import`. The card is parsed by `huggingface_hub`'s own card reader.
All offline: nothing is downloaded or uploaded.
"""

import json
import os
import shutil

import numpy as np
import otbench.analysis.measurement as om
import pyarrow as pa
import pytest
from _bad_input import cli, refused, small_set
from otbench.errors import UnsafeOutputError

datasets = pytest.importorskip("datasets", reason="the `datasets` library (test extra)")
huggingface_hub = pytest.importorskip("huggingface_hub")


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """A simulated set with field signals, model ids with slashes, a tokens table; exported."""
    root = tmp_path_factory.mktemp("hub")
    sim = om.simulate("tiny", seed=4)
    om.export_jsonl(sim, root / "sim.jsonl")
    lines = [json.loads(line) for line in open(root / "sim.jsonl", encoding="utf-8")]
    with open(root / "renamed.jsonl", "w", encoding="utf-8") as f:
        for r in lines:
            f.write(json.dumps({**r, "model": "org/" + r["model"]}) + "\n")
    ms = om.add_field_signals(om.import_jsonl(root / "renamed.jsonl", synthetic=True), seed=1)
    tokens = pa.table({"row": pa.array(np.arange(ms.num_trajectories), pa.int64()),
                       "ids": pa.array([[1, 2, 3]] * ms.num_trajectories, pa.list_(pa.int32()))})
    om.save(ms, root / "set", extra_tables={"tokens": tokens})
    hub = root / "hub"
    manifest = om.export_hub(om.load(root / "set"), hub, tables={"tokens": tokens},
                             license="cc-by-4.0", name="otbench test set")
    return om.load(root / "set"), hub, manifest, root


def test_datasets_reads_each_table_and_the_rows_rebuild_the_set(exported):
    ms, hub, manifest, root = exported
    cache = root / "datasets-cache"
    traj = datasets.load_dataset(str(hub), "trajectories", split="train", cache_dir=str(cache))
    assert traj.num_rows == ms.num_trajectories
    assert {"L", "C", "y", "signal.answer_conf"} <= set(traj.column_names)
    back = om.from_table(traj.data.table, synthetic=manifest["synthetic"],
                         provenance=manifest["provenance"])
    assert om.content_hash(back) == om.content_hash(ms) == manifest["content_hash"]
    # the default config is the trajectories table
    default = datasets.load_dataset(str(hub), split="train", cache_dir=str(cache))
    assert default.num_rows == ms.num_trajectories
    tokens = datasets.load_dataset(str(hub), "tokens", split="train", cache_dir=str(cache))
    assert tokens.num_rows == ms.num_trajectories and tokens[0]["ids"] == [1, 2, 3]


def test_the_folder_is_a_set_with_the_original_hash(exported):
    ms, hub, manifest, _ = exported
    again = om.load(hub)
    assert om.content_hash(again) == om.content_hash(ms)
    assert again.synthetic and again.provenance == ms.provenance
    assert om.load_table(hub, "tokens").num_rows == ms.num_trajectories
    assert sorted(p.name for p in hub.iterdir()) == [
        ".otbench-written.json", "README.md", "manifest.json", "tokens", "trajectories"]


def test_the_card_carries_configs_licence_provenance_and_the_synthetic_flag(exported):
    ms, hub, manifest, _ = exported
    card = huggingface_hub.DatasetCard.load(hub / "README.md")
    data = card.data.to_dict()
    assert data["license"] == "cc-by-4.0" and data["pretty_name"] == "otbench test set"
    assert "synthetic" in data["tags"]
    configs = {c["config_name"]: c for c in data["configs"]}
    assert set(configs) == {"trajectories", "tokens"} and configs["trajectories"]["default"]
    assert configs["tokens"]["data_files"] == [{"split": "train", "path": "tokens/*.parquet"}]
    assert "**SYNTHETIC DATA**" in card.text and manifest["content_hash"] in card.text
    block = card.text.split("```json\n", 1)[1].split("\n```", 1)[0]
    assert json.loads(block)["provenance"] == json.loads(json.dumps(ms.provenance))


def test_a_measured_set_says_so_and_an_unstated_licence_is_unknown(tmp_path):
    ms = small_set()
    assert not ms.synthetic
    om.export_hub(ms, tmp_path / "hub")
    card = huggingface_hub.DatasetCard.load(tmp_path / "hub" / "README.md")
    assert card.data.license == "unknown" and "synthetic" not in card.data.tags
    assert "SYNTHETIC" not in card.text and "Measured data" in card.text


def test_writes_follow_the_output_rule(exported, tmp_path):
    ms, _, _, _ = exported
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    with pytest.raises(UnsafeOutputError, match="otbench did not write it"):
        om.export_hub(ms, foreign)
    assert sorted(p.name for p in foreign.iterdir()) == ["notes.txt"]
    hub = tmp_path / "hub"
    om.export_hub(ms, hub)
    (hub / "NOTES.md").write_text("a user's file")
    om.export_hub(ms, hub, license="mit")             # written again: only otbench's files change
    assert (hub / "NOTES.md").read_text() == "a user's file"
    assert huggingface_hub.DatasetCard.load(hub / "README.md").data.license == "mit"
    with pytest.raises(om.MeasurementSetError, match="licence identifier"):
        om.export_hub(ms, tmp_path / "other", license="Apache 2")
    assert not (tmp_path / "other").exists()


def _cache_repo(cache, repo: str, folder, commit: str = "a" * 40):
    """`folder` as the snapshot of dataset `repo` in a Hugging Face cache (the cache's layout:
    refs/main names the commit, snapshots/<commit>/ holds the files)."""
    base = cache / f"datasets--{repo.replace('/', '--')}"
    (base / "refs").mkdir(parents=True)
    (base / "refs" / "main").write_text(commit)
    shutil.copytree(folder, base / "snapshots" / commit)


def test_a_hub_id_in_the_local_cache_loads_and_imports(exported, tmp_path, monkeypatch):
    ms, hub, _, _ = exported
    cache = tmp_path / "hf-cache"
    _cache_repo(cache, "someone/otbench-set", hub)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    got = om.load("hf://datasets/someone/otbench-set")
    assert om.content_hash(got) == om.content_hash(ms)
    assert om.content_hash(om.load(f"hf://datasets/someone/otbench-set@{'a' * 40}")) \
        == om.content_hash(ms)
    r = cli("import", "hf://datasets/someone/otbench-set", "--out", tmp_path / "copy")
    assert r.exit_code == 0, r.output
    assert om.content_hash(om.load(tmp_path / "copy")) == om.content_hash(ms)
    assert om.load_table(tmp_path / "copy", "tokens").num_rows == ms.num_trajectories
    refused(cli("import", "hf://datasets/someone/missing", "--out", tmp_path / "x"),
            "hf://datasets/someone/missing: not in the local Hugging Face cache; download it "
            "first (hf download someone/missing --repo-type dataset)")
    refused(cli("validate", "hf://datasets/not-a-repo"),
            "hf://datasets/not-a-repo: a Hub id is hf://datasets/ORG/NAME[@REVISION]")


def test_cli_export_hub_dir(exported, tmp_path):
    _, _, _, root = exported
    r = cli("export", root / "set", "--hub-dir", tmp_path / "h", "--license", "apache-2.0")
    assert r.exit_code == 0, r.output
    assert "SYNTHETIC" in r.output and "1 extra tables" in r.output
    assert om.content_hash(om.load(tmp_path / "h")) == om.content_hash(om.load(root / "set"))
    refused(cli("export", root / "set"),
            "export needs --out FILE (JSONL), --hub-dir DIR (Hub folder), or both")
    refused(cli("export", root / "set", "--hub-dir", root / "set" / "trajectories"))


def test_from_table_checks_the_rows(exported):
    _, hub, _, _ = exported
    table = datasets.load_dataset(str(hub), "trajectories", split="train",
                                  cache_dir=str(hub.parent / "datasets-cache")).data.table
    with pytest.raises(om.MeasurementSetError, match="trajectories table: missing column 'y'"):
        om.from_table(table.drop_columns(["y"]))
    assert os.fspath(om.hub_path(hub)) == os.fspath(hub)
