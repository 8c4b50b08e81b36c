"""Both engines on a tiny random Qwen3-style model: same job, same measurements (SPEC §3, §6.3).

One vLLM engine per test session (starting it takes ~30 s on CPU) and one
transformers engine; greedy decoding makes the two comparable token by token.
"""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from otbench.analysis.measurement._segment import segment  # noqa: E402
from otbench.probe.config._family import Sampling, load_family, load_instructions  # noqa: E402
from otbench.probe.data import sum_questions  # noqa: E402
from otbench.probe.engines._interface import EngineConfig, GenRequest, StreamBase, open_engine  # noqa: E402
from otbench.probe.grading._batch import resolve_grader  # noqa: E402
from otbench.probe.stp._direct import encode_prompts  # noqa: E402
from otbench.probe.stp._loop import RunStats, probe_units  # noqa: E402
from otbench.probe.tokens._probe_prompts import compile_format  # noqa: E402
from otbench.probe.tokens._vocab import build_vocabulary  # noqa: E402

GREEDY = Sampling(temperature=0.0, top_p=1.0, top_k=0, presence_penalty=1.5)
SAMPLED = Sampling(temperature=1.0, top_p=0.9, top_k=40, presence_penalty=0.5)


@pytest.fixture(scope="session")
def vllm_engine(tiny_model):
    pytest.importorskip("vllm")
    e = open_engine(EngineConfig(kind="vllm", model=str(tiny_model), dtype="float32", max_model_len=512,
                                 block_size=32, kv_cache_gib=1))
    yield e
    e.close()


@pytest.fixture(scope="session")
def setup(hf_engine):
    tok = hf_engine.tokenizer()
    vocab = build_vocabulary(tok, hf_engine.vocab_size())
    fmt = compile_format(load_family("qwen3-thinking"), tok, vocab)
    qs = sum_questions(2, seed=1)
    prompts = encode_prompts(fmt, tok, qs, load_instructions())
    return tok, fmt, qs, prompts


def _probe(engine, setup, sampling, units=((0, 0), (0, 1), (1, 0))):
    tok, fmt, qs, prompts = setup
    stats = RunStats()
    res = probe_units(engine, fmt, model="tiny", questions=qs, prompts=prompts, units=list(units),
                      P=2, b=8, thinking_limit=40, answer_limit=6, sampling=sampling,
                      grade_batch=resolve_grader("minimal")[1], tokenizer=tok, stats=stats)
    return res, stats


@pytest.fixture(scope="session")
def greedy_runs(hf_engine, vllm_engine, setup):
    return _probe(hf_engine, setup, GREEDY)[0], _probe(vllm_engine, setup, GREEDY)


def test_greedy_job_is_the_same_on_both_engines(greedy_runs):
    hf, (vl, _) = greedy_runs
    for a, b in zip(hf, vl):
        # token ids, positions, probe answers and grades are identical ...
        assert (a.thinking, a.stop_id, a.L, a.C, a.probe_tokens, a.probe_status, a.answer, a.y) == \
               (b.thinking, b.stop_id, b.L, b.C, b.probe_tokens, b.probe_status, b.answer, b.y)
        assert a.other_id == b.other_id
        # ... and the signals agree to float32 rounding of the two engines' kernels
        # (measured differences ~1e-5 nats on this model)
        np.testing.assert_allclose(a.logp_end, b.logp_end, atol=1e-3)
        np.testing.assert_allclose(a.logp_other, b.logp_other, atol=1e-3)
        # the own-context signal and the field signals (issues 27, 28): vLLM's sampled-token
        # log-probabilities (logprobs=0, raw mode) are the transformers engine's raw ones
        np.testing.assert_allclose(a.logp_end_own, b.logp_end_own, atol=1e-3)
        np.testing.assert_allclose(a.logp_other_own, b.logp_other_own, atol=1e-3)
        assert (a.answer_id, a.hesitation, a.answer_tokens) == (b.answer_id, b.hesitation, b.answer_tokens)
        assert len(a.answer_conf) == a.n + 1
        np.testing.assert_allclose(a.answer_conf, b.answer_conf, atol=1e-3)


