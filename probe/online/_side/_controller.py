"""The request-level online controller: field methods that need probe answers, run with prefix-cached side requests.

Dynasor-CoT, DEER and answer consistency decide on the *answer* a probe
would give at a step boundary, which no logits processor can see. This
controller therefore drives generation itself, through nothing but an
engine's `Stream` (`GenRequest`s), so it runs the same
in process (vLLM) and against a served model (the "openai" engine). One
state machine per trajectory, all multiplexed on one stream:

1. the thinking is generated up to the next decision length: a stored
   trajectory's step ends `L(0..n-1)` (`SideJob.lengths`: the token-exact
   boundaries the probe segmented, which depend on the whole trajectory and
   so can only be replayed), or, live, the first block end (the probe's
   `Tables.ends_block`, i.e. `boundary_flags`) at least `b` tokens after the
   previous decision (a prefix-only stand-in for the probe's merge, which
   needs the final length: tokens decoded past that block end are
   discarded and counted);
2. a side request on the same prefix -- the probe stage's own prompt
   (`ProbeFormat.probe_prompt`: prompt + retained thinking, the last
   boundary token replaced by its content, the family's thinking end and
   answer prefix), its seed (`probe_seeds[k]`: sample 0 of the probe) and
   caps (`answer_limit`, the answer stops) -- decodes the position's probe
   answer; its prompt shares the whole prefix, so a prefix-caching engine
   prefills only the suffix. DEER's confidence (and the record pass's)
   comes with that same completion: the side request asks for its sampled
   tokens' raw log-probabilities (`GenRequest.logprobs`), as the probe's
   own probe request does, so one side request per decision is all. A
   method that reads Dynasor-CoT's or DEER's *own* probe gets that probe
   instead (or as well), issued and read as the probe stage records it
   (`_probes`);
3. the signals are computed by the probe stage's own helper
   (`otbench.probe.grading.probe_signals`, called as the probe's grading
   lane calls it: the family's answer prefix, the tokenizer's decode with
   special tokens skipped, the stop flag, the run's hesitation words), and
   answer keys are numbered by `number_answers` (first appearance from 1,
   -1 for none; online nothing is graded, so no key is the correct id 0).
   The method's decision is its own ``stop(view, θ)`` on an `OnlineView` of
   this one trajectory -- the call OTBench's offline walk makes -- so any
   method whose `Method.online` is ``"side"`` runs here, built-in or
   plug-in, and when to probe comes from its declared `SignalCost` (``paid``,
   ``first``, ``max_decisions``; `FieldRule`), not from its name. The
   built-ins read answer ids only through equality and `>= 0`: the online ids differ in
   value from the recorded ones (which reserve 0 for the graded-correct
   answer) but give the same decisions wherever they give the same
   partition of positions into equal answers. They give another partition
   only where two *different* keys are both graded correct (the grader's
   equivalence, e.g. ``1/2`` and ``\\frac{1}{2}``): the recorded ids merge
   those into 0, an online run (which has no reference) cannot;
4. on stop the answer is forced as the probe forces it (the same prompt at
   that length, the trajectory's answer seed); otherwise thinking goes on.
   Dynasor-CoT decides on the probes *before* each chunk, so its probe at
   a boundary runs concurrently with the next chunk.

An FB method (budget forcing) is a cap: at `L(k)` it stops when `L(k+1) > cap` (the
latest boundary under the cap, as OTBench replays it), live at exactly the cap
thinking tokens. (A DR route is decided before the request starts: a cap of
0 or none.)

Under sampling, a chunked continuation restarts the request's random
stream, so it is a different draw from one long request: replaying a
stored trajectory is token-exact only under greedy decoding (`faithful`
says per trajectory). `SideJob.thinking` instead feeds the stored
thinking as given (no thinking is decoded): that checks the side requests,
the signals and the decisions exactly, whatever the sampling.
"""

from collections.abc import Sequence
from typing import Any

from otbench.probe.engines import Completion, GenRequest
from otbench.probe.grading import HESITATION_WORDS, hesitation_pattern, number_answers, probe_signals

