"""CLI cases of the data-loss list: each refuses with one line (exit 2) and loses nothing."""

import json
import shutil

from _bad_input import cli, refused, small_set, write_jsonl
from otbench.analysis.measurement import save


def test_import_overwrite_onto_a_foreign_folder(tmp_path):
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "thesis.tex").write_text("x")
    good = write_jsonl(tmp_path / "good.jsonl", small_set())
    refused(cli("import", good, "--out", victim, "--overwrite"),
            "victim: exists and is not a measurement set; --overwrite replaces only a "
            "measurement set")
    assert (victim / "thesis.tex").read_text() == "x"


def test_writing_onto_the_input_set(tmp_path):
    s = tmp_path / "S"
    save(small_set(), s)
    before = (s / "manifest.json").read_bytes()
    refused(cli("metrics", s, "--json", s / "manifest.json"),
            "manifest.json: is part of the measurement set", "refusing to write onto an input")
    refused(cli("export", s, "--out", s / "manifest.json"), "refusing to write onto an input")
    assert (s / "manifest.json").read_bytes() == before
    assert cli("validate", s).exit_code == 0


def test_split_in_place_keeps_results_run_and_user_folders(tmp_path):
    s = tmp_path / "S"
    save(small_set(), s)
    (s / "results").mkdir()
    (s / "results" / "bootstrap.json").write_text("{}")
    (s / "run.json").write_text("{}")
    (s / "mine").mkdir()
    assert cli("split", s).exit_code == 0
    for kept in ("results/bootstrap.json", "run.json", "mine"):
        assert (s / kept).exists(), kept
    assert json.loads((s / "manifest.json").read_text())["provenance"]["split"]


def test_out_dot_and_dotdot_with_overwrite(tmp_path, monkeypatch):
    good = write_jsonl(tmp_path / "good.jsonl", small_set())
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "notes.txt").write_text("x")
    monkeypatch.chdir(tmp_path / "sub")
    refused(cli("import", good, "--out", ".", "--overwrite"), ".: exists and is not a measurement set")
    # `..` holds the input file: refused as an output onto an input (before the set rule)
    refused(cli("import", good, "--out", "..", "--overwrite"), "..: is the input",
            "refusing to write onto an input")
    assert good.exists()


def test_an_unwritable_target_is_one_line(tmp_path):
    good = write_jsonl(tmp_path / "good.jsonl", small_set())
    (tmp_path / "afile").write_text("")
    refused(cli("import", good, "--out", tmp_path / "afile" / "x"), "afile: file exists")
    shutil.rmtree(tmp_path / "afile", ignore_errors=True)


def test_every_command_with_an_output_takes_overwrite_and_is_guarded():
    import click
    from otbench.cli import main
    from otbench.cli._outputs import OUTPUT_OPTIONS

    def commands(group):
        for c in group.commands.values():
            yield from commands(c) if isinstance(c, click.Group) else [c]

    with_outputs = [c for c in commands(main) if any(p.name in OUTPUT_OPTIONS for p in c.params)]
    assert len(with_outputs) >= 18
    for c in with_outputs:
        assert "overwrite" in {p.name for p in c.params}, c.name
        assert getattr(c.callback, "_otbench_guarded", False), c.name
