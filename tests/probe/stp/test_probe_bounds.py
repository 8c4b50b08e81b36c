"""In-flight bounds and their host-memory model (probe/stp/_bounds.py, _setup)."""

import types

from otbench.probe.engines import EngineBase
from otbench.probe.stp import _bounds
from otbench.probe.stp._setup import memory_line, requests_in_flight, units_in_flight


def _job(**kw):
    base = dict(units_in_flight=None, requests_in_flight=None, units_per_batch=16, thinking_limit=8192,
                answer_limit=1400, P=16, b=320)
    return types.SimpleNamespace(**{**base, **kw})


class _Engine:
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
    assert m.total == m.probe_prompts + m.probe_generated + m.think_requests + m.units


def test_default_bound_on_an_h200_node_fits_its_host_memory():
    # paper shape: 6,000-token prompts, thinking_limit 8,192, b = 320, P = 16, 1,400-token answers
    line = memory_line(_job(), _Engine(1024), [[1] * 6000])
    assert line.startswith("in flight per engine: 256 units (128 sampling their trajectory while the engine "
                           "is full), 2048 probe-phase")
    m = _bounds.host_memory(units=256, requests=2048, prompt_tokens=6000, thinking_limit=8192,
                            answer_limit=1400, P=16, b=320)
    assert 8 * m.total < 64 << 30           # eight engines: well under a 1-2 TiB node
    assert f"~{m.total / (1 << 30):.1f} GiB" in line
