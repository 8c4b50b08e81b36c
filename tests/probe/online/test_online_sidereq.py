"""The request-level controller (side requests) on a scripted Stream: each method's stop, case by case.

The fake engine plays one scripted trajectory per prompt: thinking in
10-token blocks (9 words, then a boundary token), a probe answer per
retained length with its tokens' log-probabilities (DEER's confidence);
it delivers its finished requests in a seeded random
order, a few per poll, so trajectories really interleave on one stream.
References are plain twins of the sources' rules (as in the analysis
tests) and, for the recorded signals, OTBench's own offline walk.
"""

import dataclasses
import math
import random
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from otbench.probe.engines import Completion, GenRequest, StreamBase
from otbench.probe.grading import number_answers, probe_signals
from otbench.probe.online import FieldRule, OnlineControlError, SideJob, Trajectory, run_side, signals_vs_recorded

WORD, BOUND, STOP, SEP, END, PREFIX, CLOSE, WAIT, EOS, JUNK, BOX = range(10, 21)
TEXT = {**{d: str(d) for d in range(10)}, WORD: " word", BOUND: ".\n\n", STOP: "</think>", SEP: "\n\n",
        END: "</think>", PREFIX: "\\boxed{", CLOSE: "}", WAIT: " Wait", EOS: "", JUNK: " so", BOX: " \\boxed{"}
V = 21
FINAL = (4, CLOSE)


class FakeTok:
    def decode(self, ids, skip_special_tokens=True):
        return "".join(TEXT[int(i)] for i in ids)


def fake_fmt():
    mask = np.zeros(V, bool)
    mask[BOUND] = True
    ends = np.zeros(V, bool)
    ends[[BOUND, SEP]] = True
    vocab = SimpleNamespace(mask=mask, ends_newline=ends, starts_newline=np.zeros(V, bool))

    class Fmt:
        family = SimpleNamespace(native_thinking=True)
        span = None
        signal_id = END
        think_stop_ids = (STOP,)
        separator_ids, end_ids, answer_prefix_ids, answer_stop_ids = (SEP,), (END,), (PREFIX,), (EOS,)

        def probe_prompt(self, prompt, thinking, L):
            return list(prompt) + list(thinking[:L]) + [SEP, END, PREFIX]

        def answer_context(self, prompt, thinking, finished):
            return list(prompt) + list(thinking) + [END, PREFIX]

    Fmt.vocab = vocab
    return Fmt()


def answer_ids(key, hes=False):
    """A probe answer: its key (an int, or None: nothing extracted), optionally hesitating.

    The hesitation comes before the answer's close (the shared definition reads the text through
    it): a first box holding " Wait", then the answer's box (the last one, which is extracted).
    """
    if key is None:
        return [JUNK] + ([WAIT] if hes else [])
    return ([WAIT, CLOSE, BOX] if hes else []) + [int(key) % 10, CLOSE]


def answer_tokens(ids):
    """The shared `answer_tokens`: through the answer's close, or every id and the stop id without an answer."""
    return len(ids) + (ids[0] == JUNK)


class Script:
    """One trajectory: `n` blocks (then its own end), per position a probe answer and a confidence."""

    def __init__(self, n, answers, hes, conf, finished=True):
        self.thinking = [WORD] * 9 + [BOUND]
        self.thinking = self.thinking * n + ([STOP] if finished else [])
        self.L = [10 * k for k in range(n + 1)]
        self.answers = {10 * k: answer_ids(a, h) for k, (a, h) in enumerate(zip(answers, hes))}
        self.conf = {10 * k: c for k, c in enumerate(conf)}


