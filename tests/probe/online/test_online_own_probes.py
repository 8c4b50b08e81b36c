"""The side-request controller runs `dynasor-cot` and `deer` on their own probes (issue 37).

A scripted stream answers Dynasor-CoT's probe (its suffix, 20 tokens at its sampling, the family's
answer stops) and DEER's trial answer (its prompt, 20 tokens decoded without stops, with
log-probabilities) per retained length. The controller must send exactly the probe stage's requests
(`otbench.probe.stp.peer_request`, the seeds `SideJob.field_seeds`), read them as the probe stage
does, stop where OTBench's offline walk stops on the same recorded signals, and pay the recorded
tokens of the probes before its stop.
"""

import math
import random
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from otbench.analysis import from_ragged, ragged
from otbench.analysis.bench import load_method, resolve
from otbench.analysis.bench._walk import dee_positions
from otbench.analysis.methods._features import units_of
from otbench.probe.engines import Completion, GenRequest, StreamBase
from otbench.probe.grading import (
    DEER_PROMPT,
    DYNASOR_SAMPLING,
    DYNASOR_SUFFIX,
    deer_trial,
    dynasor_agreement,
    dynasor_probe,
)
from otbench.probe.online import FieldRule, OnlineControlError, SideJob, run_side

WORD, BOUND, STOP, CLOSE, HMM, EOS, SUFD, SUFE, OPEN, SEP, END, PREFIX = range(10, 22)
TEXT = {**{d: str(d) for d in range(10)}, WORD: " word", BOUND: ".\n\n", STOP: "</think>", CLOSE: "}",
        HMM: " hmm", EOS: "", SUFD: DYNASOR_SUFFIX, SUFE: DEER_PROMPT, OPEN: "{", SEP: "\n\n",
        END: "</think>", PREFIX: "\\boxed{"}
FINAL = (4, CLOSE)


class Tok:
    def decode(self, ids, skip_special_tokens=True):
        return "".join(TEXT[int(i)] for i in ids)

    def encode(self, text, add_special_tokens=False):
        return {DYNASOR_SUFFIX: [SUFD], DEER_PROMPT: [SUFE]}[text]


def _vocab(V=22):
    mask, ends = np.zeros(V, bool), np.zeros(V, bool)
    mask[BOUND] = ends[[BOUND, SEP]] = True
    return SimpleNamespace(mask=mask, ends_newline=ends, starts_newline=np.zeros(V, bool))


class Fmt:
    family = SimpleNamespace(native_thinking=True)
    span = None
    signal_id = END
    think_stop_ids = (STOP,)
    separator_ids, end_ids, answer_prefix_ids, answer_stop_ids = (SEP,), (END,), (PREFIX,), (EOS,)
    vocab = _vocab()

    def probe_prompt(self, prompt, thinking, L):
        return list(prompt) + list(thinking[:L]) + [SEP, END, PREFIX]

    def answer_context(self, prompt, thinking, finished):
        return list(prompt) + list(thinking) + [END, PREFIX]


def dyn_ids(a):
    """A Dynasor probe's decoded ids: (answer digit or None, uncertain)."""
    key, unc = a
    body = [WORD] if key is None else [key, CLOSE]
    return body + ([HMM] if unc else [])


def deer_ids(conf):
    """A DEER trial answer decoded without stops: '{4}.\\n\\n' then words, 20 tokens; the
    probabilities of tokens 1.. are `conf` (the '{' at 0.5)."""
    ids = [OPEN, 4, CLOSE, BOUND] + [WORD] * 16
    return ids, [math.log(0.5)] + [math.log(conf)] * 19


class Script:
    def __init__(self, n, dyn, conf):
        self.thinking = ([WORD] * 9 + [BOUND]) * n + [STOP]
        self.L = [10 * k for k in range(n + 1)]
        self.dyn = {10 * k: dyn_ids(a) for k, a in enumerate(dyn)}
        self.conf = {10 * k: c for k, c in enumerate(conf)}


class Stream(StreamBase):
    def __init__(self, scripts, seed=0):
        self.scripts, self.rng, self.queue, self.log = scripts, random.Random(seed), [], []

    def submit(self, tag, req):
        assert isinstance(req, GenRequest)
        self.queue.append((tag, req))
        self.log.append((tag, req))

    def in_flight(self):
        return len(self.queue)

    def _run(self, req):
        p = list(req.prompt)
        s = self.scripts[p[0] - 100]
        if p[-1] == SUFD:
            return [Completion(tuple(s.dyn[len(p) - 2]), EOS)]
        if p[-1] == SUFE:
            ids, lps = deer_ids(s.conf[len(p) - 2])
            return [Completion(tuple(ids), None, tuple(lps))]
        if p[-2:] == [END, PREFIX] or p[-3:] == [SEP, END, PREFIX]:
            return [Completion(FINAL, EOS)]
        cur = p[1:]
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


def jobs_of(scripts):
    return [SideJob(prompt=(100 + i,), seed_think=1, seed_answer=7, lengths=tuple(s.L),
                    field_seeds={"dynasor": tuple(range(500, 500 + len(s.L))),
                                 "deer": tuple(range(900, 900 + len(s.L)))})
            for i, s in enumerate(scripts)]


