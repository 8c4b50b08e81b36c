"""The probe loop: trajectories, segmentation, answer probes and signals for work units (SPEC §3, §6.3).

A *work unit* is one (question, trajectory) pair. Its result (`UnitResult`)
depends only on the job, the question and the engine's outputs for the
unit's own requests, whose seeds come from what they are
(`_seeds.derive_seed`), never from run order. Results come out in any
order: this is the seam for crash-safe resume (commit each `UnitResult` as
it completes, skip completed units on restart) and for data-parallel
workers (each keeps a `UnitStream` fed with its share).

The engine is never left waiting (`stream_units`): a bounded number of units
is in flight at once, each unit's requests are submitted to the engine's
`Stream` the moment they exist, and grading runs in a lane of its own
(a thread feeding the grader's worker processes) while the engine decodes.
Per unit:

1. one request samples the thinking *and* the trajectory's own answer
   (stops: the family's answer stops), so the answer is drawn from the same
   distribution as one continuous generation (the presence penalty sees the
   thinking); `split_trajectory` cuts it in token space at the first
   complete thinking-end marker (for GPT-OSS harmony: the switch to the
   final channel, after any number of analysis messages). A trajectory
   with no marker within `thinking_limit` tokens is cut there and gets the
   forced answer of position `n` as a request of its own (`answer` seed);
   the result is a `ThinkResult`, which an imported trajectory can supply
   instead (`given`);
2. its thinking ids are segmented in token space (`_segment`), giving `L`;
3. at every position `k = 0..n`: `P` answer probes and, next to them (same
   retained prefix, so the prefix cache serves both), the ThinkBrake signal
   (log-probability of the thinking-end token and of the most likely other
   token);
4. every answer is graded through the grading seam (`GradeBatch`).

Bit-identical floats across different batchings are not promised by the
engines (batched kernels may round differently); seeds and token-level
sampling streams are.
"""

import dataclasses
import time
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
from otbench.analysis.measurement import segment_flat
from otbench.probe.config import derive_seed
from otbench.probe.engines import Engine, GenRequest, SignalRequest
from otbench.probe.grading import GradeBatch, GradeItem
from otbench.probe.tokens import ProbeFormat

from ._ids import compact

SIGNALS = ("logp_end", "logp_other", "margin")
"""Signal columns written by the probe: `margin = logp_other - logp_end` is the
ThinkBrake quantity (stop at the first boundary where it is <= θ; SPEC §6.2)."""


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
      seeds: {"think": int, "answer": int | None, "probe": [n+1 ints]};
        "answer" is None when the answer came from the think request (or the
        reply is graded), the forced answer's own seed otherwise.
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

    def __post_init__(self):
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
        rec["seeds"] = dict(self.seeds)
        return rec

    @classmethod
    def from_record(cls, rec: dict[str, Any]) -> "UnitResult":
        kw = {f.name: rec[f.name] for f in dataclasses.fields(cls)}
        for k in _FLAT_FIELDS:
            kw[k] = tuple(kw[k])
        kw["probe_tokens"] = tuple(tuple(pos) for pos in kw["probe_tokens"])
        kw["probe_status"] = tuple(tuple(pos) for pos in kw["probe_status"])
        if isinstance(kw["seeds"], dict) and isinstance(kw["seeds"].get("probe"), list):
            kw["seeds"] = dict(kw["seeds"], probe=list(kw["seeds"]["probe"]))
        return cls(**kw)