class FakeStream(StreamBase):
    """A Stream over scripts (prompt[0] - 100 names the script); results in a seeded random order."""

    def __init__(self, scripts, seed=0, no_logprobs=False, bad=False):
        self.scripts, self.rng = scripts, random.Random(seed)
        self.queue, self.log = [], []
        self.no_logprobs, self.bad = no_logprobs, bad

    def submit(self, tag, req):
        assert isinstance(req, GenRequest), "the controller sends generation requests only"
        self.queue.append((tag, req))
        self.log.append(req)

    def in_flight(self):
        return len(self.queue)

    def _run(self, req):
        p = list(req.prompt)
        s = self.scripts[p[0] - 100]
        if self.bad:
            return "nonsense"
        if p[-3:] == [SEP, END, PREFIX] or p[-2:] == [END, PREFIX]:
            if req.seed == 7:                       # the forced (or own) answer
                return [Completion(FINAL, EOS)]
            L = len(p) - 4
            ids = tuple(s.answers[L])
            # every answer token at the position's probability: the span's mean is conf[L]
            lp = tuple([math.log(s.conf[L])] * len(ids)) if req.logprobs and not self.no_logprobs else None
            return [Completion(ids, EOS, lp)]
        cur = p[1:]
        assert cur == s.thinking[:len(cur)], "a continuation must extend what was generated"
        out = []
        for t in s.thinking[len(cur):len(cur) + req.max_tokens]:
            if t in req.stop_ids:
                return [Completion(tuple(out), t)]
            out.append(t)
        return [Completion(tuple(out), None)]

    def poll(self):
        if not self.queue:
            return []
        self.rng.shuffle(self.queue)
        k = self.rng.randint(1, len(self.queue))
        done, self.queue = self.queue[:k], self.queue[k:]
        return [(tag, self._run(req)) for tag, req in done]


def run(scripts, rule, *, stored=False, live=False, b=10, seed=0, in_flight=64, limit=1000):
    jobs = [SideJob(prompt=(100 + i,), seed_think=1, seed_answer=7,
                    probe_seeds=tuple(range(1000, 1000 + len(s.L))),
                    lengths=None if live else tuple(s.L),
                    thinking=tuple(t for t in s.thinking if t != STOP) if stored else None,
                    finished=True)
            for i, s in enumerate(scripts)]
    stream = FakeStream(scripts, seed)
    res = run_side(stream, fake_fmt(), FakeTok(), rule, jobs, b=b, thinking_limit=limit, answer_limit=8,
                   in_flight=in_flight)
    return res, stream


# -- plain twins of the sources' rules ----------------------------------------------

def dynasor_twin(ans, hes, n, w):
    for k in range(n):
        win = list(range(k - w, k))
        if k >= w >= 1 and all(ans[j] is not None for j in win) and len({ans[j] for j in win}) == 1 \
                and not any(hes[j] for j in win):
            return k
    return n


def deer_twin(conf, n, theta, max_judge=10):
    return next((k for k in range(1, min(n, max_judge + 1)) if conf[k] > theta), n)


def consistency_twin(ans, n, w):
    for k in range(1, n):
        win = list(range(k - w, k + 1))
        if w >= 1 and k - w >= 1 and all(ans[j] is not None for j in win) and len({ans[j] for j in win}) == 1:
            return k
    return n


def _one(n, answers, hes=None, conf=None):
    hes = hes or [False] * (n + 1)
    conf = conf or [0.5] * (n + 1)
    return Script(n, answers, hes, conf)


# -- case by case --------------------------------------------------------------------

def test_dynasor_stops_once_the_last_w_probes_agree():
    s = _one(8, [None, 3, 5, 5, 5, 5, 5, 5, 5])
    (r,), stream = run([s], FieldRule("dynasor-cot-stp", 2))
    # probes at 2 and 3 agree: decided at k = 4, before the chunk after L(4)
    assert (r.position, r.stop_length) == (4, 40)
    assert r.thinking == tuple(s.thinking[:40]) and r.answer_ids == (PREFIX,) + FINAL
    # paid: the probes before the stop (0..3), all that were sent (none is sent at the stop), at
    # the recorded answer_tokens (through the answer's close); decoded: every id and the stop id
    assert r.paid_decoded == sum(answer_tokens(s.answers[10 * j]) for j in range(4)) == 2 + 2 * 3
    assert r.probes == 4 and r.probe_decoded == sum(len(s.answers[10 * j]) + 1 for j in range(4))
    assert r.net_tokens == 40 + r.paid_prefill + r.paid_decoded and r.paid_prefill == 4 * 3


