"""The probe loop's driver: the units in flight, their engine requests and results (`_loop`).

One `_Driver` per engine stream holds every admitted unit (`_Unit`) from its
think request to its graded result; `_loop.UnitStream` admits units and
hands their results on. Split from `_loop` so each module stays one concept.
"""

import collections
import dataclasses
import os
import time
from typing import Any

import numpy as np
from otbench.analysis.measurement import segment_flat
from otbench.probe.config import derive_seed
from otbench.probe.engines import GenRequest, SignalRequest
from otbench.probe.grading import number_answers

from . import _field_probes
from ._ids import compact
from ._kv import KVLedger, blocks
from ._lane import GradeLane
from ._results import (
    RunStats,
    ThinkResult,
    UnitResult,
    split_trajectory,
)



class _Unit:
    """A unit in flight: its think result, outputs as they arrive, then its grades."""

    __slots__ = ("q", "r", "think", "L", "outs", "sigs", "own", "field", "answer_out", "missing",
                 "probe_seed", "answer_seed", "first", "texts", "dyn", "deer", "dyn_unit", "conf", "warm", "tb",
                 "tb_sample", "tb_end")

    def __init__(self, q: int, r: int):
        self.q, self.r = q, r
        self.think: ThinkResult | None = None
        self.L: tuple[int, ...] = ()
        self.outs: list = []                # per position: its first answer's ids, then the rest's
        self.sigs: list = []
        self.own: list = []                 # per position: the signal in the model's own context
        self.field: list = []               # per position: future of the first probe's field signals
        self.answer_out = None
        self.missing = 0
        self.probe_seed: list[int] = []
        self.answer_seed: int | None = None
        self.first = None                   # future of the original answer's text (grading lane)
        self.texts: list = []               # per position, two: futures of its first and other answers' texts
        self.dyn: list = []                 # per position: future of its Dynasor probe (field_probes)
        self.deer: list = []                # per position: future of its DEER trial answer
        self.dyn_unit = None                # future of the Dynasor classes and agreement runs
        self.conf = None                    # the thinking tokens' top-20 means (field probe deepconf)
        self.warm = None                    # DeepConf's warm-up min_conf of the whole output
        self.tb: list = []                  # per position: ThinkBrake's check plan (None: no check)
        self.tb_sample: list = []           # per position: fork 0's sampled token's log-probability
        self.tb_end: list = []              # per position: fork 1's end token's, where it is its own read


CONFIDENCE = -2
"""The pending entry of a unit's confidence request (DeepConf, `_field_probes.confidence_request`)."""


@dataclasses.dataclass
class _Position:
    """A queued position's engine requests and what the KV ledger charges them (`_kv.KVLedger.add`)."""
    reqs: list            # (tag, request, phase)
    group: Any            # the group whose prefix they share: (unit key, position)
    shared: int           # the tokens every request's context starts with
    ctxs: list            # (context length, samples, max_tokens) per request
    tree: int             # of `shared`, the trajectory's own tokens (prompt + thinking)
    path: tuple           # the ledger's nodes those tokens belong to


def _context(req) -> tuple[int, int, int]:
    """(context length, samples, most tokens decoded) of an engine request, as the KV ledger charges it."""
    if isinstance(req, GenRequest):
        return len(req.prompt), int(req.n), int(req.max_tokens)
    return len(req.context), 1, 1


def _decoded(c) -> int:
    """Tokens a completion decoded: its ids and the stop token the engine drops from them."""
    return len(c.token_ids) + (c.stop_id is not None)