def test_units_are_consistent(greedy_runs, setup):
    tok, fmt, qs, prompts = setup
    for u in greedy_runs[0]:
        # L is the segmentation of the stored thinking ids; every position has P answers
        assert list(u.L) == segment(np.asarray(u.thinking), fmt.vocab.mask, 8).tolist()
        assert all(len(p) == 2 for p in u.probe_tokens) and len(u.probe_tokens) == u.n + 1
        assert all(0 <= c <= 2 for c in u.C)
        assert u.C == tuple(sum(s == "ok" for s in st) for st in u.probe_status)
        assert u.finished == (u.stop_id in fmt.think_stop_ids)
        assert len(u.thinking) <= 40


def test_signals_match_a_direct_forward_pass(greedy_runs, setup, tiny_model):
    from transformers import AutoModelForCausalLM

    tok, fmt, qs, prompts = setup
    model = AutoModelForCausalLM.from_pretrained(str(tiny_model), dtype=torch.float32).eval()
    u = greedy_runs[1][0][0]
    q = [q.id for q in qs].index(u.question)
    for k, Lk in enumerate(u.L):
        ctx = fmt.signal_context(prompts[q], u.thinking, Lk)
        with torch.no_grad():
            lp = torch.log_softmax(model(torch.tensor([ctx])).logits[0, -1].double(), -1)
        end = fmt.signal_id
        assert abs(float(lp[end]) - u.logp_end[k]) < 1e-3
        lp[end] = -np.inf
        assert int(torch.argmax(lp)) == u.other_id[k]
        assert abs(float(lp.max()) - u.logp_other[k]) < 1e-3


def test_prefix_cache_serves_the_probes(greedy_runs):
    _, (_, stats) = greedy_runs
    # the probes of a trajectory share its prompt and prefix: the cache must serve them
    assert stats.cache_queries > 0 and stats.cache_hits > 0
    assert stats.cache_hits <= stats.cache_queries


def _expected_counts(units, setup, greedy: bool):
    """Requests, prompt ids and decoded-token bounds per phase, recomputed from the units alone."""
    tok, fmt, qs, prompts = setup
    P = 2
    exp = {p: {"requests": 0, "prompt": 0, "lo": 0, "hi": 0} for p in ("think", "probe", "signal")}
    for u in units:
        q = next(i for i, x in enumerate(qs) if x.id == u.question)
        t = exp["think"]
        t["requests"] += 1
        t["prompt"] += len(prompts[q])
        if u.finished:                       # thinking, marker, own answer (+ the stop id)
            own = len(u.thinking) + len(fmt.end_ids) + len(u.answer)
            t["lo"] += own
            t["hi"] += own + 1
        else:                                # cut: the request ran on up to its own limit
            t["lo"] += len(u.thinking)
            t["hi"] += 40 + len(fmt.end_ids) + 6 + 1
        forced = not u.finished
        for k, Lk in enumerate(u.L):
            pr = exp["probe"]
            # two requests: the first answer (with log-probabilities) and the other P - 1
            pr["requests"] += 2
            pr["prompt"] += (P if greedy else 2) * len(fmt.probe_prompt(prompts[q], u.thinking, Lk))
            n = sum(len(a) for a in u.probe_tokens[k])
            pr["lo"] += n
            pr["hi"] += n + P
            s = exp["signal"]
            s["requests"] += 1
            s["prompt"] += len(fmt.signal_context(prompts[q], u.thinking, Lk))
            s["lo"] += 1
            s["hi"] += 1
            # the same signal in the model's own context (issue 28): prompt + thinking[:L]
            s["requests"] += 1
            s["prompt"] += len(prompts[q]) + Lk
            s["lo"] += 1
            s["hi"] += 1
        if forced:
            exp["probe"]["requests"] += 1
            exp["probe"]["prompt"] += len(fmt.answer_context(prompts[q], u.thinking, u.finished))
            exp["probe"]["lo"] += len(u.answer)
            exp["probe"]["hi"] += len(u.answer) + 1
    return exp


