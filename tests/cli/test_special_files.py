"""A FIFO or a device named as an input file is one line and exit 2, never a hang (issue 39).

Every command that reads a file the user names (a JSON result, a split file, a JSONL
import or grade file, a job or config TOML, an evaluation log, a stops CSV, a benchmark
file) opens it through `otbench.files.open_regular`: a FIFO with no writer would block a
plain `open` forever and `/dev/zero` would fill memory. The JSONL importer alone streams a
FIFO (`otbench import <(zcat ...)`, its lines bounded: test_hostile_inputs.py), so it is
given the device only. An alarm turns a hang into a failure of the test instead of a stuck
run.
"""

import os
import signal

import pytest
from _bad_input import cli, refused, small_set
from otbench.analysis.measurement import save

REFUSAL = "not a regular file (a FIFO, device or folder is not "


class Hung(Exception):
    pass


@pytest.fixture
def alarm():
    """Fail (instead of hanging) a command that blocks on its input for 60 s."""
    def ring(signum, frame):
        raise Hung("the command blocked on its input")

    old = signal.signal(signal.SIGALRM, ring)
    signal.alarm(60)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


@pytest.fixture(scope="module")
def set_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("special") / "S"
    save(small_set(), d)
    return d


def _commands(set_dir, out, special):
    """(name, argv, what the refusal names) of every command reading `special` as its input."""
    return [
        ("split --from-file", ["split", set_dir, "--from-file", special, "--out", out / "sp"],
         "a JSON document"),
        ("report --thinning", ["report", set_dir, "--out", out / "r", "--thinning", special,
                               "--grid", "11"], "a JSON document"),
        ("grade", ["grade", special], "a JSONL file"),
        ("plan", ["plan", special], "a job file"),
        ("probe run --config", ["probe", "run", "--config", special, "--out", out / "p"],
         "a job file"),
        ("horizon run --config", ["horizon", "run", "--config", special, "--out", out / "h"],
         "a job file"),
        ("audit-log", ["audit-log", special], "an evaluation log"),
        ("bench run --stops", ["bench", "run", set_dir, "--stops", special], "a stops file"),
    ]


@pytest.mark.parametrize("kind", ["fifo", "/dev/zero"])
def test_a_fifo_or_device_as_input_is_one_line(kind, set_dir, tmp_path, alarm):
    special = tmp_path / "input.fifo" if kind == "fifo" else kind
    if kind == "fifo":
        os.mkfifo(special)                  # no writer: a blocking open never returns
    commands = _commands(set_dir, tmp_path, special)
    if kind != "fifo":
        commands.append(("import", ["import", special, "--out", tmp_path / "i"], "a JSONL file"))
    for name, argv, what in commands:
        r = cli(*argv)
        assert not isinstance(r.exception, Hung), name
        err = refused(r, str(special), REFUSAL + what)
        assert len(err) < 300, (name, err)
    assert not any((tmp_path / o).exists() for o in ("sp", "r", "i", "p", "h"))


def test_a_fifo_as_a_set_manifest_is_refused_by_name(set_dir, tmp_path, alarm):
    """The manifest of a set is read by `read_json` too: a FIFO there is not a regular file
    (it was "missing manifest"), and it is not waited on."""
    import shutil

    d = tmp_path / "S"
    shutil.copytree(set_dir, d)
    (d / "manifest.json").unlink()
    os.mkfifo(d / "manifest.json")
    for cmd in ("validate", "metrics"):
        r = cli(cmd, d)
        assert not isinstance(r.exception, Hung), cmd
        refused(r, "manifest.json: " + REFUSAL + "a JSON document")
