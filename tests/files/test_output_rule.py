"""The one output rule (otbench.files): what otbench wrote, special files, links, inputs, markers."""

import json
import os
import stat
from pathlib import Path

import pytest

from otbench.errors import UnsafeOutputError
from otbench.files import (
    LEDGER,
    atomic_dir,
    check_output,
    clean_stale,
    output_rules,
    write_text_atomic,
    written_by_otbench,
)


def test_a_file_otbench_wrote_is_replaced_and_a_users_file_is_refused(tmp_path):
    out = tmp_path / "table.csv"
    write_text_atomic(out, "a,b\n")
    assert written_by_otbench(out)
    write_text_atomic(out, "a,b\n1,2\n")                      # recorded in the ledger: replaced
    assert out.read_text() == "a,b\n1,2\n"
    out.write_text("the user's edit\n")                       # changed since: no longer otbench's
    assert not written_by_otbench(out)
    with pytest.raises(UnsafeOutputError, match="otbench did not write it"):
        write_text_atomic(out, "x")
    assert out.read_text() == "the user's edit\n"
    write_text_atomic(out, "x", overwrite=True)
    assert out.read_text() == "x"
    thesis = tmp_path / "thesis.tex"
    thesis.write_text("\\begin{document}")
    with pytest.raises(UnsafeOutputError, match="otbench did not write it"):
        write_text_atomic(thesis, "{}")
    assert thesis.read_text() == "\\begin{document}"


def test_a_schemad_document_is_otbenchs_and_a_name_or_foreign_schema_is_not(tmp_path):
    doc = tmp_path / "metrics.json"
    doc.write_text(json.dumps({"schema": "otbench.metrics/1", "cells": []}))
    assert written_by_otbench(doc)
    for text in ("{}", '{"schema": "mine/1"}', "[1, 2]", "not json", '{"schema": 3}',
                 '{"schema": "otbench.horizon-run/1"}', '{"schema": "otbench.measurement_set/1"}',
                 '{"schema": "otbench.report/1"}', '{"schema": "otbench.metrics/x"}'):
        doc.write_text(text)
        assert not written_by_otbench(doc), text
    ledger = tmp_path / LEDGER                               # a forged ledger must match the bytes
    ledger.write_text(json.dumps({"schema": "otbench.written/1", "files": {"metrics.json": "0" * 64}}))
    assert not written_by_otbench(doc)


def test_a_recorded_result_the_user_edited_is_the_users_though_it_names_a_schema(tmp_path):
    doc = tmp_path / "metrics.json"
    write_text_atomic(doc, json.dumps({"schema": "otbench.metrics/1", "cells": []}))
    assert written_by_otbench(doc)
    doc.write_text(json.dumps({"schema": "otbench.metrics/1", "cells": [], "my_note": "x"}))
    assert not written_by_otbench(doc)                        # the ledger's sha256 decides
    with pytest.raises(UnsafeOutputError, match="otbench did not write it"):
        write_text_atomic(doc, "{}")
    assert "my_note" in doc.read_text()
    (tmp_path / LEDGER).unlink()                              # no record at all: the schema says
    assert written_by_otbench(doc)


def test_a_fifo_is_written_in_place_and_never_renamed_over(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(UnsafeOutputError, match="FIFO that no process reads"):
        write_text_atomic(fifo, "x")                          # no reader: refused, never blocks
    # A reader holds the FIFO open (non-blocking, so no thread and no race): the write goes
    # into the pipe, in place.
    r = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        write_text_atomic(fifo, "through the pipe\n")
        got = os.read(r, 1 << 10)
    finally:
        os.close(r)
    assert got == b"through the pipe\n"
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)             # still the FIFO
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe"]


def test_a_character_device_is_written_in_place(tmp_path, monkeypatch):
    """Mocked: the rule sees a character device and writes in place (no temp, no rename)."""
    target = tmp_path / "dev"
    target.write_text("")
    real_stat = os.stat

    def fake_stat(p, *a, **k):
        st = real_stat(p, *a, **k)
        if os.fspath(p) == os.fspath(target):
            return os.stat_result((stat.S_IFCHR | 0o666,) + tuple(st)[1:])
        return st
    monkeypatch.setattr(os, "stat", fake_stat)
    assert check_output(target) == (target, True)
    renamed = []
    monkeypatch.setattr(os, "replace", lambda *a: renamed.append(a))
    write_text_atomic(target, "in place\n")
    assert renamed == [] and target.read_text() == "in place\n"


