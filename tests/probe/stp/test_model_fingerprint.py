"""`model_fingerprint` (probe/stp/_keys.py), the model part of every unit's resume key: it
follows the bytes the loaders read at the top of a model folder and nothing else, with or
without its memo of per-file hashes."""

import hashlib
import os

import pytest
from otbench.errors import ArgumentError
from otbench.probe.stp._keys import model_fingerprint


def _folder(root):
    root.mkdir()
    (root / "config.json").write_text('{"layers": 2}')
    (root / "model.safetensors").write_bytes(bytes(range(256)) * 64)
    (root / "original").mkdir()                                  # a duplicate checkpoint: left out
    (root / "original" / "consolidated.pth").write_bytes(b"x" * 100)
    (root / ".cache").write_text("editor state")                  # hidden: left out
    return root


def test_the_fingerprint_follows_the_loaded_files_only(tmp_path):
    m = _folder(tmp_path / "m")
    memo = tmp_path / "memo.json"
    first = model_fingerprint(m)
    assert model_fingerprint(m, memo=memo) == first and memo.is_file()      # the memo changes nothing
    assert model_fingerprint(m, memo=memo) == first                         # a memo hit either
    (m / "original" / "consolidated.pth").write_bytes(b"y" * 100)
    (m / ".cache").write_text("other")
    assert model_fingerprint(m, memo=memo) == first
    # one weight byte changed, same size: a new fingerprint, with the memo too (its stamp moved)
    data = bytearray((m / "model.safetensors").read_bytes())
    data[7] ^= 1
    (m / "model.safetensors").write_bytes(bytes(data))
    changed = model_fingerprint(m, memo=memo)
    assert changed != first and changed == model_fingerprint(m)
    os.rename(m / "config.json", m / "config2.json")                        # a file's name counts
    assert model_fingerprint(m) not in (first, changed)


def test_another_folder_with_the_same_files_has_the_same_fingerprint(tmp_path):
    a, b = _folder(tmp_path / "a"), _folder(tmp_path / "b")
    os.symlink(a / "model.safetensors", tmp_path / "blob")
    (b / "model.safetensors").unlink()
    os.symlink(tmp_path / "blob", b / "model.safetensors")                  # a hub snapshot's link
    assert model_fingerprint(a) == model_fingerprint(b)
    assert len(model_fingerprint(a)) == len(hashlib.sha256().hexdigest())


def test_a_path_that_is_not_a_folder_is_refused(tmp_path):
    (tmp_path / "f").write_text("")
    for p in (tmp_path / "f", tmp_path / "missing"):
        with pytest.raises(ArgumentError, match="must be a model folder"):
            model_fingerprint(p)
