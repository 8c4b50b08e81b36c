"""The lengths that decide a probe job's tokens, per benchmark group (`otbench plan`).

Two places they come from: stated priors (`PRIORS`, and per benchmark the thinking length
`GROUP_THINKING`), each with its source; or a pilot measurement set (`pilot_lengths`), per group,
with +-2 standard errors of each mean over the pilot's questions as its range (`_shift`).
"""

import dataclasses
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

PRIORS = {
    "thinking_tokens": (6238.0, "mean thinking tokens per trajectory, pooled over the paper's 92,448 "
                                "trajectories (576,688,123 tokens; docs/rules.md, paper App. D.1)"),
    "thinking_tokens_high": (8281.0, "the paper's equal-weight (question -> group -> model) mean of "
                                     "thinking tokens (paper §3.2, Table 3): the high end"),
    "thinking_tokens_low": (0.75, "low end: 0.75 x the pooled mean (an assumption: the paper's per-model "
                                  "means, Table 3, are not in its text)"),
    "thinking_cv": (1.0, "coefficient of variation of thinking lengths across trajectories (an assumption, "
                         "range 0.8-1.2; it weights long trajectories' positions: E[L^2] = E[L]^2 (1 + cv^2))"),
    "answer_tokens": (1864.0, "mean answer-probe tokens, derived from the paper: (70.5 B generated - 0.577 B "
                              "thinking tokens) / (16 probes x 2.345 M positions), positions = 92,448 + "
                              "576.7 M / 256 (paper §1, App. D.1); range x0.75-1.25 (assumption); cut at "
                              "the job's answer limit"),
    "prompt_tokens": (200.0, "prompt tokens per question (an assumption; small next to the thinking)"),
    "marker_tokens": (8.0, "thinking-end marker + answer prefix tokens appended at each position (an "
                           "assumption; Qwen3's </think> prefix is ~4, harmony's ~8)"),
    "forced_fraction": (0.05, "share of trajectories cut at the thinking limit, whose answer is a forced "
                              "request of its own (an assumption)"),
}
"""The priors used without a pilot: value and where it comes from. The paper does not give
per-family or per-group means in its text; the thinking length of a known benchmark group comes
from `GROUP_THINKING` instead, every other group gets the pooled mean (and says so)."""

_GROUP_SOURCE = ("an estimate for long-thinking models (the Qwen3-Thinking-2507 class), not a measurement: "
                 "no GPU run of otbench has measured it; the paper's text gives "
                 "only the pooled (6,238) and equal-weight (8,281) means, not its per-benchmark Table 3. "
                 "Weighted by the paper's 963 questions the four defaults give ~8.1k tokens per trajectory, "
                 "above the pooled 6,238 of its six models (GPT-OSS-20B and the R1 distills think "
                 "shorter): the long end; a pilot (--pilot) measures your model's")
GROUP_THINKING = {
    "AIME": (16000.0, "mean thinking tokens per trajectory on AIME (2024-2026): " + _GROUP_SOURCE),
    "LiveCodeBench": (13000.0, "mean thinking tokens per trajectory on LiveCodeBench: " + _GROUP_SOURCE),
    "GPQA-Diamond": (8000.0, "mean thinking tokens per trajectory on GPQA-Diamond: " + _GROUP_SOURCE),
    "MATH500": (5000.0, "mean thinking tokens per trajectory on MATH-500: " + _GROUP_SOURCE),
}
"""Per-benchmark thinking priors (mean tokens per trajectory, source), for a group without a pilot.
Their low and high ends keep the pooled prior's ratios (x0.75 and x8,281/6,238)."""
_GROUP_KEYS = {"aime": "AIME", "livecodebench": "LiveCodeBench", "lcb": "LiveCodeBench",
               "gpqadiamond": "GPQA-Diamond", "gpqa": "GPQA-Diamond", "math500": "MATH500", "math": "MATH500"}


def group_prior(group: str | None) -> tuple[str, float, str]:
    """(name, mean thinking tokens, source) of the thinking prior a group gets without a pilot:
    its benchmark's default (`GROUP_THINKING`, matched ignoring case and punctuation), else the
    pooled paper mean, named as such."""
    key = "".join(c for c in str(group or "").lower() if c.isalnum())
    name = _GROUP_KEYS.get(key) or ("AIME" if key.startswith("aime") else None)
    if name is not None:
        return name, *GROUP_THINKING[name]
    v, src = PRIORS["thinking_tokens"]
    return "pooled", v, f"no per-benchmark default for group {group!r}: the pooled paper mean ({src})"