from .._processor._control import Tables
from ._job import SideJob, SideResult, chunk_seed, field_seed  # noqa: F401  (re-exported)
from ._probes import ARRIVED, KINDS, TAGS, PeerProbes
from ._rule import FIELD_NAMES, RECORD, FieldRule, side_methods  # noqa: F401  (re-exported)
from .._request import OnlineControlError
from otbench.errors import ArgumentError

class _Traj:
    """The state machine of one trajectory (see `SideController`)."""

    def __init__(self, job: SideJob):
        self.job = job
        self.thinking: list[int] = []
        self.res = SideResult(signals={name: [] for name in FIELD_NAMES})
        self.k = 0                       # next decision index
        self.last_point = 0
        self.scanned = 0                 # live: block ends scanned up to here
        self.chunks = 0
        self.busy = False                # a thinking chunk or the answer is in flight
        self.done = False
        self.ended = False               # the model's own end came exactly at a decision point
        self.probe_sent: set[int] = set()
        self.probe_cost: dict[tuple[str, int], tuple[int, int]] = {}
        self.pending_probe: dict[tuple[str, int], int] = {}   # (probe, k) in flight -> its prefill
        self.scratch: dict = {}          # what a field probe's reading keeps between positions
        self.row = 0                     # its row id in the method's OnlineView

    def sig(self, name: str, k: int):
        s = self.res.signals[name]
        return s[k] if k < len(s) else None

    def put(self, k: int, vals: dict[str, float]) -> None:
        for name, v in vals.items():
            s = self.res.signals[name]
            while len(s) <= k:
                s.append(None)
            s[k] = v

    def have(self, k: int, probes: Sequence[str]) -> bool:
        """Every probe in `probes` has been read at `k`."""
        return all(self.sig(name, k) is not None for p in probes for name in ARRIVED[p])