@pytest.mark.parametrize("kind", ["hf", "vllm"])
def test_cost_accounting_counts_every_request(kind, greedy_runs, hf_engine, setup):
    """Issue 26: the loop's cost counters equal a recount from the units; groups add up to phases."""
    from otbench.probe.stp import cost_record, cost_text
    from otbench.probe.stp._loop import PHASES

    if kind == "hf":
        units, stats = _probe(hf_engine, setup, GREEDY)
    else:
        units, stats = greedy_runs[1]
    exp = _expected_counts(units, setup, greedy=True)
    for p in PHASES:
        ph = getattr(stats, p)
        assert ph.requests == exp[p]["requests"], p
        assert ph.prompt_tokens == exp[p]["prompt"], p
        assert exp[p]["lo"] <= ph.generated <= exp[p]["hi"], p
        assert 0 <= ph.cached_prompt_tokens <= ph.prompt_tokens
        # the groups' cells add up to the phase
        for f in ("requests", "prompt_tokens", "generated", "cached_prompt_tokens"):
            assert sum(getattr(b[p], f) for b in stats.benchmarks.values()) == getattr(ph, f)
        assert sum(b[p].engine_seconds for b in stats.benchmarks.values()) == pytest.approx(ph.engine_seconds)
    # engine-seconds are shares of the stepping time: they sum to the busy seconds
    assert sum(getattr(stats, p).engine_seconds for p in PHASES) == pytest.approx(stats.busy_seconds, rel=1e-9)
    if kind == "hf":
        assert all(getattr(stats, p).cached_prompt_tokens == 0 for p in PHASES)     # no prefix cache
    else:
        # the probes share their trajectory's prompt and prefix: the cache served part of them
        assert stats.probe.cached_prompt_tokens > 0 and stats.signal.cached_prompt_tokens > 0
    rec = cost_record(stats, {"engine": kind, "device": "cpu"})
    assert rec["device"] == "cpu"
    for f in ("requests", "prompt_tokens", "decoded_tokens", "cached_prompt_tokens"):
        assert rec["total"][f] == sum(b["total"][f] for b in rec["benchmarks"].values())
        assert rec["total"][f] == sum(rec["phases"][p][f] for p in PHASES)
    text = cost_text(rec)
    assert text[0].startswith("cost on cpu") and len(text) == 2 + 4 * (len(rec["benchmarks"]) + 1)


@pytest.mark.parametrize("kind", ["hf", "vllm"])
def test_sample_j_uses_seed_plus_j(kind, hf_engine, vllm_engine, setup):
    engine = hf_engine if kind == "hf" else vllm_engine
    _, fmt, _, prompts = setup
    stops = fmt.think_stop_ids
    both = engine.generate([GenRequest(prompts[0], 2, 1000, 12, stops)], SAMPLED)[0]
    second = engine.generate([GenRequest(prompts[0], 1, 1001, 12, stops)], SAMPLED)[0][0]
    again = engine.generate([GenRequest(prompts[0], 2, 1000, 12, stops)], SAMPLED)[0]
    assert both[1] == second          # the documented convention (SPEC §3.1 seeds)
    assert both == again              # seeded sampling is reproducible
    assert both[0] != both[1]         # and the two samples differ (12 tokens over ~460 ids)