@dataclasses.dataclass(frozen=True)
class Lengths:
    """Per-trajectory means of one group that decide its tokens.

    Attributes:
      thinking: E[L], thinking tokens (at the job's thinking limit).
      thinking_sq: E[L^2] (weights the positions of long trajectories).
      positions: E[n + 1] at the job's b.
      prefix: E[sum over positions k of L(k)], the retained tokens of all positions.
      answer: mean tokens of one answer probe (at the job's answer limit).
      own: mean tokens of the trajectory's own answer after the marker.
      prompt: mean prompt tokens.
      forced: share of trajectories with a forced answer request.
      source: where each field came from ("pilot", "pilot (recomputed at b=...)", "prior").
      rel_se: relative standard error per field (pilot), for the range.
    """

    thinking: float
    thinking_sq: float
    positions: float
    prefix: float
    answer: float
    own: float
    prompt: float
    forced: float
    source: Mapping[str, str]
    rel_se: Mapping[str, float] = dataclasses.field(default_factory=dict)


def _prior_lengths(b: int, thinking_limit: int, answer_limit: int, which: str = "mid",
                   group: str | None = None) -> Lengths:
    """The priors at the job's limits; `which`: "low", "mid" or "high"; `group`: its thinking prior
    (`group_prior`; None: the pooled one)."""
    pooled = PRIORS["thinking_tokens"][0]
    mean = group_prior(group)[1] if group is not None else pooled
    L = {"low": mean * PRIORS["thinking_tokens_low"][0], "mid": mean,
         "high": PRIORS["thinking_tokens_high"][0] * mean / pooled}[which]
    cv = PRIORS["thinking_cv"][0] + {"low": -0.2, "mid": 0.0, "high": 0.2}[which]
    L = min(L, float(thinking_limit))
    L2 = min(L * L * (1 + cv * cv), float(thinking_limit) ** 2)
    A = min(PRIORS["answer_tokens"][0] * {"low": 0.75, "mid": 1.0, "high": 1.25}[which], float(answer_limit))
    # n ~ L/b steps (the target rule without its rounding), positions n + 1, L(k) ~ k L / n:
    # sum_k L(k) = L (n + 1) / 2 ~ L^2 / (2 b) + L / 2.
    positions = max(L / b, 1.0) + 1.0
    prefix = L2 / (2.0 * b) + L / 2.0
    src = {k: "prior" for k in ("thinking", "positions", "prefix", "answer", "own", "prompt", "forced")}
    return Lengths(L, L2, positions, prefix, A, A, PRIORS["prompt_tokens"][0], PRIORS["forced_fraction"][0],
                   src)


# -- the pilot ---------------------------------------------------------------------------------------

def _pilot_b(ms) -> int | None:
    prov = ms.provenance or {}
    b = (prov.get("probe") or {}).get("b") if isinstance(prov.get("probe"), Mapping) else None
    if b is None and isinstance(prov.get("parameters"), Mapping):
        b = prov["parameters"].get("step_tokens")
    return int(b) if isinstance(b, (int, float)) and not isinstance(b, bool) and b > 0 else None


def _rel_se(per_traj: np.ndarray, question: np.ndarray) -> float:
    """Relative standard error of a mean of per-trajectory values, clustered by question."""
    qs, inv = np.unique(question, return_inverse=True)
    if per_traj.size == 0:
        return 0.0
    means = np.bincount(inv, weights=per_traj) / np.bincount(inv)
    mu = float(per_traj.mean())
    if qs.size < 2 or mu == 0:
        return 0.5 if qs.size < 2 else 0.0       # one question: no spread to measure; say +-100 % at 2 SE
    return float(means.std(ddof=1) / math.sqrt(qs.size) / abs(mu))


def _token_lengths(folder: Path | None, model: str | None, answer_limit: int):
    """Per group: (prompt lengths, own-answer lengths, probe-answer lengths, their questions) from the
    set's token tables, or None when the set has none (a simulated or imported set)."""
    if folder is None:
        return None
    import pyarrow.compute as pc
    from otbench.analysis.measurement import load_table, read_manifest

    tables = read_manifest(folder).get("tables", {})
    if "tokens" not in tables or "probes" not in tables:
        return None
    out: dict[str, dict[str, Any]] = {}
    tok = load_table(folder, "tokens")
    probes = load_table(folder, "probes")
    for name, t, cols in (("tokens", tok, ("prompt", "answer")), ("probes", probes, ("tokens",))):
        groups = np.asarray(t.column("group").to_pylist(), dtype=object)
        keep = np.ones(len(groups), bool) if model is None else \
            np.asarray(t.column("model").to_pylist(), dtype=object) == model
        qid = np.asarray(t.column("question").to_pylist(), dtype=object)
        # own answers: of the trajectories that finished (a cut one's answer is a forced request)
        fin = np.asarray(t.column("finished").to_pylist(), bool) if name == "tokens" else keep
        for c in cols:
            lens = np.asarray(pc.list_value_length(t.column(c)).to_numpy(zero_copy_only=False), float)
            if c != "prompt":
                lens = np.minimum(lens, answer_limit)
            for g in np.unique(groups[keep]):
                m = keep & (groups == g) & (fin if c == "answer" else True)
                out.setdefault(str(g), {})[c] = (lens[m], qid[m])
    return out


