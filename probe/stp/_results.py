"""What the probe loop measures per work unit: `UnitResult`, the think phase's `ThinkResult`
and its cut (`split_trajectory`), and the run's counters (`RunStats`) (docs/rules.md).

Plain data and pure functions: the loop that produces them is `_loop`.
"""

import dataclasses
from array import array
from collections.abc import Sequence
from typing import Any

import numpy as np
from otbench.probe.tokens import ProbeFormat

from ._ids import compact

SIGNALS = ("logp_end", "logp_other", "margin", "margin_own", "answer", "answer_conf", "hesitation",
           "answer_tokens", "prompt_tokens")
"""Signal columns written by the probe: `margin = logp_other - logp_end` is the
ThinkBrake quantity (stop at the first boundary where it is <= θ; docs/rules.md);
`margin_own` the same read in the model's own context (`SIGNAL_DEFINITIONS`);
the field signals `answer`, `answer_conf`, `hesitation`, `answer_tokens`
(`otbench.analysis.measurement.SIGNAL_DEFINITIONS`, `otbench.probe.grading.probe_signals`);
`prompt_tokens`, the trajectory's prompt length at every position (`PROMPT_DEFINITION`), which the
net cost's partial KV block reads (`otbench.analysis.methods.partial_block`)."""

OWN_CONTEXT = {
    "margin_own": "logp_other - logp_end read after prompt + thinking[:L] as the model wrote it "
                  "(the boundary token itself, no separator): the context the online logits "
                  "processor decides in at that boundary (otbench.probe.online)",
}


PEER_FIELDS = ("dynasor_answer", "dynasor_window", "dynasor_uncertain", "dynasor_tokens",
               "deer_conf", "deer_tokens", "deepconf_min_conf", "deepconf_warmup_conf", "thinkbrake_check",
               "thinkbrake_margin")
"""`UnitResult` fields of the field methods' own probes (`probe.field_probes`), one per signal
column of the same name (`otbench.analysis.measurement.PEER_SIGNAL_DEFINITIONS`)."""


def signal_definitions(field_probes: Sequence[str] = ()) -> dict[str, str]:
    """Every probe signal column -> its definition (the manifest's provenance "signals"); with the
    signals of the field methods' own probes a job asks for (`probe.field_probes`)."""
    from otbench.analysis.measurement import (
        DEEPCONF_SIGNALS,
        DEEPCONF_WARMUP_SIGNALS,
        DEER_SIGNALS,
        DYNASOR_SIGNALS,
        PEER_SIGNAL_DEFINITIONS,
        THINKBRAKE_SIGNALS,
        PROMPT_DEFINITION,
        SIGNAL_DEFINITIONS,
    )

    own = {"dynasor": DYNASOR_SIGNALS, "deer": DEER_SIGNALS,
           "deepconf": DEEPCONF_SIGNALS + DEEPCONF_WARMUP_SIGNALS, "thinkbrake": THINKBRAKE_SIGNALS}
    peers = {k: PEER_SIGNAL_DEFINITIONS[k] for p in field_probes for k in own[p]}
    return {"logp_end": "log p(thinking-end token | retained prefix)",
            "logp_other": "log p(most likely other token | retained prefix)",
            "margin": "logp_other - logp_end (ThinkBrake: stop when margin <= theta)",
            **OWN_CONTEXT, **SIGNAL_DEFINITIONS, "prompt_tokens": PROMPT_DEFINITION, **peers}


