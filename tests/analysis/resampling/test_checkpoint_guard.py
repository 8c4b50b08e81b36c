"""Checkpoints never resume silently wrong: checksum, `done`, deleted state, lock, temporaries."""

import json
import shutil

import numpy as np
import pytest
from otbench.analysis import simulate
from otbench.analysis.resampling._bootstrap import bootstrap
from otbench.analysis.resampling._checkpoint import Checkpointer, CheckpointError

KW = dict(replicates=6, batch=2, checkpoint_every=1)


@pytest.fixture
def ckpt(tmp_path):
    ms = simulate("tiny", seed=0)
    # A run that checkpoints 2 and 4 and is then "killed": replicates=4 of a 6-run.
    first = bootstrap(ms, checkpoint_dir=tmp_path, **KW)
    return ms, tmp_path, first


def _meta_files(d):
    return sorted(p for p in d.rglob("metadata") if p.is_file() and p.parent.name == "meta")


def test_an_untouched_checkpoint_resumes_exactly(ckpt):
    ms, d, first = ckpt
    again = bootstrap(ms, checkpoint_dir=d, resume=True, **KW)
    assert np.array_equal(again.cell, first.cell, equal_nan=True)


def test_edited_done_is_refused(ckpt):
    ms, d, _ = ckpt
    for meta in _meta_files(d):
        doc = json.loads(meta.read_text())
        doc["done"] = 2000 if doc.get("done") else -1
        meta.write_text(json.dumps(doc))
    with pytest.raises(CheckpointError, match=r"records done=(2000|-1), which must equal its step "
                                              r"and lie in 0\.\.6; delete it to start over"):
        bootstrap(ms, checkpoint_dir=d, resume=True, **KW)


def test_a_changed_state_fails_its_checksum(ckpt):
    ms, d, _ = ckpt
    for meta in _meta_files(d):
        doc = json.loads(meta.read_text())
        doc["sha256"] = "0" * 64
        meta.write_text(json.dumps(doc))
    with pytest.raises(CheckpointError, match=r"does not match its checksum \(changed or damaged\)"):
        bootstrap(ms, checkpoint_dir=d, resume=True, **KW)


def test_a_flipped_bit_in_the_state_is_refused(ckpt):
    ms, d, _ = ckpt
    for data in (p for p in d.rglob("*") if p.is_file() and p.parent.name == "d"):
        raw = bytearray(data.read_bytes())
        raw[-9] ^= 0x01                          # one bit of the payload's tail
        data.write_bytes(bytes(raw))
    with pytest.raises(CheckpointError, match=r"(does not match its checksum|cannot be read)"):
        bootstrap(ms, checkpoint_dir=d, resume=True, **KW)


def test_a_deleted_state_is_one_error(ckpt):
    ms, d, _ = ckpt
    for state in [p for p in d.rglob("state") if p.is_dir()]:
        shutil.rmtree(state)
    with pytest.raises(CheckpointError, match=r"cannot be read .*delete it to start over"):
        bootstrap(ms, checkpoint_dir=d, resume=True, **KW)


def test_a_second_bootstrap_on_the_directory_is_refused(ckpt):
    ms, d, _ = ckpt
    held = Checkpointer(d, {"x": 1}, resume=True)
    try:
        with pytest.raises(CheckpointError, match=r"is in use by another bootstrap \(its lock is "
                                                  r"held\)"):
            bootstrap(ms, checkpoint_dir=d, resume=True, **KW)
    finally:
        held.close()
    bootstrap(ms, checkpoint_dir=d, resume=True, **KW)        # released: usable again


def test_orbax_temporaries_are_removed_on_open(ckpt):
    ms, d, _ = ckpt
    (d / "8.orbax-checkpoint-tmp-123").mkdir()
    bootstrap(ms, checkpoint_dir=d, resume=True, **KW)
    assert not list(d.glob("*.orbax-checkpoint-tmp*"))


def test_a_consistently_edited_checkpoint_is_refused(ckpt):
    """Step 4 renamed to step 6 with its `done` moved to 6: every count agrees, but rows 4..5
    were never filled; the checksum covers `done`, so it is refused instead of resumed."""
    ms, d, _ = ckpt
    steps = sorted(int(p.name) for p in d.iterdir() if p.is_dir() and p.name.isdigit())
    assert len(steps) >= 2
    low, high = steps[-2], steps[-1]
    shutil.rmtree(d / str(high))
    (d / str(low)).rename(d / str(high))
    for meta in _meta_files(d / str(high)):
        doc = json.loads(meta.read_text())
        assert doc["done"] == low
        doc["done"] = high
        meta.write_text(json.dumps(doc))
    with pytest.raises(CheckpointError, match=r"does not match its checksum \(changed or damaged\)"):
        bootstrap(ms, checkpoint_dir=d, resume=True, **KW)