def test_dynasor_hesitation_and_missing_answers_delay_the_stop():
    hes = [False, False, True, False, False, False, False, False, False]
    s = _one(8, [7, 7, 7, 7, None, 7, 7, 7, 7], hes)
    (r,), _ = run([s], FieldRule("dynasor-cot-stp", 2))
    # 0,1 agree -> stop at 2 would need no hesitation at 0,1: yes -> k = 2
    assert r.position == 2
    (r,), _ = run([s], FieldRule("dynasor-cot-stp", 3))
    # windows of 3 ending before k: {0,1,2} hesitates at 2, {1,2,3} too, {2,3,4} too, {3,4,5} misses 4, ... {5,6,7}
    assert r.position == 8 == dynasor_twin(s_answers(s), hes, 8, 3)


def s_answers(s):
    out = []
    for L in s.L:
        ids = s.answers[L]
        out.append(None if ids[0] == JUNK else ids[0])
    return out


def test_deer_checks_only_transitions_1_to_10():
    conf = [0.99] + [0.4] * 10 + [0.99, 0.99]          # above θ at k = 0 and at the 11th transition
    s = _one(12, [1] * 13, conf=conf)
    (r,), stream = run([s], FieldRule("deer-stp", 0.9))
    assert r.stop_length is None and r.position == 12 and r.natural_end
    side = [q for q in stream.log if q.seed in range(1000, 1100)]
    assert {len(q.prompt) - 4 for q in side} == {10 * k for k in range(1, 11)}   # k = 0 and k > 10 never decoded
    # the confidence comes with each side request's own completion: one request per checked transition
    assert len(side) == r.probes == 10 and all(q.logprobs for q in side)
    conf[6] = 0.95
    (r,), _ = run([_one(12, [1] * 13, conf=conf)], FieldRule("deer-stp", 0.9))
    assert (r.position, r.stop_length) == (6, 60)
    (r,), _ = run([_one(12, [1] * 13, conf=conf)], FieldRule("deer-stp", 0.95))   # strictly above θ
    assert r.stop_length is None


def test_answer_consistency_needs_w_unchanged_boundaries_from_position_1():
    s = _one(8, [2, 2, 3, 3, 3, 1, 1, 1, 1])
    (r,), _ = run([s], FieldRule("answer-consistency", 2))
    assert r.position == 4                               # answers at 2, 3, 4 equal
    (r,), _ = run([s], FieldRule("answer-consistency", 1))
    assert r.position == 3                               # equal at positions 2 and 3 (0 is never probed)


def test_budget_forcing_stops_at_the_latest_boundary_under_the_cap():
    s = _one(6, [1] * 7)
    for cap, k in ((0, 0), (25, 2), (30, 3), (59, 5), (60, 6), (1000, 6)):
        (r,), stream = run([s], FieldRule("budget-forcing", cap))
        assert r.position == k and (r.stop_length == 10 * k if k < 6 else r.stop_length is None)
        assert r.probes == 0 and not any(q.seed in range(1000, 1100) for q in stream.log if isinstance(q, GenRequest))


def test_live_budget_forcing_is_an_exact_token_cap():
    s = _one(6, [1] * 7)
    # at 60 the cap comes before the model's own end (its 61st token), as s1's max_tokens does
    for cap, stop in ((0, 0), (25, 25), (59, 59), (60, 60), (61, None), (500, None)):
        (r,), stream = run([s], FieldRule("budget-forcing", cap), live=True)
        assert r.stop_length == stop and r.probes == 0 and r.discarded == 0
        assert r.thinking == tuple(s.thinking[:60 if stop is None else stop])
        assert r.answer_ids == (PREFIX,) + FINAL and r.natural_end == (stop is None)


