"""The CLI's one error path (cli/_common.py): one line on stderr, exit 2, for data and argument errors."""

import pytest


@pytest.mark.parametrize("args, first", [
    (("metrics", "{missing}"), "{missing}"),                          # data errors name the file
    (("bootstrap", "{tiny}", "--replicates", "0"), "Error: `--replicates` must be an integer >= 1"),
    (("thinning", "{tiny}", "--probes", "99", "--trajectories", ""), "Error: `--probes` must not exceed"),
    (("bench", "run", "{tiny}", "--method", "nope"), "Error: the set has no split assignment"),
    (("effort", "{tiny}", "--levels", "low"), "Error: Invalid value for '--levels': item 'low': "
                                              "expected name=points (e.g. low=2)"),
    # an empty cluster address is refused before any job is read or engine started
    (("probe", "run", "--model", "vllm", "--tasks", "math500", "--out", "{missing}",
      "--ray-address", ""), "--ray-address is empty"),
    (("probe", "run", "--model", "vllm", "--tasks", "math500", "--out", "{missing}",
      "--ray-address", "  "), "--ray-address is empty"),
    # a non-UTF-8 argument (as the OS hands bytes to Python: surrogate escapes) is named, not a traceback
    (("probe", "run", "--model", "vllm", "--model-args", "pretrained=smollm2-135m-instruct", "--tasks",
      "math500", "--write-job", "{tmp}/\udcff\udcfe.toml"), "--write-job '{tmp}/\\udcff\\udcfe.toml': the path "
     "is not valid UTF-8"),
])
def test_one_line_exit_2(cli, tiny_set_dir, tmp_path, args, first):
    args = [a.format(tiny=tiny_set_dir, missing=tmp_path / "nope", tmp=tmp_path) for a in args]
    r = cli(*args)
    assert r.exit_code == 2, r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(first.format(missing=tmp_path / "nope", tmp=tmp_path)), r.stderr
    assert "Traceback" not in r.output


def test_probe_run_refuses_an_output_inside_the_model_folder(cli, tmp_path):
    """`--out` (or `--journal`) inside the local weights folder is refused before anything runs,
    and nothing is written there."""
    weights = tmp_path / "weights"
    weights.mkdir()
    (weights / "config.json").write_text("{}")
    base = ("probe", "run", "--model", "vllm", "--model-args", f"pretrained={weights},family=qwen3-thinking",
            "--tasks", "math500", "--limit", "1")
    for extra in (("--out", str(weights / "out")),
                  ("--out", str(tmp_path / "out"), "--journal", str(weights / "j"))):
        r = cli(*base, *extra)
        assert r.exit_code == 2, r.output
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and f"is inside the input folder {weights}" in lines[0], r.stderr
        assert sorted(p.name for p in weights.iterdir()) == ["config.json"]


@pytest.mark.parametrize("command", ["certify", "run"])
def test_online_commands_refuse_their_output_before_anything_runs(cli, tiny_set_dir, tmp_path, command):
    """A `--json` onto a user's file is refused first (before the set is checked for replay or an
    engine starts), and the message names no `--overwrite` option the command lacks."""
    user = tmp_path / "thesis.tex"
    user.write_text("my thesis\n")
    r = cli("online", command, tiny_set_dir, "--theta", "0", "--json", user)
    assert r.exit_code == 2, r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{user}: exists and otbench did not write it"), r.stderr
    assert "overwrite" not in lines[0] and "give another output path" in lines[0]
    assert user.read_text() == "my thesis\n"