@pytest.mark.parametrize("kind", ["hf", "vllm"])
def test_top_k_one_is_greedy(kind, hf_engine, vllm_engine, setup):
    engine = hf_engine if kind == "hf" else vllm_engine
    _, fmt, _, prompts = setup
    r = GenRequest(prompts[1], 1, 7, 10, fmt.think_stop_ids)
    greedy = engine.generate([r], Sampling(0.0, 1.0, 0, 0.0))[0][0]
    topk1 = engine.generate([r], Sampling(1.0, 1.0, 1, 0.0))[0][0]
    assert greedy == topk1


@pytest.mark.parametrize("kind", ["hf", "vllm"])
def test_a_request_samples_by_its_own_sampling(kind, hf_engine, vllm_engine, setup):
    """`GenRequest.sampling` (a field method's own probe) overrides the call's and the stream's."""
    engine = hf_engine if kind == "hf" else vllm_engine
    _, fmt, _, prompts = setup
    greedy = Sampling(0.0, 1.0, 0, 0.0)
    r = GenRequest(prompts[1], 2, 7, 10, fmt.think_stop_ids)
    want = engine.generate([r], greedy)[0]
    assert engine.generate([r._replace(sampling=greedy)], SAMPLED)[0] == want
    assert engine.generate([r], SAMPLED)[0] != want           # the call's sampling, without it
    s = engine.stream(SAMPLED)
    s.submit("own", r._replace(sampling=greedy))
    out = {}
    while s.in_flight():
        out.update(s.poll())
    assert out["own"] == want


def test_sampled_runs_differ_but_are_valid(hf_engine, vllm_engine, setup):
    hf, _ = _probe(hf_engine, setup, SAMPLED)
    vl, _ = _probe(vllm_engine, setup, SAMPLED)
    # different random streams, same seeds: the same trajectory seed, position k's probe seed is the
    # same wherever both trajectories reach k; the answer has a seed of its own only when it was
    # forced (no thinking-end marker within the limit), else it came with the thinking
    for a, b in zip(hf, vl):
        assert a.seeds["think"] == b.seeds["think"]
        m = min(len(a.seeds["probe"]), len(b.seeds["probe"]))
        assert a.seeds["probe"][:m] == b.seeds["probe"][:m]
    for u in hf + vl:
        assert (u.seeds["answer"] is None) == u.finished
    assert [u.thinking for u in hf] != [u.thinking for u in vl]
    for u in hf + vl:
        assert u.L[0] == 0 and u.L[-1] == len(u.thinking)


class _Counting:
    """The engine, with a stream that records the engine sequences in flight at every submit."""

    def __init__(self, engine, capacity: int, block: int = 0):
        self._e, self.peak_probe, self.peak_think, self.order = engine, 0, 0, []
        self.peak_total = 0
        self._capacity = capacity
        self.block, self.peak_blocks = block, 0     # block > 0: KV blocks held, as vLLM counts them

    def capacity(self) -> int:
        return self._capacity

    def __getattr__(self, name):
        return getattr(self._e, name)

    def stream(self, sampling):
        inner, rec = self._e.stream(sampling), self
        live = {}

        class S(StreamBase):
            def submit(self, tag, req):
                live[tag] = (tag[1] == "t", req.n if isinstance(req, GenRequest) else 1)
                inner.submit(tag, req)
                if rec.block:
                    ctxs[tag] = (req.prompt, req.n, req.max_tokens) if isinstance(req, GenRequest) \
                        else (req.context, 1, 1)
                    rec.peak_blocks = max(rec.peak_blocks, _held_blocks(ctxs.values(), rec.block))
                think = sum(c for t, c in live.values() if t)
                rec.peak_think = max(rec.peak_think, think)
                rec.peak_probe = max(rec.peak_probe, sum(c for t, c in live.values() if not t))
                rec.peak_total = max(rec.peak_total, sum(c for _, c in live.values()))

            def in_flight(self):
                return inner.in_flight()

            def poll(self):
                done = inner.poll()
                for tag, _ in done:
                    live.pop(tag)
                    ctxs.pop(tag, None)
                return done
        ctxs = {}
        return S()