def _gen_tokens(comps) -> int:
    return sum(map(_decoded, comps))


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
                 max_requests: int, max_thinking: int, max_holding: int,
                 kv_cache: tuple[int, int] | None = None, capacity: int | None = None):
        self.fmt, self.job, self.stats, self.lane = fmt, job, stats, lane
        self.steps = 0                       # engine steps polled (a sequence decodes <= 1 token each)
        self.stream = engine.stream(job["sampling"])
        # the blocks the sequences in flight hold in the engine's KV cache, all phases (`_kv`):
        # requests go to the engine while they fit; None: the engine reports no cache
        self.kv = KVLedger(*kv_cache, live=getattr(self.stream, "live_samples", None)) \
            if kv_cache is not None else None
        self.ready: dict[Any, _Position] = {}          # pending position -> its requests, built once
        self.longest = max(map(len, job["prompts"]), default=0)
        # the tokens every prompt starts with (the chat template's common part): whole blocks that every
        # sequence in flight shares in vLLM's prefix cache (`_kv.KVLedger`'s outermost node)
        self.common = len(os.path.commonprefix([list(p) for p in job["prompts"]])) if job["prompts"] else 0
        self.active: dict[tuple[int, int], _Unit] = {}
        self.grading: dict[tuple[int, int], Any] = {}
        self.phase_in_flight = {"think": 0, "probe": 0, "signal": 0}
        self.max_requests, self.max_thinking, self.max_holding = max_requests, max_thinking, max_holding
        self.capacity = capacity          # sequences the engine's scheduler runs at once (None: unbounded)
        self.holding: set = set()        # units with a position submitted, until their result is taken
        self.pending: collections.deque = collections.deque()   # (unit key, position; -1: forced answer)
        self.sequences = 0                                       # probe-phase sequences in flight
        self.peak_sequences = 0
        self._cost: dict[Any, int] = {}
        self._decoded: dict[str, tuple[int, int]] = {}          # phase -> (tokens, sequences) finished
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

    def _path(self, q: int, key=None) -> tuple:
        """The ledger's nodes of a context that starts with question `q`'s prompt (and, with `key`, goes on
        with that unit's thinking): the prompts' common part, the prompt, the trajectory."""
        block = self.kv.block
        path = (("all", self.common // block), (("q", q), len(self.job["prompts"][q]) // block))
        return path if key is None else path + ((("u", key), None),)

    def _submit(self, tag, req, phase: str, pos: "_Position | None" = None) -> None:
        self.stream.submit(tag, req)
        self.phase_in_flight[phase] += 1
        gen = isinstance(req, GenRequest)
        if self.kv is not None:
            length, n, cap = _context(req)
            if pos is None:          # a think request: its prompt, shared with the question's others
                self.kv.add(tag, tag, length, length, n, cap, self.steps, length, self._path(tag[0][0]), phase)
            else:
                self.kv.add(tag, pos.group, pos.shared, length, n, cap, self.steps, pos.tree, pos.path, phase)
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
        if self.kv is not None and phase != "signal":     # the mean length the ledger charges (`expect`)
            done = self._decoded.get(phase, (0, 0))
            done = self._decoded[phase] = (done[0] + generated, done[1] + seqs)
            self.kv.expect(phase, done[0] / max(done[1], 1))
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
        limit = self.think_limit()
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
        u.outs, u.sigs, u.own, u.field = [[None, ()] for _ in range(m)], [None] * m, [None] * m, [None] * m
        u.texts = [None, None] * m if j["P"] > 1 else [None] * m
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
        if "deepconf" in j["field_probes"]:     # DeepConf's confidences: one prefill of the trajectory
            self.pending.append((key, CONFIDENCE))
            u.missing += 1
        self.pending.extend((key, k) for k in range(m))
        u.missing += (3 + (j["P"] > 1) + len(_field_probes.position_probes(j["field_probes"]))) * m
        if "thinkbrake" in j["field_probes"]:    # its forks only where it checks
            u.tb, u.tb_sample, u.tb_end = _field_probes.thinkbrake_plan(self, u), [None] * m, [None] * m
            u.missing += _field_probes.thinkbrake_count(u)

    def _position(self, key, k: int) -> "_Position":
        """A queued position's requests, built once, with what the KV ledger needs of them."""
        u, j, fmt = self.active[key], self.job, self.fmt
        prompt, th = j["prompts"][u.q], u.think
        if k == CONFIDENCE:
            reqs = [((key, "c", 0), _field_probes.confidence_request(prompt, _field_probes.whole_output(th, fmt)),
                     "probe")]
        elif k < 0:
            reqs = [((key, "a", 0), GenRequest(fmt.answer_context(prompt, th.thinking, th.finished), 1,
                                               u.answer_seed, j["answer_limit"], fmt.answer_stop_ids), "probe")]
        else:
            Lk, P, seed = u.L[k], j["P"], u.probe_seed[k]
            probe = fmt.probe_prompt(prompt, th.thinking, Lk)
            # The P answers as two requests: the first with its tokens' log-probabilities (its
            # answer confidence, the only ones read), the other P - 1 without. Sample j keeps seed
            # + j (`GenRequest`; vLLM seeds an n-sample request's child j so, `v1/engine/
            # parallel_sampling.py` `ParentRequest`), so the answers are those of one P-sample request,
            # and the engine runs the same P sequences on the same cached prefix; but vLLM's front
            # end no longer builds, and the driver no longer reads and frees, log-probability lists
            # for P - 1 answers (15 x ~1,400 positions per position at the paper's shape).
            reqs = [((key, "p", k), GenRequest(probe, 1, seed, j["answer_limit"], fmt.answer_stop_ids,
                                               logprobs=True), "probe")]
            if P > 1:
                reqs.append(((key, "r", k), GenRequest(probe, P - 1, seed + 1, j["answer_limit"],
                                                       fmt.answer_stop_ids), "probe"))
            reqs += [
                    ((key, "s", k), SignalRequest(fmt.signal_context(prompt, th.thinking, Lk), fmt.signal_id),
                     "signal"),
                    # The same signal in the model's own context: after prompt + thinking[:L], the boundary
                    # token as written (what the online logits processor reads when it decides there).
                    ((key, "o", k), SignalRequest(list(prompt) + list(th.thinking[:Lk]), fmt.signal_id),
                     "signal")]
            if j["field_probes"]:
                reqs += _field_probes.requests(self, key, u, k)
        # Every context starts with the prompt and the retained thinking but for the last boundary
        # token, which `ProbeFormat.retained` may rewrite: what the group shares for certain.
        ctxs = [_context(r) for _, r, _ in reqs]
        shared = min(length for length, _, _ in ctxs)
        # of it, the trajectory's own tokens (the last thinking token may be rewritten): the whole
        # blocks this position shares with the unit's other positions, the question's, every prompt
        tree = len(prompt) + max(0, (u.L[k] if k >= 0 else len(th.thinking)) - 1)
        if k >= 0:
            shared = min(shared, tree)
        path = () if self.kv is None else self._path(u.q, key)
        return _Position(reqs, (key, k), shared, ctxs, min(tree, shared), path)

    def _submit_position(self, key, k: int) -> None:
        pos = self.ready.pop((key, k), None) or self._position(key, k)
        for tag, req, phase in pos.reqs:
            self._submit(tag, req, phase, pos)

    def fits_think(self) -> bool:
        """Whether a think request of the longest prompt fits in the KV cache beside what is in flight,
        and the think requests in flight, each at its full length, would still fit in the cache alone.

        A trajectory grows for thousands of steps after it is admitted, far past the ledger's
        projection (`KVLedger.peak`: until the last probe in flight is expected to end); the probes
        around it end within `answer_limit` tokens and then wait for room. So only the trajectories
        are held to their full length: together they can
        never outgrow the cache, however long they think (Qwen3-4B on one H200 at the paper's limits:
        ~21 at once, beside hundreds of probe sequences)."""
        if self.kv is None:
            return True
        full = blocks(self.longest + self.think_limit(), self.kv.block)
        if self.phase_in_flight["think"] and (self.phase_in_flight["think"] + 1) * full > self.kv.capacity:
            return False
        # beside what is in flight as the ledger projects it (`KVLedger.peak`): the new trajectory grows
        # throughout, the probes until they end
        return self.kv.fits_group(self.steps, self.longest, [(self.longest, 1, self.think_limit())], kind="think")

    def think_limit(self) -> int:
        """Tokens a think request may decode: the thinking limit, and for a native-thinking family the
        marker and its answer."""
        j, fmt = self.job, self.fmt
        return j["thinking_limit"] + (len(fmt.end_ids) + j["answer_limit"] if fmt.family.native_thinking else 0)

    def pump(self) -> None:
        """Submit queued positions while the probe-phase sequences still decoding are below the bound
        (`probe_live`) and those of the unfinished requests below twice it (what finished samples
        of unfinished requests hold: their answers and the front end's prompt), while the position's
        sequences fit in the KV cache beside those in flight (`_kv.KVLedger`), and, for a unit's
        first position, fewer than `max_holding` units hold answers (backpressure from a grading
        lane that falls behind: such units hold all their answers until graded)."""
        while self.pending and (not self.sequences or (self.sequences < 2 * self.max_requests
                                                       and self.probe_live() < self.max_requests)):
            key, k = self.pending[0]
            if key not in self.holding and len(self.holding) >= self.max_holding:
                return
            if self.kv is not None:
                pos = self.ready.get((key, k))
                if pos is None:
                    pos = self.ready[key, k] = self._position(key, k)
                if not self.kv.fits_group(self.steps, pos.shared, pos.ctxs, pos.tree, pos.path, "probe"):
                    return
            self.holding.add(key)
            self.pending.popleft()
            self._submit_position(key, k)

    def deliver(self, tag, res) -> None:
        key, kind, k = tag
        u = self.active[key]
        j = self.job
        self.sequences -= self._cost.pop(tag, 0)
        if self.kv is not None:        # with what each sample decoded: the lengths the ledger projects by
            gen = isinstance(res, list) and res and hasattr(res[0], "token_ids")     # not a Signal
            self.kv.remove(tag, [_decoded(c) for c in res] if gen else None)
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
        if kind in ("s", "o", "f"):
            self.phase_in_flight["signal"] -= 1
            self._count(tag, "signal", 1, 1)
            if kind == "f":                     # ThinkBrake's fork 1 (`_field_probes`)
                _field_probes.deliver(self, u, kind, k, res)
            else:
                (u.sigs if kind == "s" else u.own)[k] = res
        elif kind == "c":
            self.phase_in_flight["probe"] -= 1
            self._count(tag, "probe", _gen_tokens(res), len(res))
            prompt = j["prompts"][u.q]
            u.conf = _field_probes.thinking_confidence(res[0], prompt, u.think.thinking)
            u.warm = _field_probes.output_warmup_conf(res[0], prompt, _field_probes.whole_output(u.think, self.fmt),
                                                      j["deepconf_window"])
        elif kind in ("d", "e", "b"):
            self.phase_in_flight["probe"] -= 1
            self._count(tag, "probe", _gen_tokens(res), len(res))
            _field_probes.deliver(self, u, kind, k, res)
        else:
            self.phase_in_flight["probe"] -= 1
            self._count(tag, "probe", _gen_tokens(res), len(res))
            if kind == "a":
                u.answer_out = tuple(res[0].token_ids)
                u.first = self.lane.decode([(u.answer_out, True)])   # the prefix is in the prompt
            elif kind == "r":                   # the position's answers after its first
                u.texts[2 * k + 1] = self.lane.decode([(c.token_ids, True) for c in res])
                u.outs[k][1] = tuple(compact(c.token_ids) for c in res)
            else:
                u.texts[k * (1 + (j["P"] > 1))] = self.lane.decode([(c.token_ids, True) for c in res])
                u.outs[k][0] = compact(res[0].token_ids)
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
            probe_tokens=tuple((first, *rest) for first, rest in u.outs),
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
        self.steps += 1
        dt = time.perf_counter() - t
        for p in busy:
            getattr(self.stats, p).seconds += dt
        if busy:
            self.stats.busy_seconds += dt
        total = sum(self.seqs.values())
        # the batch the engine decoded this step: its unfinished sequences (the stream's count where it
        # has one: a finished sample of a request still decoding is not), at most what its scheduler
        # runs at once; the rest wait in its queue
        live = self.live() if total else 0
        running = total if live is None else live
        self.stats.sequence_seconds += dt * (running if self.capacity is None else min(running, self.capacity))
        for (bench, p), n in self.seqs.items():
            share = dt * n / total
            getattr(self.stats, p).engine_seconds += share
            self.stats.cell(bench, p).engine_seconds += share
        for tag, res in done:
            self.deliver(tag, res)
        self.pump()