def pilot_lengths(ms, *, b: int, thinking_limit: int, answer_limit: int, model: str | None = None,
                  folder: Path | None = None) -> tuple[dict[str, Lengths], list[str]]:
    """Per group `Lengths` measured on the pilot set `ms` (read from `folder` when given), and notes."""
    notes = []
    rows = np.arange(ms.num_trajectories)
    use_model = model if model in ms.models else None
    if use_model is not None:
        mi = ms.models.index(use_model)
        rows = rows[ms.cell_model[ms.cell] == mi]
    elif len(ms.models) > 1 or (model is not None and ms.models and ms.models[0] != model):
        notes.append(f"pilot: model {model!r} not in the set; all its trajectories ({', '.join(ms.models)}) "
                     "are used")
    pb = _pilot_b(ms)
    toks = _token_lengths(folder, use_model, answer_limit)
    if toks is None:
        notes.append("pilot: no token tables (a simulated or imported set): prompt and answer lengths "
                     "are priors")
    out = {}
    for gi, g in enumerate(ms.groups):
        r = rows[ms.cell_group[ms.cell[rows]] == gi]
        if r.size == 0:
            continue
        n = ms.n[r].astype(np.int64)
        Lfull = ms.L[r, n].astype(np.float64)
        L = np.minimum(Lfull, thinking_limit)
        q = ms.question[r]
        if pb == b and not np.any(Lfull > thinking_limit):
            pos = (n + 1).astype(np.float64)
            k = np.arange(ms.L.shape[1])[None, :]
            prefix = np.where(k <= n[:, None], ms.L[r], 0).sum(axis=1).astype(np.float64)
            step_src = "pilot"
        else:
            steps = np.maximum(1, (2 * L.astype(np.int64) + b) // (2 * b)).astype(np.float64)
            pos = steps + 1
            prefix = L * (steps + 1) / 2
            step_src = f"pilot lengths, steps recomputed at b={b} (pilot b={pb})"
        forced = (~ms.finished[r].astype(bool)).astype(np.float64)
        prior = _prior_lengths(b, thinking_limit, answer_limit)
        src = {"thinking": "pilot", "positions": step_src, "prefix": step_src, "forced": "pilot"}
        se = {"thinking": _rel_se(L, q), "positions": _rel_se(pos, q), "prefix": _rel_se(prefix, q),
              "thinking_sq": _rel_se(L * L, q), "forced": 0.0}
        vals = {"answer": prior.answer, "own": prior.own, "prompt": prior.prompt}
        got = (toks or {}).get(g, {})
        for field, col in (("answer", "tokens"), ("own", "answer"), ("prompt", "prompt")):
            if col in got and got[col][0].size:
                lens, qid = got[col]
                vals[field] = float(lens.mean())
                se[field] = _rel_se(lens, qid)
                src[field] = "pilot"
            else:
                src[field] = "prior"
        out[g] = Lengths(float(L.mean()), float((L * L).mean()), float(pos.mean()), float(prefix.mean()),
                         vals["answer"], vals["own"], vals["prompt"], float(forced.mean()), src, se)
    return out, notes


def _shift(x: Lengths, sign: float) -> Lengths:
    """`x` moved by `sign` x 2 standard errors in every measured field (the pilot's range)."""
    f = {k: max(0.0, 1.0 + sign * 2.0 * x.rel_se.get(k, 0.0)) for k in
         ("thinking", "thinking_sq", "positions", "prefix", "answer", "own", "prompt")}
    return dataclasses.replace(x, thinking=x.thinking * f["thinking"], thinking_sq=x.thinking_sq * f["thinking_sq"],
                               positions=x.positions * f["positions"], prefix=x.prefix * f["prefix"],
                               answer=x.answer * f["answer"], own=x.own * f["own"], prompt=x.prompt * f["prompt"])