def recorded(scripts):
    """The set the probe stage would record on these scripts (the probe stage's readings)."""
    dec = Tok().decode
    sig = {nm: [] for nm in ("dynasor_window", "dynasor_uncertain", "dynasor_tokens", "deer_conf",
                             "deer_tokens")}
    for s in scripts:
        probes = [dynasor_probe(s.dyn[L], True, decode=dec, context=[SUFD]) for L in s.L]
        sig["dynasor_window"].append(dynasor_agreement([p.answer for p in probes])[1])
        sig["dynasor_uncertain"].append([int(p.uncertain) for p in probes])
        sig["dynasor_tokens"].append([p.decoded + 1 for p in probes])
        trials = [deer_trial(*deer_ids(s.conf[L]), decode=dec, eos=[EOS], context=[SUFE]) for L in s.L]
        sig["deer_conf"].append([t.conf for t in trials])
        sig["deer_tokens"].append([t.decoded + 1 for t in trials])
    n = len(scripts)
    return from_ragged(model=["m"] * n, group=["g"] * n, question=[f"q{i}" for i in range(n)],
                       trajectory=np.zeros(n, dtype=np.int64), probes=np.full(n, 4),
                       L=ragged([s.L for s in scripts], np.int64),
                       C=ragged([[0] * len(s.L) for s in scripts], np.int64), y=np.zeros(n, dtype=np.int64),
                       split=["test"] * n, signals={k: ragged(v, np.float64) for k, v in sig.items()},
                       synthetic=True)


def offline_stops(ms, name, theta):
    unit, units = units_of(ms, None)
    m = load_method(name)
    return dee_positions(ms, unit, units, resolve(m), theta).tolist()


def _draw(rng, n):
    dyn = [(rng.choice([None, 3, 3, 3, 5]), rng.random() < 0.2) for _ in range(n + 1)]
    return Script(n, dyn, [rng.choice([0.3, 0.6, 0.8, 0.97]) for _ in range(n + 1)])


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 4))
def test_online_stops_are_otbenchs_on_the_same_probes(seed, w):
    rng = random.Random(seed)
    scripts = [_draw(rng, rng.randint(0, 9)) for _ in range(5)]
    ms = recorded(scripts)
    for name, theta in (("dynasor-cot", float(w)), ("deer", (0.5, 0.7, 0.9, 0.95)[w - 1])):
        stream = Stream(scripts, seed)
        res = run_side(stream, Fmt(), Tok(), FieldRule(name, theta), jobs_of(scripts), b=10,
                       thinking_limit=1000, answer_limit=8)
        want = offline_stops(ms, name, theta)
        assert [r.position for r in res] == want
        tokens = "dynasor_tokens" if name == "dynasor-cot" else "deer_tokens"
        for i, (r, k) in enumerate(zip(res, want)):
            n = int(ms.n[i])
            # what OTBench's net rule charges for a stop at k
            paid = range(k) if name == "dynasor-cot" else range(1, min(k, n - 1) + 1)
            assert r.paid_prefill + r.paid_decoded == sum(int(ms.signals[tokens][i, j]) for j in paid)
            assert r.net_tokens == scripts[i].L[k] + r.paid_prefill + r.paid_decoded
            for nm in ("dynasor_window", "dynasor_uncertain", "deer_conf"):
                for j, v in enumerate(r.signals[nm]):
                    if v is not None:
                        assert v == float(ms.signals[nm][i, j]), (nm, i, j)


def test_the_requests_are_the_probe_stages():
    from otbench.probe.stp import peer_request

    scripts = [Script(6, [(3, False)] * 7, [0.1] * 7)]
    for name, tag, seeds in (("dynasor-cot", "d", 500), ("deer", "e", 900)):
        stream = Stream(scripts)
        run_side(stream, Fmt(), Tok(), FieldRule(name, 3.0 if tag == "d" else 0.99), jobs_of(scripts),
                 b=10, thinking_limit=1000, answer_limit=8)
        sent = [(t, r) for t, r in stream.log if t[1] == tag]
        assert sent and all(t[1] in ("d", "e", "t", "a") for t, _ in stream.log)
        assert not [t for t, _ in stream.log if t[1] == "p"]        # otbench's STP probe is not sent
        for (key, _, k), req in sent:
            head = [100] + scripts[0].thinking[:10 * k]
            want = peer_request("dynasor" if tag == "d" else "deer", head, [SUFD if tag == "d" else SUFE],
                                seeds + k, (EOS,))
            assert req == want
        if tag == "d":
            assert sent[0][1].sampling.temperature == DYNASOR_SAMPLING["temperature"]
        else:
            assert sent[0][1].ignore_eos and sent[0][1].logprobs and sent[0][1].stop_ids == ()
            assert sorted(k for (_, _, k), _ in sent) == list(range(1, 6))   # k = 1 .. n - 1


def test_a_set_without_the_own_probe_is_refused_with_the_key_to_set(tmp_path):
    from otbench.probe.online import certify_field

    ms = recorded([Script(3, [(3, False)] * 4, [0.1] * 4)])
    bare = type(ms)(**{**ms.__dict__, "signals": {}})
    with pytest.raises(OnlineControlError, match=r"probe.field_probes = \['dynasor'\].*dynasor-cot-stp"):
        certify_field(tmp_path, bare, lambda m: {}, method="dynasor-cot", theta=2.0, engine=object())
