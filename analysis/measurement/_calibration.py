"""The simulator's calibration: benchmark groups, synthetic models and scales (`_simulate`).

Parameters only (logit units unless stated); the generative model that uses
them, and where each number comes from, is described in `_simulate`'s module
docstring. A group's datasets and their question counts at the paper's scale are
the benchmarks' own records (`otbench.descriptors.BenchmarkSpec.calibration`).
"""

import dataclasses

from otbench.descriptors import calibrated


@dataclasses.dataclass(frozen=True)
class Group:
    """Parameters of one benchmark group (logit units unless stated)."""

    name: str
    datasets: tuple[tuple[str, int], ...]  # (dataset, questions at paper scale): its benchmarks' records
    topics: tuple[tuple[str, float], ...]  # (topic, difficulty offset)
    diff_sd: float      # within-topic difficulty spread
    tokens: float       # typical thinking tokens (before model and difficulty terms)
    len_sd: float       # log-length spread between trajectories
    len_diff: float     # log-length slope on difficulty
    zero: float         # zero-step accuracy offset
    solve: float        # chance of finding the answer during thinking
    hi: float           # probe logit while holding the answer
    lo: float           # probe logit after losing it (a committed wrong answer)
    jitter: float       # per-position probe logit noise
    corrupt: float      # overthinking: corruption hazard at the end of thinking
    lateness: float     # discovery timing multiplier (times the model's)
    few_blocks: float   # probability of fewer boundaries than the step target


@dataclasses.dataclass(frozen=True)
class Model:
    """Parameters of one synthetic model."""

    name: str
    skill: float
    zero: float
    length: float       # log-length offset
    lateness: float     # discovery timing: cumulative hazard grows like u**lateness
    overthink: float    # corruption-hazard multiplier


GROUPS = (
    Group("AIME", calibrated("AIME"),
           (("algebra", 0.0), ("combinatorics", 0.4), ("geometry", 0.3), ("number theory", -0.2)),
           diff_sd=1.1, tokens=10_000, len_sd=0.45, len_diff=0.25, zero=-3.0, solve=0.6,
           hi=3.2, lo=-4.5, jitter=0.3, corrupt=0.035, lateness=1.0, few_blocks=0.005),
    Group("MATH500", calibrated("MATH500"),
           (("prealgebra", -0.8), ("algebra", -0.5), ("number theory", 0.0), ("counting", 0.2),
            ("geometry", 0.3), ("intermediate algebra", 0.6), ("precalculus", 0.5)),
           diff_sd=1.2, tokens=2_000, len_sd=0.5, len_diff=0.45, zero=2.3, solve=2.6,
           hi=5.0, lo=-4.0, jitter=0.3, corrupt=0.002, lateness=0.8, few_blocks=0.005),
    Group("GPQA-Diamond", calibrated("GPQA-Diamond"),
           (("physics", -0.2), ("chemistry", 0.3), ("biology", 0.0)),
           diff_sd=1.0, tokens=6_100, len_sd=0.5, len_diff=0.25, zero=0.2, solve=0.3,
           hi=2.8, lo=-1.3, jitter=0.5, corrupt=0.12, lateness=1.3, few_blocks=0.005),
    Group("LiveCodeBench", calibrated("LiveCodeBench"),
           (("easy", -1.2), ("medium", 0.0), ("hard", 1.2)),
           diff_sd=0.8, tokens=7_450, len_sd=0.5, len_diff=0.3, zero=-2.5, solve=0.7,
           hi=3.0, lo=-4.0, jitter=0.3, corrupt=0.04, lateness=1.0, few_blocks=0.03),
)

MODELS = (
    Model("sim/gpt-oss-20b-like", skill=0.4, zero=-0.8, length=-0.3, lateness=4.0,
           overthink=0.6),
    Model("sim/qwen3-4b-thinking-like", skill=0.2, zero=0.0, length=0.35, lateness=0.8,
           overthink=0.9),
    Model("sim/qwen3-30b-a3b-thinking-like", skill=0.6, zero=0.3, length=0.25, lateness=0.9,
           overthink=0.8),
    Model("sim/r1-distill-qwen-7b-like", skill=-0.7, zero=-0.4, length=0.1, lateness=1.0,
           overthink=1.8),
    Model("sim/r1-distill-qwen-14b-like", skill=-0.1, zero=0.0, length=-0.05, lateness=1.0,
           overthink=1.3),
    Model("sim/r1-distill-qwen-32b-like", skill=0.1, zero=0.1, length=-0.1, lateness=1.0,
           overthink=1.2),
)


@dataclasses.dataclass(frozen=True)
class Scale:
    """What one scale draws (sizes only; the generative model is the same)."""

    models: tuple[int, ...]                # indices into MODELS
    groups: tuple[int, ...]                # indices into GROUPS
    questions: tuple[int, ...] | None      # questions per group (spread over its datasets);
                                           # None = the paper's counts
    trajectories: tuple[int, int]          # R drawn uniformly from [lo, hi] per (model, question)
    probes: int
    force_edges: bool                      # force one n = 0 and one capped trajectory


SCALE_SIZES = {
    "tiny": Scale(models=(0, 3), groups=(0, 2), questions=(4, 4), trajectories=(3, 4),
                   probes=4, force_edges=True),
    "small": Scale(models=(0, 1, 3), groups=(0, 1, 2, 3), questions=(21, 20, 20, 20),
                    trajectories=(8, 8), probes=8, force_edges=True),
    "paper": Scale(models=tuple(range(6)), groups=(0, 1, 2, 3), questions=None,
                    trajectories=(16, 16), probes=16, force_edges=False),
}