def test_live_points_are_block_ends_b_apart_and_overshoot_is_discarded():
    s = _one(6, [9, 1, 2, 3, 4, 5, 6])
    (r,), _ = run([s], FieldRule("answer-consistency", 5), live=True, b=15)
    assert r.points == [0, 20, 40] and r.discarded == 2 * 11 and r.natural_end
    assert r.thinking == tuple(s.thinking[:60])


def test_stored_and_generated_thinking_agree_and_record_probes_every_position():
    s = _one(5, [1, 2, 2, 2, 3, 3], conf=[0.1, 0.2, 0.3, 0.4, 0.5, 0.6])
    (a,), _ = run([s], FieldRule("answer-consistency", 2))
    (b,), _ = run([s], FieldRule("answer-consistency", 2), stored=True)
    assert (a.position, a.stop_length, a.thinking) == (b.position, b.stop_length, b.thinking) == (3, 30, a.thinking)
    (r,), _ = run([s], FieldRule("record", 0), stored=True)
    assert r.stop_length is None and r.points == s.L
    assert r.signals["answer_conf"] == pytest.approx([0.1, 0.2, 0.3, 0.4, 0.5, 0.6])
    ids = r.signals["answer"]
    assert ids[0] != ids[1] and ids[1] == ids[2] == ids[3] and ids[4] == ids[5] != ids[1]
    assert r.signals["answer_tokens"] == [2.0] * 6


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 9), st.data())
def test_random_scripts_follow_the_twins_interleaved(n, data):
    k_ans = st.one_of(st.none(), st.integers(0, 2))
    scripts, refs = [], {"dynasor-cot-stp": [], "answer-consistency": [], "deer-stp": []}
    w = data.draw(st.integers(1, 3))
    theta = data.draw(st.sampled_from([0.3, 0.5, 0.7]))
    for _ in range(data.draw(st.integers(1, 4))):
        m = data.draw(st.integers(0, n))
        ans = data.draw(st.lists(k_ans, min_size=m + 1, max_size=m + 1))
        hes = data.draw(st.lists(st.booleans(), min_size=m + 1, max_size=m + 1))
        conf = data.draw(st.lists(st.sampled_from([0.2, 0.5, 0.7, 0.9]), min_size=m + 1, max_size=m + 1))
        scripts.append(Script(m, ans, hes, conf))
        refs["dynasor-cot-stp"].append(dynasor_twin(ans, hes, m, w))
        refs["answer-consistency"].append(consistency_twin(ans, m, w))
        refs["deer-stp"].append(deer_twin(conf, m, theta))
    seed = data.draw(st.integers(0, 3))
    for method, th in (("dynasor-cot-stp", w), ("answer-consistency", w), ("deer-stp", theta)):
        res, _ = run(scripts, FieldRule(method, th), seed=seed, in_flight=data.draw(st.integers(1, 4)))
        assert [r.position for r in res] == refs[method], method
        for r, s, k in zip(res, scripts, refs[method]):
            assert r.thinking == tuple(s.thinking[:s.L[k]]) if k < len(s.L) - 1 else r.natural_end


