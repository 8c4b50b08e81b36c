"""The probe loop: trajectories, segmentation, answer probes and signals for work units (docs/rules.md).

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

import contextlib
import gc
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence

from otbench.probe.engines import Engine
from otbench.probe.grading import HESITATION_WORDS, GradeBatch, hesitation_pattern
from otbench.probe.tokens import ProbeFormat

from . import _field_probes
from ._bounds import FALLBACK_CAPACITY, default_requests, holding_bound, thinking_bound
from ._field_probes import FIELD_PROBES
from otbench.probe.grading import DEEPCONF_WINDOW
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


from ._driver import _Driver, _gen_tokens, _Unit  # noqa: F401  (the loop's driver)


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
                 max_units: int = 64, max_requests: int | None = None,
                 kv_cache: tuple[int, int] | None = None,
                 hesitation_words: Sequence[str] = HESITATION_WORDS, field_probes: Sequence[str] = (),
                 deepconf_window: int = DEEPCONF_WINDOW):
        fp = _field_probes.check_field_probes(field_probes)
        for name, v in (("max_units", max_units), ("max_requests", max_requests)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
                raise ArgumentError(f"`{name}` must be a positive integer, got {v!r}.")
        if kv_cache is not None and (len(kv_cache) != 2 or any(isinstance(v, bool) or not isinstance(v, int)
                                                               or v < 1 for v in kv_cache)):
            raise ArgumentError(f"`kv_cache` must be (tokens, block size), positive integers, got {kv_cache!r}.")
        job = dict(model=model, questions=questions, prompts=prompts, P=P, b=b, sampling=sampling,
                   thinking_limit=thinking_limit, answer_limit=answer_limit,
                   hesitation=hesitation_pattern(hesitation_words), field_probes=fp,
                   deepconf_window=int(deepconf_window))
        job.update(_field_probes.suffix_ids(tokenizer, fp, fmt.vocab.forms))
        self.stats = stats if stats is not None else RunStats()
        self._engine, self._given = engine, given or {}
        self.max_units = max_units
        cap = engine.capacity()
        self.capacity = int(cap) if cap is not None else FALLBACK_CAPACITY
        if max_requests is None:
            max_requests = default_requests(self.capacity)
        self._lane = GradeLane(grade_batch, tokenizer, fmt.answer_prefix_ids)
        self._d = _Driver(engine, fmt, job, self.stats, self._lane, max_requests=max_requests,
                          max_thinking=thinking_bound(max_units), max_holding=holding_bound(max_units),
                          kv_cache=kv_cache, capacity=self.capacity)
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
        if len(d.active) >= self.max_units or not d.fits_think():
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
            # vLLM's own fallback when the KV cache runs out: counted, never silent (`_kv`)
            st.preemptions += cache.get("preemptions", 0) - self._cache.get("preemptions", 0)
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
                 max_requests: int | None = None, kv_cache: tuple[int, int] | None = None,
                 hesitation_words: Sequence[str] = HESITATION_WORDS,
                 field_probes: Sequence[str] = (), deepconf_window: int = DEEPCONF_WINDOW) -> Iterator[UnitResult]:
    """Measure work units `(question index, trajectory)`, yielding each `UnitResult` as it completes.

    At most `max_in_flight` units are between admission and their result
    (half of them sampling their trajectory at most while the engine is full), and at most about
    `max_requests` probe-phase engine sequences are in flight (None: twice
    the engine's capacity; `_bounds`), and the sequences of every phase while they fit in the
    engine's KV cache as vLLM's block manager holds them (`kv_cache`: its tokens and block size;
    None: no such bound; `_kv.KVLedger`); a new unit is admitted as soon as
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
                    max_units=max_in_flight, max_requests=max_requests, kv_cache=kv_cache,
                    hesitation_words=hesitation_words, field_probes=field_probes,
                    deepconf_window=deepconf_window)
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
                field_probes: Sequence[str] = (), deepconf_window: int = DEEPCONF_WINDOW) -> list[UnitResult]:
    """`stream_units` over `units`, results in the order of `units` (for tests and scripts)."""
    out = {}
    for u in stream_units(engine, fmt, model=model, questions=questions, prompts=prompts, units=units,
                          P=P, b=b, thinking_limit=thinking_limit, answer_limit=answer_limit,
                          sampling=sampling, grade_batch=grade_batch, tokenizer=tokenizer,
                          max_in_flight=max_in_flight or max(1, len(units)), stats=stats,
                          given=given, hesitation_words=hesitation_words, field_probes=field_probes,
                          deepconf_window=deepconf_window):
        out[u.group, u.question, u.trajectory] = u
    return [out[questions[q].group, questions[q].id, r] for q, r in units]