def _held_blocks(reqs, block: int) -> int:
    """KV blocks vLLM's block manager holds for requests just submitted (contexts, samples, max_tokens),
    each sample charged the probe's growth allowance: every distinct whole block of a context once
    (prefix caching), each sample's partial block and decoded tokens on their own."""
    from otbench.probe.stp._kv import GROWTH_TOKENS, blocks

    shared, own = set(), 0
    for ctx, n, cap in reqs:
        full = len(ctx) // block
        shared.update(tuple(ctx[:(i + 1) * block]) for i in range(full))
        own += n * (blocks(len(ctx) + min(cap, GROWTH_TOKENS), block) - full)
    return len(shared) + own


def test_requests_in_flight_are_bounded_in_engine_sequences_and_results_do_not_change(hf_engine, setup):
    from otbench.probe.stp._loop import stream_units

    tok, fmt, qs, prompts = setup
    units = [(0, 0), (0, 1), (1, 0), (1, 1)]
    free, _ = _probe(hf_engine, setup, SAMPLED, units=units)
    for capacity, think in ((2, 2), (64, 3)):
        eng = _Counting(hf_engine, capacity)
        got = list(stream_units(eng, fmt, model="tiny", questions=qs, prompts=prompts, units=units, P=2, b=8,
                                thinking_limit=40, answer_limit=6, sampling=SAMPLED,
                                grade_batch=resolve_grader("minimal")[1], tokenizer=tok,
                                max_in_flight=3, max_requests=4))
        # at most 3 units; an engine running its capacity: 2 of them sampling (half, rounded up); an
        # engine with room: all 3 (nothing else to run at the start). Probe-phase sequences below 4
        # before each position (P + 1 = 3 sequences) is submitted: at most 4 - 1 + 3
        assert eng.peak_think == think and 3 <= eng.peak_probe <= 6
        by = {(u.question, u.trajectory): u for u in got}
        assert [by[qs[q].id, r] for q, r in units] == free


def test_kv_admission_keeps_what_vllm_holds_within_the_cache_and_results_do_not_change(hf_engine, setup):
    """`kv_cache` (the engine's KV tokens and block size, `_kv.KVLedger`): the blocks vLLM's block manager
    would hold for everything in flight, counted by brute force over the contexts, never exceed the
    cache once more than one position's group fits, however large the other bounds; the units come
    out the same."""
    from otbench.probe.stp._loop import stream_units

    tok, fmt, qs, prompts = setup
    units = [(0, 0), (0, 1), (1, 0), (1, 1)]
    free, _ = _probe(hf_engine, setup, SAMPLED, units=units)
    block, peaks = 8, {}
    for cache in (None, 40, 60):                 # blocks: a few positions' groups at a time
        eng = _Counting(hf_engine, 64, block)
        got = list(stream_units(eng, fmt, model="tiny", questions=qs, prompts=prompts, units=units, P=2, b=8,
                                thinking_limit=40, answer_limit=6, sampling=SAMPLED,
                                grade_batch=resolve_grader("minimal")[1], tokenizer=tok, max_in_flight=4,
                                max_requests=64, kv_cache=None if cache is None else (cache * block, block)))
        peaks[cache] = eng.peak_blocks
        assert eng.peak_probe >= 3
        by = {(u.question, u.trajectory): u for u in got}
        assert [by[qs[q].id, r] for q, r in units] == free
    # without admission the work in flight needs more than either cache: the bound is what held it
    assert peaks[None] > 60 and 0 < peaks[40] <= 40 and 0 < peaks[60] <= 60