_FLAT_FIELDS = ("prompt", "thinking", "answer", "L", "C", "logp_end", "logp_other", "other_id")


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
        for name in ("grading_seconds", "wall_seconds", "busy_seconds", "cache_queries", "cache_hits"):
            setattr(self, name, getattr(self, name) + getattr(part, name))

    def as_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        for k in PHASES:
            d[k]["tokens_per_s"] = getattr(self, k).tokens_per_s
        d["cache_hit_rate"] = self.cache_hits / self.cache_queries if self.cache_queries else None
        d["busy_fraction"] = self.busy_seconds / self.wall_seconds if self.wall_seconds > 0 else None
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
    """

    seed: int
    thinking: tuple[int, ...]
    finished: bool
    stop_id: int | None
    answer: tuple[int, ...] | None


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
    ids = tuple(int(t) for t in ids)
    fam = fmt.family
    if not fam.native_thinking:
        if len(ids) >= thinking_limit:
            return ThinkResult(seed, ids[:thinking_limit], False, None, None)
        return ThinkResult(seed, ids, stop_id is not None and stop_id in fmt.think_stop_ids, stop_id, None)
    end = tuple(fmt.end_ids)
    at = _find(ids, end, thinking_limit)
    if at >= 0:
        return ThinkResult(seed, ids[:at], True, end[0], ids[at + len(end):][:answer_limit])
    if len(ids) >= thinking_limit:
        return ThinkResult(seed, ids[:thinking_limit], False, None, None)
    return ThinkResult(seed, ids, False, stop_id, None)


class _Unit:
    """A unit in flight: its think result, outputs as they arrive, then its grades."""

    __slots__ = ("q", "r", "think", "L", "outs", "sigs", "answer_out", "missing", "probe_seed",
                 "answer_seed", "first", "texts")

    def __init__(self, q: int, r: int):
        self.q, self.r = q, r
        self.think: ThinkResult | None = None
        self.L: tuple[int, ...] = ()
        self.outs: list = []
        self.sigs: list = []
        self.answer_out = None
        self.missing = 0
        self.probe_seed: list[int] = []
        self.answer_seed: int | None = None
        self.first = None                   # future of the original answer's text (grading lane)
        self.texts: list = []               # per position: future of its P answers' texts


def _batch_decoder(tokenizer) -> Callable[[list[list[int]]], list[str]]:
    """`decode(ids, skip_special_tokens=True)` for many answers at once.

    A fast (Rust) tokenizer decodes a batch in parallel, without the GIL: the
    same text as one `decode` per answer (that adds only the optional
    clean-up of tokenization spaces, so it is used when that is on), at a
    fraction of the cost (~1 us per token otherwise, the largest cost of a
    paper-shaped unit).
    """
    fast = getattr(tokenizer, "_tokenizer", None)
    if fast is not None and hasattr(fast, "decode_batch") and \
            not getattr(tokenizer, "clean_up_tokenization_spaces", False):
        return lambda seqs: list(fast.decode_batch(seqs, skip_special_tokens=True))
    return lambda seqs: [tokenizer.decode(s, skip_special_tokens=True) for s in seqs]


class _GradeLane:
    """Decoding and grading off the engine's path: one thread feeding the grader (its own processes).

    Answers are decoded as they arrive (`decode`), so the engine's lists of
    Python ints are dropped at once and only text waits for the rest of the
    unit; a unit's texts are then graded as one `grade_batch` call (`grade`),
    in the order the loop lists them. One thread runs tasks in submission
    order, so a unit's decodes are done before its grading starts. Results
    depend only on the answers.
    """

    def __init__(self, grade_batch: GradeBatch, tokenizer, prefix: Sequence[int]):
        from concurrent.futures import ThreadPoolExecutor

        self._grade, self._tok, self._prefix = grade_batch, tokenizer, list(prefix)
        self._decode = _batch_decoder(tokenizer)
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="otbench-grade")
        self.seconds = 0.0

    def decode(self, answers: Sequence[tuple[Sequence[int], bool]]):
        """Future of the texts of `answers` = [(ids, with the family's answer prefix)]."""
        return self._pool.submit(self._run_decode, answers)

    def grade(self, question, texts: Sequence):
        """Future of [(correct, status)] for the texts of the `decode` futures `texts`, in order."""
        return self._pool.submit(self._run_grade, question, texts)

    def _run_decode(self, answers):
        t = time.perf_counter()
        out = self._decode([(self._prefix + list(ids)) if pre else list(ids) for ids, pre in answers])
        self.seconds += time.perf_counter() - t
        return out

    def _run_grade(self, q, texts):
        t = time.perf_counter()
        res = self._grade([GradeItem(q.task, q.reference, text, q) for f in texts for text in f.result()])
        self.seconds += time.perf_counter() - t
        return res

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


def _gen_tokens(comps) -> int:
    return sum(len(c.token_ids) + (c.stop_id is not None) for c in comps)


class _Driver:
    """State of one `UnitStream`: the units in flight, their requests and their grading."""

    def __init__(self, engine, fmt, job: dict, stats: RunStats, lane: _GradeLane):
        self.fmt, self.job, self.stats, self.lane = fmt, job, stats, lane
        self.stream = engine.stream(job["sampling"])
        self.active: dict[tuple[int, int], _Unit] = {}
        self.grading: dict[tuple[int, int], Any] = {}
        self.phase_in_flight = {"think": 0, "probe": 0, "signal": 0}
        # (benchmark group, phase) -> sequences in flight: the shares of each step's time
        self.seqs: dict[tuple[str, str], int] = {}
        self.greedy = job["sampling"].temperature == 0.0
        # prompt ids of a finished request served by the prefix cache (an engine stream may say)
        self.cached = getattr(self.stream, "pop_cached_tokens", None)

    def _submit(self, tag, req, phase: str) -> None:
        self.stream.submit(tag, req)
        self.phase_in_flight[phase] += 1
        gen = isinstance(req, GenRequest)
        seqs = req.n if gen else 1
        reads = req.n if gen and self.greedy else 1      # greedy n-sample requests run as n
        prompt = reads * (len(req.prompt) if gen else len(req.context))
        cell = (self.job["questions"][tag[0][0]].group, phase)
        self.seqs[cell] = self.seqs.get(cell, 0) + seqs
        for ph in (getattr(self.stats, phase), self.stats.cell(*cell)):
            ph.requests += 1
            ph.prompt_tokens += prompt

    def _count(self, tag, phase: str, generated: int, seqs: int) -> None:
        """A result of `tag` arrived: its decoded tokens and cached prompt ids, in its phase and cell."""
        cell = (self.job["questions"][tag[0][0]].group, phase)
        self.seqs[cell] -= seqs
        if not self.seqs[cell]:
            del self.seqs[cell]
        cached = self.cached(tag) if self.cached is not None else 0
        for ph in (getattr(self.stats, phase), self.stats.cell(*cell)):
            ph.generated += generated
            ph.cached_prompt_tokens += cached

    def admit(self, q: int, r: int, given: ThinkResult | None) -> None:
        j = self.job
        qs, u = j["questions"][q], _Unit(q, r)
        self.active[q, r] = u
        if given is not None:
            self._probe(u, given)
            return
        seed = derive_seed(j["model"], qs.dataset, qs.id, r, "think")
        fmt = self.fmt
        native = fmt.family.native_thinking
        limit = j["thinking_limit"] + (len(fmt.end_ids) + j["answer_limit"] if native else 0)
        stops = fmt.answer_stop_ids if native else fmt.think_stop_ids
        self._submit(((q, r), "t", 0), GenRequest(j["prompts"][q], 1, seed, limit, stops), "think")

    def _probe(self, u: _Unit, th: ThinkResult) -> None:
        """Segment the trajectory and submit its probes, signals and (if needed) forced answer."""
        j, fmt = self.job, self.fmt
        qs, prompt = j["questions"][u.q], j["prompts"][u.q]
        u.think = th
        L_flat, _ = segment_flat(np.asarray(th.thinking, dtype=np.int64),
                                 np.array([0, len(th.thinking)], dtype=np.int64),
                                 fmt.vocab.mask, j["b"], span=fmt.span)
        u.L = tuple(int(x) for x in L_flat)
        m = len(u.L)
        u.outs, u.sigs, u.texts = [None] * m, [None] * m, [None] * m
        # What is graded first: the model's own ids after the marker, the
        # generic family's finished reply, or (below) a forced answer.
        forced = th.answer is None and (fmt.family.native_thinking or not th.finished)
        if th.answer is not None:
            u.first = self.lane.decode([(th.answer, False)])
        elif not forced:
            u.first = self.lane.decode([(th.thinking, False)])
        if forced:
            u.answer_seed = derive_seed(j["model"], qs.dataset, qs.id, u.r, "answer")
            self._submit(((u.q, u.r), "a", 0),
                         GenRequest(fmt.answer_context(prompt, th.thinking, th.finished), 1,
                                    u.answer_seed, j["answer_limit"], fmt.answer_stop_ids), "probe")
            u.missing += 1
        for k, Lk in enumerate(u.L):
            s = derive_seed(j["model"], qs.dataset, qs.id, u.r, "probe", k)
            u.probe_seed.append(s)
            self._submit(((u.q, u.r), "p", k), GenRequest(fmt.probe_prompt(prompt, th.thinking, Lk), j["P"],
                                                          s, j["answer_limit"], fmt.answer_stop_ids), "probe")
            self._submit(((u.q, u.r), "s", k),
                         SignalRequest(fmt.signal_context(prompt, th.thinking, Lk), fmt.signal_id), "signal")
        u.missing += 2 * m

    def deliver(self, tag, res) -> None:
        key, kind, k = tag
        u = self.active[key]
        j = self.job
        if kind == "t":
            self.phase_in_flight["think"] -= 1
            self._count(tag, "think", _gen_tokens(res), len(res))
            c = res[0]
            self._probe(u, split_trajectory(c.token_ids, c.stop_id, self.fmt,
                                            seed=derive_seed(j["model"], j["questions"][u.q].dataset,
                                                             j["questions"][u.q].id, u.r, "think"),
                                            thinking_limit=j["thinking_limit"],
                                            answer_limit=j["answer_limit"]))
            return
        if kind == "s":
            self.phase_in_flight["signal"] -= 1
            self._count(tag, "signal", 1, 1)
            u.sigs[k] = res
        else:
            self.phase_in_flight["probe"] -= 1
            self._count(tag, "probe", _gen_tokens(res), len(res))
            if kind == "a":
                u.answer_out = tuple(res[0].token_ids)
                u.first = self.lane.decode([(u.answer_out, True)])   # the prefix is in the prompt
            else:
                u.texts[k] = self.lane.decode([(c.token_ids, True) for c in res])
                u.outs[k] = tuple(compact(c.token_ids) for c in res)
        u.missing -= 1
        if u.missing == 0:
            # Graded in a fixed order: the original answer (or the reply), then every probe.
            self.grading[key] = self.lane.grade(j["questions"][u.q], [u.first, *u.texts])

    def finish(self, key) -> UnitResult:
        u = self.active.pop(key)
        gs = self.grading.pop(key).result()
        th, qs = u.think, self.job["questions"][u.q]
        P = self.job["P"]
        probe_status = tuple(tuple(s for _, s in gs[1 + k * P:1 + (k + 1) * P]) for k in range(len(u.L)))
        own = th.answer if th.answer is not None else (u.answer_out if u.answer_out is not None else ())
        return UnitResult(
            group=qs.group, dataset=qs.dataset, question=qs.id, trajectory=u.r,
            prompt=tuple(int(t) for t in self.job["prompts"][u.q]), thinking=th.thinking,
            finished=th.finished, stop_id=th.stop_id, answer=tuple(own),
            y=int(gs[0][0]), y_status=gs[0][1], L=u.L,
            C=tuple(sum(int(c) for c, _ in gs[1 + k * P:1 + (k + 1) * P]) for k in range(len(u.L))),
            probe_tokens=tuple(u.outs),
            probe_status=probe_status,
            logp_end=tuple(s.logp_end for s in u.sigs), logp_other=tuple(s.logp_other for s in u.sigs),
            other_id=tuple(s.other_id for s in u.sigs),
            seeds={"think": th.seed, "answer": u.answer_seed, "probe": u.probe_seed},
        )

    def poll(self) -> None:
        busy = {p for p, v in self.phase_in_flight.items() if v}
        t = time.perf_counter()
        done = self.stream.poll()
        dt = time.perf_counter() - t
        for p in busy:
            getattr(self.stats, p).seconds += dt
        if busy:
            self.stats.busy_seconds += dt
        total = sum(self.seqs.values())
        for (bench, p), n in self.seqs.items():
            share = dt * n / total
            getattr(self.stats, p).engine_seconds += share
            self.stats.cell(bench, p).engine_seconds += share
        for tag, res in done:
            self.deliver(tag, res)


class UnitStream:
    """Work units in flight on one engine, kept across calls: `add` units, `step` until they are done.

    The open-ended form of `stream_units`, for a caller that receives units
    over time (a Ray worker fed by the driver): the engine's stream, the
    grading lane and the units in flight live as long as this object, so
    nothing drains between one batch of units and the next. Counters go to
    `stats` (`take_stats` hands them over and starts fresh ones).
    """

    def __init__(self, engine: Engine, fmt: ProbeFormat, *, model: str, questions: Sequence,
                 prompts: Sequence[Sequence[int]], P: int, b: int, thinking_limit: int, answer_limit: int,
                 sampling, grade_batch: GradeBatch, tokenizer, stats: RunStats | None = None,
                 given: Mapping[tuple[int, int], ThinkResult] | None = None):
        job = dict(model=model, questions=questions, prompts=prompts, P=P, b=b, sampling=sampling,
                   thinking_limit=thinking_limit, answer_limit=answer_limit)
        self.stats = stats if stats is not None else RunStats()
        self._engine, self._given = engine, given or {}
        self._lane = _GradeLane(grade_batch, tokenizer, fmt.answer_prefix_ids)
        self._d = _Driver(engine, fmt, job, self.stats, self._lane)
        self._mark()

    def _mark(self) -> None:
        self._t, self._graded, self._cache = time.perf_counter(), self._lane.seconds, self._engine.cache_stats()

    @property
    def in_flight(self) -> int:
        """Units admitted and not yet returned by `step`."""
        return len(self._d.active)

    def add(self, unit: tuple[int, int]) -> None:
        """Admit a `(question index, trajectory)` unit now (its first requests go to the engine)."""
        self._d.admit(unit[0], unit[1], self._given.get(unit))

    def step(self) -> list[UnitResult]:
        """The units finished by now, then one round of engine work (or a wait for grading).

        Returns the finished units (often none); call it while `in_flight`.
        """
        d = self._d
        done = [d.finish(key) for key in [k for k, f in d.grading.items() if f.done()]]
        if d.stream.in_flight():
            d.poll()
        elif d.grading and not done:
            # Only grading left for the units in flight: wait for the first of them.
            from concurrent.futures import FIRST_COMPLETED, wait
            wait(list(d.grading.values()), return_when=FIRST_COMPLETED)
        return done

    def _settle(self) -> RunStats:
        st = self.stats
        st.wall_seconds += time.perf_counter() - self._t
        st.grading_seconds += self._lane.seconds - self._graded
        cache = self._engine.cache_stats()
        if self._cache is not None and cache is not None:
            st.cache_queries += cache["queries"] - self._cache["queries"]
            st.cache_hits += cache["hits"] - self._cache["hits"]
        self._mark()
        return st

    def take_stats(self) -> RunStats:
        """The counters since the last call (wall, grading and cache included); later ones start at zero."""
        st = self._settle()
        self.stats = self._d.stats = RunStats()
        return st

    def close(self) -> None:
        """Stop the grading lane (pending grading is cancelled) and settle the counters."""
        self._lane.close()
        self._settle()


def stream_units(engine: Engine, fmt: ProbeFormat, *, model: str, questions: Sequence,
                 prompts: Sequence[Sequence[int]], units: Iterable[tuple[int, int]], P: int, b: int,
                 thinking_limit: int, answer_limit: int, sampling, grade_batch: GradeBatch, tokenizer,
                 max_in_flight: int = 64, stats: RunStats | None = None,
                 given: Mapping[tuple[int, int], ThinkResult] | None = None) -> Iterator[UnitResult]:
    """Measure work units `(question index, trajectory)`, yielding each `UnitResult` as it completes.

    At most `max_in_flight` units are between admission and their result;
    a new unit is admitted as soon as one leaves, so memory is bounded by
    that number, not by the run. `given` maps units to an imported
    `ThinkResult` (no think request for those). The order of results is the
    order they finish; each result is the same whatever the order.
    """
    if isinstance(max_in_flight, bool) or not isinstance(max_in_flight, int) or max_in_flight < 1:
        raise ValueError(f"`max_in_flight` must be a positive integer, got {max_in_flight!r}.")
    us = UnitStream(engine, fmt, model=model, questions=questions, prompts=prompts, P=P, b=b,
                    thinking_limit=thinking_limit, answer_limit=answer_limit, sampling=sampling,
                    grade_batch=grade_batch, tokenizer=tokenizer, stats=stats, given=given)
    todo = iter(units)
    more = True
    try:
        while True:
            while more and us.in_flight < max_in_flight:
                u = next(todo, None)
                if u is None:
                    more = False
                    break
                us.add(u)
            if not more and not us.in_flight:
                break
            yield from us.step()
    finally:
        us.close()


def probe_units(engine: Engine, fmt: ProbeFormat, *, model: str, questions: Sequence,
                prompts: Sequence[Sequence[int]], units: Sequence[tuple[int, int]],
                P: int, b: int, thinking_limit: int, answer_limit: int, sampling,
                grade_batch: GradeBatch, tokenizer, stats: RunStats | None = None,
                max_in_flight: int | None = None,
                given: Mapping[tuple[int, int], ThinkResult] | None = None) -> list[UnitResult]:
    """`stream_units` over `units`, results in the order of `units` (for tests and scripts)."""
    out = {}
    for u in stream_units(engine, fmt, model=model, questions=questions, prompts=prompts, units=units,
                          P=P, b=b, thinking_limit=thinking_limit, answer_limit=answer_limit,
                          sampling=sampling, grade_batch=grade_batch, tokenizer=tokenizer,
                          max_in_flight=max_in_flight or max(1, len(units)), stats=stats,
                          given=given):
        out[u.group, u.question, u.trajectory] = u
    return [out[questions[q].group, questions[q].id, r] for q, r in units]


def direct_answers(engine: Engine, fmt: ProbeFormat, *, model: str, questions: Sequence,
                   prompts: Sequence[Sequence[int]], answer_limit: int, sampling, grade_batch: GradeBatch,
                   tokenizer) -> list[dict[str, Any]]:
    """The direct-answer accuracy (SPEC §4, optional): one answer per question to the no-thinking prompt.

    The no-thinking prompt is the question's prompt with the thinking closed
    at once (`fmt.probe_prompt` with nothing retained: the family's marker
    and answer prefix right after the generation prompt), sampled once per
    question with the "direct" seed. It is the prompt of position 0, so its
    accuracy sits beside `P(0)` (which has `P` samples of it per trajectory).
    Rows: group, dataset, question, seed, tokens, correct, status.
    """
    seeds = [derive_seed(model, q.dataset, q.id, 0, "direct") for q in questions]
    stream = engine.stream(sampling)
    for i, (p, s) in enumerate(zip(prompts, seeds)):
        stream.submit(i, GenRequest(fmt.probe_prompt(p, (), 0), 1, s, answer_limit, fmt.answer_stop_ids))
    outs: dict[int, Any] = {}
    while stream.in_flight():
        outs.update(stream.poll())
    answers = [outs[i][0].token_ids for i in range(len(questions))]
    texts = _batch_decoder(tokenizer)([list(fmt.answer_prefix_ids) + list(a) for a in answers])
    grades = []
    for q, text in zip(questions, texts):
        grades.extend(grade_batch([GradeItem(q.task, q.reference, text, q)]))
    return [{"group": q.group, "dataset": q.dataset, "question": q.id, "seed": s, "tokens": a,
             "correct": bool(c), "status": st}
            for q, s, a, (c, st) in zip(questions, seeds, answers, grades)]


def encode_prompts(fmt: ProbeFormat, tokenizer, questions: Sequence, instructions: dict[str, str]) -> list[list[int]]:
    """Prompt ids per question: the family's chat text, tokenized once (no special-token insertion)."""
    out = []
    for q in questions:
        text = fmt.family.render_prompt(instructions[q.task], q.body() if hasattr(q, "body") else q.text)
        out.append([int(t) for t in tokenizer.encode(text, add_special_tokens=False)])
    return out


def run_units(engine: Engine, fmt: ProbeFormat, *, model: str, questions: Sequence,
              prompts: Sequence[Sequence[int]], R: int, P: int, b: int, thinking_limit: int,
              answer_limit: int, sampling, grade_batch: GradeBatch, tokenizer,
              max_in_flight: int = 64, stats: RunStats | None = None,
              on_batch: Callable[[list[UnitResult], RunStats], None] | None = None,
              skip: Callable[[tuple[int, int]], bool] | None = None,
              given: Mapping[tuple[int, int], ThinkResult] | None = None) -> int:
    """Stream all `len(questions) * R` work units; returns how many were probed.

    `skip(unit)` leaves out units already done (the resume seam), and
    `on_batch([result], stats)` is called as each unit completes (progress,
    commits); nothing is kept here, so memory does not grow with the run.
    """
    stats = stats if stats is not None else RunStats()
    units = ((q, r) for q in range(len(questions)) for r in range(R)
             if skip is None or not skip((q, r)))
    count = 0
    for res in stream_units(engine, fmt, model=model, questions=questions, prompts=prompts, units=units,
                            P=P, b=b, thinking_limit=thinking_limit, answer_limit=answer_limit,
                            sampling=sampling, grade_batch=grade_batch, tokenizer=tokenizer,
                            max_in_flight=max_in_flight, stats=stats, given=given):
        count += 1
        if on_batch is not None:
            on_batch([res], stats)
    return count
