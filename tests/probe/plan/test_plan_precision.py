"""`otbench plan --target` (issue 26): target parsing and its pinned refusals, the cheapest-candidate
rule, and the CLI end to end on a small simulated pilot."""

from pathlib import Path

import pytest
from click.testing import CliRunner
from otbench.analysis.measurement import save, simulate
from otbench.cli import main
from otbench.probe.plan import Candidate, PlanError, candidates, parse_targets, recommend

JOB = """
[model]
name = "qwen3-4b-thinking-2507"
[engine]
kind = "vllm"
max_model_len = 65536
[data]
source = "sums"
n = 4
[probe]
R = 4
P = 8
b = 256
thinking_limit = 32768
answer_limit = 4096
"""


def test_targets_parse_as_half_widths():
    assert parse_targets("OR:1pp,AD:0.5pp") == {"or": 0.01, "ad": 0.005}
    assert parse_targets(" p0:2.5pp ") == {"zero_step_acc": 0.025}


@pytest.mark.parametrize("text, at", [("OR:1", "OR:1"), ("OR1pp", "OR1pp"), ("XX:1pp", "XX:1pp"),
                                      ("OR:0pp", "OR:0pp"), ("OR:-1pp", "OR:-1pp"), ("", ""),
                                      ("OR:1pp,", ""), ("AD:1e-3pp", "AD:1e-3pp"),
                                      ("OR:" + "9" * 400 + "pp", "OR:" + "9" * 400 + "pp"),
                                      ("OR:\u00b2pp", "OR:\u00b2pp"), ("OR:101pp", "OR:101pp")])
def test_bad_targets_are_refused_in_one_pinned_line(text, at):
    with pytest.raises(PlanError) as e:
        parse_targets(text)
    assert str(e.value) == (f"--target {text!r}: want METRIC:HALF_WIDTHpp[,...] with METRIC one of OR, AD, P0 "
                            f"and a half-width in percentage points in (0, 100] (at {at!r})")


def test_a_target_given_twice_is_refused():
    with pytest.raises(PlanError, match=r"--target 'OR:1pp,or:2pp': or is given twice"):
        parse_targets("OR:1pp,or:2pp")


def test_the_cheapest_satisfying_candidate_is_recommended():
    c = [Candidate(16, 16, 300.0, {"or": 0.004, "ad": 0.002}),
         Candidate(8, 16, 150.0, {"or": 0.006, "ad": 0.002}),
         Candidate(16, 8, 150.0, {"or": 0.005, "ad": 0.0031}),
         Candidate(4, 32, 150.0, {"or": 0.005, "ad": 0.001}),
         Candidate(2, 4, 10.0, {"or": 0.02, "ad": 0.01})]
    assert recommend(c, {"or": 0.005, "ad": 0.003}) == c[3]            # 16x8 misses AD; 8x16 misses OR
    assert recommend(c, {"or": 0.005}) == c[3]                         # cost and R x P tie: fewer R
    assert recommend(c[:3], {"or": 0.005}) == c[2]                     # cheaper than 16 x 16
    assert recommend(c, {"or": 0.001}) is None
    assert recommend(c + [Candidate(1, 1, 0.0, {"or": float("nan")})], {"or": 0.05}) == c[4]
    assert (4, 8) in candidates(4, 8) and (3, 5) in candidates(3, 5)


def test_cli_recommends_and_refuses(tmp_path: Path):
    save(simulate("small", 1), tmp_path / "pilot")
    job = tmp_path / "job.toml"
    job.write_text(JOB)
    args = ["plan", str(job), "--pilot", str(tmp_path / "pilot"), "--questions", "AIME=90,MATH500=500"]
    res = CliRunner().invoke(main, args + ["--target", "OR:2pp,AD:1pp"])
    assert res.exit_code == 0, res.output
    assert "precision (95 % interval half-widths" in res.output
    assert "  at the job's R=4, P=8: OR +-" in res.output
    assert "  cheapest meeting OR +-2pp, AD +-1pp: R=" in res.output
    res = CliRunner().invoke(main, args + ["--target", "OR:0.001pp"])
    assert res.exit_code == 0 and "no candidate R x P in the grid meets OR +-0.001pp" in res.output
    res = CliRunner().invoke(main, args + ["--target", "OR:1"])
    assert res.exit_code == 2 and res.output.strip().startswith("--target 'OR:1': want METRIC:HALF_WIDTHpp")
    assert "Traceback" not in res.output
    res = CliRunner().invoke(main, ["plan", str(job), "--target", "OR:1pp"])
    assert res.exit_code == 2
    assert res.output.strip() == "--target needs --pilot SET: the interval widths are predicted from a pilot"


def test_more_questions_finds_the_fewest_and_the_cheapest():
    import math

    from otbench.probe.plan import more_questions

    qs = {"A": 10, "B": 30}
    base = {(4, 8): 0.02, (8, 8): 0.015}               # OR half-width at the job's 40 questions

    def widths_at(r, p, counts):                       # widths ~ 1 / sqrt(questions): the twin's law
        return {"or": base[(r, p)] * math.sqrt(40 / sum(counts.values()))}

    opts = [Candidate(4, 8, 10.0, widths_at(4, 8, qs)), Candidate(8, 8, 30.0, widths_at(8, 8, qs))]
    assert recommend(opts, {"or": 0.01}) is None
    more = more_questions(opts, {"or": 0.01}, qs, widths_at)
    # R=4 needs (0.02/0.01)^2 = 4x the questions (40 h), R=8 needs 2.25x (67.5 h): R=4 is cheaper
    assert (more.at_job.R, more.at_job.P) == (4, 8)
    assert more.questions == {"A": 40, "B": 120} and more.hours == pytest.approx(40.0)
    assert more.half_widths["or"] <= 0.01
    assert more_questions(opts, {"or": 1e-9}, qs, widths_at) is None          # beyond 10,000x
    nan = [Candidate(2, 4, 1.0, {"or": float("nan")})]
    assert more_questions(nan, {"or": 0.01}, qs, widths_at) is None


def test_cli_prints_the_questions_a_target_needs(tmp_path: Path):
    save(simulate("small", 1), tmp_path / "pilot")
    job = tmp_path / "job.toml"
    job.write_text(JOB)
    res = CliRunner().invoke(main, ["plan", str(job), "--pilot", str(tmp_path / "pilot"), "--questions",
                                    "AIME=90,MATH500=500", "--target", "OR:0.5pp"])
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    top = next(ln for ln in lines if ln.startswith("  no candidate R x P in the grid meets OR +-0.5pp"))
    assert "the most precise: R=" in top and "device-hours" in top
    more = next(ln for ln in lines if ln.startswith("  with more questions: R="))
    n = int(more.split(" meets it at ")[1].split(" questions")[0].replace(",", ""))
    assert n > 590 and "AIME=" in more and "MATH500=" in more
    hw = float(more.split("OR +-")[1].split("pp")[0])
    assert hw <= 0.5