def test_symbolic_links_are_never_replaced(tmp_path):
    mine = tmp_path / "mine.txt"
    mine.write_text("user")
    link = tmp_path / "link.json"
    link.symlink_to(mine)
    with pytest.raises(UnsafeOutputError, match="otbench did not write it"):
        write_text_atomic(link, "{}")                         # the file it names is the user's
    assert link.is_symlink() and mine.read_text() == "user"
    ours = tmp_path / "ours.json"
    write_text_atomic(ours, "{}\n")
    link2 = tmp_path / "link2.json"
    link2.symlink_to(ours)
    write_text_atomic(link2, '{"a": 1}\n')                    # written through: the link stays
    assert link2.is_symlink() and ours.read_text() == '{"a": 1}\n'
    dangling = tmp_path / "dangling.json"
    dangling.symlink_to(tmp_path / "nowhere")
    with pytest.raises(UnsafeOutputError, match="symbolic link to a missing file"):
        write_text_atomic(dangling, "{}")
    assert dangling.is_symlink() and not (tmp_path / "nowhere").exists()


def test_outputs_never_land_on_or_inside_inputs(tmp_path):
    g = tmp_path / "g.jsonl"
    g.write_text("{}\n")
    tok = tmp_path / "tok"
    tok.mkdir()
    (tok / "tokenizer.json").write_text("{}")
    with output_rules(inputs=[g, tok], overwrite=True):
        for bad in (g, tok / "tokenizer.json", tok / "new.json", tmp_path):
            with pytest.raises(UnsafeOutputError, match="input"):
                write_text_atomic(bad, "x")
        with pytest.raises(UnsafeOutputError, match="input"):
            with atomic_dir(tok / "sub"):
                pass
        write_text_atomic(tmp_path / "beside.json", "{}")     # beside the inputs is fine
    link = tmp_path / "alias"
    link.symlink_to(g)
    with output_rules(inputs=[g]), pytest.raises(UnsafeOutputError, match="input"):
        write_text_atomic(link, "x", overwrite=True)          # a link to an input is the input
    assert g.read_text() == "{}\n" and (tok / "tokenizer.json").read_text() == "{}"


def test_a_folder_output_keeps_what_otbench_did_not_write(tmp_path):
    out = tmp_path / "out"
    with atomic_dir(out) as tmp:
        (tmp / "a.csv").write_text("1")
        (tmp / "sub").mkdir()
        (tmp / "sub" / "b.png").write_text("2")
    (out / "notes.txt").write_text("mine")
    (out / "sub" / "mine.png").write_text("mine")
    (out / "data").mkdir()
    (out / "data" / "x").write_text("mine")
    with atomic_dir(out) as tmp:
        (tmp / "c.csv").write_text("3")
    names = sorted(str(p.relative_to(out)) for p in out.rglob("*"))
    assert names == sorted([LEDGER, "c.csv", "notes.txt", "sub", "sub/mine.png", "data", "data/x"])
    (out / "c.csv").write_text("edited")
    with pytest.raises(UnsafeOutputError, match="'c.csv' was not written by otbench"):
        with atomic_dir(out) as tmp:
            (tmp / "c.csv").write_text("4")
    assert (out / "c.csv").read_text() == "edited"
    user = tmp_path / "user"
    user.mkdir()
    (user / "thesis.tex").write_text("x")
    with pytest.raises(UnsafeOutputError, match="otbench did not write it"):
        with atomic_dir(user) as tmp:
            raise AssertionError("refused before the work")
    with atomic_dir(user, overwrite=True) as tmp:            # asked for: written into, file kept
        (tmp / "r.csv").write_text("1")
    assert (user / "thesis.tex").read_text() == "x" and (user / "r.csv").read_text() == "1"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_a_users_folder_named_like_a_temporary_is_never_deleted(tmp_path):
    mine = tmp_path / ".set.tmp-999999-mythings"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    hexname = tmp_path / f".set.tmp-999999-{'a' * 32}"       # even the exact form, without marker
    hexname.write_text("mine too")
    assert clean_stale(tmp_path / "set") == []
    with atomic_dir(tmp_path / "set") as tmp:
        (tmp / "x").write_text("1")
    assert (mine / "notes.txt").read_text() == "mine" and hexname.read_text() == "mine too"


def test_a_descriptor_path_is_written_in_place(tmp_path):
    """`--json /dev/stdout` with stdout redirected to a file: the redirect's file is written in
    place (here a descriptor of our own onto a temporary file, and a link to it)."""
    f = tmp_path / "redirected.json"
    fd = os.open(f, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        fdpath = Path(f"/proc/self/fd/{fd}")
        if not fdpath.exists():
            pytest.skip("no /proc/self/fd on this system")
        link = tmp_path / "stdout-link"
        link.symlink_to(fdpath)
        assert check_output(link) == (link, True)
        write_text_atomic(link, '{"schema": "otbench.x/1"}\n')
        assert link.is_symlink() and f.read_text() == '{"schema": "otbench.x/1"}\n'
        assert sorted(p.name for p in tmp_path.iterdir()) == ["redirected.json", "stdout-link"]
    finally:
        os.close(fd)