@dataclasses.dataclass(frozen=True)
class UnitResult:
    """Everything measured for one (question, trajectory) work unit.

    Attributes:
      group, dataset, question: the question's group, source dataset and id.
      trajectory: trajectory index `r` (0..R-1).
      prompt, thinking: token ids (thinking without the stop token).
      finished: thinking ended by itself on the family's thinking-stop token
        (False: cut at the thinking limit, or ended on another token such as
        end-of-turn inside the thinking; `stop_id` tells which).
      stop_id: the token that ended the thinking (None at the limit).
      answer: ids of the original answer: for a finished native-thinking
        trajectory, the model's own ids after the thinking-end marker (same
        request as the thinking); for a forced answer, the ids after the
        family's answer prefix; empty for a finished generic-chat trajectory
        (the reply itself is the answer).
      y, y_status: the original answer's grade.
      L: int[n+1] retained thinking tokens per position.
      C: int[n+1] correct probes per position.
      probe_tokens: [n+1][P] answer ids of each probe, each an `array("i")`
        (4 bytes per id; `_ids`): ~0.75 M of them per paper-shaped unit.
      probe_status: [n+1][P] grade status of each probe.
      logp_end, logp_other, other_id: [n+1] signal at each position.
      logp_end_own, logp_other_own: [n+1] the same log-probabilities in the
        model's own context (`OWN_CONTEXT`); empty in a record written before.
      answer_id, answer_conf, hesitation, answer_tokens: [n+1] field signals
        of each position's first probe (`SIGNAL_DEFINITIONS`); empty in a
        record written before.
      dynasor_answer, dynasor_window, dynasor_uncertain, dynasor_tokens,
      deer_conf, deer_tokens, deepconf_min_conf, deepconf_warmup_conf, thinkbrake_check,
      thinkbrake_margin: [n+1] signals of the field methods' own probes
        (`PEER_FIELDS`, `PEER_SIGNAL_DEFINITIONS`), when the job asked for them
        (`probe.field_probes`); empty otherwise, and then left out of the record.
      seeds: {"think": int, "answer": int | None, "probe": [n+1 ints]};
        "answer" is None when the answer came from the think request (or the
        reply is graded), the forced answer's own seed otherwise.
      prompt_tokens: ``len(prompt)``, kept when the ids are dropped (`_runner._summary`); filled
        from `prompt` when not given (a journal record holds the ids, not this count), None for
        a result without its prompt ids.
    """

    group: str
    dataset: str
    question: str
    trajectory: int
    prompt: tuple[int, ...]
    thinking: tuple[int, ...]
    finished: bool
    stop_id: int | None
    answer: tuple[int, ...]
    y: int
    y_status: str
    L: tuple[int, ...]
    C: tuple[int, ...]
    probe_tokens: tuple[tuple[Sequence[int], ...], ...]
    probe_status: tuple[tuple[str, ...], ...]
    logp_end: tuple[float, ...]
    logp_other: tuple[float, ...]
    other_id: tuple[int, ...]
    seeds: dict
    logp_end_own: tuple[float, ...] = ()
    logp_other_own: tuple[float, ...] = ()
    answer_id: tuple[int, ...] = ()
    answer_conf: tuple[float, ...] = ()
    hesitation: tuple[int, ...] = ()
    answer_tokens: tuple[int, ...] = ()
    dynasor_answer: tuple[int, ...] = ()
    dynasor_window: tuple[int, ...] = ()
    dynasor_uncertain: tuple[int, ...] = ()
    dynasor_tokens: tuple[int, ...] = ()
    deer_conf: tuple[float, ...] = ()
    deer_tokens: tuple[int, ...] = ()
    deepconf_min_conf: tuple[float, ...] = ()
    deepconf_warmup_conf: tuple[float, ...] = ()
    thinkbrake_check: tuple[int, ...] = ()
    thinkbrake_margin: tuple[float, ...] = ()
    prompt_tokens: int | None = None

    def __post_init__(self):
        if self.prompt_tokens is None and len(self.prompt):
            object.__setattr__(self, "prompt_tokens", len(self.prompt))
        # Probe answers are held as int32 arrays (`_ids`) whatever the caller passed,
        # so results compare by value; NumPy views (the final writer's reads) stay views.
        pt = self.probe_tokens
        if not all(isinstance(t, (array, np.ndarray)) for pos in pt for t in pos):
            object.__setattr__(self, "probe_tokens", tuple(tuple(compact(t) for t in pos) for pos in pt))

    @property
    def n(self) -> int:
        return len(self.L) - 1

    def to_record(self) -> dict[str, Any]:
        """The fields as a dict (the journal's record form); `from_record` inverts it exactly.

        Field by field, not `dataclasses.asdict`: that deep-copies every token
        id (~0.75 M per paper-shaped unit), which dominated the driver's time.
        """
        rec = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        for k in PEER_FIELDS:           # a job without field probes writes the records it always did
            if not rec[k]:
                del rec[k]
        del rec["prompt_tokens"]        # the record holds the ids it counts: its form is unchanged
        rec["seeds"] = dict(self.seeds)
        return rec

    @classmethod
    def from_record(cls, rec: dict[str, Any]) -> "UnitResult":
        kw = {f.name: rec[f.name] for f in dataclasses.fields(cls) if f.name in rec or f.default is dataclasses.MISSING}
        for k in _FLAT_FIELDS:
            if k in kw:
                kw[k] = tuple(kw[k])
        kw["probe_tokens"] = tuple(tuple(pos) for pos in kw["probe_tokens"])
        kw["probe_status"] = tuple(tuple(pos) for pos in kw["probe_status"])
        if isinstance(kw["seeds"], dict) and isinstance(kw["seeds"].get("probe"), list):
            kw["seeds"] = dict(kw["seeds"], probe=list(kw["seeds"]["probe"]))
        return cls(**kw)