def test_recorded_signals_give_otbenchs_offline_stops():
    """The record pass's signals as a measurement set: OTBench's walk stops where the controller did."""
    from otbench.analysis import from_ragged, ragged
    from otbench.analysis.bench import load_method, offline_point, resolve, signal_tokens
    from otbench.analysis.methods._features import units_of
    from otbench.analysis.bench._walk import dee_positions

    rng = random.Random(3)
    scripts = []
    for _ in range(12):
        m = rng.randint(1, 9)
        scripts.append(Script(m, [rng.choice([None, 0, 1, 1, 2]) for _ in range(m + 1)],
                              [rng.random() < 0.2 for _ in range(m + 1)],
                              [rng.choice([0.3, 0.6, 0.8, 0.95]) for _ in range(m + 1)]))
    rec, _ = run(scripts, FieldRule("record", 0), stored=True)
    T = len(scripts)
    ms = from_ragged(model=["m"] * T, group=["g"] * T, question=[f"q{i:02d}" for i in range(T)],
                     trajectory=np.zeros(T, dtype=np.int64), probes=np.full(T, 1),
                     L=ragged([s.L for s in scripts], np.int64), C=ragged([[0] * len(s.L) for s in scripts], np.int64),
                     y=np.zeros(T, dtype=np.int64), split=["test"] * T,
                     signals={nm: ragged([r.signals[nm] for r in rec], np.float64)
                              for nm in ("answer", "answer_conf", "hesitation", "answer_tokens")},
                     synthetic=True)
    unit, units = units_of(ms, None)
    for method, theta in (("dynasor-cot-stp", 2), ("dynasor-cot-stp", 3), ("deer-stp", 0.7), ("answer-consistency", 1),
                          ("answer-consistency", 2)):
        m = load_method(method)
        m.fit(ms, ms)
        off = dee_positions(ms, unit, units, resolve(m), float(theta)).tolist()
        on, _ = run(scripts, FieldRule(method, theta), seed=5)
        assert [r.position for r in on] == off, method
        # net cost: the probes the controller paid are OTBench's paid decisions, and their decoded
        # tokens are its recorded ones (its prefill is declared; online it is measured: 3 per probe)
        decoded = dataclasses.replace(m.signal_cost, prefill=0, flops_tokens=0)
        one = dataclasses.replace(m.signal_cost, prefill=1, decoded=0, flops_tokens=0, recorded=None)
        assert [len(r.paid) for r in on] == signal_tokens(ms, "dee", one, np.array(off), block=1).tolist(), method
        assert [r.paid_decoded for r in on] == signal_tokens(ms, "dee", decoded, np.array(off), block=1).tolist()
        assert all(r.paid_prefill == 3 * len(r.paid) for r in on)
        # the same point as the online certificate asks for it (rows of the test split only)
        part = dataclasses.replace(ms, split=np.array([0, 1] + [2] * (T - 2)))
        pt = offline_point(part, method, float(theta))
        assert pt["rows"].tolist() == list(range(2, T)) and pt["k"].tolist() == off[2:]
        assert pt["paid"].tolist() == [len(r.paid) for r in on[2:]]
        assert pt["prefill"] == m.signal_cost.prefill
        # the side requests' signals are the recorded ones at every position both read
        trajs = [Trajectory(f"q{i:02d}", 0, (100 + i,), tuple(t for t in sc.thinking if t != STOP), tuple(sc.L), 1, 7)
                 for i, sc in enumerate(scripts)]
        d = signals_vs_recorded(ms, list(range(T)), trajs, on)
        n = sum(len(r.keys) for r in on)
        assert d["positions"] == n > 0 and d["trajectories_same_answer_partition"] == d["trajectories"], method
        assert d["trajectories"] == sum(bool(r.keys) for r in on)
        assert d["answer_classes_equal"] == d["hesitation_equal"] == d["answer_tokens_equal"] == n
        assert d["answer_conf_max_abs_diff"] == 0.0
    # Two different keys both graded correct: the recorded ids merge them (0), online they differ.
    i = next(i for i, sc in enumerate(scripts) if len({a for a in s_answers(sc) if a is not None}) >= 2)
    ans = np.array(ms.signals["answer"])
    row = ans[i, :len(scripts[i].L)]
    ans[i, :len(scripts[i].L)] = np.where(row >= 0, 0.0, row)
    merged = dataclasses.replace(ms, signals={**ms.signals, "answer": ans})
    d = signals_vs_recorded(merged, list(range(T)), trajs, rec)       # the record pass reads every position
    assert d["trajectories"] == T and d["trajectories_same_answer_partition"] == T - 1
    assert d["answer_classes_equal"] < d["positions"]


