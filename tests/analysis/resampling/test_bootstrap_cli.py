"""`otbench bootstrap`: tables, otbench.bootstrap/1 JSON, progress bar, checkpoints, errors."""

import io
import json

import pytest
from click.testing import CliRunner
from otbench.analysis import save, simulate
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
    assert lines[1] == ("Two-stage paired bootstrap: 30 replicates, seed 5; each entry is the "
                        "point estimate [2.5-97.5 percentile interval]")
    assert "Overthinking Ratio OR (%)" in lines and "Accuracy Degradation AD (pp)" in lines
    assert lines[-1] == f"wrote {js}"
    # Not a terminal: plain progress lines (a short job: the end line only), no bar.
    assert r.stderr.splitlines()[-1].startswith("bootstrap replicates: 30/30 (100%), ")
    assert r.stderr.splitlines()[-1].endswith(" s (done)")
    doc = json.loads(js.read_text())
    res = bootstrap(ms, replicates=30, seed=5)
    ref = res.to_json()
    assert doc.pop("content_hash") == json.loads((path / "manifest.json").read_text())["content_hash"]
    assert doc == json.loads(json.dumps(ref))
    # Point estimates beside the intervals: the macro OR cell of the OR table.
    avg = next(ln for ln in lines[lines.index("Overthinking Ratio OR (%)"):] if ln.startswith("Avg."))
    assert avg.split()[-3] == f"{100 * res.estimate_macro[0]:.1f}"
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
    (["--replicates", "0"], "Error: `--replicates` must be an integer >= 1, got 0"),
    (["--seed", "-3"], "Error: `--seed` must be an integer >= 0 and < 2**64, got -3"),
    (["--resume"], "Error: `--resume` needs a `--checkpoint-dir`"),
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
    plain = io.StringIO()                        # not a terminal: lines, no bar
    monkeypatch.setattr(cli_common.sys, "stderr", plain)
    with cli_common.progress_bar(10, "bootstrap replicates") as bar:
        assert isinstance(bar, cli_common.LineProgress)
        cli_common.progress_callback(bar)(5)
    assert plain.getvalue().startswith("bootstrap replicates: 5/10 (50%), ")
    assert "\r" not in plain.getvalue() and "\x1b" not in plain.getvalue()


def test_line_progress_logs_at_least_every_interval():
    """A batch job's log gets a progress line every `interval` even while a step is silent."""
    import io
    import time

    from otbench.cli._common import LineProgress

    out = io.StringIO()
    with LineProgress(10, "work", interval=0.05, file=out) as p:
        p.update(4)
        time.sleep(0.32)                        # one long silent step
        p.update(6)
    lines = out.getvalue().splitlines()
    assert lines[-1].startswith("work: 10/10 (100%)") and lines[-1].endswith("(done)")
    beats = [ln for ln in lines[:-1] if ln.startswith("work: 4/10 (40%)")]
    assert len(beats) >= 3 and all("left" in ln for ln in beats)


def test_quiet_by_default_verbose_shows_third_party_warnings(saved_set):
    """`otbench` hides third-party warnings unless --verbose; its own stay visible."""
    import warnings

    from otbench.cli import main

    def noisy(verbose):
        with warnings.catch_warnings(record=True) as seen:
            r = CliRunner().invoke(main, (["--verbose"] if verbose else []) + ["bench", "list"])
            assert r.exit_code == 0
            warnings.warn("from a library", FutureWarning)            # attributed to this test
            warnings.warn_explicit("ours", UserWarning, "x.py", 1, module="otbench.analysis.x")
        return [str(w.message) for w in seen]

    assert noisy(verbose=False) == ["ours"]
    assert noisy(verbose=True) == ["from a library", "ours"]