_FLAT_FIELDS = ("prompt", "thinking", "answer", "L", "C", "logp_end", "logp_other", "other_id",
                "logp_end_own", "logp_other_own", "answer_id", "answer_conf", "hesitation", "answer_tokens",
                *PEER_FIELDS)


@dataclasses.dataclass
class PhaseStats:
    """Requests, tokens and seconds per phase of a run (for progress, the benchmark and `run.json`'s cost).

    Phases overlap (continuous submission): `seconds` is the time the engine
    was being stepped while this phase had requests in flight. The cost
    fields add up across phases and benchmarks instead:

    Attributes:
      prompt_tokens: prompt ids the engine was asked to read, once per engine
        request (a greedy `n`-sample request runs as `n` requests).
      cached_prompt_tokens: of those, the ids its prefix cache served (0 for an
        engine without one).
      generated: decoded tokens (a stop id counts; a signal read counts 1).
      engine_seconds: this phase's share of the engine's stepping time, each
        step split over what was in flight by sequences (a `GenRequest` of
        `n` samples is `n`, a signal read 1), so the shares of all phases and
        benchmarks sum to the run's busy seconds.
    """

    requests: int = 0
    prompt_tokens: int = 0
    generated: int = 0
    seconds: float = 0.0
    cached_prompt_tokens: int = 0
    engine_seconds: float = 0.0

    def add(self, requests: int, prompt_tokens: int, generated: int, seconds: float) -> None:
        self.requests += requests
        self.prompt_tokens += prompt_tokens
        self.generated += generated
        self.seconds += seconds

    def merge(self, other: "PhaseStats") -> None:
        """Add every counter of `other` (a worker's batch) to this one."""
        for f in dataclasses.fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    @property
    def tokens_per_s(self) -> float:
        return self.generated / self.seconds if self.seconds > 0 else 0.0


PHASES = ("think", "probe", "signal")
"""The cost phases: the trajectory (thinking + its own answer), the answer probes (and
forced answers), the ThinkBrake signal reads."""


@dataclasses.dataclass
class RunStats:
    """A run's counters: per phase, and per benchmark group and phase (`benchmarks`)."""

    think: PhaseStats = dataclasses.field(default_factory=PhaseStats)
    probe: PhaseStats = dataclasses.field(default_factory=PhaseStats)
    signal: PhaseStats = dataclasses.field(default_factory=PhaseStats)
    grading_seconds: float = 0.0
    wall_seconds: float = 0.0
    busy_seconds: float = 0.0
    cache_queries: int = 0
    cache_hits: int = 0
    preemptions: int = 0
    sequence_seconds: float = 0.0
    benchmarks: dict[str, dict[str, PhaseStats]] = dataclasses.field(default_factory=dict)

    def cell(self, benchmark: str, phase: str) -> PhaseStats:
        """The counters of one (benchmark group, phase), created on first use."""
        b = self.benchmarks.get(benchmark)
        if b is None:
            b = self.benchmarks[benchmark] = {p: PhaseStats() for p in PHASES}
        return b[phase]

    def merge(self, part: "RunStats") -> None:
        """Add a worker batch's counters to these (phase seconds add up as engine-seconds)."""
        for name in PHASES:
            getattr(self, name).merge(getattr(part, name))
        for bench, phases in part.benchmarks.items():
            for name, p in phases.items():
                self.cell(bench, name).merge(p)
        for name in ("grading_seconds", "wall_seconds", "busy_seconds", "cache_queries", "cache_hits",
                     "preemptions", "sequence_seconds"):
            setattr(self, name, getattr(self, name) + getattr(part, name))

    def as_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        for k in PHASES:
            d[k]["tokens_per_s"] = getattr(self, k).tokens_per_s
        d["cache_hit_rate"] = self.cache_hits / self.cache_queries if self.cache_queries else None
        d["busy_fraction"] = self.busy_seconds / self.wall_seconds if self.wall_seconds > 0 else None
        # the engine's unfinished sequences, at most its scheduler's max_num_seqs, averaged over the time
        # the engine was stepped: the batch the driver ran, which `otbench plan` predicts
        # (`_kv.steady_batch`)
        d["mean_batch"] = self.sequence_seconds / self.busy_seconds if self.busy_seconds > 0 else None
        del d["benchmarks"]                 # per group: in `run.json`'s cost block (`_cost`)
        return d