# -- signals and refusals ------------------------------------------------------------

def test_signals_are_the_probe_stages_helper():
    """Each position's signals are `probe_signals` called as the probe's grading lane calls it."""
    answers = [None, 3, 3, None, 5, 3]
    hes = [True, False, True, False, False, True]
    conf = [0.2, 0.5, 0.7, 0.9, 0.95, 0.3]
    s = Script(5, answers, hes, conf)
    (r,), _ = run([s], FieldRule("record", 0), stored=True)
    keys = []
    for k, L in enumerate(s.L):
        ids = s.answers[L]
        ref = probe_signals("math", ids, [math.log(conf[k])] * len(ids), prefix=[PREFIX],
                            decode=FakeTok().decode, stopped=True)
        keys.append(ref.key)
        assert r.keys[k] == ref.key and r.texts[k] == FakeTok().decode([PREFIX] + ids)
        assert (r.signals["answer_conf"][k], r.signals["hesitation"][k], r.signals["answer_tokens"][k]) == \
            (pytest.approx(ref.conf), float(ref.hesitation), float(ref.tokens))
    assert keys == [None, "3", "3", None, "5", "3"]
    assert r.signals["hesitation"] == [1.0, 0.0, 1.0, 0.0, 0.0, 1.0]
    # numbered as the probe numbers them, nothing graded: first appearance from 1, -1 for none
    assert r.signals["answer"] == [float(a) for a in number_answers(keys, [False] * 6)] == [-1, 1, 1, -1, 2, 1]


def test_refusals_are_one_line():
    for bad in (("thinkbrake-onectx", 1.0), ("deer-stp", float("nan")), ("budget-forcing", -1.0)):
        with pytest.raises(OnlineControlError) as e:
            FieldRule(*bad)
        assert "\n" not in str(e.value)
    s = _one(3, [1] * 4)
    jobs = [SideJob(prompt=(100,), seed_think=1, seed_answer=7, lengths=tuple(s.L))]
    with pytest.raises(OnlineControlError, match="log-probabilities") as e:
        run_side(FakeStream([s], no_logprobs=True), fake_fmt(), FakeTok(), FieldRule("deer-stp", 0.5), jobs,
                 b=10, thinking_limit=100, answer_limit=8)
    assert "\n" not in str(e.value)
    with pytest.raises(OnlineControlError, match="answered") as e:
        run_side(FakeStream([s], bad=True), fake_fmt(), FakeTok(), FieldRule("dynasor-cot-stp", 2), jobs,
                 b=10, thinking_limit=100, answer_limit=8)
    assert "\n" not in str(e.value)


class LateProbes(FakeStream):
    """Delivers side requests only once no thinking or answer request is waiting."""

    def poll(self):
        other = [(t, r) for t, r in self.queue if t[1] != "p"]
        pick = other[:1] or self.queue[:1]
        self.queue = [x for x in self.queue if x not in pick]
        return [(tag, self._run(req)) for tag, req in pick]


def test_a_probe_arriving_after_the_models_own_end_is_still_paid():
    s = _one(5, [1, 2, 1, 2, 1, 2])          # never two equal in a row: Dynasor never stops
    jobs = [SideJob(prompt=(100,), seed_think=1, seed_answer=7, lengths=tuple(s.L))]
    (r,) = run_side(LateProbes([s]), fake_fmt(), FakeTok(), FieldRule("dynasor-cot-stp", 2), jobs, b=10,
                    thinking_limit=1000, answer_limit=8)
    assert r.stop_length is None and r.natural_end and r.position == 5
    assert r.paid == [0, 1, 2, 3, 4] and r.paid_decoded == 5 * 2 and r.probes == 5
