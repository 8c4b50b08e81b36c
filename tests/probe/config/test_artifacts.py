"""The frozen artifacts shipped with the package: every family and model entry loads and is sane."""

import pytest
from otbench.probe.config import (
    DEFAULT_MODEL,
    ArtifactError,
    artifacts_dir,
    find_model,
    list_entries,
    load_family,
)


def test_artifacts_are_installed_with_the_package():
    assert artifacts_dir().is_dir()


def test_every_model_entry_names_a_loadable_family():
    entries = list_entries("models")
    assert entries, "no frozen model entries shipped"
    for name in entries:
        entry = find_model(name)
        assert entry is not None and entry.name == name
        assert find_model(entry.repository.upper()) == entry    # a Hugging Face id, any case
        fam = load_family(entry.family)
        assert fam.limits.thinking > 0 and fam.limits.answer > 0 and fam.limits.context > 0
        assert fam.limits.thinking + fam.limits.answer < fam.limits.context
        assert entry.tensor_parallel_size >= 1


def test_every_family_loads():
    assert list_entries("families")
    for name in list_entries("families"):
        assert load_family(name).name == name


def test_the_default_model_is_an_entry():
    assert DEFAULT_MODEL in list_entries("models")


def test_an_unknown_family_is_one_line():
    with pytest.raises(ArtifactError) as e:
        load_family("no-such-family")
    assert "\n" not in str(e.value) and "no-such-family" in str(e.value)


def test_config_files_that_are_not_small_regular_text_are_refused_in_one_line(tmp_path):
    """A FIFO would hang the read and /dev/zero fill memory: only a regular file is read, at most
    `CONFIG_LIMIT` bytes of UTF-8; each refusal is one `ArtifactError` naming the file."""
    import os

    from otbench.probe.config import load_family
    from otbench.probe.config._family import CONFIG_LIMIT, ArtifactError

    fifo = tmp_path / "fifo.toml"
    os.mkfifo(fifo)
    zero = tmp_path / "zero.toml"
    zero.symlink_to("/dev/zero")
    big = tmp_path / "big.toml"
    big.write_bytes(b"#" * (CONFIG_LIMIT + 1))
    bad = tmp_path / "bad.toml"
    bad.write_bytes(b"schema = \"\xff\"\n")
    cases = {fifo: "not a regular file", zero: "not a regular file", tmp_path: "not a regular file",
             big: f"larger than {CONFIG_LIMIT} bytes", bad: "not UTF-8 text (byte 10)"}
    for path, why in cases.items():
        target = path if path != tmp_path else tmp_path / "dir.toml"
        if path == tmp_path:
            target.mkdir()
        with pytest.raises(ArtifactError) as e:
            load_family(target)
        assert str(e.value).startswith(f"{target}: {why}"), e.value
        assert "\n" not in str(e.value)