def test_trajectories_being_sampled_never_outgrow_the_cache_at_full_length(hf_engine, setup):
    """A think request grows far past the ledger's room; the trajectories in flight, each at prompt +
    its decode limit, fit in the cache alone (`_Driver.fits_think`), and a run still moves."""
    from otbench.probe.stp._kv import blocks
    from otbench.probe.stp._loop import stream_units

    tok, fmt, qs, prompts = setup
    units = [(q, r) for q in range(len(qs)) for r in range(3)]
    block = 8
    limit = 40 + (len(fmt.end_ids) + 6 if fmt.family.native_thinking else 0)    # what a think request decodes
    full = blocks(max(map(len, prompts)) + limit, block)
    peak = {}
    for fit in (None, 1, 3):
        eng = _Counting(hf_engine, 64)
        got = list(stream_units(eng, fmt, model="tiny", questions=qs, prompts=prompts, units=units, P=2, b=8,
                                thinking_limit=40, answer_limit=6, sampling=SAMPLED,
                                grade_batch=resolve_grader("minimal")[1], tokenizer=tok, max_in_flight=8,
                                max_requests=64,
                                kv_cache=None if fit is None else (fit * full * block + block - 1, block)))
        assert len(got) == len(units)
        peak[fit] = eng.peak_think
    assert peak[None] > 3 and peak[1] == 1 and 1 <= peak[3] <= 3


def test_a_lagging_grader_pauses_the_probes_instead_of_piling_up_answers(hf_engine, setup, monkeypatch):
    import threading
    import time

    from otbench.probe.stp import _loop

    tok, fmt, qs, prompts = setup
    seen, lock, state = [], threading.Lock(), {"started": set(), "graded": 0}
    submit = _loop._Driver._submit_position

    def spy(self, key, k):
        with lock:
            state["started"].add(key)
            seen.append(len(state["started"]) - state["graded"])
        submit(self, key, k)

    def slow(items):
        time.sleep(0.3)
        with lock:
            state["graded"] += 1
        return resolve_grader("minimal")[1](items)
    monkeypatch.setattr(_loop._Driver, "_submit_position", spy)
    units = [(q, r) for q in range(2) for r in range(4)]
    got = list(_loop.stream_units(hf_engine, fmt, model="tiny", questions=qs, prompts=prompts, units=units,
                                  P=2, b=8, thinking_limit=40, answer_limit=6, sampling=SAMPLED,
                                  grade_batch=slow, tokenizer=tok, max_in_flight=8))
    assert len(got) == 8
    # units between their first probe and their grade: at most holding_bound(8) = 4 at any time
    assert max(seen) <= 4 and max(seen) >= 2


def test_a_think_request_that_never_closes_its_thinking_stops_at_the_limit(vllm_engine, hf_engine, setup):
    """`GenRequest.cut` (issue 25, item 8): vLLM's stream ends a request whose first limit + len(marker) - 1
    tokens hold no marker start before `limit`, instead of decoding its whole answer budget; one whose
    marker starts in time runs on; the tokens up to the limit are the same either way."""
    from otbench.probe.stp._loop import stream_units

    tok, fmt, qs, prompts = setup
    prompt = list(prompts[0])

    def run(cut):
        s = vllm_engine.stream(SAMPLED)
        s.submit("t", GenRequest(prompt, 1, 11, 120, (), ignore_eos=True, cut=cut))
        done = []
        while s.in_flight():
            done += s.poll()
        assert s.sequences_in_flight() == 0 and not s._cuts
        return done[0][1][0]

    full = run(None)
    assert len(full.token_ids) == 120
    absent = next(t for t in range(100, vllm_engine.vocab_size()) if t not in full.token_ids)
    cut = run((20, (absent, absent)))
    # looked at from the step it can hold 21 tokens; aborted there (a step or two of slack)
    assert 21 <= len(cut.token_ids) <= 24 and cut.stop_id is None
    assert cut.token_ids == full.token_ids[:len(cut.token_ids)]
    on = run((20, tuple(full.token_ids[10:12])))            # the marker starts at 10 at the latest
    assert on == full

    # the probe loop asks it of every think request of a native thinking family (marker: the family's)
    seen = []

    class Spy(_Counting):
        def stream(self, sampling):
            inner = self._e.stream(sampling)

            class S(StreamBase):
                def submit(self, tag, req):
                    seen.append(req)
                    inner.submit(tag, req)

                def in_flight(self):
                    return inner.in_flight()

                def poll(self):
                    return inner.poll()
            return S()
    list(stream_units(Spy(hf_engine, 64), fmt, model="tiny", questions=qs, prompts=prompts, units=[(0, 0)],
                      P=2, b=8, thinking_limit=40, answer_limit=6, sampling=SAMPLED,
                      grade_batch=resolve_grader("minimal")[1], tokenizer=tok))
    think = [r for r in seen if isinstance(r, GenRequest) and r.cut is not None]
    assert len(think) == 1 and think[0].cut == (40, tuple(fmt.end_ids)) and think[0].max_tokens == 40 + \
        len(fmt.end_ids) + 6
    assert all(r.cut is None for r in seen if isinstance(r, GenRequest) and r is not think[0])


