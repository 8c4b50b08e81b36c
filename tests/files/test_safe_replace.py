"""The atomic writer's safe-replace rule: nothing lost, nothing replaced that otbench did not write."""

import json
import os
import subprocess
import sys
import threading

import pytest
from _bad_input import small_set
from otbench.analysis.measurement import save

from otbench.errors import UnsafeOutputError
from otbench.files import atomic_dir, clean_stale, refuse_input, write_text_atomic


def test_overwrite_refuses_a_folder_that_is_not_a_set(tmp_path):
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "thesis.tex").write_text("x")
    with pytest.raises(FileExistsError, match="is not a measurement set"):
        save(small_set(), victim, overwrite=True)
    assert (victim / "thesis.tex").read_text() == "x"


def test_overwrite_keeps_what_the_old_set_holds_besides_the_set(tmp_path):
    out = tmp_path / "S"
    save(small_set(), out)
    (out / "results").mkdir()
    (out / "results" / "bootstrap.json").write_text("{}")
    (out / "run.json").write_text("{}")
    (out / "notes.txt").write_text("mine")
    save(small_set(synthetic=True), out, overwrite=True)
    assert json.loads((out / "manifest.json").read_text())["synthetic"] is True
    for kept in ("results/bootstrap.json", "run.json", "notes.txt"):
        assert (out / kept).exists(), kept


def test_a_folder_that_appears_while_writing_is_never_replaced(tmp_path):
    out = tmp_path / "X"
    with pytest.raises(FileExistsError, match="appeared while writing"):
        with atomic_dir(out, replace=None) as tmp:
            (tmp / "a").write_text("new")
            out.mkdir()
            (out / "notes.txt").write_text("user")
    assert (out / "notes.txt").read_text() == "user"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".X.tmp")]


def test_concurrent_saves_without_overwrite_one_wins_one_refuses(tmp_path):
    out, errors = tmp_path / "C", []
    barrier = threading.Barrier(2)

    def one():
        try:
            with atomic_dir(out, replace=None) as tmp:
                (tmp / "f").write_text(str(threading.get_ident()))
                barrier.wait()
        except FileExistsError as e:
            errors.append(e)

    threads = [threading.Thread(target=one) for _ in range(2)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert len(errors) == 1 and (out / "f").is_file()


def test_outputs_never_land_on_a_set(tmp_path):
    out = tmp_path / "S"
    save(small_set(), out)
    before = (out / "manifest.json").read_bytes()
    with pytest.raises(UnsafeOutputError, match="is part of the measurement set"):
        write_text_atomic(out / "manifest.json", "{}")
    part = next((out / "trajectories").rglob("*.parquet"))
    with pytest.raises(UnsafeOutputError, match="is part of the measurement set"):
        write_text_atomic(part, "{}")
    assert (out / "manifest.json").read_bytes() == before
    write_text_atomic(out / "results" / "r.json", "{}")      # beside the set is fine
    with pytest.raises(UnsafeOutputError, match="refusing to write onto an input"):
        refuse_input(tmp_path, out)                          # an ancestor of the input


def test_dot_and_root_targets(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "keep.txt").write_text("x")
    with pytest.raises(FileExistsError, match="is not a measurement set"):
        save(small_set(), ".", overwrite=True)
    with pytest.raises(UnsafeOutputError, match="filesystem root"):
        with atomic_dir("/", replace=None):
            pass
    assert (tmp_path / "keep.txt").exists()


def test_temporaries_of_killed_writers_are_cleaned(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()
    def marked(p):
        (p.parent / (p.name + ".otbench")).write_bytes(b"otbench temporary\n")
        return p

    stale = marked(tmp_path / f".S.tmp-{dead}-{'0' * 32}")
    stale.mkdir()
    live = marked(tmp_path / f".S.tmp-{os.getppid()}-{'1' * 32}")
    live.mkdir()
    old = tmp_path / f".S.old-{dead}-{'2' * 32}"
    old.mkdir()
    users = tmp_path / f".S.tmp-{dead}-mythings"           # named like one, but no marker
    users.mkdir()
    (users / "notes.txt").write_text("mine")
    assert clean_stale(tmp_path / "S") == [stale]
    assert live.exists() and old.exists() and (users / "notes.txt").read_text() == "mine"
    assert not (tmp_path / (stale.name + ".otbench")).exists()
    save(small_set(), tmp_path / "S")
    assert not stale.exists() and (users / "notes.txt").read_text() == "mine"


def test_a_private_temporary_is_marked_and_dropped_only_by_its_writer(tmp_path):
    from otbench.files import drop_temporary, new_temporary

    spool = new_temporary(tmp_path / "sub" / "S")            # the parent is made; the name is free
    assert not spool.exists() and spool.name.startswith(f".S.tmp-{os.getpid()}-")
    spool.mkdir()
    (spool / "unit").write_text("1")
    assert clean_stale(tmp_path / "sub" / "S") == []          # its writer (this process) runs
    assert drop_temporary(spool) and not spool.exists()
    assert not (spool.parent / (spool.name + ".otbench")).exists()
    # look-alikes: no marker, or another process's pid in the name -- never removed
    users = tmp_path / f".S.tmp-{os.getpid()}-{'3' * 32}"
    users.mkdir()
    (users / "notes.txt").write_text("mine")
    other = tmp_path / f".S.tmp-{os.getppid()}-{'4' * 32}"
    other.mkdir()
    (tmp_path / (other.name + ".otbench")).write_bytes(b"otbench temporary\n")
    assert not drop_temporary(users) and not drop_temporary(other)
    assert (users / "notes.txt").read_text() == "mine" and other.is_dir()


def test_a_horizon_run_overwrite_replaces_only_a_run(tmp_path):
    from otbench.analysis.measurement import write_run

    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "thesis.tex").write_text("x")
    with pytest.raises(UnsafeOutputError, match="is not an otbench output of this kind"):
        write_run(victim, {"arms": []}, [], [], overwrite=True)
    assert (victim / "thesis.tex").read_text() == "x"


def test_a_horizon_run_overwrite_keeps_what_the_run_holds_besides_the_run(tmp_path):
    from otbench.analysis.measurement import write_run

    out = tmp_path / "run"
    write_run(out, {"arms": []}, [], [])
    (out / "notes.txt").write_text("mine")
    (out / "results").mkdir()
    (out / "results" / "horizon.json").write_text("{}")
    write_run(out, {"arms": [], "model": "m2"}, [], [], overwrite=True)
    assert json.loads((out / "horizon.json").read_text())["model"] == "m2"
    assert (out / "notes.txt").read_text() == "mine" and (out / "results" / "horizon.json").exists()