@dataclasses.dataclass(frozen=True)
class ThinkResult:
    """The think phase of one work unit: everything the probe phase needs from the trajectory.

    Produced by `split_trajectory` from the unit's own request, or supplied
    for an imported trajectory (`stream_units(given=...)`); then no think
    request is sent and `seed` is whatever the source recorded.

    Attributes:
      seed: the trajectory's seed (`derive_seed(..., "think")` when sampled here).
      thinking: thinking ids, without the thinking-end marker.
      finished: the thinking ended with the family's thinking-end marker
        (the full marker, in token space) within the thinking limit.
      stop_id: the id that ended the thinking: the marker's first id when
        finished, another stop (end of turn, EOS) when it ended without the
        marker, None at the thinking limit.
      answer: the trajectory's own answer ids after the marker (answer limit
        applied), for a finished native-thinking trajectory; None when the
        answer must be forced (a cut or unfinished trajectory) or when the
        reply itself is graded (the generic family).
      verdict: an imported trajectory's (y, y_status) kept from its source
        (`_verdicts`); None: `y` is the grade of the answer, as sampled.
      answer_stop: the stop id that ended the own `answer` within the answer
        limit (the request's last sampled token); None when the answer was cut
        at the limit, when there is none, or when it is not known (imported).
        DeepConf's whole-output confidence reads it; results compare without it.
    """

    seed: int
    thinking: tuple[int, ...]
    finished: bool
    stop_id: int | None
    answer: tuple[int, ...] | None
    verdict: tuple[int, str] | None = None
    answer_stop: int | None = dataclasses.field(default=None, compare=False)   # an import has none


def _find(ids: Sequence[int], marker: Sequence[int], limit: int) -> int:
    """Index of the first occurrence of `marker` starting before `limit` in `ids`, or -1."""
    m = len(marker)
    first = marker[0]
    i = -1
    while True:
        try:
            i = ids.index(first, i + 1, min(limit, len(ids)))
        except ValueError:
            return -1
        if tuple(ids[i:i + m]) == tuple(marker):
            return i


def split_trajectory(ids: Sequence[int], stop_id: int | None, fmt: ProbeFormat, *, seed: int,
                     thinking_limit: int, answer_limit: int) -> ThinkResult:
    """Cut one thinking + answer generation at the thinking-end marker, in token space.

    Native thinking families: the thinking is everything before the first
    complete marker (`fmt.end_ids`, e.g. `</think>`, or harmony's
    `<|end|><|start|>assistant<|channel|>final<|message|>`: earlier analysis
    messages, closed by `<|end|>` and reopened as analysis, stay in the
    thinking); it must start within `thinking_limit` tokens, exactly as if
    the thinking had been sampled alone with that limit. The answer is what
    follows the marker, cut at `answer_limit` (tokens after a limit never
    change the tokens before it). No marker in time: the thinking is cut at
    the limit (`stop_id` None) or ends where the generation stopped.

    The generic family has no marker: the reply is the trajectory; it
    finished when it ended on one of its stop ids.
    """
    ids = tuple(map(int, ids))           # a thinking of ~12,000 ids: map, not a generator, per id
    fam = fmt.family
    if not fam.native_thinking:
        if len(ids) >= thinking_limit:
            return ThinkResult(seed, ids[:thinking_limit], False, None, None)
        return ThinkResult(seed, ids, stop_id is not None and stop_id in fmt.think_stop_ids, stop_id, None)
    end = tuple(fmt.end_ids)
    at = _find(ids, end, thinking_limit)
    if at >= 0:
        own = ids[at + len(end):]
        last = stop_id if stop_id is not None and stop_id >= 0 and len(own) < answer_limit else None
        return ThinkResult(seed, ids[:at], True, end[0], own[:answer_limit], answer_stop=last)
    if len(ids) >= thinking_limit:
        return ThinkResult(seed, ids[:thinking_limit], False, None, None)
    return ThinkResult(seed, ids, False, stop_id, None)
