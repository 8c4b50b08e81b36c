"""The CLI's one error path (cli/_common.py): one line on stderr, exit 2, for data and argument errors."""

import pytest


@pytest.mark.parametrize("args, first", [
    (("metrics", "{missing}"), "{missing}"),                          # data errors name the file
    (("bootstrap", "{tiny}", "--replicates", "0"), "Error: `--replicates` must be an integer >= 1"),
    (("thinning", "{tiny}", "--probes", "99", "--trajectories", ""), "Error: `--probes` must not exceed"),
    (("bench", "run", "{tiny}", "--method", "nope"), "Error: the set has no split assignment"),
    # an empty cluster address is refused before any job is read or engine started
    (("probe", "run", "--model", "vllm", "--tasks", "math500", "--out", "{missing}",
      "--ray-address", ""), "--ray-address is empty"),
    (("probe", "run", "--model", "vllm", "--tasks", "math500", "--out", "{missing}",
      "--ray-address", "  "), "--ray-address is empty"),
])
def test_one_line_exit_2(cli, tiny_set_dir, tmp_path, args, first):
    args = [a.format(tiny=tiny_set_dir, missing=tmp_path / "nope") for a in args]
    r = cli(*args)
    assert r.exit_code == 2, r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(first.format(missing=tmp_path / "nope")), r.stderr
    assert "Traceback" not in r.output