@pytest.mark.parametrize("stream", [False, True])
def test_top_logprob_means_agree_across_engines(stream, vllm_engine, hf_engine, setup):
    """`GenRequest.top_logprobs` (DeepConf's signal, issue 42): vLLM's per-token mean of its top 20
    raw log-probabilities (`logprobs=20`, flat form) is the transformers engine's, token for token;
    asking for it changes no sampled token; a `cut` request ended by the stream keeps them too."""
    _, fmt, _, prompts = setup
    prompt = list(prompts[0])
    req = GenRequest(prompt, 1, 5, 30, (), ignore_eos=True, top_logprobs=20)
    hf = hf_engine.generate([req], GREEDY)[0][0]
    if stream:
        absent = next(t for t in range(100, vllm_engine.vocab_size()) if t not in hf.token_ids)
        s = vllm_engine.stream(GREEDY)
        s.submit("t", req._replace(max_tokens=60, cut=(20, (absent, absent))))
        done = []
        while s.in_flight():
            done += s.poll()
        vl = done[0][1][0]
        assert 21 <= len(vl.token_ids) <= 24 and vl.stop_id is None     # ended by the stream
    else:
        vl = vllm_engine.generate([req], GREEDY)[0][0]
        plain = vllm_engine.generate([req._replace(top_logprobs=0)], GREEDY)[0][0]
        assert plain.token_ids == vl.token_ids and plain.top_mean is None
    n = len(vl.token_ids)
    assert vl.token_ids == hf.token_ids[:n] and len(vl.top_mean) == n
    np.testing.assert_allclose(vl.top_mean, hf.top_mean[:n], atol=1e-3)


def test_prompt_top_means_agree_and_survive_a_signal_read_in_the_same_step(vllm_engine, hf_engine, setup):
    """`GenRequest.prompt_top_logprobs` (the probe's DeepConf confidence request): vLLM's prompt
    top-20 means equal the transformers engine's, also when a signal read (`logprob_token_ids`) runs
    in the same steps -- which makes vLLM 0.32 drop a decode request's top-k (`top_logprobs`), and
    the engine then says so instead of returning wrong means."""
    from otbench.probe.engines import SignalRequest
    from otbench.probe.stp._field_probes import confidence_request

    _, fmt, _, prompts = setup
    ids = list(prompts[0]) + list(range(200, 240))
    req = confidence_request(prompts[0], range(200, 240))
    hf_c = hf_engine.generate([req], GREEDY)[0][0]
    hf = hf_c.prompt_top_mean
    assert len(hf) == len(ids) - 1
    s = vllm_engine.stream(GREEDY)
    s.submit("c", req)
    s.submit("s", SignalRequest(ids, fmt.signal_id))
    s.submit("t", GenRequest(ids, 1, 0, 8, (), ignore_eos=True, top_logprobs=20))
    done, errors = {}, []
    while s.in_flight():
        try:
            done.update(dict(s.poll()))
        except RuntimeError as e:            # the decode request's top-k, replaced by vLLM
            errors.append(str(e))
            break
    np.testing.assert_allclose(done["c"][0].prompt_top_mean, hf, atol=1e-3)
    # DeepConf's warm-up reads the mean of every value vLLM returns (the token's own and the top 20,
    # counted once, `_vllm_logprobs._returned_means`): the transformers engine's twin of it
    np.testing.assert_allclose(done["c"][0].prompt_returned_mean, hf_c.prompt_returned_mean, atol=1e-3)
    assert not errors or "logprob_token_ids" in errors[0]


