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
4. every answer is graded through the grading seam (`GradeBatch`);
5. only when the job asks (``probe.field_probes``): at every position, the
   field methods' own probes beside otbench's, on the same retained prefix
   inside the thinking, read as their sources read them (`_field_probes`).

Bit-identical floats across different batchings are not promised by the
engines (batched kernels may round differently); seeds and token-level
sampling streams are.
"""

import collections
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
from otbench.analysis.measurement import segment_flat
from otbench.probe.config import derive_seed
from otbench.probe.engines import Engine, GenRequest, SignalRequest
from otbench.probe.grading import HESITATION_WORDS, GradeBatch, hesitation_pattern, number_answers
from otbench.probe.tokens import ProbeFormat

from . import _field_probes
from ._bounds import FALLBACK_CAPACITY, default_requests, holding_bound, thinking_bound
from ._ids import compact
from ._field_probes import FIELD_PROBES
from ._lane import GradeLane
from ._results import (
    PHASES,
    SIGNALS,
    PhaseStats,
    RunStats,
    ThinkResult,
    UnitResult,
    split_trajectory,
)
from otbench.errors import ArgumentError

__all__ = ["FIELD_PROBES", "PHASES", "SIGNALS", "PhaseStats", "RunStats", "ThinkResult", "UnitResult", "UnitStream",
           "probe_units", "run_units", "split_trajectory", "stream_units"]


class _Unit:
    """A unit in flight: its think result, outputs as they arrive, then its grades."""

    __slots__ = ("q", "r", "think", "L", "outs", "sigs", "own", "field", "answer_out", "missing",
                 "probe_seed", "answer_seed", "first", "texts", "dyn", "deer", "dyn_unit")

    def __init__(self, q: int, r: int):
        self.q, self.r = q, r
        self.think: ThinkResult | None = None
        self.L: tuple[int, ...] = ()
        self.outs: list = []
        self.sigs: list = []
        self.own: list = []                 # per position: the signal in the model's own context
        self.field: list = []               # per position: future of the first probe's field signals
        self.answer_out = None
        self.missing = 0
        self.probe_seed: list[int] = []
        self.answer_seed: int | None = None
        self.first = None                   # future of the original answer's text (grading lane)
        self.texts: list = []               # per position: future of its P answers' texts
        self.dyn: list = []                 # per position: future of its Dynasor probe (field_probes)
        self.deer: list = []                # per position: future of its DEER trial answer
        self.dyn_unit = None                # future of the Dynasor classes and agreement runs


def _gen_tokens(comps) -> int:
    return sum(len(c.token_ids) + (c.stop_id is not None) for c in comps)


class _Driver:
    """State of one `UnitStream`: the units in flight, their requests and their grading.

    Requests are bounded in engine *sequences* (a request of n samples is n
    sequences in vLLM's scheduler, which fans it out into n requests, each
    holding its own copy of the prompt ids), not in units: a unit in its
    probe phase is (n+1)(P+1) sequences. Think requests go to the engine as
    units are admitted (at most `max_thinking` at once, so trajectories run
    ahead of the probes that need them); the probe phase's positions wait
    here, as (unit, position) pairs without prompts, until the sequences in
    flight fall below `max_requests`, oldest unit first, so units finish
    (and commit) in admission order and the engine's waiting queue stays
    short. A position's prompts are built only when it is submitted.
    """

    def __init__(self, engine, fmt, job: dict, stats: RunStats, lane: GradeLane, *,
                 max_requests: int, max_thinking: int, max_holding: int, max_live: int | None = None):
        self.fmt, self.job, self.stats, self.lane = fmt, job, stats, lane
        # engine sequences in flight at most, think requests included (`_bounds.kv_sequences`: what
        # the KV cache holds at full length, so vLLM never preempts); None: no such bound
        self.max_live = max_live
        self.stream = engine.stream(job["sampling"])
        self.active: dict[tuple[int, int], _Unit] = {}
        self.grading: dict[tuple[int, int], Any] = {}
        self.phase_in_flight = {"think": 0, "probe": 0, "signal": 0}
        self.max_requests, self.max_thinking, self.max_holding = max_requests, max_thinking, max_holding
        self.holding: set = set()        # units with a position submitted, until their result is taken
        self.pending: collections.deque = collections.deque()   # (unit key, position; -1: forced answer)
        self.sequences = 0                                       # probe-phase sequences in flight
        self.peak_sequences = 0
        self._cost: dict[Any, int] = {}
        # (benchmark group, phase) -> sequences in flight: the shares of each step's time
        self.seqs: dict[tuple[str, str], int] = {}
        self.greedy = job["sampling"].temperature == 0.0
        # prompt ids of a finished request served by the prefix cache (an engine stream may say)
        self.cached = self.stream.pop_cached_tokens
        # engine sequences still decoding (an engine stream may say; `probe_live`)
        self.live = self.stream.sequences_in_flight

    def probe_live(self) -> int:
        """Probe-phase sequences still decoding in the engine.

        A request of n samples holds its n sequences here until its last sample ends, while
        in the engine each finished sample frees its place: with answers of very different
        lengths the running batch would thin out below capacity behind a few long samples.
        Where the stream counts the engine's unfinished sequences (vLLM), this is that count
        less the think requests (one sequence each); else the requests' own count.
        """
        live = self.live()
        if live is None:
            return self.sequences
        return max(0, min(self.sequences, live - self.phase_in_flight["think"]))

    def total_live(self) -> int:
        """Engine sequences in flight, think requests included (the engine's count where it gives one)."""
        return self.live() if self.live is not None else self.sequences + self.phase_in_flight["think"]

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
        if phase != "think":
            cost = req.n if isinstance(req, GenRequest) else 1
            self._cost[tag] = cost
            self.sequences += cost
            self.peak_sequences = max(self.peak_sequences, self.sequences)

    def _count(self, tag, phase: str, generated: int, seqs: int) -> None:
        """A result of `tag` arrived: its decoded tokens and cached prompt ids, in its phase and cell."""
        cell = (self.job["questions"][tag[0][0]].group, phase)
        self.seqs[cell] -= seqs
        if not self.seqs[cell]:
            del self.seqs[cell]
        cached = self.cached(tag) or 0
        for ph in (getattr(self.stats, phase), self.stats.cell(*cell)):
            ph.generated += generated
            ph.cached_prompt_tokens += cached

    def admit(self, q: int, r: int, given: ThinkResult | None) -> None:
        j = self.job
        qs, u = j["questions"][q], _Unit(q, r)
        self.active[q, r] = u
        if given is not None:
            self._probe(u, given)
            self.pump()
            return
        seed = derive_seed(j["model"], qs.dataset, qs.id, r, "think")
        fmt = self.fmt
        native = fmt.family.native_thinking
        limit = j["thinking_limit"] + (len(fmt.end_ids) + j["answer_limit"] if native else 0)
        stops = fmt.answer_stop_ids if native else fmt.think_stop_ids
        # Native thinking: the request runs on into the answer only when the marker starts within
        # thinking_limit; else what follows the limit is cut off (`split_trajectory`), so the
        # engine may stop it right there (`GenRequest.cut`) instead of decoding the answer budget.
        cut = (j["thinking_limit"], tuple(int(t) for t in fmt.end_ids)) if native and fmt.end_ids else None
        self._submit(((q, r), "t", 0), GenRequest(j["prompts"][q], 1, seed, limit, stops, cut=cut), "think")

    def _probe(self, u: _Unit, th: ThinkResult) -> None:
        """Segment the trajectory and queue its positions (probes + signal) and any forced answer."""
        j, fmt = self.job, self.fmt
        qs = j["questions"][u.q]
        u.think = th
        L_flat, _ = segment_flat(np.asarray(th.thinking, dtype=np.int64),
                                 np.array([0, len(th.thinking)], dtype=np.int64),
                                 fmt.vocab.mask, j["b"], span=fmt.span)
        u.L = tuple(int(x) for x in L_flat)
        m = len(u.L)
        u.outs, u.sigs, u.texts, u.own, u.field = [None] * m, [None] * m, [None] * m, [None] * m, [None] * m
        u.dyn, u.deer = [None] * m, [None] * m
        u.probe_seed = [derive_seed(j["model"], qs.dataset, qs.id, u.r, "probe", k) for k in range(m)]
        # What is graded first: the model's own ids after the marker, the
        # generic family's finished reply, or (below) a forced answer.
        forced = th.answer is None and (fmt.family.native_thinking or not th.finished)
        if th.answer is not None:
            u.first = self.lane.decode([(th.answer, False)])
        elif not forced:
            u.first = self.lane.decode([(th.thinking, False)])
        key = (u.q, u.r)
        if forced:
            u.answer_seed = derive_seed(j["model"], qs.dataset, qs.id, u.r, "answer")
            self.pending.append((key, -1))
            u.missing += 1
        self.pending.extend((key, k) for k in range(m))
        u.missing += (3 + len(j["field_probes"])) * m

    def _submit_position(self, key, k: int) -> None:
        u, j, fmt = self.active[key], self.job, self.fmt
        prompt, th = j["prompts"][u.q], u.think
        if k < 0:
            self._submit((key, "a", 0), GenRequest(fmt.answer_context(prompt, th.thinking, th.finished), 1,
                                                   u.answer_seed, j["answer_limit"], fmt.answer_stop_ids),
                         "probe")
            return
        Lk = u.L[k]
        self._submit((key, "p", k), GenRequest(fmt.probe_prompt(prompt, th.thinking, Lk), j["P"],
                                               u.probe_seed[k], j["answer_limit"], fmt.answer_stop_ids,
                                               logprobs=True), "probe")
        self._submit((key, "s", k), SignalRequest(fmt.signal_context(prompt, th.thinking, Lk), fmt.signal_id),
                     "signal")
        # The same signal in the model's own context: after prompt + thinking[:L], the boundary
        # token as written (what the online logits processor reads when it decides there).
        self._submit((key, "o", k), SignalRequest(list(prompt) + list(th.thinking[:Lk]), fmt.signal_id),
                     "signal")
        if j["field_probes"]:
            _field_probes.submit(self, key, u, k)

    def pump(self) -> None:
        """Submit queued positions while the probe-phase sequences still decoding are below the bound
        (`probe_live`) and those of the unfinished requests below twice it (what finished samples
        of unfinished requests hold: their answers and the front end's prompt), and, for a unit's
        first position, fewer than `max_holding` units hold answers (backpressure from a grading
        lane that falls behind: such units hold all their answers until graded)."""
        # a position is at most P + 2 sequences (probes, signal, own-token signal): submitted only
        # while they fit under the KV bound, so the sequences in flight never exceed it
        room = None if self.max_live is None else self.max_live - self.job["P"] - 2
        while self.pending and (not self.sequences or (self.sequences < 2 * self.max_requests
                                                       and self.probe_live() < self.max_requests)):
            if room is not None and self.total_live() > room:
                return
            key = self.pending[0][0]
            if key not in self.holding:
                if len(self.holding) >= self.max_holding:
                    return
                self.holding.add(key)
            self._submit_position(*self.pending.popleft())

    def deliver(self, tag, res) -> None:
        key, kind, k = tag
        u = self.active[key]
        j = self.job
        self.sequences -= self._cost.pop(tag, 0)
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
        if kind in ("s", "o"):
            self.phase_in_flight["signal"] -= 1
            self._count(tag, "signal", 1, 1)
            (u.sigs if kind == "s" else u.own)[k] = res
        elif kind in ("d", "e"):
            self.phase_in_flight["probe"] -= 1
            self._count(tag, "probe", _gen_tokens(res), len(res))
            _field_probes.deliver(self, u, kind, k, res)
        else:
            self.phase_in_flight["probe"] -= 1
            self._count(tag, "probe", _gen_tokens(res), len(res))
            if kind == "a":
                u.answer_out = tuple(res[0].token_ids)
                u.first = self.lane.decode([(u.answer_out, True)])   # the prefix is in the prompt
            else:
                u.texts[k] = self.lane.decode([(c.token_ids, True) for c in res])
                u.outs[k] = tuple(compact(c.token_ids) for c in res)
                first = res[0]
                if first.logprobs is None:
                    raise RuntimeError(f"the {getattr(self.stream, 'name', 'engine')} stream returned no "
                                       "token log-probabilities for a probe that asked for them "
                                       "(GenRequest.logprobs); the answer confidence needs them")
                u.field[k] = self.lane.field(j["questions"][u.q], first.token_ids, first.logprobs,
                                             first.stop_id is not None, j["hesitation"])
        u.missing -= 1
        if u.missing == 0:
            if "dynasor" in j["field_probes"]:     # before the grading: done when the unit is
                u.dyn_unit = self.lane.dynasor_unit(u.dyn)
            # Graded in a fixed order: the original answer (or the reply), then every probe.
            self.grading[key] = self.lane.grade(j["questions"][u.q], [u.first, *u.texts])

    def finish(self, key) -> UnitResult:
        u = self.active.pop(key)
        self.holding.discard(key)
        gs = self.grading.pop(key).result()
        th, qs = u.think, self.job["questions"][u.q]
        P = self.job["P"]
        probe_status = tuple(tuple(s for _, s in gs[1 + k * P:1 + (k + 1) * P]) for k in range(len(u.L)))
        own = th.answer if th.answer is not None else (u.answer_out if u.answer_out is not None else ())
        field = [f.result() for f in u.field]
        ids = number_answers([f.key for f in field], [s[0] == "ok" for s in probe_status])
        seeds = {"think": th.seed, "answer": u.answer_seed, "probe": u.probe_seed}
        peer = _field_probes.unit_fields(self.job, u, seeds)
        return UnitResult(
            group=qs.group, dataset=qs.dataset, question=qs.id, trajectory=u.r,
            prompt=tuple(int(t) for t in self.job["prompts"][u.q]), thinking=th.thinking,
            finished=th.finished, stop_id=th.stop_id, answer=tuple(own),
            y=int((th.verdict or gs[0])[0]), y_status=(th.verdict or gs[0])[1], L=u.L,  # _verdicts
            C=tuple(sum(int(c) for c, _ in gs[1 + k * P:1 + (k + 1) * P]) for k in range(len(u.L))),
            probe_tokens=tuple(u.outs),
            probe_status=probe_status,
            logp_end=tuple(s.logp_end for s in u.sigs), logp_other=tuple(s.logp_other for s in u.sigs),
            other_id=tuple(s.other_id for s in u.sigs),
            logp_end_own=tuple(s.logp_end for s in u.own), logp_other_own=tuple(s.logp_other for s in u.own),
            answer_id=tuple(ids), answer_conf=tuple(f.conf for f in field),
            hesitation=tuple(int(f.hesitation) for f in field), answer_tokens=tuple(f.tokens for f in field),
            seeds=seeds, **peer,
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
        self.pump()


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
                 given: Mapping[tuple[int, int], ThinkResult] | None = None,
                 max_units: int = 64, max_requests: int | None = None, max_live: int | None = None,
                 hesitation_words: Sequence[str] = HESITATION_WORDS, field_probes: Sequence[str] = ()):
        fp = _field_probes.check_field_probes(field_probes)
        for name, v in (("max_units", max_units), ("max_requests", max_requests), ("max_live", max_live)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
                raise ArgumentError(f"`{name}` must be a positive integer, got {v!r}.")
        job = dict(model=model, questions=questions, prompts=prompts, P=P, b=b, sampling=sampling,
                   thinking_limit=thinking_limit, answer_limit=answer_limit,
                   hesitation=hesitation_pattern(hesitation_words), field_probes=fp)
        job.update(_field_probes.suffix_ids(tokenizer, fp))
        self.stats = stats if stats is not None else RunStats()
        self._engine, self._given = engine, given or {}
        self.max_units = max_units
        cap = engine.capacity()
        self.capacity = int(cap) if cap is not None else FALLBACK_CAPACITY
        if max_live is not None:       # the KV cache's bound (`_bounds.kv_sequences`)
            self.capacity = min(self.capacity, max_live)
        if max_requests is None:
            max_requests = default_requests(self.capacity)
        self._lane = GradeLane(grade_batch, tokenizer, fmt.answer_prefix_ids)
        self._d = _Driver(engine, fmt, job, self.stats, self._lane, max_requests=max_requests,
                          max_thinking=thinking_bound(max_units), max_holding=holding_bound(max_units),
                          max_live=max_live)
        self._mark()

    def _mark(self) -> None:
        self._t, self._graded, self._cache = time.perf_counter(), self._lane.seconds, self._engine.cache_stats()

    @property
    def in_flight(self) -> int:
        """Units admitted and not yet returned by `step`."""
        return len(self._d.active)

    @property
    def requests_in_flight(self) -> int:
        """Engine sequences in flight now (think requests and probe-phase ones)."""
        d = self._d
        return d.sequences + d.phase_in_flight["think"]

    @property
    def peak_requests(self) -> int:
        """The most probe-phase sequences that were in flight at once so far."""
        return self._d.peak_sequences

    def wants(self) -> bool:
        """Whether a unit should be admitted now: fewer than `max_units` units in flight and either
        fewer than half of them sampling their trajectory (`_bounds.thinking_bound`) or the engine
        running fewer sequences than it can (`capacity`, vLLM's `max_num_seqs`).

        The second clause fills an engine that has nothing else to run, at the start of a run
        (no unit has a trajectory to probe yet) and whenever the probes run dry: the think bound
        keeps trajectories from running too far ahead of their probes, never the engine idle.
        """
        d = self._d
        if len(d.active) >= self.max_units or (d.max_live is not None and d.total_live() >= d.max_live):
            return False
        return d.phase_in_flight["think"] < d.max_thinking or self.requests_in_flight < self.capacity

    def add(self, unit: tuple[int, int]) -> None:
        """Admit a `(question index, trajectory)` unit now (its think request goes to the engine;
        an imported trajectory's positions are queued)."""
        self._d.admit(unit[0], unit[1], self._given.get(unit))

    def step(self) -> list[UnitResult]:
        """The units finished by now, then one round of engine work (or a wait for grading).

        Returns the finished units (often none); call it while `in_flight`.
        """
        d = self._d
        done = [d.finish(key) for key in [k for k, f in d.grading.items() if f.done()]]
        if done:
            d.pump()                                  # places freed for units waiting to start
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
                 given: Mapping[tuple[int, int], ThinkResult] | None = None,
                 max_requests: int | None = None, max_live: int | None = None,
                 hesitation_words: Sequence[str] = HESITATION_WORDS,
                 field_probes: Sequence[str] = ()) -> Iterator[UnitResult]:
    """Measure work units `(question index, trajectory)`, yielding each `UnitResult` as it completes.

    At most `max_in_flight` units are between admission and their result
    (half of them sampling their trajectory at most while the engine is full), and at most about
    `max_requests` probe-phase engine sequences are in flight (None: twice
    the engine's capacity; `_bounds`), and at most `max_live` engine sequences of any phase
    (None: no such bound; the runner passes what the engine's KV cache holds, `_bounds.kv_sequences`,
    so vLLM never preempts); a new unit is admitted as soon as
    there is room, so memory is bounded by these numbers, not by the run.
    `given` maps units to an imported
    `ThinkResult` (no think request for those). The order of results is the
    order they finish; each result is the same whatever the order.
    """
    if isinstance(max_in_flight, bool) or not isinstance(max_in_flight, int) or max_in_flight < 1:
        raise ArgumentError(f"`max_in_flight` must be a positive integer, got {max_in_flight!r}.")
    us = UnitStream(engine, fmt, model=model, questions=questions, prompts=prompts, P=P, b=b,
                    thinking_limit=thinking_limit, answer_limit=answer_limit, sampling=sampling,
                    grade_batch=grade_batch, tokenizer=tokenizer, stats=stats, given=given,
                    max_units=max_in_flight, max_requests=max_requests, max_live=max_live,
                    hesitation_words=hesitation_words, field_probes=field_probes)
    todo = iter(units)
    more = True
    try:
        while True:
            while more and us.wants():
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
                given: Mapping[tuple[int, int], ThinkResult] | None = None,
                hesitation_words: Sequence[str] = HESITATION_WORDS,
                field_probes: Sequence[str] = ()) -> list[UnitResult]:
    """`stream_units` over `units`, results in the order of `units` (for tests and scripts)."""
    out = {}
    for u in stream_units(engine, fmt, model=model, questions=questions, prompts=prompts, units=units,
                          P=P, b=b, thinking_limit=thinking_limit, answer_limit=answer_limit,
                          sampling=sampling, grade_batch=grade_batch, tokenizer=tokenizer,
                          max_in_flight=max_in_flight or max(1, len(units)), stats=stats,
                          given=given, hesitation_words=hesitation_words, field_probes=field_probes):
        out[u.group, u.question, u.trajectory] = u
    return [out[questions[q].group, questions[q].id, r] for q, r in units]


def run_units(engine: Engine, fmt: ProbeFormat, *, model: str, questions: Sequence,
              prompts: Sequence[Sequence[int]], R: int, P: int, b: int, thinking_limit: int,
              answer_limit: int, sampling, grade_batch: GradeBatch, tokenizer,
              max_in_flight: int = 64, stats: RunStats | None = None,
              on_batch: Callable[[list[UnitResult], RunStats], None] | None = None,
              skip: Callable[[tuple[int, int]], bool] | None = None,
              given: Mapping[tuple[int, int], ThinkResult] | None = None,
              max_requests: int | None = None, max_live: int | None = None,
              hesitation_words: Sequence[str] = HESITATION_WORDS, field_probes: Sequence[str] = ()) -> int:
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
                            max_in_flight=max_in_flight, stats=stats, given=given,
                            max_requests=max_requests, max_live=max_live, hesitation_words=hesitation_words,
                            field_probes=field_probes):
        count += 1
        if on_batch is not None:
            on_batch([res], stats)
    return count