def run_units(engine: Engine, fmt: ProbeFormat, *, model: str, questions: Sequence,
              prompts: Sequence[Sequence[int]], R: int, P: int, b: int, thinking_limit: int,
              answer_limit: int, sampling, grade_batch: GradeBatch, tokenizer,
              max_in_flight: int = 64, stats: RunStats | None = None,
              on_batch: Callable[[list[UnitResult], RunStats], None] | None = None,
              skip: Callable[[tuple[int, int]], bool] | None = None,
              given: Mapping[tuple[int, int], ThinkResult] | None = None,
              max_requests: int | None = None, kv_cache: tuple[int, int] | None = None,
              hesitation_words: Sequence[str] = HESITATION_WORDS, field_probes: Sequence[str] = (),
              deepconf_window: int = DEEPCONF_WINDOW) -> int:
    """Stream all `len(questions) * R` work units; returns how many were probed.

    `skip(unit)` leaves out units already done (the resume seam), and
    `on_batch([result], stats)` is called as each unit completes (progress,
    commits); nothing is kept here, so memory does not grow with the run.
    """
    stats = stats if stats is not None else RunStats()
    units = ((q, r) for q in range(len(questions)) for r in range(R)
             if skip is None or not skip((q, r)))
    with _young_collections():
        count = _run(stream_units(engine, fmt, model=model, questions=questions, prompts=prompts, units=units,
                                  P=P, b=b, thinking_limit=thinking_limit, answer_limit=answer_limit,
                                  sampling=sampling, grade_batch=grade_batch, tokenizer=tokenizer,
                                  max_in_flight=max_in_flight, stats=stats, given=given,
                                  max_requests=max_requests, kv_cache=kv_cache,
                                  hesitation_words=hesitation_words, field_probes=field_probes,
                                  deepconf_window=deepconf_window), on_batch, stats)
    return count


YOUNG_THRESHOLD = 20_000
"""Allocations between the garbage collector's young-generation passes while the loop runs (CPython's
default is 700). Every engine step hands the driver fresh containers of hundreds of thousands of ids
(answers of up to `answer_limit` ids, vLLM's log-probability lists), most freed within the step; at 700
a young pass runs every few hundred of the driver's small allocations and walks each such list still
alive, and the older passes follow it (benchmarks/probe_scale.py at 32 units: 1,864 young, 167 middle
and 10 full passes took ~4 s of the driver's thread, imports included; its time per probe request fell from 280 to
~190 us). Collection still runs, so memory stays bounded."""


@contextlib.contextmanager
def _young_collections():
    """Raise the young-generation threshold to `YOUNG_THRESHOLD` for the loop, then put back what was
    there (unless something else changed it meanwhile, or it was higher already)."""
    before = gc.get_threshold()
    if before[0] >= YOUNG_THRESHOLD:
        yield
        return
    gc.set_threshold(YOUNG_THRESHOLD, *before[1:])
    try:
        yield
    finally:
        if gc.get_threshold()[0] == YOUNG_THRESHOLD:
            gc.set_threshold(*before)


def _run(results: Iterator[UnitResult], on_batch, stats: RunStats) -> int:
    """Hand each result to `on_batch` as it comes; how many came."""
    count = 0
    for res in results:
        count += 1
        if on_batch is not None:
            on_batch([res], stats)
    return count

