"""The sampling requests the probe sends vLLM, checked against vLLM 0.32's own objects (issue 25, item 9).

What these requests rely on in Model Runner V2's sampler is restated in the
comment above `_EXCLUDE_BIAS` in `probe/engines/_vllm.py`; the parts that run
on this machine (vLLM's `SamplingParams` and its front end's fan-out of n
samples) are checked here on the installed vLLM, the GPU-only parts by the
arguments that reach them.
"""

import types

import numpy as np
import pytest

vllm = pytest.importorskip("vllm")

from otbench.probe.config import Sampling  # noqa: E402
from otbench.probe.engines import GenRequest  # noqa: E402
from otbench.probe.engines import _vllm  # noqa: E402
from otbench.probe.engines._interface import EngineConfig  # noqa: E402


class _Core:
    def __init__(self):
        self.added = []

    def add_request(self, rid, prompt, params):
        self.added.append((rid, prompt, params))


def _engine():
    e = object.__new__(_vllm.VLLMEngine)
    e._SamplingParams, e._TokensPrompt = vllm.SamplingParams, vllm.inputs.TokensPrompt
    e._llm = types.SimpleNamespace(llm_engine=_Core())
    return e


def test_signal_request_is_greedy_one_token_biased_away_with_its_logprob_asked():
    sp = _engine()._signal_params(7)
    assert isinstance(sp, vllm.SamplingParams)
    assert (sp.n, sp.max_tokens, sp.temperature) == (1, 1, 0.0)
    assert sp.logit_bias == {7: -1.0e9} and sp.logprob_token_ids == [7]
    assert sp.detokenize is False
    # finite in FP32 (the copy the bias is added to), and below any real logit
    assert np.isfinite(np.float32(_vllm._EXCLUDE_BIAS)) and np.float32(_vllm._EXCLUDE_BIAS) + 50 < -1e8


def test_engine_asks_for_raw_logprobs_explicitly():
    kw = _vllm.engine_kwargs(EngineConfig(kind="vllm", model="m", max_model_len=4096), "cuda")
    assert kw["logprobs_mode"] == "raw_logprobs" == _vllm.LOGPROBS_MODE
    from vllm.config.model import LogprobsMode
    assert "raw_logprobs" in LogprobsMode.__args__     # a mode this vLLM knows


def test_samples_of_a_request_get_seed_plus_j_from_vllms_own_fan_out():
    from vllm.v1.engine.parallel_sampling import ParentRequest

    sp = vllm.SamplingParams(n=3, seed=1000, max_tokens=4)
    parent = ParentRequest(types.SimpleNamespace(request_id="r", external_req_id="r", params=sp))
    seeds = [parent.get_child_info(j)[1].seed for j in range(3)]
    assert seeds == [1000, 1001, 1002]                 # otbench's "sample j uses seed + j"


def test_greedy_requests_of_n_samples_are_sent_as_n_seeded_single_samples():
    e = _engine()
    greedy = Sampling(temperature=0.0, top_p=1.0, top_k=0, presence_penalty=0.0)
    st = _vllm.VLLMStream.__new__(_vllm.VLLMStream)
    st._e, st._sampling, st._final = e, greedy, vllm.sampling_params.RequestOutputKind.FINAL_ONLY
    st._core, st._ids, st._live, st._parts, st._rids = e._llm.llm_engine, 0, {}, {}, {}
    st.submit("t", GenRequest((1, 2, 3), 3, 50, 8, (9,)))
    params = [p for _, _, p in e._llm.llm_engine.added]
    assert [(p.n, p.seed, p.temperature) for p in params] == [(1, 50, 0.0), (1, 51, 0.0), (1, 52, 0.0)]
    assert all(p.output_kind == vllm.sampling_params.RequestOutputKind.FINAL_ONLY for p in params)
    assert all(p.stop_token_ids == [9] and p.max_tokens == 8 for p in params)
    # sampled requests keep n (vLLM fans them out itself, seeds seed + j as above)
    sampled = Sampling(temperature=0.6, top_p=0.95, top_k=20, presence_penalty=1.5)
    p = e._params(sampled, GenRequest((1,), 16, 77, 8, (9,)))
    assert (p.n, p.seed, p.temperature, p.top_k, p.presence_penalty) == (16, 77, 0.6, 20, 1.5)


def test_the_stream_passes_a_list_of_python_ints_as_is_and_converts_anything_else():
    e = _engine()
    st = _vllm.VLLMStream(e, Sampling(0.6, 0.95, 20, 0.0))
    pure = [5, 6, 7]
    st.submit("a", GenRequest(pure, 1, 3, 4, ()))
    st.submit("b", GenRequest((5, 6, 7), 1, 3, 4, ()))
    st.submit("c", GenRequest(list(np.array([5, 6, 7])), 1, 3, 4, ()))     # NumPy ints in a list
    st.submit("d", GenRequest(np.array([5, 6, 7]), 1, 3, 4, ()))
    got = [p["prompt_token_ids"] for _, p, _ in e._llm.llm_engine.added]
    assert got[0] is pure                                  # no per-id copy of the probe's own lists
    for ids in got:
        assert ids == [5, 6, 7] and type(ids) is list and all(type(t) is int for t in ids)
