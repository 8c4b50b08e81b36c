"""A new stopping method is one new file plus one registry line (issue: one method object).

The toy DEE method below is written to a fresh file at test time and
registered with one line; nothing else of otbench is edited. It must then be
listed with its summary by `otbench bench list`, ranked by `otbench bench
compare` (with its declared net cost), and run by the side-request
controller in `otbench online certify` on a real probe run (the tiny
Qwen3-style model on the transformers engine), with its online stops equal to
OTBench's offline ones on the stored thinking.
"""

import json
from pathlib import Path
import textwrap

import pytest

TOY = textwrap.dedent('''
    import numpy as np
    from otbench.analysis.methods import SignalCost


    class ToyDee:
        """Toy exit: stop at the first boundary k >= max(2, theta) whose probe answer repeats the last one."""

        name = "toy-dee"
        strategy = "dee"
        signals = ("answer",)
        online = "side"
        thetas = (1.0, 2.0, 3.0)
        signal_cost = SignalCost(prefill=3, recorded="answer_tokens", paid="asked", first=1,
                                 note="one answer probe per boundary from k = 1")

        def stop(self, view, theta):
            if view.k < max(2, int(theta)):
                return np.zeros(len(view), dtype=bool)
            h = view.history("answer")          # probed from k = 1: the last two are known
            return h[:, -1] == h[:, -2]
''')


@pytest.fixture
def toy(tmp_path):
    from otbench.analysis.methods import METHODS

    path = tmp_path / "toy_method.py"
    path.write_text(TOY)
    METHODS.register("toy-dee", f"{path}:ToyDee")           # the one registry line
    yield "toy-dee"
    METHODS.unregister("toy-dee")


def _probe_set(tmp_path, model) -> Path:
    from click.testing import CliRunner

    from otbench.cli import main

    cfg = tmp_path / "job.toml"
    cfg.write_text(f"""
[model]
path = "{model}"
family = "qwen3-thinking"
id = "tiny"
[engine]
kind = "transformers"
dtype = "float32"
max_model_len = 256
[data]
source = "sums"
n = 10
[probe]
R = 1
P = 1
b = 8
thinking_limit = 32
answer_limit = 4
[grader]
kind = "minimal"
""")
    out = tmp_path / "set"
    r = CliRunner().invoke(main, ["probe", "run", "--config", str(cfg), "--out", str(out),
                                  "--no-progress"])
    assert r.exit_code == 0, r.output
    return out


def test_a_toy_method_is_listed_ranked_and_certified_online(toy, tmp_path, tiny_model, cli):
    from otbench.analysis import load
    from otbench.analysis.bench import offline_point
    from otbench.analysis.methods import resolve

    m = resolve(toy)
    assert (m.strategy, m.online, m.signals) == ("dee", "side", ("answer",))

    # listed with its one-line summary by the CLI
    r = cli("bench", "list")
    assert r.exit_code == 0, r.output
    line = next(ln for ln in r.output.splitlines() if ln.startswith("toy-dee"))
    assert "stop at the first boundary k >= max(2, theta)" in line and "DEE" in line and "side requests" in line

    # ranked by bench compare (default: every registered method the set can run)
    d = _probe_set(tmp_path, tiny_model)
    assert cli("split", d).exit_code == 0
    r = cli("bench", "compare", d)
    assert r.exit_code == 0, r.output
    assert "toy-dee" in r.output
    board = json.loads((d / "results" / "leaderboard.json").read_text())
    assert any(row["method"] == "toy-dee" for row in board["rows"])
    res = json.loads((d / "results" / "bench-toy-dee.json").read_text())
    assert res["strategy"] == "dee" and res["net"]["signal_cost"]["prefill"] == 3

    # run by the side-request controller in online certify, on the stored thinking
    theta = 2.0
    r = cli("online", "certify", d, "--method", toy, "--theta", theta, "--thinking", "stored")
    assert r.exit_code == 0, r.output
    cert = json.loads((d / "results" / "online_certify.json").read_text())
    assert cert["method"] == "toy-dee" and cert["controller"] == "side requests"
    ms = load(d)
    off = offline_point(ms, toy, theta)
    assert [t["offline_k"] for t in cert["per_trajectory"]] == [int(k) for k in off["k"]]
    assert [t["online_k"] for t in cert["per_trajectory"]] == [int(k) for k in off["k"]], cert
    assert any(0 < k < n for k, n in zip(off["k"], ms.n[off["rows"]])), "no early stop: a vacuous check"