def test_prompt_top_means_do_not_depend_on_order_or_on_the_prefix_cache(vllm_engine, setup):
    """The DeepConf confidence request asks for prompt log-probabilities, for which vLLM 0.32 skips
    reading its prefix cache (`sampling_params.py` lines 622-629: `skip_reading_prefix_cache` is set
    whenever `prompt_logprobs` is), so a trajectory's values are those of its own full prefill: the
    same in either submission order and after its prefix was cached by another request. That prefill
    is what `otbench plan` charges per trajectory of a job listing ``deepconf``."""
    from otbench.probe.stp._field_probes import confidence_request

    _, _, _, prompts = setup
    base = list(prompts[0])
    reqs = [confidence_request(base, list(range(200 + 7 * i, 236 + 7 * i))) for i in range(3)]

    def run(order):
        s = vllm_engine.stream(GREEDY)
        for i in order:
            s.submit(i, reqs[i])
        done = {}
        while s.in_flight():
            done.update(dict(s.poll()))
        return {i: np.asarray(done[i][0].prompt_top_mean) for i in order}

    cold = run([0, 1, 2])
    # the shared prefix and the first trajectory's whole context now in the cache, by plain decodes
    vllm_engine.generate([GenRequest(list(reqs[0].prompt), 1, 0, 2, (), ignore_eos=True)], GREEDY)
    warm = run([2, 1, 0])
    for i in range(3):
        assert cold[i].shape == warm[i].shape == (len(reqs[i].prompt) - 1,)
        np.testing.assert_allclose(warm[i], cold[i], atol=1e-4, rtol=0)


def test_thinkbrake_and_deepconf_field_probes_agree_across_engines(vllm_engine, hf_engine, setup):
    """ThinkBrake's two forks and DeepConf's warm-up value on vLLM equal the transformers engine's
    (greedy, so fork 0 samples the same token; a given trajectory with '.\\n\\n' boundaries)."""
    from otbench.probe.stp._loop import ThinkResult

    tok, fmt, qs, prompts = setup
    thinking = tuple(int(t) for t in tok.encode("we add the digits.\n\nso the sum is four\n\nwe check it.\n\nthen",
                                                 add_special_tokens=False))
    given = {(0, 0): ThinkResult(5, thinking, True, fmt.end_ids[0], (7, 8), answer_stop=fmt.answer_stop_ids[0])}
    got = []
    for engine in (hf_engine, vllm_engine):
        got.append(probe_units(engine, fmt, model="tiny", questions=qs, prompts=prompts, units=[(0, 0)], P=2,
                               b=1, thinking_limit=200, answer_limit=6, sampling=GREEDY,
                               grade_batch=resolve_grader("minimal")[1], tokenizer=tok, given=given,
                               field_probes=("thinkbrake", "deepconf"))[0])
    hf, vl = got
    assert hf.thinkbrake_check == vl.thinkbrake_check and sum(hf.thinkbrake_check) >= 2
    np.testing.assert_allclose(hf.thinkbrake_margin, vl.thinkbrake_margin, atol=1e-3)
    np.testing.assert_allclose(hf.deepconf_warmup_conf, vl.deepconf_warmup_conf, atol=2e-3)
    assert hf.deepconf_warmup_conf[0] > 0