class SideController:
    """Many trajectories under one field method, multiplexed on one engine `Stream` (module docstring).

    `fmt`: the compiled `ProbeFormat`; `tokenizer`: decodes probe answers
    (answer prefix included, as the grading lane decodes them); `b`: the
    live step target; `chunk`: live continuation tokens past `b`.
    """

    def __init__(self, stream: Any, fmt: Any, tokenizer: Any, rule: FieldRule, *, b: int,
                 thinking_limit: int, answer_limit: int, chunk: int = 16,
                 words: Sequence[str] = HESITATION_WORDS):
        self.stream, self.fmt, self.tok, self.rule = stream, fmt, tokenizer, rule
        self.tables = Tables.from_format(fmt)
        self.b, self.chunk = int(b), int(chunk)
        self.thinking_limit, self.answer_limit = int(thinking_limit), int(answer_limit)
        self.words = hesitation_pattern(words)
        self.native = bool(fmt.family.native_thinking)
        self.probes = rule.probe_kinds
        self.peers = PeerProbes(tokenizer, fmt, self.probes) if set(self.probes) - {"stp"} else None
        self._t: dict[Any, _Traj] = {}
        self._rows = 0                   # the next trajectory's row id in its OnlineView
        # prompt ids of a finished request served by the prefix cache (a stream may say)
        self._cached = stream.pop_cached_tokens

    # -- requests ---------------------------------------------------------------------
    def _submit(self, tag, req) -> None:
        try:
            self.stream.submit(tag, req)
        except (NotImplementedError, TypeError) as e:
            what = "generation with token log-probabilities" if getattr(req, "logprobs", False) \
                else "generation"
            raise OnlineControlError(f"{self.rule.name} needs {what} from the engine's stream, which "
                                     f"refused it: {str(e).splitlines()[0] if str(e) else type(e).__name__}"
                                     ) from None

    def _probe(self, key, t: _Traj, k: int) -> None:
        if k in t.probe_sent:
            return
        t.probe_sent.add(k)
        job = t.job
        L = t.res.points[k]
        for probe in self.probes:
            if probe == "stp":
                ids = self.fmt.probe_prompt(job.prompt, t.thinking, L)
                base = list(job.prompt) + t.thinking[:L]
                shared = 0
                for a, c in zip(ids, base):
                    if a != c:
                        break
                    shared += 1
                seed = job.probe_seeds[k] if job.probe_seeds is not None and k < len(job.probe_seeds) \
                    else chunk_seed(job.seed_answer, k + 1)
                req, pre = GenRequest(ids, 1, int(seed), self.answer_limit, self.fmt.answer_stop_ids,
                                      logprobs=self.rule.needs_conf), len(ids) - shared
            else:
                req, pre = self.peers.request(probe, list(job.prompt) + t.thinking[:L], field_seed(job, probe, k))
            t.pending_probe[(probe, k)] = pre
            t.res.probes += 1
            t.res.probe_prefill += pre
            self._submit((key, TAGS[probe], k), req)

    def _think(self, key, t: _Traj) -> None:
        job, n = t.job, len(t.thinking)
        if t.ended:
            self._end(key, t)
            return
        if job.lengths is not None:
            pts = self._points(job)
            target = pts[t.k] if t.k < len(pts) else self.thinking_limit
        elif self.rule.is_cap:
            target = min(self.thinking_limit, int(min(self.rule.cap(job), self.thinking_limit)))
        else:
            goal = t.last_point + self.b
            target = goal if n < goal else n + self.chunk
        target = min(target, self.thinking_limit)
        if job.thinking is not None:            # the stored thinking, as given
            if n >= len(job.thinking):
                self._end(key, t) if job.finished else self._limit(key, t)
                return
            got = list(job.thinking[n:target])
            stopped = n + len(got) >= len(job.thinking) and job.finished
            self._grow(key, t, got, next(iter(self.fmt.think_stop_ids), -1) if stopped else None)
            return
        if target <= n:
            self._limit(key, t)
            return
        t.busy = True
        self._submit((key, "t", t.chunks), GenRequest(list(job.prompt) + t.thinking, 1,
                                                      chunk_seed(job.seed_think, t.chunks), target - n,
                                                      self.fmt.think_stop_ids))
        t.chunks += 1

    def _answer(self, key, t: _Traj, context: Sequence[int]) -> None:
        t.busy = True
        self._submit((key, "a", 0), GenRequest(list(context), 1, int(t.job.seed_answer), self.answer_limit,
                                               self.fmt.answer_stop_ids))

    # -- transitions ------------------------------------------------------------------
    def _limit(self, key, t: _Traj) -> None:
        """Thinking reached the limit without ending: the probe's forced answer at full length."""
        t.res.position = len(t.res.points) if t.job.lengths is None else len(t.job.lengths) - 1
        self._answer(key, t, self.fmt.probe_prompt(t.job.prompt, t.thinking, len(t.thinking)))

    def _end(self, key, t: _Traj) -> None:
        """The model ended its thinking itself."""
        t.res.natural_end = True
        t.res.position = len(t.res.points) if t.job.lengths is None else len(t.job.lengths) - 1
        if self.native:
            self._answer(key, t, self.fmt.answer_context(t.job.prompt, t.thinking, True))
        else:                                   # the generic family's finished reply is its own answer
            t.res.answer_ids = tuple(t.thinking)
            self._finish(t)

    def _finish(self, t: _Traj) -> None:
        t.done = True
        t.res.thinking = tuple(t.thinking)

    def _settle(self, t: _Traj) -> SideResult:
        """The result once nothing of the trajectory is in flight."""
        # The rule's paid probes: DEER / consistency every probe decided on; Dynasor-CoT the
        # probes before the stop (OTBench's "before_stop"), all of them when it did not stop.
        last = self.rule.paid_through(t.res.position)
        for (probe, k), (pre, dec) in sorted(t.probe_cost.items(), key=lambda x: (x[0][1], x[0][0])):
            if k <= last or self.rule.record:
                if k not in t.res.paid:
                    t.res.paid.append(k)
                t.res.paid_prefill += pre
                if probe == "stp":
                    # OTBench's net rule reads the recorded answer_tokens signal: the same here
                    tokens = t.sig("answer_tokens", k)
                    dec = dec if tokens is None else tokens
                t.res.paid_decoded += int(dec)
        return t.res

    def _grow(self, key, t: _Traj, ids: Sequence[int], stop_id: int | None) -> None:
        t.thinking.extend(int(i) for i in ids)
        t.res.think_decoded += len(ids) + (stop_id is not None and t.job.thinking is None)
        if t.job.lengths is None and self.rule.probes and self._live_point(t):
            stop_id = None                      # the end came after the decision point: dropped
        if stop_id is not None:
            # The model's own end is never asked (OTBench's walk stops at n), except by the
            # record pass, which probes L(n) too.
            if not (self.rule.record and self._at_point(t)):
                self._end(key, t)
                return
            t.ended = True                      # decide at this last point (the record pass), then end
        self._advance(key, t)

    def _live_point(self, t: _Traj) -> bool:
        """Live: cut at the first block end >= b tokens after the last decision (tokens past it
        dropped; True when the cut dropped any)."""
        goal = t.last_point + self.b
        n = len(t.thinking)
        for i in range(max(goal - 1, t.scanned), n):
            if self.tables.ends_block(t.thinking, i):
                p = i + 1
                t.res.discarded += n - p
                del t.thinking[p:]
                t.scanned = p
                return p < n
        t.scanned = max(t.scanned, n)
        return False

    def _points(self, job: SideJob) -> Sequence[int]:
        """The stored decision lengths `L(0..n-1)`; the record pass also probes `L(n)`."""
        return job.lengths if self.rule.record else job.lengths[:len(job.lengths) - 1]

    def _at_point(self, t: _Traj) -> bool:
        n = len(t.thinking)
        if t.job.lengths is not None:
            pts = self._points(t.job)
            return t.k < len(pts) and n == pts[t.k]
        if self.rule.is_cap:
            return n >= self.rule.cap(t.job)
        if t.k == 0:
            return n == 0
        return n == t.scanned and n >= t.last_point + self.b and n > 0 and \
            self.tables.ends_block(t.thinking, n - 1)

    def _advance(self, key, t: _Traj) -> None:
        if t.done or t.busy:
            return
        n = len(t.thinking)
        if n >= self.thinking_limit and not self._at_point(t):
            self._limit(key, t)
            return
        if not self._at_point(t):
            self._think(key, t)
            return
        k = t.k
        if len(t.res.points) == k:
            t.res.points.append(n)
        if self.rule.probe_before(k):
            self._probe(key, t, k)
        if any(not t.have(j, self.probes) for j in self.rule.waits_for(k)):
            return                              # a probe is still in flight
        nxt = None
        if t.job.lengths is not None and k + 1 < len(t.job.lengths):
            nxt = t.job.lengths[k + 1]
        if self.rule.stop(t.res.signals, k, nxt, t.job, t.res.points, t.row) or (
                self.rule.is_cap and t.job.lengths is None):
            t.res.stop_length, t.res.position = n, k
            self._answer(key, t, self.fmt.probe_prompt(t.job.prompt, t.thinking, n))
            return
        t.k += 1
        t.last_point = n
        if self.rule.probe_after(k):
            self._probe(key, t, k)
        self._think(key, t)

    def _peer_done(self, t: _Traj, probe: str, k: int, c: Completion) -> None:
        """A field method's own probe arrived: read it as the probe stage does (`_probes`)."""
        t.pending_probe.pop((probe, k))
        t.res.probe_decoded += len(c.token_ids) + (c.stop_id is not None)
        by_position, paid = self.peers.read(probe, t.scratch, k, c, self.rule.name)
        t.probe_cost[(probe, k)] = (0, paid)    # the recorded *_tokens: prefill included
        for j, vals in by_position.items():
            t.put(j, vals)

    def _probe_done(self, key, t: _Traj, k: int, c: Completion) -> None:
        pre = t.pending_probe.pop(("stp", k))
        dec = len(c.token_ids) + (c.stop_id is not None)
        t.res.probe_decoded += dec
        t.probe_cost[("stp", k)] = (pre, dec)
        answer = [int(x) for x in c.token_ids]
        logprobs = None
        if self.rule.needs_conf:
            if c.logprobs is None:
                raise OnlineControlError(f"{self.rule.name} needs the side request's token "
                                         "log-probabilities (GenRequest.logprobs), which the engine's "
                                         "stream did not return")
            logprobs = [float(x) for x in c.logprobs]
        prefix = [int(x) for x in self.fmt.answer_prefix_ids]
        text = self.tok.decode(prefix + answer, skip_special_tokens=True)
        t.res.texts[k] = text
        # The probe stage's helper, called as its grading lane calls it (module docstring).
        s = probe_signals(t.job.task, answer, logprobs, prefix=prefix,
                          decode=lambda seq: self.tok.decode(seq, skip_special_tokens=True),
                          stopped=c.stop_id is not None, words=self.words, n_options=t.job.n_options,
                          text=text)
        t.res.keys[k] = s.key
        # Numbered over the positions probed so far, in position order (`number_answers`, nothing
        # graded): the same partition into equal answers whatever order the probes arrived in.
        order = sorted(t.res.keys)
        for j, a in zip(order, number_answers([t.res.keys[j] for j in order], [False] * len(order))):
            t.put(j, {"answer": float(a)})
        t.put(k, {"answer_conf": float(s.conf), "hesitation": float(s.hesitation),
                  "answer_tokens": float(s.tokens)})

    # -- driving ----------------------------------------------------------------------
    def add(self, key: Any, job: SideJob) -> None:
        """Start a trajectory under `key`."""
        if key in self._t:
            raise ArgumentError(f"trajectory {key!r} is already running")
        t = _Traj(job)
        t.row = self._rows
        self._rows += 1
        self._t[key] = t
        if job.lengths is not None and len(job.lengths) <= 1:
            # n = 0: nothing to decide (OTBench's walk asks no position); its own end follows.
            t.res.position = 0
        self._advance(key, t)

    def running(self) -> int:
        return sum(not t.done for t in self._t.values())

    def _deliver(self, tag, res) -> None:
        key, kind, i = tag
        t = self._t[key]
        if not isinstance(res, (list, tuple)):
            raise OnlineControlError(f"the engine's stream answered a {kind!r} request with "
                                     f"{type(res).__name__}; the controller needs completions")
        if kind == "t":
            t.busy = False
            c = res[0]
            self._grow(key, t, c.token_ids, c.stop_id)
        elif kind == "a":
            t.busy = False
            t.res.answer_ids = tuple(self.fmt.answer_prefix_ids) + tuple(int(x) for x in res[0].token_ids)
            t.res.answer_decoded = len(res[0].token_ids) + (res[0].stop_id is not None)
            self._finish(t)
        elif kind == "p":
            self._probe_done(key, t, i, res[0])
            self._advance(key, t)
        else:
            self._peer_done(t, KINDS[kind], i, res[0])
            self._advance(key, t)

    def step(self) -> list[tuple[Any, SideResult]]:
        """One round of engine work; the trajectories finished in it (key, result)."""
        out = []
        for tag, res in self.stream.poll():
            self._deliver(tag, res)
            if tag[1] in KINDS and tag[0] in self._t:
                self._t[tag[0]].res.side_cached += int(self._cached(tag) or 0)
        # A trajectory leaves once nothing of it is in flight (a Dynasor-CoT probe sent after
        # the last decision still arrives after the model's own end: OTBench pays it too).
        for key in [k for k, t in self._t.items() if t.done and not t.pending_probe]:
            out.append((key, self._settle(self._t.pop(key))))
        return out


def run_side(stream: Any, fmt: Any, tokenizer: Any, rule: FieldRule, jobs: Sequence[SideJob], *,
             b: int, thinking_limit: int, answer_limit: int, in_flight: int = 64,
             words: Sequence[str] = HESITATION_WORDS) -> list[SideResult]:
    """Run `jobs` under `rule` with at most `in_flight` trajectories at once; results in job order."""
    ctl = SideController(stream, fmt, tokenizer, rule, b=b, thinking_limit=thinking_limit,
                         answer_limit=answer_limit, words=words)
    out: list[SideResult | None] = [None] * len(jobs)
    nxt = 0
    while nxt < len(jobs) or ctl._t:
        while nxt < len(jobs) and len(ctl._t) < in_flight:
            ctl.add(nxt, jobs[nxt])
            nxt += 1
        for key, res in ctl.step():
            out[key] = res
        if ctl._t and not stream.in_flight() and not any(t.done for t in ctl._t.values()):
            raise OnlineControlError("the controller is waiting on results the engine's stream does "
                                     "not have in flight (a lost request)")
    return out  # type: ignore[return-value]
