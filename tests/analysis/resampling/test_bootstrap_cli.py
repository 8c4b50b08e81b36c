"""`otbench bootstrap`: tables, otbench.bootstrap/1 JSON, progress bar, checkpoints, errors."""

import io
import json

import pytest
from click.testing import CliRunner
from otbench.analysis import content_hash, save, simulate
from otbench.analysis.resampling._bootstrap import bootstrap
from otbench.cli import _common as cli_common
from otbench.cli._bootstrap import bootstrap_cmd


@pytest.fixture(scope="module")
def saved_set(tmp_path_factory):
    ms = simulate("tiny", seed=0)
    path = tmp_path_factory.mktemp("sets") / "set"
    save(ms, path)
    return ms, path


def test_tables_and_json(saved_set, tmp_path):
    ms, path = saved_set
    js = tmp_path / "out" / "b.json"
    r = CliRunner().invoke(bootstrap_cmd, [str(path), "--replicates", "30", "--seed", "5",
                                           "--batch", "7", "--json", str(js)])
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert lines[0] == "SYNTHETIC DATA (simulated, not model outputs)"
    assert lines[1] == ("Two-stage paired bootstrap: 30 replicates, seed 5, "
                        "2.5-97.5 percentile intervals")
    assert "Overthinking Ratio OR (%)" in lines and "Accuracy Degradation AD (pp)" in lines
    assert lines[-1] == f"wrote {js}"
    assert r.stderr == ""                       # no progress bar when stderr is not a terminal
    doc = json.loads(js.read_text())
    ref = bootstrap(ms, replicates=30, seed=5).to_json()
    assert doc.pop("content_hash") == content_hash(ms)            # bound to its set
    assert doc == json.loads(json.dumps(ref))
    assert doc["schema"] == "otbench.bootstrap/1" and doc["replicates"] == 30 and doc["seed"] == 5
    for c in doc["cells"]:
        for k in ("or", "ad", "full_acc", "tokens", "endpoint_acc"):
            assert len(c[k]) == 2 and c[k][0] <= c[k][1]
        assert 0.0 <= c["or"][0] <= 1.0                  # fractions, not %


def test_frontiers_option(saved_set, tmp_path):
    _, path = saved_set
    js = tmp_path / "f.json"
    r = CliRunner().invoke(bootstrap_cmd, [str(path), "--replicates", "4", "--frontiers",
                                           "--grid", "11", "--json", str(js)])
    assert r.exit_code == 0, r.output
    assert "Oracle frontiers, 11-point grid: A_full" in r.stdout
    firsts = [ln.split()[0] for ln in r.stdout.splitlines() if ln.split()]
    assert [w for w in firsts if w in ("DR", "FB", "DEE")] == ["DR", "FB", "DEE"]
    doc = json.loads(js.read_text())["frontiers"]
    assert len(doc["grid"]) == 11 and set(doc) >= {"dr", "fb", "dee", "a_full"}
    assert len(doc["dee"]["beta_match"]) == 2


def test_checkpoint_and_resume_options(saved_set, tmp_path):
    _, path = saved_set
    ck = tmp_path / "ck"
    args = [str(path), "--replicates", "12", "--batch", "4", "--checkpoint-dir", str(ck),
            "--checkpoint-every", "1"]
    first = CliRunner().invoke(bootstrap_cmd, args)
    assert first.exit_code == 0, first.output
    again = CliRunner().invoke(bootstrap_cmd, args)
    assert again.exit_code == 2
    assert "already holds a checkpoint; pass resume=True (--resume)" in again.stderr
    resumed = CliRunner().invoke(bootstrap_cmd, args + ["--resume"])
    assert resumed.exit_code == 0 and resumed.stdout == first.stdout


@pytest.mark.parametrize("args, msg", [
    (["--replicates", "0"], "Error: `replicates` must be an integer >= 1, got 0"),
    (["--seed", "-3"], "Error: `seed` must be an integer >= 0 and < 2**64, got -3"),
    (["--resume"], "Error: `resume` needs a `checkpoint_dir`"),
])
def test_bad_options_exit_2_with_one_line(saved_set, args, msg):
    _, path = saved_set
    r = CliRunner().invoke(bootstrap_cmd, [str(path)] + args)
    assert r.exit_code == 2
    assert r.stderr.strip() == msg


def test_missing_set_exit_2(tmp_path):
    r = CliRunner().invoke(bootstrap_cmd, [str(tmp_path / "nope")])
    assert r.exit_code == 2 and r.stderr.startswith("Error: ") and len(r.stderr.splitlines()) == 1


class _TTY(io.StringIO):
    def isatty(self):
        return True


def test_progress_bar_only_on_a_terminal(monkeypatch):
    tty = _TTY()
    monkeypatch.setattr(cli_common.sys, "stderr", tty)
    with cli_common.progress_bar(10, "bootstrap replicates") as bar:
        update = cli_common.progress_callback(bar)
        update(4)
        update(10)
    assert "bootstrap replicates" in tty.getvalue() and "10/10" in tty.getvalue()
    plain = io.StringIO()                        # not a terminal: no bar, callback is a no-op
    monkeypatch.setattr(cli_common.sys, "stderr", plain)
    with cli_common.progress_bar(10, "bootstrap replicates") as bar:
        assert bar is None
        cli_common.progress_callback(bar)(5)
    assert plain.getvalue() == ""
