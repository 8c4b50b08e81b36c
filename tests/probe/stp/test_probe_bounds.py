"""In-flight bounds and their host-memory model (probe/stp/_bounds.py, _setup)."""

import types

import pytest
from otbench.probe.engines import EngineBase
from otbench.probe.stp import _bounds
from otbench.probe.stp._setup import memory_line, requests_in_flight, units_in_flight


def _job(**kw):
    base = dict(units_in_flight=None, requests_in_flight=None, units_per_batch=16, thinking_limit=8192,
                answer_limit=1400, P=16, b=320)
    return types.SimpleNamespace(**{**base, **kw})


class _Engine(EngineBase):
    def __init__(self, cap):
        self.cap = cap

    def capacity(self):
        return self.cap


def test_defaults_are_sized_to_the_engine_and_the_job_wins():
    h200 = _Engine(1024)
    assert units_in_flight(_job(), h200) == 256 and requests_in_flight(_job(), h200) == 2048
    assert _bounds.thinking_bound(256) == 128 and _bounds.thinking_bound(1) == 1
    assert units_in_flight(_job(units_in_flight=7), h200) == 7
    assert requests_in_flight(_job(requests_in_flight=9), h200) == 9
    no_cap = EngineBase()          # an engine that cannot say its capacity
    assert units_in_flight(_job(), no_cap) == 16
    assert requests_in_flight(_job(), no_cap) == 2 * _bounds.FALLBACK_CAPACITY


def test_host_memory_twin_by_hand():
    m = _bounds.host_memory(units=4, requests=10, prompt_tokens=100, thinking_limit=64, answer_limit=8, P=3, b=16)
    longest, positions, think = 100 + 64 + 16, 64 // 16 + 2, 64 + 8 + 16
    per_prompt = _bounds.CORE_BYTES_PER_ID + _bounds.FRONT_BYTES_PER_ID
    assert m.probe_prompts == 10 * longest * (per_prompt + _bounds.FRONT_BYTES_PER_ID)
    assert m.probe_generated == 2 * 10 * 8 * _bounds.GENERATED_BYTES_PER_ID
    assert m.think_requests == 4 * (100 * per_prompt + think * _bounds.GENERATED_BYTES_PER_ID)
    assert _bounds.holding_bound(4) == 4 and _bounds.holding_bound(256) == 32
    assert m.units == 4 * think * _bounds.HELD_BYTES_PER_ID + 4 * positions * 3 * 8 * _bounds.ANSWER_BYTES_PER_ID
    # the front end's log-probabilities of the probes' answers, and the engine's pinned buffer
    assert m.probe_logprobs == 2 * 10 * 8 * _bounds.LOGPROB_BYTES_PER_ID and m.pinned == 256 << 20
    assert m.total == m.probe_prompts + m.probe_generated + m.think_requests + m.units + m.probe_logprobs \
        + m.pinned


def test_default_bound_on_an_h200_node_fits_its_host_memory():
    # paper shape: 6,000-token prompts, thinking_limit 8,192, b = 320, P = 16, 1,400-token answers
    line = memory_line(_job(), _Engine(1024), [[1] * 6000])
    assert line.startswith("in flight per engine: 256 units (128 sampling their trajectory while the engine "
                           "is full), 2048 probe-phase")
    m = _bounds.host_memory(units=256, requests=2048, prompt_tokens=6000, thinking_limit=8192,
                            answer_limit=1400, P=16, b=320)
    assert 8 * m.total < 64 << 30           # eight engines: well under a 1-2 TiB node
    assert f"~{m.total / (1 << 30):.1f} GiB" in line and "their log-probabilities 1.0" in line
    assert m.probe_logprobs == 2 * 2048 * 1400 * 192


class _KVEngine(_Engine):
    """An engine that reports its KV cache in tokens, as `VLLMEngine.kv_cache_tokens` does once started."""

    def __init__(self, cap, kv_tokens):
        super().__init__(cap)
        self.kv_tokens = kv_tokens

    def kv_cache_tokens(self):
        return self.kv_tokens


def test_the_kv_cache_bounds_every_phase_and_the_scheduler_sizes_the_rest():
    from otbench.probe.stp._setup import kv_cache

    # an engine that reports its cache: the driver admits by it (tokens, vLLM's GPU block size when the
    # engine reports none); the unit and request bounds follow the scheduler's batch alone
    h200 = _KVEngine(1024, 5_384_759)
    prompts = [[1] * 6000, [1] * 200]
    assert kv_cache(_job(), h200) == (5_384_759, 16)
    assert units_in_flight(_job(), h200, prompts) == 256 and requests_in_flight(_job(), h200, prompts) == 2048
    line = memory_line(_job(), h200, prompts)
    assert "every phase while it fits in the KV cache of 5,384,759 tokens in 16-token blocks" in line
    h200.kv_block_size = lambda: 128
    assert kv_cache(_job(), h200) == (5_384_759, 128)
    # the job's own number wins (it may overcommit knowingly); no report: no KV admission
    assert kv_cache(_job(requests_in_flight=2048), h200) is None
    assert kv_cache(_job(), _Engine(1024)) is None


def test_vllm_engine_reads_the_kv_capacity_its_core_reported():
    """`VLLMEngine.kv_cache_tokens` reads the front end's `cache_config` as vLLM 0.32 fills it."""
    from otbench.probe.engines._vllm import VLLMEngine

    e = VLLMEngine.__new__(VLLMEngine)

    def with_cache(**cc):
        e._llm = types.SimpleNamespace(llm_engine=types.SimpleNamespace(
            vllm_config=types.SimpleNamespace(cache_config=types.SimpleNamespace(**cc))))
        return e.kv_cache_tokens()

    assert with_cache(kv_cache_size_tokens=5_384_759, num_gpu_blocks=1, block_size=16) == 5_384_759
    assert with_cache(kv_cache_size_tokens=None, num_gpu_blocks=20_000, block_size=16) == 320_000
    assert with_cache(kv_cache_size_tokens=None, num_gpu_blocks=None, block_size=16) is None


def test_the_logprob_figure_is_what_vllm_s_flat_form_costs():
    """`LOGPROB_BYTES_PER_ID` against vLLM's own `FlatLogprobs`, filled as its front end fills it."""
    import random
    import tracemalloc

    logprobs = pytest.importorskip("vllm.logprobs")
    rng, n = random.Random(0), 50_000
    ids = [rng.randrange(1000, 150_000) for _ in range(n)]
    tracemalloc.start()
    flat = logprobs.FlatLogprobs()
    for t in ids:
        flat.append_fast([int(str(t))], [-rng.random()], iter([int(str(rng.randrange(2, 5000)))]), [None])
    per = tracemalloc.get_traced_memory()[0] / n
    tracemalloc.stop()
    assert len(flat) == n and 0.7 * _bounds.LOGPROB_BYTES_PER_ID < per <= 1.1 * _bounds.LOGPROB_BYTES_PER_ID
