"""Where per-step control cannot work, the controller refuses in one line (vLLM imported, no engine)."""

import types

import pytest

from otbench.probe.online import OnlineControlError, request_args

vllm = pytest.importorskip("vllm")
torch = pytest.importorskip("torch")


def _processor():
    from otbench.probe.online import ExitProcessor

    return ExitProcessor


def test_speculative_decoding_is_refused_by_the_processor_and_by_vllm():
    from vllm.v1.sample.logits_processor import build_logitsprocs

    Exit = _processor()
    cfg = types.SimpleNamespace(speculative_config={"method": "ngram", "num_speculative_tokens": 3},
                                model_config=None)
    with pytest.raises(OnlineControlError) as e:
        Exit(cfg, torch.device("cpu"), False)
    assert "speculative" in str(e.value) and "\n" not in str(e.value)
    # vLLM itself (this version) refuses custom processors before building them.
    with pytest.raises(ValueError, match="speculative"):
        build_logitsprocs(cfg, torch.device("cpu"), False, False, [Exit])


def test_requests_that_change_the_logits_are_refused():
    from vllm import SamplingParams

    Exit = _processor()
    args = request_args("thinkbrake-onectx", 0.5, "generic-chat", boundary="vocab+span")
    Exit.validate_params(SamplingParams(max_tokens=4, extra_args=args))
    Exit.validate_params(SamplingParams(max_tokens=4))          # no control asked: nothing to check
    for kw in ({"min_tokens": 2}, {"logit_bias": {3: 1.0}}, {"allowed_token_ids": [1, 2]}):
        with pytest.raises(OnlineControlError) as e:
            Exit.validate_params(SamplingParams(max_tokens=4, extra_args=args, **kw))
        assert "\n" not in str(e.value)
    with pytest.raises(OnlineControlError, match="otbench_family"):
        Exit.validate_params(SamplingParams(max_tokens=4, extra_args={**args, "otbench_family": "no-such"}))
